"""Compute every new file content in memory, forward or reverse, before anything is written.

The plan replays the file sections in order (reverse order for a revert) over an in-memory overlay of the
tree, so a file touched twice sees the content the first section leaves. It then checks its own result: the
planned tree must judge as fully applied (or fully unapplied, for a revert). A plan that fails either check is
refused as a whole, so a conflict in the last file means no file is touched.
"""

from __future__ import annotations

from dataclasses import dataclass

from patchkit.errors import RefusedError
from patchkit.matching import HunkState
from patchkit.rewrite import rewrite_section
from patchkit.state import FileVerdict, PatchState, TreeState, combine, judge_section, judge_sections
from patchkit.tree import Snapshot


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
    overlay = dict(tree.snapshots)
    touched: set[str] = set()
    indexes = range(len(tree.files))
    for i in indexes if forward else reversed(indexes):
        verdict = tree.files[i]
        if touched.intersection(verdict.section.paths):
            verdict = judge_section(verdict.section, overlay)  # an earlier section changed this file
        _refuse_undecided(verdict)
        updates = rewrite_section(verdict, forward=forward)
        overlay.update(updates)
        touched.update(updates)

    goal = PatchState.APPLIED if forward else PatchState.UNAPPLIED
    after = combine(v.state for v in judge_sections(tree.hunk_set.files, overlay))
    if after is not goal:
        raise RefusedError(
            f"the planned result would read as {after.value}, not {goal.value}; nothing was written",
            hint="the diff's hunks overlap or repeat content so that the result is not recognisable; "
            "report this diff to the patchkit maintainers",
        )
    changes = tuple(
        FileChange(path, tree.snapshots[path], overlay[path])
        for path in overlay
        if (overlay[path].data, overlay[path].mode) != (tree.snapshots[path].data, tree.snapshots[path].mode)
    )
    return Plan(forward, changes)


def _refuse_undecided(verdict: FileVerdict) -> None:
    for hv in verdict.hunks:
        if hv.state in (HunkState.CONFLICT, HunkState.AMBIGUOUS):
            raise RefusedError(
                f"hunk {hv.hunk.index} {hv.hunk.header} is {hv.state.value}: {hv.located.detail}",
                where=verdict.section.path,
            )
    if verdict.state in (PatchState.CONFLICT, PatchState.AMBIGUOUS):
        raise RefusedError(f"{verdict.state.value}: {verdict.detail}", where=verdict.section.path)
