"""The transaction: the one place that writes the engine tree.

`commit_changes`, under the root's exclusive lock and with SIGINT/SIGTERM held:

1. re-reads every file the plan was made from: each must be as planned, a regular file, with one link if it
   is to be replaced (a stale bytecode cache is not read: patchkit.plan.bytecode);
2. checks free space and inodes on every filesystem it will write (statvfs, with a margin);
3. writes the journal (journal.py) atomically and durably;
4. for each path: links the original to a random `.patchkit-<hex>.orig` name in its folder (so a rollback
   is a rename, needing no space), writes an exclusive random temp file, gives it the original's owner
   (when root) and xattrs, fchmods it to the new mode, fsyncs it, checks right before the replace that the
   original is still the file it planned from (inode, size, mtime), and os.replaces it over the old name.
   Creations and modifications first, deletions last; a stale cache is deleted by renaming it to its kept
   name instead (no copy in the journal, no link needed). A pending SIGINT/SIGTERM is noticed between files;
5. checks, after the last replace, that every write landed: walked again by name from the root (the one
   deliberate fresh look, see check_landed), each path must be the very file just written; a folder moved
   out of the tree meanwhile is caught here (the writes went through its held descriptor, outside the root);
6. drops the kept links, removes folders the deletions emptied (like git apply), fsyncs every changed
   folder once, and unlinks the journal: from here on the transaction is done.

Each folder written in is opened once and its descriptor held to the end (HELD_FOLDERS_MAX), so a rollback
restores a file through the folder it was written in, wherever that folder is by then.

An I/O error, a file changed behind its back, a write that did not land, or a signal during 4-6 is rolled
back in-process (recovery.roll_back) before the error is raised; a kill leaves the journal for the next run.

Modes: a new file gets exactly the diff's mode (0644/0755), a new folder 0755, set by fchmod whatever the
umask; a rewritten file keeps its rwx bits (or takes the diff's new mode) and loses setuid, setgid and
sticky, like git; as root it keeps its owner and group.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from patchkit.errors import PatchkitError, RecoveryFailedError, UnsafePathError, WriteFailedError
from patchkit.input.tree import (
    STATE_DIR,
    Root,
    Snapshot,
    open_child_dir,
    open_folder,
    split_relative,
    trim_chain,
)
from patchkit.workspace.disk import PERMISSION_BITS, Disk, lstat_at, put_file, random_name
from patchkit.workspace.folders import (
    FolderGone,
    Roots,
    describe,
    drop_journal,
    fsync_folder,
    open_parent,
    open_roots,
    read,
)
from patchkit.workspace.interrupts import interrupt_pending, signals_held
from patchkit.workspace.journal import (
    Area,
    Entry,
    Original,
    Target,
    check_state_name,
    check_tree_path,
    journal_chunks,
)
from patchkit.workspace.names import GITIGNORE_NAME, JOURNAL_NAME
from patchkit.workspace.recovery import HeldFolders, finish, roll_back
from patchkit.workspace.trust import JOURNAL_MODE, STATE_FILE_MODE, read_state_at

if TYPE_CHECKING:
    from patchkit.plan.plan import FileChange  # only its fields are read: the workspace does not depend on the plan

_NO_STATE_FILES: Mapping[str, bytes | None] = {}
# Free space and inodes a transaction leaves untouched on each filesystem, on top of what it needs.
SPACE_MARGIN = 1 << 20
INODE_MARGIN = 16
_BLOCK = 4096
# Filesystems without hard links: the journal's copy is the only way back there.
_NO_LINKS = (errno.EPERM, errno.EMLINK, errno.EXDEV, errno.ENOTSUP, errno.EOPNOTSUPP)


_WALK_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# At most this many folder descriptors are held through a transaction (one per folder it writes in); the
# folders past it are walked to by name for each file, as before, and restored that way.
HELD_FOLDERS_MAX = 256


class _WriteFault(Exception):
    """A write that went wrong in a way of its own (not an I/O error): rolled back, then `reported` as the
    WriteFailedError the run fails with. `restored`: the last entry's original is back at its name already."""

    restored = False

    def reported(self, failed: Path) -> WriteFailedError:
        raise NotImplementedError


