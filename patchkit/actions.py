"""status / apply / revert as plain functions: manifest -> hunk set -> tree state -> plan -> write -> Outcome.

Everything that can be refused is refused before the lock is taken or the first byte is written: the manifest,
the diff hash, the parse, the filter, and then the state of every file under the lock.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from patchkit.diffs import HunkSet, load_hunk_set
from patchkit.errors import ExitCode
from patchkit.manifest import PatchSpec
from patchkit.plan import Plan, plan_changes
from patchkit.state import PatchState, TreeState, scan_tree
from patchkit.tree import check_root
from patchkit.workspace import DEFAULT_LOCK_TIMEOUT, commit_changes, locked


class Action(Enum):
    STATUS = "status"
    APPLY = "apply"
    REVERT = "revert"


class Result(Enum):
    APPLIED = "applied"
    ALREADY_APPLIED = "already-applied"
    REVERTED = "reverted"
    NOT_APPLIED = "not-applied"
    REFUSED = "refused"
    DRY_RUN = "dry-run"


STATUS_EXIT = {
    PatchState.APPLIED: ExitCode.OK,
    PatchState.UNAPPLIED: ExitCode.UNAPPLIED,
    PatchState.PARTIAL: ExitCode.PARTIAL,
    PatchState.CONFLICT: ExitCode.CONFLICT,
    PatchState.AMBIGUOUS: ExitCode.CONFLICT,
}


@dataclass(frozen=True)
class Options:
    dry_run: bool = False
    complete: bool = False
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT


@dataclass(frozen=True)
class Outcome:
    spec: PatchSpec
    action: Action
    tree: TreeState  # as found, before the action
    result: Result | None  # None for status
    plan: Plan | None  # what was (or, with --dry-run, would be) written
    reason: str | None  # why the action was refused

    @property
    def hunk_set(self) -> HunkSet:
        return self.tree.hunk_set

    @property
    def exit_code(self) -> ExitCode:
        if self.action is Action.STATUS:
            return STATUS_EXIT[self.tree.state]
        return ExitCode.REFUSED if self.result is Result.REFUSED else ExitCode.OK


def run(spec: PatchSpec, root: Path, action: Action, options: Options = Options()) -> Outcome:
    hunk_set = load_hunk_set(spec)
    real_root = check_root(root)
    shared = action is Action.STATUS or options.dry_run
    with locked(real_root, options.lock_timeout, shared=shared):
        tree = scan_tree(real_root, hunk_set)
        if action is Action.STATUS:
            return Outcome(spec, action, tree, None, None, None)
        result, reason, forward = _decide(action, tree.state, options.complete)
        if forward is None:
            return Outcome(spec, action, tree, result, None, reason)
        plan = plan_changes(tree, forward=forward)
        if options.dry_run:
            return Outcome(spec, action, tree, Result.DRY_RUN, plan, None)
        commit_changes(real_root, plan.changes)
        return Outcome(spec, action, tree, result, plan, None)


def _decide(action: Action, state: PatchState, complete: bool) -> tuple[Result, str | None, bool | None]:
    """(result, refusal reason, direction to plan in, or None for nothing to write)."""
    forward = action is Action.APPLY
    done_state = PatchState.APPLIED if forward else PatchState.UNAPPLIED
    start_state = PatchState.UNAPPLIED if forward else PatchState.APPLIED
    done_result = Result.APPLIED if forward else Result.REVERTED
    if state is done_state:
        return (Result.ALREADY_APPLIED if forward else Result.NOT_APPLIED), None, None
    if state is start_state or (state is PatchState.PARTIAL and complete):
        return done_result, None, forward
    if state is PatchState.PARTIAL:
        verb, other = ("apply", "revert") if forward else ("revert", "apply")
        return Result.REFUSED, (
            f"the tree is partially patched; `{verb} --complete` finishes the job, "
            f"`{other} --complete` goes back the other way"
        ), None
    if state is PatchState.AMBIGUOUS:
        return Result.REFUSED, "content alone cannot tell whether some hunks are applied; fix them by hand", None
    return Result.REFUSED, "some hunks match neither the old nor the new content; the tree has drifted", None
