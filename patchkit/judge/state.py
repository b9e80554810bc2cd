"""Combine hunk states into file and patch verdicts: the one module that decides what state a tree is in.

A file section is judged on a snapshot of the tree (never on excluded files: they are not in the hunk set).
matching.read_file lists the readings of the file's content that the location rule allows (docs/judgement.md);
this module picks the one reading that holds, or says why none does. A verdict is reported only after it passed
a round trip in memory: `unapplied` means that applying gives content that reads `applied` and that reverting
that gives back exactly the bytes judged (and the mirror for `applied`; for `partial`, completing in either
direction gives such content). A reading that fails is reported as ambiguous, with the hunk and the reason.

Whole-file facts (created, deleted, renamed, mode) are units of their own. All applied -> applied; all
unapplied -> unapplied; only those two -> partial; any conflict -> conflict; otherwise any undecidable hunk ->
ambiguous. Sections that touch the same path (a file touched twice in one diff, stacked patches of a series)
are judged as a chain: each on the content the sections before it leave, and the chain as a whole passes the
same round trip, through the very replay that plan.py writes from.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import NamedTuple

from patchkit.diff.hunks import MODE_FILE, FileOp, FilePatch, Hunk, paths_of
from patchkit.diff.hunkset import HunkSet
from patchkit.input.tree import Root, Snapshot, read_all
from patchkit.judge.matching import (
    MAX_READINGS,
    FileLines,
    Located,
    Place,
    Reading,
    image_name,
    locate,
    possible_places,
    read_file,
    simulate_git,
)
from patchkit.judge.rewrite import moved_positions, rewrite_lines, rewrite_section
from patchkit.judge.treestate import TreeState
from patchkit.judge.verdicts import Ends, FileVerdict, HunkVerdict, Moved
from patchkit.outcome import HunkState, PatchState, combine

__all__ = [
    "FileVerdict",
    "HunkVerdict",
    "Undecided",
    "judge_planned",
    "judge_section",
    "judge_sections",
    "replay_sections",
    "scan_tree",
]

def scan_tree(root: Root, hunk_set: HunkSet) -> TreeState:
    """Read every path of the filtered hunk set once and judge each section."""
    snapshots = read_all(root, paths_of(hunk_set.files))
    verdicts = judge_sections(hunk_set.files, snapshots)
    return TreeState(root.path, hunk_set, tuple(verdicts), snapshots)


def judge_sections(sections: Sequence[FilePatch], snapshots: Mapping[str, Snapshot]) -> list[FileVerdict]:
    """Judge sections in order; chains of sections sharing a path are judged as one stack (_judge_chain)."""
    verdicts: dict[int, FileVerdict] = {}
    for chain in _chains(sections):
        if len(chain) == 1:
            verdicts[chain[0]] = judge_section(sections[chain[0]], snapshots)
        else:
            members = [sections[i] for i in chain]
            judged = _verify_chain(members, snapshots, _judge_chain(members, snapshots))
            verdicts.update(zip(chain, judged, strict=True))
    return [verdicts[i] for i in range(len(sections))]


def judge_planned(sections: Sequence[FilePatch], verdicts: Sequence[FileVerdict], after: Mapping[str, Snapshot],
                  *, forward: bool) -> list[FileVerdict]:
    """judge_sections(sections, after) on `after`, the tree replay_sections(verdicts, ..., forward) left: the
    same verdicts, without judging again what the round trips already judged.

    A section alone on its paths (no other section touches them) was rewritten by replay_sections from its
    own verdict, so `after` holds exactly the content that verdict's round trip moved its file to and judged
    (FileVerdict.moved); that reading is the judgement, once the round trip's way back is checked too
    (_moved_reading). A section that moved nothing left the very bytes its verdict judged. Chains, and anything
    the checks cannot vouch for, are judged from scratch; so is every section when `verdicts` are not the
    sections' own, one each in order (a tree state made by hand: replay_sections wrote what they say).
    """
    if len(verdicts) != len(sections) or any(v.section is not s for v, s in zip(verdicts, sections, strict=True)):
        return judge_sections(sections, after)
    out: dict[int, FileVerdict] = {}
    for chain in _chains(sections):
        verdict = verdicts[chain[0]]
        if len(chain) > 1:
            out.update(zip(chain, judge_sections([sections[i] for i in chain], after), strict=True))
        elif all(after[p] is verdict.judged_on.get(p) for p in verdict.section.paths):
            out[chain[0]] = verdict  # nothing moved: the same snapshots, judged already
        else:
            out[chain[0]] = judge_section(verdict.section, after, _moved_reading(verdict, forward))
    return [out[i] for i in range(len(sections))]


def _line_count(data: bytes) -> int:
    """How many lines split_lines makes of `data` (the last may lack its LF), without splitting it."""
    return data.count(b"\n") + (bool(data) and not data.endswith(b"\n"))


class Known(NamedTuple):
    """What _judge_lines gives on some content, known without running it: the content's reading and line
    count, and what its round trip would find at each end."""

    content: Moved
    moved: Ends


def _moved_reading(verdict: FileVerdict, forward: bool) -> Known | None:
    """What _judge_lines would give the content rewrite_section(verdict, forward) writes, or None.

    The round trip of that judgement decided the moved content (`moved`) and checked that moving it back
    gives the content it came from. _judge_lines on the moved content decides the same reading and runs the
    same round trip from the other end: moving back gives that content again, whose reading the judgement
    also has (the verdict's own for a pure reading; for a partial one, the round trip's other end). Left to
    check: that reading is all of the other state, exactly where the moved positions put it. The moved
    content's reading is pure, so its own round trip moves it one way only, back.
    """
    if verdict.section.op in (FileOp.CREATE, FileOp.DELETE):
        return None
    own = Reading(tuple(hv.located for hv in verdict.hunks), tuple(hv.expected for hv in verdict.hunks))
    moving = HunkState.UNAPPLIED if forward else HunkState.APPLIED  # the state of the hunks this direction moves
    if moving not in own.states:
        # No hunk moves (only the mode or the name may): the content is the one judged, and so its reading.
        source = verdict.source_path
        data = verdict.judged_on[source].data if source is not None else None
        if data is None:
            return None
        return Known(Moved(own, _line_count(data)), verdict.moved)
    moved = verdict.moved[forward]
    if moved is None:
        return None
    back = verdict.moved[not forward]
    back_reading = own if back is None else back.reading
    hunks = [hv.hunk for hv in verdict.hunks]
    if set(back_reading.states) - {moving} or back_reading.positions != moved_positions(
        hunks, moved.reading.located, forward=not forward
    ):
        return None
    growth = sum(len(h.new_lines) - len(h.old_lines) for h in hunks)
    back_moved = Moved(back_reading, moved.lines - growth if forward else moved.lines + growth)
    return Known(moved, (back_moved, None) if forward else (None, back_moved))


# ------------------------------------------------------------------------------------------ replay (plan)


class Undecided(NamedTuple):  # immutable and compared by value, ~5x cheaper to create than a frozen dataclass
    """Why a replay stopped: a section whose state lets nothing be written."""

    where: str
    message: str


def replay_sections(
    verdicts: Sequence[FileVerdict], snapshots: Mapping[str, Snapshot], *, forward: bool
) -> tuple[dict[str, Snapshot], Undecided | None]:
    """The tree (an overlay of `snapshots`) after moving every section forward or back: what a plan writes.

    Sections run in order (backwards for a revert); one whose file an earlier one changed is judged again on
    the content that one left.
    """
    overlay = dict(snapshots)
    touched: set[str] = set()
    indexes = range(len(verdicts))
    for i in indexes if forward else reversed(indexes):
        verdict = verdicts[i]
        if touched.intersection(verdict.section.paths):
            verdict = judge_section(verdict.section, overlay)
        problem = _undecided(verdict)
        if problem is not None:
            return overlay, problem
        updates = rewrite_section(verdict, forward=forward)
        overlay.update(updates)
        touched.update(updates)
    return overlay, None


def _undecided(verdict: FileVerdict) -> Undecided | None:
    """Why nothing can be written from `verdict` (a hunk or the file conflicted or ambiguous), or None."""
    where = verdict.section.path
    for hv in verdict.hunks:
        if hv.state in (HunkState.CONFLICT, HunkState.AMBIGUOUS):
            return Undecided(where, f"hunk {hv.hunk.index} {hv.hunk.header} is {hv.state.value}: {hv.located.detail}")
    if verdict.state in (PatchState.CONFLICT, PatchState.AMBIGUOUS):
        return Undecided(where, f"{verdict.state.value}: {verdict.detail}")
    return None


# ------------------------------------------------------------------------------------------------- chains


def _judge_chain(chain: Sequence[FilePatch], snapshots: Mapping[str, Snapshot]) -> list[FileVerdict]:
    """Sections that touch the same file, in order: find the reading "the first j are applied, the rest not".

    Each candidate j is checked for real: the first j sections, peeled off the tree from the last one back,
    must each read as applied, and the others, applied in turn from the tree, must each read as unapplied.
    The largest j that holds wins. If none does, the chain is judged forward on the tree (partial, conflict).
    """
    for j in range(len(chain), -1, -1):
        found: list[FileVerdict | None] = [None] * len(chain)
        if _stack_reads(chain, snapshots, range(j - 1, -1, -1), PatchState.APPLIED, found) and _stack_reads(
            chain, snapshots, range(j, len(chain)), PatchState.UNAPPLIED, found
        ):
            return [v for v in found if v is not None]
    overlay = dict(snapshots)
    verdicts = []
    for section in chain:
        verdict = judge_section(section, overlay)
        verdicts.append(verdict)
        if verdict.state is PatchState.UNAPPLIED:
            overlay.update(rewrite_section(verdict, forward=True))
    return verdicts


def _stack_reads(chain: Sequence[FilePatch], snapshots: Mapping[str, Snapshot], order: Sequence[int],
                 want: PatchState, found: list[FileVerdict | None]) -> bool:
    """Do the sections `order` names, judged one after the other, each read `want` on what the ones before them
    leave? Each is moved away from `want` before the next (applied ones reverted, unapplied ones applied), and
    its verdict stored in `found`."""
    overlay = dict(snapshots)
    for i in order:
        verdict = judge_section(chain[i], overlay)
        if verdict.state is not want:
            return False
        found[i] = verdict
        overlay.update(rewrite_section(verdict, forward=want is PatchState.UNAPPLIED))
    return True


def _verify_chain(
    chain: Sequence[FilePatch], snapshots: Mapping[str, Snapshot], verdicts: list[FileVerdict]
) -> list[FileVerdict]:
    """The chain's round trip, through replay_sections exactly as a plan would run it: the verdicts if it holds,
    else every one of them ambiguous, saying why."""
    state = combine(v.state for v in verdicts)
    if state not in (PatchState.APPLIED, PatchState.UNAPPLIED, PatchState.PARTIAL):
        return _unexplained_chain(chain, verdicts)
    failure = _chain_round_trip(chain, snapshots, verdicts, state)
    if failure is None:
        return verdicts
    detail = f"{len(chain)} sections of the diff touch this file; {failure}"
    return [replace(v, state=PatchState.AMBIGUOUS, detail=detail) for v in verdicts]


def _unexplained_chain(chain: Sequence[FilePatch], verdicts: Sequence[FileVerdict]) -> list[FileVerdict]:
    """No order of the sections explains the file: the state a section reads on it means nothing on its own (a
    later section may sit on top of it), so only the undecided ones keep their verdict; the others are
    ambiguous, naming the first undecided one."""
    undecided = (PatchState.CONFLICT, PatchState.AMBIGUOUS)
    bad = next(i for i, v in enumerate(verdicts) if v.state in undecided)
    detail = (
        f"{len(chain)} sections of the diff touch this file, and section {bad + 1} is "
        f"{verdicts[bad].state.value}, so the state of the others cannot be told"
    )
    return [v if v.state in undecided else replace(v, state=PatchState.AMBIGUOUS, detail=detail) for v in verdicts]


def _chain_round_trip(chain: Sequence[FilePatch], snapshots: Mapping[str, Snapshot], verdicts: Sequence[FileVerdict],
                      state: PatchState) -> str | None:
    """Why the chain, read `state` (applied, unapplied or partial), fails its round trip; None when it holds.

    The chain is moved to each end its state allows (applied: reverted; unapplied: applied; partial: both),
    and from there back: every move must read as its goal, and the way back must give the content of the other
    end (or, from a pure state, of the tree)."""
    directions = {PatchState.UNAPPLIED: [True], PatchState.APPLIED: [False], PatchState.PARTIAL: [True, False]}[state]
    ends: dict[bool, tuple[dict[str, Snapshot], list[FileVerdict]]] = {}
    for forward in directions:
        moved = _move_chain(chain, verdicts, snapshots, forward=forward)
        if isinstance(moved, str):
            return moved
        ends[forward] = moved
    paths = paths_of(chain)
    for forward, (after, again) in ends.items():
        back = _move_chain(chain, again, after, forward=not forward)
        if isinstance(back, str):
            return back
        expected = ends[not forward][0] if (not forward) in ends else snapshots
        if not _same_content(back[0], expected, paths):
            return "moving it there and back in memory does not give back the same content"
    return None


def _move_chain(chain: Sequence[FilePatch], verdicts: Sequence[FileVerdict], tree: Mapping[str, Snapshot], *,
                forward: bool) -> tuple[dict[str, Snapshot], list[FileVerdict]] | str:
    """Apply (`forward`) or revert the chain on `tree` as replay_sections does, and judge it again there: the tree
    it leaves and its verdicts, which must read applied (reverted: unapplied); else why not."""
    goal = PatchState.APPLIED if forward else PatchState.UNAPPLIED
    verb = "applying" if forward else "reverting"
    after, problem = replay_sections(verdicts, tree, forward=forward)
    if problem is not None:
        return f"{verb} it in memory stops: {problem.message}"
    again = _judge_chain(chain, after)
    if combine(v.state for v in again) is not goal:
        bad = next(i for i, v in enumerate(again) if v.state is not goal)
        return (
            f"after {verb} it in memory, section {bad + 1} of the sections touching it reads "
            f"{again[bad].state.value}, not {goal.value}"
        )
    return after, again


def _same_content(one: Mapping[str, Snapshot], other: Mapping[str, Snapshot], paths: Sequence[str]) -> bool:
    """Do the two trees hold the same bytes and modes at `paths`?"""
    return all((one[p].data, one[p].mode) == (other[p].data, other[p].mode) for p in paths)


def _chains(sections: Sequence[FilePatch]) -> list[list[int]]:
    """Group section indexes that share a path (transitively), keeping diff order.

    Transitively: a rename joins the chains of both its paths, so "modify a.py, delete b.py, rename a.py to
    b.py" is one chain of three, though the first two share no path (judged apart, the applied tree read as a
    conflict and the plan's check stopped apply: tests/test_series.py::test_a_rename_over_a_file_deleted_...).
    """
    owner: dict[str, int] = {}
    parent = list(range(len(sections)))
    for i, section in enumerate(sections):
        for path in section.paths:
            if path in owner:
                parent[_group_of(parent, i)] = _group_of(parent, owner[path])
            owner[path] = i
    groups: dict[int, list[int]] = {}
    for i in range(len(sections)):
        groups.setdefault(_group_of(parent, i), []).append(i)
    return sorted(groups.values(), key=lambda g: g[0])


def _group_of(parent: list[int], i: int) -> int:
    """The index that stands for i's group in the union-find `parent` (whose paths it halves on the way)."""
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


