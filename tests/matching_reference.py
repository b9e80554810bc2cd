"""The plain matcher, kept as an oracle: the reading rule as issue #16 first implemented it, before the inline
fast paths of issue #15 (matching.read_file, _choices, simulate_git), and the order evidence of issue #23
(matching.possible_places) and the gap evidence (state._unrivalled and _rivals) by brute force.
tests/test_matching_reference.py checks that the optimised matcher reads every generated file exactly as this
one does.

An oracle never imports the code it checks: nothing here comes from patchkit.matching. Its own small records
stand in for matching's (State for HunkState, Loc for Located, Read for Reading); the comparison maps both to
plain tuples. Only the diff's records (patchkit.hunks.Hunk, what both sides read) are shared.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

from patchkit.diff.hunks import Hunk

MAX_READINGS = 64


class State(Enum):
    APPLIED = "applied"
    UNAPPLIED = "unapplied"
    CONFLICT = "conflict"
    AMBIGUOUS = "ambiguous"


class Loc(NamedTuple):
    state: State
    pos: int | None
    span: int
    detail: str | None
    candidates: tuple[int, ...] = ()
    candidate_span: int = 0


class Read(NamedTuple):
    located: tuple[Loc, ...]
    expected: tuple[int, ...]


class Lines:
    """A file's lines, as the plain matcher looks at them: no index, every position tried."""

    def __init__(self, lines: Sequence[bytes]) -> None:
        self.lines = tuple(lines)

    def matches_at(self, image: Sequence[bytes], pos: int) -> bool:
        return pos >= 0 and pos + len(image) <= len(self.lines) and self.lines[pos:pos + len(image)] == tuple(image)


def image_of(hunk: Hunk, state: State) -> tuple[bytes, ...]:
    return hunk.new_lines if state is State.APPLIED else hunk.old_lines


def _pinned(hunk: Hunk, state: State) -> tuple[bool, bool]:
    start = hunk.new_start if state is State.APPLIED else hunk.old_start
    return start <= 1, hunk.trailing == 0


def _order(pos: int, expected: int) -> tuple[int, bool]:
    return abs(pos - expected), pos < expected


def locate(content: Lines, image: Sequence[bytes], expected: int, low: int, at_start: bool, at_end: bool) -> int | None:
    """Every position tried in git's order from `expected` (clamped to the file), not before `low`."""
    n, m = len(content.lines), len(image)
    expected = min(max(expected, 0), n)
    if at_start and at_end:
        spots: list[int] = [0] if n == m else []
    elif at_start:
        spots = [0]
    elif at_end:
        spots = [n - m]
    elif m == 0:
        spots = [max(expected, low)]
    else:
        spots = sorted(range(n + 1), key=lambda p: _order(p, expected))
    return next((p for p in spots if low <= p and p + m <= n and content.matches_at(image, p)), None)


def _find(content: Lines, hunk: Hunk, state: State, expected: int, low: int) -> int | None:
    return locate(content, image_of(hunk, state), expected, low, *_pinned(hunk, state))


def _here(content: Lines, hunk: Hunk, state: State, expected: int, low: int) -> int | None:
    at_start, at_end = _pinned(hunk, state)
    if at_start or at_end:
        pos = _find(content, hunk, state, expected, low)
        return pos if pos == expected else None
    return expected if expected >= low and content.matches_at(image_of(hunk, state), expected) else None


def _image_name(state: State) -> str:
    return "post-image" if state is State.APPLIED else "pre-image"


def _line(pos: int | None) -> str:
    return "none" if pos is None else str(pos + 1)


def _git_locate(content: Lines, image: Sequence[bytes], expected: int, at_start: bool, at_end: bool) -> int | None:
    """git's match: an image whose last line lacks its newline also matches, away from the end, a line that
    continues with whitespace only."""
    if not image or image[-1].endswith(b"\n") or at_end:
        return locate(content, image, expected, 0, at_start, at_end)
    lines, m = content.lines, len(image)
    head, last = tuple(image[:-1]), image[-1]

    def fits(q: int) -> bool:
        if q < 0 or q + m > len(lines) or lines[q:q + m - 1] != head:
            return False
        line = lines[q + m - 1]
        return line.startswith(last) and (line[len(last):].isspace() or line == last)

    spots = [0] if at_start else sorted(range(len(lines) - m + 1), key=lambda q: _order(q, expected))
    return next((q for q in spots if fits(q)), None)


