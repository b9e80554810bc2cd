"""Issue 10, the tree ends whole: planted temp names, long names, read-only folders, full disks, SIGTERM,
hard links, xattrs, a writer without the lock, and who holds the lock. Real CLI, real trees, as root."""

from __future__ import annotations

import errno
import json
import os
import signal
import stat
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchkit.errors import WriteFailedError
from patchkit.input.tree import Snapshot
from patchkit.plan.plan import FileChange
from patchkit.workspace.disk import Disk
from patchkit.workspace.lock import LockHolder
from patchkit.workspace.names import TEMP_NAME
from tests.conftest import needs_root
from tests.rooted import commit_changes, locked, read_snapshot
from tests.safety_helpers import (
    Case,
    add_patch,
    as_user,
    build_case,
    chown_tree,
    fault_env,
    image,
    interrupted_tree,
    mount_works,
    mounted,
    read_only_folder,
    run_forked,
    run_here,
    shared_case,
    signals_as_in_a_terminal,
    whole_state,
)

MOUNTS = pytest.mark.skipif(not mount_works(), reason="mount is not allowed here")
STATE = ".patchkit"


@pytest.fixture(scope="module")
def case() -> Iterator[Case]:
    with shared_case() as made:
        yield made


def leftovers(root: Path) -> list[str]:
    return [p.name for p in root.rglob("*") if TEMP_NAME.fullmatch(p.name) or p.name == "journal.json"]


# ----------------------------------------------------------------------------------------- temp files


@needs_root
def test_names_planted_where_temp_files_used_to_go_are_never_written_through(
    case: Case, tmp_path: Path, user: tuple[int, int]
) -> None:
    root = case.fresh("planted-temps")
    uid, gid = user
    chown_tree(root, uid, gid)
    outside = case.workdir / "shadow"  # a file outside the root, on the same filesystem
    outside.write_bytes(b"root's secret\n")
    # The old, predictable temp name hard-linked to it (planted as root here: fs.protected_hardlinks would
    # stop the user on this kernel, not on every one).
    os.link(outside, root / "engine" / ".core.py.patchkit-tmp")

    def plant() -> None:
        os.mkdir(root / "engine" / "tools" / ".helper.py.patchkit-tmp")  # used to wedge the tree (exit 8)
        (root / "engine" / ".run.sh.patchkit-tmp").write_bytes(b"#!/bin/sh\nevil\n")

    as_user(uid, gid, plant)
    run = run_forked(case.args("apply", root))
    assert run.code == 0, run.err
    assert outside.read_bytes() == b"root's secret\n"
    outside.unlink()
    assert (root / "engine" / "tools" / ".helper.py.patchkit-tmp").is_dir()
    assert (root / "engine" / ".run.sh.patchkit-tmp").read_bytes() == b"#!/bin/sh\nevil\n"
    assert (root / "engine" / "run.sh").stat().st_uid == uid, "the engine file is not the planted one"
    planted = {"engine/.core.py.patchkit-tmp", "engine/tools/.helper.py.patchkit-tmp", "engine/.run.sh.patchkit-tmp"}
    assert {p: v for p, v in image(root).items() if p not in planted} == case.patched
    assert leftovers(root) == []


def test_temp_files_are_created_exclusively_and_checked(tmp_path: Path) -> None:
    disk = Disk(faults=False)
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        (tmp_path / "taken").write_bytes(b"x")
        (tmp_path / "link").symlink_to(tmp_path / "nowhere")
        for name in ("taken", "link"):
            with pytest.raises(FileExistsError):
                disk.create(fd, name)
        assert not (tmp_path / "nowhere").exists()
        os.close(disk.create(fd, "fresh"))
        assert (tmp_path / "fresh").stat().st_mode & 0o777 == 0o600
    finally:
        os.close(fd)


