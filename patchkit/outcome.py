"""The vocabulary of an answer: the states, checks and results every stage names, and the exit code of a state.

The enums and small records an answer is made of (a hunk's and a patch's state and the rule that combines them,
the base check, the record's and the origin's states, the action and its result) live here, and only here,
apart from the modules that compute them (matching and state judge, provenance checks, actions decides). This
module computes nothing and, like errors.py, imports nothing above it (type-only imports included): the records
that hold a stage's own types live in that stage (treestate.TreeState, provenance.Provenance and RecordCheck,
actions.Options and Outcome).
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from typing import NamedTuple

from patchkit.errors import ExitCode

# ------------------------------------------------------------------------------------------------ the states


class HunkState(Enum):
    """One hunk in one file's content (matching.locate decides it)."""

    APPLIED = "applied"  # the post-image is there
    UNAPPLIED = "unapplied"  # the pre-image is there
    CONFLICT = "conflict"  # neither is
    AMBIGUOUS = "ambiguous"  # both are, and position cannot tell which one is the hunk


class PatchState(Enum):
    APPLIED = "applied"
    UNAPPLIED = "unapplied"
    PARTIAL = "partial"
    CONFLICT = "conflict"
    AMBIGUOUS = "ambiguous"


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
