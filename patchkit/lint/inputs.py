"""Read everything lint looks at, once: each patch folder's manifest (loaded or the reason it is not), each
file of the waivers folder (parsed), and the repository scan's patch sites. Rules then only read this snapshot."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from patchkit.errors import ManifestError, RegistryError, UnsafePathError
from patchkit.input.limits import MAX_MANIFEST_BYTES
from patchkit.input.manifest import MANIFEST_NAME, PatchSpec, load_manifest
from patchkit.input.tomlcompat import tomllib
from patchkit.lint.findings import split_where
from patchkit.lint.waivers import WaiverDoc, parse_waiver
from patchkit.scan import PatchSite, ScanProblem
from patchkit.scan.sources import read_capped

MAX_WAIVER_BYTES = 4 << 20  # a waiver is a page of markdown; the scan reads scripts up to the same size

# A waiver is `<PR number>.md`; no leading zero, so one PR maps to exactly one file name.
WAIVER_NAME = re.compile(r"^([1-9][0-9]*)\.md$")
# A translation of a waiver or of the folder's README: `2306_zh.md`, `2306.zh-CN.md`, `README_zh.md`.
_LANGUAGE = r"[A-Za-z]{2,3}(?:[-_][A-Za-z]{2,4})?"
TRANSLATION_NAME = re.compile(rf"^([1-9][0-9]*|readme)[._-]({_LANGUAGE})\.md$", re.IGNORECASE)
# A waiver written before its pull request exists: `PENDING-<topic>.md`.
PENDING_NAME = re.compile(r"^pending[-_](.+)\.md$", re.IGNORECASE)
_TOML_ERROR_LINE = re.compile(r"\(at line (\d+), column \d+\)")
_PR_REF = re.compile(r"^([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)#([1-9][0-9]*)$")


class WaiverKind(Enum):
    NUMBERED = "numbered"  # <PR>.md
    TRANSLATION = "translation"  # <PR>_<lang>.md or README_<lang>.md
    PENDING = "pending"  # PENDING-<topic>.md
    README = "readme"
    OTHER = "other"  # anything else: a bad name (PK203)


@dataclass(frozen=True)
class BrokenManifest:
    """A patch folder whose manifest failed to load: reported, never a crash."""

    path: Path  # the file (or folder) at fault
    line: int | None
    message: str
    hint: str | None


@dataclass(frozen=True)
class WaiverClaim:
    """What a manifest's TOML says about its waiver, read without validation, so the waiver policy is checked
    (and a waiver is not called an orphan) even when the manifest is broken in some other way."""

    manifest: Path
    declared: bool  # the key [waiver] introduced_by is present
    number: int | None  # its value, when it is an integer
    # Read from the raw TOML so that keys newer than this lint still count: the upstream PRs the waiver must
    # cite as (owner/repo, number), `origin = "local"` and its `reason`.
    upstream_prs: tuple[tuple[str, int], ...] = ()
    origin: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class WaiverFile:
    path: Path
    number: int | None  # None when the file is not named <digits>.md
    doc: WaiverDoc | None  # None for entries that are not markdown files
    kind: WaiverKind = WaiverKind.NUMBERED
    translates: str | None = None  # a translation: the stem of the original ("2306", "README")

    @property
    def is_waiver(self) -> bool:
        """A waiver in its own right (numbered or pending), not a translation or a README."""
        return self.doc is not None and self.kind in (WaiverKind.NUMBERED, WaiverKind.PENDING)


@dataclass(frozen=True)
class LintInput:
    patches_dir: Path
    waivers_dir: Path
    specs: tuple[PatchSpec, ...]
    broken: tuple[BrokenManifest, ...]
    claims: tuple[WaiverClaim, ...]  # one per manifest.toml that parses as TOML
    waivers: tuple[WaiverFile, ...]
    root: Path = Path()  # the project root, which site paths are relative to (as shown to the user)
    sites: tuple[PatchSite, ...] = ()
    scanned: tuple[str, ...] = ()  # the files the scan read
    scan_problems: tuple[ScanProblem, ...] = ()
    baselined: frozenset[str] = field(default_factory=frozenset)  # fingerprints accepted by the baseline
    stale_baseline: tuple[tuple[str, str], ...] = ()  # (fingerprint, shown) of entries matching no site
    baseline_path: Path | None = None

    def waiver_path(self, number: int) -> Path:
        return self.waivers_dir / f"{number}.md"

    def waiver(self, number: int) -> WaiverFile | None:
        return next((w for w in self.waivers if w.number == number), None)

    def is_claimed(self, number: int) -> bool:
        """Some manifest, loadable or not, points at waiver `number`."""
        return any(claim.number == number for claim in self.claims)

    def claim_of(self, spec: PatchSpec) -> WaiverClaim | None:
        wanted = spec.manifest_path.resolve()
        return next((c for c in self.claims if c.manifest.resolve() == wanted), None)

    def site_path(self, site: PatchSite) -> Path:
        """Where the site's file is, as the user sees it (relative to the working directory when below it)."""
        return self.root / site.path


