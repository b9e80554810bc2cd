"""matching.py: exact location of a hunk's images, anchors, offsets and ambiguity."""

from __future__ import annotations

from patchkit.hunks import Hunk
from patchkit.matching import FileLines, HunkState, judge_hunk, locate, split_lines


def make_hunk(old: list[bytes], new: list[bytes], old_start: int, new_start: int | None = None,
              leading: int = 1, trailing: int = 1) -> Hunk:
    return Hunk(1, 5, old_start, len(old), new_start or old_start, len(new), tuple(old), tuple(new), leading,
                trailing)


def lines(*items: bytes) -> FileLines:
    return FileLines(tuple(items))


def test_split_lines_keeps_endings_and_a_missing_final_newline() -> None:
    assert split_lines(b"a\r\nb\nc") == [b"a\r\n", b"b\n", b"c"]
    assert split_lines(b"") == []
    assert split_lines(b"\n") == [b"\n"]


def test_nearest_match_wins_and_low_bound_is_respected() -> None:
    content = lines(b"x\n", b"y\n", b"x\n", b"y\n", b"x\n", b"y\n")
    assert locate(content, [b"x\n", b"y\n"], 3, 0, False, False) == 2  # 2 and 4 tie; the earlier wins
    assert locate(content, [b"x\n", b"y\n"], 5, 0, False, False) == 4
    assert locate(content, [b"x\n", b"y\n"], 0, 1, False, False) == 2
    assert locate(content, [b"z\n"], 0, 0, False, False) is None


def test_anchors() -> None:
    content = lines(b"a\n", b"b\n", b"a\n", b"b\n")
    assert locate(content, [b"a\n", b"b\n"], 2, 0, True, False) == 0
    assert locate(content, [b"a\n", b"b\n"], 0, 0, False, True) == 2
    assert locate(content, [b"b\n", b"a\n"], 1, 0, True, False) is None
    # an image anchored at both ends is the whole file
    assert locate(lines(), [], 0, 0, True, True) == 0
    assert locate(content, [], 0, 0, True, True) is None


def test_hunk_states_with_offset() -> None:
    hunk = make_hunk([b"1\n", b"2\n", b"3\n"], [b"1\n", b"two\n", b"3\n"], old_start=2)
    base = [b"0\n", b"1\n", b"2\n", b"3\n", b"4\n"]
    assert judge_hunk(lines(*base), hunk, 1, 0).state is HunkState.UNAPPLIED
    shifted = lines(b"extra\n", b"extra\n", *base)
    located = judge_hunk(shifted, hunk, 1, 0)
    assert (located.state, located.pos) == (HunkState.UNAPPLIED, 3)
    patched = lines(b"0\n", b"1\n", b"two\n", b"3\n", b"4\n")
    assert judge_hunk(patched, hunk, 1, 0).state is HunkState.APPLIED
    drifted = lines(b"0\n", b"1\n", b"TWO\n", b"3\n", b"4\n")
    conflict = judge_hunk(drifted, hunk, 1, 0)
    assert conflict.state is HunkState.CONFLICT
    assert conflict.detail is not None and "TWO" in conflict.detail and "line 3" in conflict.detail


def test_both_images_present_away_from_expected_is_ambiguous() -> None:
    hunk = make_hunk([b"p\n", b"old\n", b"q\n"], [b"p\n", b"new\n", b"q\n"], old_start=1, leading=1)
    hunk = Hunk(1, 5, 10, 3, 10, 3, hunk.old_lines, hunk.new_lines, 1, 1)  # expected far from both copies
    content = lines(b"p\n", b"old\n", b"q\n", b"-\n", b"-\n", b"-\n", b"-\n", b"-\n", b"-\n", b"-\n",
                    b"-\n", b"-\n", b"-\n", b"-\n", b"-\n", b"-\n", b"p\n", b"new\n", b"q\n")
    located = judge_hunk(content, hunk, 9, 0)
    assert located.state is HunkState.AMBIGUOUS
    assert located.detail is not None and "line 1" in located.detail and "line 17" in located.detail


def test_image_at_the_expected_position_beats_a_look_alike() -> None:
    hunk = Hunk(1, 5, 1, 2, 1, 2, (b"a\n", b"old\n"), (b"a\n", b"new\n"), 1, 0)
    hunk = Hunk(1, 5, 2, 2, 2, 2, hunk.old_lines, hunk.new_lines, 1, 1)
    content = lines(b"top\n", b"a\n", b"old\n", b"mid\n", b"a\n", b"new\n", b"end\n")
    located = judge_hunk(content, hunk, 1, 0)
    assert (located.state, located.pos) == (HunkState.UNAPPLIED, 1)


def test_deleting_the_last_line_does_not_match_a_prefix() -> None:
    # post-image [a, b] is a prefix of pre-image [a, b, c]; without the end anchor it would look applied
    hunk = Hunk(1, 5, 1, 3, 1, 2, (b"a\n", b"b\n", b"c\n"), (b"a\n", b"b\n"), 2, 0, at_end=True)
    assert judge_hunk(lines(b"a\n", b"b\n", b"c\n"), hunk, 0, 0).state is HunkState.UNAPPLIED
    assert judge_hunk(lines(b"a\n", b"b\n"), hunk, 0, 0).state is HunkState.APPLIED


def test_line_ending_mismatch_is_explained() -> None:
    hunk = make_hunk([b"1\n", b"2\n", b"3\n"], [b"1\n", b"two\n", b"3\n"], old_start=1)
    crlf = lines(b"1\r\n", b"2\r\n", b"3\r\n")
    located = judge_hunk(crlf, hunk, 0, 0)
    assert located.state is HunkState.CONFLICT
    assert located.detail is not None and "line endings differ" in located.detail and "CRLF" in located.detail
