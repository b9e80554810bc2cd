"""Issue 21, bounds everywhere: tree files read under a size bound, stale caches removed without a copy,
placed paths and patch ids held to the bounds of diff paths. Through the real CLI on real trees.

The hostile tree tests run as root with the engine tree owned by a real unprivileged user who plants the big
or hard-linked files (skipped with a reason when not root). Big files are sparse (truncate), and every run
that reads the tree runs in a forked child with a cap on its address space, so a patchkit that reads what it
should not fails here with an error instead of taking the machine's memory.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tests.conftest import Registry, cli, git_diff, needs_root, read_tree, write_tree
from tests.safety_helpers import (
    Run,
    add_patch,
    as_user,
    chown_tree,
    fault_env,
    image,
    shared_workdir,
    start_forked,
    wait_forked,
    write_files,
)
from tests.safety_helpers import git_diff as safety_diff

STATE = ".patchkit"
GiB = 1 << 30
MiB = 1 << 20
FILE_BOUND = 64 * MiB  # patchkit.input.limits.MAX_TREE_FILE_BYTES, restated: an oracle does not import what it checks

SOURCE = b"".join(b"v%d = %d\n" % (i, i) for i in range(1, 15)) + b"VALUE = 'old'\n"
PATCHED = SOURCE.replace(b"VALUE = 'old'", b"VALUE = 'new'")
CACHE = "engine/__pycache__/core.cpython-312.pyc"


# ------------------------------------------------------------------------------------------------ running


def run_capped(args: Sequence[str], env: dict[str, str] | None = None, *, headroom: int = GiB,
               alarm: int = 120) -> Run:
    """The CLI in a forked child whose address space may grow by at most `headroom` and which SIGALRM ends
    after `alarm` seconds: a run that reads a planted 512 MiB or 4 GiB file fails instead of swapping."""

    def cap() -> None:  # in the child, right before the CLI runs
        size = next(int(line.split()[1]) * 1024 for line in Path("/proc/self/status").read_text().splitlines()
                    if line.startswith("VmSize:"))
        resource.setrlimit(resource.RLIMIT_AS, (size + headroom, size + headroom))
        signal.alarm(alarm)

    return wait_forked(start_forked(args, env, before=cap))


def identity(path: Path) -> tuple[int, ...]:
    """What a restore must bring back exactly: inode, size, links, owner, mode, mtime (never the bytes: the
    files here are too big to read). A folder's size and mtime change with every temp name made in it."""
    st = path.lstat()
    if stat.S_ISDIR(st.st_mode):
        return (st.st_ino, 0, 0, st.st_uid, st.st_gid, st.st_mode, 0)
    return (st.st_ino, st.st_size, st.st_nlink, st.st_uid, st.st_gid, st.st_mode, st.st_mtime_ns)


def identities(root: Path) -> dict[str, tuple[int, ...]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != STATE]
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            out[path.relative_to(root).as_posix()] = identity(path)
    return out


def small_files(root: Path) -> dict[str, bytes]:
    return {rel: (root / rel).read_bytes() for rel, ident in identities(root).items()
            if stat.S_ISREG(ident[5]) and ident[1] < MiB}


# ------------------------------------------------------------------------------------------------ fixtures


@pytest.fixture
def workdir() -> Iterator[Path]:
    with shared_workdir() as folder:
        yield folder


def engine_case(workdir: Path, user: tuple[int, int]) -> tuple[Path, list[str]]:
    """A tree owned by `user` with engine/core.py, and a patch changing it; (root, CLI args minus the action)."""
    before = {"engine/core.py": (SOURCE, 0o644), "engine/keep.py": (b"keep = 1\n", 0o644)}
    patches = workdir / "patches"
    if not patches.exists():
        add_patch(patches, "bounds-pr1", safety_diff(workdir, before, {"engine/core.py": (PATCHED, 0o644)}))
    root = workdir / "tree"
    write_files(root, before)
    chown_tree(root, *user)
    return root, ["bounds-pr1", "--root", str(root), "--patches", str(patches)]


