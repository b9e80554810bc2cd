"""matching.py: exact location of a hunk's images in git's search order, anchors, offsets and readings."""

from __future__ import annotations

from patchkit.diff.hunks import Hunk
from patchkit.judge.matching import FileLines, locate, read_file, simulate_git, split_lines
from patchkit.outcome import HunkState


def make_hunk(old: list[bytes], new: list[bytes], old_start: int, new_start: int | None = None,
              leading: int = 1, trailing: int = 1, index: int = 1) -> Hunk:
    return Hunk(index, 5, old_start, len(old), new_start or old_start, len(new), tuple(old), tuple(new), leading,
                trailing)


def lines(*items: bytes) -> FileLines:
    return FileLines(tuple(items))


def test_split_lines_keeps_endings_and_a_missing_final_newline() -> None:
    assert split_lines(b"a\r\nb\nc") == [b"a\r\n", b"b\n", b"c"]
    assert split_lines(b"") == []
    assert split_lines(b"\n") == [b"\n"]


def test_nearest_match_in_git_order_and_low_bound() -> None:
    content = lines(b"x\n", b"y\n", b"x\n", b"y\n", b"x\n", b"y\n")
    assert locate(content, (b"x\n", b"y\n"), 3, 0, False, False) == 4  # 2 and 4 tie: git looks down first
    assert locate(content, (b"x\n", b"y\n"), 5, 0, False, False) == 4
    assert locate(content, (b"x\n", b"y\n"), 0, 1, False, False) == 2
    assert locate(content, (b"z\n",), 0, 0, False, False) is None


def test_anchors() -> None:
    content = lines(b"a\n", b"b\n", b"a\n", b"b\n")
    assert locate(content, (b"a\n", b"b\n"), 2, 0, True, False) == 0
    assert locate(content, (b"a\n", b"b\n"), 0, 0, False, True) == 2
    assert locate(content, (b"b\n", b"a\n"), 1, 0, True, False) is None
    # an image anchored at both ends is the whole file
    assert locate(lines(), (), 0, 0, True, True) == 0
    assert locate(content, (), 0, 0, True, True) is None


def test_the_first_look_alone_answers_only_at_the_expected_line_or_the_pin() -> None:
    # search=False (the proof, the common case of read_file, simulate_git's first try): the image at the line
    # asked, or at its pin, else None, though it occurs elsewhere; the full search finds that other place.
    content = lines(b"x\n", b"y\n", b"a\n", b"x\n", b"y\n")
    assert locate(content, (b"x\n", b"y\n"), 3, 0, False, False, search=False) == 3
    assert locate(content, (b"x\n", b"y\n"), 2, 0, False, False, search=False) is None
    assert locate(content, (b"x\n", b"y\n"), 2, 0, False, False) == 3
    assert locate(content, (b"x\n", b"y\n"), 3, 4, False, False, search=False) is None  # before `low`
    assert locate(content, (b"x\n", b"y\n"), 2, 0, False, True, search=False) == 3  # pinned to the end
    assert locate(content, (b"x\n", b"y\n"), 2, 0, True, False, search=False) == 0  # pinned to the start
    assert locate(content, (b"a\n",), 0, 0, False, True, search=False) is None  # not at the end: nowhere


def only(content: FileLines, *hunks: Hunk) -> tuple[tuple[HunkState, ...], tuple[int | None, ...]]:
    readings, cut = read_file(content, hunks)
    assert len(readings) == 1 and not cut
    return readings[0].states, readings[0].positions


