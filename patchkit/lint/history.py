"""History mode: what a pull request changed (`REV..HEAD`), checked against the waiver policy.

A patch added or changed in the range must have its waiver added or changed in the same range, and a newly
added patch must name the pull request that adds it. A patch site of the repository scan that is not on the
base (by fingerprint: added, or its command changed) needs the waiver named after this pull request, added in
the range and naming its file; a site already on the base needs a waiver naming it on the base. The range is
diffed from the merge base of REV and HEAD, so commits that landed on the base branch after this branch forked
are not counted as this branch's changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from patchkit.errors import BadInputError
from patchkit.input.manifest import MANIFEST_NAME, PatchSpec, line_of_key
from patchkit.lint.ci import PullRequest
from patchkit.lint.coverage import Cover, cover_site, names_file, project_relative, waivers_naming
from patchkit.lint.findings import Finding, Rule
from patchkit.lint.inputs import PENDING_NAME, WAIVER_NAME, LintInput, WaiverFile
from patchkit.scan import PatchSite, ScanConfig, scan_files
from patchkit.scan.sources import select_paths

if TYPE_CHECKING:
    import git


@dataclass(frozen=True)
class RangeChanges:
    """Files changed between the merge base of REV and HEAD, as repository-relative POSIX paths."""

    rev: str
    root: Path  # the work tree, resolved
    added: frozenset[str]
    changed: frozenset[str]  # added, modified or deleted
    merge_base: str = ""  # the commit the range starts from

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
    import git  # lazy: gitpython (~140 ms; only history mode pays for it)

    repo = _open_repository(start)
    root = Path(str(repo.working_tree_dir)).resolve()
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
    return _parse_name_status(rev, root, output, merge_bases[0].hexsha)


def _open_repository(start: Path) -> git.Repo:
    import git  # lazy: gitpython (~140 ms; only history mode pays for it)

    # A waiver-only repository has no patches folder: look from the nearest folder that exists.
    while not start.exists() and start != start.parent:
        start = start.parent
    try:
        repo = git.Repo(start, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise BadInputError(
            "--base needs a git repository, and this folder is not in one", where=str(start)
        ) from None
    if repo.working_tree_dir is None:
        raise BadInputError("--base needs a repository with a work tree", where=str(start))
    return repo


def _parse_name_status(rev: str, root: Path, output: str, merge_base: str = "") -> RangeChanges:
    fields = [f for f in output.split("\0") if f]
    # With --no-renames every record is exactly "<status>\0<path>".
    pairs = list(zip(fields[0::2], fields[1::2], strict=True))
    return RangeChanges(
        rev=rev,
        root=root,
        added=frozenset(path for status, path in pairs if status.startswith("A")),
        changed=frozenset(path for _, path in pairs),
        merge_base=merge_base,
    )


@dataclass(frozen=True)
class BaseSnapshot:
    """The scan and the waivers as they were at the merge base."""

    fingerprints: frozenset[str]
    waiver_texts: tuple[tuple[str, str], ...]  # (project-relative path, text) of numbered and pending waivers


def read_base_snapshot(changes: RangeChanges, lint_input: LintInput, config: ScanConfig) -> BaseSnapshot:
    """Scan the merge base's files (the same globs as the work tree) and read its waivers, through git."""
    from git.objects import Blob  # lazy: gitpython

    repo = _open_repository(changes.root)
    commit = repo.commit(changes.merge_base)
    project = changes.relative(lint_input.root)
    prefix = "" if project == "." else project + "/"
    waivers = changes.relative(lint_input.waivers_dir) + "/"
    blobs: dict[str, bytes] = {}
    texts: list[tuple[str, str]] = []
    candidates: dict[str, Blob] = {}
    for item in commit.tree.traverse():
        if not isinstance(item, Blob) or not str(item.path).startswith(prefix):
            continue
        path = str(item.path)
        name = path.rsplit("/", 1)[-1]
        if path.startswith(waivers) and (WAIVER_NAME.match(name) or PENDING_NAME.match(name)):
            texts.append((path[len(prefix) :], item.data_stream.read().decode("utf-8", errors="replace")))
        candidates[path[len(prefix) :]] = item
    for path in select_paths(candidates, config):
        blobs[path] = candidates[path].data_stream.read()
    result = scan_files(blobs.items(), config)
    return BaseSnapshot(frozenset(s.fingerprint for s in result.sites), tuple(texts))


def check_site_history(
    lint_input: LintInput, changes: RangeChanges, base: BaseSnapshot, pull_request: PullRequest | None
) -> list[Finding]:
    """PK402, PK403 (and PK303 for sites when the pull request is unknown) for every site of the scan."""
    findings: list[Finding] = []
    waiver_folder = project_relative(lint_input, lint_input.waivers_dir) or ""
    added_waivers = [w for w in lint_input.waivers if w.is_waiver and changes.relative(w.path) in changes.added]
    for site in lint_input.sites:
        cover = cover_site(lint_input, site)
        if cover.cover is Cover.REGISTRY:
            continue
        place = lint_input.site_path(site)
        if site.fingerprint not in base.fingerprints:
            findings += _check_new_site(lint_input, changes, site, place, added_waivers, pull_request, cover.by)
        elif site.fingerprint not in lint_input.baselined and not any(
            names_file(text, waiver_folder, site.path) for _, text in base.waiver_texts
        ):
            findings.append(
                Finding.of(
                    Rule.HISTORY_SITE_BASE_UNWAIVED,
                    place,
                    site.line,
                    f"pre-existing patch site ({site.kind.label}) patching {site.what} has no waiver on "
                    f"{changes.rev}",
                    f"the waiver named after the pull request that introduced it must already "
                    f"name {site.path} on the base branch; fix that there, or accept the site with "
                    f"--write-baseline",
                )
            )
    return findings