# -------------------------------------------------------------------------------------------- one section


def judge_section(section: FilePatch, snapshots: Mapping[str, Snapshot], known: Known | None = None
                  ) -> FileVerdict:
    """The verdict of one section on the snapshots. `known`: the reading its content is known to give
    (judge_planned), used when the content has exactly its number of lines; else the content is judged."""
    op = section.op
    if op is FileOp.CREATE:
        return _judge_whole(section, snapshots[section.path], created=True)
    if op is FileOp.DELETE:
        return _judge_whole(section, snapshots[section.path], created=False)
    old = snapshots[section.old_path or ""]
    if op is FileOp.RENAME:
        new = snapshots[section.new_path or ""]
        if old.exists and not new.exists:
            return _judge_content(section, old, HunkState.UNAPPLIED, snapshots, known)
        if new.exists and not old.exists:
            return _judge_content(section, new, HunkState.APPLIED, snapshots, known)
        detail = (
            f"both {section.old_path} and {section.new_path} exist" if old.exists
            else f"neither {section.old_path} nor {section.new_path} exists"
        )
        return _conflict_all(section, detail, snapshots)
    if not old.exists:
        return _conflict_all(section, "the file does not exist", snapshots)
    return _judge_content(section, old, None, snapshots, known)


def _judge_content(
    section: FilePatch, snap: Snapshot, presence: HunkState | None, snapshots: Mapping[str, Snapshot],
    known: Known | None = None,
) -> FileVerdict:
    assert snap.data is not None
    data = snap.data
    # The moved content was a list of lines, each with one LF at its end but perhaps the last: joined, they
    # split back into the same list exactly when the count of lines agrees.
    if known is not None and _line_count(data) == known.content.lines:
        reading, moved = known.content.reading, known.moved
    else:
        reading, moved = _judge_lines(FileLines.from_bytes(data), section.hunks, (section.old_blob, section.new_blob),
                                      (section.base_sha256, section.applied_sha256))
    verdicts = [
        HunkVerdict(h, loc, e) for h, loc, e in zip(section.hunks, reading.located, reading.expected, strict=True)
    ]
    mode = _judge_mode(section, snap)
    units: list[HunkState] = [v.state for v in verdicts]
    units += [u for u in (presence, mode) if u is not None]
    state = combine(units)
    detail = next((v.located.detail for v in verdicts if v.located.detail), None)
    return FileVerdict(section, state, tuple(verdicts), presence, mode, detail, _subset(section, snapshots), moved)


