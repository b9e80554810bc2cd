"""The repository scan: find every place a consuming repository changes the engine or serving stack.

`scan_tree` reads the candidate files of a work tree (globs from `[tool.patchkit]`, see config.py), `scan_files`
the same from any (path, bytes) pairs (a git commit's files in history mode). Each file becomes a ScriptView
(sources.py); every enabled rule of SCAN_RULES (rules.py) reports the patch sites of its kind. Nothing here
prints, exits or writes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from patchkit.scan.bash import require_parser
from patchkit.scan.config import ScanConfig
from patchkit.scan.rules import SCAN_RULES
from patchkit.scan.sites import PatchSite, SiteKind, fingerprint_sites
from patchkit.scan.sources import language_of, read_capped, read_view, select_paths, walk_files

__all__ = ["PatchSite", "ScanConfig", "ScanProblem", "ScanResult", "SiteKind", "scan_files", "scan_tree"]

# Folders never worth walking into (their files are excluded by the default globs anyway).
_PRUNE = frozenset({".git", ".venv", "venv", "node_modules", "__pycache__", ".mypy_cache", ".ruff_cache",
                    ".pytest_cache", ".tox", ".patchkit"})
MAX_SCANNED_BYTES = 4 * 1024 * 1024  # larger files are data, not scripts


@dataclass(frozen=True)
class ScanProblem:
    path: str
    line: int | None
    message: str


@dataclass(frozen=True)
class ScanResult:
    sites: tuple[PatchSite, ...]
    files: tuple[str, ...]  # every file read
    problems: tuple[ScanProblem, ...]


def scan_files(files: Iterable[tuple[str, bytes]], config: ScanConfig) -> ScanResult:
    """Sites of the given (repository-relative POSIX path, content) pairs; paths are filtered by the globs.
    Raises ScanUnavailableError where the shell parser is not installed (the single-file runner)."""
    require_parser()
    contents = dict(files)
    config = replace(config, own_modules=config.own_modules | own_modules(contents))
    sites: list[PatchSite] = []
    read: list[str] = []
    problems: list[ScanProblem] = []
    for path in select_paths(contents, config):
        data = contents[path]
        if len(data) > MAX_SCANNED_BYTES or b"\0" in data[:8192]:
            continue
        text = data.decode("utf-8", errors="replace")
        language = language_of(path, text)
        if language is None:
            continue
        read.append(path)
        try:
            view = read_view(path, text, language, config, contents)
            # Filtered by the site's kind: an edit of *.dist-info is found by the edit rules as metadata-edit.
            found = [site for rule in SCAN_RULES.values() for site in rule(view) if site.kind not in config.ignore]
        except RecursionError:  # hostile nesting ($($($(...))), a + b + ... ): reported, never a crash
            problems.append(ScanProblem(path, None, "too deeply nested to read"))
            continue
        problems += [ScanProblem(path, line, message) for line, message in view.problems]
        sites += found
    return ScanResult(tuple(fingerprint_sites(sites)), tuple(read), tuple(problems))


def own_modules(paths: Iterable[str]) -> frozenset[str]:
    """The top-level Python modules a repository holds: `tools/__init__.py` -> tools, `helper.py` -> helper,
    `src/bench/__init__.py` -> bench (a package at the root or under src/)."""
    names = set()
    for path in paths:
        parts = path.split("/")
        if parts[0] == "src":
            parts = parts[1:]
        if len(parts) == 1 and parts[0].endswith(".py"):
            names.add(parts[0][:-3])
        elif len(parts) == 2 and parts[1] == "__init__.py":
            names.add(parts[0])
    return frozenset(n for n in names if n.isidentifier())


def scan_tree(root: Path, config: ScanConfig) -> ScanResult:
    """Sites of the work tree below `root`; symlinks are not followed (they may point anywhere)."""
    return scan_files(_tree_files(root, config), config)


def _tree_files(root: Path, config: ScanConfig) -> Iterable[tuple[str, bytes]]:
    candidates = walk_files(root, _PRUNE)
    wanted = set(select_paths((rel for rel, _ in candidates), config))
    for rel, path in candidates:
        if rel not in wanted:
            continue
        try:
            data = read_capped(path, MAX_SCANNED_BYTES)  # sized before it is read: a 1 GiB sparse file costs nothing
        except OSError:
            continue  # replaced by a link or a non-file since the walk, or unreadable
        if data is not None:
            yield rel, data