class _Changed(_WriteFault):
    """A file changed between the plan check and its replace (a writer without the lock). `restored`: seen only
    after the replace or unlink, and its (changed) original already renamed back, so the rollback leaves it."""

    def __init__(self, path: str, *, restored: bool = False) -> None:
        super().__init__(path)
        self.restored = restored

    def reported(self, failed: Path) -> WriteFailedError:
        return WriteFailedError(
            f"{self} changed while patchkit was writing it (another process wrote it without patchkit's "
            "lock); the tree was restored, nothing changed by patchkit",
            where=str(failed),
            hint="stop the other writer, then rerun",
        )


class _NotLanded(_WriteFault):
    """After the last replace, a written path is not (or no longer) the file written there, seen from the root; or
    (`unbegun`) the last entry's folder was gone before its write began: nothing of it to undo, and undoing it
    would write its original back into folders made again in the tree."""

    def __init__(self, path: Path, why: str, *, unbegun: bool = False) -> None:
        super().__init__(f"{path}: {why}")
        self.path = path
        self.why = why
        self.restored = unbegun

    def reported(self, failed: Path) -> WriteFailedError:
        return WriteFailedError(
            f"the write did not land in the tree: {self.why}; every file of this transaction was restored "
            "through the folders it wrote in (wherever they are now), nothing changed by patchkit",
            where=str(self.path),
            hint="something moved or replaced folders of the tree while patchkit wrote (its owner, another "
            "tool): stop it, check the tree, then rerun",
        )


@dataclass(frozen=True)
class _Landed:
    """Where one entry's write went: its folder's identity, and the new file's (None for a deletion)."""

    folder: tuple[int, int]
    file: tuple[int, int] | None


def commit_changes(
    root: Root,
    changes: Sequence[FileChange],
    *,
    state_files: Mapping[str, bytes | None] = _NO_STATE_FILES,
    label: str = "write",
) -> None:
    """Write every change, then every state file, or none of them. Call under the exclusive lock.

    `state_files` are paths under `<root>/.patchkit` (e.g. "applied/<id>.json"; None deletes one), written in
    the same transaction after the tree. `label` names the transaction in a later recovery report.
    On an I/O error the tree is restored and WriteFailedError raised (RecoveryFailedError if even the
    restore fails; the journal then stays for the next run to finish).
    """
    ordered = sorted(changes, key=lambda c: not c.after.exists)  # deletions last: folders empty only then
    for change in ordered:
        try:
            check_tree_path(change.path)
        except ValueError:
            raise UnsafePathError(
                f"{change.path!r} is inside .git or {STATE_DIR}; the tree diff may not write there"
            ) from None
    for name in state_files:
        try:
            check_state_name(name)
        except ValueError as exc:
            raise UnsafePathError(str(exc), where=str(root.state_path)) from None
    with open_roots(root, create=True) as roots:
        assert roots is not None
        ensure_gitignore(roots)
        entries: list[Entry] = []
        contents: list[bytes | None] = []
        ctimes: dict[tuple[Area, str], int] = {}  # each original's ctime as judged (not journaled: see _write_entry)
        for change in ordered:
            # An unread cache (patchkit.plan.bytecode) is checked by its lstat in _entry and right before its rename.
            now = change.before if change.before.unread else read(roots, Area.TREE, change.path)
            if now != change.before:  # the plan must still describe the tree
                raise WriteFailedError(
                    f"{change.path} changed while the plan was being made; nothing was written",
                    where=str(root.path),
                    hint="another tool wrote to the tree without patchkit's lock; rerun",
                )
            # change.before, not `now`: equal bytes, and the copy just read is freed at once (a large apply would
            # otherwise hold every original twice: ~24 MB of its peak on the benchmark's large series).
            entries.append(_entry(roots, Area.TREE, change.before, change.after, ctimes))
            del now
            contents.append(change.after.data)
        for name, data in state_files.items():
            now = read_state_at(roots.state_fd, roots.path(Area.STATE), name)
            mode = (now.mode if now.mode is not None else STATE_FILE_MODE) if data is not None else None
            if (now.data, now.mode) == (data, mode):
                continue
            entries.append(_entry(roots, Area.STATE, now, Snapshot(name, data, mode), ctimes))
            contents.append(data)
        if entries:
            try:
                with signals_held():
                    check_free_space(roots, entries, contents)
                    _transact(roots, Disk(), label, entries, contents, ctimes)
            except KeyboardInterrupt as exc:  # SIGINT/SIGTERM, delivered once the transaction is over
                if isinstance(exc.__context__, RecoveryFailedError):
                    raise exc.__context__ from None  # the journal is kept: that matters more than the signal
                done = exc.__context__ is None
                exc.args = ("the write had already completed" if done else "the write in progress was rolled back",)
                raise


