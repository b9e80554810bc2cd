"""workspace: the journaled transaction, recovery, state files, the lock and the fault hook, tested directly."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from patchkit.errors import (
    ExitCode,
    LockTimeoutError,
    RecoveryFailedError,
    RootNotWritableError,
    UnsafePathError,
    WriteFailedError,
)
from patchkit.input.tree import Snapshot
from patchkit.plan.plan import FileChange
from patchkit.workspace.disk import Disk
from patchkit.workspace.names import JOURNAL_NAME, LOCK_NAME, TEMP_NAME
from patchkit.workspace.recovery import Direction, Recovery
from tests.conftest import after_the_landing_check, at_an_lstat
from tests.rooted import commit_changes, locked, read_snapshot, recover
from tests.safety_helpers import Image, image, report_one_free_block

STATE = ".patchkit"


def make_tree(root: Path) -> Image:
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "pkg" / "a.py").write_bytes(b"a = 1\r\n\xff\xfe\n")
    (root / "pkg" / "a.py").chmod(0o640)
    (root / "pkg" / "sub" / "b.sh").write_bytes(b"#!/bin/sh\n")
    (root / "pkg" / "sub" / "b.sh").chmod(0o755)
    (root / "pkg" / "gone").mkdir()
    (root / "pkg" / "gone" / "c.py").write_bytes(b"c = 3\n")
    (root / "pkg" / "gone").chmod(0o700)
    return image(root)


def changes_for(root: Path) -> list[FileChange]:
    """Modify, chmod, delete (emptying a folder) and create (in new folders)."""

    def change(rel: str, data: bytes | None, mode: int | None) -> FileChange:
        return FileChange(rel, read_snapshot(root, rel), Snapshot(rel, data, mode))

    return [
        change("pkg/a.py", b"a = 2\r\n\xff\xfe\n", 0o640),
        change("pkg/sub/b.sh", b"#!/bin/sh\n", 0o644),
        change("pkg/gone/c.py", None, None),
        change("pkg/new/deep/d.py", b"d = 4\n", 0o644),
    ]


def in_child(root: Path, changes: Sequence[FileChange], env: Mapping[str, str],
             state_files: Mapping[str, bytes | None] | None = None) -> int:
    """commit_changes in a forked child with `env`; its exit status (negative: killed by that signal)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 0
        try:
            os.environ.update(env)
            commit_changes(root, changes, state_files=state_files or {}, label="apply of unit")
        except BaseException:
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


ENTRY_PATHS = ("pkg/a.py", "pkg/sub/b.sh", "pkg/gone/c.py", "pkg/new/deep/d.py")  # changes_for's paths


def journal(root: Path) -> Path:
    return root / STATE / JOURNAL_NAME


def test_commit_writes_every_change_with_modes_and_leaves_no_trace(tmp_path: Path) -> None:
    make_tree(tmp_path)
    commit_changes(tmp_path, changes_for(tmp_path))
    after = image(tmp_path)
    assert after["pkg/a.py"] == ("file", b"a = 2\r\n\xff\xfe\n", 0o640)
    assert after["pkg/sub/b.sh"][2] == 0o644
    assert "pkg/gone" not in after and "pkg/gone/c.py" not in after  # like git apply: emptied folder removed
    assert after["pkg/new/deep/d.py"][1] == b"d = 4\n"
    assert not journal(tmp_path).exists()
    assert not [p for p in tmp_path.rglob("*") if TEMP_NAME.fullmatch(p.name)]
    assert (tmp_path / STATE / ".gitignore").read_bytes() == b"*\n"


def test_a_commit_that_also_writes_at_the_top_of_the_root_leaves_no_kept_link_below_it(tmp_path: Path) -> None:
    """A file at the top of the root written first, then files in folders: every temp file and kept link is
    dropped from the folder it was made in (the top one is held too, and must not stand in for the others).

    Kills patchkit/workspace/recovery.py:141:core/NumberReplacer#9 (finish looked each entry's folder up as
    `parts[:-0]`, the root: the kept links of pkg/a.py and pkg/sub/b.sh were left behind)."""
    make_tree(tmp_path)
    (tmp_path / "top.py").write_bytes(b"top = 1\n")
    top = FileChange("top.py", read_snapshot(tmp_path, "top.py"), Snapshot("top.py", b"top = 2\n", 0o644))
    commit_changes(tmp_path, [top, *changes_for(tmp_path)])
    after = image(tmp_path)
    assert after["top.py"] == ("file", b"top = 2\n", 0o644)
    assert after["pkg/a.py"] == ("file", b"a = 2\r\n\xff\xfe\n", 0o640)
    assert not journal(tmp_path).exists()
    assert not [p for p in tmp_path.rglob("*") if TEMP_NAME.fullmatch(p.name)]


def test_a_file_that_vanishes_as_the_write_stage_looks_at_it_is_named_and_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Someone (not holding the lock) deletes pkg/a.py right after the plan: the write stage finds it gone when
    it builds the journal, and fails naming the file, nothing written.

    Kills patchkit/workspace/commit.py:219:core/ReplaceBinaryOperator_Div_Pow#2 (`shown ** parts[-1]`: the error
    path itself crashed with a TypeError)."""
    import patchkit.workspace.commit as commit

    start = make_tree(tmp_path)
    changes = changes_for(tmp_path)
    real = commit.lstat_at
    gone: list[str] = []

    def lstat_at(fd: int, name: str) -> os.stat_result | None:
        if name == "a.py" and not gone:
            gone.append(name)
            (tmp_path / "pkg" / "a.py").unlink()
        return real(fd, name)

    monkeypatch.setattr(commit, "lstat_at", lstat_at)
    with pytest.raises(WriteFailedError, match=r"pkg/a\.py vanished while the plan was being made") as caught:
        commit_changes(tmp_path, changes)
    assert caught.value.where == str(tmp_path / "pkg" / "a.py")
    assert image(tmp_path) == {k: v for k, v in start.items() if k != "pkg/a.py"}
    assert not journal(tmp_path).exists()


def test_a_filesystem_that_returns_short_reads_still_gets_each_write_checked_and_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pread returning at most 3 bytes a call (as a network or FUSE filesystem may): the commit reads each file
    back to its end and finds what it wrote, so it succeeds.

    Kills patchkit/workspace/commit.py:581:core/ReplaceBinaryOperator_Add_BitAnd#8 and _Add_RShift#8 (the
    read-back loop stopped after the first short read and reported the content as not written)."""
    real = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, size, offset: real(fd, min(size, 3), offset))
    make_tree(tmp_path)
    commit_changes(tmp_path, changes_for(tmp_path))
    after = image(tmp_path)
    assert after["pkg/a.py"] == ("file", b"a = 2\r\n\xff\xfe\n", 0o640)
    assert after["pkg/new/deep/d.py"][1] == b"d = 4\n"
    assert not journal(tmp_path).exists()


@pytest.mark.parametrize(("data", "mode"), [(b"someone else\n", 0o640), (b"0\n", 0o640),
                                           (b"a = 1\r\n\xff\xfe\n", 0o600), (b"a = 1\r\n\xff\xfe\n", 0o644)],
                         ids=["bytes-after", "bytes-before", "mode-below", "mode-above"])
def test_commit_refuses_a_tree_that_changed_since_the_plan(tmp_path: Path, data: bytes, mode: int) -> None:
    """Whatever the change (bytes or mode, sorting before or after the planned ones), the commit refuses it.

    The bytes sorting before and the lower mode kill patchkit/workspace/commit.py:189:core/
    ReplaceComparisonOperator_NotEq_Gt#0 (`now > change.before`, the full run of 2026-12-06: snapshots are tuples,
    so only a change that sorted after the plan was seen)."""
    make_tree(tmp_path)
    changes = changes_for(tmp_path)
    (tmp_path / "pkg" / "a.py").write_bytes(data)
    (tmp_path / "pkg" / "a.py").chmod(mode)
    before = image(tmp_path)
    with pytest.raises(WriteFailedError, match="changed while the plan was being made"):
        commit_changes(tmp_path, changes)
    assert image(tmp_path) == before


