"""A series: every selected patch of the registry, in `after` order, judged and written as one.

The filtered sections of all patches are judged together (state.judge_sections over one set of snapshots),
so patches that touch the same file stack: each patch is judged on the tree as the patches before it leave
it, and a patch's state combines its own sections' states. Each patch then gets the single-patch decision
(actions.decide_patch: provenance, then state); one plan over the whole series (plan.plan_changes, forward
for apply, backwards for revert) is checked in memory, and one transaction writes every file and every
applied record. All or nothing: one refused patch holds the whole series back, unless keep_going, which
leaves the refused patches (and the ones tied to them by `after`), re-judges the rest without them, and
writes that.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

from patchkit.diff.hunkset import HunkSet
from patchkit.errors import ExitCode, ManifestError, RegistryError
from patchkit.input.manifest import PatchSpec, line_of_key
from patchkit.input.registry import load_registry
from patchkit.input.tree import Root, Snapshot, read_all
from patchkit.judge.treestate import TreeState
from patchkit.outcome import STATUS_EXIT, Action, PatchState, Result
from patchkit.run.actions import (
    Decision,
    Options,
    Outcome,
    action_lock,
    commit,
    decide_patch,
    judged_after,
    load_checked,
    plan_writes,
    record_changes,
    restart_outcomes,
)
from patchkit.run.fastpath import series_entry
from patchkit.run.progress import Phase, Progress
from patchkit.run.provenance import RecordCheck, read_record

if TYPE_CHECKING:
    from patchkit.diff.hunks import FilePatch
    from patchkit.judge.verdicts import FileVerdict
    from patchkit.plan.plan import Plan
    from patchkit.workspace.recovery import Recovery

# Worst last: the series state is its worst patch's state, and status --all exits with that state's code.
_SEVERITY = (PatchState.APPLIED, PatchState.UNAPPLIED, PatchState.PARTIAL, PatchState.AMBIGUOUS, PatchState.CONFLICT)


class SeriesResult(Enum):
    APPLIED = "applied"  # something was written; every patch is applied
    ALREADY_APPLIED = "already-applied"
    REVERTED = "reverted"
    NOT_APPLIED = "not-applied"
    DRY_RUN = "dry-run"
    REFUSED = "refused"  # nothing was written
    INCOMPLETE = "incomplete"  # --keep-going: some patches reached the goal, `left` names the others


@dataclass(frozen=True)
class SeriesOutcome:
    action: Action
    root: Path
    outcomes: tuple[Outcome, ...]  # one per patch, in series order; trees as found, before the action
    plan: Plan | None  # everything the series wrote (or, dry run, would write); None: nothing to write
    recovered: Recovery | None  # an interrupted transaction this run rolled back first
    keep_going: bool

    @property
    def state(self) -> PatchState:
        return max((o.tree.state for o in self.outcomes), key=_SEVERITY.index, default=PatchState.APPLIED)

    @property
    def left(self) -> tuple[Outcome, ...]:
        """The patches the action did not bring to its goal (refused or held back)."""
        return tuple(o for o in self.outcomes if o.result in (Result.REFUSED, Result.SKIPPED))

    @property
    def result(self) -> SeriesResult | None:
        if self.action is Action.STATUS:
            return None
        results = {o.result for o in self.outcomes}
        if self.left:
            done = results - {Result.REFUSED, Result.SKIPPED}
            return SeriesResult.INCOMPLETE if self.keep_going and done else SeriesResult.REFUSED
        for result in (Result.DRY_RUN, Result.APPLIED, Result.REVERTED):
            if result in results:
                return SeriesResult(result.value)
        return SeriesResult.ALREADY_APPLIED if self.action is Action.APPLY else SeriesResult.NOT_APPLIED

    @property
    def exit_code(self) -> ExitCode:
        if any(o.exit_code is ExitCode.BASE_MISMATCH for o in self.outcomes):
            return ExitCode.BASE_MISMATCH
        if self.action is Action.STATUS:
            return STATUS_EXIT[self.state]
        return ExitCode.REFUSED if self.left else ExitCode.OK


# ---------------------------------------------------------------------------------------------- selection


def load_series(patches_dir: Path, target: str | Sequence[str] | None = None) -> tuple[PatchSpec, ...]:
    """Every patch of the registry in `after` order (ties by id); with targets, those whose [target] name is
    one of them (`--target A --target B` or `--target A,B`). A target that matches no patch is an error."""
    specs = order_series(load_registry(patches_dir))
    if not specs:
        raise RegistryError(
            "the registry holds no patch", where=str(patches_dir),
            hint="each patch is a folder with a manifest.toml; check --patches or PATCHKIT_PATCHES",
        )
    wanted = split_targets(target)
    if not wanted:
        return specs
    names = sorted({s.target.name for s in specs})
    unknown = [t for t in wanted if t not in names]
    if unknown:
        raise RegistryError(
            f"no patch in the registry has [target] name = {unknown[0]!r}", where=str(patches_dir),
            hint=f"targets in this registry: {', '.join(names)}; check --target or PATCHKIT_TARGET",
        )
    return tuple(s for s in specs if s.target.name in wanted)


def split_targets(target: str | Sequence[str] | None) -> list[str]:
    """`--target` values, each possibly a comma list, as one list of names (order kept, no repeats)."""
    if target is None:
        return []
    values = [target] if isinstance(target, str) else list(target)
    names = [name.strip() for value in values for name in value.split(",")]
    if any(not name for name in names):
        raise RegistryError(
            f"--target {','.join(values)!r} has an empty name", hint="write --target A,B or --target A --target B"
        )
    return list(dict.fromkeys(names))


def order_series(specs: Iterable[PatchSpec]) -> tuple[PatchSpec, ...]:
    """Topological order of `after` (a patch comes after every id it names); ready patches go by id."""
    by_id = {s.id: s for s in specs}
    for spec in by_id.values():
        for other in spec.after:
            if other not in by_id:
                raise ManifestError(
                    f"after names {other!r}, which is not a patch of this registry",
                    where=_where_after(spec),
                    hint=f"known patches: {', '.join(sorted(by_id))}; fix the id or add that patch",
                )
    waiting = {pid: set(spec.after) for pid, spec in by_id.items()}
    followers: dict[str, list[str]] = {pid: [] for pid in by_id}
    for pid, spec in by_id.items():
        for other in spec.after:
            followers[other].append(pid)
    ready = [pid for pid, deps in waiting.items() if not deps]
    heapq.heapify(ready)
    order: list[PatchSpec] = []
    while ready:
        pid = heapq.heappop(ready)
        order.append(by_id[pid])
        for follower in followers[pid]:
            waiting[follower].discard(pid)
            if not waiting[follower]:
                heapq.heappush(ready, follower)
    if len(order) < len(by_id):
        cycle = _find_cycle({pid: deps for pid, deps in waiting.items() if deps})
        raise ManifestError(
            "after forms a cycle: " + " after ".join(cycle),
            where=_where_after(by_id[cycle[0]]),
            hint="a patch cannot come after itself, directly or through others; remove one of these after entries",
        )
    return tuple(order)


def _find_cycle(waiting: Mapping[str, set[str]]) -> list[str]:
    """A closed walk [a, b, ..., a] along `after` among patches that never became ready."""
    seen: list[str] = []
    pid = min(waiting)
    while pid not in seen:
        seen.append(pid)
        pid = min(waiting[pid])  # every one of them still waits on another one of them
    return [*seen[seen.index(pid):], pid]


def _where_after(spec: PatchSpec) -> str:
    line = line_of_key(spec.manifest_path, "after")
    return f"{spec.manifest_path}:{line}" if line else str(spec.manifest_path)


# ------------------------------------------------------------------------------------------------------ run


@dataclass(frozen=True)
class _Patch:
    spec: PatchSpec
    hunk_set: HunkSet  # the manifest's
    record: RecordCheck

    @property
    def in_tree(self) -> HunkSet:
        """The version the tree holds, which is what stacks: a stale record's stored copy, else the manifest's."""
        return self.record.stored or self.hunk_set


def run_series(
    specs: Sequence[PatchSpec], root: Root, action: Action, options: Options, *, keep_going: bool = False,
    progress: Progress | None = None,
) -> SeriesOutcome:
    """status / apply / revert every patch of the series, in order (revert: backwards), as one transaction."""
    quick, earlier, looked = restart_outcomes(specs, root, action, options)
    if quick is not None:
        return SeriesOutcome(action, root.path, tuple(quick), None, earlier, keep_going)
    from patchkit.diff.hunks import paths_of  # lazy: the judgement (a restart the records answer skips it)

    hunk_sets = []
    for spec in specs:  # every manifest, diff and pin is checked before the lock is taken
        if progress is not None:
            progress.phase(Phase.PARSE, spec.id)
        hunk_sets.append(load_checked(spec, base_tree=root.path))
    if not looked:  # another start may have applied them while this one parsed: look again, under the lock
        quick, later, _ = restart_outcomes(specs, root, action, options, waited=True)
        if quick is not None:
            return SeriesOutcome(action, root.path, tuple(quick), None, later or earlier, keep_going)
        earlier = later or earlier
    label = f"{action.value} --all of {', '.join(s.id for s in specs)}"
    with action_lock(root, action, options, earlier) as recovered:
        if progress is not None:
            progress.phase(Phase.JUDGE, "the series")
        patches = [
            _Patch(spec, hunk_set, read_record(root, spec.id, hunk_set))
            for spec, hunk_set in zip(specs, hunk_sets, strict=True)
        ]
        # Every path of every patch, read once: the series is judged (and re-judged) on these.
        every_path = paths_of(_joined(h for p in patches for h in (p.in_tree, p.hunk_set)).files)
        snapshots = read_all(root, every_path)
        settled = _settle(root, patches, snapshots, action, options, keep_going)
        outcomes, decisions, active = settled.outcomes, settled.decisions, settled.active
        moving = [i for i in active if decisions[i].forward is not None]

        def finish(plan: Plan | None) -> SeriesOutcome:
            return SeriesOutcome(action, root.path, tuple(outcomes), plan, recovered, keep_going)

        if action is Action.STATUS:
            return finish(None)
        refused = [o.spec.id for o in outcomes if o.result is Result.REFUSED]
        if refused and not keep_going:
            for i in moving:
                outcomes[i] = replace(
                    outcomes[i], result=Result.SKIPPED,
                    reason=f"held back, nothing written: {', '.join(refused)} refused and the series is all or "
                    "nothing (--keep-going applies the others)",
                )
            return finish(None)
        plan = None
        if moving:
            plan = plan_writes(root, settled.together, forward=action is Action.APPLY)
            for i in moving:
                paths = set(outcomes[i].tree.snapshots)
                mine = replace(plan, changes=tuple(c for c in plan.changes if c.path in paths))
                result = Result.DRY_RUN if options.dry_run else outcomes[i].result
                outcomes[i] = replace(outcomes[i], plan=mine, result=result)
        if not options.dry_run:
            state_files: dict[str, bytes | None] = {}
            after = {**snapshots, **{c.path: c.after for c in (plan.changes if plan else ())}}
            together = [series_entry(patches[i].spec) for i in active]
            # What a rerun of this series finds: every active patch's sections judged together on `after`.
            verdicts = iter(judged_after(plan, _joined(patches[i].hunk_set for i in active).files, after))
            for i in active:
                own = [next(verdicts) for _ in patches[i].hunk_set.files]
                state_files.update(record_changes(
                    patches[i].spec, patches[i].hunk_set, decisions[i], after=after, series=together, verdicts=own
                ))
            if state_files or (plan is not None and plan.changes):
                if progress is not None:
                    progress.phase(Phase.WRITE, "the series")
                commit(root, plan.changes if plan else (), state_files, label)
        return finish(plan)


@dataclass(frozen=True)
class _Settled:
    outcomes: list[Outcome]  # one per patch, series order
    decisions: list[Decision]
    active: list[int]  # the patches still to act on (all of them, unless keep_going left some)
    together: TreeState  # the active patches' sections, judged together


def _settle(
    root: Root,
    patches: Sequence[_Patch],
    snapshots: Mapping[str, Snapshot],
    action: Action,
    options: Options,
    keep_going: bool,
) -> _Settled:
    """Judge and decide every patch; with keep_going, leave the refused ones and re-judge the rest until none is."""
    from patchkit.diff.hunks import paths_of  # lazy: the judgement (see run_series)
    from patchkit.judge.state import judge_sections

    outcomes: dict[int, Outcome] = {}
    decisions: dict[int, Decision] = {}
    active = list(range(len(patches)))
    left: list[str] = []
    while True:
        sections = _joined(patches[i].in_tree for i in active)
        together = TreeState(root.path, sections, tuple(judge_sections(sections.files, snapshots)), snapshots)
        verdicts = iter(together.files)
        for i in active:
            patch = patches[i]
            mine = tuple(next(verdicts) for _ in patch.in_tree.files)
            tree = TreeState(root.path, patch.in_tree, mine, _as_seen(mine))
            stale = patch.in_tree is not patch.hunk_set
            if stale and action is not Action.REVERT:
                # Like the single-patch flow, status and apply judge the manifest's version; here on the tree as
                # the patches before it leave it, with the version the tree holds stacked in its place.
                seen = {**snapshots, **tree.snapshots}
                again = tuple(judge_sections(patch.hunk_set.files, seen))
                tree = TreeState(root.path, patch.hunk_set, again, {p: seen[p] for p in paths_of(patch.hunk_set.files)})
            decision = decide_patch(
                patch.spec, action, tree, root, patch.record, options,
                used_stored_copy=stale and action is Action.REVERT,
            )
            reason = decision.reason
            if reason is not None and left and decision.result is Result.REFUSED:
                reason += f" (judged without {', '.join(left)}, left earlier in the series)"
            decisions[i] = decision
            outcomes[i] = Outcome(
                patch.spec, action, tree, decision.result, None, reason, None, decision.provenance,
                options.strict_base,
            )
        refused = [i for i in active if decisions[i].result is Result.REFUSED]
        if not (keep_going and refused):
            ordered = range(len(patches))
            return _Settled([outcomes[i] for i in ordered], [decisions[i] for i in ordered], active, together)
        names = ", ".join(patches[i].spec.id for i in refused)
        gone = set(refused)
        for i in _tied_to(patches, refused, active, forward=action is Action.APPLY):
            if decisions[i].forward is not None:  # one already in its goal state has nothing to leave
                gone.add(i)
                outcomes[i] = replace(
                    outcomes[i], result=Result.SKIPPED,
                    reason=f"left, nothing written: tied by `after` to {names}, which could not be "
                    f"{'applied' if action is Action.APPLY else 'reverted'}",
                )
        left += [patches[i].spec.id for i in active if i in gone]
        active = [i for i in active if i not in gone]


def _tied_to(patches: Sequence[_Patch], refused: Sequence[int], active: Sequence[int], *, forward: bool) -> list[int]:
    """Active patches that stand or fall with a refused one through `after`, transitively.

    apply: a patch cannot go in without the ones it comes after; revert: those cannot go out while it stays.
    """
    index = {patches[i].spec.id: i for i in active}
    blocked_by: dict[int, set[int]] = {i: set() for i in active}
    for i in active:
        for other in patches[i].spec.after:
            j = index.get(other)
            if j is not None:
                blocked_by[i if forward else j].add(j if forward else i)
    tied: set[int] = set()
    frontier = set(refused)
    while frontier:
        frontier = {i for i in active if blocked_by[i] & frontier} - tied - set(refused)
        tied |= frontier
    return sorted(tied)


def _joined(hunk_sets: Iterable[HunkSet]) -> HunkSet:
    """The sections of several hunk sets, in order, as one: judged together, they stack."""

    files: list[FilePatch] = []
    for hunk_set in hunk_sets:
        files += hunk_set.files
    return HunkSet("series", tuple(files), ())


def _as_seen(verdicts: Sequence[FileVerdict]) -> dict[str, Snapshot]:
    """Each path of a patch as its first section saw it: the tree as the patches before this one leave it."""
    seen: dict[str, Snapshot] = {}
    for verdict in verdicts:
        for path in verdict.section.paths:
            seen.setdefault(path, verdict.judged_on[path])
    return seen