def _modified(content: Lines, hunks: Sequence[Hunk], found: Sequence[int | None], state: State) -> list[bytes]:
    out: list[bytes] = []
    at = 0
    other = State.APPLIED if state is State.UNAPPLIED else State.UNAPPLIED
    for hunk, pos in zip(hunks, found, strict=True):
        assert pos is not None
        out += content.lines[at:pos]
        out += image_of(hunk, other)
        at = pos + len(image_of(hunk, state))
    out += content.lines[at:]
    return out


def explain_conflict(content: Lines, hunk: Hunk, expected: int) -> str:
    lines = content.lines
    crlf_file = any(line.endswith(b"\r\n") for line in lines)
    crlf_diff = any(line.endswith(b"\r\n") for line in hunk.old_lines + hunk.new_lines)
    if crlf_file != crlf_diff:
        normal = Lines([line.replace(b"\r\n", b"\n") for line in lines])
        for image in (hunk.old_lines, hunk.new_lines):
            plain = [line.replace(b"\r\n", b"\n") for line in image]
            if image and locate(normal, plain, 0, 0, False, False) is not None:
                file_kind, diff_kind = ("CRLF", "LF") if crlf_file else ("LF", "CRLF")
                return (
                    f"line endings differ: the file uses {file_kind}, the diff {diff_kind}; "
                    "regenerate the diff from a tree with the same line endings"
                )
    pos = min(max(expected, 0), len(lines))
    for i, want in enumerate(hunk.old_lines):
        have = lines[pos + i] if pos + i < len(lines) else None
        if have != want:
            return (
                f"at line {pos + i + 1} the diff expects {_preview(want)} (or its post-image), "
                f"the file has {_preview(have)}"
            )
    if hunk.trailing == 0:
        return "the hunk has no trailing context and must match at the end of the file, which it does not"
    return "the hunk's context does not match the file"


def _preview(line: bytes | None) -> str:
    if line is None:
        return "end of file"
    text = line.decode("utf-8", "replace").rstrip("\n")
    if text == "":
        return "a blank line"
    if not text.strip():
        return f"a line of whitespace only ({text!r})"
    return repr(text[:60] + ("..." if len(text) > 60 else ""))


def possible_places(content: Lines, hunks: Sequence[Hunk], chosen: Sequence[Loc]) -> list[list[tuple[State, int]]]:
    """By brute force: every (state, line) of each hunk that some placement of all the hunks in order uses
    (each image at or past the end of the one before; an image git anchors to the start or the end of the file
    only there; an empty image only where `chosen` has it)."""
    n = len(content.lines)
    options: list[list[tuple[State, int, int]]] = []
    for hunk, loc in zip(hunks, chosen, strict=True):
        places = []
        for state in (State.UNAPPLIED, State.APPLIED):
            image = image_of(hunk, state)
            at_start, at_end = _pinned(hunk, state)
            if image:
                places += [(state, p, len(image)) for p in range(n) if content.matches_at(image, p)
                           and (not at_start or p == 0) and (not at_end or p + len(image) == n)]
            elif loc.state is state and loc.pos is not None:
                places.append((state, loc.pos, 0))
        options.append(places)
    used: list[set[tuple[State, int]]] = [set() for _ in hunks]

    def walk(i: int, low: int, path: list[tuple[State, int]]) -> bool:
        if i == len(hunks):
            for j, place in enumerate(path):
                used[j].add(place)
            return True
        found = False
        for state, pos, span in options[i]:
            if pos >= low and walk(i + 1, pos + span, [*path, (state, pos)]):
                found = True
        return found

    walk(0, 0, [])
    return [sorted(u, key=lambda place: (place[1], place[0] is State.APPLIED)) for u in used]


