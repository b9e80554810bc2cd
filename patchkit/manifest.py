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
from pathlib import Path, PurePosixPath
from typing import Any

from patchkit.display import show_path
from patchkit.errors import ManifestError, PendingPatchError
from patchkit.globs import is_glob, parse_glob
from patchkit.limits import MAX_MANIFEST_BYTES, MAX_MANIFEST_NESTING
from patchkit.paths import path_problem, reserved_name
from patchkit.tomlcompat import tomllib

MANIFEST_NAME = "manifest.toml"

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_TOML_LINE = re.compile(r"\(at line (\d+), column \d+\)")
_LONG_NUMBER = re.compile(r"[0-9_]{4000,}")

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
}
_UPSTREAM_KEYS: dict[str, tuple[type, bool]] = {
    "repo": (str, True),
    "pr": (int, True),
    "url": (str, False),
    "diff_url": (str, False),
}
_TARGET_KEYS: dict[str, tuple[type, bool]] = {
    "name": (str, True),
    "pinned_commit": (str, False),
}
_WAIVER_KEYS: dict[str, tuple[type, bool]] = {
    "introduced_by": (int, True),
}

UNKNOWN_COMMIT = "unknown"


@dataclass(frozen=True)
class Upstream:
    repo: str
    pr: int
    url: str
    diff_url: str | None


@dataclass(frozen=True)
class Target:
    name: str
    pinned_commit: str | None  # None: not known yet (recorded as "unknown" or omitted)


@dataclass(frozen=True)
class Exclude:
    pattern: str  # a path or a glob, after strip
    reason: str


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

    @property
    def manifest_path(self) -> Path:
        return self.folder / MANIFEST_NAME

    @property
    def diff_path(self) -> Path:
        return self.folder / self.diff_name

    @property
    def pending(self) -> bool:
        """True until a diff body has been vendored into the patch folder."""
        try:
            return not self.diff_path.is_file()
        except OSError:  # e.g. an unreadable patch folder: not pending, and read_diff says what is wrong
            return False

    def vendor_command(self) -> str:
        """A `patchkit vendor` command line that fetches and pins this entry's diff (shell-quoted)."""
        source = self.upstream.diff_url or f"https://github.com/{self.upstream.repo}/pull/{self.upstream.pr}.diff"
        return shlex.join(["patchkit", "vendor", self.id, "--patches", str(self.folder.parent), "--from", source])

    def read_diff(self) -> bytes:
        """The diff's bytes, refused unless they match the recorded sha256."""
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
        from patchkit.diffs import check_diff_size  # deferred: `list` and lint's manifest pass stay light

        try:
            check_diff_size(real.stat().st_size, str(self.diff_path))  # before reading it into memory
            data = real.read_bytes()
        except OSError as exc:
            raise ManifestError(f"cannot read {self.diff_name}: {exc.strerror}", where=str(self.diff_path)) from None
        actual = hashlib.sha256(data).hexdigest()
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
        at = _TOML_LINE.search(str(exc))
        line = int(at[1]) if at else (len(text.splitlines()) or None) if "end of document" in str(exc) else None
        raise ManifestError(f"not valid TOML: {exc}", where=_where(path, line)) from None
    except ValueError:  # Python's int() limit (sys.int_max_str_digits), raised through tomllib
        long_number = _LONG_NUMBER.search(text)
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
    def fail(message: str, key: str | None = None, hint: str | None = None) -> ManifestError:
        line = find_key_line(text, key) if key else None
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
    if not _ID.match(patch_id):
        raise fail(f"id {patch_id!r} must be letters, digits, '.', '_' or '-'", "id")
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

    if not _REPO.match(upstream["repo"]):
        raise fail(f"upstream.repo must look like owner/name, got {upstream['repo']!r}", "repo")
    if upstream["pr"] <= 0:
        raise fail(f"upstream.pr must be a positive PR number, got {upstream['pr']}", "pr")
    url = upstream.get("url") or f"https://github.com/{upstream['repo']}/pull/{upstream['pr']}"

    pinned = target.get("pinned_commit", UNKNOWN_COMMIT)
    if pinned != UNKNOWN_COMMIT and not _HEX40.match(pinned):
        raise fail(
            f"target.pinned_commit must be a full 40-hex commit id or \"{UNKNOWN_COMMIT}\", got {pinned!r}",
            "pinned_commit",
        )

    excludes = []
    for pattern, reason in data.get("exclude", {}).items():
        if not isinstance(reason, str) or not reason.strip():
            raise fail(
                f"exclude {pattern!r} needs a reason (a non-empty string)", pattern,
                hint=f'write it as "{pattern}" = "why this file is not ported"',
            )
        if not pattern or pattern.startswith("/") or ".." in PurePosixPath(pattern).parts:
            raise fail(f"exclude {pattern!r} must be a relative path or glob inside the tree", pattern)
        _check_exclude(pattern, fail)
        excludes.append(Exclude(pattern, reason.strip()))

    after = data.get("after", [])
    if not all(isinstance(a, str) and _ID.match(a) for a in after):
        raise fail("after must be a list of patch ids", "after")
    if patch_id in after:
        raise fail("a patch cannot come after itself", "after")

    base_files = []
    for base_path, digest in data.get("base", {}).items():
        problem = path_problem(base_path)
        if problem is not None:
            raise fail(f"[base] key: {problem}", base_path, hint="[base] keys are paths of files in the tree")
        if not isinstance(digest, str) or not _HEX64.match(digest):
            raise fail(f"base fingerprint of {base_path!r} must be a sha256 hex string", base_path)
        base_files.append((base_path, digest))

    introduced_by = waiver.get("introduced_by")
    if introduced_by is not None and introduced_by <= 0:
        raise fail(f"waiver.introduced_by must be a positive PR number, got {introduced_by}", "introduced_by")

    return PatchSpec(
        id=patch_id,
        title=data["title"],
        folder=folder,
        diff_name=diff_name,
        sha256=data.get("sha256"),
        hunkset_sha256=data.get("hunkset_sha256"),
        strip=strip,
        upstream=Upstream(upstream["repo"], upstream["pr"], url, upstream.get("diff_url")),
        target=Target(target["name"], None if pinned == UNKNOWN_COMMIT else pinned),
        excludes=tuple(excludes),
        introduced_by=introduced_by,
        after=tuple(after),
        base_files=tuple(base_files),
    )


