"""Combine hunk states into file and patch verdicts: the one module that decides what state a tree is in.

A file section is judged on a snapshot of the tree (never on excluded files: they are not in the hunk set).
Hunk states come from matching.judge_hunk; whole-file facts (created, deleted, renamed, mode) are units of
their own. All applied -> applied; all unapplied -> unapplied; only those two -> partial; any conflict ->
conflict; otherwise any undecidable hunk -> ambiguous. Sections that touch the same path (a file touched twice
in one diff) are judged as a chain: each on the content the sections before it leave.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from patchkit.hunks import FileOp, FilePatch, Hunk, HunkSet, paths_of
from patchkit.matching import FileLines, HunkState, Located, judge_hunk
from patchkit.tree import Snapshot, read_snapshot


class PatchState(Enum):
    APPLIED = "applied"
    UNAPPLIED = "unapplied"
    PARTIAL = "partial"
    CONFLICT = "conflict"
    AMBIGUOUS = "ambiguous"


@dataclass(frozen=True)
class HunkVerdict:
    hunk: Hunk
    located: Located
    expected: int  # 0-based position the hunk was expected at in the judged content

    @property
    def state(self) -> HunkState:
        return self.located.state


@dataclass(frozen=True)
class FileVerdict:
    """One file section, judged on the snapshots in `judged_on` (path -> content as judged)."""

    section: FilePatch
    state: PatchState
    hunks: tuple[HunkVerdict, ...]
    presence: HunkState | None  # created / deleted / renamed: is the whole-file operation done?
    mode: HunkState | None  # exec-bit change: done?
    detail: str | None
    judged_on: Mapping[str, Snapshot]

    @property
    def source_path(self) -> str | None:
        """The path whose content the hunks were matched against."""
        s = self.section
        if s.op is FileOp.RENAME and self.presence is HunkState.APPLIED:
            return s.new_path
        return s.old_path if s.op is not FileOp.CREATE else s.new_path


@dataclass(frozen=True)
class TreeState:
    root: Path
    hunk_set: HunkSet
    files: tuple[FileVerdict, ...]
    snapshots: Mapping[str, Snapshot]  # every path of the hunk set, as read from disk once

    @property
    def state(self) -> PatchState:
        return combine(f.state for f in self.files)


def combine(states: Iterable[PatchState | HunkState]) -> PatchState:
    seen = {s.value for s in states}
    if not seen:
        return PatchState.APPLIED
    if "conflict" in seen:
        return PatchState.CONFLICT
    if "ambiguous" in seen:
        return PatchState.AMBIGUOUS
    if seen == {"applied"}:
        return PatchState.APPLIED
    if seen == {"unapplied"}:
        return PatchState.UNAPPLIED
    return PatchState.PARTIAL


def scan_tree(root: Path, hunk_set: HunkSet) -> TreeState:
    """Read every path of the filtered hunk set once and judge each section."""
    snapshots = {path: read_snapshot(root, path) for path in paths_of(hunk_set.files)}
    verdicts = judge_sections(hunk_set.files, snapshots)
    return TreeState(root, hunk_set, tuple(verdicts), snapshots)


def judge_sections(sections: Sequence[FilePatch], snapshots: Mapping[str, Snapshot]) -> list[FileVerdict]:
    """Judge sections in order; chains of sections sharing a path are judged as one stack (_judge_chain)."""
    verdicts: dict[int, FileVerdict] = {}
    for chain in _chains(sections):
        if len(chain) == 1:
            verdicts[chain[0]] = judge_section(sections[chain[0]], snapshots)
        else:
            verdicts.update(zip(chain, _judge_chain([sections[i] for i in chain], snapshots), strict=True))
    return [verdicts[i] for i in range(len(sections))]


def _judge_chain(chain: Sequence[FilePatch], snapshots: Mapping[str, Snapshot]) -> list[FileVerdict]:
    """Sections that touch the same file, in order: find the reading "the first j are applied, the rest not".

    Each candidate j is checked for real: the first j sections, peeled off the tree from the last one back,
    must each read as applied, and the others, applied in turn from the tree, must each read as unapplied.
    The largest j that holds wins. If none does, the chain is judged forward on the tree (partial, conflict).
    """
    from patchkit.rewrite import rewrite_section  # rewrite depends on this module's verdicts

    def stack(order: Sequence[int], want: PatchState, forward: bool, out: list[FileVerdict | None]) -> bool:
        overlay = dict(snapshots)
        for i in order:
            verdict = judge_section(chain[i], overlay)
            if verdict.state is not want:
                return False
            out[i] = verdict
            overlay.update(rewrite_section(verdict, forward=forward))
        return True

    for j in range(len(chain), -1, -1):
        found: list[FileVerdict | None] = [None] * len(chain)
        if stack(range(j - 1, -1, -1), PatchState.APPLIED, False, found) and stack(
            range(j, len(chain)), PatchState.UNAPPLIED, True, found
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


def _chains(sections: Sequence[FilePatch]) -> list[list[int]]:
    """Group section indexes that share a path (transitively), keeping diff order."""
    owner: dict[str, int] = {}
    parent = list(range(len(sections)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, section in enumerate(sections):
        for path in section.paths:
            if path in owner:
                parent[find(i)] = find(owner[path])
            owner[path] = i
    groups: dict[int, list[int]] = {}
    for i in range(len(sections)):
        groups.setdefault(find(i), []).append(i)
    return sorted(groups.values(), key=lambda g: g[0])


def judge_section(section: FilePatch, snapshots: Mapping[str, Snapshot]) -> FileVerdict:
    op = section.op
    if op is FileOp.CREATE:
        return _judge_whole(section, snapshots[section.path], created=True)
    if op is FileOp.DELETE:
        return _judge_whole(section, snapshots[section.path], created=False)
    old = snapshots[section.old_path or ""]
    if op is FileOp.RENAME:
        new = snapshots[section.new_path or ""]
        if old.exists and not new.exists:
            return _judge_content(section, old, HunkState.UNAPPLIED, snapshots)
        if new.exists and not old.exists:
            return _judge_content(section, new, HunkState.APPLIED, snapshots)
        detail = (
            f"both {section.old_path} and {section.new_path} exist" if old.exists
            else f"neither {section.old_path} nor {section.new_path} exists"
        )
        return _conflict_all(section, detail, snapshots)
    if not old.exists:
        return _conflict_all(section, "the file does not exist", snapshots)
    return _judge_content(section, old, None, snapshots)


def _judge_content(
    section: FilePatch, snap: Snapshot, presence: HunkState | None, snapshots: Mapping[str, Snapshot]
) -> FileVerdict:
    assert snap.data is not None
    content = FileLines.from_bytes(snap.data)
    verdicts = _locate_hunks(section.hunks, content, None)
    if any(v.state is HunkState.AMBIGUOUS for v in verdicts):
        # A hunk whose two images both occur can often be settled by the rest of the file: read the whole
        # file once as "unapplied" and once as "applied"; exactly one consistent reading wins.
        readings = [
            r for r in (_locate_hunks(section.hunks, content, prefer) for prefer in (HunkState.UNAPPLIED,
                                                                                    HunkState.APPLIED))
            if len({v.state for v in r}) == 1 and r[0].state in (HunkState.UNAPPLIED, HunkState.APPLIED)
        ]
        if len(readings) == 1:
            verdicts = readings[0]
    mode = _judge_mode(section, snap)
    units: list[HunkState] = [v.state for v in verdicts]
    units += [u for u in (presence, mode) if u is not None]
    state = combine(units)
    detail = next((v.located.detail for v in verdicts if v.located.detail), None)
    if mode is HunkState.CONFLICT:
        detail = detail or f"file mode is {snap.mode:o}, neither the old nor the new mode of the diff"
    return FileVerdict(section, state, tuple(verdicts), presence, mode, detail, _subset(section, snapshots))


def _locate_hunks(hunks: Sequence[Hunk], content: FileLines, prefer: HunkState | None) -> list[HunkVerdict]:
    verdicts: list[HunkVerdict] = []
    low = 0
    after_previous = 0  # current position just past the previous hunk
    previous: Hunk | None = None
    for hunk in hunks:
        if previous is None:
            expected = hunk.old_index
        else:  # keep the gap of unchanged lines the diff had between the two hunks
            expected = after_previous + hunk.old_index - (previous.old_index + previous.old_len)
        located = judge_hunk(content, hunk, expected, low, prefer)
        verdicts.append(HunkVerdict(hunk, located, expected))
        if located.pos is not None:
            after_previous = low = located.pos + located.span
        else:
            after_previous = expected + hunk.old_len
        previous = hunk
    return verdicts


def _judge_mode(section: FilePatch, snap: Snapshot) -> HunkState | None:
    change = section.mode_change
    if change is None:
        return None
    old_exec, new_exec = bool(change[0] & 0o100), bool(change[1] & 0o100)
    if old_exec == new_exec:
        return None
    return HunkState.APPLIED if snap.executable == new_exec else HunkState.UNAPPLIED


def _judge_whole(section: FilePatch, snap: Snapshot, created: bool) -> FileVerdict:
    """Created and deleted files: the whole content is one unit, compared byte for byte."""
    image = b"".join(line for h in section.hunks for line in (h.new_lines if created else h.old_lines))
    mode = section.new_mode if created else section.old_mode
    wants_exec = bool(mode and mode & 0o100)
    absent_state, present_state = (
        (HunkState.UNAPPLIED, HunkState.APPLIED) if created else (HunkState.APPLIED, HunkState.UNAPPLIED)
    )
    detail = None
    if not snap.exists:
        unit = absent_state
    elif snap.data == image and (snap.executable == wants_exec or not created):
        unit = present_state
    else:
        unit = HunkState.CONFLICT
        if snap.data == image:
            detail = f"exists with the new content but mode {snap.mode:o} (the diff says {mode:o})"
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
