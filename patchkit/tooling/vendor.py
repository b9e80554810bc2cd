"""Vendor a diff into a patch folder and pin it: `patchkit vendor`.

The diff comes from a local file, an https URL (a pull request's `.diff`) or a commit range of a local git
repository. Pinning records three things in manifest.toml: `sha256` of the exact bytes, `hunkset_sha256` of
the filtered hunk set (stable across re-exports that differ only in `index` lines, timestamps or hunk
headings), and optionally the `[base]` fingerprint: the sha256 of every file the hunk set reads, taken from
the pinned tree. The manifest is edited in place with tomlkit, so the user's comments and layout survive; a
rerun that would change nothing writes nothing. This module writes only inside the patch folder, never to an
engine tree.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from patchkit import __version__
from patchkit.diff.diffs import parse_diff
from patchkit.diff.filtering import exclude_where, filter_diff, load_hunk_set, place_path
from patchkit.diff.hunks import Diff, paths_of
from patchkit.diff.hunkset import HunkSet
from patchkit.diff.mbox import count_mbox_commits, repeated_paths
from patchkit.errors import BadInputError, ManifestError
from patchkit.input.manifest import PatchSpec
from patchkit.input.registry import find_project_config, load_registry
from patchkit.input.tree import Root, Snapshot, open_root, read_snapshot
from patchkit.judge.state import judge_sections, scan_tree
from patchkit.judge.treestate import TreeState
from patchkit.outcome import PatchState, Relation
from patchkit.plan.plan import plan_changes
from patchkit.run.provenance import compare_head, fingerprint_images, read_paths
from patchkit.run.series import order_series
from patchkit.scan import ScanConfig
from patchkit.tooling.files import write_file
from patchkit.tooling.forge import GIT_DIFF_OPTIONS, net_diff
from patchkit.tooling.sitediff import parse_site_arg, read_site_diff
from patchkit.tooling.treediff import diff_trees

MAX_DIFF_BYTES = 32 * 1024 * 1024  # far above any real pull request; stops a wrong URL from filling the disk
FETCH_TIMEOUT = 30.0
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})  # plain http is allowed only here (tests)

# git options that pin the output, whatever the user's git config says (prefixes decide `strip`, the diff
# algorithm and context decide the hunks and so the digest).
_GIT_DIFF_OPTIONS = GIT_DIFF_OPTIONS
_REV = re.compile(r"^[^-\s][^\s]*$")


class SourceKind(Enum):
    FILE = "file"
    URL = "url"
    GIT = "git"
    MBOX = "mbox"  # the net diff of a multi-commit mbox (from a file or URL), computed on --base-tree
    SITE = "site"  # the diff a patch site of the project's scripts applies (--from-site FILE:LINE)
    TREE = "tree"  # made from an edited copy of the base tree (--from-tree EDITED --base-tree PRISTINE)


@dataclass(frozen=True)
class Fetched:
    kind: SourceKind
    label: str  # where the bytes came from, for messages and the report
    data: bytes
    # What vendor records in the manifest's [source] table (after `kind`): url, path, or repo + range + commits.
    details: tuple[tuple[str, str | int], ...] = ()
    strip: int | None = None  # the strip the source itself implies (a site's `patch -p0`), None: no opinion
    binary: tuple[str, ...] = ()  # files a made diff holds only as "Binary files ... differ" (--from-tree)
    patched_root: str | None = None  # a site's: the folder its command patches, as the script names it

    @property
    def source_table(self) -> dict[str, str | int]:
        return {"kind": self.kind.value, **dict(self.details)}


@dataclass(frozen=True)
class VendorResult:
    patch: str
    source: Fetched
    diff_path: Path
    manifest_path: Path
    sha256: str
    hunkset_sha256: str
    previous_sha256: str | None  # what the manifest recorded before this run
    previous_hunkset_sha256: str | None
    hunk_set: HunkSet
    base: tuple[tuple[str, str], ...]  # the [base] table after this run
    base_tree: Path | None  # the tree the fingerprint was just taken from
    changed: bool  # the diff or the manifest differs from what this run pins
    written: tuple[Path, ...]  # empty for an identical rerun and for --dry-run
    kept: Path | None = None  # the patch's own mbox, kept beside the net diff that replaced it

    @property
    def hunkset_changed(self) -> bool:
        return self.previous_hunkset_sha256 is not None and self.previous_hunkset_sha256 != self.hunkset_sha256


# -------------------------------------------------------------------------------------------------- sources


def read_source(
    source: str, *, timeout: float = FETCH_TIMEOUT, max_bytes: int = MAX_DIFF_BYTES, project: Path | None = None
) -> Fetched:
    """`--from SOURCE`: an http(s) URL when it has a scheme, else a local file (recorded relative to the
    project when it is inside it)."""
    if "://" in source:
        data = fetch_url(source, timeout=timeout, max_bytes=max_bytes)
        return Fetched(SourceKind.URL, source, data, (("url", source),))
    data = read_file(Path(source), max_bytes=max_bytes)
    return Fetched(SourceKind.FILE, source, data, (("path", recorded_path(Path(source), project)),))


def recorded_path(path: Path, project: Path | None) -> str:
    """What [source] records for a local path: relative to the project when inside it (a machine's absolute
    path means nothing on another checkout), else the absolute path."""
    full = Path(os.path.abspath(path))
    if project is not None:
        try:
            return full.relative_to(Path(os.path.abspath(project))).as_posix() or "."
        except ValueError:
            pass
    return str(full)


def registry_project(patches: Path) -> Path:
    """The project a registry belongs to, wherever the command runs: the nearest folder above it with a
    pyproject.toml, else the folder holding the registry. [source] records local paths relative to it, so
    PatchSpec.recorded_file finds them again from the manifest alone."""
    found = find_project_config(Path(os.path.abspath(patches)))
    return found.root if found.source is not None else Path(os.path.abspath(patches)).parent


def read_site(text: str, project: Path, config: ScanConfig, base_tree: Path | None = None) -> Fetched:
    """`--from-site FILE:LINE`: the diff of a patch site the scan reports, or of a `sed -i` site's edit done on
    `base_tree` (patchkit.tooling.sitediff)."""
    script, line = parse_site_arg(text)
    found = read_site_diff(project, Path(script), line, config, base_tree)
    _check_size(found.data, MAX_DIFF_BYTES, text)
    details: tuple[tuple[str, str | int], ...] = (("path", found.site.path), ("line", found.site.line))
    if found.diff_file is not None:
        label = f"{found.diff_file} (named by {found.site.path}:{found.site.line})"
    else:
        label = f"the {found.site.kind.label} at {found.site.path}:{found.site.line}"
    return Fetched(SourceKind.SITE, label, found.data, details, strip=found.strip,
                   patched_root=found.patched_root)


def read_tree(edited: Path, base: Path, project: Path | None) -> Fetched:
    """`--from-tree EDITED --base-tree PRISTINE`: git's diff of the files that differ (patchkit.tooling.treediff)."""
    made = diff_trees(base, edited)
    _check_size(made.data, MAX_DIFF_BYTES, str(edited))
    details: tuple[tuple[str, str | int], ...] = (
        ("path", recorded_path(edited, project)), ("base_tree", recorded_path(base, project)))
    label = f"the {len(made.changed)} changed files of {edited} against {base}"
    return Fetched(SourceKind.TREE, label, made.data, details, strip=1, binary=made.binary)