@dataclass(frozen=True)
class Confinement:
    """The folders lint may read: the repository (the project root) and any folder the person running lint
    named (an option or environment variable). A pull request controls every file of the repository, links
    included: a link out of these folders is refused (exit 2) before anything behind it is read."""

    roots: tuple[Path, ...]  # resolved; the first is the repository

    @classmethod
    def of(cls, repository: Path, *named: Path | None) -> Confinement:
        return cls(tuple(dict.fromkeys(p.resolve() for p in (repository, *named) if p is not None)))

    def check(self, path: Path, what: str) -> Path:
        """`path` resolved, refused when it lies outside every root."""
        real = path.resolve()
        if not any(real.is_relative_to(root) for root in self.roots):
            raise UnsafePathError(
                f"{what} is a link to {real}, outside the repository {self.roots[0]}; lint reads nothing outside "
                "it, nothing was read", where=str(path),
                hint="replace the link by the file itself, or remove it",
            )
        return real


UNCONFINED = Confinement((Path("/"),))


def read_lint_input(
    patches_dir: Path, waivers_dir: Path, patches_required: bool = True, confinement: Confinement = UNCONFINED
) -> LintInput:
    """The registry and waivers. Without a patches folder (a waiver-only repository) there are no manifests;
    that is an error only when the folder was asked for (`patches_required`): a typo must not pass silently.
    Nothing outside `confinement` is read (links out of it are refused)."""
    for folder, what in ((patches_dir, "the patches folder"), (waivers_dir, "the waivers folder")):
        if folder.exists() or folder.is_symlink():
            confinement.check(folder, what)
    if not patches_dir.exists() and not patches_required:
        return LintInput(patches_dir, waivers_dir, (), (), (), tuple(_read_waivers(waivers_dir, confinement)))
    if not patches_dir.is_dir():
        raise RegistryError(
            "the patches folder does not exist",
            where=str(patches_dir),
            hint="pass --patches DIR, set PATCHKIT_PATCHES, or set [tool.patchkit] patches in pyproject.toml",
        )
    if waivers_dir.exists() and not waivers_dir.is_dir():
        raise RegistryError("the waivers path is not a folder", where=str(waivers_dir))
    specs: list[PatchSpec] = []
    broken: list[BrokenManifest] = []
    claims: list[WaiverClaim] = []
    # Every visible sub-folder is a patch: one without manifest.toml is reported rather than skipped.
    for folder in sorted(p for p in patches_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
        confinement.check(folder, "the patch folder")
        manifest = folder / MANIFEST_NAME
        if manifest.exists() or manifest.is_symlink():
            confinement.check(manifest, "the manifest")
        if not manifest.is_file():
            broken.append(
                BrokenManifest(folder, None, f"patch folder has no {MANIFEST_NAME}", "add one or remove the folder")
            )
            continue
        claim = _read_claim(manifest)
        if claim is not None:
            claims.append(claim)
        try:
            specs.append(load_manifest(folder))
        except ManifestError as exc:
            path, line = split_where(exc.where, manifest)
            if line is None:
                # tomllib puts the place of a syntax error in its message only.
                found = _TOML_ERROR_LINE.search(exc.message)
                line = int(found.group(1)) if found else None
            broken.append(BrokenManifest(path, line, exc.message, exc.hint))
    return LintInput(
        patches_dir, waivers_dir, tuple(specs), tuple(broken), tuple(claims),
        tuple(_read_waivers(waivers_dir, confinement)),
    )


def _read_claim(manifest: Path) -> WaiverClaim | None:
    try:
        raw = read_capped(manifest.resolve(), MAX_MANIFEST_BYTES)  # resolved: checked inside the repository
        if raw is None:
            return None  # PK101 reports the size
        data = tomllib.loads(raw.decode("utf-8").replace("\r\n", "\n"))
    except (OSError, ValueError, RecursionError):  # TOMLDecodeError, int digit limit, deep nesting
        return None  # PK101 reports it
    waiver = data.get("waiver")
    declared = isinstance(waiver, dict) and "introduced_by" in waiver
    number = waiver.get("introduced_by") if isinstance(waiver, dict) else None
    valid = isinstance(number, int) and not isinstance(number, bool)
    upstream = data.get("upstream")
    upstream = upstream if isinstance(upstream, dict) else {}
    origin = upstream.get("origin", data.get("origin"))
    reason = upstream.get("reason", data.get("reason"))
    return WaiverClaim(
        manifest,
        declared,
        number if valid else None,
        upstream_prs=_upstream_prs(upstream),
        origin=origin if isinstance(origin, str) else None,
        reason=reason if isinstance(reason, str) else None,
    )


def _upstream_prs(upstream: dict[str, object]) -> tuple[tuple[str, int], ...]:
    """`pr = N` and every entry of `prs = [...]` ("owner/repo#N" or N, for upstream.repo), in order, once."""
    repo = upstream.get("repo") if isinstance(upstream.get("repo"), str) else None
    found: list[tuple[str, int]] = []
    entries = [upstream.get("pr")]
    listed = upstream.get("prs")
    if isinstance(listed, list):
        entries += listed
    for entry in entries:
        ref: tuple[str, int] | None = None
        if isinstance(entry, int) and not isinstance(entry, bool) and entry > 0 and repo:
            ref = (str(repo), entry)
        elif isinstance(entry, str):
            match = _PR_REF.match(entry.strip())
            if match:
                ref = (match.group(1), int(match.group(2)))
            elif entry.strip().isdigit() and repo and int(entry) > 0:
                ref = (str(repo), int(entry))
        if ref is not None and ref not in found:
            found.append(ref)
    return tuple(found)


def _read_waivers(waivers_dir: Path, confinement: Confinement) -> list[WaiverFile]:
    if not waivers_dir.is_dir():
        return []
    waivers = []
    for path in sorted(p for p in waivers_dir.iterdir() if not p.name.startswith(".")):
        doc = None
        real = confinement.check(path, "the waiver")
        if path.is_file() and path.suffix.lower() == ".md":
            try:
                data = read_capped(real, MAX_WAIVER_BYTES)  # sized before it is read
            except OSError as exc:
                raise RegistryError(f"cannot read the waiver: {exc.strerror or exc}", where=str(path)) from None
            if data is None:
                raise RegistryError(
                    f"the waiver is over the limit of {MAX_WAIVER_BYTES >> 20} MiB", where=str(path),
                    hint="a waiver is a page of markdown; is this the right file?",
                )
            # A stray byte must not hide the rest of the waiver from the checks.
            doc = parse_waiver(data.decode("utf-8", errors="replace"))
        waivers.append(classify_waiver(path, doc))
    return waivers


def classify_waiver(path: Path, doc: WaiverDoc | None) -> WaiverFile:
    name = path.name
    if path.is_dir() or doc is None:
        return WaiverFile(path, None, doc, WaiverKind.OTHER)
    numbered = WAIVER_NAME.match(name)
    if numbered:
        return WaiverFile(path, int(numbered.group(1)), doc, WaiverKind.NUMBERED)
    if name.lower() == "readme.md":
        return WaiverFile(path, None, doc, WaiverKind.README)
    translation = TRANSLATION_NAME.match(name)
    if translation:
        original = translation.group(1)
        stem = "README" if original.lower() == "readme" else original
        return WaiverFile(path, None, doc, WaiverKind.TRANSLATION, translates=stem)
    if PENDING_NAME.match(name):
        return WaiverFile(path, None, doc, WaiverKind.PENDING)
    return WaiverFile(path, None, doc, WaiverKind.OTHER)