@pytest.mark.parametrize("links", [True, False], ids=["hard-links", "no-hard-links"])
def test_every_kill_point_of_a_commit_is_recovered_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, links: bool
) -> None:
    """Kill the writer after each operation in turn; recover() must give back the original or the result. Also
    on a filesystem that refuses hard links (EPERM, as vfat and some FUSE filesystems do): no original is kept
    by a link, the rollback writes the journal's copy instead, and the check after a replace has no kept link
    to look at.

    Without links, kills patchkit/workspace/commit.py:748:core/ReplaceOrWithAnd#8 (`kept is None and ...`: the
    check after the replace read the size of a kept link that is not there, an internal error; the full run of
    2026-12-06 on the fix's code): no test had written without hard links."""
    if not links:
        def refuse(*args: object, **kwargs: object) -> None:
            raise OSError(errno.EPERM, os.strerror(errno.EPERM))

        monkeypatch.setattr(os, "link", refuse)
    original_root = tmp_path / "orig"
    original_root.mkdir()
    original = make_tree(original_root)
    done_root = tmp_path / "done"
    done_root.mkdir()
    make_tree(done_root)
    commit_changes(done_root, changes_for(done_root), state_files={"applied/unit.json": b"{}"})
    done = image(done_root)
    outcomes: dict[str, int] = {"back": 0, "forward": 0, "untouched": 0}
    for n in range(500):
        root = tmp_path / f"run{n}"
        root.mkdir()
        make_tree(root)
        status = in_child(root, changes_for(root), {"PATCHKIT_FAULT_AFTER": str(n)}, {"applied/unit.json": b"{}"})
        if status == 0:
            break
        assert status == -signal.SIGKILL
        killed = image(root)
        # The paths the kill left changed: what a rollback rewrites and counts (`rolled back N files`); a file
        # whose original was linked to its kept name but not yet replaced is not one of them.
        changed = sum(killed.get(p) != original.get(p) for p in ENTRY_PATHS)
        changed += (root / STATE / "applied" / "unit.json").exists()
        report = recover(root)
        now = image(root)
        if report is None:
            outcomes["untouched"] += 1  # killed before the journal existed, or after it was dropped
            assert now in (original, done), n
        elif report.direction is Direction.BACK:
            outcomes["back"] += 1
            assert now == original, n
            assert report.files == changed, n
            assert not (root / STATE / "applied" / "unit.json").exists()
        else:
            outcomes["forward"] += 1
            assert now == done, n
            assert (root / STATE / "applied" / "unit.json").read_bytes() == b"{}"
        assert not journal(root).exists()
        assert not [p for p in root.rglob("*") if TEMP_NAME.fullmatch(p.name) and p.parent.name != STATE]
    else:
        pytest.fail("the writer never finished")
    assert outcomes["back"] > 20 and outcomes["forward"] >= 1 and outcomes["untouched"] >= 1, outcomes


def test_a_rollback_remakes_a_folder_removed_after_the_kill_with_its_journaled_mode(tmp_path: Path) -> None:
    """Killed mid-commit, the journal written; then pkg/gone (mode 0700, its c.py to be deleted) is removed
    whole, kept link and all, by someone else. recover() rolls back: it makes pkg/gone again with the mode the
    journal recorded for it (0700, not the 0755 of a new folder nor wider) and writes c.py back from the
    journal's copy: the original tree exactly.

    Kills patchkit/workspace/folders.py:85:core/ReplaceBinaryOperator_Add_BitXor#0 (the mode looked up for the
    second folder of the path was the first's: `folders[: i ^ 1]`) and :87:core/ReplaceBinaryOperator_BitAnd_BitOr#0
    (`mode | 0o777`: the folder came back world-writable)."""
    import shutil

    original_root = tmp_path / "orig"
    original_root.mkdir()
    original = make_tree(original_root)
    for n in range(500):
        root = tmp_path / f"run{n}"
        root.mkdir()
        make_tree(root)
        status = in_child(root, changes_for(root), {"PATCHKIT_FAULT_AFTER": str(n)})
        assert status in (0, -signal.SIGKILL), status
        if status == -signal.SIGKILL and journal(root).exists() and (root / "pkg" / "gone").is_dir():
            break
    else:
        pytest.fail("no kill point left a journal with pkg/gone in place")
    shutil.rmtree(root / "pkg" / "gone")
    report = recover(root)
    assert report is not None and report.direction is Direction.BACK, report
    assert image(root) == original
    assert not journal(root).exists()


def test_a_state_file_that_would_not_change_is_left_alone(tmp_path: Path) -> None:
    """A second commit that hands over a state file with the bytes it already has: the tree's change is written,
    the record is not (same inode: never replaced, not in the journal).

    Kills patchkit/workspace/commit.py:172:core/ReplaceComparisonOperator_Eq_Is#0 (`(data, mode) is (...)`:
    never true, so every unchanged state file was rewritten)."""
    make_tree(tmp_path)
    commit_changes(tmp_path, changes_for(tmp_path), state_files={"applied/unit.json": b"{}"})
    record = tmp_path / STATE / "applied" / "unit.json"
    before = record.stat()
    change = FileChange("pkg/a.py", read_snapshot(tmp_path, "pkg/a.py"), Snapshot("pkg/a.py", b"a = 3\n", 0o640))
    commit_changes(tmp_path, [change], state_files={"applied/unit.json": b"{}"})
    assert (tmp_path / "pkg" / "a.py").read_bytes() == b"a = 3\n"
    after = record.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_a_state_file_left_alone_does_not_stop_the_ones_after_it(tmp_path: Path) -> None:
    """Two state files, the first with the bytes it has already (left alone), the second new: the second is
    written all the same.

    Kills patchkit/workspace/commit.py:204:core/ReplaceContinueWithBreak#0 (the full run of 2026-12-06), under which
    the first unchanged state file ended the loop and the records after it were never written."""
    make_tree(tmp_path)
    commit_changes(tmp_path, changes_for(tmp_path), state_files={"applied/a.json": b"{}"})
    change = FileChange("pkg/a.py", read_snapshot(tmp_path, "pkg/a.py"), Snapshot("pkg/a.py", b"a = 3\n", 0o640))
    commit_changes(tmp_path, [change], state_files={"applied/a.json": b"{}", "applied/b.json": b'{"b": 1}'})
    assert (tmp_path / STATE / "applied" / "b.json").read_bytes() == b'{"b": 1}'
    assert (tmp_path / STATE / "applied" / "a.json").read_bytes() == b"{}"


@pytest.mark.parametrize("gone", ["the-file", "its-folder"])
def test_a_stale_cache_that_vanished_since_the_plan_is_named(tmp_path: Path, gone: str) -> None:
    """A stale bytecode cache the plan removes unread (its bytes never read) is gone by the commit, or its whole
    __pycache__ folder is: the commit stops before anything is written, naming the cache's full path.

    The folder case kills patchkit/workspace/commit.py:254's mutants of `shown / parts[-1]` (NumberReplacer#16,
    #17: another part; `/` into `+`, `&`, ...: a TypeError, the full run of 2026-12-06), a line no test ran."""
    make_tree(tmp_path)
    rel = "pkg/__pycache__/a.cpython-311.pyc"
    cache = tmp_path / rel
    cache.parent.mkdir()
    cache.write_bytes(b"stale")
    change = FileChange(rel, Snapshot(rel, None, 0o644), Snapshot(rel, None, None))  # removed unread
    start = image(tmp_path)
    cache.unlink()
    if gone == "its-folder":
        cache.parent.rmdir()
    before = image(tmp_path)
    with pytest.raises(WriteFailedError, match=r"a\.cpython-311\.pyc vanished while the plan") as refused:
        commit_changes(tmp_path, [change, *changes_for(tmp_path)])
    assert refused.value.where == str(cache)
    assert image(tmp_path) == before != start


