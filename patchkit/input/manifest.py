"""Load and validate `manifest.toml` into a frozen PatchSpec.

Every key is documented in the README ("The manifest"). Unknown keys, wrong types and missing reasons are
errors that name the manifest file and the line of the key, so a typo can never silently change behaviour.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple

from patchkit.display import closest, show_path
from patchkit.errors import ManifestError, PendingPatchError
from patchkit.input.excludes import Exclude
from patchkit.input.globs import is_glob, parse_glob
from patchkit.input.limits import (
    MAX_MANIFEST_BYTES,
    MAX_MANIFEST_NESTING,
    MAX_NAME_BYTES,
    MAX_PATCH_ID_CHARS,
    MAX_PATH_BYTES,
    MAX_PATH_DEPTH,
    check_diff_size,
)
from patchkit.input.paths import path_problem, reserved_name
from patchkit.input.tomlcompat import tomllib

MANIFEST_NAME = "manifest.toml"

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
# Patterns only an error message or a rarer form needs: compiled on first use (re caches them), not at import.
_PR_REF = r"^([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)?#([0-9]+)$"
_TOML_LINE = r"\(at line (\d+), column \d+\)"
_LONG_NUMBER = r"[0-9_]{4000,}"

# key -> (python type, required). Nested tables are listed separately.
_TOP_KEYS: dict[str, tuple[type, bool]] = {
    "id": (str, True),
    "title": (str, True),
    "diff": (str, True),
    "sha256": (str, False),
    "hunkset_sha256": (str, False),
    "strip": (int, False),
    "after": (list, False),
    "upstream": (dict, True),
    "target": (dict, True),
    "exclude": (dict, False),
    "waiver": (dict, False),
    "base": (dict, False),
    "base_applied": (dict, False),
    "prefix": (str, False),
    "paths": (dict, False),
    "source": (dict, False),
}
# repo is required for an upstream patch; pr or prs (exactly one of them) names its pull requests. A local
# patch (origin = "local") has no PR and needs a reason instead. Checked in _build_upstream.
_UPSTREAM_KEYS: dict[str, tuple[type, bool]] = {
    "repo": (str, False),
    "pr": (int, False),
    "prs": (list, False),
    "origin": (str, False),
    "reason": (str, False),
    "url": (str, False),
    "diff_url": (str, False),
}
# Written by `patchkit vendor`: where the diff came from. Informational; never read for a decision.
_SOURCE_KEYS: dict[str, tuple[type, bool]] = {
    "kind": (str, True),
    "url": (str, False),
    "path": (str, False),
    "repo": (str, False),
    "range": (str, False),
    "base_commit": (str, False),
    "head_commit": (str, False),
    "net_of_commits": (int, False),
    "line": (int, False),  # kind site: the line of the patch site in `path` (a script of the project)
    "base_tree": (str, False),  # kind tree: the pristine tree `path` (the edited copy) was diffed against
}
_SOURCE_KINDS = ("url", "file", "git", "mbox", "site", "tree")
_TARGET_KEYS: dict[str, tuple[type, bool]] = {
    "name": (str, True),
    "pinned_commit": (str, False),
}
_WAIVER_KEYS: dict[str, tuple[type, bool]] = {
    "introduced_by": (int, True),
    "moved_in": (int, False),  # the PR that moved an already waived patch into the registry (lint PK302/PK304)
}

UNKNOWN_COMMIT = "unknown"


def is_patch_id(text: str) -> bool:
    """Letters, digits, '.', '_' and '-', starting with a letter or digit, at most MAX_PATCH_ID_CHARS: a folder
    name and an id."""
    return patch_id_problem(text) is None


def quote_short(text: str) -> str:
    """A value for a message (an id, a folder): quoted, and cut after 80 characters."""
    return repr(text) if len(text) <= 80 else f"{text[:80]!r}..."


def patch_id_problem(text: str) -> str | None:
    """Why `text` cannot be a patch id (too long, or a character outside the id's alphabet), or None."""
    if len(text) > MAX_PATCH_ID_CHARS:
        return f"is {len(text)} characters long; a patch id may have at most {MAX_PATCH_ID_CHARS}"
    if _ID.match(text) is None:
        return "must be letters, digits, '.', '_' or '-', starting with a letter or digit"
    return None


class OriginKind(Enum):
    UPSTREAM = "upstream"  # ported from one or more upstream pull requests
    LOCAL = "local"  # a fix of our own: no upstream PR exists (the manifest says why)


class PullRef(NamedTuple):  # immutable and compared by value, ~5x cheaper to create than a frozen dataclass
    """One upstream pull request: `owner/repo#N`."""

    repo: str
    number: int

    @property
    def url(self) -> str:
        return f"https://github.com/{self.repo}/pull/{self.number}"

    def __str__(self) -> str:
        return f"{self.repo}#{self.number}"


class Upstream(NamedTuple):  # a NamedTuple, as PullRef
    """Where the change comes from. `repo`, `pr` and `url` name the first PR (kept for one-PR readers);
    `prs` lists every PR, in manifest order. A local patch has no PR: pr None, prs empty, reason set."""

    repo: str  # "" for a local patch that names no repository
    pr: int | None
    url: str
    diff_url: str | None
    prs: tuple[PullRef, ...] = ()
    origin: OriginKind = OriginKind.UPSTREAM
    reason: str | None = None  # why a local patch has no upstream PR

    @property
    def is_local(self) -> bool:
        return self.origin is OriginKind.LOCAL

    def describe(self) -> str:
        """`owner/repo#1, owner/repo#2`, or `local: reason`, for one-line listings."""
        if self.is_local:
            return f"local ({self.reason})"
        return ", ".join(str(p) for p in self.prs)


class SourceRecord(NamedTuple):  # a NamedTuple, as PullRef
    """Where `patchkit vendor` took the diff from (the manifest's [source] table)."""

    kind: str  # url, file, git or mbox
    fields: tuple[tuple[str, str | int], ...]  # the table's other keys, in order

    def describe(self) -> str:
        values = dict(self.fields)
        if "url" in values:
            return str(values["url"])
        if "range" in values:
            commits = f" ({str(values.get('base_commit', ''))[:12]}..{str(values.get('head_commit', ''))[:12]})"
            return f"{values.get('repo', '')} {values['range']}{commits if 'head_commit' in values else ''}"
        if self.kind == "site" and "line" in values:
            return f"{values.get('path', '')}:{values['line']}"
        if self.kind == "tree" and "base_tree" in values:
            return f"{values.get('path', '')} (against {values['base_tree']})"
        return str(values.get("path", self.kind))


class Target(NamedTuple):  # a NamedTuple, as PullRef
    """The engine the patch is for (`[target]`), and the commit it was validated on, if known."""

    name: str
    pinned_commit: str | None  # None: not known yet (recorded as "unknown" or omitted)


class PathMap(NamedTuple):  # a NamedTuple, as PullRef
    """Where the diff's paths land under the root: a path under a [paths] folder is moved to its target
    (the longest folder wins), every other path goes under `prefix`. Excludes name the diff's own paths."""

    prefix: str = ""
    folders: tuple[tuple[str, str], ...] = ()  # ("csrc/", "aiter_meta/csrc/"), longest first

    @property
    def identity(self) -> bool:
        return not self.prefix and not self.folders

    def place(self, path: str) -> str:
        for source, target in self.folders:
            if path.startswith(source):
                return target + path[len(source):]
        return self.prefix + path


_IDENTITY = PathMap()  # the default: every path as the diff names it


@dataclass(frozen=True)
class PatchSpec:
    """One patch entry: what the manifest promises, with every path resolved."""

    id: str
    title: str
    folder: Path
    diff_name: str
    sha256: str | None
    hunkset_sha256: str | None
    strip: int
    upstream: Upstream
    target: Target
    excludes: tuple[Exclude, ...]
    introduced_by: int | None
    after: tuple[str, ...]
    base_files: tuple[tuple[str, str], ...]  # (path, sha256 of its pinned pre-image)
    path_map: PathMap = _IDENTITY
    source: SourceRecord | None = None
    moved_in: int | None = None  # [waiver] moved_in: the PR that moved it here; introduced_by keeps its waiver
    # [base_applied]: (path, sha256 of the [base] file with the filtered hunks applied), recorded with [base]
    applied_files: tuple[tuple[str, str], ...] = ()

    @property
    def manifest_path(self) -> Path:
        return self.folder / MANIFEST_NAME

    @property
    def diff_path(self) -> Path:
        return self.folder / self.diff_name

    @property
    def pending(self) -> bool:
        """True until a diff body has been vendored into the patch folder. A manifest that pins the diff's
        sha256 says it was vendored: its missing file is an error (read_diff), not "pending"."""
        if self.sha256 is not None or self.hunkset_sha256 is not None:
            return False
        try:
            return not self.diff_path.is_file()
        except OSError:  # e.g. an unreadable patch folder: not pending, and read_diff says what is wrong
            return False

    def vendor_command(self) -> str:
        """A `patchkit vendor` command line that fetches and pins this entry's diff (shell-quoted)."""
        recorded = self.recorded_file()
        if recorded is not None:  # the file it was vendored from, where it still is: works offline
            source = str(recorded)
        elif self.upstream.diff_url:
            source = self.upstream.diff_url
        elif self.upstream.prs and len(self.upstream.prs) == 1:
            source = self.upstream.prs[0].url + ".diff"
        else:  # several PRs or a local fix: no single URL gives the diff
            source = "FILE.diff"

        return shlex.join(["patchkit", "vendor", self.id, "--patches", str(self.folder.parent), "--from", source])

    def recorded_file(self) -> Path | None:
        """The local file [source] says the diff was vendored from, if it is there still (`path`: absolute, or
        relative to the project holding the registry: the nearest folder above it with a pyproject.toml, else
        the registry's parent)."""
        if self.source is None or self.source.kind != "file":
            return None
        path = dict(self.source.fields).get("path")
        if not isinstance(path, str) or not path:
            return None
        registry = self.folder.parent
        project = next((f for f in (registry, *registry.parents) if (f / "pyproject.toml").is_file()),
                       registry.parent)
        full = Path(path) if Path(path).is_absolute() else project / path
        return full if full.is_file() else None

    def read_diff(self, *, pinned: bool = True) -> bytes:
        """The diff's bytes, refused unless they match the recorded sha256. `pinned=False`: every check but the
        pin (a diff with no sha256 yet is read, to be parsed before the user is asked to pin it)."""
        if self.pending:
            raise PendingPatchError(
                f"patch {self.id} is pending: its diff {self.diff_name} has not been vendored yet",
                where=str(self.manifest_path),
                hint=f"vendor it first: {self.vendor_command()}",
            )
        real = self.diff_path.resolve()  # a link may point anywhere; the diff must live in the patch folder
        if not real.is_relative_to(self.folder.resolve()):
            raise ManifestError(
                f"diff {self.diff_name} is a link to {real}, outside the patch folder",
                where=_where(self.manifest_path, line_of_key(self.manifest_path, "diff")),
                hint="vendor the diff file itself into the patch folder",
            )
        try:
            check_diff_size(real.stat().st_size, str(self.diff_path))  # before reading it into memory
            data = real.read_bytes()
        except FileNotFoundError:
            raise self._missing_diff() from None
        except OSError as exc:
            raise ManifestError(f"cannot read {self.diff_name}: {exc.strerror}", where=str(self.diff_path)) from None
        actual = hashlib.sha256(data).hexdigest()
        if self.sha256 is None and not pinned:
            return data
        if self.sha256 is None:
            raise ManifestError(
                f"no sha256 recorded for {self.diff_name}",
                where=_where(self.manifest_path, None),
                hint=f'add sha256 = "{actual}" after reviewing the diff, or run `{self.vendor_command()}`',
            )
        if actual != self.sha256:
            raise ManifestError(
                f"{self.diff_name} has sha256 {actual}, the manifest records {self.sha256}",
                where=_where(self.manifest_path, line_of_key(self.manifest_path, "sha256")),
                hint="the diff changed since it was reviewed; re-vendor it or restore the reviewed file",
            )
        return data


    def _missing_diff(self) -> ManifestError:
        """The manifest pins a diff that is not in the folder: a typo in `diff =` or a deleted file."""
        try:
            names = sorted(p.name for p in self.folder.iterdir() if p.name != MANIFEST_NAME and p.is_file())
        except OSError:
            names = []
        close = closest(self.diff_name, names)
        pin = "sha256" if self.sha256 is not None else "hunkset_sha256"
        return ManifestError(
            f"the diff {self.diff_name} is not in the patch folder, but the manifest pins its {pin}: it was vendored"
            + (f"; did you mean {close!r}?" if close else ""),
            where=_where(self.manifest_path, line_of_key(self.manifest_path, "diff")),
            hint=(f'fix the manifest\'s diff = "{close}"' if close else "restore the diff file (e.g. from version "
                  "control)")
            + f", or vendor it again: {self.vendor_command()}",
        )


def load_manifest(folder: Path) -> PatchSpec:
    """Read `<folder>/manifest.toml` and validate every key."""
    path = folder / MANIFEST_NAME
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_MANIFEST_BYTES + 1)  # bounded: a huge file is refused, not read
    except FileNotFoundError:
        raise ManifestError("no manifest.toml in this patch folder", where=str(folder)) from None
    except OSError as exc:
        raise ManifestError(f"cannot read the manifest: {exc}", where=str(path)) from None
    if len(raw) > MAX_MANIFEST_BYTES:
        raise ManifestError(
            f"the manifest is over the limit of {MAX_MANIFEST_BYTES} bytes", where=str(path),
            hint="a manifest is a few dozen lines; is this the right file?",
        )
    try:
        text = raw.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")  # as read_text() reads it
    except UnicodeDecodeError as exc:
        raise ManifestError(f"cannot read the manifest: {exc}", where=str(path)) from None
    return _build_spec(folder, path, text, parse_toml(text, path))