def rivals(content: Lines, hunks: Sequence[Hunk], chosen: Sequence[Loc],
           places: Sequence[Sequence[tuple[State, int]]]) -> list[list[tuple[State, int]] | None]:
    """By brute force, for each hunk of a complete reading: None when it stands, else the other places that
    nothing excludes (docs/judgement.md, section 3, "order and gaps").

    A hunk stands when it has one possible place, or when it lies in a run of hunks that keeps every gap of the
    diff exactly, from an anchor above (the start of the file, a hunk with one place) to an anchor below (a
    hunk with one place, or the end of the file where the diff saw it: a hunk whose trailing context is
    shorter than the section's context, or none, which git anchors there), and no placement of that run,
    every image from its possible places, in order, with every gap at least the diff's, puts the hunk anywhere
    else."""
    count = len(hunks)
    n = len(content.lines)

    def gap(i: int) -> int:  # the diff's unchanged lines before hunk i (0 after the last one)
        if i == count:
            return 0
        return hunks[i].old_index - (hunks[i - 1].old_index + hunks[i - 1].old_len if i else 0)

    ends = [(loc.pos or 0) + loc.span for loc in chosen]
    exact = [(chosen[i].pos or 0) == (ends[i - 1] if i else 0) + gap(i) for i in range(count)]
    context = max((max(h.leading, h.trailing) for h in hunks), default=0)
    exact.append((hunks[-1].trailing == 0 or hunks[-1].trailing < context) and ends[-1] == n)
    one = [len(p) == 1 for p in places]
    out: list[list[tuple[State, int]] | None] = []
    for i in range(count):
        mine = (chosen[i].state, chosen[i].pos)
        others = [p for p in places[i] if p != mine]
        if one[i]:
            out.append(None)
            continue
        j = i
        while j > 0 and exact[j] and not one[j - 1]:
            j -= 1
        k = i + 1
        while k < count and exact[k] and not one[k]:
            k += 1
        if not (exact[j] and (j == 0 or one[j - 1]) and exact[k] and (k == count or one[k])):
            out.append(others)
            continue
        start = ends[j - 1] if j else 0
        stop = n if k == count else chosen[k].pos or 0
        used = {path[i - j] for path in _placements(hunks, places, gap, j, k, start, stop)}
        found = [p for p in others if p in used]
        out.append(found or None)
    return out


def _placements(hunks: Sequence[Hunk], places: Sequence[Sequence[tuple[State, int]]], gap: Callable[[int], int],
                j: int, k: int, start: int, stop: int) -> list[tuple[tuple[State, int], ...]]:
    """Every placement of hunks j..k-1 from their places, in order from line `start`, every gap at least the
    diff's, the last one ending at least gap(k) before line `stop`."""
    found: list[tuple[tuple[State, int], ...]] = []

    def walk(m: int, at: int, path: tuple[tuple[State, int], ...]) -> None:
        if m == k:
            if at + gap(k) <= stop:
                found.append(path)
            return
        for state, pos in places[m]:
            if pos >= at + gap(m):
                walk(m + 1, pos + len(image_of(hunks[m], state)), (*path, (state, pos)))

    walk(j, start, ())
    return found


@dataclass(frozen=True)
class _Step:
    """The DFS frontier: hunks read so far and where the next one is expected."""

    located: tuple[Loc, ...]
    expected: tuple[int, ...]
    end: int  # current line just past the previous hunk (or where it was expected to end)
    low: int  # no hunk may start before the end of the previous found one
    growth: int  # lines the previous applied hunks added: header lines -> current lines


def read_file(content: Lines, hunks: Sequence[Hunk]) -> tuple[list[Read], bool]:
    """Every reading of `content` by the rule above, and whether MAX_READINGS cut the list short.

    Readings come in a fixed order (at each tie, unapplied first), so the first one is a stable default for
    reports when none is complete.
    """
    done: list[Read] = []
    stack = [_Step((), (), 0, 0, 0)]
    cut = False
    while stack:
        step = stack.pop()
        i = len(step.located)
        if i == len(hunks):
            done.append(Read(step.located, step.expected))
            continue
        hunk = hunks[i]
        if i == 0:
            expected = hunk.old_index
        else:  # keep the gap of unchanged lines the diff has between the two hunks
            previous = hunks[i - 1]
            expected = step.end + hunk.old_index - (previous.old_index + previous.old_len)
        header = hunk.old_index + step.growth  # where the header puts it, given the states read so far
        branches: list[_Step] = []
        for located in _choices(content, hunk, expected, header, step.low):
            if located.pos is not None:
                end = low = located.pos + located.span
            elif located.candidates:  # ambiguous: go on from the running-offset match, for the report
                end = low = located.candidates[0] + located.candidate_span
            else:
                end, low = expected + hunk.old_len, step.low
            growth = step.growth + (len(hunk.new_lines) - len(hunk.old_lines)) * (located.state is State.APPLIED)
            branches.append(_Step((*step.located, located), (*step.expected, expected), end, low, growth))
        if len(done) + len(stack) + len(branches) > MAX_READINGS:
            cut = True
            branches = branches[:1]
        stack.extend(reversed(branches))  # the first branch is read first
    return done, cut