Blobs = tuple[str | None, str | None]  # a section's git blob ids of the whole file before and after (or None)
# A section's sha256 of the whole file before and after its hunks, on the image the manifest fingerprinted
# ([base], [base_applied]; or None).
Digests = tuple[str | None, str | None]
NO_DIGESTS: Digests = (None, None)
# The git blob ids of the contents one file's judgement hashed, with those contents: its round trip asks for
# the id of the same content again (reverting the moved file gives back the file judged), and comparing two
# lists of mostly the same line objects costs a fraction of hashing the file once more.
Hashed = list[tuple[list[bytes], str]]


NOTHING_MOVED: Ends = (None, None)


def _judge_lines(content: FileLines, hunks: Sequence[Hunk], blobs: Blobs, digests: Digests = NO_DIGESTS
                 ) -> tuple[Reading, Ends]:
    """The reading of one file's content that holds, after its round trip, or one that says why none does; and
    what its round trip found at each end (FileVerdict.moved)."""
    hashed: Hashed = []
    reading = _decide_reading(content, hunks, blobs, hashed, digests)
    if not reading.complete:
        return reading, NOTHING_MOVED
    problem, moved = _round_trip(content, hunks, reading, blobs, hashed, digests)
    if problem is None:
        return reading, moved
    index, why = problem
    return _doubt(reading, index, why), NOTHING_MOVED