@pytest.mark.parametrize("race", ["linked", "unlinked"])
def test_a_temp_file_linked_or_unlinked_by_another_process_before_its_check_is_never_written(
    case: Case, tmp_path: Path, race: str
) -> None:
    """Between the exclusive create of a temp file in the tree and its check on the descriptor, another process
    (the tree's owner) links the new name elsewhere (to read what is written) or unlinks it: the file is not a
    fresh one of ours (one link), so nothing is written into it, and the apply stops cleanly, the tree as it
    was. The race is made in the forked run: its first fstat of a tree temp file does the other's part first.

    Kills patchkit/workspace/disk.py:94:core/ReplaceComparisonOperator_NotEq_Lt#0 (`st_nlink < 1`: the linked
    file was written through) and NotEq_Gt#0 (`st_nlink > 1`: the unlinked one was written, and the apply failed
    later, at the replace, for another reason)."""
    stolen = case.workdir / f"stolen-{race}"  # outside the root, on the same filesystem
    stolen.unlink(missing_ok=True)
    real_fstat = os.fstat

    def race_the_check() -> None:
        done = []

        def fstat(fd: int) -> os.stat_result:
            path = os.readlink(f"/proc/self/fd/{fd}") if isinstance(fd, int) else ""
            tree_temp = TEMP_NAME.fullmatch(os.path.basename(path)) and f"/{STATE}/" not in path
            if not done and tree_temp and path.endswith(".tmp"):
                done.append(path)
                if race == "linked":
                    os.link(path, stolen)
                else:
                    os.unlink(path)
            return real_fstat(fd)

        os.fstat = fstat  # the forked child's own os module

    root = case.fresh(f"raced-{race}")
    run = run_forked(case.args("apply", root), before=race_the_check)
    assert run.code == 7 and "not a fresh file of ours" in run.err and "Traceback" not in run.err, (
        run.code, run.err)
    assert image(root) == case.original and leftovers(root) == []
    if race == "linked":
        assert stolen.read_bytes() == b"", "bytes were written into a file another process holds a link to"


@pytest.mark.parametrize("action", ["status", "apply", "revert"])
def test_a_state_folder_that_is_a_file_is_named_as_such(case: Case, action: str) -> None:
    """The tree's `.patchkit` is a file (someone's, not patchkit's folder): every command stops (exit 2) naming it
    as not a directory, nothing written, the file kept."""
    root = case.fresh(f"state-file-{action}")
    (root / ".patchkit").write_bytes(b"not a folder\n")
    start = image(root)
    run = run_forked(case.args(action, root))
    assert run.code == 2, run
    assert f"patchkit: error: {root}/.patchkit: '.patchkit' is not a directory" in run.err, run.err
    assert f"hint: remove {root}/.patchkit" in run.err and "a parent of" not in run.err, run.err
    assert image(root) == start


def test_a_journal_label_is_printed_escaped_and_cut_short(case: Case) -> None:
    """The label of an interrupted transaction comes back from its journal (a file that may be damaged): the
    recovery's note prints it on one line, its control characters escaped, and cut at 200 characters."""
    root = interrupted_tree(case, "long-label")
    journal = root / ".patchkit" / "journal.json"
    header, _, body = journal.read_bytes().partition(b"\n")
    doc = json.loads(header)
    doc["label"] = "apply of p\x1b[31m\n" + "x" * 5000
    journal.write_bytes(json.dumps(doc).encode() + b"\n" + body)
    run = run_forked(case.args("status", root))
    assert run.code == 3, run
    note = run.err.splitlines()[0]
    escaped = "apply of p\\033[31m\\n"  # as printed: the escape and the newline spelled out
    shown = escaped + "x" * (200 - len(escaped)) + "..."
    assert note.startswith(f"patchkit: recovered an interrupted {shown} on {root}: rolled back "), run.err


def test_a_state_gitignore_that_cannot_be_written_is_a_clear_error_before_any_change(case: Case) -> None:
    """`.patchkit/.gitignore` is written before the transaction, outside the journal: when its temp file is not
    a fresh one of ours (or the disk is full), the run says so (exit 7, the file named), writes nothing to the
    tree, and is not an internal error. Found by the full mutation run of disk.py (the check on the descriptor
    raised FileExistsError, which reached the CLI as "internal error, please report", exit 10)."""
    real_fstat = os.fstat

    def race_the_check() -> None:
        def fstat(fd: int) -> os.stat_result:
            path = os.readlink(f"/proc/self/fd/{fd}") if isinstance(fd, int) else ""
            if TEMP_NAME.fullmatch(os.path.basename(path)) and f"/{STATE}/" in path:
                os.unlink(path)  # gone before its check: not a fresh file of ours any more
            return real_fstat(fd)

        os.fstat = fstat  # the forked child's own os module

    root = case.fresh("gitignore-raced")
    run = run_forked(case.args("apply", root), before=race_the_check)
    assert run.code == 7 and "Traceback" not in run.err and "internal error" not in run.err, (run.code, run.err)
    said = f"{root}/{STATE}/.gitignore: cannot write .gitignore: the new temp file is not a fresh file of ours"
    assert f"{said}; nothing was changed" in run.err, run.err
    assert image(root) == case.original and not (root / STATE / ".gitignore").exists()
    assert run_forked(case.args("apply", root)).code == 0 and whole_state(case, root) == "after"


