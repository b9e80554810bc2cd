"""History mode: what a pull request changed (`REV..HEAD`), checked against the waiver policy.

A patch added or changed in the range must have its waiver added or changed in the same range, and a newly
added patch must name the pull request that adds it. A patch site of the repository scan that is not on the
base (by fingerprint: added, or its command changed) needs the waiver named after this pull request, added in
the range and naming its file; a site already on the base needs a waiver naming it on the base. The range is
diffed from the merge base of REV and HEAD, so commits that landed on the base branch after this branch forked
are not counted as this branch's changes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from patchkit.errors import BadInputError
from patchkit.input.manifest import MANIFEST_NAME, PatchSpec, line_of_key
from patchkit.lint.ci import PullRequest
from patchkit.lint.coverage import Cover, cover_site, names_file, project_relative, waivers_naming
from patchkit.lint.findings import Finding, Rule
from patchkit.lint.inputs import PENDING_NAME, WAIVER_NAME, LintInput, WaiverFile
from patchkit.scan import MAX_SCANNED_BYTES, PatchSite, ScanConfig, scan_files
from patchkit.scan.sources import select_paths

if TYPE_CHECKING:
    from subprocess import CompletedProcess

    from patchkit.input.sealedgit import SealedGit


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
    """Ask git which files under the two folders changed in `rev..HEAD`, in the repository holding them.

    git never reads this repository's configuration, hooks or attributes (patchkit.input.sealedgit): the files
    come from a fork's pull request, and the repository config is only the runner's."""
    if not rev or rev.startswith("-"):
        # Never let user text reach git as an option.
        raise BadInputError(
            f"--base {rev!r} is not a revision", hint="pass a branch, tag or commit, e.g. origin/main"
        )
    with _sealed_repository(patches_dir) as (root, git):
        base = _resolve(git, rev, root)
        head = _resolve(git, "HEAD", root)
        found = git.run("merge-base", "--end-of-options", base, head)
        if found.returncode == 1:
            raise BadInputError(
                f"{rev} and HEAD have no common ancestor",
                where=str(root),
                hint="the clone is probably shallow: fetch more history (fetch-depth: 0 in actions/checkout)",
            )
        merge_base = _checked(found, root).decode().strip()
        folders = []
        for folder in (patches_dir, waivers_dir):
            try:
                folders.append(PurePosixPath(folder.resolve().relative_to(root)).as_posix())
            except ValueError:
                raise BadInputError(
                    f"the folder is outside the git repository at {root}, so --base cannot see its history",
                    where=str(folder),
                ) from None
        output = _checked(git.run(
            "diff-tree", "-r", "--name-status", "--no-renames", "-z", "--no-ext-diff", "--no-textconv",
            "--end-of-options", merge_base, head, "--", *folders,
        ), root)
    return _parse_name_status(rev, root, output.decode("utf-8", errors="surrogateescape"), merge_base)


@contextmanager
def _sealed_repository(start: Path) -> Iterator[tuple[Path, SealedGit]]:
    """The work tree holding `start` and git sealed off from its configuration, with every ref of the
    repository as patchkit read it (HEAD, branches, tags, remotes; FETCH_HEAD and ORIG_HEAD too)."""
    from patchkit.input import sealedgit  # lazy: sealed git (subprocess: only history mode)

    root = _work_tree_of(start)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        with sealedgit.open_git_dir(fd, root, follow_gitfile=True) as repo:
            assert repo is not None  # _work_tree_of found it
            head = sealedgit.read_head(repo)
            refs = sealedgit.read_refs(repo)
            with sealedgit.SealedGit(repo, head, refs, sealedgit.read_shallow(repo),
                                     sealedgit.read_pseudo_refs(repo)) as git:
                yield root, git
    except sealedgit.GitUnreadable as exc:
        raise BadInputError(f"--base cannot read the git repository: {exc.reason}", where=str(root)) from None
    finally:
        os.close(fd)


def _work_tree_of(start: Path) -> Path:
    """The nearest folder at or above `start` holding `.git` (not above GIT_CEILING_DIRECTORIES), resolved."""
    # A waiver-only repository has no patches folder: look from the nearest folder that exists.
    while not start.exists() and start != start.parent:
        start = start.parent
    ceilings = {Path(p).resolve() for p in os.environ.get("GIT_CEILING_DIRECTORIES", "").split(":") if p}
    folder = start.resolve()
    while True:
        if os.path.lexists(folder / ".git"):
            return folder
        if folder.parent == folder or folder.parent in ceilings:
            raise BadInputError("--base needs a git repository, and this folder is not in one", where=str(start))
        folder = folder.parent


def _resolve(git: SealedGit, rev: str, root: Path) -> str:
    found = git.run("rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
    if found.returncode != 0:
        raise BadInputError(
            f"cannot resolve --base {rev!r} or HEAD to a commit",
            where=str(root),
            hint="fetch the base first (git fetch origin main); with actions/checkout set fetch-depth: 0",
        )
    return found.stdout.decode().strip()


def _checked(done: CompletedProcess[bytes], root: Path) -> bytes:
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip()[:400]
        raise BadInputError(f"git failed on the repository (exit {done.returncode}): {said}", where=str(root))
    return done.stdout


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
    project = changes.relative(lint_input.root)
    prefix = "" if project == "." else project + "/"
    waivers = changes.relative(lint_input.waivers_dir) + "/"
    with _sealed_repository(changes.root) as (root, git):
        listing = _checked(git.run("ls-tree", "-r", "-z", "-l", "--full-tree", "--end-of-options",
                                   changes.merge_base), root)
        candidates: dict[str, tuple[str, int]] = {}  # project-relative path -> (blob id, size)
        for entry in listing.split(b"\0"):
            meta, _, raw_path = entry.partition(b"\t")
            fields = meta.split()
            path = raw_path.decode("utf-8", errors="surrogateescape")
            if len(fields) == 4 and fields[1] == b"blob" and path.startswith(prefix):
                size = int(fields[3]) if fields[3].isdigit() else -1  # "-" or "BAD": the blob is not here
                candidates[path[len(prefix):]] = (fields[2].decode(), size)
        names = [p for p in candidates if (prefix + p).startswith(waivers) and _is_waiver_name(p)]
        wanted = [p for p in select_paths(candidates, config) if candidates[p][1] <= MAX_SCANNED_BYTES]
        _require_present([p for p in (*names, *wanted) if candidates[p][1] < 0], prefix, changes)
        blobs = _read_blobs(git, root, {p: candidates[p][0] for p in dict.fromkeys([*names, *wanted])})
    texts = tuple((p, blobs[p].decode("utf-8", errors="replace")) for p in names)
    result = scan_files(((p, blobs[p]) for p in wanted), config)
    return BaseSnapshot(frozenset(s.fingerprint for s in result.sites), texts)


def _require_present(missing: list[str], prefix: str, changes: RangeChanges) -> None:
    """A file of the merge base that is not in the clone (a partial clone) is refused, never fetched: a fetch
    would run what the repository's config names for its remote."""
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        shown = ", ".join(prefix + p for p in missing[:3]) + more
        raise BadInputError(
            f"{shown} at the merge base {changes.merge_base[:12]} is not in this clone (a partial clone?); "
            "lint never lets git fetch",
            where=str(changes.root),
            hint="clone without a filter (actions/checkout: fetch-depth: 0 and no `filter:` input)",
        )


def _is_waiver_name(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return bool(WAIVER_NAME.match(name) or PENDING_NAME.match(name))


def _read_blobs(git: SealedGit, root: Path, ids: dict[str, str]) -> dict[str, bytes]:
    """path -> content of each blob id, in one `cat-file --batch` (plumbing: no filter, no textconv)."""
    if not ids:
        return {}
    out = _checked(git.run("cat-file", "--batch", input="".join(f"{i}\n" for i in ids.values()).encode()), root)
    blobs: dict[str, bytes] = {}
    at = 0
    for path, blob_id in ids.items():
        header_end = out.index(b"\n", at)
        header = out[at:header_end].split()
        if len(header) != 3 or header[0].decode() != blob_id or header[1] != b"blob":
            raise BadInputError(f"git could not read {path} at the merge base", where=str(root))
        size = int(header[2])
        blobs[path] = out[header_end + 1 : header_end + 1 + size]
        at = header_end + 1 + size + 1
    return blobs


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
