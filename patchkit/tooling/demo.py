"""Build the demo's throwaway engine tree and patch registry from the package's demo data, with git.

The data ships inside the package (`patchkit/data/demo`, package data read through importlib.resources), so
the demo works from a wheel, a source checkout and patchkit.pyz alike. Layout: `pinned/` is the engine tree as
the pinned image ships it; upstream's history moved on (`upstream-base/` overlays the files upstream rewrote
after the pinned commit), and the pull request changes files as in `upstream-pr/`. The diff is made by git
from upstream-base to upstream-pr, so its hunks for the rewritten files do not fit the pinned tree: exactly
the files the manifest excludes.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from patchkit.errors import BadInputError

if sys.version_info >= (3, 11):
    from importlib.resources.abc import Traversable
else:
    from importlib.abc import Traversable

DEMO_ID = "demo-pr2106"


@dataclass(frozen=True)
class DemoTree:
    root: Path  # the engine tree to patch
    patches: Path  # the registry folder holding DEMO_ID


def default_fixtures() -> Traversable:
    """The demo data inside the installed package: a folder, or a folder in a zip (patchkit.pyz)."""
    return resources.files("patchkit") / "data" / "demo"


def build_demo(fixtures: Traversable, workdir: Path) -> DemoTree:
    for part in ("pinned", "upstream-base", "upstream-pr", "manifest.toml"):
        if not (fixtures / part).is_dir() and not (fixtures / part).is_file():
            raise BadInputError(
                f"demo fixtures incomplete: {part} missing", where=str(fixtures),
                hint="reinstall patchkit-engine (the demo data is package data) or pass --fixtures DIR",
            )
    root = workdir / "engine"
    copy_data(fixtures / "pinned", root)
    upstream = workdir / "upstream"
    copy_data(fixtures / "pinned", upstream)
    copy_data(fixtures / "upstream-base", upstream)
    _git(upstream, "init", "-q")
    _git(upstream, "add", "-A")
    _git(upstream, "commit", "-q", "-m", "upstream base")
    copy_data(fixtures / "upstream-pr", upstream)
    _git(upstream, "add", "-A")
    diff = _git(upstream, "diff", "--cached", "--no-color", "--no-ext-diff")
    patch_dir = workdir / "patches" / DEMO_ID
    patch_dir.mkdir(parents=True)
    (patch_dir / "pr.diff").write_bytes(diff)
    manifest = (fixtures / "manifest.toml").read_text(encoding="utf-8")
    (patch_dir / "manifest.toml").write_text(
        manifest.replace("@SHA256@", hashlib.sha256(diff).hexdigest()), encoding="utf-8"
    )
    return DemoTree(root, workdir / "patches")


def copy_data(source: Traversable, dest: Path) -> None:
    """Copy a data folder onto dest (files overwrite, folders merge), from the file system or a zip alike.

    shutil.copytree and importlib.resources.as_file need a real folder (as_file takes one only from 3.12).
    """
    dest.mkdir(parents=True, exist_ok=True)
    for entry in sorted(source.iterdir(), key=lambda e: e.name):
        if entry.name == "__pycache__":
            continue
        if entry.is_dir():
            copy_data(entry, dest / entry.name)
        else:
            (dest / entry.name).write_bytes(entry.read_bytes())


def _git(cwd: Path, *args: str) -> bytes:
    env = {
        **os.environ,
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "demo",
        "GIT_AUTHOR_EMAIL": "demo@example.invalid",
        "GIT_COMMITTER_NAME": "demo",
        "GIT_COMMITTER_EMAIL": "demo@example.invalid",
    }
    try:
        done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, check=True)
    except FileNotFoundError:
        raise BadInputError("the demo needs git on PATH to build its diff") from None
    except subprocess.CalledProcessError as exc:
        raise BadInputError(f"git {args[0]} failed: {exc.stderr.decode(errors='replace')}") from None
    return done.stdout
