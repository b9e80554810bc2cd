"""What the repository scan reads and what counts as the engine: `[tool.patchkit]` keys with defaults.

    [tool.patchkit]
    scan = ["**/*.sh", "benchmarks/**"]        # files to read (globs, relative to the project root)
    scan-exclude = ["third_party/**"]          # files not to read, on top of the default test/vendor folders
    engine-roots = ["/sgl-workspace", "$ATOM_ROOT"]   # where the image keeps engine checkouts
    engine-packages = ["sglang", "vllm"]       # named "engine package" in a site's reason (any package counts)
    scan-ignore = ["pip-fork"]                 # site kinds not to report (see SiteKind)
    baseline = ".patchkit-baseline.json"       # accepted pre-existing sites (--write-baseline)
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from patchkit.errors import RegistryError
from patchkit.input.registry import ProjectConfig, project_path
from patchkit.scan.sites import SiteKind

DEFAULT_INCLUDE = (
    "**/*.sh",
    "**/*.bash",
    "**/*.py",
    "**/Dockerfile",
    "**/Dockerfile.*",
    "**/*.Dockerfile",
    "**/*.dockerfile",
    "**/Containerfile",
    ".github/workflows/*.yml",
    ".github/workflows/*.yaml",
    ".github/actions/**/*.yml",  # composite actions
    ".github/actions/**/*.yaml",
    "**/requirements*.txt",  # `name @ git+https://...` lines install forks at build time
    "**/Makefile",  # recipes are shell (#33)
    "**/makefile",
    "**/GNUmakefile",
    "**/*.mk",
    "benchmarks/**",
    "runners/**",
)
# Tests, vendored trees and tool caches: not what runs at build or run time of the image.
DEFAULT_EXCLUDE = (
    ".git/**",
    "**/.venv/**",
    "**/venv/**",
    "**/node_modules/**",
    "**/site-packages/**",
    "**/__pycache__/**",
    "tests/**",
    "**/tests/**",
    "**/test_*.py",
    "**/*_test.py",
    "**/conftest.py",
)
DEFAULT_ENGINE_ROOTS = ("/sgl-workspace", "/opt/ATOM", "/opt/vllm", "$ATOM_ROOT", "$SGLANG_ROOT", "$VLLM_ROOT")
DEFAULT_ENGINE_PACKAGES = (
    "atom",
    "aiter",
    "sglang",
    "sgl-kernel",
    "vllm",
    "flashinfer",
    "flashinfer-python",
    "triton",
    "torch",
    "transformers",
    "xformers",
)
DEFAULT_BASELINE = ".patchkit-baseline.json"


@dataclass(frozen=True)
class ScanConfig:
    include: tuple[str, ...] = DEFAULT_INCLUDE
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    engine_roots: tuple[str, ...] = DEFAULT_ENGINE_ROOTS
    engine_packages: tuple[str, ...] = DEFAULT_ENGINE_PACKAGES
    ignore: frozenset[SiteKind] = frozenset()
    baseline: str = DEFAULT_BASELINE
    # Top-level modules the scanned repository holds itself (`tools/__init__.py`, `helper.py`): their files
    # are the repository's, not an installed package's (set by scan_files from the files it reads).
    own_modules: frozenset[str] = frozenset()

    def is_engine_package(self, name: str) -> bool:
        """One of the configured engine packages: it ranks a site (its reason says "engine package"); whether
        a site exists never depends on it (#33): any installed package's file or install counts."""
        wanted = normalise_package(name)
        return any(normalise_package(p) == wanted for p in self.engine_packages)

    def is_installed_package(self, name: str) -> bool:
        """A module that can be an installed distribution's (see is_installed_package), and not one of the
        repository's own modules, unless the engine list names it."""
        top = name.split(".", 1)[0]
        if self.is_engine_package(top):
            return True
        return is_installed_package(top) and top not in self.own_modules

    def package_reason(self, name: str) -> str:
        """Why a package's file or install counts: "engine package vllm" or "installed package lmcache"."""
        which = "engine package" if self.is_engine_package(name) else "installed package"
        return f"{which} {normalise_package(name)}"


def is_installed_package(name: str) -> bool:
    """A module name that can be an installed distribution's: not empty, not the standard library's (whose
    `os.__file__` is Python's own folder) and not `__main__`."""
    top = name.split(".", 1)[0]
    return bool(top) and top.isidentifier() and top not in _STANDARD and not top.startswith("__")


_STANDARD = frozenset(sys.stdlib_module_names)


def normalise_package(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(".", "-")


def read_scan_config(project: ProjectConfig) -> ScanConfig:
    """The scan settings of `[tool.patchkit]`; a wrong type or an unknown site kind is bad input."""
    table = project.table

    def strings(key: str, default: tuple[str, ...]) -> tuple[str, ...]:
        value = table.get(key)
        if value is None:
            return default
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise RegistryError(
                f"[tool.patchkit] {key} must be a list of strings", where=str(project.source),
                hint=f'e.g. {key} = ["{default[0]}"]' if default else None,
            )
        return tuple(value)

    known = SiteKind.by_label()
    ignored = strings("scan-ignore", ())
    unknown = [name for name in ignored if name not in known]
    if unknown:
        raise RegistryError(
            f"[tool.patchkit] scan-ignore names unknown site kinds: {', '.join(unknown)}",
            where=str(project.source),
            hint=f"known kinds: {', '.join(known)}",
        )
    baseline = table.get("baseline", DEFAULT_BASELINE)
    if not isinstance(baseline, str) or not baseline:
        raise RegistryError("[tool.patchkit] baseline must be a file path", where=str(project.source))
    # Refused when it leaves the project, the default too (a link planted under its name).
    project_path(project, "baseline" if "baseline" in table else "baseline (the default)", baseline)
    return ScanConfig(
        include=strings("scan", DEFAULT_INCLUDE),
        # Extra excludes add to the defaults: a repository rarely wants its tests scanned.
        exclude=DEFAULT_EXCLUDE + strings("scan-exclude", ()),
        engine_roots=strings("engine-roots", DEFAULT_ENGINE_ROOTS),
        engine_packages=strings("engine-packages", DEFAULT_ENGINE_PACKAGES),
        ignore=frozenset(known[name] for name in ignored),
        baseline=baseline,
    )