def ensure_gitignore(roots: Roots) -> None:
    """`.patchkit/.gitignore` with `*`, so the state never shows up in `git status`. Not journaled: a failure
    (a full disk, a temp file that is not a fresh one of ours) is a WriteFailedError before anything changed."""
    if lstat_at(roots.state_fd, GITIGNORE_NAME) is None:
        try:
            put_file(Disk(faults=False), roots.state_fd, GITIGNORE_NAME, b"*\n", STATE_FILE_MODE)
        except OSError as exc:
            raise WriteFailedError(
                f"cannot write {GITIGNORE_NAME}: {exc.strerror}; nothing was changed",
                where=str(roots.path(Area.STATE) / GITIGNORE_NAME),
                hint="free disk space or fix permissions, then rerun",
            ) from None


def _entry(roots: Roots, area: Area, before: Snapshot, after: Snapshot, ctimes: dict[tuple[Area, str], int]) -> Entry:
    parts = split_relative(before.path)
    folders: list[tuple[str, int | None]] = []
    fd: int | None = os.dup(roots.fd(area))
    shown = roots.path(area)
    original = None
    try:
        for i, part in enumerate(parts[:-1]):
            shown = shown / part
            mode = None
            if fd is not None:
                child = open_child_dir(fd, part, before.path, str(shown))
                os.close(fd)
                fd = child
                if fd is not None:
                    mode = os.fstat(fd).st_mode & 0o7777
            folders.append(("/".join(parts[: i + 1]), mode))
        if before.exists:
            if fd is None:  # an unread cache's folder went away: it was only ever lstat'ed
                raise WriteFailedError(f"{before.path} vanished while the plan was being made; nothing was written",
                                       where=str(shown / parts[-1]), hint="rerun")
            st = lstat_at(fd, parts[-1])
            if st is None or not stat.S_ISREG(st.st_mode):
                raise WriteFailedError(f"{before.path} vanished while the plan was being made; nothing was written",
                                       where=str(shown / parts[-1]), hint="rerun")
            # Deleting one name of a hard-linked file changes nothing under its other names: only a replace splits
            # them (and a hard-linked stale cache must not block the apply).
            if st.st_nlink > 1 and after.exists:
                raise UnsafePathError(
                    f"{before.path!r} has {st.st_nlink} hard links; a replace would split them (the other names "
                    "would keep the old content); nothing was written",
                    where=str(roots.path(area) / before.path),
                    hint="break the link (cp the file over itself) or patch the tree the links point into",
                )
            original = Original(st.st_uid, st.st_gid, st.st_ino, st.st_size, st.st_mtime_ns)
            ctimes[(area, before.path)] = st.st_ctime_ns
    finally:
        if fd is not None:
            os.close(fd)
    target = None
    if after.data is not None:
        assert after.mode is not None
        target = Target(hashlib.sha256(after.data).hexdigest(), after.mode & PERMISSION_BITS)
    return Entry(area, before.path, before, target, tuple(folders), random_name("tmp"), random_name("orig"), original)


