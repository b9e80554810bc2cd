"""A patch site: one place in the consuming repository that changes the engine or serving stack."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import Enum


class SiteKind(Enum):
    """Every kind of patch site the scan finds; `label` is its stable name (config, JSON, baseline)."""

    GIT_APPLY = ("git-apply", "PS01", "runs git apply")
    GIT_CHECKOUT = ("git-checkout", "PS02", "switches the engine checkout to other code")
    PATCH = ("patch", "PS03", "runs patch")
    HEREDOC_DIFF = ("heredoc-diff", "PS04", "carries an inline diff (heredoc)")
    IN_PLACE_EDIT = ("in-place-edit", "PS05", "edits an engine file in place (sed -i / perl -pi)")
    FILE_WRITE = ("file-write", "PS06", "writes an engine file from the shell")
    COPY_OVER = ("copy-over", "PS07", "copies or moves a file over the engine's")
    PYTHON_WRITE = ("python-write", "PS08", "rewrites an engine file from Python")
    PIP_FORK = ("pip-fork", "PS09", "installs an engine package from a fork, URL or local wheel")
    PIP_INDEX = ("pip-index", "PS10", "installs an engine package from another package index")
    SOURCE_INSTALL = ("source-install", "PS11", "builds and installs an engine from a local checkout")
    METADATA_EDIT = ("metadata-edit", "PS12", "edits an installed package's metadata (*.dist-info)")
    DOWNLOAD_OVER = ("download-over", "PS13", "downloads a file over the engine's (curl -o / wget -O)")
    ENGINE_REMOVE = ("engine-remove", "PS14", "removes an engine file (rm)")
    UNRESOLVED_WRITE = ("unresolved-write", "PS15", "rewrites a file it could not name, in code importing an engine")

    def __init__(self, label: str, code: str, summary: str) -> None:
        self.label = label
        self.code = code
        self.summary = summary

    @classmethod
    def by_label(cls) -> dict[str, SiteKind]:
        return {kind.label: kind for kind in cls}


@dataclass(frozen=True)
class PatchSite:
    path: str  # repository-relative POSIX path of the file holding the site
    line: int  # 1-based
    kind: SiteKind
    command: str  # the command or statement, normalised (single spaces)
    engine_path: str | None  # what is patched, when it can be told: "<sglang>/srt/x.py", "/sgl-workspace/..."
    fingerprint: str = ""  # stable across unrelated edits: no line number in it
    reason: str = ""  # why it counts: "engine package sglang, through $SGL_DIR"

    @property
    def what(self) -> str:
        """What is patched and why it counts, for messages."""
        shown = self.engine_path or "an engine path it does not name"
        return f"{shown} ({self.reason})" if self.reason else shown


def fingerprint_sites(sites: Iterable[PatchSite]) -> list[PatchSite]:
    """Sites (of one or more files) sorted by place, each with its fingerprint: sha256 of path, kind, command
    and the occurrence index among identical (path, kind, command) sites, so moving code does not change it."""
    ordered = sorted(sites, key=lambda s: (s.path, s.line, s.kind.label, s.command))
    seen: dict[tuple[str, str, str], int] = {}
    out = []
    for site in ordered:
        key = (site.path, site.kind.label, site.command)
        index = seen.get(key, 0)
        seen[key] = index + 1
        digest = hashlib.sha256("\0".join((*key, str(index))).encode("utf-8", "surrogateescape")).hexdigest()
        out.append(replace(site, fingerprint=digest))
    return out
