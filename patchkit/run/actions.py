"""status / apply / revert as plain functions: manifest -> hunk set -> tree state -> plan -> write -> Outcome.

Everything that can be refused is refused before the lock is taken or the first byte is written: the manifest,
the diff hash, the parse, the filter, and then the state of every file under the lock.

Imports are lazy at two boundaries only (`# lazy:` comments): the parser (patchkit.diff.filtering and the parse
cache, once the restart fast path declined) and the write stage (the planner, the bytecode scan, the transaction:
`plan_writes` and `commit` at the end of this module), with the judgement (patchkit.judge.state), which a restart the
records answer skips. status never loads the write stage; a restart the records answer loads neither the parser,
the judgement nor the write stage.
"""

from __future__ import annotations

import contextlib
import os
import shlex
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from patchkit.diff.hunkset import HunkSet
from patchkit.errors import ExitCode, PatchkitError
from patchkit.input.globs import match_glob
from patchkit.input.tree import STATE_DIR, Root, Snapshot, open_child_dir
from patchkit.judge.treestate import TreeState
from patchkit.outcome import STATUS_EXIT, Action, BaseState, Origin, PatchState, RecordState, Result, combine
from patchkit.run.fastpath import add_block, check_restart, fast_block, recorded_report, series_entry
from patchkit.run.progress import Phase, Progress
from patchkit.run.provenance import (
    Provenance,
    RecordCheck,
    assess,
    check_base,
    check_hunkset_pin,
    missing_files,
    missing_reason,
    read_record,
    with_fingerprint,
)
from patchkit.run.recorded import RecordedReport, files_text, report_text, verdict_entry
from patchkit.run.records import record_files, record_names, record_removal, shown_name
from patchkit.workspace.lock import DEFAULT_LOCK_TIMEOUT, LockWait, WaitHook, locked

if TYPE_CHECKING:
    from patchkit.diff.hunks import FilePatch
    from patchkit.input.manifest import PatchSpec
    from patchkit.judge.verdicts import FileVerdict
    from patchkit.plan.plan import FileChange, Plan
    from patchkit.workspace.recovery import Recovery


class Invocation(NamedTuple):  # a NamedTuple, as BaseCheck
    """How this run named the engine tree and the registry, so that every command a message suggests runs as
    printed, from any folder: the same options, absolute paths, shell-quoted (`of`: run.command builds it from
    the CLI's options; `at(root)` for a caller without one)."""

    root: tuple[str, ...]  # ("--root", "/abs/dir") or ("--root-from-package", NAME[, "--python", PATH])
    patches: str | None = None  # the registry folder, absolute: for a command on --all
    target: tuple[str, ...] = ()  # the --target values of an --all run

    @classmethod
    def at(cls, root: Path) -> Invocation:
        return cls(("--root", str(Path(root).absolute())))

    @classmethod
    def of(cls, root: tuple[str, ...], patches: Path, target: Sequence[str] | None) -> Invocation:
        """A command's invocation: the tree as it was named, the registry found and the --target values."""
        return cls(root, str(patches.absolute()), tuple(target or ()))

    def patch_command(self, verb: str, spec: PatchSpec, *flags: str) -> str:
        """`patchkit VERB ID --patches REGISTRY <root> FLAGS`: the registry is the folder the patch was found in."""
        return shlex.join(["patchkit", verb, spec.id, "--patches", str(spec.folder.parent), *self.root, *flags])

    def series_command(self, verb: str, *flags: str) -> str:
        """`patchkit VERB --all [--target T] [--patches REGISTRY] <root> FLAGS`."""
        words = ["patchkit", verb, "--all", *(word for name in self.target for word in ("--target", name))]
        words += ["--patches", self.patches] if self.patches else []
        return shlex.join([*words, *self.root, *flags])