def check_free_space(roots: Roots, entries: Sequence[Entry], contents: Sequence[bytes | None]) -> None:
    """Refuse before writing anything when a filesystem lacks the space or inodes the transaction needs.

    Needed: the journal (every original, on the state folder's filesystem), and per file its new content
    (the original stays until the end) and one inode, plus each new folder; with SPACE_MARGIN/INODE_MARGIN.
    The restore path needs neither (it renames the kept originals back).
    """
    journal_bytes = sum(len(e.before.data or b"") for e in entries) + 4096 + 512 * len(entries)
    need: dict[int, list[int]] = {}  # st_dev -> [bytes, inodes, a descriptor to statvfs]
    shown: dict[int, Path] = {}
    opened: list[int] = []
    try:
        def add(fd: int, where: Path, size: int, inodes: int) -> None:
            dev = os.fstat(fd).st_dev
            if dev not in need:
                need[dev] = [0, 0, os.dup(fd)]
                opened.append(need[dev][2])
                shown[dev] = where
            need[dev][0] += size
            need[dev][1] += inodes

        add(roots.state_fd, roots.path(Area.STATE), _blocks(journal_bytes), 1)
        for entry, data in zip(entries, contents, strict=True):
            if data is None:
                continue
            fd, where, missing = _deepest_folder(roots, entry)
            try:
                add(fd, where, _blocks(len(data)) + missing * _BLOCK, 1 + missing)
            finally:
                os.close(fd)
        privileged = os.geteuid() == 0
        for dev, (size, inodes, fd) in need.items():
            vfs = os.fstatvfs(fd)
            free = (vfs.f_bfree if privileged else vfs.f_bavail) * vfs.f_frsize
            free_inodes = vfs.f_ffree if privileged else vfs.f_favail
            short_space = size + SPACE_MARGIN > free
            short_inodes = vfs.f_files > 0 and inodes + INODE_MARGIN > free_inodes  # 0: no inode limit (btrfs)
            if short_space or short_inodes:
                raise WriteFailedError(
                    f"not enough room on the filesystem: this write needs {size} bytes and {inodes} inodes plus a "
                    f"margin of {SPACE_MARGIN} bytes and {INODE_MARGIN} inodes; {free} bytes and "
                    f"{free_inodes} inodes are free; nothing was changed",
                    where=str(shown[dev]),
                    hint="free space (or inodes) on that filesystem, then rerun",
                )
    finally:
        for fd in opened:
            os.close(fd)