def _check_exclude(pattern: str, fail: Any) -> None:
    """An exclude must be a valid glob (see patchkit.globs) and name no part of .git or .patchkit."""
    if is_glob(pattern):
        try:
            parse_glob(pattern)
        except ManifestError as exc:
            raise fail(exc.message, pattern, hint=exc.hint) from None
    for part in pattern.split("/"):
        reserved = reserved_name(part)
        if reserved is not None:
            raise fail(
                f"exclude {show_path(pattern)} names {reserved}, which patchkit never reads or writes", pattern,
                hint="a diff can never touch it, so there is nothing to exclude: remove the exclude",
            )


def _check_table(
    table: Mapping[str, Any], schema: dict[str, tuple[type, bool]], prefix: str, fail: Any
) -> None:
    for key, value in table.items():
        if key not in schema:
            known = ", ".join(prefix + k for k in schema)
            raise fail(f"unknown key {prefix}{key}", key, hint=f"known keys here: {known}")
        expected, _ = schema[key]
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise fail(
                f"{prefix}{key} must be {_TYPE_NAMES[expected]}, got {type(value).__name__}", key
            )
    for key, (_, required) in schema.items():
        if required and key not in table:
            raise fail(f"missing required key {prefix}{key}", hint=f"add {prefix}{key} to the manifest")


_TYPE_NAMES = {str: "a string", int: "an integer", list: "a list", dict: "a table"}


def find_key_line(text: str, key: str) -> int | None:
    """1-based line of the first `key = ...` or `[key]` in the manifest text (for error messages)."""
    key_re = re.compile(r"""^\s*(?:"{0}"|'{0}'|{0})\s*=""".format(re.escape(key)))
    table_re = re.compile(r"^\s*\[+\s*(?:[\w.-]+\.)?" + re.escape(key) + r"\s*\]+")
    for number, line in enumerate(text.splitlines(), 1):
        if key_re.match(line) or table_re.match(line):
            return number
    return None


def line_of_key(path: Path, key: str) -> int | None:
    """1-based line of `key = ...` or `[key]` in a TOML file, for pointing errors and findings at it."""
    try:
        return find_key_line(path.read_text(encoding="utf-8"), key)
    except (OSError, UnicodeDecodeError):
        return None


def _where(path: Path, line: int | None) -> str:
    return f"{path}:{line}" if line else str(path)