@dataclass(frozen=True)
class Options:
    """How an action runs, as the command's flags set it."""

    dry_run: bool = False
    complete: bool = False
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT
    strict_base: bool = False  # refuse (exit 9) unless the tree is verifiably the pinned base
    force: bool = False  # revert a change patchkit did not apply (upstream-contains)
    on_lock_wait: WaitHook | None = None  # told who holds the lock after ~1 s of waiting (the CLI says so)
    # The command's one wait (the CLI makes it): lock_timeout spans every lock the command takes, and on_wait is
    # told once. None: each lock taken waits lock_timeout afresh (a caller without a command).
    lock_wait: LockWait | None = None
    adopt: bool = False  # apply: record a tree that has the change without a record (moving off a script)
    # apply may answer "already applied" from the applied records (patchkit.run.fastpath): such an Outcome has
    # fast_path=True, and a tree without verdicts unless show_verdicts (-v, --json: the records' verdicts)
    fast_restart: bool = False
    show_verdicts: bool = False
    verdict_rows: bool = False  # -v without --json: a row per hunk, from the records' verdicts decoded
    invocation: Invocation | None = None  # how the run was spelled, for the commands its messages suggest

    def lock_patience(self) -> LockWait:
        """What a lock taken for this action waits with: the command's LockWait, or a fresh one."""
        return self.lock_wait if self.lock_wait is not None else LockWait(self.lock_timeout, self.on_lock_wait)

    def commands(self, root: Path) -> Invocation:
        """The invocation to spell suggested commands with: the CLI's, else `--root ROOT`."""
        return self.invocation if self.invocation is not None else Invocation.at(root)


@dataclass(frozen=True)
class Outcome:
    """What one action found and did on one patch: everything the report says, and the exit code."""

    spec: PatchSpec
    action: Action
    tree: TreeState  # as found, before the action
    result: Result | None  # None for status
    plan: Plan | None  # what was (or, with --dry-run, would be) written
    reason: str | None  # why the action was refused (speak.report.reason_text says it with the fields below)
    recovered: Recovery | None = None  # an interrupted transaction this run rolled back first
    provenance: Provenance | None = None  # base, applied record and origin, as found under the lock
    strict_base: bool = False
    fast_path: bool = False  # answered from the applied record (patchkit.run.fastpath): `tree` holds no verdicts
    recorded: RecordedReport | None = None  # a fast path's verdicts as recorded (-v, --json), for the report
    undecided: str | None = None  # the first hunk or file the refusal names (Decision.undecided)
    judged_without: tuple[str, ...] = ()  # a series' refusal: the patches left earlier, judged without

    @property
    def hunk_set(self) -> HunkSet:
        return self.tree.hunk_set

    @property
    def exit_code(self) -> ExitCode:
        if self.strict_base and self.provenance is not None and self.provenance.base.state is not BaseState.PINNED:
            return ExitCode.BASE_MISMATCH
        if self.action is Action.STATUS:
            return STATUS_EXIT[self.tree.state]
        return ExitCode.REFUSED if self.result in (Result.REFUSED, Result.SKIPPED) else ExitCode.OK


_DEFAULTS = Options()  # frozen: one shared default