def parse_toml(text: str, path: Path) -> dict[str, Any]:
    """tomllib.loads, with every failure (not only TOMLDecodeError) a ManifestError naming the line."""
    deep = _too_deep_line(text)
    if deep is not None:
        raise ManifestError(
            f"arrays or tables nested more than {MAX_MANIFEST_NESTING} deep", where=_where(path, deep),
            hint="the manifest schema nests at most two levels",
        )
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        at = re.search(_TOML_LINE, str(exc))
        line = int(at[1]) if at else (len(text.splitlines()) or None) if "end of document" in str(exc) else None
        raise ManifestError(f"not valid TOML: {exc}", where=_where(path, line)) from None
    except ValueError:  # Python's int() limit (sys.int_max_str_digits), raised through tomllib
        long_number = re.search(_LONG_NUMBER, text)
        number_line = text.count("\n", 0, long_number.start()) + 1 if long_number else None
        raise ManifestError(
            "not valid TOML: a number too long to read (thousands of digits)", where=_where(path, number_line),
            hint="no manifest value needs a number that long",
        ) from None
    except RecursionError:  # nesting the pre-check did not see (a construct it does not model)
        raise ManifestError("not valid TOML: nested too deeply", where=str(path)) from None
    huge = _huge_number_key(data)
    if huge is not None:  # 0x... numbers escape int()'s digit limit, and str() of them raises ValueError
        raise ManifestError(
            f"{huge} is a number over 64 bits", where=_where(path, find_key_line(text, huge)),
            hint="no manifest value needs a number that large",
        )
    return data


