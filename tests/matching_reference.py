"""The plain matcher, kept as an oracle: the reading rule as issue #16 first implemented it, before the inline
fast paths of issue #15 (matching.read_file, _choices, simulate_git). tests/test_matching_reference.py checks
that the optimised matcher reads every generated file exactly as this one does.

Only read_file, _choices and simulate_git live here; the helpers they share with matching.py (locate, _here,
_find, the messages) are imported from it, so a change there moves both sides alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from patchkit.diff.hunks import Hunk
from patchkit.judge.matching import (
    MAX_READINGS,
    FileLines,
    Located,
    Reading,
    _find,
    _git_locate,
    _here,
    _image_name,
    _line,
    _modified,
    _pinned,
    explain_conflict,
    image_of,
)
from patchkit.outcome import HunkState


@dataclass(frozen=True)
class _Step:
    """The DFS frontier: hunks read so far and where the next one is expected."""

    located: tuple[Located, ...]
    expected: tuple[int, ...]
    end: int  # current line just past the previous hunk (or where it was expected to end)
    low: int  # no hunk may start before the end of the previous found one
    growth: int  # lines the previous applied hunks added: header lines -> current lines


def read_file(content: FileLines, hunks: Sequence[Hunk]) -> tuple[list[Reading], bool]:
    """Every reading of `content` by the rule above, and whether MAX_READINGS cut the list short.

    Readings come in a fixed order (at each tie, unapplied first), so the first one is a stable default for
    reports when none is complete.
    """
    done: list[Reading] = []
    stack = [_Step((), (), 0, 0, 0)]
    cut = False
    while stack:
        step = stack.pop()
        i = len(step.located)
        if i == len(hunks):
            done.append(Reading(step.located, step.expected))
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
            growth = step.growth + (len(hunk.new_lines) - len(hunk.old_lines)) * (located.state is HunkState.APPLIED)
            branches.append(_Step((*step.located, located), (*step.expected, expected), end, low, growth))
        if len(done) + len(stack) + len(branches) > MAX_READINGS:
            cut = True
            branches = branches[:1]
        stack.extend(reversed(branches))  # the first branch is read first
    return done, cut


def _choices(content: FileLines, hunk: Hunk, expected: int, header: int, low: int) -> list[Located]:
    """How hunk may read at `expected`: one Located, or two when its images are equally near."""
    # An image at `expected` itself is at distance 0: the other image then matters only at `expected` too,
    # so the whole-file search for it (and its line index) is skipped, with the same result.
    pre = _here(content, hunk, HunkState.UNAPPLIED, expected, low)
    post = _here(content, hunk, HunkState.APPLIED, expected, low)
    if pre is None and post is None:
        pre = _find(content, hunk, HunkState.UNAPPLIED, expected, low)
        post = _find(content, hunk, HunkState.APPLIED, expected, low)
    if pre is None and post is None:
        return [Located(HunkState.CONFLICT, None, 0, explain_conflict(content, hunk, expected))]
    options: list[tuple[HunkState, int]] = []
    if pre is not None and (post is None or abs(pre - expected) <= abs(post - expected)):
        options.append((HunkState.UNAPPLIED, pre))
    if post is not None and (pre is None or abs(post - expected) <= abs(pre - expected)):
        options.append((HunkState.APPLIED, post))
    out = []
    for state, pos in options:
        git_pos = _find(content, hunk, state, header, 0) if header != expected else pos
        image = image_of(hunk, state)
        if git_pos != pos:
            out.append(Located(
                HunkState.AMBIGUOUS, None, 0,
                f"the {_image_name(state)} is found at line {pos + 1}, nearest to where the hunks before it put "
                f"it (line {expected + 1}), and at line {_line(git_pos)}, nearest to the line its header names "
                f"(line {header + 1}); a look-alike is near, and position cannot tell which one is the hunk",
                (pos,) + ((git_pos,) if git_pos is not None else ()), len(image),
            ))
        else:
            out.append(Located(state, pos, len(image), None))
    return out



def simulate_git(content: FileLines, hunks: Sequence[Hunk], *, reverse: bool) -> tuple[int | None, ...]:
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
        (HunkState.APPLIED, HunkState.UNAPPLIED) if reverse else (HunkState.UNAPPLIED, HunkState.APPLIED)
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
            at = _git_locate(FileLines(tuple(image)), old, expected, at_start, at_end)
            pos = None if at is None else at - shift
        if pos is None:
            found += [None] * (len(hunks) - len(found))
            break
        found.append(pos)
        shift += len(new) - len(old)
        end = pos + len(old)
    return tuple(found)