def _decide_reading(content: FileLines, hunks: Sequence[Hunk], blobs: Blobs, hashed: Hashed,
                    digests: Digests = NO_DIGESTS) -> Reading:
    """The one reading of `content` the evidence leaves; else the reason why there is none, in a reading.

    The diff's blob ids may prove a reading (_proved: the cheap check, and the common case of a tree that no
    one drifted), and so may the manifest's fingerprint of the image the patch was ported to (_fingerprinted).
    Else position finds a reading (_by_position); it stands when no hunk has an image at another possible
    place, or the order and gaps of the hunks exclude those places (_unrivalled); what they leave is ambiguous.
    """
    proved = _proved(content, hunks, blobs, hashed)
    if proved is None and digests != NO_DIGESTS:
        proved = _fingerprinted(content, hunks, digests)
    if proved is not None:
        return proved
    reading = _by_position(content, hunks)
    if not reading.complete:
        return reading
    places = possible_places(content, hunks, reading)
    if all(len(p) == 1 for p in places):
        return reading
    return _unrivalled(content, hunks, reading, places)


def _by_position(content: FileLines, hunks: Sequence[Hunk]) -> Reading:
    """The one complete, git-consistent reading position gives; else the reason why there is none."""
    readings, cut = read_file(content, hunks)
    consistent: list[Reading] = []
    failed: tuple[Reading, int, str] | None = None
    for reading in readings:
        if not reading.complete:
            continue
        problem = _git_check(content, hunks, reading)
        if problem is None:
            consistent.append(reading)
        elif failed is None:
            failed = (reading, *problem)
    if len(consistent) > 1:
        consistent = _nearest(consistent)
    if len(consistent) > 1:
        consistent = _edges(content, hunks, consistent)
    if len(consistent) == 1 and not cut:
        return consistent[0]
    if consistent:
        return _tie(consistent, cut)
    if failed is not None:
        return _doubt(*failed)
    return readings[0]