def _huge_number_key(value: Any, key: str = "") -> str | None:
    """The key of the first integer that does not fit 64 bits, or None (nesting is bounded by the pre-check)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return key if value.bit_length() > 63 else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for k, v in items:
        found = _huge_number_key(v, k if isinstance(k, str) else key)
        if found is not None:
            return found
    return None


def _too_deep_line(text: str) -> int | None:
    """The line where brackets/braces outside strings and comments first nest deeper than the bound, or None.

    tomllib parses nesting recursively: 1,000 levels raise RecursionError, a crash rather than an error. The
    scan understands TOML's four string forms and comments; where it is unsure, tomllib reports the problem.
    """
    if text.count("[") + text.count("{") <= MAX_MANIFEST_NESTING:
        return None  # every real manifest: too few brackets to nest that deep, no scan needed
    depth = 0
    line = 1
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
        elif c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        elif c in "\"'":
            quote = c * 3 if text.startswith(c * 3, i) else c
            j = i + len(quote)
            while j < n and not text.startswith(quote, j):
                if text[j] == "\\" and c == '"':
                    j += 1
                elif text[j] == "\n" and len(quote) == 1:
                    break  # an unterminated one-line string: tomllib will say so
                j += 1
            line += text.count("\n", i, j)
            i = j + len(quote)
            continue
        elif c in "[{":
            depth += 1
            if depth > MAX_MANIFEST_NESTING:
                return line
        elif c in "]}":
            depth = max(depth - 1, 0)
        i += 1
    return None


def _build_spec(folder: Path, path: Path, text: str, data: dict[str, Any]) -> PatchSpec:
    def fail(message: str, key: str | None = None, hint: str | None = None, table: str = "") -> ManifestError:
        line = find_key_line(text, key, table) if key else None
        return ManifestError(message, where=_where(path, line), hint=hint)

    _check_table(data, _TOP_KEYS, "", fail)
    upstream = data["upstream"]
    target = data["target"]
    _check_table(upstream, _UPSTREAM_KEYS, "upstream.", fail)
    _check_table(target, _TARGET_KEYS, "target.", fail)
    waiver = data.get("waiver", {})
    if "waiver" in data:  # optional as a whole (lint's PK201 asks for it); complete when present
        _check_table(waiver, _WAIVER_KEYS, "waiver.", fail)

    patch_id: str = data["id"]
    problem = patch_id_problem(patch_id)
    if problem is not None:
        raise fail(f"id {quote_short(patch_id)} {problem}", "id")
    if patch_id != folder.name:
        raise fail(
            f"id {patch_id!r} does not match the folder name {folder.name!r}",
            "id",
            hint=f"rename the folder to {patch_id} or set id = \"{folder.name}\"",
        )
    diff_name: str = data["diff"]
    diff_rel = PurePosixPath(diff_name)
    if not diff_name or diff_rel.is_absolute() or ".." in diff_rel.parts or "\\" in diff_name:
        raise fail(
            f"diff {diff_name!r} must be a relative path inside the patch folder", "diff",
            hint='use a plain file name such as diff = "pr1234.diff"',
        )
    problem = path_problem(diff_name)  # bounds too: a name over NAME_MAX makes every stat() raise
    if problem is not None:
        raise fail(f"diff: {problem}", "diff", hint='use a plain file name such as diff = "pr1234.diff"')
    for key in ("sha256", "hunkset_sha256"):
        value = data.get(key)
        if value is not None and not _HEX64.match(value):
            raise fail(f"{key} must be 64 lowercase hex digits, got {value!r}", key)
    strip = data.get("strip", 1)
    if isinstance(strip, bool) or strip < 0 or strip > 16:
        raise fail(f"strip must be an integer from 0 to 16, got {strip!r}", "strip")

    pinned = target.get("pinned_commit", UNKNOWN_COMMIT)
    if pinned != UNKNOWN_COMMIT and not _HEX40.match(pinned):
        raise fail(
            f"target.pinned_commit must be a full 40-hex commit id or \"{UNKNOWN_COMMIT}\", got {pinned!r}",
            "pinned_commit", table="target",
        )

    excludes = [_build_exclude(pattern, value, fail) for pattern, value in data.get("exclude", {}).items()]

    after = data.get("after", [])
    if not all(isinstance(a, str) and is_patch_id(a) for a in after):
        raise fail("after must be a list of patch ids", "after")
    if patch_id in after:
        raise fail("a patch cannot come after itself", "after")

    base_files = _digests(data, "base", fail)
    applied_files = _digests(data, "base_applied", fail)
    unknown = sorted({p for p, _ in applied_files} - {p for p, _ in base_files})
    if unknown:
        raise fail(f"[base_applied] names {unknown[0]!r}, which [base] does not fingerprint", unknown[0],
                   table="base_applied", hint="record both with `patchkit vendor --base-tree`")

    introduced_by = waiver.get("introduced_by")
    if introduced_by is not None and introduced_by <= 0:
        raise fail(
            f"waiver.introduced_by must be a positive PR number, got {introduced_by}", "introduced_by", table="waiver"
        )

    moved_in = waiver.get("moved_in")
    if moved_in is not None and moved_in <= 0:
        raise fail(f"waiver.moved_in must be a positive PR number, got {moved_in}", "moved_in", table="waiver")
    if moved_in is not None and moved_in == introduced_by:
        raise fail(
            f"waiver.moved_in = {moved_in} is also introduced_by: a patch introduced by the pull request that "
            "moves it was not moved", "moved_in", table="waiver", hint="remove moved_in",
        )

    return PatchSpec(
        id=patch_id,
        title=data["title"],
        folder=folder,
        diff_name=diff_name,
        sha256=data.get("sha256"),
        hunkset_sha256=data.get("hunkset_sha256"),
        strip=strip,
        upstream=_build_upstream(upstream, fail),
        target=Target(target["name"], None if pinned == UNKNOWN_COMMIT else pinned),
        excludes=tuple(excludes),
        introduced_by=introduced_by,
        after=tuple(after),
        base_files=base_files,
        applied_files=applied_files,
        path_map=_build_path_map(data.get("prefix", ""), data.get("paths", {}), fail),
        source=_build_source(data["source"], fail) if "source" in data else None,
        moved_in=moved_in,
    )


def _build_upstream(table: Mapping[str, Any], fail: Any) -> Upstream:
    origin = table.get("origin", OriginKind.UPSTREAM.value)
    kinds = [k.value for k in OriginKind]
    if origin not in kinds:
        raise fail(
            f"upstream.origin must be one of {', '.join(kinds)}, got {origin!r}", "origin",
            hint=_did_you_mean(str(origin), kinds) or None, table="upstream",
        )
    repo = table.get("repo")
    if repo is not None and not _REPO.match(repo):
        raise fail(f"upstream.repo must look like owner/name, got {repo!r}", "repo", table="upstream")
    diff_url = table.get("diff_url")
    if origin == OriginKind.LOCAL.value:
        for key in ("pr", "prs"):
            if key in table:
                raise fail(
                    f"a local patch (origin = \"local\") has no upstream PR, but upstream.{key} is set", key,
                    hint=f"remove upstream.{key}, or drop origin = \"local\"", table="upstream",
                )
        reason = table.get("reason", "").strip()
        if not reason:
            raise fail(
                "a local patch (origin = \"local\") needs upstream.reason: why no upstream PR exists",
                "origin", table="upstream",
                hint='add reason = "our own fix: upstream ... (and the plan to upstream it)"',
            )
        return Upstream(repo or "", None, table.get("url", ""), diff_url, (), OriginKind.LOCAL, reason)
    if "reason" in table:
        raise fail(
            "upstream.reason is only for a local patch", "reason", table="upstream",
            hint='set origin = "local", or remove reason',
        )
    if repo is None:
        raise fail(
            "missing required key upstream.repo", "upstream",
            hint='add repo = "owner/name" (the repository of the upstream PR), or origin = "local" with a reason',
        )
    if ("pr" in table) == ("prs" in table):
        raise fail(
            "upstream needs exactly one of pr = N and prs = [...]", "prs" if "prs" in table else "upstream",
            hint='one PR: pr = 1234; several: prs = [1234, "other/repo#56"]; no PR at all: origin = "local"',
            table="upstream" if "prs" in table else "",
        )
    items = [table["pr"]] if "pr" in table else table["prs"]
    key = "pr" if "pr" in table else "prs"
    prs = [_pull_ref(item, repo, key, fail) for item in items]
    if not prs:
        raise fail("upstream.prs is empty", "prs", hint='list every PR, or set origin = "local"', table="upstream")
    duplicate = next((p for i, p in enumerate(prs) if p in prs[:i]), None)
    if duplicate is not None:
        raise fail(f"upstream.prs names {duplicate} twice", "prs", table="upstream")
    first = prs[0]
    url = table.get("url") or first.url
    return Upstream(first.repo, first.number, url, diff_url, tuple(prs), OriginKind.UPSTREAM, None)


def _pull_ref(item: Any, repo: str, key: str, fail: Any) -> PullRef:
    if isinstance(item, int) and not isinstance(item, bool):
        if item <= 0:
            raise fail(f"upstream.{key} must be a positive PR number, got {item}", key, table="upstream")
        return PullRef(repo, item)
    if isinstance(item, str):
        found = re.match(_PR_REF, item.strip())
        if found and int(found.group(2)) > 0:
            return PullRef(found.group(1) or repo, int(found.group(2)))
    raise fail(
        f"upstream.{key} entry {item!r} must be a PR number or \"owner/repo#N\"", key, table="upstream",
        hint=f'for example {key} = [1234, "ROCm/aiter#56"] (a bare number is a PR of upstream.repo)',
    )


def _digests(data: Mapping[str, Any], table: str, fail: Any) -> tuple[tuple[str, str], ...]:
    """A table of path -> sha256 ([base], [base_applied]), checked."""
    out = []
    for path, digest in data.get(table, {}).items():
        problem = path_problem(path)
        if problem is not None:
            raise fail(f"[{table}] key: {problem}", path, hint=f"[{table}] keys are paths of files in the tree")
        if not isinstance(digest, str) or not _HEX64.match(digest):
            what = "base fingerprint" if table == "base" else "fingerprint with the hunks applied"
            raise fail(f"{what} of {path!r} must be a sha256 hex string", path, table=table)
        out.append((path, digest))
    return tuple(out)


def _build_exclude(pattern: str, value: Any, fail: Any) -> Exclude:
    if not pattern or pattern.startswith("/") or ".." in PurePosixPath(pattern).parts:
        raise fail(f"exclude {pattern!r} must be a relative path or glob inside the tree", pattern, table="exclude")
    _check_exclude(pattern, fail)
    if isinstance(value, dict):  # "path" = { hunks = [2, 3], reason = "..." }: drop only these hunks
        unknown = [k for k in value if k not in ("hunks", "reason")]
        if unknown:
            raise fail(
                f"exclude {pattern!r} has unknown key {unknown[0]!r}", pattern, table="exclude",
                hint=_joined_hint(
                    _did_you_mean(unknown[0], ["hunks", "reason"]), 'a hunk exclude is { hunks = [N], reason = "..." }'
                ),
            )
        hunks, reason = value.get("hunks"), value.get("reason")
        if not isinstance(hunks, list) or not hunks or not all(
            isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in hunks
        ):
            raise fail(
                f"exclude {pattern!r}: hunks must be a non-empty list of hunk numbers (1 is the file's first hunk)",
                pattern, table="exclude",
            )
        if any(c in pattern for c in "*?["):
            raise fail(
                f"exclude {pattern!r}: a hunk exclude names one file, not a glob", pattern, table="exclude",
                hint="hunk numbers belong to one file of the diff; write its path",
            )
        if len(set(hunks)) != len(hunks):
            raise fail(f"exclude {pattern!r} names a hunk twice", pattern, table="exclude")
        if not isinstance(reason, str) or not reason.strip():
            raise fail(
                f"exclude {pattern!r} needs a reason (a non-empty string)", pattern, table="exclude",
                hint=f'write it as "{pattern}" = {{ hunks = {hunks}, reason = "why these hunks are not ported" }}',
            )
        return Exclude(pattern, reason.strip(), tuple(sorted(hunks)))
    if not isinstance(value, str) or not value.strip():
        raise fail(
            f"exclude {pattern!r} needs a reason (a non-empty string)", pattern, table="exclude",
            hint=f'write it as "{pattern}" = "why this file is not ported"',
        )
    return Exclude(pattern, value.strip())


def _build_path_map(prefix: str, folders: Mapping[str, Any], fail: Any) -> PathMap:
    if prefix:
        problem = _folder_problem(prefix)
        if problem:
            raise fail(f"prefix {quote_short(prefix)} {problem}", "prefix", hint='for example prefix = "aiter_meta/"')
    pairs = []
    for source, target in folders.items():
        if not isinstance(target, str):
            raise fail(f"[paths] {source!r} must map to a folder string", source, table="paths")
        for name in (source, target):
            problem = _folder_problem(name)
            if problem:
                raise fail(
                    f"[paths] {quote_short(source)} = {quote_short(target)}: {quote_short(name)} {problem}", source,
                    table="paths",
                    hint='for example "csrc/" = "aiter_meta/csrc/"',
                )
        pairs.append((source, target))
    pairs.sort(key=lambda pair: -len(pair[0]))
    return PathMap(prefix, tuple(pairs))


def _folder_problem(name: str) -> str | None:
    """Why `name` cannot be a folder of the root that paths are placed under, or None."""
    if not name.endswith("/"):
        return "must end with '/' (it names a folder)"
    parts = name[:-1].split("/")
    if name.startswith("/") or "\\" in name or "\0" in name or any(p in ("", ".", "..") for p in parts):
        return "must be a plain relative folder inside the root (no leading '/', no '.' or '..', no '//')"
    if any(reserved_name(p) is not None for p in parts):
        return "is inside .git or .patchkit (in any letter case); patchkit never writes there"
    # The bounds of diff paths (patchkit.input.limits), so that no placed path can pass them: the folder must leave
    # room for at least one more name below it.
    if len(parts) >= MAX_PATH_DEPTH:
        return (f"is {len(parts)} folders deep; a path may be at most {MAX_PATH_DEPTH} deep, file name included, "
                f"so a folder that paths are placed under at most {MAX_PATH_DEPTH - 1}")
    size = len(name.encode("utf-8", "surrogatepass"))
    if size >= MAX_PATH_BYTES:
        return f"is {size} bytes long; a whole path may have at most {MAX_PATH_BYTES} bytes (PATH_MAX)"
    long_name = next((p for p in parts if len(p.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES), None)
    if long_name is not None:
        return (f"has a name {len(long_name.encode('utf-8', 'surrogatepass'))} bytes long; a name may have at "
                f"most {MAX_NAME_BYTES} (NAME_MAX)")
    return None


def _build_source(table: Mapping[str, Any], fail: Any) -> SourceRecord:
    _check_table(table, _SOURCE_KEYS, "source.", fail)
    if table["kind"] not in _SOURCE_KINDS:
        raise fail(
            f"source.kind must be one of {', '.join(_SOURCE_KINDS)}, got {table['kind']!r}", "kind", table="source"
        )
    return SourceRecord(table["kind"], tuple((k, v) for k, v in table.items() if k != "kind"))


def _check_exclude(pattern: str, fail: Any) -> None:
    """An exclude must be a valid glob (see patchkit.input.globs) and name no part of .git or .patchkit."""
    if is_glob(pattern):
        try:
            parse_glob(pattern)
        except ManifestError as exc:
            raise fail(exc.message, pattern, hint=exc.hint, table="exclude") from None
    for part in pattern.split("/"):
        reserved = reserved_name(part)
        if reserved is not None:
            raise fail(
                f"exclude {show_path(pattern)} names {reserved}, which patchkit never reads or writes", pattern,
                hint="a diff can never touch it, so there is nothing to exclude: remove the exclude", table="exclude",
            )


def _check_table(
    table: Mapping[str, Any], schema: dict[str, tuple[type, bool]], prefix: str, fail: Any
) -> None:
    name = prefix.rstrip(".")
    for key, value in table.items():
        if key not in schema:
            known = ", ".join(prefix + k for k in schema)
            close = _did_you_mean(key, list(schema), prefix)
            hint = _joined_hint(close, f"known keys here: {known}")
            raise fail(f"unknown key {prefix}{key}", key, hint=hint, table=name)
        expected, _ = schema[key]
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise fail(
                f"{prefix}{key} must be {_TYPE_NAMES[expected]}, got {type(value).__name__}", key, table=name
            )
    for key, (_, required) in schema.items():
        if required and key not in table:
            raise fail(f"missing required key {prefix}{key}", hint=f"add {prefix}{key} to the manifest")


def _did_you_mean(word: str, choices: list[str], prefix: str = "") -> str:
    close = closest(word, choices)
    return f"did you mean {prefix}{close}?" if close else ""


def _joined_hint(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


_TYPE_NAMES = {str: "a string", int: "an integer", list: "a list", dict: "a table"}


def find_key_line(text: str, key: str, table: str | None = None) -> int | None:
    """1-based line of `key = ...` or `[key]` in the manifest text (for error messages).

    With `table` ("" for the top level, "upstream", "exclude", ...), only a `key = ...` inside that table
    counts, so `name` in [target] is not reported at a top-level `name`; a `[key]` header counts for the top
    level (a table is a top-level key).
    """
    key_re = re.compile(r"""^\s*(?:"{0}"|'{0}'|{0})\s*=""".format(re.escape(key)))
    current = ""
    for number, line in enumerate(text.splitlines(), 1):
        header = re.match(_HEADER, line)
        if header:
            current = header.group(1).strip().strip("\"'")
            if (current == key or current.endswith("." + key)) and table in (None, ""):
                return number
            continue
        if key_re.match(line) and (table is None or current == table):
            return number
    return None


_HEADER = r"""^\s*\[+\s*([^\]]*?)\s*\]+\s*(?:#.*)?$"""  # compiled on first use, like _PR_REF


def line_of_key(path: Path, key: str, table: str | None = None) -> int | None:
    """1-based line of `key = ...` or `[key]` in a TOML file, for pointing errors and findings at it."""
    try:
        return find_key_line(path.read_text(encoding="utf-8"), key, table)
    except (OSError, UnicodeDecodeError):
        return None


def _where(path: Path, line: int | None) -> str:
    return f"{path}:{line}" if line else str(path)