def _blocks(size: int) -> int:
    return -(-size // _BLOCK) * _BLOCK


def _deepest_folder(roots: Roots, entry: Entry) -> tuple[int, Path, int]:
    """The deepest existing folder on the entry's way, its path, and how many folders are still missing."""
    fd = os.dup(roots.fd(entry.area))
    where = roots.path(entry.area)
    folders = entry.parts[:-1]
    for i, part in enumerate(folders):
        child = open_child_dir(fd, part, entry.path, str(where / part))
        if child is None:
            return fd, where, len(folders) - i
        os.close(fd)
        fd = child
        where = where / part
    return fd, where, 0


def _transact(
    roots: Roots, disk: Disk, label: str, entries: Sequence[Entry], contents: Sequence[bytes | None],
    ctimes: Mapping[tuple[Area, str], int],
) -> None:
    journal = roots.path(Area.STATE) / JOURNAL_NAME
    try:
        chunks = journal_chunks(roots.root, os.fstat(roots.tree_fd).st_ino, label, entries)
        put_file(disk, roots.state_fd, JOURNAL_NAME, chunks, JOURNAL_MODE)
    except OSError as exc:
        with contextlib.suppress(OSError):  # the replace may have happened before the fsync failed
            drop_journal(roots, Disk(faults=False))
        raise WriteFailedError(
            f"cannot write the journal: {exc.strerror}; nothing was changed",
            where=str(journal),
            hint="free disk space or fix permissions, then rerun",
        ) from None
    held: dict[tuple[Area, tuple[str, ...]], int] = {}
    try:
        _write_all(roots, disk, journal, entries, contents, held, ctimes)
    finally:
        for fd in held.values():
            os.close(fd)


def _write_all(
    roots: Roots, disk: Disk, journal: Path, entries: Sequence[Entry], contents: Sequence[bytes | None],
    held: dict[tuple[Area, tuple[str, ...]], int], ctimes: Mapping[tuple[Area, str], int],
) -> None:
    """Steps 4-6 once the journal is written: every entry, the check that each landed, then the clean-up.

    Any failure before the last check passed, a KeyboardInterrupt or a bug too, first undoes what was begun
    (_undo_begun); a fault of the write itself is then reported as its WriteFailedError (_WriteFault.reported,
    _io_failure), anything else is raised as it is. Past the check the transaction only goes forward."""
    begun = _Begun(journal)
    try:
        landed = _write_entries(roots, disk, entries, contents, held, ctimes, begun)
        begun.failed = journal
        check_landed(roots, entries, contents, landed)
    except _WriteFault as exc:
        _undo_begun(roots, disk, held, begun.to_undo(exc.restored), exc, begun.failed)
        raise exc.reported(begun.failed) from None
    except OSError as exc:
        _undo_begun(roots, disk, held, begun.to_undo(), exc, begun.failed)
        raise _io_failure(exc, begun.failed) from None
    except BaseException as exc:  # the pending signal's refusal, a KeyboardInterrupt, a bug: undone, then raised
        _undo_begun(roots, disk, held, begun.to_undo(), exc, begun.failed)
        raise
    _complete_or_keep_journal(roots, disk, journal, entries, begun.dirty, held)
    _check_deleted_stay_deleted(roots, entries)


@dataclass
class _Begun:
    """What a write in progress has begun, for its undo and its error messages."""

    failed: Path  # what to name if writing fails: the entry being written, else the journal
    touched: list[Entry] = field(default_factory=list)  # every entry begun, but a deletion whose folder was gone
    dirty: set[tuple[Area, tuple[str, ...]]] = field(default_factory=set)  # folders to fsync at the end

    def to_undo(self, last_restored: bool = False) -> list[Entry]:
        """The entries to roll back: all begun, but the last one when its changed original is back at its name
        already (_Changed.restored: theirs, not to be rolled back)."""
        return self.touched[:-1] if last_restored else self.touched


def _write_entries(
    roots: Roots, disk: Disk, entries: Sequence[Entry], contents: Sequence[bytes | None],
    held: dict[tuple[Area, tuple[str, ...]], int], ctimes: Mapping[tuple[Area, str], int], begun: _Begun,
) -> list[_Landed | None]:
    """Step 4: every entry in order (_write_entry), noting in `begun` what each began; a pending SIGINT/SIGTERM
    stops it between two files (WriteFailedError, after which the caller undoes what was begun)."""
    landed: list[_Landed | None] = []
    for entry, data in zip(entries, contents, strict=True):
        if interrupt_pending():
            raise WriteFailedError("interrupted by a signal; the tree was restored, nothing changed")
        begun.failed = roots.path(entry.area) / entry.path
        begun.touched.append(entry)
        landed.append(_write_entry(roots, disk, entry, data, held, ctimes.get((entry.area, entry.path))))
        if landed[-1] is None:
            begun.touched.pop()
        begun.dirty.add((entry.area, entry.parts[:-1]))
    return landed


def _undo_begun(
    roots: Roots, disk: Disk, held: HeldFolders, touched: Sequence[Entry], exc: BaseException, failed: Path
) -> None:
    """Roll back the entries begun and drop the journal; if that fails too, RecoveryFailedError: the journal is
    kept for the next run. Only what was begun: an entry never reached is as it was, and a path whose folder
    went away (moved out by its owner) must not be recreated in the tree from the journal."""
    try:
        roll_back(roots, disk, touched, held)
        drop_journal(roots, disk)
    except (OSError, PatchkitError) as again:
        raise RecoveryFailedError(
            f"writing failed ({describe(exc)}) and so did restoring the tree ({describe(again)}); "
            "the journal is kept",
            where=str(failed),
            hint="fix the cause (disk space, permissions), then run any patchkit command on this root: "
            "it rolls the tree back first",
        ) from None


def _io_failure(exc: OSError, failed: Path) -> WriteFailedError:
    """An I/O error while writing, once the tree was restored."""
    return WriteFailedError(
        f"writing failed: {exc.strerror}; the tree was restored, nothing changed",
        where=str(failed),
        hint="free disk space or fix permissions, then rerun",
    )


def _complete_or_keep_journal(
    roots: Roots, disk: Disk, journal: Path, entries: Sequence[Entry], dirty: set[tuple[Area, tuple[str, ...]]],
    held: HeldFolders,
) -> None:
    """Step 6 (_complete), retried once on failure; failing again, RecoveryFailedError with the journal kept.

    Every file is in place and fsynced: from here the transaction only goes forward. The clean-up needs no space
    (unlinks, rmdirs, fsyncs), so one failure is retried once; if it fails again the journal stays and the next
    run finishes it (it finds every new file in place)."""
    try:
        _complete(roots, disk, entries, dirty, held)
    except (OSError, PatchkitError) as exc:
        try:
            _complete(roots, disk, entries, dirty, held)
        except (OSError, PatchkitError) as again:
            raise RecoveryFailedError(
                f"every file was written, but finishing the transaction failed ({describe(exc)}; then "
                f"{describe(again)}); the journal is kept",
                where=str(journal),
                hint="fix the cause, then run any patchkit command on this root: it completes the transaction",
            ) from None


def _check_deleted_stay_deleted(roots: Roots, entries: Sequence[Entry]) -> None:
    """Once done: WriteFailedError if a file this change deleted was created again meanwhile (_deleted_but_back)."""
    back = _deleted_but_back(roots, entries)
    if back is not None:
        raise WriteFailedError(
            f"the write completed, but {back}, which this change deletes, was created again by another process "
            "while patchkit finished (after its check of every path): that file is theirs and was kept, so the "
            "tree does not read as patchkit left it",
            where=str(roots.path(Area.TREE) / back),
            hint="stop the other writer, look at the file, then rerun (`status -v` shows what the tree holds)",
        )


def _deleted_but_back(roots: Roots, entries: Sequence[Entry]) -> str | None:
    """The first path of the tree this transaction deleted that holds a file again, walked by name from the
    root once the transaction is done (a run must not exit 0 on a tree it did not leave so)."""
    for entry in entries:
        if entry.area is Area.TREE and entry.after is None and not entry.before.unread:
            parts = entry.parts
            folder = open_folder(roots.tree_fd, roots.root, parts[:-1], entry.path)
            if folder is None:
                continue
            try:
                if lstat_at(folder, parts[-1]) is not None:
                    return entry.path
            finally:
                os.close(folder)
    return None


def _complete(
    roots: Roots, disk: Disk, entries: Sequence[Entry], dirty: set[tuple[Area, tuple[str, ...]]], held: HeldFolders
) -> None:
    """Drop the kept links and emptied folders, make every changed folder durable, then drop the journal."""
    finish(roots, disk, entries, held)
    # Folder entries need to be durable only before the journal goes: fsync each changed folder once
    # at the end rather than after every file (half of all fsyncs on a large series).
    for area, folders in sorted(dirty, key=lambda d: (d[0].value, d[1])):
        fsync_folder(roots, disk, area, folders)
    drop_journal(roots, disk)


def _write_entry(
    roots: Roots, disk: Disk, entry: Entry, data: bytes | None, held: dict[tuple[Area, tuple[str, ...]], int],
    ctime: int | None = None,
) -> _Landed | None:
    """Write one entry through its folder's descriptor (opened once per folder and held, see HELD_FOLDERS_MAX);
    where the write went, or None for a deletion whose folder is already gone.

    The original is checked before its kept link is made (inode, size, mtime, the judged `ctime`), then, pinned by
    the link, its bytes against the judged ones (an in-place edit that put the mtime back is seen there), then
    right before the replace or unlink (inode, size, mtime, and the ctime from before that read, which no user
    can set back); and after the replace or unlink, through the kept link, its size and mtime again: an edit that
    landed in between is not lost, the original (with that edit) is renamed back and the run fails."""
    parts = entry.parts
    name = parts[-1]
    key = (entry.area, parts[:-1])
    parent = held.get(key)
    transient = parent is None
    if parent is None:
        # Only the folders the plan found absent are made: one it found there and that is gone now was moved or
        # removed meanwhile (by the tree's owner), and making it again would leave new folders in the tree.
        create = None if data is None else {folder: mode for folder, mode in entry.folders if mode is None}
        try:
            parent = open_parent(roots, entry.area, parts[:-1], entry.path, disk, create=create)
        except FolderGone:
            raise _NotLanded(roots.path(entry.area) / entry.path,
                             "its folder is no longer under the root (moved or removed while patchkit wrote)",
                             unbegun=True) from None
        if parent is None:  # a deletion whose folder is already gone
            return None
        if len(held) < HELD_FOLDERS_MAX:
            held[key] = parent
            transient = False
    folder_st = os.fstat(parent)
    like: int | None = None
    new: list[tuple[int, int]] = []
    try:
        if entry.before.unread:  # a stale cache: renamed to its kept name, the way back needs no copy, no link
            assert data is None
            _check_unchanged(parent, entry)
            disk.replace(parent, name, entry.keep)
            return _Landed((folder_st.st_dev, folder_st.st_ino), None)
        if entry.original is not None:
            _check_unchanged(parent, entry, ctime)
            _keep_original(disk, parent, entry)
            ctime = _judged_bytes(parent, entry)  # pinned by the link: still the bytes judged? (the link moved ctime)
        if data is None:
            _check_unchanged(parent, entry, ctime)
            disk.unlink(parent, name)
            _check_kept(disk, parent, entry)
            return _Landed((folder_st.st_dev, folder_st.st_ino), None)
        assert entry.after is not None
        owner = None
        if entry.original is not None:
            like = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent)
            owner = (entry.original.uid, entry.original.gid)

        def before_replace() -> None:
            _check_unchanged(parent, entry, ctime)
            st = lstat_at(parent, entry.temp)
            new.append((-1, -1) if st is None else (st.st_dev, st.st_ino))

        put_file(
            disk, parent, name, data, entry.after.mode, tmp=entry.temp, owner=owner, like_fd=like,
            before_replace=before_replace, sync_folder=False,
        )
        if entry.original is not None:
            _check_kept(disk, parent, entry)
        return _Landed((folder_st.st_dev, folder_st.st_ino), new[-1])
    finally:
        if like is not None:
            os.close(like)
        if transient:
            os.close(parent)