def read_file(path: Path, *, max_bytes: int = MAX_DIFF_BYTES) -> bytes:
    try:
        with open(path, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise BadInputError(f"cannot read the diff: {exc.strerror}", where=str(path)) from None
    _check_size(data, max_bytes, str(path))
    return data


def check_url(url: str) -> None:
    """https anywhere; plain http only to the loopback interface; no other scheme."""

    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return
    if parts.scheme == "http" and parts.hostname in LOOPBACK_HOSTS:
        return
    raise BadInputError(
        f"refusing to fetch {url!r}: only https:// URLs are allowed (plain http only on 127.0.0.1)",
        hint="use the https:// address, or download the diff and pass the file",
    )


def fetch_url(url: str, *, timeout: float = FETCH_TIMEOUT, max_bytes: int = MAX_DIFF_BYTES) -> bytes:
    """GET url (following redirects, each one checked like the first) and return at most max_bytes."""
    import urllib.error  # lazy: vendor's fetch (urllib.request: ~20 ms; only a URL fetches)
    import urllib.request

    class _CheckedRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(
            self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str
        ) -> urllib.request.Request | None:
            check_url(newurl)  # a forge may redirect; never to plain http elsewhere or another scheme
            return super().redirect_request(req, fp, code, msg, headers, newurl)

    check_url(url)
    handlers: list[urllib.request.BaseHandler] = [_CheckedRedirect()]
    if urlsplit(url).hostname in LOOPBACK_HOSTS:
        handlers.append(urllib.request.ProxyHandler({}))  # no proxy can reach our own loopback
    opener = urllib.request.build_opener(*handlers)
    request = urllib.request.Request(
        url, headers={"User-Agent": f"patchkit/{__version__}", "Accept": "text/x-diff, text/plain, */*"}
    )
    try:
        with opener.open(request, timeout=timeout) as response:
            length = response.headers.get("Content-Length")
            if length and length.isdigit() and int(length) > max_bytes:
                _check_size(b"", max_bytes, url, announced=int(length))
            data: bytes = response.read(max_bytes + 1)
    except urllib.error.HTTPError as exc:
        raise BadInputError(
            f"the server answered HTTP {exc.code} {exc.reason}", where=url,
            hint="check the URL; a private repository's diff must be downloaded and passed as a file",
        ) from None
    except urllib.error.URLError as exc:
        raise BadInputError(f"cannot fetch the diff: {_network_reason(exc.reason, url)}", where=url,
                            hint=offline_hint(url)) from None
    except (TimeoutError, OSError) as exc:
        raise BadInputError(f"cannot fetch the diff: {exc}", where=url, hint=f"timeout is {timeout:g}s") from None
    _check_size(data, max_bytes, url)
    return data


def offline_hint(url: str) -> str:
    """No network: fetch the file where there is one, and vendor from the file."""
    name = Path(urlsplit(url).path).name or "patch.diff"
    return (
        f"no network here? download the diff where there is one (`{shlex.join(['curl', '-fL', '-o', name, url])}`, "
        f"or the URL in a browser) and pass the file instead: --from {shlex.quote(name)}"
    )


def _network_reason(reason: object, url: str) -> str:
    """urllib's reason in words: `[Errno -2] Name or service not known` is a host that cannot be resolved."""
    if isinstance(reason, socket.gaierror):
        return f"cannot resolve the host {urlsplit(url).hostname} (no network or DNS here, or a mistyped host)"
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror.lower() if reason.strerror[:1].isupper() else reason.strerror
    return str(reason)


def _check_size(data: bytes, max_bytes: int, where: str, announced: int | None = None) -> None:
    size = announced if announced is not None else len(data)
    if size > max_bytes:
        raise BadInputError(
            f"the diff is larger than {max_bytes} bytes", where=where,
            hint="this is not the diff of one pull request; check the source",
        )


def export_git_range(repo_dir: Path, rev_range: str) -> Fetched:
    """`git diff BASE HEAD` for `BASE..HEAD`, or from their merge base for `BASE...HEAD` (what a PR shows)."""
    base, three_dots, head = _split_range(rev_range)
    import git  # lazy: gitpython (~140 ms)

    try:
        repo = git.Repo(repo_dir)
    except (git.exc.InvalidGitRepositoryError, git.exc.NoSuchPathError):
        raise BadInputError(
            "not a git repository", where=str(repo_dir), hint="--from-git takes the folder of a local clone"
        ) from None
    with repo:
        base_sha = _resolve_commit(repo, base, repo_dir)
        head_sha = _resolve_commit(repo, head, repo_dir)
        try:
            if three_dots:
                base_sha = repo.git.merge_base(base_sha, head_sha)
            data = repo.git.diff(
                *_GIT_DIFF_OPTIONS, base_sha, head_sha, "--", stdout_as_string=False, strip_newline_in_stdout=False
            )
        except git.exc.GitCommandError as exc:
            raise BadInputError(f"git failed: {exc.stderr.strip()}", where=str(repo_dir)) from None
    assert isinstance(data, bytes)
    if not data:
        raise BadInputError(f"{rev_range} changes nothing", where=str(repo_dir), hint="check the range")
    _check_size(data, MAX_DIFF_BYTES, str(repo_dir))
    details = (("repo", str(repo_dir)), ("range", rev_range), ("base_commit", base_sha), ("head_commit", head_sha))
    return Fetched(SourceKind.GIT, f"{repo_dir} {base_sha[:12]}..{head_sha[:12]}", data, details)


def _split_range(rev_range: str) -> tuple[str, bool, str]:
    # Ref names cannot contain "..", so the first "..." or ".." is the separator.
    three = "..." in rev_range
    base, _, head = rev_range.partition("..." if three else "..")
    for part in (base, head):
        if not _REV.match(part):
            raise BadInputError(
                f"--range {rev_range!r} must be BASE..HEAD (or BASE...HEAD) with two revisions, "
                "neither starting with '-'",
                hint="for example: --range v1.4.0..fix-branch",
            )
    return base, three, head


def _resolve_commit(repo: Any, rev: str, repo_dir: Path) -> str:
    import git  # lazy: gitpython (~140 ms)

    try:
        sha = repo.git.rev_parse("--verify", "--end-of-options", f"{rev}^{{commit}}")
    except git.exc.GitCommandError:
        raise BadInputError(
            f"{rev!r} names no commit", where=str(repo_dir), hint="fetch it into the clone, or check the name"
        ) from None
    return str(sha)


# ------------------------------------------------------------------------------------------------- pinning


def vendor_patch(
    spec: PatchSpec, fetched: Fetched, *, base_tree: Path | None = None, dry_run: bool = False
) -> VendorResult:
    """Check the diff against the manifest, then write it and pin it (unless nothing would change)."""
    if fetched.strip is not None and fetched.strip != spec.strip:
        raise BadInputError(
            f"{fetched.label} is applied with -p{fetched.strip}, but the manifest has strip = {spec.strip}",
            where=str(spec.manifest_path), hint=f"set strip = {fetched.strip} in the manifest",
        )
    diff = parse_diff(fetched.data, spec.strip, fetched.label)
    commits = count_mbox_commits(fetched.data)
    kept: tuple[Path, bytes] | None = None  # the patch's own mbox, kept beside the net diff that replaces it
    if commits > 1 and repeated_paths(diff):
        kept = _own_mbox(spec, fetched)
        fetched = _net_of_mbox(spec, fetched, diff, commits, base_tree, kept[0] if kept else None)
        diff = parse_diff(fetched.data, spec.strip, fetched.label)
    try:
        hunk_set = filter_diff(diff, spec.excludes, spec.path_map)
    except ManifestError as exc:
        raise ManifestError(
            exc.message, where=exclude_where(spec, exc),
            hint=f"{exc.hint}; every exclude must name a file of the vendored diff" if exc.hint else None,
        ) from None
    base: dict[str, str] | None = None
    applied: dict[str, str] | None = None  # [base_applied]: None keeps it
    if base_tree is not None:
        base, applied = _fingerprint_base(spec, hunk_set, base_tree)
    else:
        _check_kept_base(spec, hunk_set)
        if hunk_set.digest != spec.hunkset_sha256:
            applied = {}  # the digests of the old hunk set applied prove nothing about the new one
    sha256 = hashlib.sha256(fetched.data).hexdigest()
    old_manifest = spec.manifest_path.read_bytes()
    source = fetched.source_table if fetched.details and not _is_own_diff(spec, fetched) else None
    new_manifest = update_manifest(
        old_manifest.decode("utf-8"), sha256, hunk_set.digest, base, source, applied
    ).encode("utf-8")
    old_diff = spec.diff_path.read_bytes() if spec.diff_path.is_file() else None

    pending = [(spec.diff_path, fetched.data, old_diff), (spec.manifest_path, new_manifest, old_manifest)]
    changes = [(path, data) for path, data, old in pending if data != old]
    if kept is not None and not dry_run:
        _keep_file(*kept)  # first: the mbox is never lost, whatever fails after
    if kept is not None:
        changes.insert(0, kept)
    if not dry_run:
        for path, data in changes[1 if kept else 0:]:  # the diff first: a failure in between leaves a sha256
            _replace_file(path, data)  # mismatch, not a lie
    recorded = base if base is not None else dict(spec.base_files)
    return VendorResult(
        patch=spec.id,
        source=fetched,
        diff_path=spec.diff_path,
        manifest_path=spec.manifest_path,
        sha256=sha256,
        hunkset_sha256=hunk_set.digest,
        previous_sha256=spec.sha256,
        previous_hunkset_sha256=spec.hunkset_sha256,
        hunk_set=hunk_set,
        base=tuple(sorted(recorded.items())),
        base_tree=base_tree,
        changed=bool(changes),
        written=() if dry_run else tuple(path for path, _ in changes),
        kept=kept[0] if kept else None,
    )


def _is_own_diff(spec: PatchSpec, fetched: Fetched) -> bool:
    """The source is the entry's own diff file (a re-pin after the excludes changed): the [source] it was
    vendored from stays what it was."""
    if fetched.kind is not SourceKind.FILE:
        return False
    try:
        return Path(fetched.label).samefile(spec.diff_path)
    except OSError:
        return False


def _fingerprint_base(spec: PatchSpec, hunk_set: HunkSet, base_tree: Path) -> tuple[dict[str, str], dict[str, str]]:
    """([base], [base_applied]) of the pristine pinned tree (provenance.fingerprint_images)."""
    with open_root(base_tree) as root:
        pinned = spec.target.pinned_commit
        head = compare_head(root, pinned) if pinned is not None else None
        if head is not None and head.asked and head.relation is not Relation.SAME:
            raise BadInputError(
                f"the base tree is at {head.head or 'an unknown commit'}, not the pinned commit {pinned}",
                where=str(root.path),
                hint=head.detail or "check out the pinned commit, or correct target.pinned_commit",
            )
        if not spec.after:
            return fingerprint_images(scan_tree(root, hunk_set))
        return fingerprint_images(_tree_as_left(root, base_reader(spec, root), hunk_set))


def _stacked_below(spec: PatchSpec) -> list[tuple[PatchSpec, HunkSet]]:
    """The patches `spec` comes after (transitively), in series order, each with its filtered hunk set."""
    if not spec.after:
        return []

    ordered = order_series(load_registry(spec.folder.parent))
    by_id = {s.id: s for s in ordered}
    wanted: set[str] = set()
    todo = list(spec.after)
    while todo:
        pid = todo.pop()
        if pid not in wanted and pid in by_id:
            wanted.add(pid)
            todo += by_id[pid].after
    return [(s, load_hunk_set(s)) for s in ordered if s.id in wanted]


def base_reader(spec: PatchSpec, root: Root) -> Callable[[str], Snapshot]:
    """path under the root -> the file as the pristine base tree has it once the patches this one comes
    after are applied (in memory). A stacked patch was made on top of their result, so that is its pre-image:
    what [base] fingerprints and what --strict-base compares at run time."""
    before = _stacked_below(spec)
    overlay: dict[str, Snapshot] = {}
    if before:
        sections = HunkSet("below", tuple(f for _, h in before for f in h.files), ())
        below = scan_tree(root, sections)
        if below.state is not PatchState.UNAPPLIED:
            names = ", ".join(s.id for s, _ in before)
            raise BadInputError(
                f"the base tree reads as {below.state.value} for {names}, which this patch comes after, not "
                "unapplied",
                where=str(root.path), hint="fingerprint the pristine pinned tree, before any patch is applied to it",
            )
        overlay = dict(below.snapshots)
        overlay.update({c.path: c.after for c in plan_changes(below, forward=True).changes})

    def read(path: str) -> Snapshot:
        return overlay[path] if path in overlay else read_snapshot(root, path)

    return read


def _tree_as_left(root: Root, read: Callable[[str], Snapshot], hunk_set: HunkSet) -> TreeState:
    mine = {path: read(path) for path in paths_of(hunk_set.files)}
    return TreeState(root.path, hunk_set, tuple(judge_sections(hunk_set.files, mine)), mine)


def _own_mbox(spec: PatchSpec, fetched: Fetched) -> tuple[Path, bytes] | None:
    """(where to keep it, its bytes) when the mbox being replaced by its net diff is the patch's own diff file
    (`vendor ID --from <its diff>`, as a refused chain suggests); None for an mbox from elsewhere."""
    if fetched.kind is not SourceKind.FILE:
        return None
    try:
        same = Path(fetched.label).samefile(spec.diff_path)
    except OSError:
        return None
    if not same:
        return None
    keep = spec.diff_path.with_name(spec.diff_path.name + ".mbox")
    try:
        there = keep.read_bytes() if keep.exists() or keep.is_symlink() else None
    except OSError as exc:
        raise BadInputError(f"cannot read {keep.name}: {exc.strerror}", where=str(keep)) from None
    if there is not None and (keep.is_symlink() or there != fetched.data):
        raise BadInputError(
            f"{keep.name} is already there and is not this mbox: vendor keeps the mbox it replaces under that name",
            where=str(keep), hint=f"move {keep.name} away (or delete it if it is an old copy), then run vendor again",
        )
    return keep, fetched.data


def _keep_file(path: Path, data: bytes) -> None:
    """Write `path` if it is not there yet (exclusive: never over a file), complete or not at all."""
    if path.exists():
        return  # _own_mbox checked it holds these bytes
    try:
        write_file(path, data, replace=False)
    except FileExistsError as exc:
        raise BadInputError(f"cannot write {path.name}: {exc.strerror}", where=str(path)) from None


def _net_of_mbox(
    spec: PatchSpec, fetched: Fetched, diff: Diff, commits: int, base_tree: Path | None, kept: Path | None = None
) -> Fetched:
    """A multi-commit mbox whose commits touch a file more than once becomes the net diff of the range.
    `kept`: where the patch's own mbox is kept, which [source] then names."""
    repeated = repeated_paths(diff)
    shown = ", ".join(repeated[:3])
    if base_tree is None:
        raise BadInputError(
            f"{fetched.label} is an mbox of {commits} commits, and several of them change {shown}: patchkit "
            "vendors the net diff of such a range, not the chain of commits",
            where=fetched.label,
            hint="pass --base-tree DIR (the pristine pinned tree) to compute the net diff from this mbox, or run "
            f"`patchkit vendor {spec.id} --from-git CLONE --range BASE..HEAD` on a clone holding the commits",
        )
    if spec.strip != 1:
        raise BadInputError(
            f"the net diff of {fetched.label} is made with a/ b/ prefixes, but the manifest has strip = {spec.strip}",
            where=str(spec.manifest_path), hint="set strip = 1 (format-patch paths have one prefix component)",
        )
    with open_root(base_tree) as root:
        read_placed = base_reader(spec, root)
        data = net_diff(diff, lambda path: _renamed(read_placed(place_path(spec.path_map, path)), path))
    if not data:
        raise BadInputError(
            f"the {commits} commits of {fetched.label} cancel out: their net diff is empty",
            where=fetched.label, hint="nothing to vendor; check the range the mbox was made from",
        )
    kept_at = recorded_path(kept, registry_project(spec.folder.parent)) if kept is not None else None
    details = tuple(("path", kept_at) if kept_at is not None and key == "path" else (key, value)
                    for key, value in fetched.details)
    details = (*details, ("net_of_commits", commits))
    return Fetched(SourceKind.MBOX, f"net diff of {commits} commits of {fetched.label}", data, details)


def _renamed(snap: Snapshot, path: str) -> Snapshot:
    return Snapshot(path, snap.data, snap.mode)


def _check_kept_base(spec: PatchSpec, hunk_set: HunkSet) -> None:
    """Without --base-tree an existing [base] is kept, but only while it names exactly the files now read."""
    recorded = {path for path, _ in spec.base_files}
    if recorded and recorded != set(read_paths(hunk_set)):
        raise BadInputError(
            "the manifest's [base] fingerprint names other files than the new diff reads",
            where=str(spec.manifest_path),
            hint="pass --base-tree DIR (the pristine pinned tree) to fingerprint the new diff's files",
        )


def update_manifest(
    text: str,
    sha256: str,
    hunkset_sha256: str,
    base: Mapping[str, str] | None,
    source: Mapping[str, str | int] | None = None,
    applied: Mapping[str, str] | None = None,
) -> str:
    """The manifest text with the pins (and the [source] the diff came from) set; comments, order and layout
    untouched. Pure."""
    import tomlkit  # lazy: vendor's manifest edit (tomlkit: ~40 ms; `new` without --from edits none)

    doc = tomlkit.parse(text)
    for key, value in (("sha256", sha256), ("hunkset_sha256", hunkset_sha256)):
        if doc.get(key) != value:
            doc[key] = value
    if source is not None and dict(doc.get("source", {})) != dict(source):
        fresh = tomlkit.table()
        for key, item in source.items():
            fresh.add(key, item)
        if "source" in doc:
            doc["source"] = fresh
        else:
            doc.add("source", fresh)
    for name, digests in (("base", base), ("base_applied", applied)):
        if digests is None:
            continue
        table: Any = doc.get(name)
        if table is None:
            if digests:
                table = tomlkit.table()
                for path, digest in sorted(digests.items()):
                    table.add(path, digest)
                doc.add(name, table)
        elif not digests and name == "base_applied":
            del doc[name]
        else:
            for path in [p for p in table if p not in digests]:
                del table[path]
            for path, digest in sorted(digests.items()):
                if table.get(path) != digest:
                    table[path] = digest
    return tomlkit.dumps(doc)


def _replace_file(path: Path, data: bytes) -> None:
    """Write a registry file atomically through an exclusive, unpredictable temp name (never one planted there)."""
    write_file(path, data, replace=True)