def _check_new_site(
    lint_input: LintInput,
    changes: RangeChanges,
    site: PatchSite,
    place: Path,
    added: list[WaiverFile],
    pull_request: PullRequest | None,
    covered_by: str | None,
) -> list[Finding]:
    what = f"patch site ({site.kind.label}) added or changed in {changes.rev}..HEAD, patching {site.what}"
    if pull_request is None:
        if waivers_naming(lint_input, site, added):
            return [
                Finding.of(
                    Rule.HISTORY_PR_UNKNOWN,
                    place,
                    site.line,
                    f"cannot check that the waiver of the {what} is named after this pull request: its number "
                    f"is unknown; pass --pr N, or run in a pull-request build of a CI that sets e.g. GITHUB_REF",
                )
            ]
        return [
            Finding.of(
                Rule.HISTORY_SITE_UNWAIVED,
                place,
                site.line,
                f"{what}: no waiver added in this range names {site.path}; add "
                f"{lint_input.waivers_dir}/N.md, N this pull request, naming it",
            )
        ]
    expected = lint_input.waiver_path(pull_request.number)
    mine = [w for w in added if w.path == expected]
    if waivers_naming(lint_input, site, mine):
        return []
    if mine:
        fix = f"{expected} is added but does not name {site.path}: name it (a path or a link)"
    elif lint_input.waiver(pull_request.number) is not None:
        fix = f"{expected} exists but is not added by this pull request: a new site needs its own new waiver"
    else:
        fix = f"add {expected} to this pull request, naming {site.path}"
    if covered_by is not None and all(w.path != Path(covered_by) for w in mine):
        fix += f" ({covered_by} names the file, but a site this pull request adds or changes needs the waiver " \
            f"of this pull request, #{pull_request.number})"
    return [Finding.of(Rule.HISTORY_SITE_UNWAIVED, place, site.line, f"{what}: {fix}")]


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
        if is_new and spec.moved_in is not None:
            findings += _check_moved(lint_input, changes, spec, pull_request)
            continue
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
                    f"{lint_input.waiver_path(pull_request.number)}{_moved_note(changes, waiver, pull_request)}",
                )
            )
    return findings


def _moved_note(changes: RangeChanges, waiver: Path, pull_request: PullRequest) -> str:
    """For a patch that may be moved here with its existing waiver: the key that says so."""
    if not waiver.is_file() or changes.relative(waiver) in changes.added:
        return ""
    return (f"; or, if the patch is moved here with its existing waiver {waiver}, keep introduced_by and add "
            f"moved_in = {pull_request.number} under [waiver]")


def _check_moved(
    lint_input: LintInput, changes: RangeChanges, spec: PatchSpec, pull_request: PullRequest | None
) -> list[Finding]:
    """A new entry with `moved_in`: a patch already waived (introduced_by, an earlier PR) moved into the
    registry. Its waiver is the original one, on the base already; moved_in must be this pull request."""
    assert spec.introduced_by is not None and spec.moved_in is not None
    findings: list[Finding] = []
    line = line_of_key(spec.manifest_path, "moved_in")
    waiver = lint_input.waiver_path(spec.introduced_by)
    relative = changes.relative(waiver)
    if not waiver.is_file() or relative in changes.added:
        state = "is added by this range" if waiver.is_file() else "does not exist"
        findings.append(
            Finding.of(
                Rule.HISTORY_MOVED_UNWAIVED,
                spec.manifest_path,
                line,
                f"patch {spec.id} says it is moved here (moved_in = {spec.moved_in}) with the waiver of pull "
                f"request #{spec.introduced_by}, but {waiver} {state}, so it is not on {changes.rev}: a moved patch "
                f"keeps the waiver that was filed with it; fix introduced_by, or, if this pull request introduces "
                f"the patch, remove moved_in and set introduced_by = "
                f"{pull_request.number if pull_request else 'this pull request'}",
            )
        )
    if pull_request is None:
        findings.append(
            Finding.of(
                Rule.HISTORY_PR_UNKNOWN,
                spec.manifest_path,
                line,
                f"cannot check that moved patch {spec.id} names this pull request in moved_in: its number is "
                f"unknown; pass --pr N, or run in a pull-request build of a CI that sets e.g. GITHUB_REF",
            )
        )
    elif spec.moved_in != pull_request.number:
        findings.append(
            Finding.of(
                Rule.HISTORY_WRONG_PR,
                spec.manifest_path,
                line,
                f"patch {spec.id} is moved here by pull request #{pull_request.number} (from "
                f"{pull_request.source}), but its manifest has moved_in = {spec.moved_in}; set moved_in = "
                f"{pull_request.number} (introduced_by = {spec.introduced_by} keeps its waiver)",
            )
        )
    return findings