# --------------------------------------------------------------------------------------- bounded reads


@needs_root
@pytest.mark.parametrize("action", ["status", "apply", "revert", "status-fast-path"])
def test_a_huge_file_at_a_patched_path_is_refused_before_it_is_read(
    workdir: Path, user: tuple[int, int], action: str
) -> None:
    root, args = engine_case(workdir, user)
    if action == "status-fast-path":  # applied, with a record: the restart fast path reads the file first
        assert run_capped(["apply", *args]).code == 0
        action = "status"
    target = root / "engine/core.py"
    as_user(*user, lambda: os.truncate(target, 4 * GiB))  # the tree's owner plants a 4 GiB sparse file
    before, state = identities(root), image(root / STATE) if (root / STATE).exists() else None
    run = run_capped([action, *args])
    assert run.code == 2, (run.code, run.err[-2000:])
    assert str(target) in run.err and f"{4 * GiB} bytes" in run.err and str(FILE_BOUND) in run.err, run.err
    assert "Traceback" not in run.err
    assert identities(root) == before, "nothing may be written to the tree"
    after = image(root / STATE) if (root / STATE).exists() else {}
    def drop_lock(found: dict[str, tuple[str, bytes, int]]) -> dict[str, tuple[str, bytes, int]]:
        return {k: v for k, v in found.items() if k not in ("lock", ".gitignore")}  # made before the read
    assert drop_lock(after) == drop_lock(state or {}), "nor to the state folder"


