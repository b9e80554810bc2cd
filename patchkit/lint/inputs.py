"""Read everything lint looks at, once: each patch folder's manifest (loaded or the reason it is not) and each
file of the waivers folder (parsed). Rules then only read this snapshot."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from patchkit.errors import ManifestError, RegistryError
from patchkit.lint.findings import split_where
from patchkit.lint.waivers import WaiverDoc, parse_waiver
from patchkit.manifest import MANIFEST_NAME, PatchSpec, load_manifest
from patchkit.tomlcompat import tomllib

# A waiver is `<PR number>.md`; no leading zero, so one PR maps to exactly one file name.
WAIVER_NAME = re.compile(r"^([1-9][0-9]*)\.md$")
_TOML_ERROR_LINE = re.compile(r"\(at line (\d+), column \d+\)")


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


@dataclass(frozen=True)
class WaiverFile:
    path: Path
    number: int | None  # None when the file is not named <digits>.md
    doc: WaiverDoc | None  # None for entries that are not markdown files


@dataclass(frozen=True)
class LintInput:
    patches_dir: Path
    waivers_dir: Path
    specs: tuple[PatchSpec, ...]
    broken: tuple[BrokenManifest, ...]
    claims: tuple[WaiverClaim, ...]  # one per manifest.toml that parses as TOML
    waivers: tuple[WaiverFile, ...]

    def waiver_path(self, number: int) -> Path:
        return self.waivers_dir / f"{number}.md"

    def waiver(self, number: int) -> WaiverFile | None:
        return next((w for w in self.waivers if w.number == number), None)

    def is_claimed(self, number: int) -> bool:
        """Some manifest, loadable or not, points at waiver `number`."""
        return any(claim.number == number for claim in self.claims)


def read_lint_input(patches_dir: Path, waivers_dir: Path) -> LintInput:
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
        manifest = folder / MANIFEST_NAME
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
        patches_dir, waivers_dir, tuple(specs), tuple(broken), tuple(claims), tuple(_read_waivers(waivers_dir))
    )


def _read_claim(manifest: Path) -> WaiverClaim | None:
    try:
        data = tomllib.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None  # PK101 reports it
    waiver = data.get("waiver")
    declared = isinstance(waiver, dict) and "introduced_by" in waiver
    number = waiver.get("introduced_by") if isinstance(waiver, dict) else None
    valid = isinstance(number, int) and not isinstance(number, bool)
    return WaiverClaim(manifest, declared, number if valid else None)


def _read_waivers(waivers_dir: Path) -> list[WaiverFile]:
    if not waivers_dir.is_dir():
        return []
    waivers = []
    for path in sorted(p for p in waivers_dir.iterdir() if not p.name.startswith(".")):
        match = WAIVER_NAME.match(path.name)
        doc = None
        if path.is_file() and path.suffix.lower() == ".md":
            # A stray byte must not hide the rest of the waiver from the checks.
            doc = parse_waiver(path.read_bytes().decode("utf-8", errors="replace"))
        waivers.append(WaiverFile(path, int(match.group(1)) if match and path.is_file() else None, doc))
    return waivers