def _proved(content: FileLines, hunks: Sequence[Hunk], blobs: Blobs, hashed: Hashed) -> Reading | None:
    """The reading the diff's own `index` line proves, if one does.

    The diff names the git blob ids of the whole file before and after. Read every hunk exactly where its
    header puts it (given the states of the hunks above it), as whichever image is there: if turning every
    hunk of that reading back gives the file before (or turning every one forward the file after), the file
    is exactly that one with those hunks applied, and look-alikes elsewhere in it do not matter. None when
    the ids are unknown, or no such reading gives them, or two readings with different states do.
    """
    old_blob, new_blob = blobs
    if not old_blob and not new_blob:
        return None
    lines = content.lines
    found: list[Reading] = []
    # Depth first, as read_file: a reading goes on in place while each hunk reads one way; a hunk that reads
    # both ways leaves the applied branch on the stack for after the unapplied one. (hunks read, lines they added)
    stack: list[tuple[list[Located], int]] = [([], 0)]
    while stack and len(found) + len(stack) <= MAX_READINGS:
        located, growth = stack.pop()
        for i in range(len(located), len(hunks)):
            hunk = hunks[i]
            pos = hunk.old_index + growth
            old, new = hunk.old_lines, hunk.new_lines
            # git's pins hold here too: an image whose side starts at line 0 or 1 sits at the start of the
            # file, a hunk without trailing context at its end (an empty -U0 image matches nowhere else)
            applied = locate(content, new, pos, 0, hunk.new_start <= 1, hunk.at_end, search=False) == pos
            unapplied = locate(content, old, pos, 0, hunk.old_start <= 1, hunk.at_end, search=False) == pos
            grows = hunk.new_len - hunk.old_len  # if read applied
            if applied and unapplied:
                stack.append(([*located, Located(HunkState.APPLIED, pos, len(new), None)], growth + grows))
                if len(found) + len(stack) + 1 > MAX_READINGS:  # this one counts too: too many readings
                    return None
            if unapplied:
                located.append(Located(HunkState.UNAPPLIED, pos, len(old), None))
            elif applied:
                located.append(Located(HunkState.APPLIED, pos, len(new), None))
                growth += grows
            else:
                break
        else:
            if _gives(rewrite_lines(lines, hunks, located, forward=False), old_blob, hashed) or _gives(
                rewrite_lines(lines, hunks, located, forward=True), new_blob, hashed
            ):
                found.append(Reading(tuple(located), tuple(loc.pos or 0 for loc in located)))
    if stack or not found or len({r.states for r in found}) > 1:
        return None
    # What patchkit writes is what git would write: a pure reading must be where git puts it (section 4).
    return found[0] if _git_check(content, hunks, found[0]) is None else None


def _fingerprinted(content: FileLines, hunks: Sequence[Hunk], digests: Digests) -> Reading | None:
    """The reading the manifest's fingerprint proves, if it does.

    `vendor --base-tree` records the sha256 of the file on the very image the patch targets ([base]), and of
    that file with the section's hunks applied ([base_applied]). A file whose bytes are the first is that image:
    every hunk is unapplied, where `git apply` puts it; the second is that image patched: every hunk applied,
    where `git apply -R` puts it. Look-alikes anywhere in it do not matter, exactly as with the blob ids
    (_proved), which prove the same on the diff's own base only. None when neither digest is the file's, or git
    would not place every hunk on an exact match of its image.
    """
    digest = hashlib.sha256(b"".join(content.lines)).hexdigest()
    for state, want in ((HunkState.UNAPPLIED, digests[0]), (HunkState.APPLIED, digests[1])):
        if digest != want:
            continue
        located = []
        for hunk, pos in zip(hunks, simulate_git(content, hunks, reverse=state is HunkState.APPLIED), strict=True):
            image = hunk.new_lines if state is HunkState.APPLIED else hunk.old_lines
            if pos is None or not content.matches_at(image, pos):
                return None
            located.append(Located(state, pos, len(image), None))
        return Reading(tuple(located), tuple(loc.pos or 0 for loc in located))
    return None


def git_applied(data: bytes, hunks: Sequence[Hunk]) -> bytes | None:
    """The file with every hunk applied where `git apply` puts it, each on an exact match of its pre-image
    (None: git would not place them so). What [base_applied] fingerprints for a base tree that content alone
    cannot read (vendor --base-tree names it as the pristine image)."""
    content = FileLines.from_bytes(data)
    located = []
    for hunk, pos in zip(hunks, simulate_git(content, hunks, reverse=False), strict=True):
        if pos is None or not content.matches_at(hunk.old_lines, pos):
            return None
        located.append(Located(HunkState.UNAPPLIED, pos, len(hunk.old_lines), None))
    return b"".join(rewrite_lines(list(content.lines), hunks, located, forward=True))


def _gives(lines: list[bytes], blob: str | None, hashed: Hashed) -> bool:
    """Do `lines` make the file whose (abbreviated) git blob id is `blob`?"""
    if not blob:
        return False
    digest = next((known for seen, known in hashed if seen == lines), None)
    if digest is None:
        data = b"".join(lines)  # one copy of the file, hashed after git's blob header
        sha = hashlib.sha1(b"blob %d\0" % len(data), usedforsecurity=False)
        sha.update(data)
        digest = sha.hexdigest()
        hashed.append((lines, digest))
    return digest.startswith(blob)


