"""matching.simulate_git against the plain model of `git apply` (tests/matching_reference.py) on drifted trees.

simulate_git keeps the image as modified so far (the hunks git applied before) in a head that only grows, and
looks an image up there and in the unchanged rest of the content without rebuilding the whole image per hunk;
the reference rebuilds it for every hunk that is not at its expected line and tries every position. Both must
put every hunk at the same line, on trees where that matters: every hunk off its header (lines added or removed
above or between the hunks, or headers moved by +-k lines, as on a ported tree), images that recur, copies of
a later hunk's image inside an earlier hunk's new lines (git may find the later hunk there: a match in the
image as modified), hunks pinned to the start or the end of the file, and a last line without its newline
(git's whitespace quirk). PATCHKIT_SIMULATE_EXAMPLES sets the number of generated files (default 3000, a few
seconds); the generator must meet each of those cases (the counts are asserted), and a simulation that ignores
the earlier hunks' new lines is caught (the last test).
"""

from __future__ import annotations

import dataclasses
import os
import random
from collections.abc import Iterator, Sequence

import pytest

from patchkit.diff.hunks import Hunk
from patchkit.judge import matching
from patchkit.judge.matching import FileLines
from tests import matching_reference as reference
from tests.test_matching_reference import make_hunks, patched

EXAMPLES = int(os.environ.get("PATCHKIT_SIMULATE_EXAMPLES", "3000"))
WORDS = [b"a", b"b", b"}", b"", b"    pass", b"x = 1", b"x = 1 ", b"def f():"]


def trees(rng: random.Random) -> Iterator[tuple[list[bytes], list[Hunk], bool]]:
    """(content, hunks, reverse) of one generated diff: pristine trees (git apply), patched ones (git apply -R)
    and partial ones (both), drifted."""
    words = [w + b"\n" for w in WORDS[: rng.randint(2, len(WORDS))]]
    old = [rng.choice(words) for _ in range(rng.randint(0, 50))]
    new = list(old)
    for _ in range(rng.randint(1, 6)):
        at = rng.randint(0, len(new))
        op = rng.choice(["insert", "delete", "replace", "copy", "copy"])
        if op == "copy" and new:  # a block of the file again, a few lines above or below where it is
            start = rng.randrange(len(new))
            block = new[start:start + rng.randint(1, 4)]
            at = min(max(start + rng.randint(-8, 8), 0), len(new))
            new[at:at] = block
        elif op == "insert" or not new:
            new[at:at] = [rng.choice(words) for _ in range(rng.randint(1, 3))]
        elif op == "delete":
            del new[at:at + rng.randint(1, 3)]
        else:
            new[at:at + 1] = [rng.choice(words) for _ in range(rng.randint(1, 2))]
    if old and rng.random() < 0.3:  # no newline at the end of the file, on one side or both
        old[-1] = old[-1].rstrip(b"\n")
        if new and rng.random() < 0.5:
            new[-1] = new[-1].rstrip(b"\n")
    hunks = make_hunks(old, new, rng.choice([0, 1, 1, 2, 3]))
    if not hunks:
        return
    every = set(range(len(hunks)))
    partial = patched(old, hunks, {i for i in every if rng.random() < 0.5})
    for content, reverse in ((old, False), (new, True), (partial, False), (partial, True)):
        yield content, hunks, reverse
        for _ in range(2):
            drifted = list(content)
            for _ in range(rng.randint(1, 3)):  # lines added or removed above a hunk or between two
                at = rng.choice([0, 0, rng.randint(0, len(drifted))])
                if rng.random() < 0.6:
                    drifted[at:at] = [rng.choice(words) for _ in range(rng.randint(1, 4))]
                else:
                    del drifted[at:at + rng.randint(1, 3)]
            yield drifted, hunks, reverse
        k = rng.choice([-3, -2, -1, 1, 2, 3])  # every header k lines off, on the content as it is and drifted
        moved = [dataclasses.replace(h, old_start=max(h.old_start + k, 0), new_start=max(h.new_start + k, 0))
                 for h in hunks]
        yield content, moved, reverse
        yield drifted, moved, reverse


def plain(content: Sequence[bytes], hunks: Sequence[Hunk], reverse: bool) -> tuple[int | None, ...]:
    return reference.simulate_git(reference.Lines(content), hunks, reverse=reverse)


def compare(count: int, seed: int) -> tuple[dict[str, int], list[str]]:
    """Both simulations on `count` generated diffs' trees: what the cases met, and every disagreement."""
    rng = random.Random(seed)
    met = {"cases": 0, "off the header": 0, "above the end of the hunk before": 0, "pinned": 0, "no newline": 0,
           "fails": 0}
    problems = []
    for n in range(count):
        for content, hunks, reverse in trees(rng):
            met["cases"] += 1
            theirs = plain(content, hunks, reverse)
            ours = matching.simulate_git(FileLines(tuple(content)), hunks, reverse=reverse)
            if ours != theirs:
                problems.append(f"file {n}: reverse={reverse}: {ours} != {theirs} on {content!r} with {hunks!r}")
            end = 0
            for hunk, pos in zip(hunks, theirs, strict=True):
                image = hunk.new_lines if reverse else hunk.old_lines
                start = hunk.new_start if reverse else hunk.old_start
                header = (hunk.old_start if reverse else hunk.new_start) - 1
                if pos is None:
                    met["fails"] += 1
                    break
                met["off the header"] += pos != header
                met["above the end of the hunk before"] += pos < end
                met["pinned"] += start <= 1 or hunk.at_end
                met["no newline"] += bool(image) and not image[-1].endswith(b"\n")
                end = pos + len(image)
    return met, problems


def test_simulate_git_puts_every_hunk_where_the_plain_model_does() -> None:
    met, problems = compare(EXAMPLES, 0)
    assert problems == []
    # the cases that matter were met (at the default count: about 48k cases, 900 hunks above the end of the one before)
    assert met["cases"] > EXAMPLES * 10
    assert min(met.values()) > EXAMPLES // 10, met


def test_a_long_drifted_file_is_simulated_alike() -> None:
    """The benchmark's drifted shape, small: one line added at the top of a file of many hunks whose lines
    repeat, so every hunk is one line off its header and git searches for each one."""
    rng = random.Random(3)
    words = [b"x\n", b"y\n", b"z\n", b"\n"]
    old = [rng.choice(words) for _ in range(1500)]
    new = list(old)
    for at in sorted(rng.sample(range(len(new)), 120), reverse=True):
        new[at:at + 1] = rng.choice([[b"changed %d\n" % at], [], [b"x\n", b"y\n"]])
    hunks = make_hunks(old, new, 2)
    assert len(hunks) > 60
    for content, reverse in (([b"top\n", *old], False), ([b"top\n", *new], True), (old[1:], False)):
        found = matching.simulate_git(FileLines(tuple(content)), hunks, reverse=reverse)
        assert found == plain(content, hunks, reverse)
        assert None not in found


def test_the_comparison_catches_a_simulation_blind_to_earlier_new_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison must be able to fail: a search that only looks past the last hunk applied (in the content
    as it is) misses git's matches in the earlier hunks' new lines."""

    def blind(self: matching._Modified, line: bytes) -> matching._Joined:
        seen = plain_positions(self, line)
        return matching._Joined([], seen.below, seen.low, seen.offset)

    plain_positions = matching._Modified.positions
    monkeypatch.setattr(matching._Modified, "positions", blind)
    _, problems = compare(100, 0)
    assert problems