def run(
    spec: PatchSpec, root: Root, action: Action, options: Options = _DEFAULTS, *, progress: Progress | None = None
) -> Outcome:
    if progress is not None:
        progress.phase(Phase.PARSE, spec.id)
    quick, earlier, looked = restart_outcomes((spec,), root, action, options)
    if quick is not None:
        return quick[0]
    from patchkit.judge.state import scan_tree  # lazy: the judgement (a restart the records answer skips it)

    hunk_set = load_checked(spec, base_tree=root.path)
    if not looked:  # another start may have applied it while this one parsed: look again, under the lock
        quick, later, _ = restart_outcomes((spec,), root, action, options, waited=True)
        if quick is not None:
            return quick[0]
        earlier = later or earlier
    label = f"{action.value} of {spec.id}"
    with action_lock(root, action, options, earlier) as recovered:
        if progress is not None:
            progress.phase(Phase.JUDGE, spec.id)
        record = read_record(root, spec.id, hunk_set)
        # A stale record means the tree holds another version: revert takes out that one, from its stored copy.
        stored = record.stored if action is Action.REVERT else None
        tree = scan_tree(root, stored or hunk_set)
        decision = decide_patch(spec, action, tree, root, record, options, used_stored_copy=stored is not None)

        def outcome(result: Result | None, plan: Plan | None) -> Outcome:
            return Outcome(
                spec, action, tree, result, plan, decision.reason, recovered, decision.provenance, options.strict_base,
                undecided=decision.undecided,
            )

        if decision.forward is None:
            if (decision.drops_record or decision.result is Result.ADOPTED) and not options.dry_run:
                state_files = record_changes(spec, hunk_set, decision, after=tree.snapshots, verdicts=tree.files)
                commit(root, (), state_files, label)
            return outcome(decision.result, None)
        plan = plan_writes(root, tree, forward=decision.forward)
        if options.dry_run:
            return outcome(Result.DRY_RUN, plan)
        if progress is not None:
            progress.phase(Phase.WRITE, spec.id)
        after = {**tree.snapshots, **{c.path: c.after for c in plan.changes}}
        verdicts = judged_after(plan, hunk_set.files, after)  # what a rerun finds: the fast path's report
        state_files = record_changes(spec, hunk_set, decision, after=after, verdicts=verdicts)
        commit(root, plan.changes, state_files, label)
        return outcome(decision.result, plan)


def load_checked(spec: PatchSpec, *, base_tree: Path | None = None) -> HunkSet:
    """The manifest's filtered hunk set, checked against its pin: done for every patch before the lock is taken.
    `base_tree` (the root) only words the vendor command a refused commit-chain mbox is told to run."""
    from patchkit.diff.filtering import load_hunk_set  # lazy: the parser (a restart the records answer skips it)

    hunk_set = load_hunk_set(spec, base_tree=base_tree)
    check_hunkset_pin(spec, hunk_set)
    return with_fingerprint(hunk_set, spec)


@contextlib.contextmanager
def action_lock(root: Root, action: Action, options: Options, earlier: Recovery | None) -> Iterator[Recovery | None]:
    """The root's lock as an action takes it: shared for status and --dry-run, exclusive for a write. Yields the
    interrupted transaction rolled back first, by this lock or by the fast path's (`earlier`), if any."""
    shared = action is Action.STATUS or options.dry_run
    with locked(root, options.lock_patience(), shared=shared) as recovered:
        yield recovered or earlier