def _unrivalled(content: FileLines, hunks: Sequence[Hunk], reading: Reading, places: list[list[Place]]) -> Reading:
    """The reading, unless one of its hunks has an image at another place the evidence leaves open: a copy of
    it (or the hunk, and the reading's place the copy). Then that hunk is ambiguous, naming every place.

    Which image is nearer decides nothing: lines may have been added anywhere, so a copy may sit nearer to the
    expected line than the hunk itself. The evidence (docs/judgement.md, section 3):

    - order: the hunks sit one after the other (matching.possible_places); a hunk with one possible place is
      *certain*, and so are the start of the file and, where the diff saw it (a hunk whose trailing context
      was cut short), its end;
    - gaps: between two certain anchors, a run of hunks that keeps every gap the diff has (the lines above the
      first hunk, the unchanged lines between two hunks, the lines to the end) exactly is where the hunks are,
      unless another placement of the run also fits with lines only *added* (_rivals): a copy of an image is
      lines added, so a placement that puts a hunk on a copy must lengthen some gap, and the run's length is
      fixed; it can only do so where it reads some hunk with its shorter image. That is the overlapping copy:
      a post-image copy that ends with the real pre-image (or a pre-image copy around the real post-image)
      keeps every gap for the longer image, and the shorter one, with the copy's other lines added, fits too.
    """
    located = reading.located
    certain = [len(p) == 1 for p in places]
    gaps, exact = _exact_gaps(content, hunks, located)
    bounds: dict[tuple[int, int], tuple[list[int], list[int]]] = {}  # _rivals of each run, found once
    out = list(located)
    for i, (loc, possible) in enumerate(zip(located, places, strict=True)):
        if certain[i]:
            continue
        assert loc.pos is not None
        others = [p for p in possible if (p.state, p.pos) != (loc.state, loc.pos)]
        run = _exact_run(exact, certain, i)
        if run is not None:
            if run not in bounds:
                bounds[run] = _rivals(places, located, gaps, run, len(content.lines))
            low, high = bounds[run]
            others = [p for p in others if p.pos >= low[i] + gaps[i] and p.pos + p.span <= high[i + 1]]
            if not others:
                continue
        out[i] = _rivalled(loc, others)
    return Reading(tuple(out), reading.expected)


def _exact_gaps(content: FileLines, hunks: Sequence[Hunk], located: Sequence[Located]) -> tuple[list[int], list[bool]]:
    """(gaps, exact) of a complete reading, for _unrivalled.

    gaps[i]: the diff's unchanged lines before hunk i (for hunk 0: above it; gaps[count]: after the last one, 0,
    counted only where the diff saw the end). exact[i]: hunk i starts exactly gaps[i] past the end of hunk i-1
    (for hunk 0: past the start); exact[count]: the last hunk ends at the end of the file, where the diff saw
    it end.
    """
    count = len(hunks)
    gaps = [h.old_index - (0 if i == 0 else hunks[i - 1].old_index + hunks[i - 1].old_len)
            for i, h in enumerate(hunks)] + [0]
    exact = [False] * (count + 1)
    end = 0
    for i, loc in enumerate(located):
        assert loc.pos is not None
        exact[i] = loc.pos == end + gaps[i]
        end = loc.pos + loc.span
    size = max((max(h.leading, h.trailing) for h in hunks), default=0)
    # (a hunk without trailing context is where git anchors it, at the end: the gap is exactly 0 by git's rule)
    exact[count] = (hunks[-1].at_end or hunks[-1].trailing < size) and end == len(content.lines)
    return gaps, exact


def _exact_run(exact: Sequence[bool], certain: Sequence[bool], i: int) -> tuple[int, int] | None:
    """The run (its first hunk, the anchor past its last) of exact gaps between two anchors that holds hunk i;
    None when the gaps around hunk i do not reach an anchor on both sides exactly.

    An anchor is a certain hunk, or the start or the end of the file (index 0 on the left, len(certain) on the
    right)."""
    count = len(certain)
    first = i
    while exact[first] and first > 0 and not certain[first - 1]:
        first -= 1
    left = exact[first] and (first == 0 or certain[first - 1])
    past = i + 1
    while exact[past] and past < count and not certain[past]:
        past += 1
    return (first, past) if left and exact[past] and (past == count or certain[past]) else None


def _rivalled(loc: Located, others: Sequence[Place]) -> Located:
    """Hunk `loc` made ambiguous by the other places its images may be (`others`), naming them."""
    assert loc.pos is not None
    seen = "; ".join(f"its {image_name(p.state)} is also at line {p.pos + 1}" for p in others[:4])
    return Located(
        HunkState.AMBIGUOUS, None, 0,
        f"read as {loc.state.value}, its {image_name(loc.state)} is at line {loc.pos + 1}, "
        f"but {seen}; nothing in the patch excludes that place (the other hunks fit either way), so content "
        "cannot tell which one is the hunk and which a copy",
        (loc.pos, *(p.pos for p in others)), loc.span,
    )


