"""The vocabulary of an answer: what an action found and did, as the report and the exit code read it.

The enums and frozen records every action's Outcome is made of (the tree's state, the base, the applied record,
the origin, the action and its result) live here, and only here, apart from the modules that compute them
(state.py judges, provenance.py checks, actions.py decides). This module computes
nothing and imports nothing heavy: a restart that the applied records answer (patchkit.fastpath) builds its
Outcome and prints its report from these alone, without loading the judging modules (state, matching, verdicts,
rewrite), which load only when the fast path declines.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from patchkit.errors import ExitCode
from patchkit.workspace.lock import DEFAULT_LOCK_TIMEOUT

if TYPE_CHECKING:
    from patchkit.hunkset import HunkSet
    from patchkit.manifest import PatchSpec
    from patchkit.matching import HunkState
    from patchkit.plan import Plan
    from patchkit.records import AppliedRecord
    from patchkit.tree import Snapshot
    from patchkit.verdicts import FileVerdict
    from patchkit.workspace.lock import WaitHook
    from patchkit.workspace.recovery import Recovery


# ------------------------------------------------------------------------------------------------- the tree


class PatchState(Enum):
    APPLIED = "applied"
    UNAPPLIED = "unapplied"
    PARTIAL = "partial"
    CONFLICT = "conflict"
    AMBIGUOUS = "ambiguous"


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
                if hv.state.value in ("ambiguous", "conflict"):
                    return f"{verdict.section.path} hunk {hv.hunk.index} {hv.hunk.header}: {hv.located.detail}"
            if verdict.state in (PatchState.AMBIGUOUS, PatchState.CONFLICT):
                return f"{verdict.section.path}: {verdict.detail}"
        return "no single hunk is at fault"


def combine(states: Iterable[PatchState | HunkState]) -> PatchState:
    seen = {s.value for s in states}
    if not seen:
        return PatchState.APPLIED
    if "conflict" in seen:
        return PatchState.CONFLICT
    if "ambiguous" in seen:
        return PatchState.AMBIGUOUS
    if seen == {"applied"}:
        return PatchState.APPLIED
    if seen == {"unapplied"}:
        return PatchState.UNAPPLIED
    return PatchState.PARTIAL


# ------------------------------------------------------------------------------------------------------ base


class BaseState(Enum):
    PINNED = "pinned"  # verified: HEAD is the pinned commit, or the fingerprinted files match
    DRIFTED = "drifted"  # HEAD is another commit, or a fingerprinted file differs
    UNKNOWN = "unknown"  # nothing to compare against (no pinned commit on a git checkout, no fingerprint)


class Relation(Enum):
    """HEAD of a git checkout compared with the pinned commit."""

    SAME = "same"
    DESCENDANT = "descendant"  # HEAD is newer: the image was bumped
    ANCESTOR = "ancestor"  # HEAD is older than the pinned commit
    UNRELATED = "unrelated"  # neither is an ancestor of the other
    UNKNOWN_OBJECT = "unknown-object"  # the pinned commit is not in this repository (e.g. a shallow clone)


class BaseCheck(NamedTuple):
    """Is the tree the pinned base: the git HEAD check and the `[base]` fingerprint together."""

    state: BaseState
    pinned_commit: str | None
    head: str | None  # None: not a git checkout, or no pinned commit to compare with
    relation: Relation | None
    fingerprinted: tuple[str, ...]  # paths of the [base] table
    drifted: tuple[str, ...]  # fingerprinted files whose pre-image differs
    unchecked: tuple[str, ...]  # fingerprinted files whose pre-image cannot be told from the tree
    detail: str | None


# ---------------------------------------------------------------------------------------------------- record


class RecordState(Enum):
    CURRENT = "current"  # the record names the hunk set the manifest names now
    STALE = "stale"  # the record names another version of the patch
    NONE = "none"  # no record: patchkit never applied this patch here (or reverted it)
    INVALID = "invalid"  # a record that cannot be read; reported, then overwritten or removed


class RecordCheck(NamedTuple):
    """The applied record as found, against the hunk set the manifest names now."""

    state: RecordState
    path: str  # relative to the root
    record: AppliedRecord | None
    stored: HunkSet | None  # the stored copy, rebuilt and verified: only for a stale record
    detail: str | None  # why the record (or its stored copy) cannot be used


# ---------------------------------------------------------------------------------------------------- origin


class Origin(Enum):
    """Who put the change into a tree that has it."""

    THIS_VERSION = "this-version"  # patchkit applied the hunk set the manifest names now
    OTHER_VERSION = "other-version"  # patchkit applied another version of the patch (the record is stale)
    # Applied with no record, on the pinned base or one that cannot be told: someone else put it there (a
    # hand-written script, a manual edit). `apply --adopt` records it.
    OUTSIDE = "applied-outside-patchkit"
    # Applied with no record on a base that moved on from the pinned one (HEAD descends from it, or the files
    # differ from the [base] fingerprint): the newer engine ships the change, the patch can be retired.
    UPSTREAM = "upstream-contains"


class Provenance(NamedTuple):
    """What provenance found for one patch on one tree: base, applied record and origin (see provenance.py)."""

    base: BaseCheck
    record: RecordCheck
    origin: Origin | None  # None: the change is not (recognisably) in the tree
    used_stored_copy: bool  # the action judged the tree with the stored copy, not the manifest's diff

    @property
    def can_retire(self) -> bool:
        return self.origin is Origin.UPSTREAM


# ---------------------------------------------------------------------------------------------------- action


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
    SKIPPED = "skipped"  # --all: held back because another patch of the series was refused
    ADOPTED = "adopted"  # apply --adopt: applied outside patchkit; the record was written, not the engine


STATUS_EXIT = {
    PatchState.APPLIED: ExitCode.OK,
    PatchState.UNAPPLIED: ExitCode.UNAPPLIED,
    PatchState.PARTIAL: ExitCode.PARTIAL,
    PatchState.CONFLICT: ExitCode.CONFLICT,
    PatchState.AMBIGUOUS: ExitCode.CONFLICT,
}


class Invocation(NamedTuple):  # a NamedTuple, as BaseCheck
    """How this run named the engine tree and the registry, so that every command a message suggests runs as
    printed, from any folder: the same options, absolute paths, shell-quoted (the CLI builds it from its options:
    commands/options.py; `at(root)` for a caller without one)."""

    root: tuple[str, ...]  # ("--root", "/abs/dir") or ("--root-from-package", NAME[, "--python", PATH])
    patches: str | None = None  # the registry folder, absolute: for a command on --all
    target: tuple[str, ...] = ()  # the --target values of an --all run

    @classmethod
    def at(cls, root: Path) -> Invocation:
        return cls(("--root", str(Path(root).absolute())))

    def patch_command(self, verb: str, spec: PatchSpec, *flags: str) -> str:
        """`patchkit VERB ID --patches REGISTRY <root> FLAGS`: the registry is the folder the patch was found in."""
        return _spell(["patchkit", verb, spec.id, "--patches", str(spec.folder.parent), *self.root, *flags])

    def series_command(self, verb: str, *flags: str) -> str:
        """`patchkit VERB --all [--target T] [--patches REGISTRY] <root> FLAGS`."""
        words = ["patchkit", verb, "--all", *(word for name in self.target for word in ("--target", name))]
        words += ["--patches", self.patches] if self.patches else []
        return _spell([*words, *self.root, *flags])


def _spell(words: list[str]) -> str:
    import shlex  # deferred: only a message that suggests a command quotes one (a restart loads none of it)

    return shlex.join(words)


@dataclass(frozen=True)
class Options:
    """How an action runs, as the command's flags set it."""

    dry_run: bool = False
    complete: bool = False
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT
    strict_base: bool = False  # refuse (exit 9) unless the tree is verifiably the pinned base
    force: bool = False  # revert a change patchkit did not apply (upstream-contains)
    on_lock_wait: WaitHook | None = None  # told who holds the lock after ~1 s of waiting (the CLI says so)
    adopt: bool = False  # apply: record a tree that has the change without a record (moving off a script)
    # apply may answer "already applied" from the applied records (patchkit.fastpath): such an Outcome has
    # fast_path=True, and a tree without verdicts unless show_verdicts (-v, --json: the records' verdicts)
    fast_restart: bool = False
    show_verdicts: bool = False
    invocation: Invocation | None = None  # how the run was spelled, for the commands its messages suggest

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
    reason: str | None  # why the action was refused
    recovered: Recovery | None = None  # an interrupted transaction this run rolled back first
    provenance: Provenance | None = None  # base, applied record and origin, as found under the lock
    strict_base: bool = False
    fast_path: bool = False  # answered from the applied record (patchkit.fastpath): `tree` holds no verdicts

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