def restart_outcomes(
    specs: Sequence[PatchSpec], root: Root, action: Action, options: Options, *, waited: bool = False
) -> tuple[list[Outcome] | None, Recovery | None, bool]:
    """The restart fast path: "already applied" for every patch, from their records (patchkit.run.fastpath).

    (outcomes, recovery, looked): outcomes None when the full judgement must run; `recovery` is what the lock
    taken here rolled back; `looked`: the records were there to check. Anything wrong with a manifest, a diff or
    the root is left to the full path, to report in its own order.

    The check writes nothing, so it runs under the shared lock: restarts on one root check side by side, never
    while a writer holds the lock, and never before an interrupted transaction is rolled back (the lock
    recovers a journal first, exclusively). A decline releases it; the full path then takes the exclusive
    lock and judges from scratch. `waited`: the second look of a run that found no record, after its parse:
    the records are looked for under the lock, so a writer this run waited for (another start on the same
    root) may have applied the patch meanwhile, and this run answers from its records instead of queueing.
    """
    if action is not Action.APPLY or not options.fast_restart or options.dry_run:
        return None, None, False
    names = [record_names(spec.id)[0] for spec in specs]
    if not waited and not _records_present(root, names):
        # No record, no fast answer (a first apply, a tree applied by hand): decline before reading any diff or
        # taking the lock. Only a decline rests on this probe; a record that is there is checked in full below.
        return None, None, False
    try:
        with locked(root, options.lock_patience(), shared=True) as recovered:
            if waited and not _records_present(root, names):
                return None, recovered, False
            try:
                for spec in specs:
                    spec.read_diff()  # the diff must still be the one its manifest names
            except PatchkitError:
                return None, recovered, True
            restart = check_restart(specs, root)
            if restart is None:
                return None, recovered, True
            outcomes = []
            for spec, vouched in zip(specs, restart, strict=True):
                record = vouched.record
                tree = TreeState(root.path, HunkSet(str(spec.diff_path), (), ()), (), {})
                recorded = None
                if options.show_verdicts:
                    recorded = recorded_report(root.fd, root.path, vouched, rows=options.verdict_rows)
                    if recorded is None:
                        return None, recovered, True
                check = RecordCheck(RecordState.CURRENT, f"{STATE_DIR}/{record_names(spec.id)[0]}", record, None, None)
                facts = Provenance(check_base(spec, tree, root), check, Origin.THIS_VERSION, used_stored_copy=False)
                if options.strict_base and facts.base.state is not BaseState.PINNED:
                    return None, recovered, True  # a refusal: the full path explains it
                outcomes.append(Outcome(
                    spec, action, tree, Result.ALREADY_APPLIED, None, None, recovered if len(specs) == 1 else None,
                    facts, options.strict_base, fast_path=True, recorded=recorded,
                ))
            return outcomes, recovered, True
    except PatchkitError:  # the lock could not be had (a read-only tree, a timeout): the full path reports it
        return None, None, True


def _records_present(root: Root, names: Sequence[str]) -> bool:
    """Whether every applied record is there at all (a look by name under the root's descriptor, no trust)."""
    try:
        state = open_child_dir(root.fd, STATE_DIR, STATE_DIR, str(root.state_path))
    except (OSError, PatchkitError):
        return False
    if state is None:
        return False
    try:
        for name in names:
            os.stat(name, dir_fd=state, follow_symlinks=False)
    except OSError:
        return False
    finally:
        os.close(state)
    return True


class Decision(NamedTuple):  # immutable and compared by value, ~5x cheaper to create than a frozen dataclass
    """What an action does to one patch, from its tree state and provenance; shared by run and series."""

    provenance: Provenance
    result: Result | None  # None for status
    reason: str | None  # why the action is refused
    forward: bool | None  # the direction to plan in; None: nothing to write to the tree
    # A refusal of an ambiguous or conflicting tree: the first hunk (or file) at fault, with why
    # (TreeState.first_undecided); the report names it after the reason.
    undecided: str | None = None

    @property
    def drops_record(self) -> bool:
        # The record claims a change the tree does not have: drop it, or apply would call it stale.
        return self.result is Result.NOT_APPLIED and self.provenance.record.state is not RecordState.NONE


def decide_patch(
    spec: PatchSpec, action: Action, tree: TreeState, root: Root, record: RecordCheck, options: Options, *,
    used_stored_copy: bool,
) -> Decision:
    """Provenance first (stale record, upstream-contains, --strict-base), then the tree state."""
    facts = assess(spec, tree, root, record, used_stored_copy=used_stored_copy)
    missing = missing_files(tree) if tree.state is PatchState.CONFLICT else ()
    if action is Action.STATUS:
        return Decision(facts, None, missing_reason(missing, tree.root) if missing else None, None)
    refusal = _refuse_provenance(spec, action, facts, options, tree.root)
    if refusal is not None:
        return Decision(facts, Result.REFUSED, refusal, None)
    result, reason, forward = _decide_by_state(spec, action, tree.state, options, tree.root)
    adoptable = result is Result.ALREADY_APPLIED and facts.record.state is not RecordState.CURRENT
    if options.adopt and adoptable and not options.dry_run:
        return Decision(facts, Result.ADOPTED, None, None)
    if missing and result is Result.REFUSED:
        return Decision(facts, result, missing_reason(missing, tree.root), forward)
    if reason is not None and tree.state in (PatchState.AMBIGUOUS, PatchState.CONFLICT):
        return Decision(facts, result, reason, forward, tree.first_undecided())
    return Decision(facts, result, reason, forward)


