"""Pure: where does a hunk's pre- or post-image sit in a file's lines? No fuzz, offsets allowed.

A hunk is first tried at its expected position (its header line, shifted by where the hunks before it were
found), then at the nearest exact match after the previous hunk. Like git, a hunk that starts at line 1 must
match at the start of the file and a hunk without trailing context must match at its end, so a hunk that
deletes the last lines of a file cannot "match" an earlier, shorter prefix.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

from patchkit.hunks import Hunk


class HunkState(Enum):
    APPLIED = "applied"  # the post-image is there
    UNAPPLIED = "unapplied"  # the pre-image is there
    CONFLICT = "conflict"  # neither is
    AMBIGUOUS = "ambiguous"  # both are, and position cannot tell which one is the hunk


@dataclass
class FileLines:
    """A file's content split into lines that keep their endings, with a lazy first-line index."""

    lines: tuple[bytes, ...]
    _index: dict[bytes, list[int]] | None = field(default=None, repr=False)

    @classmethod
    def from_bytes(cls, data: bytes) -> FileLines:
        return cls(tuple(split_lines(data)))

    def positions(self, line: bytes) -> list[int]:
        if self._index is None:
            index: dict[bytes, list[int]] = {}
            for i, text in enumerate(self.lines):
                index.setdefault(text, []).append(i)
            self._index = index
        return self._index.get(line, [])

    def matches_at(self, image: Sequence[bytes], pos: int) -> bool:
        end = pos + len(image)
        return pos >= 0 and end <= len(self.lines) and tuple(self.lines[pos:end]) == tuple(image)


def split_lines(data: bytes) -> list[bytes]:
    """Lines with their endings; the last one may lack a newline. Only LF ends a line (CR is content)."""
    # A binary BytesIO splits on LF alone, in C: about 2.5x faster than split() and re-adding each LF.
    return io.BytesIO(data).readlines()


@dataclass(frozen=True)
class Located:
    """Where one hunk was judged to be (0-based line in the current content)."""

    state: HunkState
    pos: int | None  # start of the image that decided the state; None for conflict / ambiguous
    span: int  # length of that image (how many current lines the hunk occupies)
    detail: str | None  # why, for conflicts and ambiguity


def locate(
    content: FileLines, image: Sequence[bytes], expected: int, low: int, at_start: bool, at_end: bool
) -> int | None:
    """The position of `image` nearest to `expected`, not before `low`; None if it does not occur."""
    n, m = len(content.lines), len(image)
    if at_start and at_end:  # the image is the whole file
        candidates: Sequence[int] = [0] if n == m else []
    elif at_start:
        candidates = [0]
    elif at_end:
        candidates = [n - m]
    elif m == 0:
        candidates = [min(max(expected, low), n)]
    elif content.matches_at(image, expected) and expected >= low:
        return expected
    else:
        candidates = sorted(
            (p for p in content.positions(image[0]) if p >= low), key=lambda p: (abs(p - expected), p)
        )
    for pos in candidates:
        if pos >= low and (m == 0 or content.matches_at(image, pos)) and pos + m <= n:
            return pos
    return None


def _found_at(
    content: FileLines, image: Sequence[bytes], expected: int, low: int, at_start: bool, at_end: bool
) -> bool:
    """`locate(...) == expected`, without the whole-file search when the image is not at `expected`."""
    if at_start or at_end or not image:
        return locate(content, image, expected, low, at_start, at_end) == expected  # no search on these paths
    return expected >= low and content.matches_at(image, expected)


def judge_hunk(
    content: FileLines, hunk: Hunk, expected: int, low: int, prefer: HunkState | None = None
) -> Located:
    """Decide one hunk's state on `content`. `expected` and `low` are 0-based current positions.

    `prefer` settles a hunk whose two images both occur (state.py tries each reading of the whole file).
    """
    at_end = hunk.at_end
    # Fast path, same verdicts: when exactly one image sits at `expected`, the tie-break below discards
    # wherever the other one occurs, so searching the whole file for it (building its line index) is waste.
    pre_here = _found_at(content, hunk.old_lines, expected, low, hunk.old_start <= 1, at_end)
    post_here = _found_at(content, hunk.new_lines, expected, low, hunk.new_start <= 1, at_end)
    if pre_here != post_here:
        pre, post = (expected, None) if pre_here else (None, expected)
    else:
        pre = locate(content, hunk.old_lines, expected, low, hunk.old_start <= 1, at_end)
        post = locate(content, hunk.new_lines, expected, low, hunk.new_start <= 1, at_end)
    if pre is not None and post is not None and pre != post:
        # Both images occur. The one at the expected position is the hunk; the other is a look-alike.
        if pre == expected and post != expected:
            post = None
        elif post == expected and pre != expected:
            pre = None
    if pre is not None and post is not None and prefer is HunkState.UNAPPLIED:
        post = None
    elif pre is not None and post is not None and prefer is HunkState.APPLIED:
        pre = None
    if pre is not None and post is not None:
        return Located(
            HunkState.AMBIGUOUS, None, 0,
            f"both the pre-image (line {pre + 1}) and the post-image (line {post + 1}) are present; "
            "content alone cannot tell whether this hunk is applied",
        )
    if post is not None:
        return Located(HunkState.APPLIED, post, len(hunk.new_lines), None)
    if pre is not None:
        return Located(HunkState.UNAPPLIED, pre, len(hunk.old_lines), None)
    return Located(HunkState.CONFLICT, None, 0, explain_conflict(content, hunk, expected))


def explain_conflict(content: FileLines, hunk: Hunk, expected: int) -> str:
    """A one-line reason a hunk matched neither way: line endings, or the first differing line."""
    lines = content.lines
    crlf_file = any(line.endswith(b"\r\n") for line in lines)
    crlf_diff = any(line.endswith(b"\r\n") for line in hunk.old_lines + hunk.new_lines)
    if crlf_file != crlf_diff and _same_without_cr(content, hunk):
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
    return "the hunk's context does not match the file"


def _same_without_cr(content: FileLines, hunk: Hunk) -> bool:
    def norm(seq: Sequence[bytes]) -> tuple[bytes, ...]:
        return tuple(line.replace(b"\r\n", b"\n") for line in seq)

    normal = FileLines(norm(content.lines))
    return any(
        locate(normal, norm(image), 0, 0, False, False) is not None
        for image in (hunk.old_lines, hunk.new_lines)
        if image
    )


def _preview(line: bytes | None) -> str:
    if line is None:
        return "end of file"
    text = line.decode("utf-8", "replace").rstrip("\n")
    return repr(text[:60] + ("..." if len(text) > 60 else ""))
