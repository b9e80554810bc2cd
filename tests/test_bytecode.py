"""After patchkit changes a .py file, the interpreter runs the new code: cached bytecode that would survive the
change (unchecked-hash; also checked-hash and timestamp) is removed in the same transaction, journaled and
rolled back with the rest. Driven through the CLI; the module is imported by a real interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Registry, cli, git_diff, write_tree

# version_sensitive: .pyc files: magic number and cache tag are per version.
pytestmark = pytest.mark.version_sensitive

SOURCE = b"".join(b"v%d = %d\n" % (i, i) for i in range(1, 15)) + b"VALUE = 'old'\n"
# Same length on purpose: a timestamp .pyc checks size and whole-second mtime, both may match.
PATCHED = SOURCE.replace(b"VALUE = 'old'", b"VALUE = 'new'")
MODES = ("TIMESTAMP", "CHECKED_HASH", "UNCHECKED_HASH")


def run_python(root: Path, code: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # the import under test reads caches, never writes new ones
    done = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True,
                          check=True)
    return done.stdout.strip()


def compile_caches(root: Path, mode: str) -> list[Path]:
    code = (
        "import py_compile, sys\n"
        f"for opt in (-1, 1): py_compile.compile('pkg/mod.py', doraise=True, optimize=opt, "
        f"invalidation_mode=py_compile.PycInvalidationMode.{mode})\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    subprocess.run([sys.executable, "-c", code], cwd=root, env=env, check=True)
    return sorted((root / "pkg/__pycache__").iterdir())


def imported(root: Path) -> str:
    return run_python(root, "import pkg.mod; print(pkg.mod.VALUE)")


@pytest.fixture
def setup(tmp_path: Path, registry: Registry, engine: Path) -> Path:
    files = {"pkg/__init__.py": b"", "pkg/mod.py": SOURCE, "pkg/other.py": SOURCE}
    registry.add("p", git_diff(tmp_path, files, {"pkg/mod.py": PATCHED}))
    write_tree(engine, files)
    return engine


@pytest.mark.parametrize("mode", MODES)
def test_stale_bytecode_goes_with_the_change(setup: Path, registry: Registry, mode: str) -> None:
    root = setup
    caches = compile_caches(root, mode)
    other = root / "pkg/__pycache__" / caches[0].name.replace("mod.", "other.")
    other.write_bytes(caches[0].read_bytes())  # another module's cache: not ours to touch
    os.utime(root / "pkg/mod.py", ns=(10**18, 10**18))
    assert imported(root) == "old"
    result = cli("apply", "p", "--root", root, "--patches", registry.path, "--json")
    assert result.code == 0, result.out
    removed = sorted(c["path"] for c in result.json()["changes"] if c["op"] == "delete")
    assert removed == sorted(f"pkg/__pycache__/{c.name}" for c in caches)
    assert other.exists()
    os.utime(root / "pkg/mod.py", ns=(10**18, 10**18))  # the worst case for a timestamp cache
    assert imported(root) == "new"

    compile_caches(root, mode)  # the patched module gets cached, then reverted
    assert cli("revert", "p", "--root", root, "--patches", registry.path).code == 0
    assert imported(root) == "old"
    assert not [p for p in (root / "pkg/__pycache__").iterdir() if p.name.startswith("mod.")]


def test_without_the_removal_the_interpreter_would_run_the_old_code(setup: Path) -> None:
    # The premise, checked for real: an unchecked-hash cache outlives its source being rewritten.
    root = setup
    compile_caches(root, "UNCHECKED_HASH")
    (root / "pkg/mod.py").write_bytes(PATCHED)
    assert imported(root) == "old"


def test_a_failed_write_restores_the_caches_too(setup: Path, registry: Registry) -> None:
    root = setup
    caches = {p: p.read_bytes() for p in compile_caches(root, "UNCHECKED_HASH")}
    before = (root / "pkg/mod.py").read_bytes()
    for n in range(40):
        os.environ.update({"PATCHKIT_FAULT_AFTER": str(n), "PATCHKIT_FAULT_ERRNO": "ENOSPC"})
        try:
            result = cli("apply", "p", "--root", root, "--patches", registry.path)
        finally:
            del os.environ["PATCHKIT_FAULT_AFTER"], os.environ["PATCHKIT_FAULT_ERRNO"]
        if result.code == 0:
            break
        assert result.code == 7 and ("restored" in result.err or "nothing was changed" in result.err), result.err
        assert (root / "pkg/mod.py").read_bytes() == before
        assert {p: p.read_bytes() for p in caches if p.exists()} == caches
    else:
        pytest.fail("apply never succeeded")
    assert n > 3  # the faults hit the cache deletions, not only the journal
    assert not any(p.exists() for p in caches) and imported(root) == "new"


def test_a_linked_cache_folder_is_refused(setup: Path, registry: Registry, tmp_path: Path) -> None:
    root = setup
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / "pkg/__pycache__").symlink_to(elsewhere)
    (elsewhere / "mod.cpython-311.pyc").write_bytes(b"x")
    result = cli("apply", "p", "--root", root, "--patches", registry.path)
    assert result.code == 2 and "symbolic link" in result.err
    assert (root / "pkg/mod.py").read_bytes() == SOURCE and (elsewhere / "mod.cpython-311.pyc").exists()


def _tree(root: Path) -> dict[str, tuple[bytes, int] | None]:
    """Every file under root but patchkit's temp names (`.patchkit-<hex>.tmp/.orig`) and its state outside
    `.patchkit/applied` (the record is written in the same transaction, the journal and lock are not)."""
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mode) for p in root.rglob("*")
            if p.is_file() and not p.name.startswith(".patchkit-")
            and (".patchkit" not in p.relative_to(root).parts or "applied" in p.relative_to(root).parts)}


def test_a_rollback_counts_only_the_files_it_put_back(setup: Path, registry: Registry) -> None:
    """Every kill point of an apply that also removes two stale caches, then `status` recovers: the number of
    files it says it rolled back is the number of files recovery changed (the oracle: the tree before and after
    it, compared by the test), so a kill before any change says "no file had been changed yet".

    Kills patchkit/workspace/recovery.py:234:core/ReplaceFalseWithTrue#4 (a stale cache never renamed away, its
    kept name absent, counted as put back: "rolled back 2 files" where nothing had changed)."""
    from tests.safety_helpers import fault_env, run_forked

    root = setup
    compile_caches(root, "UNCHECKED_HASH")
    pristine = _tree(root)
    args = ["--root", str(root), "--patches", str(registry.path)]
    seen = set()
    for n in range(0, 30, 2):  # every other kill point: the test forks twice for each
        killed = run_forked(["apply", "p", *args], fault_env(n))
        if killed.code == 0:
            break
        before = _tree(root)
        run = run_forked(["status", "p", *args])
        if "completed it" in run.err:  # killed after every file was written: rolled forward from here on
            break
        assert run.code == 3 and "Traceback" not in run.err, (n, run.code, run.err)
        after = _tree(root)
        assert after == pristine, n
        changed = sum(before.get(p) != after.get(p) for p in set(before) | set(after))
        said = "no file had been changed yet" if not changed else \
            f"rolled back {changed} file{'' if changed == 1 else 's'}"
        if "recovered an interrupted" in run.err:
            assert said in run.err, (n, changed, run.err)
            seen.add(changed)
    assert 0 in seen and len(seen) > 2, seen  # kills before the first change, and in the middle