def _rivals(places: Sequence[Sequence[Place]], located: Sequence[Located], gaps: Sequence[int],
            run: tuple[int, int], n: int) -> tuple[list[int], list[int]]:
    """Where the hunks of the run j..k-1 can be with every gap at least the diff's (lines added, none removed),
    between its anchors: the end of hunk j-1 (or the start of the file) and the start of hunk k (or the end of
    the file). A place of hunk i fits when it starts at least gaps[i] past low[i] and ends at most high[i+1].

    low[m]: the least line hunks j..m-1 can end at, placed in order from the left anchor; high[m]: the greatest
    line hunk m-1 can end at with hunks m..k-1 still fitting before the right anchor (past n, or below 0: they
    cannot). Only lower bounds on the gaps, so the earliest end (the latest start) is the best for the hunks
    after (before) it: one pass each way, for every hunk of the run at once."""
    j, k = run
    low = [n + 1] * (k + 1)
    high = [-1] * (k + 1)
    low[j] = 0 if j == 0 else (located[j - 1].pos or 0) + located[j - 1].span
    for m in range(j, k):
        ends = [p.pos + p.span for p in places[m] if p.pos >= low[m] + gaps[m]]
        if not ends:
            break
        low[m + 1] = min(ends)
    high[k] = (n if k == len(located) else located[k].pos or 0) - gaps[k]
    for m in range(k - 1, j - 1, -1):
        starts = [p.pos - gaps[m] for p in places[m] if p.pos + p.span <= high[m + 1]]
        if not starts:
            break
        high[m] = max(starts)
    return low, high


def _nearest(readings: Sequence[Reading]) -> list[Reading]:
    """The reading that puts every hunk at least as near to its expected line as each other one does, and one
    hunk nearer, if there is one (position separates them); else all of them (position cannot)."""

    def distances(r: Reading) -> tuple[int, ...]:
        return tuple(abs((pos or 0) - e) for pos, e in zip(r.positions, r.expected, strict=True))

    measured = [distances(r) for r in readings]
    for i, mine in enumerate(measured):
        others = [d for j, d in enumerate(measured) if j != i]
        if all(d != mine and all(m <= t for m, t in zip(mine, d, strict=True)) for d in others):
            return [readings[i]]
    return list(readings)


def _edges(content: FileLines, hunks: Sequence[Hunk], readings: Sequence[Reading]) -> list[Reading]:
    """Among readings position cannot separate, the one that agrees with where the diff saw the file end.

    A hunk with less trailing context than the section's context size was cut short by the end of the file.
    git pins it there only without any trailing context (`Hunk.at_end`; patchkit neither), so this is only a
    preference, and only when it leaves exactly one reading. The start needs none: a hunk cut short by the
    start begins at line 1, and git (and `_pinned`) pins both its images to line 0 in every reading.
    """
    size = max((max(h.leading, h.trailing) for h in hunks), default=0)
    n = len(content.lines)

    def fits(reading: Reading) -> bool:
        for hunk, loc in zip(hunks, reading.located, strict=True):
            assert loc.pos is not None
            if hunk.trailing < size and loc.pos + loc.span != n:
                return False
        return True

    fitting = [r for r in readings if fits(r)]
    return fitting if len(fitting) == 1 else list(readings)


def _git_check(content: FileLines, hunks: Sequence[Hunk], reading: Reading) -> tuple[int, str] | None:
    """A pure reading must put every hunk exactly where `git apply` (-R for applied) would: else git and
    patchkit would write different files, and the look-alike that makes them differ is near."""
    states = set(reading.states)
    if len(states) != 1:
        return None
    reverse = states == {HunkState.APPLIED}
    git = simulate_git(content, hunks, reverse=reverse)
    for i, (ours, theirs) in enumerate(zip(reading.positions, git, strict=True)):
        if ours != theirs:
            command = "git apply -R" if reverse else "git apply"
            where = "would not find it" if theirs is None else f"would use the match at line {theirs + 1}"
            assert ours is not None
            return i, (
                f"read as {reading.states[i].value}, its image is at line {ours + 1}, but `{command}` {where}; "
                "a look-alike is near, and position cannot tell which one is the hunk"
            )
    return None


def _tie(readings: Sequence[Reading], cut: bool) -> Reading:
    """Several readings hold: every hunk they read differently is ambiguous, naming each position."""
    first = readings[0]
    located = list(first.located)
    for i in range(len(located)):
        options = list(dict.fromkeys((r.located[i].state, r.located[i].pos) for r in readings))
        if len(options) == 1:
            continue
        described = "; ".join(
            f"read as {state.value}, its {image_name(state)} is at line {(pos or 0) + 1}"
            for state, pos in options[:4]
        )
        located[i] = Located(
            HunkState.AMBIGUOUS, None, 0,
            f"{described}; each reading of the whole file holds, and position cannot tell them apart",
            tuple(pos for _, pos in options if pos is not None),
        )
    if cut and all(loc.state is not HunkState.AMBIGUOUS for loc in located):
        located[0] = Located(
            HunkState.AMBIGUOUS, None, 0, "too many equally near look-alikes to read the file safely", ()
        )
    return Reading(tuple(located), first.expected)


def _doubt(reading: Reading, index: int, why: str) -> Reading:
    """`reading` with hunk `index` made ambiguous, for `why`."""
    loc = reading.located[index]
    located = list(reading.located)
    located[index] = Located(HunkState.AMBIGUOUS, None, 0, why, (loc.pos,) if loc.pos is not None else ())
    return Reading(tuple(located), reading.expected)


