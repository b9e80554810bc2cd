"""Read everything lint looks at, once: each patch folder's manifest (loaded or the reason it is not) and each
file of the waivers folder (parsed). Rules then only read this snapshot."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from patchkit.errors import ManifestError, RegistryError
from patchkit.lint.findings import split_where
from patchkit.lint.waivers import WaiverDoc, parse_waiver
from patchkit.manifest import MANIFEST_NAME, PatchSpec, load_manifest

# A waiver is `<PR number>.md`; no leading zero, so one PR maps to exactly one file name.
WAIVER_NAME = re.compile(r"^([1-9][0-9]*)\.md$")


@dataclass(frozen=True)
class BrokenManifest:
    """A patch folder whose manifest failed to load: reported, never a crash."""

    folder: Path
    path: Path
    line: int | None
    message: str
    hint: str | None
    claimed_waiver: int | None  # [waiver] introduced_by, if the TOML is readable at all


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
    waivers: tuple[WaiverFile, ...]

    def waiver_path(self, number: int) -> Path:
        return self.waivers_dir / f"{number}.md"

    def waiver(self, number: int) -> WaiverFile | None:
        return next((w for w in self.waivers if w.number == number), None)

    def is_claimed(self, number: int) -> bool:
        """Some manifest, loadable or not, points at waiver `number`."""
        return any(s.introduced_by == number for s in self.specs) or any(
            b.claimed_waiver == number for b in self.broken
        )


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
    # Every visible sub-folder is a patch: one without manifest.toml is reported rather than skipped.
    for folder in sorted(p for p in patches_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
        try:
            specs.append(load_manifest(folder))
        except ManifestError as exc:
            broken.append(_broken(folder, exc))
    return LintInput(patches_dir, waivers_dir, tuple(specs), tuple(broken), tuple(_read_waivers(waivers_dir)))


def _broken(folder: Path, exc: ManifestError) -> BrokenManifest:
    path, line = split_where(exc.where, folder / MANIFEST_NAME)
    return BrokenManifest(folder, path, line, exc.message, exc.hint, _claimed_waiver(folder / MANIFEST_NAME))


def _claimed_waiver(manifest: Path) -> int | None:
    """introduced_by read without validation, so a broken manifest's waiver is not also called an orphan."""
    try:
        data = tomllib.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    waiver = data.get("waiver")
    number = waiver.get("introduced_by") if isinstance(waiver, dict) else None
    return number if isinstance(number, int) and not isinstance(number, bool) else None


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


def key_line(path: Path, key: str) -> int | None:
    """1-based line of `key = ...` (bare or quoted) or `[key]` in a TOML file, for pointing findings at it."""
    pattern = re.compile(
        r"""^\s*(?:"{0}"|'{0}'|{0})\s*=|^\s*\[+\s*(?:[\w.-]+\.)?{0}\s*\]+""".format(re.escape(key))
    )
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    return next((n for n, line in enumerate(lines, 1) if pattern.match(line)), None)