def _choices(content: Lines, hunk: Hunk, expected: int, header: int, low: int) -> list[Loc]:
    """How hunk may read at `expected`: one Located, or two when its images are equally near."""
    # An image at `expected` itself is at distance 0: the other image then matters only at `expected` too,
    # so the whole-file search for it (and its line index) is skipped, with the same result.
    pre = _here(content, hunk, State.UNAPPLIED, expected, low)
    post = _here(content, hunk, State.APPLIED, expected, low)
    if pre is None and post is None:
        pre = _find(content, hunk, State.UNAPPLIED, expected, low)
        post = _find(content, hunk, State.APPLIED, expected, low)
    if pre is None and post is None:
        return [Loc(State.CONFLICT, None, 0, explain_conflict(content, hunk, expected))]
    options: list[tuple[State, int]] = []
    if pre is not None and (post is None or abs(pre - expected) <= abs(post - expected)):
        options.append((State.UNAPPLIED, pre))
    if post is not None and (pre is None or abs(post - expected) <= abs(pre - expected)):
        options.append((State.APPLIED, post))
    out = []
    for state, pos in options:
        git_pos = _find(content, hunk, state, header, 0) if header != expected else pos
        image = image_of(hunk, state)
        if git_pos != pos:
            out.append(Loc(
                State.AMBIGUOUS, None, 0,
                f"the {_image_name(state)} is found at line {pos + 1}, nearest to where the hunks before it put "
                f"it (line {expected + 1}), and at line {_line(git_pos)}, nearest to the line its header names "
                f"(line {header + 1}); a look-alike is near, and position cannot tell which one is the hunk",
                (pos,) + ((git_pos,) if git_pos is not None else ()), len(image),
            ))
        else:
            out.append(Loc(state, pos, len(image), None))
    return out



def simulate_git(content: Lines, hunks: Sequence[Hunk], *, reverse: bool) -> tuple[int | None, ...]:
    """Where `git apply` (or `git apply -R`) would put each hunk, in current 0-based lines (None: fails there).

    git applies hunk after hunk to the image as modified so far, searching each one outward from its header's
    new-side line, with no offset carried over and no lower bound. state.py uses this to make sure that what
    patchkit writes is exactly what git would write.
    """
    found: list[int | None] = []
    shift = 0  # lines the hunks applied so far added: image line = current line + shift, past them
    end = 0  # current line just past the last hunk applied
    n = len(content.lines)
    from_state, to_state = (
        (State.APPLIED, State.UNAPPLIED) if reverse else (State.UNAPPLIED, State.APPLIED)
    )
    for i, hunk in enumerate(hunks):
        old, new = image_of(hunk, from_state), image_of(hunk, to_state)
        new_start = hunk.old_start if reverse else hunk.new_start
        at_start, at_end = _pinned(hunk, from_state)
        expected = new_start - 1 if new_start else 0
        # git tries the expected line first: when the image is there (past the hunks applied so far, so the
        # image as modified has the current lines there), that is git's answer, without building the image.
        first = 0 if at_start else (n + shift - len(old) if at_end else expected)
        here = first - shift
        if here >= end and content.matches_at(old, here) and (not at_end or here + len(old) == n):
            pos: int | None = here
        else:
            image = _modified(content, hunks[:i], found, from_state)
            at = _git_locate(Lines(image), old, expected, at_start, at_end)
            pos = None if at is None else at - shift
        if pos is None:
            found += [None] * (len(hunks) - len(found))
            break
        found.append(pos)
        shift += len(new) - len(old)
        end = pos + len(old)
    return tuple(found)