def check_landed(
    roots: Roots, entries: Sequence[Entry], contents: Sequence[bytes | None], landed: Sequence[_Landed | None]
) -> None:
    """After the last replace: every path is, seen from the root, what this transaction just made of it.

    A fresh look on purpose, the one place that does not trust the descriptors the transaction holds: those
    still reach a folder moved out of the root meanwhile, and writes through them land outside it. So the root's
    path must still name the root, and each path is walked again by name from the root, link-free, as the next
    command will walk it: its folder must be the one written in, a written file the very file written (its
    identity, then its bytes and mode against what was written), a deleted one absent.
    """
    try:
        now = os.stat(roots.root)
        same_root = (now.st_dev, now.st_ino) == _identity(os.fstat(roots.tree_fd))
    except OSError:
        same_root = False
    if not same_root:
        raise _NotLanded(roots.root, "the root's path no longer names the folder patchkit wrote in (moved or replaced)")
    chain: list[tuple[str, int]] = []  # the folders open from the root down, kept for the next path (sorted)
    try:
        for entry, data, land in zip(entries, contents, landed, strict=True):
            if land is not None:
                parts = entry.parts
                folders = parts[:-1] if entry.area is Area.TREE else (STATE_DIR, *parts[:-1])  # .patchkit too
                why = _landed_here(roots.tree_fd, chain, folders, parts[-1], data, entry, land)
                if why is not None:
                    raise _NotLanded(roots.path(entry.area) / entry.path, why)
    finally:
        for _, fd in chain:
            os.close(fd)


