"""Shared test helpers: real trees on disk, diffs made by real git, patch folders, and the CLI."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from patchkit.cli.main import main
from tests.output_helpers import cli_env

# The quick loop (`pytest -m "not slow"`, README): the test functions a timed run found slow are listed in
# tests/slow_tests.txt (scripts/slow_tests.py rewrites it); each of their items gets the `slow` mark here.
_SLOW = frozenset((Path(__file__).parent / "slow_tests.txt").read_text(encoding="utf-8").split())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.split("[", 1)[0] in _SLOW:
            item.add_marker(pytest.mark.slow)


# A file in a tree spec: bytes (mode 644), (bytes, executable), or None (absent).
FileSpec = bytes | tuple[bytes, bool] | None

GIT_ENV = {
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}


def git(cwd: Path, *args: str, check: bool = True, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, **GIT_ENV, "GIT_CEILING_DIRECTORIES": str(cwd.parent)}
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, check=check, input=input)


def write_tree(root: Path, files: Mapping[str, FileSpec]) -> None:
    for rel, spec in files.items():
        path = root / rel
        if spec is None:
            if path.exists():
                path.unlink()
            continue
        data, executable = spec if isinstance(spec, tuple) else (spec, False)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        path.chmod(0o755 if executable else 0o644)


def read_tree(root: Path) -> dict[str, tuple[bytes, bool]]:
    """Every regular file below root (except .git and .patchkit) with its exec bit."""
    out: dict[str, tuple[bytes, bool]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in (".git", ".patchkit")]
        for name in filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            if stat.S_ISREG(st.st_mode):
                out[path.relative_to(root).as_posix()] = (path.read_bytes(), bool(st.st_mode & 0o100))
    return out


def git_diff(
    tmp: Path, before: Mapping[str, FileSpec], after: Mapping[str, FileSpec], renames: bool = True, context: int = 3
) -> bytes:
    """The diff real git makes (`git diff -U<context>`) from tree `before` to `before` updated with `after`.

    The one helper every test makes its diffs with (safety_helpers.exec_bits adapts its (bytes, mode) trees)."""
    repo = tmp / f"gitdiff-{len(list(tmp.glob('gitdiff-*')))}"
    repo.mkdir()
    git(repo, "init", "-q")
    write_tree(repo, before)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", "before")
    write_tree(repo, after)
    git(repo, "add", "-A")
    return git(repo, "diff", "--cached", "--no-color", "-M" if renames else "--no-renames", f"-U{context}").stdout


@dataclass
class Registry:
    path: Path

    def add(
        self,
        patch_id: str,
        diff: bytes,
        exclude: Mapping[str, str] | None = None,
        strip: int = 1,
        extra: str = "",
    ) -> Path:
        folder = self.path / patch_id
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "change.diff").write_bytes(diff)
        lines = [
            f'id = "{patch_id}"',
            'title = "test patch"',
            'diff = "change.diff"',
            f'sha256 = "{hashlib.sha256(diff).hexdigest()}"',
            f"strip = {strip}",
            extra,
            "[upstream]",
            'repo = "example/engine"',
            "pr = 2106",
            "[target]",
            'name = "engine"',
            "[waiver]",
            "introduced_by = 2816",
            "[exclude]",
        ]
        lines += [f"{json.dumps(k)} = {json.dumps(v)}" for k, v in (exclude or {}).items()]
        (folder / "manifest.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
        return folder


@dataclass(frozen=True)
class CliResult:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def at_an_lstat(
    monkeypatch: pytest.MonkeyPatch, function: str, name: str | Callable[[str], bool],
    step: Callable[[int, str], None], *, before: bool = False,
) -> list[bool]:
    """Run `step(folder, name)` once, in this process, right after (or right `before`) the write stage's
    function `function` (in workspace/commit.py) lstats a file `name` (a name, or a test of the name): another
    writer's move at the worst moment. The list holds True once it ran."""
    from patchkit.workspace import commit as commit_module  # the write stage, imported by the tests that hook it

    real = commit_module.lstat_at
    matches = name if callable(name) else name.__eq__
    ran: list[bool] = []

    def hooked(folder: int, seen: str) -> os.stat_result | None:
        now = matches(seen) and sys._getframe(1).f_code.co_name == function and not ran
        if now and before:
            ran.append(True)
            step(folder, seen)
        st = real(folder, seen)
        if now and not before:
            ran.append(True)
            step(folder, seen)
        return st

    monkeypatch.setattr(commit_module, "lstat_at", hooked)
    return ran


