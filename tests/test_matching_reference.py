"""The optimised matcher against the plain one (tests/matching_reference.py), on nasty generated files.

matching.read_file, _choices and simulate_git take inline shortcuts for the common case (issue #15); the plain
implementation of the same rule is the oracle. Files are drawn from a handful of distinct lines, so look-alike
blocks are everywhere; each file is then read in many shapes: pristine, fully patched, any subset of hunks
patched, shifted by lines added above or between hunks (offsets), with decoy copies of a hunk's images planted
near it, cut short, with CRLF endings and without a final newline. Every reading, the cut flag and git's
simulated positions must be identical. PATCHKIT_MATCHING_EXAMPLES raises the number of files (default 400,
about 5 s); a deliberately broken matcher is caught by the same generator (the last test).
"""

from __future__ import annotations

import difflib
import os
import random
from collections.abc import Callable, Iterator, Sequence

import pytest

from patchkit.diff.hunks import Hunk
from patchkit.judge import matching, state
from patchkit.judge.matching import FileLines, Reading
from patchkit.outcome import HunkState
from tests import matching_reference as reference

EXAMPLES = int(os.environ.get("PATCHKIT_MATCHING_EXAMPLES", "400"))
WORDS = [b"a", b"b", b"c", b"def f():", b"    return x", b"", b"# note", b"x = 1"]


def make_hunks(old: Sequence[bytes], new: Sequence[bytes], context: int) -> list[Hunk]:
    """The hunks of a unified diff of `old` -> `new` with `context` lines, as a diff's header gives them."""
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    hunks = []
    for index, group in enumerate(matcher.get_grouped_opcodes(context), start=1):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        leading = group[0][2] - group[0][1] if group[0][0] == "equal" else 0
        trailing = group[-1][2] - group[-1][1] if group[-1][0] == "equal" else 0
        old_len, new_len = i2 - i1, j2 - j1
        hunks.append(Hunk(
            index, 0, i1 + 1 if old_len else i1, old_len, j1 + 1 if new_len else j1, new_len,
            tuple(old[i1:i2]), tuple(new[j1:j2]), leading, trailing,
        ))
    return hunks


def patched(lines: Sequence[bytes], hunks: Sequence[Hunk], chosen: set[int]) -> list[bytes]:
    """`lines` (the pre-image file) with the hunks in `chosen` turned into their post-image."""
    out: list[bytes] = []
    at = 0
    for i, hunk in enumerate(hunks):
        out += lines[at:hunk.old_index]
        out += hunk.new_lines if i in chosen else hunk.old_lines
        at = hunk.old_index + hunk.old_len
    return out + list(lines[at:])


def shapes(rng: random.Random) -> Iterator[tuple[list[bytes], list[Hunk]]]:
    """(content, hunks) pairs for one generated file."""
    ending = rng.choice([b"\n", b"\n", b"\r\n"])
    words = [w + ending for w in WORDS[: rng.randint(2, len(WORDS))]]
    old = [rng.choice(words) for _ in range(rng.randint(0, 40))]
    new = list(old)
    for _ in range(rng.randint(1, 5)):
        at = rng.randint(0, len(new))
        op = rng.choice(["insert", "delete", "replace"])
        if op == "insert" or not new:
            new[at:at] = [rng.choice(words) for _ in range(rng.randint(1, 3))]
        elif op == "delete":
            del new[at:at + rng.randint(1, 3)]
        else:
            new[at:at + 1] = [rng.choice(words) for _ in range(rng.randint(1, 2))]
    if old and rng.random() < 0.3:  # no newline at the end of the file, on one side or both
        old[-1] = old[-1].rstrip(b"\r\n")
        if new and rng.random() < 0.5:
            new[-1] = new[-1].rstrip(b"\r\n")
    hunks = make_hunks(old, new, rng.choice([0, 1, 1, 2, 3, 3]))
    if not hunks:
        return
    every = set(range(len(hunks)))
    yield old, hunks
    yield patched(old, hunks, every), hunks
    for _ in range(3):
        chosen = {i for i in every if rng.random() < 0.5}
        content = patched(old, hunks, chosen)
        yield content, hunks
        shifted = list(content)
        for _ in range(rng.randint(1, 3)):  # offsets: lines added above a hunk or between two
            at = rng.randint(0, len(shifted))
            shifted[at:at] = [rng.choice(words) for _ in range(rng.randint(1, 4))]
        yield shifted, hunks
        hunk = rng.choice(hunks)
        decoy = list(content)  # a copy of one of the hunk's images planted a few lines away
        image = rng.choice([hunk.old_lines, hunk.new_lines])
        at = min(max(hunk.old_index + rng.randint(-6, 6), 0), len(decoy))
        decoy[at:at] = image
        yield decoy, hunks
        yield content[: rng.randint(0, len(content))], hunks  # cut short
    yield [rng.choice(words) for _ in range(rng.randint(0, 30))], hunks  # another file altogether


def summary(readings: Sequence[Reading] | Sequence[reference.Read]) -> list[tuple[object, ...]]:
    """Both matchers' readings as plain tuples (the reference has records of its own)."""
    return [
        (tuple((loc.state.value, *loc[1:]) for loc in r.located), r.expected)
        for r in readings
    ]


