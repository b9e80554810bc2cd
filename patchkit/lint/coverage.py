"""Which waiver covers a patch site: one that names the file holding it, or the registry patch it runs.

A waiver names a file by its repository path written in its text (`benchmarks/sglang/apply_fix.sh`, with or
without a leading `./` or `/`), or by a link to it: relative to the waiver (`../../benchmarks/x.sh`) or a
GitHub `blob`/`tree` URL. A `#L12` anchor is allowed.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path, PurePosixPath

from patchkit.lint.inputs import LintInput, WaiverFile
from patchkit.scan import PatchSite

_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)")
_URL = re.compile(r"https?://[^\s)>\]\"'`]+")
_GITHUB_FILE = re.compile(r"^https?://github\.com/[^/]+/[^/]+/(?:blob|tree|raw)/[^/]+/(.+)$")


class Cover(Enum):
    WAIVER = "waiver"  # a waiver names the file
    REGISTRY = "registry"  # the site runs a patch of the registry, which has its own waiver
    BASELINE = "baseline"  # accepted in the baseline file
    NONE = "uncovered"


@dataclass(frozen=True)
class SiteCover:
    site: PatchSite
    cover: Cover
    by: str | None  # the waiver's path, the registry patch id, or the baseline file


def names_file(text: str, waiver_folder: str, path: str) -> bool:
    """`text` (of a waiver in the project-relative folder `waiver_folder`) names the project file `path`."""
    pattern = r"(?<![\w.\-/])(?:\./|/)?" + re.escape(path) + r"(?![\w/\-]|\.\w)"
    if re.search(pattern, text):
        return True
    targets = [m.group(1) for m in _LINK.finditer(text)] + [m.group(0) for m in _URL.finditer(text)]
    return any(_link_target(t, waiver_folder) == path for t in targets)


def _link_target(target: str, waiver_folder: str) -> str | None:
    target = target.split("#", 1)[0].split("?", 1)[0].rstrip(".,;:")
    github = _GITHUB_FILE.match(target)
    if github:
        return github.group(1).rstrip("/")
    if "://" in target or not target:
        return None
    joined = target.lstrip("/") if target.startswith("/") else posixpath.join(waiver_folder, target)
    normal = posixpath.normpath(joined)
    return None if normal.startswith("..") else normal


def registry_patch_of(lint_input: LintInput, site: PatchSite) -> str | None:
    """The id of the registry patch whose diff the site's command reads: `git apply patches/<id>/x.diff`, or
    `$PATCHES/<id>/<diff>` when the folder is in a variable."""
    for spec in lint_input.specs:
        folder = project_relative(lint_input, spec.folder)
        if folder is not None and re.search(r"(?<![\w.-])" + re.escape(folder) + r"/", site.command):
            return spec.id
        if re.search(r"(?<![\w.-])" + re.escape(f"{spec.id}/{spec.diff_name}") + r"(?![\w.-])", site.command):
            return spec.id
    return None


def waivers_naming(lint_input: LintInput, site: PatchSite, waivers: Iterable[WaiverFile]) -> list[WaiverFile]:
    folder = project_relative(lint_input, lint_input.waivers_dir) or ""
    return [
        w for w in waivers if w.is_waiver and w.doc is not None and names_file(w.doc.text, folder, site.path)
    ]


def cover_site(lint_input: LintInput, site: PatchSite) -> SiteCover:
    """How the site is covered now, preferring a waiver, then the registry, then the baseline."""
    named = waivers_naming(lint_input, site, lint_input.waivers)
    if named:
        return SiteCover(site, Cover.WAIVER, named[0].path.as_posix())
    patch_id = registry_patch_of(lint_input, site)
    if patch_id is not None:
        return SiteCover(site, Cover.REGISTRY, patch_id)
    if site.fingerprint in lint_input.baselined:
        baseline = lint_input.baseline_path.as_posix() if lint_input.baseline_path else "the baseline"
        return SiteCover(site, Cover.BASELINE, baseline)
    return SiteCover(site, Cover.NONE, None)


def project_relative(lint_input: LintInput, path: Path) -> str | None:
    """`path` relative to the project root, POSIX; None when it is outside."""
    try:
        return PurePosixPath(path.resolve().relative_to(lint_input.root.resolve()).as_posix()).as_posix()
    except ValueError:
        return None
