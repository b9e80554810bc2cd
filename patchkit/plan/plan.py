"""Compute every new file content in memory, forward or reverse, before anything is written.

The plan replays the file sections in order (reverse order for a revert) over an in-memory overlay of the
tree (state.replay_sections), so a file touched twice sees the content the first section leaves. state.py
only reports a state after the same replay passed its round trip, so the planned tree judges as fully applied
(or fully unapplied, for a revert); the plan checks that once more, and a plan that fails the check is an
internal error, never a write. A section that cannot move refuses the whole plan, so a conflict in the last
file means no file is touched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from patchkit.errors import InternalError, RefusedError
from patchkit.input.tree import Snapshot
from patchkit.judge.state import judge_sections, replay_sections
from patchkit.outcome import PatchState, combine

if TYPE_CHECKING:
    from patchkit.judge.treestate import TreeState


@dataclass(frozen=True)
class FileChange:
    path: str
    before: Snapshot
    after: Snapshot  # after.data is None: delete the file


@dataclass(frozen=True)
class Plan:
    forward: bool
    changes: tuple[FileChange, ...]


def plan_changes(tree: TreeState, *, forward: bool) -> Plan:
    """Every change `apply` (forward) or `revert` would make to this tree, or RefusedError."""
    overlay, problem = replay_sections(tree.files, tree.snapshots, forward=forward)
    if problem is not None:
        raise RefusedError(problem.message, where=problem.where)
    goal = PatchState.APPLIED if forward else PatchState.UNAPPLIED
    after = combine(v.state for v in judge_sections(tree.hunk_set.files, overlay))
    if after is not goal:
        raise InternalError(
            f"the planned result would read as {after.value}, not {goal.value}, although the tree read as "
            f"{tree.state.value} after its round trip; nothing was written",
        )
    changes = tuple(
        FileChange(path, tree.snapshots[path], overlay[path])
        for path in overlay
        if (overlay[path].data, overlay[path].mode) != (tree.snapshots[path].data, tree.snapshots[path].mode)
    )
    return Plan(forward, changes)