def test_a_filesystem_without_room_is_refused_before_anything_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """statvfs says one block is free: the commit is refused before a byte is written (the journal either), naming
    what it needs.

    Kills patchkit/workspace/commit.py:276:core/ReplaceComparisonOperator_Gt_Eq#1 (`size + margin == free`: only
    an exact fit was refused)."""
    start = make_tree(tmp_path)
    changes = changes_for(tmp_path)
    report_one_free_block(monkeypatch)
    with pytest.raises(WriteFailedError, match="not enough room on the filesystem"):
        commit_changes(tmp_path, changes)
    assert image(tmp_path) == start
    assert not journal(tmp_path).exists()


@pytest.mark.parametrize(("original", "needed"), [(3584, 12288), (3585, 16384)])
def test_the_journals_room_is_its_originals_4_kib_and_512_bytes_a_file_in_whole_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, original: int, needed: int
) -> None:
    """The room a commit asks for its journal: the originals' bytes, 4 KiB and 512 bytes a file, in whole 4 KiB
    blocks; here one file of `original` bytes rewritten to 10 (one block): 3584 + 4096 + 512 is exactly two
    blocks, a byte more is three. The refusal on a filesystem with one free block says the total.

    Kills patchkit/workspace/commit.py:287's NumberReplacer#24 to #27 (4097, 4095, 513, 511; the full run of
    2026-12-06): each moves one of these two totals by a block."""
    (tmp_path / "f.py").write_bytes(b"x" * original)
    change = FileChange("f.py", read_snapshot(tmp_path, "f.py"), Snapshot("f.py", b"y = 1\n...\n", 0o644))
    report_one_free_block(monkeypatch)
    with pytest.raises(WriteFailedError, match=f"this write needs {needed} bytes and 2 inodes"):
        commit_changes(tmp_path, [change])


def test_the_room_of_a_state_file_after_a_deletion_is_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A commit that deletes a file (no room needed for it) and writes a record: the record's block and inode
    are counted all the same, after the deletion: the journal (100 + 4096 + 2 x 512 bytes: two blocks, an inode),
    the record (a block, an inode) and its new folder `applied` (a block, an inode): 16384 bytes and 3 inodes.

    Kills patchkit/workspace/commit.py:304:core/ReplaceContinueWithBreak#1 (the full run of 2026-12-06), under which
    the first deletion ended the count and the state files after it needed no room."""
    (tmp_path / "gone.py").write_bytes(b"x" * 100)
    change = FileChange("gone.py", read_snapshot(tmp_path, "gone.py"), Snapshot("gone.py", None, None))
    report_one_free_block(monkeypatch)
    with pytest.raises(WriteFailedError, match="this write needs 16384 bytes and 3 inodes"):
        commit_changes(tmp_path, [change], state_files={"applied/x.json": b'{"x": 1}'})


@pytest.mark.parametrize(("folders", "needed"), [(0, 12288), (1, 16384)])
def test_a_new_folder_is_counted_a_block_and_an_inode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, folders: int, needed: int
) -> None:
    """A created file of one block: with its folder there it needs the journal's two blocks (4096 + 512 bytes) and
    its own, and 2 inodes; one new folder down, a block and an inode more.

    Kills patchkit/workspace/commit.py:307:core/ReplaceBinaryOperator_Add_BitOr#3 (`blocks | missing * 4096`, the
    full run of 2026-12-06): the same total for no folder, a block less for one."""
    rel = "/".join(["new"] * folders + ["c.py"])
    change = FileChange(rel, Snapshot(rel, None, None), Snapshot(rel, b"c = 1\n", 0o644))
    report_one_free_block(monkeypatch)
    with pytest.raises(WriteFailedError, match=f"this write needs {needed} bytes and {2 + folders} inodes"):
        commit_changes(tmp_path, [change])


def test_root_may_use_the_blocks_and_inodes_kept_for_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As root the room check counts the filesystem's free blocks and inodes, those kept for root included
    (f_bfree, f_ffree), not only those any user may take (f_bavail, f_favail): with plenty of the first and none
    of the second, root's commit lands.

    Kills patchkit/workspace/commit.py:310's `os.geteuid() == 1`, `== -1` and `> 0` (the full run of 2026-12-06),
    under which root was held to a user's share."""
    if os.geteuid() != 0:
        pytest.skip("as root only: a user's share is f_bavail and f_favail, which every other test gives room in")
    start = make_tree(tmp_path)
    real = os.fstatvfs

    def kept_for_root(fd: int) -> os.statvfs_result:
        v = real(fd)
        return os.statvfs_result((v.f_bsize, v.f_frsize, v.f_blocks, 1 << 20, 0, 1 << 20, 1 << 20, 0, v.f_flag,
                                  v.f_namemax))

    monkeypatch.setattr(os, "fstatvfs", kept_for_root)
    commit_changes(tmp_path, changes_for(tmp_path))
    assert image(tmp_path) != start


def test_the_journals_512_bytes_are_counted_for_each_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two files rewritten, their originals 3,500 bytes in all: the journal's room is 3500 + 4096 + 2 x 512 =
    8,620 bytes, three blocks (with 512 bytes for the two files together, two), and each new file one: 20,480
    bytes and 3 inodes.

    Kills patchkit/workspace/commit.py:287:core/ReplaceBinaryOperator_Mul_FloorDiv#3 (`512 // len(entries)`, the
    same as 512 * 1 for the one-file commits of the other tests; the full run of 2026-12-06)."""
    (tmp_path / "a.py").write_bytes(b"a" * 1750)
    (tmp_path / "b.py").write_bytes(b"b" * 1750)
    changes = [FileChange(name, read_snapshot(tmp_path, name), Snapshot(name, b"new\n", 0o644))
               for name in ("a.py", "b.py")]
    report_one_free_block(monkeypatch)
    with pytest.raises(WriteFailedError, match="this write needs 20480 bytes and 3 inodes"):
        commit_changes(tmp_path, changes)


def test_the_free_space_check_keeps_a_margin_of_one_mebibyte(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A small commit on a filesystem with exactly 1 MiB free is refused (the margin is not room to write in),
    naming the margin; with 2 MiB free the same commit lands.

    Kills patchkit/workspace/commit.py's `SPACE_MARGIN = 1 << 20` -> `1 // 20` (cosmic-ray
    core/ReplaceBinaryOperator_LShift_FloorDiv, seed 5), under which a filesystem one write from full was used."""
    start = make_tree(tmp_path)
    changes = changes_for(tmp_path)
    real = os.fstatvfs
    free_bytes = [1 << 20]

    def tight(fd: int) -> os.statvfs_result:
        v = real(fd)  # 1-byte fragments, so the free bytes are exactly the free blocks
        return os.statvfs_result((v.f_bsize, 1, v.f_blocks, free_bytes[0], free_bytes[0], v.f_files, v.f_ffree,
                                  v.f_favail, v.f_flag, v.f_namemax))

    monkeypatch.setattr(os, "fstatvfs", tight)
    with pytest.raises(WriteFailedError, match="plus a margin of 1048576 bytes"):
        commit_changes(tmp_path, changes)
    assert image(tmp_path) == start
    free_bytes[0] = 2 << 20
    commit_changes(tmp_path, changes)
    assert image(tmp_path) != start