def _landed_here(
    root_fd: int, chain: list[tuple[str, int]], folders: tuple[str, ...], name: str, data: bytes | None,
    entry: Entry, land: _Landed,
) -> str | None:
    """Why `folders/name`, walked by name from the root (link-free, reusing `chain`), is not what was written."""
    kept = trim_chain(chain, folders)
    for part in folders[kept:]:
        try:
            child = os.open(part, _WALK_FLAGS, dir_fd=chain[-1][1] if chain else root_fd)
        except FileNotFoundError:
            return "its folder is no longer under the root (moved or removed while patchkit wrote)"
        except OSError as exc:
            return f"its folder cannot be walked to from the root ({exc.strerror})"
        chain.append((part, child))
    folder = chain[-1][1] if chain else root_fd
    if _identity(os.fstat(folder)) != land.folder:
        return "its folder was moved or replaced while patchkit wrote in it"
    st = lstat_at(folder, name)
    if land.file is None:
        return None if st is None else "it was deleted, but a file is back at its name"
    if st is None or _identity(st) != land.file:
        return "the file at its name is not the one patchkit just wrote"
    assert data is not None and entry.after is not None
    if not stat.S_ISREG(st.st_mode) or stat.S_IMODE(st.st_mode) != entry.after.mode or st.st_size != len(data):
        return "its size or mode is not what patchkit just wrote"
    # The bytes themselves, against the ones written: one read of the expected size, then a comparison.
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
    except OSError as exc:
        return f"it cannot be read back ({exc.strerror})"
    try:
        if _identity(os.fstat(fd)) != land.file:
            return "the file at its name is not the one patchkit just wrote"
        found = os.pread(fd, len(data) + 1, 0)  # an empty file too: one byte there is not what was written
        while data and len(found) < len(data) + 1:  # a short read (rare): read on to the end
            more = os.pread(fd, len(data) + 1 - len(found), len(found))
            if not more:
                break
            found += more
    except OSError as exc:
        return f"it cannot be read back ({exc.strerror})"
    finally:
        os.close(fd)
    return None if found == data else "its content is not what patchkit just wrote"


