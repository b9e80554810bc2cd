"""The records a diff becomes: frozen, bytes-exact, and shared by every later stage.

`FilePatch` is one file section of a diff and `Hunk` one hunk of it; `HunkSet` (patchkit.diff.hunkset) is the diff
minus the manifest's excludes. Nothing here parses or reads files.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from itertools import chain
from typing import NamedTuple

DEV_NULL = "/dev/null"
MODE_FILE = 0o100644
MODE_EXEC = 0o100755
MODE_SYMLINK = 0o120000
MODE_GITLINK = 0o160000


class FileOp(Enum):
    MODIFY = "modify"
    CREATE = "create"
    DELETE = "delete"
    RENAME = "rename"


@dataclass(frozen=True)
class Hunk:
    """One hunk. Images are raw lines with their endings; a side that ends without a newline lacks it."""

    index: int  # 1-based, within its FilePatch
    diff_line: int  # line of the @@ header in the diff file
    old_start: int
    old_len: int
    new_start: int
    new_len: int
    old_lines: tuple[bytes, ...]
    new_lines: tuple[bytes, ...]
    leading: int  # context lines before the first change
    trailing: int  # context lines after the last change
    # How far the hunks that excludes dropped moved this one: old_start and new_start are the header git would
    # see in the filtered diff (a file touched twice: the dropped hunks of its earlier sections move both
    # sides), and `header` still shows the diff's own lines.
    dropped_old: int = 0  # diff's old_start - old_start
    dropped_growth: int = 0  # diff's new_start - new_start
    # The context runs between the hunk's first and last change, as (new-side offset, old-side offset, length):
    # where a line of the new image sits in the old one (hunk excludes in a file touched twice need it: a later
    # section's line inside a dropped hunk is where the hunk's old image has it). Empty for one run of changes;
    # set by the parser only (filtering runs on parsed diffs), so not part of a hunk's identity.
    gaps: tuple[tuple[int, int, int], ...] = field(default=(), compare=False)

    @property
    def at_end(self) -> bool:
        """A hunk without trailing context must match at the end of the file, as in git (and only then).

        Short trailing context proves nothing: a -U1 diff has one line of it everywhere.
        """
        return self.trailing == 0

    @property
    def header(self) -> str:
        return (f"@@ -{self.old_start + self.dropped_old},{self.old_len} "
                f"+{self.new_start + self.dropped_growth},{self.new_len} @@")

    @property
    def old_index(self) -> int:
        """0-based position of the pre-image in the file it was made from."""
        return self.old_start if self.old_len == 0 else self.old_start - 1

    @property
    def new_index(self) -> int:
        """0-based position of the post-image in the file the diff made."""
        return self.new_start if self.new_len == 0 else self.new_start - 1


@dataclass(frozen=True)
class FilePatch:
    """One file section of a diff (a file touched twice has two sections)."""

    old_path: str | None  # None when the file is created
    new_path: str | None  # None when the file is deleted
    old_mode: int | None
    new_mode: int | None
    hunks: tuple[Hunk, ...]
    diff_line: int
    binary: bool
    # The git blob ids of the whole file before and after, as the section's `index` line gives them
    # (abbreviated hex). Evidence for the judgement (a file whose blob id is one of them is exactly that side);
    # never required. None when the diff has no index line, or (new) when excludes dropped some of its hunks.
    old_blob: str | None = None
    new_blob: str | None = None
    # The sha256 of the whole file on the very image the patch targets, before and after this section's hunks
    # (the manifest's `[base]` fingerprint and `[base_applied]`, attached by run.provenance.with_fingerprint):
    # evidence like the blob ids, for a diff ported to another image, where the blob ids prove nothing. None
    # when the manifest records none; not part of the section's identity (the diff has not changed).
    base_sha256: str | None = field(default=None, compare=False)
    applied_sha256: str | None = field(default=None, compare=False)

    @property
    def path(self) -> str:
        """The path users know the file by: the new one, or the old one for a deletion."""
        path = self.new_path or self.old_path
        assert path is not None  # parse_diff never builds a section without a path
        return path

    @property
    def op(self) -> FileOp:
        if self.old_path is None:
            return FileOp.CREATE
        if self.new_path is None:
            return FileOp.DELETE
        if self.old_path != self.new_path:
            return FileOp.RENAME
        return FileOp.MODIFY

    @property
    def mode_change(self) -> tuple[int, int] | None:
        """(old, new) when an existing file's mode changes."""
        old, new = self.old_mode, self.new_mode
        if self.op in (FileOp.MODIFY, FileOp.RENAME) and old and new and old != new:
            return old, new
        return None

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(p for p in dict.fromkeys((self.old_path, self.new_path)) if p is not None)

    def whole(self, new: bool) -> bytes:
        """The whole file a created (`new`) or deleted section holds: its hunks' images, joined."""
        return b"".join(chain.from_iterable(h.new_lines if new else h.old_lines for h in self.hunks))


class Diff(NamedTuple):
    """A parsed diff: every file section, in diff order, before the manifest's excludes."""

    source: str  # the diff's file name, for messages
    files: tuple[FilePatch, ...]


def paths_of(files: Iterable[FilePatch]) -> list[str]:
    return list(dict.fromkeys(p for f in files for p in f.paths))


def side_extent(start: int, count: int) -> tuple[int, int]:
    """The first and last place one side of a hunk (its header's start and count) takes, in half lines: line L is
    2L, and a side of no lines (git writes `-N,0`, N the line before it) the gap 2N+1 after line N; a side with
    lines covers them all. A file's hunks are in line order when each side of each starts past the last place of
    the one before (diffs._check_order, and compiled's load of the same rule)."""
    if count == 0:
        return 2 * start + 1, 2 * start + 1
    return 2 * start, 2 * (start + count - 1)
