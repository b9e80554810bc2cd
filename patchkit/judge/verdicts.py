"""The records a judgement produces: per hunk, per file section. Decided by state.py, read by everyone after it.

They live below state.py so that rewrite.py (which turns a verdict into new content, and which state.py uses
to check its own verdicts by a round trip) does not import the module that decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from patchkit.diff.hunks import FileOp, FilePatch, Hunk
from patchkit.input.tree import Snapshot
from patchkit.judge.matching import Located, Reading
from patchkit.outcome import HunkState, PatchState


class Moved(NamedTuple):
    """What the round trip of a file's judgement found on the content it moved the file to, one way: that
    content's reading and its number of lines. state.judge_planned uses it to judge the file a plan writes."""

    reading: Reading
    lines: int


# What a round trip found after moving a file's hunks (reverse, forward): index it with the direction.
Ends = tuple[Moved | None, Moved | None]


class HunkVerdict(NamedTuple):
    """One hunk, located (or not) in the content it was judged on."""

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
    # (reverse, forward): what the judgement's round trip read after moving the hunks that way; None where it
    # did not move them (a pure reading moves one way only) or the verdict did not come from one
    moved: Ends = (None, None)

    @property
    def source_path(self) -> str | None:
        """The path whose content the hunks were matched against."""
        s = self.section
        if s.op is FileOp.RENAME and self.presence is HunkState.APPLIED:
            return s.new_path
        return s.old_path if s.op is not FileOp.CREATE else s.new_path
