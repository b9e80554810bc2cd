"""History mode: what a pull request changed (`REV..HEAD`), checked against the waiver policy.

A patch added or changed in the range must have its waiver added or changed in the same range, and a newly
added patch must name the pull request that adds it. The range is diffed from the merge base of REV and HEAD,
so commits that landed on the base branch after this branch forked are not counted as this branch's changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from patchkit.errors import BadInputError
from patchkit.lint.ci import PullRequest
from patchkit.lint.findings import Finding, Rule
from patchkit.lint.inputs import LintInput
from patchkit.manifest import MANIFEST_NAME, line_of_key


@dataclass(frozen=True)
class RangeChanges:
    """Files changed between the merge base of REV and HEAD, as repository-relative POSIX paths."""

    rev: str
    root: Path  # the work tree, resolved
    added: frozenset[str]
    changed: frozenset[str]  # added, modified or deleted

    def relative(self, path: Path) -> str:
        return PurePosixPath(path.resolve().relative_to(self.root)).as_posix()


def read_range_changes(rev: str, patches_dir: Path, waivers_dir: Path) -> RangeChanges:
    """Ask git which files under the two folders changed in `rev..HEAD`, in the repository holding them."""
    start = patches_dir
    if not rev or rev.startswith("-"):
        # Never let user text reach git as an option.
        raise BadInputError(
            f"--base {rev!r} is not a revision", hint="pass a branch, tag or commit, e.g. origin/main"
        )
    import git  # ~140 ms; only history mode pays for it

    try:
        repo = git.Repo(start, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise BadInputError(
            "--base needs a git repository, and this folder is not in one", where=str(start)
        ) from None
    if repo.working_tree_dir is None:
        raise BadInputError("--base needs a repository with a work tree", where=str(start))
    root = Path(repo.working_tree_dir).resolve()
    try:
        base = repo.commit(rev)
        head = repo.head.commit
    except (git.BadName, git.BadObject, ValueError) as exc:
        raise BadInputError(
            f"cannot resolve --base {rev!r} or HEAD to a commit ({exc})",
            where=str(root),
            hint="fetch the base first (git fetch origin main); with actions/checkout set fetch-depth: 0",
        ) from None
    merge_bases = repo.merge_base(base, head)
    if not merge_bases:
        raise BadInputError(
            f"{rev} and HEAD have no common ancestor",
            where=str(root),
            hint="the clone is probably shallow: fetch more history (fetch-depth: 0 in actions/checkout)",
        )
    folders = []
    for folder in (patches_dir, waivers_dir):
        try:
            folders.append(PurePosixPath(folder.resolve().relative_to(root)).as_posix())
        except ValueError:
            raise BadInputError(
                f"the folder is outside the git repository at {root}, so --base cannot see its history",
                where=str(folder),
            ) from None
    output = repo.git.diff(
        "--name-status", "--no-renames", "-z", merge_bases[0].hexsha, head.hexsha, "--", *folders
    )
    return _parse_name_status(rev, root, output)


def _parse_name_status(rev: str, root: Path, output: str) -> RangeChanges:
    fields = [f for f in output.split("\0") if f]
    # With --no-renames every record is exactly "<status>\0<path>".
    pairs = list(zip(fields[0::2], fields[1::2], strict=True))
    return RangeChanges(
        rev=rev,
        root=root,
        added=frozenset(path for status, path in pairs if status.startswith("A")),
        changed=frozenset(path for _, path in pairs),
    )


def check_history(
    lint_input: LintInput, changes: RangeChanges, pull_request: PullRequest | None
) -> list[Finding]:
    """PK301-PK303 for every loadable patch the range touches."""
    findings: list[Finding] = []
    for spec in lint_input.specs:
        folder = changes.relative(spec.folder)
        touched = any(path.startswith(folder + "/") for path in changes.changed)
        if not touched:
            continue
        is_new = f"{folder}/{MANIFEST_NAME}" in changes.added
        number = spec.introduced_by
        if number is None:
            continue  # PK201 already asks for it
        line = line_of_key(spec.manifest_path, "introduced_by")
        waiver = lint_input.waiver_path(number)
        if changes.relative(waiver) not in changes.changed or not waiver.is_file():
            verb, fix = ("added", "add") if is_new else ("changed", "update")
            findings.append(
                Finding.of(
                    Rule.HISTORY_WAIVER_UNCHANGED,
                    spec.manifest_path,
                    line,
                    f"patch {spec.id} is {verb} in {changes.rev}..HEAD but its waiver {waiver} is not; "
                    f"{fix} the waiver in the same pull request (what is patched, excluded paths, removal)",
                )
            )
        if not is_new:
            continue
        if pull_request is None:
            findings.append(
                Finding.of(
                    Rule.HISTORY_PR_UNKNOWN,
                    spec.manifest_path,
                    line,
                    f"cannot check that new patch {spec.id} names this pull request: its number is unknown; "
                    f"pass --pr N, or run in a pull-request build of a CI that sets e.g. GITHUB_REF",
                )
            )
        elif number != pull_request.number:
            upstream_note = " (that is the upstream PR)" if number == spec.upstream.pr else ""
            findings.append(
                Finding.of(
                    Rule.HISTORY_WRONG_PR,
                    spec.manifest_path,
                    line,
                    f"new patch {spec.id} has introduced_by = {number}{upstream_note}, but it is added by "
                    f"pull request #{pull_request.number} (from {pull_request.source}); set introduced_by = "
                    f"{pull_request.number} and name its waiver "
                    f"{lint_input.waiver_path(pull_request.number)}",
                )
            )
    return findings