def test_hunk_states_with_offset() -> None:
    hunk = make_hunk([b"1\n", b"2\n", b"3\n"], [b"1\n", b"two\n", b"3\n"], old_start=2)
    base = [b"0\n", b"1\n", b"2\n", b"3\n", b"4\n"]
    assert only(lines(*base), hunk) == ((HunkState.UNAPPLIED,), (1,))
    assert only(lines(b"extra\n", b"extra\n", *base), hunk) == ((HunkState.UNAPPLIED,), (3,))
    assert only(lines(b"0\n", b"1\n", b"two\n", b"3\n", b"4\n"), hunk) == ((HunkState.APPLIED,), (1,))
    states, positions = only(lines(b"0\n", b"1\n", b"TWO\n", b"3\n", b"4\n"), hunk)
    assert states == (HunkState.CONFLICT,) and positions == (None,)
    conflict = read_file(lines(b"0\n", b"1\n", b"TWO\n", b"3\n", b"4\n"), [hunk])[0][0].located[0]
    assert conflict.detail is not None and "TWO" in conflict.detail and "line 3" in conflict.detail


def test_the_nearer_image_decides_and_a_tie_gives_two_readings() -> None:
    hunk = make_hunk([b"p\n", b"old\n", b"q\n"], [b"p\n", b"new\n", b"q\n"], old_start=6)
    filler = [b"-\n"] * 3
    # pre-image at line 6 (expected), post-image copy farther down: unapplied
    near_pre = lines(*filler, b"a\n", b"b\n", b"p\n", b"old\n", b"q\n", *filler, b"p\n", b"new\n", b"q\n")
    assert only(near_pre, hunk)[0] == (HunkState.UNAPPLIED,)
    # the post-image two lines from the expected line, the pre-image four: applied
    near_post = lines(*filler, b"p\n", b"new\n", b"q\n", b"z\n", b"z\n", b"z\n", b"p\n", b"old\n", b"q\n")
    assert only(near_post, hunk)[0] == (HunkState.APPLIED,)
    # equally near (two above, two below): both readings, unapplied first
    tie = lines(*filler, b"p\n", b"new\n", b"q\n", b"z\n", b"p\n", b"old\n", b"q\n")
    readings, _ = read_file(tie, [hunk])
    assert [r.states for r in readings] == [(HunkState.UNAPPLIED,), (HunkState.APPLIED,)]


def test_offsets_accumulate_from_hunk_to_hunk() -> None:
    body = [b"l%d\n" % i for i in range(30)]
    first = make_hunk(body[2:5], [body[2], b"A\n", body[4]], old_start=3, index=1)
    second = make_hunk(body[20:23], [body[20], b"B\n", body[22]], old_start=21, index=2)
    shifted = lines(*[b"new\n"] * 4, *body)  # four lines above both hunks
    assert only(shifted, first, second) == ((HunkState.UNAPPLIED,) * 2, (6, 24))


def test_a_look_alike_nearer_to_the_header_line_makes_the_hunk_ambiguous() -> None:
    # git searches hunk 2 from its header line (no running offset): a copy near there would fool it
    body = [b"l%d\n" % i for i in range(40)]
    first = make_hunk(body[2:5], [body[2], b"A\n", body[4]], old_start=3, index=1)
    second = make_hunk(body[20:23], [body[20], b"B\n", body[22]], old_start=21, index=2)
    # 8 lines above everything, a copy of hunk 2's pre-image at line 23: the running offset expects hunk 2 at
    # line 29 (the real one is at 32), its header says line 21 (the copy is nearer)
    tree = [*[b"new\n"] * 8, *body[:14], *body[20:23], *body[14:]]
    readings, _ = read_file(FileLines(tuple(tree)), [first, second])
    assert len(readings) == 1
    hunk2 = readings[0].located[1]
    assert hunk2.state is HunkState.AMBIGUOUS and hunk2.detail is not None
    assert set(hunk2.candidates) == {31, 22}
    assert simulate_git(FileLines(tuple(tree)), [first, second], reverse=False) == (10, 22)


def test_deleting_the_last_line_does_not_match_a_prefix() -> None:
    # post-image [a, b] is a prefix of pre-image [a, b, c]; the end anchor (no trailing context) decides
    hunk = Hunk(1, 5, 1, 3, 1, 2, (b"a\n", b"b\n", b"c\n"), (b"a\n", b"b\n"), 2, 0)
    assert hunk.at_end
    assert only(lines(b"a\n", b"b\n", b"c\n"), hunk)[0] == (HunkState.UNAPPLIED,)
    assert only(lines(b"a\n", b"b\n"), hunk)[0] == (HunkState.APPLIED,)