def test_the_inode_check_keeps_a_margin_of_16_inodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The commit needs N inodes (its refusal on a filesystem with none free says how many): with N + 15 free it
    is refused, naming the margin of 16; with N + 16 free it lands.

    Kills patchkit/workspace/commit.py:85 `INODE_MARGIN = 16` -> 17 and -> 15 (cosmic-ray core/NumberReplacer#4
    and #5, the full run of 2026-12-06): no test had counted the margin."""
    start = make_tree(tmp_path)
    changes = changes_for(tmp_path)
    real = os.fstatvfs
    free_inodes = [0]

    def counted(fd: int) -> os.statvfs_result:
        v = real(fd)
        return os.statvfs_result((v.f_bsize, v.f_frsize, v.f_blocks, v.f_bfree, v.f_bavail, 1 << 20,
                                  free_inodes[0], free_inodes[0], v.f_flag, v.f_namemax))

    monkeypatch.setattr(os, "fstatvfs", counted)
    with pytest.raises(WriteFailedError) as refused:
        commit_changes(tmp_path, changes)
    needed = int(str(refused.value).split(" bytes and ", 1)[1].split(" inodes", 1)[0])
    assert needed >= 4  # the journal, two new folders, a new file
    free_inodes[0] = needed + 15
    with pytest.raises(WriteFailedError, match=f"a margin of 1048576 bytes and 16 inodes; .* and {needed + 15} inodes"):
        commit_changes(tmp_path, changes)
    assert image(tmp_path) == start
    free_inodes[0] = needed + 16
    commit_changes(tmp_path, changes)
    assert image(tmp_path) != start


def test_the_inode_margin_is_added_to_a_write_of_16_to_31_inodes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """20 files created beside each other need 21 inodes (the journal's too), a count with the 16 bit set: with
    21 + 15 free the commit is refused, with 21 + 16 it lands.

    Kills patchkit/workspace/commit.py:316's `inodes | INODE_MARGIN` and `inodes ^ INODE_MARGIN` (the same as +
    below 16 inodes, where the other tests stay; the full run of 2026-12-06)."""
    (tmp_path / "pkg").mkdir()
    changes = [FileChange(f"pkg/f{n}.py", Snapshot(f"pkg/f{n}.py", None, None), Snapshot(f"pkg/f{n}.py", b"x\n", 0o644))
               for n in range(20)]
    real = os.fstatvfs
    free = [0]

    def counted(fd: int) -> os.statvfs_result:
        v = real(fd)
        return os.statvfs_result((v.f_bsize, v.f_frsize, v.f_blocks, v.f_bfree, v.f_bavail, 1 << 20, free[0],
                                  free[0], v.f_flag, v.f_namemax))

    monkeypatch.setattr(os, "fstatvfs", counted)
    free[0] = 21 + 15
    with pytest.raises(WriteFailedError, match=r"this write needs [0-9]+ bytes and 21 inodes"):
        commit_changes(tmp_path, changes)
    free[0] = 21 + 16
    commit_changes(tmp_path, changes)
    assert len(list((tmp_path / "pkg").iterdir())) == 20


def test_a_filesystem_without_an_inode_limit_is_not_held_to_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filesystem that counts no inodes (btrfs: f_files 0, f_ffree 0) has no inode limit: the commit lands.

    Kills patchkit/workspace/commit.py:316's `vfs.f_files > -1` and `>= 0` (NumberReplacer#45, Gt_GtE#2, the full
    run of 2026-12-06), under which every commit on such a filesystem was refused for want of inodes."""
    start = make_tree(tmp_path)
    real = os.fstatvfs

    def btrfs(fd: int) -> os.statvfs_result:
        v = real(fd)
        return os.statvfs_result((v.f_bsize, v.f_frsize, v.f_blocks, v.f_bfree, v.f_bavail, 0, 0, 0, v.f_flag,
                                  v.f_namemax))

    monkeypatch.setattr(os, "fstatvfs", btrfs)
    commit_changes(tmp_path, changes_for(tmp_path))
    assert image(tmp_path) != start


def test_a_transaction_in_300_folders_holds_256_folder_descriptors_and_walks_to_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit that writes one file in each of 300 folders holds a descriptor for the first 256 folders it writes
    in to its end (HELD_FOLDERS_MAX: a rollback goes through them), no more, and walks to the other 44 by name;
    every file lands.

    Kills patchkit/workspace/commit.py:94 `HELD_FOLDERS_MAX = 256` -> 257 (cosmic-ray core/NumberReplacer#8, the
    full run of 2026-12-06): no transaction of a test had written in more than 256 folders."""
    from patchkit.workspace import commit as commit_module

    for index in range(300):
        (tmp_path / f"d{index:03}").mkdir()
        (tmp_path / f"d{index:03}" / "f.py").write_bytes(b"x = 1\n")
    changes = [FileChange(f"d{index:03}/f.py", read_snapshot(tmp_path, f"d{index:03}/f.py"),
                          Snapshot(f"d{index:03}/f.py", b"x = 2\n", 0o644)) for index in range(300)]
    seen: list[int] = []
    real = commit_module._complete_or_keep_journal

    def counting(*args: object) -> None:
        held = args[-1]
        assert isinstance(held, dict)
        seen.append(len(held))
        real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(commit_module, "_complete_or_keep_journal", counting)
    commit_changes(tmp_path, changes)
    assert seen == [256]
    assert {(tmp_path / f"d{index:03}" / "f.py").read_bytes() for index in range(300)} == {b"x = 2\n"}


def test_the_space_margin_is_added_to_a_write_of_over_a_mebibyte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit that needs more than 1 MiB (here a file of 1 MiB and a byte: 257 blocks, the 2**20 bit of the
    total set) and a filesystem with that plus the 1 MiB margin, less a byte, free: refused; with exactly that
    free: it lands.

    Kills patchkit/workspace/commit.py:315's `size | SPACE_MARGIN`, `size ^ SPACE_MARGIN` (the same as + below
    1 MiB, where every other test stays) and `>= free` (the full run of 2026-12-06)."""
    (tmp_path / "big.bin").write_bytes(b"")
    change = FileChange("big.bin", read_snapshot(tmp_path, "big.bin"), Snapshot("big.bin", b"x" * (1 << 20 | 1), 0o644))
    real = os.fstatvfs
    free = [4096]

    def counted(fd: int) -> os.statvfs_result:
        v = real(fd)  # 1-byte fragments, so the free bytes are exactly the free blocks
        return os.statvfs_result((v.f_bsize, 1, v.f_blocks, free[0], free[0], v.f_files, v.f_ffree, v.f_favail,
                                  v.f_flag, v.f_namemax))

    monkeypatch.setattr(os, "fstatvfs", counted)
    with pytest.raises(WriteFailedError) as refused:
        commit_changes(tmp_path, [change])
    needed = int(str(refused.value).split("this write needs ", 1)[1].split(" bytes", 1)[0])
    assert needed & (1 << 20), needed
    free[0] = needed + (1 << 20) - 1
    with pytest.raises(WriteFailedError, match="not enough room"):
        commit_changes(tmp_path, [change])
    free[0] = needed + (1 << 20)
    commit_changes(tmp_path, [change])
    assert (tmp_path / "big.bin").stat().st_size == 1 << 20 | 1


def test_a_fifo_swapped_in_before_the_read_back_never_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Between the landed file's lstat and its read-back, another user swaps a FIFO in at its name: the read-back
    opens it without blocking, sees it is not the file written, and the commit fails (rolled back) at once.

    Kills patchkit/workspace/commit.py's read-back `os.O_NONBLOCK | os.O_CLOEXEC` -> `os.O_NONBLOCK //
    os.O_CLOEXEC` (cosmic-ray core/ReplaceBinaryOperator_BitOr_FloorDiv, seed 5: both flags dropped), under which
    opening the FIFO for reading waited for a writer forever."""
    make_tree(tmp_path)
    target = tmp_path / "pkg" / "a.py"

    def swap_in_a_fifo() -> None:
        os.mkfifo(tmp_path / "fifo", 0o640)  # made first, so it cannot take the written file's inode number
        os.rename(tmp_path / "fifo", target)

    swapped = after_the_landing_check(monkeypatch, "a.py", swap_in_a_fifo)

    def hung(signum: int, frame: object) -> None:
        raise TimeoutError("the read-back blocked on the FIFO")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(10)
    try:
        with pytest.raises(WriteFailedError, match="not the one patchkit just wrote"):
            commit_changes(tmp_path, changes_for(tmp_path))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert swapped