def _identity(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def _keep_original(disk: Disk, parent: int, entry: Entry) -> None:
    """Hard-link the original to the entry's keep name: a rollback then renames it back."""
    try:
        disk.link(parent, entry.parts[-1], entry.keep)
    except OSError as exc:
        if exc.errno not in _NO_LINKS:
            raise
        # No hard links here: a rollback writes the journal's copy instead.


def _check_unchanged(parent: int, entry: Entry, ctime: int | None = None) -> None:
    """Right before a replace or unlink: the name still holds the file planned from (or is still absent): its
    inode, size, mtime and (given) ctime, which no user can set back (an edit can put the mtime back)."""
    st = lstat_at(parent, entry.parts[-1])
    o = entry.original
    if o is None:
        if st is not None:
            raise _Changed(entry.path)
        return
    if st is None or (st.st_ino, st.st_size, st.st_mtime_ns) != (o.ino, o.size, o.mtime_ns):
        raise _Changed(entry.path)
    if ctime is not None and st.st_ctime_ns != ctime:
        raise _Changed(entry.path)


def _judged_bytes(parent: int, entry: Entry) -> int:
    """Once the kept link pins the original: it still holds exactly the bytes judged (an edit that put the mtime
    back, made before the link, shows here), and its ctime from before that read, for the later checks."""
    st = _as_judged(parent, entry.parts[-1], entry)
    if st is None:
        raise _Changed(entry.path)
    return st.st_ctime_ns


def _as_judged(parent: int, name: str, entry: Entry) -> os.stat_result | None:
    """The stat of `name` when it is the original's inode holding exactly the bytes judged; else None (another
    file or a link at the name, another size, other bytes)."""
    o = entry.original
    assert o is not None and entry.before.data is not None
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a link put at the name: another file, not an I/O error
            return None
        raise
    try:
        st = os.fstat(fd)
        if st.st_ino != o.ino or st.st_size != len(entry.before.data):
            return None
        found = b""
        while len(found) <= st.st_size and (more := os.pread(fd, st.st_size + 1 - len(found), len(found))):
            found += more
    finally:
        os.close(fd)
    return st if found == entry.before.data else None


def _check_kept(disk: Disk, parent: int, entry: Entry) -> None:
    """Right after a replace or unlink: the original, still there by its kept link, is as judged (its size, its
    mtime, its bytes: an edit in place that put the mtime back changes only the ctime, which the replace itself
    moves): an edit that landed between the last check and the replace is kept by renaming it back, then the
    run fails."""
    o = entry.original
    assert o is not None
    kept = lstat_at(parent, entry.keep)
    if kept is None or kept.st_ino != o.ino:  # no link on this filesystem (or not ours): nothing to look at
        return
    if (kept.st_size, kept.st_mtime_ns) != (o.size, o.mtime_ns) or _as_judged(parent, entry.keep, entry) is None:
        if entry.after is None and lstat_at(parent, entry.parts[-1]) is not None:
            raise _Changed(entry.path)  # deleted, and a file is back at its name: never overwritten by ours
        disk.replace(parent, entry.keep, entry.parts[-1])
        raise _Changed(entry.path, restored=True)