def _refuse_provenance(
    spec: PatchSpec, action: Action, facts: Provenance, options: Options, root: Path
) -> str | None:
    """Why provenance forbids the action (before any hunk-level decision), or None."""
    base = facts.base
    commands = options.commands(root)
    if action is Action.REVERT and facts.origin is Origin.UPSTREAM and not options.force:
        # patchkit did not put this change there: taking it out would edit the engine image itself.
        return (
            "the tree had this change before patchkit applied anything (no applied record): the engine "
            "image probably ships it, and the patch can be retired; "
            f"`{commands.patch_command('revert', spec, '--force')}` takes it out anyway"
        )
    if action is Action.REVERT and facts.origin is Origin.OUTSIDE and not options.force:
        return (
            "the tree has this change but patchkit has no record of applying it (applied outside patchkit, e.g. "
            f"by a script): `{commands.patch_command('apply', spec, '--adopt')}` records it, then revert; "
            f"`{commands.patch_command('revert', spec, '--force')}` takes it out anyway"
        )
    if options.strict_base and base.state is not BaseState.PINNED:
        what = f"drifted ({', '.join(base.drifted)})" if base.drifted else base.state.value
        return f"--strict-base: the base is {what}, not verifiably the pinned base; nothing written"
    record = facts.record
    if record.state is not RecordState.STALE or record.record is None:
        return None
    applied = record.record
    holds = (
        f"the tree holds another version of this patch (hunk set {applied.hunkset_sha256[:12]}, "
        f"applied {applied.applied_at} by patchkit {applied.tool_version})"
    )
    if record.stored is None:
        return (
            f"{holds}, and {record.detail}; restore the pristine engine tree, delete "
            f"{record.path} and apply again"
        )
    if action is Action.APPLY:
        return (
            f"{holds}; `{commands.patch_command('revert', spec)}` takes it out with its stored copy, then apply "
            "again"
        )
    return None


def _decide_by_state(
    spec: PatchSpec, action: Action, state: PatchState, options: Options, root: Path
) -> tuple[Result, str | None, bool | None]:
    """What the action does to a tree in `state`, once provenance allowed it (decide_patch): (result, refusal
    reason, direction to plan in, or None for nothing to write)."""
    complete = options.complete
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
        commands = options.commands(root)
        return Result.REFUSED, (
            f"the tree is partially patched; `{commands.patch_command(verb, spec, '--complete')}` finishes the job, "
            f"`{commands.patch_command(other, spec, '--complete')}` goes back the other way"
        ), None
    if state is PatchState.AMBIGUOUS:
        return Result.REFUSED, "content alone cannot tell whether some hunks are applied; fix them by hand", None
    return Result.REFUSED, "some hunks match neither the old nor the new content; the tree has drifted", None


# ------------------------------------------------------------------------------------------ the write stage
# Shared by run and series.run_series. Each function imports its modules when called (see the module doc), so
# nothing here loads for status; every import is done before the transaction it feeds starts.


def plan_writes(root: Root, tree: TreeState, *, forward: bool) -> Plan:
    """Every change the action makes to the tree (plan.plan_changes), with the cached bytecode of each Python
    source it changes planned for removal too (patchkit.plan.bytecode)."""
    from patchkit.plan.bytecode import with_bytecode_removals  # lazy: the write stage
    from patchkit.plan.plan import plan_changes

    return with_bytecode_removals(root, plan_changes(tree, forward=forward))


