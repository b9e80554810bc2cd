"""Provenance: is the tree the base the patch was made for, and which version of the patch is in it.

A manifest promises "this exact diff, validated on this exact engine commit". Three facts check that promise
on the tree as found (under the lock), each a frozen record:

- BaseCheck: on a git checkout, HEAD against `target.pinned_commit`; on any tree, the files the hunk set reads
  against the `[base]` fingerprint (sha256 of each pre-image, recorded by `patchkit vendor --base-tree`).
  git is asked only through patchkit.input.sealedgit (never the checkout's config, hooks or remotes), and only
  when `.git` passes the ownership rule of `.patchkit` (docs/safety.md, "git in the engine tree").
- RecordCheck: `.patchkit/applied/<id>.json`, written by every successful apply next to a stored copy of the
  diff it applied (the format: patchkit.run.records), against the hunk set the manifest names now.
- Origin: who put the change into an applied tree: this version, another version (stale), or nobody we know
  of (the tree already contained it: upstream-contains, the patch can be retired).

Base drift never changes a hunk-level verdict; it explains it. git runs only for a git checkout with a known
pinned commit whose HEAD is not that commit, so status on a plain tree (or at the pinned commit) stays cheap.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import stat
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from patchkit.errors import BadInputError, ManifestError, PatchkitError, UntrustedStateError
from patchkit.input.tree import STATE_DIR, Root
from patchkit.outcome import BaseCheck, BaseState, HunkState, Origin, PatchState, RecordState, Relation
from patchkit.run.fastpath import UNKNOWN_NO_GIT, UNKNOWN_UNPINNED
from patchkit.run.records import AppliedRecord, parse_record, record_names
from patchkit.workspace.trust import check_trusted, read_state

if TYPE_CHECKING:
    from subprocess import CompletedProcess

    from patchkit.diff.hunks import FilePatch
    from patchkit.diff.hunkset import HunkSet
    from patchkit.input.manifest import PatchSpec
    from patchkit.input.sealedgit import SealedGit
    from patchkit.judge.treestate import TreeState
    from patchkit.judge.verdicts import FileVerdict


class RecordCheck(NamedTuple):
    """The applied record as found, against the hunk set the manifest names now."""

    state: RecordState
    path: str  # relative to the root
    record: AppliedRecord | None
    stored: HunkSet | None  # the stored copy, rebuilt and verified: only for a stale record
    detail: str | None  # why the record (or its stored copy) cannot be used


class Provenance(NamedTuple):
    """What provenance found for one patch on one tree: base, applied record and origin (see provenance.py)."""

    base: BaseCheck
    record: RecordCheck
    origin: Origin | None  # None: the change is not (recognisably) in the tree
    used_stored_copy: bool  # the action judged the tree with the stored copy, not the manifest's diff

    @property
    def can_retire(self) -> bool:
        return self.origin is Origin.UPSTREAM


# ------------------------------------------------------------------------------------------------------ base


class HeadCheck(NamedTuple):
    """HEAD of a git checkout against the pinned commit (None where git could not tell).

    A NamedTuple, not a frozen dataclass: as immutable, compared by value, and ~5x cheaper to create at import
    (every status loads this module; only a git checkout with a pinned commit makes one that says anything)."""

    head: str | None
    relation: Relation | None
    detail: str | None  # why git could not answer

    @property
    def asked(self) -> bool:
        """The root is a git checkout (or has a `.git` patchkit would not read): not a plain tree."""
        return self.relation is not None or self.detail is not None


def check_base(spec: PatchSpec, tree: TreeState, root: Root) -> BaseCheck:
    pinned = spec.target.pinned_commit
    head = HeadCheck(None, None, None) if pinned is None else compare_head(root, pinned)
    drifted: list[str] = []
    unchecked: list[str] = []
    matched = 0
    by_old_path: dict[str, list[FileVerdict]] = {}  # once: a [base] table names every file the diff reads
    for v in tree.files:
        if v.section.old_path is not None:
            by_old_path.setdefault(v.section.old_path, []).append(v)
    for path, digest in spec.base_files:
        verdict = _judge_base_file(path, digest, tree, by_old_path.get(path, []))
        if verdict is None:
            unchecked.append(path)
        elif verdict:
            matched += 1
        else:
            drifted.append(path)
    moved = head.relation in (Relation.DESCENDANT, Relation.ANCESTOR, Relation.UNRELATED)
    if drifted or moved:
        state = BaseState.DRIFTED
    elif head.relation is Relation.SAME or matched:
        state = BaseState.PINNED
    else:
        state = BaseState.UNKNOWN
    return BaseCheck(
        state, pinned, head.head, head.relation, tuple(p for p, _ in spec.base_files),
        tuple(drifted), tuple(unchecked), head.detail or _unknown_why(state, spec),
    )


def _unknown_why(state: BaseState, spec: PatchSpec) -> str | None:
    if state is not BaseState.UNKNOWN:
        return None
    if spec.base_files:
        return "no [base] file can be checked while its hunks are in this state"
    return UNKNOWN_UNPINNED if spec.target.pinned_commit is None else UNKNOWN_NO_GIT


def compare_head(root: Root, pinned: str) -> HeadCheck:
    """HEAD of the git checkout at root against `pinned` (a full commit id, validated by the manifest).

    git never reads the checkout's configuration (patchkit.input.sealedgit), and runs at all only when `.git`
    passes the rule `.patchkit` follows (_vet_git); otherwise the answer is "cannot tell", saying why."""
    if not _has_git_dir(root):
        return HeadCheck(None, None, None)
    from patchkit.input import sealedgit  # lazy: sealed git (subprocess: only a checkout with a pinned commit)

    try:
        with sealedgit.open_git_dir(root.fd, root.path, _vet_git) as repo:
            if repo is None:
                return HeadCheck(None, None, None)
            head = sealedgit.read_head(repo, _vet_git)
            if head == pinned:
                return HeadCheck(head, Relation.SAME, None)
            with sealedgit.SealedGit(repo, head, shallow=sealedgit.read_shallow(repo, _vet_git)) as git:
                return HeadCheck(head, _relation(git, head, pinned, root.path), None)
    except sealedgit.GitUnreadable as exc:
        return HeadCheck(None, None, f"git was not asked about HEAD: {exc.reason}")
    except _Undecided as exc:
        return HeadCheck(exc.head, exc.relation, exc.detail)


def _has_git_dir(root: Root) -> bool:
    """Whether the root holds a `.git` entry at all (looked at by name under the root's descriptor)."""
    try:
        os.stat(".git", dir_fd=root.fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    except OSError:
        return True  # there, but not to be looked at: open_git_dir says why
    return True


class _Undecided(Exception):
    """git answered only part of the question: what it said (HEAD, perhaps a relation) and why no more."""

    def __init__(self, head: str, relation: Relation | None, detail: str) -> None:
        super().__init__(detail)
        self.head, self.relation, self.detail = head, relation, detail


def _relation(git: SealedGit, head: str, pinned: str, shown: Path) -> Relation:
    """How HEAD and the pinned commit are related, asked of git in the sealed repository (plumbing only)."""
    for commit, what in ((head, "HEAD"), (pinned, "the pinned commit")):
        found = git.run("rev-parse", "--verify", "--quiet", "--end-of-options", f"{commit}^{{commit}}")
        if found.returncode == 1 and commit == pinned:
            raise _Undecided(head, Relation.UNKNOWN_OBJECT, f"commit {pinned} is not in {shown}")
        if found.returncode != 0:
            raise _Undecided(head, None, f"git cannot read {what} {commit} in {shown}: {_said(found)}")
    for older, newer, relation in ((pinned, head, Relation.DESCENDANT), (head, pinned, Relation.ANCESTOR)):
        asked = git.run("merge-base", "--is-ancestor", "--end-of-options", older, newer)
        if asked.returncode == 0:
            return relation
        if asked.returncode != 1:
            raise _Undecided(head, None, f"git cannot compare the commits: {_said(asked)}")
    return Relation.UNRELATED


def _said(done: CompletedProcess[bytes]) -> str:
    return done.stderr.decode(errors="replace").strip()[:400] or f"exit {done.returncode}"


def _vet_git(st: os.stat_result, shown: str) -> None:
    """git runs only on a `.git` nobody but the running user or root could have written: the rule of
    `.patchkit` (workspace.trust.check_trusted), here refusing git, not the command."""
    from patchkit.input.sealedgit import GitUnreadable  # lazy: sealed git (loaded by compare_head already)

    try:
        check_trusted(st, shown, Path(shown))
    except UntrustedStateError:
        raise GitUnreadable(
            f"{shown} is owned by uid {st.st_uid} with mode {stat.S_IMODE(st.st_mode):04o}; patchkit runs git "
            "only on a .git that nobody but root or the running user could have written (the rule .patchkit "
            "follows)"
        ) from None


def read_paths(hunk_set: HunkSet) -> list[str]:
    """The files whose existing content the hunk set reads: every section's old path, except for creations."""
    return list(dict.fromkeys(f.old_path for f in hunk_set.files if f.old_path is not None))


def with_fingerprint(hunk_set: HunkSet, spec: PatchSpec) -> HunkSet:
    """The hunk set with the manifest's fingerprint of the image it targets on each section it proves.

    [base] names the sha256 of each file the hunk set reads on that image, [base_applied] of the same file with
    its hunks applied: evidence for the judgement like the diff's blob ids (FilePatch.base_sha256), which prove
    nothing once the diff is ported to another image. Only a section alone on its paths takes them: a file
    touched twice has no digest of its own between the sections.
    """
    before, after = dict(spec.base_files), dict(spec.applied_files)
    if not before:
        return hunk_set
    # [base_applied] is of the hunk set vendor pinned with it (hunkset_sha256, checked before this by
    # check_hunkset_pin; vendor drops [base_applied] when a new diff changes the hunk set without --base-tree)
    alone = {id(f) for f in _alone(hunk_set)}
    files = tuple(
        replace(f, base_sha256=before.get(f.old_path), applied_sha256=after.get(f.old_path))
        if f.old_path is not None and id(f) in alone else f
        for f in hunk_set.files
    )
    return replace(hunk_set, files=files)


def _alone(hunk_set: HunkSet) -> list[FilePatch]:
    """The sections that edit an existing file no other section of the hunk set touches (a fingerprint names
    the file before and after one section's hunks)."""
    touched = Counter(p for f in hunk_set.files for p in f.paths)
    return [f for f in hunk_set.files
            if f.old_path is not None and f.new_path is not None and all(touched[p] == 1 for p in f.paths)]


def fingerprint_images(tree: TreeState) -> tuple[dict[str, str], dict[str, str]]:
    """([base], [base_applied]) of a base tree: the sha256 of every file the hunk set reads, and of each file a
    section alone edits with its hunks applied (what `apply` writes there).

    A tree content alone reads `ambiguous` (a block that repeats its context, a repeated table: look-alikes
    that only the fingerprint tells apart) is judged again with its own digests, the post-image's as
    `git apply` would write it: the caller names the tree as the pristine image (vendor --base-tree), and
    then it must read unapplied with them, round trip included, exactly as status will read it. Any other
    state is refused as before.
    """
    from patchkit.judge.state import git_applied, judge_sections, replay_sections  # lazy: the judgement

    if tree.state is PatchState.AMBIGUOUS:
        files = []
        alone = {id(f) for f in _alone(tree.hunk_set)}
        for f in tree.hunk_set.files:
            data = tree.snapshots[f.old_path].data if f.old_path is not None and id(f) in alone else None
            after = git_applied(data, f.hunks) if data is not None else None
            files.append(f if after is None else replace(f, base_sha256=_sha256(data or b""),
                                                         applied_sha256=_sha256(after)))
        sections = replace(tree.hunk_set, files=tuple(files))
        tree = replace(tree, hunk_set=sections, files=tuple(judge_sections(sections.files, tree.snapshots)))
    before = fingerprint_tree(tree)
    overlay, problem = replay_sections(tree.files, tree.snapshots, forward=True)
    applied: dict[str, str] = {}
    if problem is None:
        for f in _alone(tree.hunk_set):
            data = overlay[f.path].data
            if f.old_path in before and data is not None:
                applied[f.old_path] = _sha256(data)
    return before, applied


def fingerprint_tree(tree: TreeState) -> dict[str, str]:
    """path -> sha256 of every file the hunk set reads, on a tree where the patch is not applied."""
    if tree.state is not PatchState.UNAPPLIED:
        raise BadInputError(
            f"the base tree reads as {tree.state.value}, not unapplied: {'; '.join(not_unapplied(tree))}",
            where=str(tree.root),
            hint="fingerprint the pristine pinned tree, before any patch is applied to it (or exclude the file "
            "or hunks that do not belong to this image)",
        )
    out: dict[str, str] = {}
    for path in read_paths(tree.hunk_set):
        data = tree.snapshots[path].data
        assert data is not None  # an unapplied section's old file exists
        out[path] = _sha256(data)
    return out


def not_unapplied(tree: TreeState, limit: int = 8) -> list[str]:
    """Each file and hunk that keeps a base tree from reading as unapplied, as `status -v` names them."""
    out: list[str] = []
    for verdict in tree.files:
        if verdict.state is PatchState.UNAPPLIED:
            continue
        hunks = [h for h in verdict.hunks if h.state is not HunkState.UNAPPLIED]
        if not hunks:
            detail = f" ({verdict.detail})" if verdict.detail else ""
            out.append(f"{verdict.section.path} reads as {verdict.state.value}{detail}")
        for hv in hunks:
            found = f", found at {hv.located.pos + 1}" if hv.located.pos is not None else ""
            out.append(f"{verdict.section.path} hunk {hv.hunk.index} {hv.hunk.header}: {hv.state.value} "
                       f"(expected line {hv.expected + 1}{found})")
    return out[:limit] + ([f"and {len(out) - limit} more (patchkit status -v lists them)"] if len(out) > limit else [])


def missing_files(tree: TreeState) -> tuple[str, ...]:
    """Files a section edits that are not under the root at all (nor at a rename's new path).

    That is a wrong --root or prefix / [paths], not drift: no advice about drift or retiring applies.
    """
    from patchkit.diff.hunks import FileOp  # lazy: the judgement (loaded by what made `tree`)

    missing = []
    for verdict in tree.files:
        section = verdict.section
        if section.op not in (FileOp.MODIFY, FileOp.RENAME):
            continue
        seen = verdict.judged_on
        if all(not (seen[p].exists if p in seen else True) for p in section.paths):
            missing.append(section.old_path or section.path)
    return tuple(dict.fromkeys(missing))


def missing_reason(missing: Sequence[str], root: Path) -> str:
    shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
    return (
        f"{shown} not found under the root {root}: check --root / the prefix (the manifest's prefix and "
        "[paths] place the diff's paths under the root)"
    )


def _judge_base_file(path: str, digest: str, tree: TreeState, sections: Sequence[FileVerdict]) -> bool | None:
    """True: the file's pre-image matches the fingerprint; False: it differs; None: cannot tell.

    `sections`: the verdicts of the sections whose old path is `path`, in order."""
    snap = tree.snapshots.get(path)
    if snap is None or not sections or not snap.exists:
        return None  # no longer read by this hunk set (its excludes changed), or not there to judge
    if snap.data is not None and _sha256(snap.data) == digest:
        return True
    states = {v.state for v in sections}
    if states == {PatchState.UNAPPLIED}:
        return False  # the current content is the pre-image
    if len(sections) > 1:
        return None  # a file touched twice: its pre-image is only known when every section is unapplied
    verdict = sections[0]
    if verdict.state in (PatchState.APPLIED, PatchState.PARTIAL):
        pre = _pre_image(verdict, path)
        return None if pre is None else _sha256(pre) == digest
    # Conflict or ambiguous: this patch alone cannot turn the fingerprinted content into what is there now.
    return False


def _pre_image(verdict: FileVerdict, path: str) -> bytes | None:
    """The file's content with this section's applied hunks taken back out."""
    from patchkit.judge.rewrite import rewrite_section  # lazy: the judgement (loaded by what made `verdict`)

    snap = rewrite_section(verdict, forward=False).get(path)
    return snap.data if snap is not None else None


# ---------------------------------------------------------------------------------------------------- record


def read_record(root: Root, patch_id: str, hunk_set: HunkSet) -> RecordCheck:
    """The applied record of patch_id under root, compared with the digest of the hunk set the manifest gives now
    (hashed only when there is a record to compare it with: a tree without one never pays for it)."""
    json_name, diff_name = record_names(patch_id)
    rel = f"{STATE_DIR}/{json_name}"
    snap = read_state(root, json_name)  # refused (exit 2) unless nobody but us or root could have written it
    if snap.data is None:
        return RecordCheck(RecordState.NONE, rel, None, None, None)
    try:
        record = parse_record(snap.data)
    except (ValueError, KeyError, TypeError) as exc:
        return RecordCheck(RecordState.INVALID, rel, None, None, f"unreadable record: {exc}")
    if record.patch != patch_id:
        return RecordCheck(RecordState.INVALID, rel, None, None, f"the record is for patch {record.patch!r}")
    if record.hunkset_sha256 == hunk_set.digest:
        return RecordCheck(RecordState.CURRENT, rel, record, None, None)
    try:
        stored = _load_stored(root, diff_name, record)
    except PatchkitError as exc:
        return RecordCheck(RecordState.STALE, rel, record, None, f"the stored copy is unusable: {exc.message}")
    return RecordCheck(RecordState.STALE, rel, record, stored, None)


def _load_stored(root: Root, name: str, record: AppliedRecord) -> HunkSet:
    """Rebuild the hunk set a record names from its stored diff, and prove it is the same one."""
    rel = f"{STATE_DIR}/{name}"
    data = read_state(root, name).data
    if data is None:
        raise BadInputError(f"{rel} is missing")
    if _sha256(data) != record.diff_sha256:
        raise BadInputError(f"{rel} does not have the sha256 its record names")
    from patchkit.diff.diffs import parse_diff  # lazy: the parser (only a stale record's stored copy)
    from patchkit.diff.filtering import filter_diff

    hunk_set = filter_diff(parse_diff(data, record.strip, rel), record.excludes)
    if hunk_set.digest != record.hunkset_sha256:
        raise BadInputError(f"{rel} does not give the hunk set its record names")
    return hunk_set


# ---------------------------------------------------------------------------------------------------- origin


def assess(
    spec: PatchSpec, tree: TreeState, root: Root, record: RecordCheck, *, used_stored_copy: bool
) -> Provenance:
    base = check_base(spec, tree, root)
    return Provenance(base, record, origin_of(tree.state, record, base), used_stored_copy)


def origin_of(state: PatchState, record: RecordCheck, base: BaseCheck | None = None) -> Origin | None:
    if record.state is RecordState.STALE:
        return Origin.OTHER_VERSION
    if state is not PatchState.APPLIED:
        return None
    if record.state is RecordState.CURRENT:
        return Origin.THIS_VERSION
    if record.state is RecordState.NONE:
        return Origin.UPSTREAM if ships_upstream(base) else Origin.OUTSIDE
    return None


def ships_upstream(base: BaseCheck | None) -> bool:
    """An applied tree without a record is the image's own only when the base shows the engine moved on: HEAD
    descends from the pinned commit, or a file differs from its [base] pre-image fingerprint."""
    if base is None or base.state is not BaseState.DRIFTED:
        return False
    return base.relation is Relation.DESCENDANT or bool(base.drifted)


def check_hunkset_pin(spec: PatchSpec, hunk_set: HunkSet) -> None:
    """The manifest's hunkset_sha256, when recorded, must name the hunk set its diff and excludes give."""
    if spec.hunkset_sha256 is not None and spec.hunkset_sha256 != hunk_set.digest:
        raise ManifestError(
            f"the filtered hunk set has sha256 {hunk_set.digest}, the manifest records {spec.hunkset_sha256}",
            where=str(spec.manifest_path),
            hint="the excludes or strip changed since the diff was vendored; review, then re-pin its own diff with "
            f"`{repin_command(spec)}`",
        )


def repin_command(spec: PatchSpec) -> str:
    """`patchkit vendor` of the entry's own (verified) diff: re-pins it offline, from any folder; its [source]
    is kept (vendor records no new source for the entry's own diff)."""
    return shlex.join(["patchkit", "vendor", spec.id, "--patches", str(spec.folder.parent.absolute()),
                       "--from", str(spec.diff_path.absolute())])


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