def test_short_trailing_context_is_not_an_end_anchor() -> None:
    # one line of trailing context (a -U1 diff): the hunk may sit anywhere, like in git
    hunk = make_hunk([b"a\n", b"b\n", b"c\n"], [b"a\n", b"B\n", b"c\n"], old_start=2, leading=1, trailing=1)
    assert not hunk.at_end
    assert only(lines(b"0\n", b"a\n", b"b\n", b"c\n", b"more\n", b"more\n"), hunk) == ((HunkState.UNAPPLIED,), (1,))


def test_line_ending_mismatch_is_explained() -> None:
    hunk = make_hunk([b"1\n", b"2\n", b"3\n"], [b"1\n", b"two\n", b"3\n"], old_start=1)
    readings, _ = read_file(lines(b"1\r\n", b"2\r\n", b"3\r\n"), [hunk])
    located = readings[0].located[0]
    assert located.state is HunkState.CONFLICT
    assert located.detail is not None and "line endings differ" in located.detail and "CRLF" in located.detail


def test_a_crlf_diff_on_an_lf_file_is_explained_too() -> None:
    """The other way round: the diff's lines end in CRLF, the file's in LF.

    Kills patchkit/judge/matching.py:409:core/ReplaceComparisonOperator_NotEq_Gt#3 (`crlf_file > crlf_diff`: only
    a CRLF file was explained, this case said which line differs instead)."""
    hunk = make_hunk([b"1\r\n", b"2\r\n", b"3\r\n"], [b"1\r\n", b"two\r\n", b"3\r\n"], old_start=1)
    readings, _ = read_file(lines(b"1\n", b"2\n", b"3\n"), [hunk])
    located = readings[0].located[0]
    assert located.state is HunkState.CONFLICT
    assert located.detail == ("line endings differ: the file uses LF, the diff CRLF; regenerate the diff from a "
                              "tree with the same line endings"), located.detail


def test_a_crlf_file_whose_hunk_is_below_its_first_line_is_explained_too() -> None:
    """The LF diff's hunk sits at lines 4 to 6 of the CRLF file: the line endings are named all the same.

    Kills patchkit/judge/matching.py:534:core/ReplaceFalseWithTrue#12 (`locate(normal, ..., True, False)`: the
    image, line endings aside, was looked for at the first line only, so this hunk was reported as the line
    that differs)."""
    hunk = make_hunk([b"4\n", b"5\n", b"6\n"], [b"4\n", b"five\n", b"6\n"], old_start=4)
    readings, _ = read_file(lines(*(b"%d\r\n" % i for i in range(1, 10))), [hunk])
    located = readings[0].located[0]
    assert located.state is HunkState.CONFLICT
    assert located.detail == ("line endings differ: the file uses CRLF, the diff LF; regenerate the diff from a "
                              "tree with the same line endings"), located.detail


def test_a_post_image_header_at_line_0_pins_it_to_the_start_even_with_context() -> None:
    """A hand-written `@@ -5,3 +0,3 @@` (git never writes +0 for lines): git pins a post-image whose side starts
    at line 0 or 1 to the start of the file, so on the file with the change at lines 5 to 7 it is not found
    there and the hunk is a conflict, as `git apply -R` fails on it.

    Kills patchkit/judge/matching.py:203:core/ReplaceComparisonOperator_Gt_NotEq#1 (`new_start != 1`: a header
    at 0 took the unpinned fast path, which read the hunk applied at line 5)."""
    hunk = Hunk(1, 5, 5, 3, 0, 3, (b"l5\n", b"l6\n", b"l7\n"), (b"l5\n", b"six\n", b"l7\n"), 1, 1)
    content = [b"l%d\n" % i for i in range(1, 13)]
    content[5] = b"six\n"
    readings, _ = read_file(lines(*content), [hunk])
    assert [loc.state for loc in readings[0].located] == [HunkState.CONFLICT], readings