@needs_root
def test_a_file_just_over_the_bound_is_refused_and_one_under_it_is_read(workdir: Path, user: tuple[int, int]) -> None:
    root, args = engine_case(workdir, user)
    target = root / "engine/core.py"
    as_user(*user, lambda: os.truncate(target, FILE_BOUND + 1))
    run = run_capped(["status", *args])
    assert run.code == 2 and f"{FILE_BOUND + 1} bytes" in run.err, run.err
    # One MiB of text before the patched lines: read and judged (the hunk is still there to apply).
    def fill() -> None:
        target.write_bytes(b"# filler\n" * (MiB // 9) + SOURCE)

    as_user(*user, fill)
    assert run_capped(["status", *args]).code == 3


@needs_root
def test_the_files_one_command_reads_are_bounded_together(
    workdir: Path, user: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The total bound is 1 GiB; lowered here to 1 MiB (in the forked child too), so two files of 700 KiB pass
    # the per-file bound and cross the total one.
    import patchkit.input.reads

    before = {f"engine/m{i}.py": (SOURCE + b"# pad\n" * (700 * 1024 // 6), 0o644) for i in range(2)}
    after = {p: (data.replace(b"'old'", b"'new'"), mode) for p, (data, mode) in before.items()}
    patches = workdir / "patches"
    add_patch(patches, "two", safety_diff(workdir, before, after))
    root = workdir / "tree2"
    write_files(root, before)
    chown_tree(root, *user)
    args = ["two", "--root", str(root), "--patches", str(patches)]
    assert run_capped(["status", *args]).code == 3
    monkeypatch.setattr(patchkit.input.reads, "MAX_TREE_READ_BYTES", MiB)
    run = run_capped(["status", *args])
    assert run.code == 2 and "add up to more than 1048576 bytes" in run.err and "engine/m1.py" in run.err, run.err


# ------------------------------------------------------------------------------------ stale bytecode


def plant_cache(root: Path, user: tuple[int, int], size: int, link: str | None = None) -> None:
    """As the tree's owner: a sparse stale cache of core.py, and optionally a second name for it."""
    def plant() -> None:
        cache = root / CACHE
        cache.parent.mkdir(exist_ok=True)
        cache.write_bytes(b"")
        os.truncate(cache, size)
        if link is not None:
            os.link(cache, root / link)

    as_user(*user, plant)


@needs_root
def test_a_huge_stale_cache_is_never_copied_and_every_rollback_renames_it_back(
    workdir: Path, user: tuple[int, int]
) -> None:
    journaled = 0
    for n in range(200):
        root = workdir / "tree"
        if root.exists():
            shutil.rmtree(root)
        root, args = engine_case(workdir, user)
        plant_cache(root, user, 512 * MiB)
        before, texts = identities(root), small_files(root)
        run = run_capped(["apply", *args], fault_env(n))
        journal = root / STATE / "journal.json"
        if journal.exists():
            journaled += 1
            assert journal.stat().st_size < 64 * 1024, "the journal holds a copy of the cache"
        if run.code == 0:  # past the last operation: the cache is gone, the change is in
            assert not (root / CACHE).exists() and (root / "engine/core.py").read_bytes() == PATCHED
            break
        assert run.killed, (n, run.code, run.err[-2000:])
        status = run_capped(["status", *args, "--json"])
        assert status.code in (0, 3), status.err
        if status.code == 3:  # rolled back: every file exactly as it was, the cache the very same inode
            assert identities(root) == before, n
            assert small_files(root) == texts
        else:
            assert not (root / CACHE).exists()
    else:
        pytest.fail("apply never ran to its end")
    assert journaled > 3  # kills landed while the journal was there, the cache deletion among them


@needs_root
def test_a_hard_linked_stale_cache_does_not_block_the_apply(workdir: Path, user: tuple[int, int]) -> None:
    root, args = engine_case(workdir, user)
    plant_cache(root, user, 4096, link="engine/elsewhere.bin")
    other = root / "engine/elsewhere.bin"
    ino = other.stat().st_ino
    run = run_capped(["apply", *args])
    assert run.code == 0, run.err
    assert not (root / CACHE).exists() and (root / "engine/core.py").read_bytes() == PATCHED
    assert (other.stat().st_ino, other.stat().st_nlink, other.stat().st_size) == (ino, 1, 4096)


@needs_root
def test_a_failed_apply_restores_a_hard_linked_stale_cache_exactly(workdir: Path, user: tuple[int, int]) -> None:
    root, args = engine_case(workdir, user)
    plant_cache(root, user, 4096, link="engine/elsewhere.bin")
    for n in range(60):
        before, texts = identities(root), small_files(root)
        run = run_capped(["apply", *args], fault_env(n, "ENOSPC"))
        if run.code == 0:
            assert not (root / CACHE).exists() and (root / "engine/elsewhere.bin").stat().st_nlink == 1
            break
        assert run.code == 7, (n, run.code, run.err)
        assert identities(root) == before and small_files(root) == texts, n
        assert (root / CACHE).stat().st_nlink == 2
    else:
        pytest.fail("apply never succeeded")
    assert n > 3  # the faults hit the transaction's writes, not only the journal


# ------------------------------------------------------------------------------------------ placed paths


def placed_case(tmp_path: Path, registry: Registry, engine: Path, extra: str,
                path: str = "pkg/mod.py") -> Path:
    diff = git_diff(tmp_path, {}, {path: b"created = True\n"})
    return registry.add("placed", diff, extra=extra)


@pytest.mark.parametrize(
    ("extra", "key", "needle"),
    [
        pytest.param('prefix = "' + "d/" * 200 + '"', "prefix", "200 folders deep", id="prefix-200-deep"),
        pytest.param('prefix = "' + "d/" * 3000 + '"', "prefix", "3000 folders deep", id="prefix-3000-deep"),
        pytest.param('prefix = "' + "d/" * 50 + '"', "prefix", "folders deep, over the limit of 64",
                     id="prefix-plus-diff-path-too-deep"),
        pytest.param('prefix = "' + "n" * 300 + '/"', "prefix", "a name 300 bytes long", id="long-name"),
        pytest.param('prefix = "' + ("x" * 200 + "/") * 21 + '"', "prefix", "bytes long", id="long-path"),
        pytest.param('prefix = "a/.PatchKit/"', "prefix", ".git or .patchkit", id="reserved"),
        pytest.param('[paths]\n"deep/" = "' + "d/" * 50 + '"', '"deep/"', "folders deep, over the limit of 64",
                     id="paths-target-too-deep"),
    ],
)
@pytest.mark.parametrize("action", ["status", "apply", "revert"])
def test_placed_paths_obey_the_bounds_of_diff_paths(
    tmp_path: Path, registry: Registry, engine: Path, extra: str, key: str, needle: str, action: str
) -> None:
    deep = "/".join(f"f{i}" for i in range(20)) + "/mod.py"  # 21 levels: 50 + 21 > 64
    folder = placed_case(tmp_path, registry, engine, extra, path="deep/" + deep if key.startswith('"') else deep)
    write_tree(engine, {"other.py": b"x = 1\n"})
    pristine = read_tree(engine)
    manifest = folder / "manifest.toml"
    line = next(n for n, text in enumerate(manifest.read_text().splitlines(), 1) if text.startswith(key))
    result = run_capped([action, "placed", "--root", str(engine), "--patches", str(registry.path)], alarm=60)
    assert result.code == 2, (result.code, result.err[-2000:])
    assert f"{manifest}:{line}:" in result.err and needle in result.err, result.err
    assert len(result.err) < 4000  # the message shows the folder cut short, not 6000 characters of it
    assert read_tree(engine) == pristine and not (engine / STATE).exists()


def test_a_placement_within_the_bounds_still_applies(tmp_path: Path, registry: Registry, engine: Path) -> None:
    deep = "/".join(f"f{i}" for i in range(20)) + "/mod.py"
    placed_case(tmp_path, registry, engine, 'prefix = "' + "d/" * 43 + '"', path=deep)  # 43 + 21 = 64 levels
    result = cli("apply", "placed", "--root", engine, "--patches", registry.path)
    assert result.code == 0, result.err
    assert (engine / ("d/" * 43) / deep).read_bytes() == b"created = True\n"
    assert cli("revert", "placed", "--root", engine, "--patches", registry.path).code == 0
    assert not (engine / "d").exists()


# ------------------------------------------------------------------------------------------------- ids

LONG_ID = "a" * 300


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["new", LONG_ID, "--target", "engine", "--local", "no upstream"], id="new"),
        pytest.param(["vendor", LONG_ID, "--from", "/dev/null"], id="vendor"),
        pytest.param(["status", LONG_ID, "--root", "."], id="status"),
        pytest.param(["apply", "a" * 200, "--root", "."], id="apply-200"),
        pytest.param(["status", "x/" + LONG_ID, "--root", "."], id="status-path"),
    ],
)
def test_a_long_patch_id_is_bad_input_not_an_internal_error(
    registry: Registry, args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    registry.add("real", git_diff(registry.path.parent, {"a.py": b"a = 1\n"}, {"a.py": b"a = 2\n"}))
    before = sorted(p.name for p in registry.path.iterdir())
    monkeypatch.chdir(registry.path.parent)
    result = cli(*args[:2], "--patches", registry.path, *args[2:])
    assert result.code == 2, (result.code, result.err)
    assert ("is not a patch id" in result.err or "is not a patch folder" in result.err), result.err
    assert "internal error" not in result.err and "File name too long" not in result.err
    assert LONG_ID not in result.err  # named, but cut short
    assert sorted(p.name for p in registry.path.iterdir()) == before


def test_a_manifest_with_an_id_over_the_bound_names_its_line(registry: Registry, engine: Path) -> None:
    registry.add("b" * 200, git_diff(registry.path.parent, {"a.py": b"a = 1\n"}, {"a.py": b"a = 2\n"}))
    result = cli("status", "--all", "--root", engine, "--patches", registry.path)
    assert result.code == 2, result.err
    assert f"{registry.path / ('b' * 200) / 'manifest.toml'}:1:" in result.err
    assert "200 characters long" in result.err and "at most 128" in result.err