def _round_trip(
    content: FileLines, hunks: Sequence[Hunk], reading: Reading, blobs: Blobs, hashed: Hashed,
    digests: Digests = NO_DIGESTS,
) -> tuple[tuple[int, str] | None, Ends]:
    """(None, what it found at each end) if the reading survives its round trip in memory; else ((hunk index,
    why), nothing)."""
    if not hunks:
        return None, NOTHING_MOVED
    lines = list(content.lines)
    states = set(reading.states)
    all_applied, all_unapplied = states == {HunkState.APPLIED}, states == {HunkState.UNAPPLIED}
    # A pure reading moves one way only: rewriting it the other way would give back `lines`, so it is not done.
    forward_lines = lines if all_applied else rewrite_lines(lines, hunks, reading.located, forward=True)
    reverse_lines = lines if all_unapplied else rewrite_lines(lines, hunks, reading.located, forward=False)
    checks = []
    if not all_applied:  # unapplied or partial: applying (completing) must read applied, and revert to ...
        back = lines if all_unapplied else reverse_lines
        checks.append((forward_lines, HunkState.APPLIED, moved_positions(hunks, reading.located, forward=True), back))
    if not all_unapplied:
        back = lines if all_applied else forward_lines
        checks.append(
            (reverse_lines, HunkState.UNAPPLIED, moved_positions(hunks, reading.located, forward=False), back)
        )
    moved: list[Moved | None] = [None, None]
    for result, want, positions, back in checks:
        verb = "applying" if want is HunkState.APPLIED else "reverting"
        again = _decide_reading(FileLines(tuple(result)), hunks, blobs, hashed, digests)
        for i, (loc, pos) in enumerate(zip(again.located, positions, strict=True)):
            if loc.state is not want or loc.pos != pos:
                seen = f"{loc.state.value}" + (f" at line {loc.pos + 1}" if loc.pos is not None else "")
                return (i, (
                    f"read as {reading.states[i].value}, the file does not survive a round trip: after {verb} "
                    f"in memory this hunk reads {seen}, not {want.value} at line {(pos or 0) + 1}"
                )), NOTHING_MOVED
        if rewrite_lines(result, hunks, again.located, forward=want is HunkState.UNAPPLIED) != back:
            why = f"read as {combine(reading.states).value}, {verb} and back in memory does not give the same bytes"
            return (0, why), NOTHING_MOVED
        moved[want is HunkState.APPLIED] = Moved(again, len(result))
    return None, (moved[0], moved[1])


def _judge_mode(section: FilePatch, snap: Snapshot) -> HunkState | None:
    """The state of the section's change of the exec bit on `snap`; None when it changes none."""
    change = section.mode_change
    if change is None:
        return None
    old_exec, new_exec = bool(change[0] & 0o100), bool(change[1] & 0o100)
    if old_exec == new_exec:
        return None
    return HunkState.APPLIED if snap.executable == new_exec else HunkState.UNAPPLIED


def _judge_whole(section: FilePatch, snap: Snapshot, created: bool) -> FileVerdict:
    """Created and deleted files: the whole content is one unit, compared byte for byte, with its exec bit.

    The mode is part of the image: a created file with the diff's bytes but the other exec bit is not what the
    diff creates, and a deleted one is not what it deletes (its revert would write the diff's mode, widening
    or dropping the exec bits the file had). Either is a conflict, like different bytes.
    """
    image = section.whole(created)
    mode = section.new_mode if created else section.old_mode
    wants_exec = bool(mode and mode & 0o100)
    absent_state, present_state = (
        (HunkState.UNAPPLIED, HunkState.APPLIED) if created else (HunkState.APPLIED, HunkState.UNAPPLIED)
    )
    detail = None
    if not snap.exists:
        unit = absent_state
    elif snap.data == image and snap.executable == wants_exec:
        unit = present_state
    else:
        unit = HunkState.CONFLICT
        if snap.data == image:
            said = f"{mode:o}" if mode else f"{MODE_FILE:o} (the diff gives no mode)"
            detail = (
                f"exists with the new content but mode {snap.mode:o}; the diff creates it {said}" if created else
                f"exists with the content this diff deletes but mode {snap.mode:o}; the diff deletes it as {said}, "
                "and a revert would recreate it so"
            )
        elif created:
            detail = "already exists with content other than the file this diff creates"
        else:
            detail = "exists with content other than the file this diff deletes"
    span = len(section.hunks[0].new_lines if created else section.hunks[0].old_lines) if section.hunks else 0
    hunks = tuple(
        HunkVerdict(h, Located(unit, 0 if snap.exists and unit is not HunkState.CONFLICT else None, span, detail), 0)
        for h in section.hunks
    )
    return FileVerdict(section, combine([unit]), hunks, unit, None, detail, {snap.path: snap})


def _conflict_all(section: FilePatch, detail: str, snapshots: Mapping[str, Snapshot]) -> FileVerdict:
    hunks = tuple(HunkVerdict(h, Located(HunkState.CONFLICT, None, 0, detail), h.old_index) for h in section.hunks)
    return FileVerdict(
        section, PatchState.CONFLICT, hunks, HunkState.CONFLICT, None, detail, _subset(section, snapshots)
    )


def _subset(section: FilePatch, snapshots: Mapping[str, Snapshot]) -> dict[str, Snapshot]:
    return {p: snapshots[p] for p in section.paths}
