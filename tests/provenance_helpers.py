"""Helpers for the provenance and vendor tests: a tiny engine, its changes, and manifests with comments."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.conftest import FileSpec, git, write_tree

PID = "eng-pr7"


def numbered(prefix: str, count: int) -> bytes:
    return b"".join(b"%s_%d = %d\n" % (prefix.encode(), i, i) for i in range(1, count + 1))


# The pinned engine: three small files of our own.
BASE: dict[str, FileSpec] = {
    "eng/core.py": numbered("core", 30),
    "eng/extra.py": numbered("extra", 12),
    "eng/util.py": numbered("util", 12),
}


def edit(data: bytes, replacements: Mapping[bytes, bytes]) -> bytes:
    for old, new in replacements.items():
        assert old in data, old
        data = data.replace(old, new)
    return data


def v1_files() -> dict[str, FileSpec]:
    """The upstream change, version 1: one hunk in core.py, one in extra.py (excluded by some manifests)."""
    core, extra = BASE["eng/core.py"], BASE["eng/extra.py"]
    assert isinstance(core, bytes) and isinstance(extra, bytes)
    return {
        "eng/core.py": edit(core, {b"core_5 = 5\n": b"core_5 = 50\n"}),
        "eng/extra.py": edit(extra, {b"extra_3 = 3\n": b"extra_3 = 30\n"}),
    }


def v2_files() -> dict[str, FileSpec]:
    """Version 2 of the same change: the core.py hunk differs and a second hunk is added."""
    core = BASE["eng/core.py"]
    assert isinstance(core, bytes)
    return {
        **v1_files(),
        "eng/core.py": edit(core, {b"core_5 = 5\n": b"core_5 = 500\n", b"core_25 = 25\n": b"core_25 = 250\n"}),
    }


def git_repo(path: Path, files: Mapping[str, FileSpec], message: str = "base") -> str:
    """A real git repository at path with one commit of `files`; returns the commit id."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q")
    write_tree(path, files)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", message)
    return head_of(path)


def commit_all(path: Path, files: Mapping[str, FileSpec], message: str) -> str:
    write_tree(path, files)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", message)
    return head_of(path)


def head_of(path: Path) -> str:
    return git(path, "rev-parse", "HEAD").stdout.decode().strip()


def manifest_text(
    patch_id: str = PID,
    *,
    sha256: str | None = None,
    hunkset_sha256: str | None = None,
    pinned: str = "unknown",
    excludes: Mapping[str, str] | None = None,
    diff_url: str | None = None,
    base: Mapping[str, str] | None = None,
) -> str:
    """A manifest laid out like the real registry's, comments included, so edits can be checked to keep them."""
    lines = [
        "# A test patch entry. This comment must survive `patchkit vendor`.",
        f'id = "{patch_id}"',
        'title = "Test change"',
        "",
        "# The vendored diff.",
        'diff = "change.diff"',
    ]
    if sha256:
        lines.append(f'sha256 = "{sha256}"  # reviewed')
    if hunkset_sha256:
        lines.append(f'hunkset_sha256 = "{hunkset_sha256}"')
    lines += ["strip = 1", "", "[upstream]", 'repo = "example/engine"', "pr = 7"]
    if diff_url:
        lines.append(f'diff_url = "{diff_url}"')
    lines += ["", "[target]", 'name = "engine"', f'pinned_commit = "{pinned}"  # read from the image']
    if excludes:
        lines += ["", "[exclude]", "# Files not ported, with the reason."]
        lines += [f"{json.dumps(k)} = {json.dumps(v)}" for k, v in excludes.items()]
    lines += ["", "[waiver]", "introduced_by = 2816"]
    if base:
        lines += ["", "[base]"] + [f"{json.dumps(k)} = {json.dumps(v)}" for k, v in base.items()]
    return "\n".join(lines) + "\n"


def add_entry(patches: Path, diff: bytes | None, patch_id: str = PID, **kwargs: Any) -> Path:
    """A patch folder; with a diff, its sha256 is recorded (as a reviewer would), without one it is pending."""
    folder = patches / patch_id
    folder.mkdir(parents=True, exist_ok=True)
    if diff is not None:
        (folder / "change.diff").write_bytes(diff)
        kwargs.setdefault("sha256", hashlib.sha256(diff).hexdigest())
    (folder / "manifest.toml").write_text(manifest_text(patch_id, **kwargs), encoding="utf-8")
    return folder


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