@pytest.mark.parametrize("swapped_in", ["fifo", "link"])
def test_what_is_swapped_in_before_the_original_is_opened_for_its_attributes_is_never_followed_or_waited_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, swapped_in: str
) -> None:
    """Right after the judged-bytes check, before the write opens the original to copy its attributes to the new
    file, another process puts a FIFO, or a link to a file elsewhere, at its name: the open neither blocks on the
    FIFO nor follows the link (it refuses it: "Too many levels of symbolic links"); the commit fails, the tree
    restored, the link's target untouched.

    Kills patchkit/workspace/commit.py:579's mutants of that open's flags that drop O_NONBLOCK (the commit hung on
    the FIFO) or O_NOFOLLOW (the link followed) (BitAnd#17, #18, the full run of 2026-12-06)."""
    from patchkit.workspace import commit as commit_module

    make_tree(tmp_path)
    target = tmp_path / "pkg" / "a.py"
    elsewhere = tmp_path.parent / f"{tmp_path.name}-elsewhere"
    elsewhere.write_bytes(b"not in the tree\n")
    real = commit_module._judged_bytes
    swapped: list[bool] = []

    def judged_then_swap(parent: int, entry: object) -> int | None:
        ctime = real(parent, entry)  # type: ignore[arg-type]
        if not swapped and getattr(entry, "path", "") == "pkg/a.py":
            swapped.append(True)
            if swapped_in == "fifo":
                os.mkfifo(tmp_path / "fifo", 0o640)
                os.rename(tmp_path / "fifo", target)
            else:
                target.unlink()
                target.symlink_to(elsewhere)
        return ctime

    class Hung(BaseException):  # not an OSError (TimeoutError is one), which the commit turns into a failed write
        pass

    def hung(signum: int, frame: object) -> None:
        raise Hung("the open blocked on the FIFO")

    monkeypatch.setattr(commit_module, "_judged_bytes", judged_then_swap)
    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(10)
    try:
        with pytest.raises(WriteFailedError) as refused:
            commit_changes(tmp_path, changes_for(tmp_path))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert swapped
    if swapped_in == "link":
        assert "Too many levels of symbolic links" in str(refused.value), refused.value
    assert elsewhere.read_bytes() == b"not in the tree\n"


@pytest.mark.parametrize("inode", ["lower", "higher"])
def test_another_file_swapped_in_after_the_write_is_named_not_the_one_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inode: str
) -> None:
    """Between the write and its check, another file (of a lower, or a higher, inode number than the file written;
    another size) is renamed in at a written file's name: the check says the file at its name is not the one
    patchkit just wrote (not that its size is wrong), the commit fails.

    Kills patchkit/workspace/commit.py:653's comparisons of the file's identity (`>`, `<`, `is`, `and`), the full
    run of 2026-12-06: the later read-back caught a swapped file of the same size only."""
    pool = tmp_path.parent / f"{tmp_path.name}-theirs"
    pool.mkdir()
    early = [pool / f"early-{n}" for n in range(20)]
    for path in early:
        path.write_bytes(b"theirs, a size of its own\n")
    make_tree(tmp_path)
    target = tmp_path / "pkg" / "a.py"

    def swap(_folder: int, _name: str) -> None:
        written = target.stat().st_ino
        late = [pool / f"late-{n}" for n in range(20)]
        for path in late:
            path.write_bytes(b"theirs, a size of its own\n")
        side = [p for p in early + late if (p.stat().st_ino < written) == (inode == "lower")]
        if not side:
            pytest.skip(f"no file of a {inode} inode number than the written one here")
        os.rename(side[0], target)

    swapped = at_an_lstat(monkeypatch, "_landed_here", "a.py", swap, before=True)
    with pytest.raises(WriteFailedError, match="the file at its name is not the one patchkit just wrote"):
        commit_changes(tmp_path, changes_for(tmp_path))
    assert swapped


@pytest.mark.parametrize("change", ["mode-below", "mode-above", "shorter", "longer"])
def test_a_written_file_changed_in_place_before_its_check_is_named_by_its_size_or_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    """Between the write and its check, the very file written (the same inode) gets another mode (below or above
    the one written) or size (shorter or longer): the check says its size or mode is not what patchkit wrote, and
    the commit fails.

    Kills patchkit/workspace/commit.py:656's comparisons of the mode and the size (`<`, `>`, `and`; the full run
    of 2026-12-06): a mode changed one way, or alone, was let through; a size changed one way was caught by the
    read-back only, named by its content."""
    make_tree(tmp_path)
    target = tmp_path / "pkg" / "a.py"  # written 0o640, 10 bytes

    def change_it(_folder: int, _name: str) -> None:
        if change.startswith("mode"):
            target.chmod(0o600 if change == "mode-below" else 0o644)
        else:
            with open(target, "ab") as handle:
                if change == "shorter":
                    handle.truncate(5)
                else:
                    handle.write(b"+")

    changed = at_an_lstat(monkeypatch, "_landed_here", "a.py", change_it, before=True)
    with pytest.raises(WriteFailedError, match="its size or mode is not what patchkit just wrote"):
        commit_changes(tmp_path, changes_for(tmp_path))
    assert changed


def test_a_link_swapped_in_right_before_the_read_back_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Right after the check's lstat (which saw the file written), a link to a copy of it is put at its name: the
    read-back's open does not follow it ("it cannot be read back (Too many levels of symbolic links)"), the commit
    fails.

    Kills patchkit/workspace/commit.py:660:core/ReplaceBinaryOperator_BitOr_BitAnd#24 (the read-back's
    O_NOFOLLOW dropped, the full run of 2026-12-06): the link was followed to the copy, caught later by its
    identity and named as another file."""
    make_tree(tmp_path)
    target = tmp_path / "pkg" / "a.py"
    copy = tmp_path.parent / f"{tmp_path.name}-copy"

    def swap_in_a_link() -> None:
        copy.write_bytes(target.read_bytes())
        target.unlink()
        target.symlink_to(copy)

    swapped = after_the_landing_check(monkeypatch, "a.py", swap_in_a_link)

    with pytest.raises(WriteFailedError, match=r"it cannot be read back \(Too many levels of symbolic links\)"):
        commit_changes(tmp_path, changes_for(tmp_path))
    assert swapped


def test_a_link_to_the_original_swapped_in_before_the_judged_check_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Just before the write stage checks that a file still holds the judged bytes, its owner puts a symbolic link
    at its name, to a hard link of the very original (same inode, same bytes): the check does not follow it and
    the commit is refused as a file changed by another writer (it was once reported as an I/O failure, with a
    hint about disk space), the tree holding the original bytes. (The rollback renames the kept original back
    over the link, as for any changed file: the bytes at the name are the ones the user had before.)

    Kills commit.py's `_judged_bytes` `os.O_RDONLY | os.O_NOFOLLOW` -> `os.O_RDONLY & os.O_NOFOLLOW` (cosmic-ray
    core/ReplaceBinaryOperator_BitOr_BitAnd, seed 5: O_NOFOLLOW dropped): the link is followed to the original's
    inode and vouched for, and only a later open refuses it, as an I/O failure."""
    from patchkit.workspace import commit as commit_module

    make_tree(tmp_path)
    target = tmp_path / "pkg" / "a.py"
    real = commit_module._judged_bytes
    swapped: list[bool] = []

    def swap_then_check(parent: int, entry: object) -> int:
        if target.exists() and not target.is_symlink() and not swapped:
            swapped.append(True)
            os.link(target, tmp_path / "hard")  # now: before the plan's check, a second link is refused
            os.symlink(tmp_path / "hard", tmp_path / "link")
            os.rename(tmp_path / "link", target)
        return real(parent, entry)  # type: ignore[arg-type]

    monkeypatch.setattr(commit_module, "_judged_bytes", swap_then_check)
    with pytest.raises(WriteFailedError, match="changed while patchkit was writing it"):
        commit_changes(tmp_path, changes_for(tmp_path))
    assert swapped and target.read_bytes() == b"a = 1\r\n\xff\xfe\n"