def judged_after(
    plan: Plan | None, sections: Sequence[FilePatch], after: Mapping[str, Snapshot]
) -> Sequence[FileVerdict]:
    """`sections` judged on `after`, the tree as `plan` leaves it (what a rerun finds, for the applied record):
    the plan's own verdicts when it judged these very sections on that tree (plan.plan_changes checks its result
    so), else a judgement of `after`."""
    if plan is not None and plan.sections == tuple(sections):  # the same section objects: compared by identity
        return plan.verdicts
    from patchkit.judge.state import judge_sections  # lazy: the judgement (loaded by what decided to write)

    return judge_sections(sections, after)


def record_changes(
    spec: PatchSpec,
    hunk_set: HunkSet,
    decision: Decision,
    *,
    after: Mapping[str, Snapshot] | None = None,
    series: Sequence[Sequence[str]] | None = None,
    verdicts: Sequence[FileVerdict] = (),
) -> dict[str, bytes | None]:
    """The applied-record files to write with a decision's tree changes, in the same transaction.

    `after`: every path as the transaction leaves it, and `verdicts`: this patch's sections judged on it as a
    rerun judges them, for the record's fast_path block and the shown verdicts (records.shown_name; both left
    out, and an older shown file removed, unless they say applied); `series`: the patches judged together with
    this one (patchkit.run.fastpath.series_entry each; default: this one alone).
    """
    if decision.forward or decision.result is Result.ADOPTED:
        from patchkit.diff.hunks import paths_of  # lazy: the judgement (loaded by what decided to write)
        files = {**record_files(spec, hunk_set), shown_name(spec.id): None}
        if after is not None and combine(v.state for v in verdicts) is PatchState.APPLIED:
            name = record_names(spec.id)[0]
            record = files[name]
            assert record is not None
            entries = [verdict_entry(v) for v in verdicts]
            shown = files_text(entries).encode()
            block = fast_block(
                series or [series_entry(spec)], paths_of(hunk_set.files), after, report_text(hunk_set, entries),
                restart_facts(spec, hunk_set), shown,
            )
            files[name] = add_block(record, block)
            files[shown_name(spec.id)] = shown
        return files
    if decision.forward is False or decision.drops_record:
        return record_removal(spec.id)
    return {}


def upstream_json(spec: PatchSpec) -> dict[str, Any]:
    """The document's `upstream` key: the first PR (repo, pr, url) as before, every PR, and the origin."""
    up = spec.upstream
    return {
        "repo": up.repo or None, "pr": up.pr, "url": up.url or None, "origin": up.origin.value,
        "prs": [{"repo": p.repo, "pr": p.number, "url": p.url} for p in up.prs], "reason": up.reason,
    }


def excluded_json(spec: PatchSpec, paths: Sequence[str]) -> list[dict[str, str]]:
    """The document's `excluded` key: each path the excludes removed, with the reason of the exclude it matched."""
    def reason(path: str) -> str:
        return next((e.reason for e in spec.excludes if match_glob(e.pattern, path)), "")

    return [{"path": path, "reason": reason(path)} for path in paths]


def restart_facts(spec: PatchSpec, hunk_set: HunkSet) -> dict[str, Any] | None:
    """What a restart's document says of the manifest, for the record's fast_path block: the restart entry
    (patchkit.cli.restart) prints it without parsing the manifest, which the record binds by its sha256. None
    for a manifest with a [base] fingerprint (only the full path checks one) or without a pinned diff."""
    if spec.base_files or spec.sha256 is None:
        return None
    return {
        "diff": spec.diff_name,
        "upstream": upstream_json(spec),
        "excluded": excluded_json(spec, hunk_set.excluded),
        "pinned_commit": spec.target.pinned_commit,
        "diff_sha256": spec.sha256,
        "hunk_set_sha256": spec.hunkset_sha256,
    }


def commit(root: Root, changes: Sequence[FileChange], state_files: Mapping[str, bytes | None], label: str) -> None:
    """One transaction: the tree changes, then the state files (workspace.commit.commit_changes)."""
    from patchkit.workspace.commit import commit_changes  # lazy: the write stage

    commit_changes(root, changes, state_files=state_files, label=label)
