"""Compute every new file content in memory, forward or reverse, before anything is written.

The plan replays the file sections in order (reverse order for a revert) over an in-memory overlay of the
tree (state.replay_sections), so a file touched twice sees the content the first section leaves. state.py
only reports a state after the same replay passed its round trip, so the planned tree judges as fully applied
(or fully unapplied, for a revert); the plan checks that once more, and a plan that fails the check is an
internal error, never a write. A section that cannot move refuses the whole plan, so a conflict in the last
file means no file is touched.

That check's verdicts are kept in the plan (`Plan.verdicts`): they are the sections judged on the tree the plan
leaves, which is what a rerun finds and what the applied record's fast path stores (run/actions.record_changes),
so the write stage does not judge the same bytes a second time (on the benchmark's large size, a third of a first
apply's judging time). The check itself is state.judge_planned: the judgement of the tree the plan leaves,
which takes what the tree's own round trips already judged (each file's moved content) instead of judging it
a second time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from patchkit.errors import InternalError, RefusedError
from patchkit.input.tree import Snapshot
from patchkit.judge.state import judge_planned, replay_sections
from patchkit.outcome import PatchState, combine

if TYPE_CHECKING:
    from patchkit.diff.hunks import FilePatch
    from patchkit.judge.treestate import TreeState
    from patchkit.judge.verdicts import FileVerdict


@dataclass(frozen=True)
class FileChange:
    path: str
    before: Snapshot
    after: Snapshot  # after.data is None: delete the file


@dataclass(frozen=True)
class Plan:
    forward: bool
    changes: tuple[FileChange, ...]
    # `sections` (the tree state's, in order) judged on the tree as the changes leave it: one verdict each
    sections: tuple[FilePatch, ...] = ()
    verdicts: tuple[FileVerdict, ...] = ()


def plan_changes(tree: TreeState, *, forward: bool) -> Plan:
    """Every change `apply` (forward) or `revert` would make to this tree, or RefusedError."""
    overlay, problem = replay_sections(tree.files, tree.snapshots, forward=forward)
    if problem is not None:
        raise RefusedError(problem.message, where=problem.where)
    goal = PatchState.APPLIED if forward else PatchState.UNAPPLIED
    verdicts = tuple(judge_planned(tree.hunk_set.files, tree.files, overlay, forward=forward))
    after = combine(v.state for v in verdicts)
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
    return Plan(forward, changes, tree.hunk_set.files, verdicts)