def _is_kept(name: str) -> bool:
    """A name the write stage keeps an original at (`<temp pattern>.orig`), not the file's own."""
    return TEMP_NAME.fullmatch(name) is not None and name.endswith(".orig")


def _spare_with_an_inode(tmp_path: Path, inode: str) -> tuple[Path, int]:
    """make_tree, with pkg/a.py made again in the middle one of three spare files by inode number; the spare
    whose inode number is lower (or higher) than a.py's, and a.py's."""
    make_tree(tmp_path)
    target = tmp_path / "pkg" / "a.py"
    spares = [tmp_path / f"spare-{i}" for i in range(3)]
    for spare in spares:
        spare.write_bytes(b"")
    lower, middle, higher = sorted(spares, key=lambda path: path.stat().st_ino)
    middle.write_bytes(target.read_bytes())
    middle.chmod(0o640)
    os.rename(middle, target)
    return (lower if inode == "lower" else higher), target.stat().st_ino


@pytest.mark.parametrize("inode", ["lower", "higher"])
def test_a_copy_of_the_original_swapped_in_for_its_kept_link_is_another_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inode: str
) -> None:
    """Right after the replace, between the check's look at the kept original (its link: the original's inode,
    size and mtime) and its read of the bytes, the tree's owner renames over the kept link a copy with the very
    same bytes: another inode, so another file. The commit is refused as a file changed by another writer, and
    their copy is put back at the file's name, whether its inode number is lower or higher than the original's.

    Kills patchkit/workspace/commit.py:730's `st.st_ino > o.ino`, `< o.ino` and `is o.ino` in `_as_judged` (the
    inode compared by order or by identity: their copy, with the bytes judged, was taken for the original, the
    commit went on and their file at the kept name was removed with it; the full run of 2026-12-06 on the fix's
    code). Before the replace the same swap is caught by the name's own inode (`_check_unchanged`)."""
    copy, original = _spare_with_an_inode(tmp_path, inode)
    target = tmp_path / "pkg" / "a.py"
    copy.write_bytes(target.read_bytes())
    inode_of_theirs = copy.stat().st_ino

    def swap(folder: int, name: str) -> None:
        assert os.lstat(name, dir_fd=folder).st_ino == original  # the check has just seen the original
        os.rename(copy, name, dst_dir_fd=folder)

    swapped = at_an_lstat(monkeypatch, "_check_kept", _is_kept, swap)
    with pytest.raises(WriteFailedError, match="changed while patchkit was writing it"):
        commit_changes(tmp_path, changes_for(tmp_path))
    assert swapped and target.stat().st_ino == inode_of_theirs
    assert target.read_bytes() == b"a = 1\r\n\xff\xfe\n"


@pytest.mark.parametrize("empty", [False, True])
def test_a_kept_original_that_grows_while_its_bytes_are_read_is_another_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, empty: bool
) -> None:
    """Right after the replace, while the check reads the kept original's bytes (after it has taken their size),
    the tree's owner appends to it: the read asks for one byte more than the size, sees it, and the commit is
    refused as a file changed by another writer, their grown file put back at the name. Also when the original
    was empty.

    Kills patchkit/workspace/commit.py:733's read of `st.st_size + 0`, `// 1`, `* 1` bytes for `+ 1` (the bytes
    up to the old size matched, and the commit went on with their appended line left on an inode no name
    holds), `found >= data` at :737 (the grown bytes sort after the judged ones), and, with the empty original,
    `st.st_size + 1 * len(found)` (a first read of no bytes at all) and the loop's `len(found) < size`, `!=`,
    `is not` (no read at all); the full run of 2026-12-06 on the fix's code. Before the replace the name's own
    size check (`_check_unchanged`) catches the same growth."""
    make_tree(tmp_path)
    target = tmp_path / "pkg" / "a.py"
    if empty:
        target.write_bytes(b"")
    before = target.read_bytes()
    real = os.fstat
    grown: list[str] = []

    def fstat_then_grow(fd: int) -> os.stat_result:
        st = real(fd)
        caller = sys._getframe(1)
        if caller.f_code.co_name == "_as_judged" and caller.f_locals["name"] != "a.py" and not grown:
            grown.append(caller.f_locals["name"])
            with open(tmp_path / "pkg" / grown[0], "ab") as kept:
                kept.write(b"theirs = 1\n")
        return st

    monkeypatch.setattr(os, "fstat", fstat_then_grow)
    with pytest.raises(WriteFailedError, match="changed while patchkit was writing it"):
        commit_changes(tmp_path, changes_for(tmp_path))
    assert grown and target.read_bytes() == before + b"theirs = 1\n"


@pytest.mark.parametrize("inode", ["lower", "higher"])
def test_a_foreign_file_at_the_kept_name_never_becomes_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inode: str
) -> None:
    """Right after the replace, just before the check looks at the kept original, the tree's owner renames a file
    of their own (other bytes, a lower or a higher inode number than the original's) over its kept link: the kept
    name no longer holds the original, so there is nothing to compare, and their file is never renamed back as
    if it were the original: the name keeps the bytes written. (The kept name, random and of patchkit's own
    temporary pattern, is removed at the end with what it holds, as the journal says it is patchkit's.)

    Kills patchkit/workspace/commit.py:748's `kept.st_ino > o.ino`, `< o.ino` and `is o.ino` (their file,
    compared as the original, was put at the name and the run failed; the full run of 2026-12-06 on the fix's
    code)."""
    copy, _ = _spare_with_an_inode(tmp_path, inode)
    copy.write_bytes(b"theirs = 1\n")

    def put_theirs(folder: int, name: str) -> None:
        os.rename(copy, name, dst_dir_fd=folder)

    swapped = at_an_lstat(monkeypatch, "_check_kept", _is_kept, put_theirs, before=True)
    commit_changes(tmp_path, changes_for(tmp_path))
    assert swapped and (tmp_path / "pkg" / "a.py").read_bytes() == b"a = 2\r\n\xff\xfe\n"