def after_the_landing_check(monkeypatch: pytest.MonkeyPatch, name: str, step: Callable[[], None]) -> list[bool]:
    """Run `step` once right after the check after the write (commit._landed_here) has lstat'ed the file `name`
    it wrote (at_an_lstat)."""
    return at_an_lstat(monkeypatch, "_landed_here", name, lambda _folder, _name: step())


def cli(*args: str | Path) -> CliResult:
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    return CliResult(result.exit_code, result.stdout, result.stderr)


# ------------------------------------------------------------------------- the security tests' other user

# The security tests run as root with a real unprivileged user present: one that owns the engine tree, its
# environment or a planted file, and whose steps run after a real setuid (safety_helpers.as_user). Not root:
# they skip with this reason (module-wide with `pytestmark = needs_root`, or through the `user` fixture).
NEEDS_ROOT = "needs root (and creates an unprivileged user)"
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason=NEEDS_ROOT)
UNPRIVILEGED_USER = "patchkit-test"


def unprivileged_user() -> tuple[int, int]:
    """(uid, gid) of an unprivileged user, created with useradd if absent. Needs root: callers skip if not."""
    import pwd

    try:
        entry = pwd.getpwnam(UNPRIVILEGED_USER)
    except KeyError:
        # Unchecked: under pytest-xdist another worker may create it between the look-up and useradd (exit 9,
        # "already exists"); the second look-up is the check, and says useradd's own words when it fails.
        made = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                               UNPRIVILEGED_USER], check=False, capture_output=True)
        try:
            entry = pwd.getpwnam(UNPRIVILEGED_USER)
        except KeyError:
            said = made.stderr.decode(errors="replace")
            raise AssertionError(f"useradd {UNPRIVILEGED_USER} failed: {said}") from None
    assert entry.pw_uid != 0
    return entry.pw_uid, entry.pw_gid


@pytest.fixture(scope="session")
def user() -> tuple[int, int]:
    """(uid, gid) of the real unprivileged user (created if absent); the test skips, saying why, when not root.
    What it must reach goes in safety_helpers.shared_workdir, never under the checkout or pytest's 0700 tmp."""
    if os.geteuid() != 0:
        pytest.skip(NEEDS_ROOT)
    return unprivileged_user()


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """The folder a program run starts in (test_restart_entry, test_status_entry): no pyproject.toml in it or
    above (the full path would read one)."""
    folder = tmp_path / "work"
    folder.mkdir()
    assert not any((p / "pyproject.toml").exists() for p in (folder, *folder.parents))
    return folder


@pytest.fixture
def registry(tmp_path: Path) -> Registry:
    path = tmp_path / "patches"
    path.mkdir()
    return Registry(path)


@pytest.fixture
def patches(registry: Registry) -> Path:
    """The registry folder itself, for tests that write their own manifests."""
    return registry.path


@pytest.fixture
def engine(tmp_path: Path) -> Path:
    root = tmp_path / "engine"
    root.mkdir()
    return root


def copy_tree(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst, symlinks=True, dirs_exist_ok=True)


@pytest.fixture
def shim(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH has a `patchkit` that runs this checkout, as an installed one would."""
    folder = tmp_path / "bin"
    folder.mkdir()
    program = folder / "patchkit"
    program.write_text(f'#!/bin/sh\nexec {sys.executable} -m patchkit "$@"\n')
    program.chmod(0o755)
    env = cli_env()
    env["PATH"] = f"{folder}{os.pathsep}{env.get('PATH', '')}"
    return env