def places(content: Sequence[bytes], hunks: Sequence[Hunk], reading: Reading) -> tuple[list[object], list[object]]:
    """matching.possible_places and the reference's brute force on one reading, as plain tuples."""
    ours = matching.possible_places(FileLines(tuple(content)), hunks, reading)
    chosen = [reference.Loc(reference.State(loc.state.value), *loc[1:]) for loc in reading.located]
    plain = reference.possible_places(reference.Lines(content), hunks, chosen)
    return [[(p.state.value, p.pos) for p in hunk] for hunk in ours], [[(s.value, p) for s, p in h] for h in plain]


def rivals(content: Sequence[bytes], hunks: Sequence[Hunk], reading: Reading) -> list[object]:
    """state._unrivalled on one complete reading: per hunk None (it stands) or the other places it names."""
    lines = FileLines(tuple(content))
    judged = state._unrivalled(lines, hunks, reading, matching.possible_places(lines, hunks, reading))
    out: list[object] = []
    for before, after in zip(reading.located, judged.located, strict=True):
        if after.state is HunkState.AMBIGUOUS:
            out.append(sorted(set(after.candidates[1:])))
        else:
            assert after == before
            out.append(None)
    return out


def plain_rivals(content: Sequence[bytes], hunks: Sequence[Hunk], reading: Reading) -> list[object]:
    """The reference's brute force on the same reading (the lines of the places it names)."""
    chosen = [reference.Loc(reference.State(loc.state.value), *loc[1:]) for loc in reading.located]
    plain = reference.Lines(content)
    found = reference.rivals(plain, hunks, chosen, reference.possible_places(plain, hunks, chosen))
    return [None if f is None else sorted({pos for _, pos in f}) for f in found]


def disagreements(
    count: int, seed: int, read: Callable[[FileLines, Sequence[Hunk]], tuple[list[Reading], bool]]
) -> tuple[int, list[str]]:
    rng = random.Random(seed)
    cases, problems = 0, []
    for n in range(count):
        for content, hunks in shapes(rng):
            cases += 1
            lines = FileLines(tuple(content))
            ours, ours_cut = read(lines, hunks)
            plain, plain_cut = reference.read_file(reference.Lines(content), hunks)
            if (summary(ours), ours_cut) != (summary(plain), plain_cut):
                problems.append(f"file {n}: read_file differs on {content!r} with {hunks!r}")
            for reading in ours[:2]:
                if reading.complete:
                    mine, theirs = places(content, hunks, reading)
                    if mine != theirs:
                        problems.append(f"file {n}: possible_places differs on {content!r}: {mine} != {theirs}")
                    elif rivals(content, hunks, reading) != plain_rivals(content, hunks, reading):
                        problems.append(f"file {n}: the gap evidence differs on {content!r} with {hunks!r}")
            for reverse in (False, True):
                if matching.simulate_git(lines, hunks, reverse=reverse) != reference.simulate_git(
                    reference.Lines(content), hunks, reverse=reverse
                ):
                    problems.append(f"file {n}: simulate_git(reverse={reverse}) differs on {content!r}")
    return cases, problems


def test_the_optimised_matcher_reads_every_shape_as_the_plain_one() -> None:
    cases, problems = disagreements(EXAMPLES, 15, matching.read_file)
    assert cases > EXAMPLES * 10  # the generator yields about 15 shapes per file
    assert problems == []


def test_many_hunks_in_one_file_read_alike() -> None:
    """Hundreds of hunks in one file of repeated lines: long in-place runs between ties, and the cut."""
    rng = random.Random(7)
    words = [b"x\n", b"y\n", b"z\n", b"w\n"]
    old = [rng.choice(words) for _ in range(3000)]
    new = list(old)
    for at in sorted(rng.sample(range(len(new)), 300), reverse=True):
        new[at] = b"changed %d\n" % at
    hunks = make_hunks(old, new, 1)
    assert len(hunks) > 100
    for content in (old, new, patched(old, hunks, set(range(0, len(hunks), 2))), [b"x\n", *old]):
        ours = matching.read_file(FileLines(tuple(content)), hunks)
        plain = reference.read_file(reference.Lines(content), hunks)
        assert (summary(ours[0]), ours[1]) == (summary(plain[0]), plain[1])


def test_the_comparison_catches_a_matcher_that_prefers_the_post_image(monkeypatch: pytest.MonkeyPatch) -> None:
    """The generator must be able to fail: a matcher that breaks pre-/post-image ties one way is caught."""
    plain_choices = matching._choices

    def biased(content: FileLines, hunk: Hunk, expected: int, header: int, low: int) -> list[matching.Located]:
        return plain_choices(content, hunk, expected, header, low)[-1:]

    monkeypatch.setattr(matching, "_choices", biased)
    _, problems = disagreements(60, 15, matching.read_file)
    assert problems


def test_ties_at_every_hunk_read_alike_up_to_the_cut() -> None:
    """A file of one repeated line, and hunks that only add more of it: both images of every hunk are at the
    expected line, every hunk reads both ways, the readings double per hunk until MAX_READINGS cuts them."""
    hunks = [Hunk(k + 1, 0, 10 * k + 2, 2, 10 * k + 2, 3, (b"a\n",) * 2, (b"a\n",) * 3, 0, 1) for k in range(12)]
    content = (b"a\n",) * 200
    ours = matching.read_file(FileLines(content), hunks)
    plain = reference.read_file(reference.Lines(content), hunks)
    assert ours[1] and len(ours[0]) == matching.MAX_READINGS
    assert (summary(ours[0]), ours[1]) == (summary(plain[0]), plain[1])
