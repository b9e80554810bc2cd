"""Build the demo's throwaway engine tree and patch registry from fixtures/demo, with git.

Layout of fixtures/demo: `pinned/` is the engine tree as the pinned image ships it; upstream's history moved
on (`upstream-base/` overlays the files upstream rewrote after the pinned commit), and the pull request
changes files as in `upstream-pr/`. The diff is made by git from upstream-base to upstream-pr, so its hunks for
the rewritten files do not fit the pinned tree: exactly the files the manifest excludes.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from patchkit.errors import BadInputError

DEMO_ID = "demo-pr2106"


@dataclass(frozen=True)
class DemoTree:
    root: Path  # the engine tree to patch
    patches: Path  # the registry folder holding DEMO_ID


def default_fixtures() -> Path:
    return Path(__file__).resolve().parent.parent / "fixtures" / "demo"


def build_demo(fixtures: Path, workdir: Path) -> DemoTree:
    for part in ("pinned", "upstream-base", "upstream-pr", "manifest.toml"):
        if not (fixtures / part).exists():
            raise BadInputError(
                f"demo fixtures incomplete: {part} missing", where=str(fixtures),
                hint="run the demo from a source checkout (pip install -e .) or pass --fixtures DIR",
            )
    root = workdir / "engine"
    shutil.copytree(fixtures / "pinned", root)
    upstream = workdir / "upstream"
    shutil.copytree(fixtures / "pinned", upstream)
    shutil.copytree(fixtures / "upstream-base", upstream, dirs_exist_ok=True)
    _git(upstream, "init", "-q")
    _git(upstream, "add", "-A")
    _git(upstream, "commit", "-q", "-m", "upstream base")
    shutil.copytree(fixtures / "upstream-pr", upstream, dirs_exist_ok=True)
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
