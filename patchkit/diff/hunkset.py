"""The filtered hunk set: the diff minus the manifest's excludes, the single source of truth for every check and
every write.

A module of its own, apart from the records it holds (patchkit.diff.hunks), so that an answer that holds no hunks
(the restart fast path's empty set) loads neither them nor their classes.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from patchkit.diff.hunks import FilePatch


@dataclass(frozen=True)
class HunkSet:
    """The diff minus the excluded files: what patchkit checks, applies and reverts. Nothing else."""

    source: str
    files: tuple[FilePatch, ...]
    excluded: tuple[str, ...]  # paths of the diff removed by the manifest's excludes

    @functools.cached_property
    def digest(self) -> str:
        """sha256 of a canonical form: paths, modes and hunk bodies; no timestamps, index lines or headings."""
        # Computed once (several callers ask) and fed per hunk, not per line: same bytes, far fewer calls.
        h = hashlib.sha256()
        for f in self.files:
            h.update(f"F\0{f.old_path}\0{f.new_path}\0{f.old_mode}\0{f.new_mode}\0{f.binary}\n".encode())
            for hunk in f.hunks:
                h.update(f"H\0{hunk.header}\n".encode())
                if hunk.old_lines:
                    h.update(b"-" + b"\0-".join(hunk.old_lines) + b"\0")
                if hunk.new_lines:
                    h.update(b"+" + b"\0+".join(hunk.new_lines) + b"\0")
        return h.hexdigest()

    @property
    def hunk_count(self) -> int:
        return sum(len(f.hunks) for f in self.files)