@pytest.mark.parametrize("when", ["later", "earlier"])
def test_a_kept_original_touched_after_the_replace_is_a_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    """Right after the replace, the tree's owner sets the kept original's mtime (later or earlier; its bytes as
    judged): another writer was at work, the original is renamed back and the commit refused.

    Kills patchkit/workspace/commit.py:750's `(size, mtime) > (...)`, `<` and `is` (an mtime moved one way, or
    either, let through with the bytes as judged; the full run of 2026-12-06 on the fix's code)."""
    make_tree(tmp_path)
    target = tmp_path / "pkg" / "a.py"
    before = target.read_bytes()

    def touch(folder: int, name: str) -> None:
        st = os.stat(name, dir_fd=folder)
        moved = st.st_mtime_ns + (10**9 if when == "later" else -(10**9))
        os.utime(name, ns=(st.st_atime_ns, moved), dir_fd=folder)

    touched = at_an_lstat(monkeypatch, "_check_kept", _is_kept, touch, before=True)
    with pytest.raises(WriteFailedError, match="changed while patchkit was writing it"):
        commit_changes(tmp_path, changes_for(tmp_path))
    assert touched and target.read_bytes() == before


def test_a_file_put_back_where_one_was_deleted_is_theirs_when_the_original_changed_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Right after pkg/gone/c.py is deleted, its owner edits the original (still held by its kept link) and puts a
    new c.py of their own at its name: the commit is refused, and their new file is left at its name, never
    overwritten by the kept original; the rollback then finds the kept original edited too, puts nothing back
    and keeps the journal (both of their files stay, the message says what to restore).

    Kills patchkit/workspace/commit.py:751's name looked up as `parts[-2]`, `parts[-0]`, `parts[1]`, `parts[~1]`,
    `parts[not 1]`, `parts[+1]` (a folder's name, not the file's) and `is None` for `is not None` (their file
    taken for no file): each renamed the kept original over their new file (the full run of 2026-12-06 on the
    fix's code)."""
    make_tree(tmp_path)
    gone = tmp_path / "pkg" / "gone"

    def edit_and_put_back(folder: int, name: str) -> None:
        with open(gone / name, "ab") as kept:
            kept.write(b"edited = 1\n")
        (gone / "c.py").write_bytes(b"theirs = 1\n")

    edited = at_an_lstat(monkeypatch, "_check_kept", lambda name: _is_kept(name) and (gone / name).exists(),
                         edit_and_put_back, before=True)
    with pytest.raises(RecoveryFailedError, match=r"writing failed \(pkg/gone/c.py\) and so did restoring the tree"):
        commit_changes(tmp_path, changes_for(tmp_path))
    assert edited and (gone / "c.py").read_bytes() == b"theirs = 1\n"
    (kept,) = [p for p in gone.iterdir() if p.name != "c.py"]
    assert kept.read_bytes() == b"c = 3\nedited = 1\n"


def test_a_commit_leaves_no_descriptor_open(tmp_path: Path) -> None:
    """Every descriptor a commit opens (folders, files, the free-space check's, the lock) is closed by its end.

    Kills patchkit/workspace/commit.py:287:core/ZeroIterationForLoop#7 (the free-space check's descriptors
    were never closed)."""
    make_tree(tmp_path)
    before = len(os.listdir("/proc/self/fd"))
    commit_changes(tmp_path, changes_for(tmp_path))
    assert len(os.listdir("/proc/self/fd")) == before


def test_state_files_are_written_and_deleted_in_the_same_transaction(tmp_path: Path) -> None:
    make_tree(tmp_path)
    commit_changes(tmp_path, changes_for(tmp_path), state_files={"applied/x.json": b'{"v": 1}'}, label="apply")
    record = tmp_path / STATE / "applied" / "x.json"
    assert record.read_bytes() == b'{"v": 1}'
    commit_changes(tmp_path, [], state_files={"applied/x.json": None})
    assert not record.exists()
    commit_changes(tmp_path, [], state_files={"applied/x.json": None})  # deleting what is gone: a no-op


@pytest.mark.parametrize(
    "name", ["lock", "journal.json", ".gitignore", "../escape", "/abs", "a/.patchkit-0123456789abcdef.tmp"]
)
def test_reserved_or_unsafe_state_file_names_are_refused(tmp_path: Path, name: str) -> None:
    make_tree(tmp_path)
    before = image(tmp_path)
    with pytest.raises(UnsafePathError):
        commit_changes(tmp_path, changes_for(tmp_path), state_files={name: b"x"})
    assert image(tmp_path) == before


def test_a_change_inside_the_state_folder_is_refused(tmp_path: Path) -> None:
    make_tree(tmp_path)
    rel = ".patchkit/lock"
    change = FileChange(rel, Snapshot(rel, None, None), Snapshot(rel, b"", 0o644))
    with pytest.raises(UnsafePathError):
        commit_changes(tmp_path, [change])


def test_an_io_error_mid_write_restores_the_tree_and_names_the_file(tmp_path: Path) -> None:
    original = make_tree(tmp_path)
    env = {"PATCHKIT_FAULT_AFTER": "14", "PATCHKIT_FAULT_ERRNO": "ENOSPC"}
    os.environ.update(env)
    try:
        with pytest.raises(WriteFailedError, match="No space left on device; the tree was restored") as info:
            commit_changes(tmp_path, changes_for(tmp_path))
    finally:
        for key in env:
            del os.environ[key]
    assert info.value.exit_code is ExitCode.WRITE_FAILED
    assert info.value.where is not None and info.value.where.startswith(f"{tmp_path}/pkg/")
    assert image(tmp_path) == original
    assert not journal(tmp_path).exists()


def test_a_failing_restore_keeps_the_journal_and_the_next_run_finishes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = make_tree(tmp_path)
    real_replace = os.replace
    calls = {"n": 0}

    def broken_replace(src: str, dst: str, **kwargs: int) -> None:
        if not dst.startswith(("journal", ".gitignore")):
            calls["n"] += 1
            if calls["n"] >= 3:  # the disk "breaks" after two files: restoring them fails too
                raise OSError(errno.EIO, "Input/output error", dst)
        real_replace(src, dst, **kwargs)

    monkeypatch.setattr("patchkit.workspace.disk.os.replace", broken_replace)
    with pytest.raises(RecoveryFailedError, match="the journal is kept") as info:
        commit_changes(tmp_path, changes_for(tmp_path), label="apply of unit")
    assert info.value.exit_code is ExitCode.RECOVERY_FAILED
    assert journal(tmp_path).exists()
    monkeypatch.setattr("patchkit.workspace.disk.os.replace", real_replace)
    with locked(tmp_path, 5) as report:
        assert report is not None and report.direction is Direction.BACK and report.files == 2
    assert report.message.startswith("recovered an interrupted apply of unit on ")
    assert image(tmp_path) == original


@pytest.mark.parametrize("failures", [1, 2])
def test_a_failing_clean_up_is_retried_once_then_keeps_the_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failures: int
) -> None:
    """Once every file is written the transaction only goes forward: a failing clean-up (kept links, folders,
    the journal) is tried once more; failing again, the journal stays and the next run finishes the job."""
    from patchkit.workspace import commit

    make_tree(tmp_path)
    real = commit._complete
    calls = {"n": 0}

    def flaky(*args: object) -> None:
        calls["n"] += 1
        if calls["n"] <= failures:
            raise OSError(errno.EIO, "Input/output error")
        real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(commit, "_complete", flaky)
    if failures == 1:
        commit_changes(tmp_path, changes_for(tmp_path), label="apply of unit")
        assert not journal(tmp_path).exists()
    else:
        with pytest.raises(RecoveryFailedError, match="every file was written, but finishing the transaction failed"):
            commit_changes(tmp_path, changes_for(tmp_path), label="apply of unit")
        assert journal(tmp_path).exists()
        monkeypatch.setattr(commit, "_complete", real)
        with locked(tmp_path, 5) as report:
            assert report is not None and report.direction is Direction.FORWARD
    assert image(tmp_path)["pkg/a.py"] == ("file", b"a = 2\r\n\xff\xfe\n", 0o640)
    assert calls["n"] == 2


