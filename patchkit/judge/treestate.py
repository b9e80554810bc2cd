"""A tree as judged: the judgement's answer for one hunk set, in a module of its own.

state.scan_tree makes it; the planner, provenance, the actions and the report read it. It sits apart from the
judging modules (state, matching, verdicts, rewrite) so that a restart the applied records answer (an empty one,
patchkit.run.fastpath) builds its answer without loading them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from patchkit.outcome import HunkState, PatchState, combine

if TYPE_CHECKING:
    from pathlib import Path

    from patchkit.diff.hunkset import HunkSet
    from patchkit.input.tree import Snapshot
    from patchkit.judge.verdicts import FileVerdict


@dataclass(frozen=True)
class TreeState:
    """A tree as judged: every section's verdict, on the snapshots read once (state.scan_tree)."""

    root: Path
    hunk_set: HunkSet
    files: tuple[FileVerdict, ...]
    snapshots: Mapping[str, Snapshot]  # every path of the hunk set, as read from disk once

    @property
    def state(self) -> PatchState:
        return combine(f.state for f in self.files)

    def first_undecided(self) -> str:
        """The first hunk (or file) that keeps the tree from a clean state, with why: refusals name it."""
        for verdict in self.files:
            for hv in verdict.hunks:
                if hv.state in (HunkState.AMBIGUOUS, HunkState.CONFLICT):
                    return f"{verdict.section.path} hunk {hv.hunk.index} {hv.hunk.header}: {hv.located.detail}"
            if verdict.state in (PatchState.AMBIGUOUS, PatchState.CONFLICT):
                return f"{verdict.section.path}: {verdict.detail}"
        return "no single hunk is at fault"