def test_a_new_folder_in_the_tree_is_closed_to_others_until_its_mode_is_set(case: Case, tmp_path: Path) -> None:
    """The apply makes the new folders a patch needs (engine/moved, engine/plugins/extra): each is 0700 from its
    mkdir on, whatever the umask, until its real mode is set on its descriptor, so nobody else can enter it or
    write in it in between. The forked run's os.mkdir is watched (umask 0): the mode right after each mkdir.

    Kills patchkit/workspace/disk.py:129:core/NumberReplacer#12 and #13 (`os.mkdir(name, 0o701)` / `0o677`)."""
    seen = tmp_path / "modes"
    real_mkdir = os.mkdir

    def watch_mkdirs() -> None:
        os.umask(0)

        def mkdir(path: str, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
            real_mkdir(path, mode, dir_fd=dir_fd)
            st = os.stat(path, dir_fd=dir_fd, follow_symlinks=False)
            with open(seen, "a", encoding="ascii") as out:
                out.write(f"{path} {stat.S_IMODE(st.st_mode):o}\n")

        os.mkdir = mkdir  # the forked child's own os module

    root = case.fresh("new-folders")
    run = run_forked(case.args("apply", root), before=watch_mkdirs)
    assert run.code == 0 and whole_state(case, root) == "after", (run.code, run.err)
    made = dict(line.split() for line in seen.read_text(encoding="ascii").splitlines())
    assert {"moved", "plugins", "extra"} <= set(made), made
    assert set(made.values()) == {"700"}, made


def test_a_file_swapped_for_a_link_right_before_its_original_is_kept_is_never_linked_through(case: Case) -> None:
    """Right before the apply hard-links a file's original to its kept name, the tree's owner swaps the file for
    a symbolic link to a file outside the root. The kept name then holds that link, never a second name of the
    outside file; the apply sees the change and stops (exit 7, the tree restored, no journal kept), and the
    outside file is left as it was. The swap is made in the forked run, just before its first os.link.

    Kills patchkit/workspace/disk.py:121:core/ReplaceFalseWithTrue#3 (`follow_symlinks=True`: the outside file
    got a hard link inside the tree, and the rollback refused it, exit 8, the journal kept)."""
    outside = case.workdir / "outside-secret"
    outside.write_bytes(b"root's secret\n")
    real_link = os.link

    def swap_before_the_link() -> None:
        done = []

        def link(src: str, dst: str, *, src_dir_fd: int | None = None, dst_dir_fd: int | None = None,
                 follow_symlinks: bool = True) -> None:
            if not done:
                done.append(src)
                os.symlink(str(outside), "swap.lnk", dir_fd=src_dir_fd)
                os.rename("swap.lnk", src, src_dir_fd=src_dir_fd, dst_dir_fd=src_dir_fd)
            real_link(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd, follow_symlinks=follow_symlinks)

        os.link = link  # the forked child's own os module

    root = case.fresh("link-swapped")
    run = run_forked(case.args("apply", root), before=swap_before_the_link)
    assert run.code == 7 and "changed while patchkit was writing it" in run.err, (run.code, run.err)
    assert "Traceback" not in run.err and leftovers(root) == [], run.err
    assert outside.stat().st_nlink == 1 and outside.read_bytes() == b"root's secret\n"
    changed = {p: v for p, v in image(root).items() if case.original.get(p) != v}
    assert list(changed) == ["engine/core.py"] and changed["engine/core.py"][0] == "other", changed  # the swap


def test_a_kept_original_swapped_for_a_link_to_the_same_file_is_not_put_back(case: Case) -> None:
    """An apply killed after it replaced engine/core.py: the original waits under its kept name. Someone then
    gives the original a second name outside the root and puts a symbolic link to it at the kept name. The
    recovery looks at the kept name itself: a link is not the original it kept, so it is not renamed into the
    tree (exit 8, the journal kept, the file named), and no link lands at engine/core.py.

    Kills patchkit/workspace/disk.py:138:core/ReplaceFalseWithTrue#4 (lstat_at following links: the link read
    as the original, identical in inode, size, mtime and owner, and renamed over engine/core.py)."""
    original = case.original["engine/core.py"][1]
    for n in range(8, 100):
        root = case.fresh("kept-made-a-link")
        if not run_forked(case.args("apply", root), fault_env(n)).killed:
            raise AssertionError("no kill point left core.py replaced and its original kept")
        core = root / "engine" / "core.py"
        kept = [p for p in (root / "engine").iterdir() if TEMP_NAME.fullmatch(p.name) and p.name.endswith(".orig")
                and p.read_bytes() == original]
        if kept and core.read_bytes() != original:
            break
    outside = case.workdir / "outside-original"
    outside.unlink(missing_ok=True)
    os.link(kept[0], outside)
    kept[0].unlink()
    kept[0].symlink_to(outside)
    run = run_forked(case.args("status", root))
    assert run.code == 8 and "it is not a regular file" in run.err and "Traceback" not in run.err, (n, run.err)
    assert kept[0].name in run.err and (root / STATE / "journal.json").exists(), run.err
    assert not core.is_symlink() and outside.read_bytes() == original

def test_a_filesystem_without_extended_attributes_still_gets_its_files_written(case: Case) -> None:
    """Extended attributes are carried over where the filesystem has them; where listing them fails (ENOTSUP:
    a filesystem without them, as some network mounts), there is nothing to carry and the apply goes on. The
    forked run's os.listxattr fails that way.

    Kills patchkit/workspace/disk.py:158:core/ExceptionReplacer#2 (the ENOTSUP escaping: no file could be
    written on such a filesystem)."""

    def no_xattrs() -> None:
        def listxattr(*args: object, **kwargs: object) -> list[str]:
            raise OSError(errno.ENOTSUP, os.strerror(errno.ENOTSUP))

        os.listxattr = listxattr  # type: ignore[assignment]  # the forked child's own os module

    root = case.fresh("no-xattrs")
    run = run_forked(case.args("apply", root), before=no_xattrs)
    assert run.code == 0 and "Traceback" not in run.err, (run.code, run.err)
    assert whole_state(case, root) == "after" and leftovers(root) == []


def test_the_journal_is_durable_in_its_folder_before_the_first_tree_file_is_replaced(
    case: Case, tmp_path: Path
) -> None:
    """The journal is what a recovery after a power cut reads: its rename into `.patchkit` is made durable
    (the folder fsynced) before any file of the tree is replaced. The forked run's os.replace and os.fsync are
    recorded, each with the path of its folder or file.

    Kills patchkit/workspace/disk.py:178:core/ReplaceTrueWithFalse#7 (put_file's folder fsync off by default:
    the journal's rename was not durable before the tree changed)."""
    log = tmp_path / "calls"
    real_replace, real_fsync = os.replace, os.fsync

    def record() -> None:
        def note(line: str) -> None:
            with open(log, "a", encoding="utf-8") as out:
                out.write(line + "\n")

        def replace(src: str, dst: str, *, src_dir_fd: int | None = None, dst_dir_fd: int | None = None) -> None:
            real_replace(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
            note(f"replace {os.readlink(f'/proc/self/fd/{dst_dir_fd}')}/{dst}")

        def fsync(fd: int) -> None:
            real_fsync(fd)
            note(f"fsync {os.readlink(f'/proc/self/fd/{fd}')}")

        os.replace, os.fsync = replace, fsync  # the forked child's own os module

    root = case.fresh("journal-durable")
    run = run_forked(case.args("apply", root), before=record)
    assert run.code == 0 and whole_state(case, root) == "after", run.err
    calls = log.read_text(encoding="utf-8").splitlines()
    journal = calls.index(f"replace {root}/{STATE}/journal.json")
    first_tree = next(i for i, c in enumerate(calls) if c.startswith(f"replace {root}/engine/"))
    assert f"fsync {root}/{STATE}" in calls[journal + 1:first_tree], calls[:first_tree + 1]


@needs_root
def test_a_run_without_root_keeps_a_files_group_when_it_is_one_of_its_own(case: Case, user: tuple[int, int]) -> None:
    """A user in two groups patches their tree without root: a file of their other group (a lower gid than their
    effective one) keeps that group when it is replaced, as a chgrp the user may make; only another owner's
    files become the user's own. Run in a forked child that dropped to that user, its groups set for real.

    Kills patchkit/workspace/disk.py:195:core/ReplaceComparisonOperator_NotEq_Gt#2 and NotEq_GtE#2 (`owner >
    (euid, egid)`: an owner pair sorting below the run's own was never given back, the file took the egid)."""
    from patchkit.run.fastpath import code_fingerprint

    uid, group = user
    other = group + 1000  # the effective group of the run; the files' group sorts below it
    root = case.fresh("two-groups")
    chown_tree(root, uid, group)
    code_fingerprint()  # cached here: the child does not read the checkout's sources
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 1
        try:
            os.setgroups([group, other])
            os.setgid(other)
            os.setuid(uid)
            os.chdir(case.workdir)
            code = 0 if run_here(case.args("apply", root)) == 0 else 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    assert whole_state(case, root) == "after"
    core = (root / "engine" / "core.py").stat()
    assert (core.st_uid, core.st_gid) == (uid, group)


# ----------------------------------------------------------------------------------------- long names


def test_names_of_255_bytes_apply_and_revert_and_256_is_a_clear_error(tmp_path: Path) -> None:
    long = "n" * 252 + ".py"  # 255 bytes: legal; the old temp name (.<name>.patchkit-tmp) was not
    before = {f"engine/{long}": (b"a = 1\nb = 2\n", 0o644), "engine/other.py": (b"x = 1\n", 0o644)}
    after = {f"engine/{long}": (b"a = 1\nb = 3\n", 0o644), "engine/other.py": (b"x = 2\n", 0o644),
             f"engine/{'c' * 255}": (b"created = 1\n", 0o644)}
    case = build_case(tmp_path, before, after)
    root = case.fresh("long")
    assert run_forked(case.args("apply", root)).code == 0
    assert image(root) == case.patched
    assert run_forked(case.args("revert", root)).code == 0
    assert image(root) == case.reverted
    too_long = "z" * 256
    diff = f"--- a/engine/{too_long}\n+++ b/engine/{too_long}\n@@ -1 +1 @@\n-x = 1\n+x = 2\n".encode()
    add_patch(case.patches, "too-long", diff)
    run = run_forked(["apply", "too-long", "--root", str(root), "--patches", str(case.patches)])
    assert run.code == 2, run.err
    assert "256 bytes long" in run.err and "Traceback" not in run.err
    assert image(root) == case.reverted


# ----------------------------------------------------------------------------------- read-only folders


@MOUNTS
@pytest.mark.parametrize("folder", ["engine/legacy", "engine/tools", "engine"])
def test_a_read_only_folder_inside_the_tree_is_rolled_back_in_process(case: Case, folder: str) -> None:
    root = case.fresh(f"ro-{folder.replace('/', '-')}")
    with read_only_folder(root / folder):
        run = run_forked(case.args("apply", root))
        assert run.code == 7, run.err  # not 8: the rollback only undoes what was done
        assert "Read-only file system" in run.err and "the tree was restored" in run.err
        assert image(root) == case.original
        assert leftovers(root) == []
        status = run_forked(case.args("status", root))
        assert status.code == 3, status.err
    assert run_forked(case.args("apply", root)).code == 0
    assert image(root) == case.patched


# ----------------------------------------------------------------------------------------- full disks


@MOUNTS
@pytest.mark.parametrize("limit", ["space", "inodes"])
def test_a_full_filesystem_is_refused_before_anything_is_written(case: Case, tmp_path: Path, limit: str) -> None:
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    with mounted("-t", "tmpfs", "-o", "size=4m,nr_inodes=400", "tmpfs", target=mount_point):
        root = mount_point / "tree"
        subprocess.run(["cp", "-a", str(case.pristine), str(root)], check=True)
        if limit == "space":
            filler = mount_point / "filler"
            with filler.open("wb") as out:
                with pytest.raises(OSError) as info:
                    while True:
                        out.write(b"\0" * 65536)
                        out.flush()
                assert info.value.errno == errno.ENOSPC
            filler.write_bytes(filler.read_bytes()[: -(256 << 10)])  # leave 256 KiB: less than the margin
        else:
            with pytest.raises(OSError) as info:
                for i in range(1000):
                    (mount_point / f"f{i}").touch()
            assert info.value.errno == errno.ENOSPC
            for i in range(12):  # a few inodes free: enough to start, less than the margin
                (mount_point / f"f{i}").unlink(missing_ok=True)
        run = run_forked(case.args("apply", root))
        assert run.code == 7, run.err
        assert "nothing was changed" in run.err and "Traceback" not in run.err
        assert "not enough room" in run.err, run.err
        assert image(root) == case.original
        assert leftovers(root) == []


def test_a_disk_that_fills_up_mid_write_is_restored_without_new_inodes(case: Case) -> None:
    # From the fault on, everything that needs an inode or a block fails (PATCHKIT_FAULT_PERSIST): the
    # rollback must get by with renames of the kept originals and unlinks.
    runs = 0
    for n in range(14, 60, 3):
        root = case.fresh("full-mid-write")
        env = {**fault_env(n, "ENOSPC"), "PATCHKIT_FAULT_PERSIST": "1"}
        run = run_forked(case.args("apply", root), env)
        if run.code == 0:
            break
        runs += 1
        assert run.code == 7, (n, run.err)
        assert image(root) == case.original, n
        assert leftovers(root) == [], n
    assert runs >= 5


def test_a_fault_after_n_operations_stops_the_run_before_operation_n_plus_1(case: Case) -> None:
    """The fault injection every campaign here relies on (docs/safety.md): PATCHKIT_FAULT_AFTER=0 kills before
    the first filesystem operation of the apply, =1 after exactly one (the journal's temp file, created in the
    state folder; the lock and .gitignore are not transaction operations).

    Kills patchkit/workspace/disk.py:74:core/NumberReplacer#5 and ReplaceComparisonOperator_Gt_GtE#0
    (`_left > -1`, `>= 0`: every fault one operation late)."""
    temps = []
    for n in (0, 1):
        root = case.fresh(f"fault-after-{n}")
        assert run_forked(case.args("apply", root), fault_env(n)).killed, n
        assert image(root) == case.original, n
        assert sorted(p.name for p in (root / STATE).iterdir() if not TEMP_NAME.fullmatch(p.name)) == [
            ".gitignore", "lock"], n
        temps.append([p.name for p in (root / STATE).iterdir() if TEMP_NAME.fullmatch(p.name)])
    assert [len(t) for t in temps] == [0, 1], temps


@needs_root
def test_a_persistent_fault_fails_every_later_operation_that_needs_space(case: Case, user: tuple[int, int]) -> None:
    """PATCHKIT_FAULT_PERSIST (docs/safety.md): from the fault on, every later create, write, link and mkdir fails
    with the same errno, and without it the fault is one-shot. Observed where patchkit itself passes over a
    failed operation: as root on a tree another user owns, each new file is chowned to the owner of the file it
    replaces, and an EPERM there is what a run without root gets, so the file just stays the run's own.

    Kills patchkit/workspace/disk.py:59:core/ReplaceAndWithOr#0 (every injected errno persisting) and
    ReplaceComparisonOperator_IsNot_Is#0 (none persisting), and :67 AddNot#7 and IsNot_Is#1 (the persisting
    failure an AssertionError: a traceback, not a clean rollback)."""
    for n in range(0, 100):
        root = case.fresh("persist-chown")
        chown_tree(root, *user)
        run = run_forked(case.args("apply", root), fault_env(n, "EPERM"))
        if run.code == 0:  # operation n+1 was an fchown: its one EPERM passed over, the apply completed
            break
        assert run.code == 7 and "Traceback" not in run.err, (n, run.code, run.err)
    else:
        raise AssertionError("no operation's EPERM was passed over")
    assert whole_state(case, root) == "after"
    root = case.fresh("persist-chown")
    chown_tree(root, *user)
    run = run_forked(case.args("apply", root), {**fault_env(n, "EPERM"), "PATCHKIT_FAULT_PERSIST": "1"})
    assert run.code == 7, (n, run.code, run.err)
    assert "Operation not permitted; the tree was restored" in run.err and "Traceback" not in run.err, run.err
    assert image(root) == case.original and leftovers(root) == []


# -------------------------------------------------------------------------------------------- signals


@pytest.mark.parametrize(("name", "code", "word"), [("TERM", 143, "terminated"), ("INT", 130, "interrupted")])
def test_sigterm_and_sigint_mid_write_roll_back_and_say_so(case: Case, name: str, code: int, word: str) -> None:
    # The signal arrives at operation n and again at every later one (a supervisor repeating SIGTERM, a user
    # hammering Ctrl-C): the rollback must still run to its end, with no journal left.
    # Once every file is written the transaction only goes forward: then the signal ends the run after it.
    seen = {"before": 0, "after": 0}
    for n in range(10, 100, 4):
        root = case.fresh(f"signal-{name}")
        run = run_forked(case.args("apply", root), {**fault_env(n), "PATCHKIT_FAULT_SIGNAL": name},
                         before=signals_as_in_a_terminal)
        if run.code == 0:
            break
        assert run.code == code, (n, run.code, run.err)
        state = whole_state(case, root)
        assert state is not None, n
        seen[state] += 1
        said = "the write in progress was rolled back" if state == "before" else "the write had already completed"
        assert f"patchkit: {word}" in run.err and said in run.err, (n, run.err)
        assert leftovers(root) == [], n
    assert seen["before"] >= 5 and seen["after"] >= 1, seen


@pytest.mark.parametrize("name", ["TERM", "INT"])
def test_a_signal_the_run_was_started_ignoring_does_not_stop_the_write(case: Case, name: str) -> None:
    # `nohup`, a supervisor, or `cmd &` in a script (SIGINT ignored): the signal arriving mid-write is one the
    # caller asked to ignore. The write goes on to its end (exit 0, patched, no journal), not rolled back and
    # reported as interrupted with exit 7 (what a pending-while-blocked ignored signal used to cause).
    sig = getattr(signal, f"SIG{name}")
    for n in (10, 14, 30):
        root = case.fresh(f"ignored-{name}")
        run = run_forked(case.args("apply", root), {**fault_env(n), "PATCHKIT_FAULT_SIGNAL": name},
                         before=lambda: signal.signal(sig, signal.SIG_IGN))
        assert run.code == 0, (n, run.code, run.err)
        assert "interrupted" not in run.err and "terminated" not in run.err, run.err
        assert whole_state(case, root) == "after", n
        assert leftovers(root) == [], n


def test_a_sigint_left_at_its_default_action_ends_the_run_only_after_the_rollback(case: Case) -> None:
    # A caller that set SIGINT back to SIG_DFL (an embedding program; not Python's Ctrl-C handler): the signal
    # still stops the write between two files, the rollback runs while it is held, and only then does it end
    # the process, as its default action does. The tree is the one before, with no journal left.
    for n in (10, 14):
        root = case.fresh("default-int")
        run = run_forked(case.args("apply", root), {**fault_env(n), "PATCHKIT_FAULT_SIGNAL": "INT"},
                         before=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        assert run.signal == signal.SIGINT, (n, run.code, run.err)
        assert whole_state(case, root) == "before", n
        assert leftovers(root) == [], n


def test_a_sigint_handler_of_the_callers_that_does_not_raise_still_stops_the_write(case: Case) -> None:
    # patchkit run in-process by a program whose SIGINT handler only takes note: the signal still stops the
    # write between two files and rolls it back; the handler runs once the signals are let through, raises
    # nothing, and the run ends as a write stopped by a signal: exit 7, the tree as before, no journal.
    root = case.fresh("handler-int")

    def install() -> None:
        signal.signal(signal.SIGINT, lambda signum, frame: None)

    run = run_forked(case.args("apply", root), {**fault_env(10), "PATCHKIT_FAULT_SIGNAL": "INT"}, before=install)
    assert run.code == 7, (run.code, run.err)
    assert "interrupted by a signal; the tree was restored" in run.err, run.err
    assert whole_state(case, root) == "before"
    assert leftovers(root) == []


def test_a_sigterm_handler_of_the_callers_is_replaced_for_the_run(case: Case) -> None:
    # patchkit run in-process by a program with its own SIGTERM handler (not ignored, not the default): during
    # the run SIGTERM rolls the write back like Ctrl-C, exit 143.
    root = case.fresh("handler-term")

    def callers_handler(signum: int, frame: object) -> None:
        raise AssertionError("the caller's handler ran during patchkit's write")

    def install() -> None:
        signal.signal(signal.SIGTERM, callers_handler)

    run = run_forked(case.args("apply", root), {**fault_env(10), "PATCHKIT_FAULT_SIGNAL": "TERM"}, before=install)
    assert run.code == 143, (run.code, run.err)
    assert whole_state(case, root) == "before"
    assert leftovers(root) == []


def test_the_fault_signal_is_sent_again_before_every_later_operation(case: Case, tmp_path: Path) -> None:
    """PATCHKIT_FAULT_SIGNAL (docs/safety.md) repeats its signal before every operation after the fault, as a
    supervisor repeating SIGTERM would: what the rollback-to-its-end tests above rely on. The forked run's
    os.kill is recorded: the signal goes out at the fault and again during the rollback that follows.

    Kills patchkit/workspace/disk.py:79:core/ReplaceTrueWithFalse#1 (the signal sent once only)."""
    sent = tmp_path / "kills"
    real_kill = os.kill

    def record_kills() -> None:
        signals_as_in_a_terminal()

        def kill(pid: int, sig: int) -> None:
            with open(sent, "a", encoding="ascii") as out:
                out.write(f"{sig}\n")
            real_kill(pid, sig)

        os.kill = kill  # the forked child's own os module: this process's stays as it was

    root = case.fresh("signal-repeated")
    run = run_forked(case.args("apply", root), {**fault_env(14), "PATCHKIT_FAULT_SIGNAL": "TERM"},
                     before=record_kills)
    assert run.code == 143 and whole_state(case, root) == "before", (run.code, run.err)
    kills = sent.read_text(encoding="ascii").split()
    assert len(kills) >= 2 and set(kills) == {str(int(signal.SIGTERM))}, kills


def test_a_real_sigterm_to_a_fresh_interpreter_leaves_a_whole_tree(case: Case) -> None:
    import sys

    from tests.safety_helpers import REPO

    for delay in (0.05, 0.15, 0.3):
        root = case.fresh("real-sigterm")
        proc = subprocess.Popen([sys.executable, "-m", "patchkit", *case.args("apply", root)], cwd=REPO,
                                stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
        time.sleep(delay)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode in (0, 143, -signal.SIGTERM), err
        assert whole_state(case, root) in ("before", "after"), err
        assert not (root / STATE / "journal.json").exists()


# -------------------------------------------------------------------------------- links, xattrs, races


def test_a_hard_linked_target_is_refused(case: Case, tmp_path: Path) -> None:
    root = case.fresh("hardlink")
    other = case.workdir / "other-name"
    other.unlink(missing_ok=True)
    os.link(root / "engine" / "core.py", other)
    run = run_forked(case.args("apply", root))
    assert run.code == 2, run.err
    assert "2 hard links" in run.err and "engine/core.py" in run.err
    assert image(root) == case.original and not (root / STATE / "journal.json").exists()
    other.unlink()
    assert run_forked(case.args("apply", root)).code == 0


ACL_XATTR = "system.posix_acl_access"


def _acl(*entries: tuple[int, int, int]) -> bytes:
    """A POSIX ACL in its xattr form: version 2, then (tag, perm, id) entries."""
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", tag, perm, uid) for tag, perm, uid in entries)


def _acl_users(blob: bytes) -> set[int]:
    """The named-user entries (tag 0x02) of an ACL xattr."""
    return {uid for tag, _, uid in struct.iter_unpack("<HHI", blob[4:]) if tag == 0x02}


def test_xattrs_and_acls_survive_a_replace(case: Case) -> None:
    root = case.fresh("xattrs")
    target = root / "engine" / "core.py"
    try:
        os.setxattr(target, "user.patchkit-test", b"kept")
    except OSError as exc:
        pytest.skip(f"no user xattrs here: {exc.strerror}")
    everyone = 0xFFFFFFFF
    acl = _acl((0x01, 6, everyone), (0x02, 4, 65534), (0x04, 4, everyone), (0x10, 4, everyone), (0x20, 4, everyone))
    try:
        os.setxattr(target, ACL_XATTR, acl)
        has_acl = True
    except OSError:
        has_acl = False  # a filesystem without POSIX ACLs: the user xattr is still checked
    assert run_forked(case.args("apply", root)).code == 0
    assert image(root) == case.patched
    assert os.getxattr(target, "user.patchkit-test") == b"kept"
    if has_acl:
        assert _acl_users(os.getxattr(target, ACL_XATTR)) == {65534}


@needs_root
def test_a_file_capability_is_dropped_and_the_attributes_after_it_are_kept(case: Case) -> None:
    """A content change drops a file's capability (security.capability), as the kernel does on a write, and
    carries every other extended attribute over, those listed after the capability too.

    Kills patchkit/workspace/disk.py:162:core/ReplaceContinueWithBreak#0 (the copy stopped at the capability:
    the attributes after it were lost)."""
    root = case.fresh("capability")
    target = root / "engine" / "core.py"
    cap = struct.pack("<IIIII", 0x02000000, 1 << 10, 0, 0, 0)  # VFS_CAP_REVISION_2: cap_net_bind_service
    others = ("security.z-patchkit", "security.a-patchkit")  # set before and after it, sorting after and before
    try:
        os.setxattr(target, others[0], b"kept z")
        os.setxattr(target, "security.capability", cap)
        os.setxattr(target, others[1], b"kept a")
    except OSError as exc:
        pytest.skip(f"no file capabilities or security xattrs here: {exc.strerror}")
    names = os.listxattr(target)
    assert max(names.index(n) for n in others) > names.index("security.capability"), names  # one comes after
    assert run_forked(case.args("apply", root)).code == 0
    assert image(root) == case.patched
    assert "security.capability" not in os.listxattr(target)
    assert [os.getxattr(target, n) for n in others] == [b"kept z", b"kept a"]


def test_a_writer_without_the_lock_is_caught_before_its_write_is_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.py").write_bytes(b"a = 1\n")
    (tmp_path / "b.py").write_bytes(b"b = 1\n")
    changes = [FileChange(rel, read_snapshot(tmp_path, rel), Snapshot(rel, data, 0o644))
               for rel, data in (("a.py", b"a = 2\n"), ("b.py", b"b = 2\n"))]
    real_fsync = Disk.fsync
    done = {"n": 0}

    def fsync_then_someone_writes(self: Disk, fd: int, name: str) -> None:
        real_fsync(self, fd, name)
        if name == "b.py" and not done["n"]:  # b's temp file is ready; another tool appends to b.py now
            done["n"] = 1
            with (tmp_path / "b.py").open("ab") as out:
                out.write(b"# appended by someone else\n")

    monkeypatch.setattr(Disk, "fsync", fsync_then_someone_writes)
    with pytest.raises(WriteFailedError, match="changed while patchkit was writing it"):
        commit_changes(tmp_path, changes)
    assert (tmp_path / "a.py").read_bytes() == b"a = 1\n"
    assert (tmp_path / "b.py").read_bytes() == b"b = 1\n# appended by someone else\n", "their write is kept"
    assert leftovers(tmp_path) == []


def test_a_waiter_is_told_who_holds_the_lock(tmp_path: Path) -> None:
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        with locked(tmp_path, 5):
            os.write(ready_w, b"x")
            time.sleep(1.6)
        os._exit(0)
    os.read(ready_r, 1)
    told: list[tuple[LockHolder | None, Path]] = []
    started = time.monotonic()
    with locked(tmp_path, 10, on_wait=lambda holder, path: told.append((holder, path))):
        waited = time.monotonic() - started
    os.waitpid(pid, 0)
    assert waited >= 1.0 and len(told) == 1
    holder, path = told[0]
    assert holder is not None and holder.pid == pid and holder.since.endswith("Z")
    assert path == tmp_path / STATE / "lock"
    assert (tmp_path / STATE / "lock").read_bytes() == b"", "released: the lock names nobody"