def test_recover_without_a_journal_is_a_no_op(tmp_path: Path) -> None:
    make_tree(tmp_path)
    assert recover(tmp_path) is None
    (tmp_path / STATE).mkdir()
    assert recover(tmp_path) is None


def _kill_after_journal(root: Path) -> None:
    """Leave a real interrupted transaction: the writer dies right after its first file is replaced."""
    assert in_child(root, changes_for(root), {"PATCHKIT_FAULT_AFTER": "12"}) == -signal.SIGKILL
    assert journal(root).exists()


def test_a_corrupt_journal_is_reported_not_guessed(tmp_path: Path) -> None:
    make_tree(tmp_path)
    _kill_after_journal(tmp_path)
    journal(tmp_path).write_bytes(b'{"format": 1, "label": "x", "entries": [{"area": "tree"')
    with pytest.raises(RecoveryFailedError, match="unreadable"):
        recover(tmp_path)
    assert journal(tmp_path).exists()


@pytest.mark.parametrize("path", ["../outside.txt", "/tmp/outside.txt", "pkg/../../outside.txt"])
def test_a_planted_journal_cannot_write_outside_the_root(tmp_path: Path, path: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    make_tree(root)
    (root / STATE).mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"precious\n")
    doc = {"format": 3, "label": "x", "pid": 1, "root": str(root), "root_ino": root.stat().st_ino, "entries": [
        {"area": "tree", "path": path, "before": {"mode": 420, "offset": 0, "size": 7, "uid": 0, "gid": 0,
                                                  "ino": 1, "mtime_ns": 0},
         "after": {"mode": 420, "sha256": "0" * 64}, "folders": [],
         "temp": ".patchkit-0123456789abcdef.tmp", "keep": ".patchkit-0123456789abcdef.orig"},
    ]}
    journal(root).write_bytes(json.dumps(doc).encode() + b"\npwned!")
    with pytest.raises(RecoveryFailedError):
        recover(root)
    assert outside.read_bytes() == b"precious\n"


@pytest.mark.parametrize(
    ("area", "path", "temp", "mode"),
    [
        ("tree", ".git/config", ".patchkit-0123456789abcdef.tmp", 0o644),
        ("tree", ".GIT/config", ".patchkit-0123456789abcdef.tmp", 0o644),
        ("tree", "pkg/.Git/hooks", ".patchkit-0123456789abcdef.tmp", 0o644),
        ("tree", ".Patchkit/lock", ".patchkit-0123456789abcdef.tmp", 0o644),
        ("state", "lock", ".patchkit-0123456789abcdef.tmp", 0o644),
        ("tree", "pkg/a.py", "../../outside.txt", 0o644),
        ("tree", "pkg/a.py", ".patchkit-0123456789abcdef.tmp", 0o4755),
    ],
)
def test_a_trusted_journal_is_still_checked_as_input(
    tmp_path: Path, area: str, path: str, temp: str, mode: int
) -> None:
    # Root's own journal (owned by root, 0600), but its content is hostile: nothing may be written.
    root = tmp_path / "root"
    root.mkdir()
    make_tree(root)
    (root / STATE).mkdir()
    (root / ".git").mkdir()
    before = image(root)
    doc = {"format": 3, "label": "x", "pid": 1, "root": str(root), "root_ino": root.stat().st_ino, "entries": [
        {"area": area, "path": path, "before": None, "after": {"mode": mode, "sha256": "0" * 64},
         "folders": [["/".join(path.split("/")[:i]), None] for i in range(1, path.count("/") + 1)],
         "temp": temp, "keep": ".patchkit-0123456789abcdef.orig"},
    ]}
    journal(root).write_bytes(json.dumps(doc).encode() + b"\n")
    journal(root).chmod(0o600)
    with pytest.raises(RecoveryFailedError, match="unreadable"):
        recover(root)
    assert image(root) == before


def test_recovery_refuses_a_folder_swapped_for_a_symlink_out_of_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    make_tree(root)
    _kill_after_journal(root)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.py").write_bytes(b"precious\n")
    os.rename(root / "pkg", tmp_path / "moved-away")
    (root / "pkg").symlink_to(outside)
    with pytest.raises(RecoveryFailedError, match="symbolic link"):
        recover(root)
    assert image(outside) == {"a.py": ("file", b"precious\n", 0o644)}


def test_status_on_a_read_only_tree_with_a_journal_is_a_clear_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_tree(tmp_path)
    _kill_after_journal(tmp_path)
    before = image(tmp_path)

    def read_only(root: Path, *, create: bool) -> int:
        raise OSError(errno.EROFS, "Read-only file system", str(root))

    monkeypatch.setattr("patchkit.workspace.lock._open_lock", read_only)
    with pytest.raises(RecoveryFailedError, match="cannot be written") as info, locked(tmp_path, 1, shared=True):
        pass
    assert "apply of unit" in str(info.value) and info.value.exit_code is ExitCode.RECOVERY_FAILED
    assert image(tmp_path) == before


def test_status_on_a_read_only_tree_without_a_journal_needs_no_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_tree(tmp_path)

    def read_only(root: Path, *, create: bool) -> tuple[int, bool]:
        raise OSError(errno.EROFS, "Read-only file system", str(root))

    monkeypatch.setattr("patchkit.workspace.lock._open_lock", read_only)
    with locked(tmp_path, 1, shared=True) as report:
        assert report is None
    # a writer: refused before the write phase, exit 2 (nothing was written), with what to do
    with pytest.raises(RootNotWritableError, match="nothing was written") as info, locked(tmp_path, 1):
        pass
    assert info.value.exit_code == 2 and info.value.hint is not None and "read-only filesystem" in info.value.hint


def test_the_lock_times_out_with_a_clear_message(tmp_path: Path) -> None:
    make_tree(tmp_path)
    with locked(tmp_path, 1):
        fd = os.open(tmp_path / STATE / LOCK_NAME, os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            try:
                with locked(tmp_path, 0.2):
                    os._exit(0)
            except LockTimeoutError as exc:
                os._exit(6 if "held the lock for over 0.2s" in str(exc) else 1)
        _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 6


def test_a_shared_reader_upgrades_to_recover(tmp_path: Path) -> None:
    original = make_tree(tmp_path)
    _kill_after_journal(tmp_path)
    with locked(tmp_path, 1, shared=True) as report:
        assert report is not None and report.direction is Direction.BACK
    assert image(tmp_path) == original


def test_a_symlinked_state_folder_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (root / STATE).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UnsafePathError, match="symbolic link"), locked(root, 1):
        pass
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_the_fault_hook_is_inert_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PATCHKIT_FAULT_AFTER", raising=False)
    assert Disk()._left is None
    monkeypatch.setenv("PATCHKIT_FAULT_AFTER", "not-a-number")
    assert Disk()._left is None
    monkeypatch.setenv("PATCHKIT_FAULT_AFTER", "3")
    monkeypatch.setenv("PATCHKIT_FAULT_ERRNO", "EACCES")
    disk = Disk()
    assert disk._left == 3 and disk._errno == errno.EACCES
    assert Disk(faults=False)._left is None


@pytest.mark.parametrize(("files", "said"), [(0, "rolled back (no file had been changed yet)"),
                                             (1, "rolled back 1 file"), (2, "rolled back 2 files")])
def test_a_rollback_counts_its_files_in_words(files: int, said: str) -> None:
    """One file is "1 file", two are "2 files".

    Kills patchkit/workspace/recovery.py's `self.files == 1` -> `self.files < 1` (cosmic-ray
    core/ReplaceComparisonOperator_Eq_Lt, seed 5), which said "rolled back 1 files"."""
    recovery = Recovery(Path("/opt/engine"), "apply of p", Direction.BACK, files)
    assert recovery.message == f"recovered an interrupted apply of p on /opt/engine: {said}"
