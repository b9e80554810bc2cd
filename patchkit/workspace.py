"""The only module that writes to the engine tree: a lock, a journal, then atomic per-file replaces.

A transaction (`commit_changes`), under the root's exclusive lock:

1. re-reads every file the plan was made from: each must be as planned;
2. writes `<root>/.patchkit/journal.json` atomically (temp file, fsync, os.replace, fsync of the folder): for
   every path about to change, its original bytes and mode (or "absent"), the sha256 and mode it will have,
   and the mode of each folder on its way (or "absent");
3. replaces each file: a temp file in the same folder, written, chmodded, fsynced, os.replace'd over the old
   one, folder fsynced. Creations and modifications go first, deletions last; a deletion that empties a
   folder removes it, like `git apply`. Then the state files under .patchkit, the same way;
4. unlinks the journal and fsyncs .patchkit: from here on the transaction is done.

If the process dies during 3 or 4, the journal survives, and the next patchkit run on the root finds it under
the lock (`locked` calls `recover`) and puts every file and folder back to its original bytes and mode -- or,
when every new file was already in place, only finishes the clean-up. Recovery skips what is already
restored and drops the journal last, so a kill during recovery is recovered by the run after. An I/O error
during 3 or 4 is rolled back the same way, in-process, before the error is raised.

Every path is walked through folder descriptors opened with O_NOFOLLOW (tree.open_child_dir): no write goes
through a symlink, wherever it points, and nothing outside the root is ever opened for writing.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import signal
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from types import MappingProxyType
from typing import Any

from patchkit.errors import (
    LockTimeoutError,
    PatchkitError,
    RecoveryFailedError,
    UnsafePathError,
    WriteFailedError,
)
from patchkit.plan import FileChange
from patchkit.rewrite import new_file_mode
from patchkit.tree import (
    STATE_DIR,
    Snapshot,
    check_root,
    open_child_dir,
    open_root,
    read_at,
    read_snapshot,
    split_relative,
)

LOCK_NAME = "lock"
JOURNAL_NAME = "journal.json"
GITIGNORE_NAME = ".gitignore"
TEMP_SUFFIX = ".patchkit-tmp"
DEFAULT_LOCK_TIMEOUT = 300.0
JOURNAL_FORMAT = 2  # a JSON header line, then the original files' raw bytes

# Test-only fault injection, documented in docs/safety.md.
FAULT_AFTER_ENV = "PATCHKIT_FAULT_AFTER"
FAULT_ERRNO_ENV = "PATCHKIT_FAULT_ERRNO"

_NO_STATE_FILES: Mapping[str, bytes | None] = MappingProxyType({})
_RESERVED_STATE_NAMES = {LOCK_NAME, JOURNAL_NAME, GITIGNORE_NAME}


class Area(Enum):
    """Where a journaled path lives: the engine tree, or patchkit's own state folder inside it."""

    TREE = "tree"
    STATE = "state"


class Direction(Enum):
    BACK = "rolled back"
    FORWARD = "rolled forward"


@dataclass(frozen=True)
class Recovery:
    """What `recover` did about an interrupted transaction."""

    root: Path
    label: str  # e.g. "apply of demo-pr2106"
    direction: Direction
    files: int  # files rewritten (back) or found already complete (forward)

    @property
    def message(self) -> str:
        if self.direction is Direction.FORWARD:
            detail = f"completed it (all {self.files} files were already written)"
        elif self.files == 0:
            detail = "rolled back (no file had been changed yet)"
        else:
            detail = f"rolled back {self.files} file{'' if self.files == 1 else 's'}"
        return f"recovered an interrupted {self.label} on {self.root}: {detail}"


@dataclass(frozen=True)
class _Target:
    """A path's content after the transaction: None for absent."""

    sha256: str
    mode: int


@dataclass(frozen=True)
class _Entry:
    area: Area
    path: str  # relative to the area's folder
    before: Snapshot
    after: _Target | None
    folders: tuple[tuple[str, int | None], ...]  # each ancestor folder, top-down, with its mode (None: absent)

    @property
    def parts(self) -> tuple[str, ...]:
        return split_relative(self.path)


@dataclass(frozen=True)
class _Roots:
    root: Path
    tree_fd: int
    state_fd: int

    def fd(self, area: Area) -> int:
        return self.tree_fd if area is Area.TREE else self.state_fd

    def path(self, area: Area) -> Path:
        return self.root if area is Area.TREE else self.root / STATE_DIR


# ------------------------------------------------------------------------------------------- fault injection


class _Disk:
    """Every operation that changes the disk or makes it durable, counted so tests can fail or kill at each.

    Test-only: PATCHKIT_FAULT_AFTER=N SIGKILLs the process just before operation N+1 of a transaction (or of
    a recovery); with PATCHKIT_FAULT_ERRNO=<errno name> that operation raises that error instead, once.
    Unset, each operation costs one `is None` check.
    """

    def __init__(self, *, faults: bool = True) -> None:
        after = os.environ.get(FAULT_AFTER_ENV, "") if faults else ""
        self._left: int | None = int(after) if after.isdigit() else None
        name = os.environ.get(FAULT_ERRNO_ENV, "")
        code = getattr(errno, name, None) if name.startswith("E") else None
        self._errno: int | None = code if isinstance(code, int) else None

    def _tick(self, what: str) -> None:
        if self._left is None:
            return
        if self._left > 0:
            self._left -= 1
            return
        self._left = None
        if self._errno is None:
            os.kill(os.getpid(), signal.SIGKILL)
            raise AssertionError("unreachable: SIGKILL cannot be caught")
        raise OSError(self._errno, os.strerror(self._errno), what)

    def create(self, dir_fd: int, name: str) -> int:
        self._tick(name)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        return os.open(name, flags, 0o600, dir_fd=dir_fd)

    def write(self, fd: int, data: memoryview, name: str) -> int:
        self._tick(name)
        return os.write(fd, data)

    def fchmod(self, fd: int, mode: int, name: str) -> None:
        self._tick(name)
        os.fchmod(fd, mode)

    def fsync(self, fd: int, name: str) -> None:
        self._tick(name)
        os.fsync(fd)

    def replace(self, dir_fd: int, src: str, dst: str) -> None:
        self._tick(dst)
        os.replace(src, dst, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)

    def unlink(self, dir_fd: int, name: str) -> None:
        self._tick(name)
        os.unlink(name, dir_fd=dir_fd)

    def mkdir(self, dir_fd: int, name: str) -> None:
        self._tick(name)
        os.mkdir(name, 0o777, dir_fd=dir_fd)

    def rmdir(self, dir_fd: int, name: str) -> None:
        self._tick(name)
        os.rmdir(name, dir_fd=dir_fd)


# ----------------------------------------------------------------------------------------------------- lock


def state_dir(root: Path) -> Path:
    """`<root>/.patchkit`, created on demand with a .gitignore so it never shows up in `git status`."""
    root_fd = open_root(root)
    try:
        try:  # stat first: on a read-only tree mkdir of an existing folder may fail with EROFS
            os.stat(STATE_DIR, dir_fd=root_fd, follow_symlinks=False)
        except FileNotFoundError:
            with contextlib.suppress(FileExistsError):
                os.mkdir(STATE_DIR, 0o777, dir_fd=root_fd)
        fd = open_child_dir(root_fd, STATE_DIR, STATE_DIR, str(root / STATE_DIR))
    finally:
        os.close(root_fd)
    if fd is None:
        raise FileNotFoundError(errno.ENOENT, "vanished while being created", str(root / STATE_DIR))
    try:
        try:
            os.stat(GITIGNORE_NAME, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            # Not part of any transaction, and racing processes may all get here: a temp name of its own each.
            tmp = f".{GITIGNORE_NAME}.{os.getpid()}{TEMP_SUFFIX}"
            _put(_Disk(faults=False), fd, GITIGNORE_NAME, b"*\n", 0o644, tmp=tmp)
    finally:
        os.close(fd)
    return root / STATE_DIR


@contextlib.contextmanager
def locked(root: Path, timeout: float, *, shared: bool = False) -> Iterator[Recovery | None]:
    """Hold `<root>/.patchkit/lock` from the state check to the last write; yield what recovery did, if any.

    An interrupted transaction is recovered first, under the exclusive lock, before the caller looks at the
    tree. Readers (status) take a shared lock, upgraded only to recover, and skip the lock on a read-only
    tree, where no writer can run anyway -- unless a journal is waiting there, which is an error.
    """
    path = root / STATE_DIR / LOCK_NAME
    try:
        fd: int | None = _open_lock(root)
    except OSError as exc:
        pending = pending_label(root)
        if pending is not None:
            raise RecoveryFailedError(
                f"an interrupted {pending} left a journal, but the root cannot be written "
                f"({exc.strerror}), so the tree cannot be rolled back and may be half patched",
                where=str(root / STATE_DIR / JOURNAL_NAME),
                hint="make the tree writable and rerun any patchkit command on it; it recovers first",
            ) from None
        if not (shared and exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM)):
            raise WriteFailedError(
                f"cannot create the lock file: {exc.strerror}", where=str(root / STATE_DIR)
            ) from None
        fd = None
    try:
        recovery = None
        if fd is not None:
            _acquire(fd, path, timeout, shared)
            if _needs_recovery(root):
                if shared:  # flock converts the shared lock in place
                    _acquire(fd, path, timeout, False)
                recovery = recover(root)
        yield recovery
    finally:
        if fd is not None:
            os.close(fd)  # closing releases the flock


def recover_pending(root: Path, timeout: float) -> Recovery | None:
    """Recover an interrupted transaction on root, if its journal is there; cheap when there is none."""
    real_root = check_root(root)
    if not _needs_recovery(real_root):
        return None
    with locked(real_root, timeout) as recovery:
        return recovery


def pending_label(root: Path) -> str | None:
    """What the interrupted transaction on root was doing, or None when there is no journal."""
    if not os.path.lexists(root / STATE_DIR / JOURNAL_NAME):
        return None
    try:
        data = read_snapshot(root, f"{STATE_DIR}/{JOURNAL_NAME}").data or b""
        label = json.loads(data.partition(b"\n")[0]).get("label")
    except (OSError, ValueError, AttributeError, PatchkitError):
        label = None
    return label if isinstance(label, str) else "transaction"


def _needs_recovery(root: Path) -> bool:
    # A journal temp file alone means a kill while the journal was being written: nothing to undo, but
    # recover() clears it.
    folder = root / STATE_DIR
    return any(os.path.lexists(folder / name) for name in (JOURNAL_NAME, _temp_name(JOURNAL_NAME)))


def _open_lock(root: Path) -> int:
    state_dir(root)
    root_fd = open_root(root)
    try:
        fd = open_child_dir(root_fd, STATE_DIR, STATE_DIR, str(root / STATE_DIR))
    finally:
        os.close(root_fd)
    if fd is None:
        raise FileNotFoundError(errno.ENOENT, "vanished", str(root / STATE_DIR))
    try:
        return os.open(LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=fd)
    finally:
        os.close(fd)


def _acquire(fd: int, path: Path, timeout: float, shared: bool) -> None:
    flags = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB
    deadline = time.monotonic() + timeout
    delay = 0.01
    while True:
        try:
            fcntl.flock(fd, flags)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise LockTimeoutError(
                    f"another patchkit process has held the lock for over {timeout:g}s",
                    where=str(path),
                    hint="wait for it to finish, or raise --lock-timeout; "
                    "the lock is released automatically when that process exits",
                ) from None
            time.sleep(delay)
            delay = min(delay * 2, 0.2)


# ------------------------------------------------------------------------------------------------ transaction


def commit_changes(
    root: Path,
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
        if split_relative(change.path)[0] == STATE_DIR:
            raise UnsafePathError(f"{change.path!r} is inside {STATE_DIR}; the tree diff may not write there")
    for name in state_files:
        parts = split_relative(name)
        if parts[0] in _RESERVED_STATE_NAMES or parts[-1].endswith(TEMP_SUFFIX):
            raise UnsafePathError(f"state file name {name!r} is reserved by patchkit", where=str(root / STATE_DIR))
    state_dir(root)
    with _open_roots(root) as roots:
        entries: list[_Entry] = []
        contents: list[bytes | None] = []
        for change in ordered:
            now = _read(roots, Area.TREE, change.path)
            if now != change.before:  # the plan must still describe the tree
                raise WriteFailedError(
                    f"{change.path} changed while the plan was being made; nothing was written",
                    where=str(root),
                    hint="another tool wrote to the tree without patchkit's lock; rerun",
                )
            entries.append(_entry(roots, Area.TREE, now, change.after))
            contents.append(change.after.data)
        for name, data in state_files.items():
            now = _read(roots, Area.STATE, name)
            mode = (now.mode if now.mode is not None else new_file_mode(False)) if data is not None else None
            if (now.data, now.mode) == (data, mode):
                continue
            entries.append(_entry(roots, Area.STATE, now, Snapshot(name, data, mode)))
            contents.append(data)
        if entries:
            _transact(roots, _Disk(), label, entries, contents)


def _transact(
    roots: _Roots, disk: _Disk, label: str, entries: Sequence[_Entry], contents: Sequence[bytes | None]
) -> None:
    try:
        _put(disk, roots.state_fd, JOURNAL_NAME, _journal_chunks(label, entries), 0o600)
    except OSError as exc:
        with contextlib.suppress(OSError):  # the replace may have happened before the folder fsync failed
            os.unlink(JOURNAL_NAME, dir_fd=roots.state_fd)
        raise WriteFailedError(
            f"cannot write the journal: {exc.strerror}; nothing was changed",
            where=str(roots.path(Area.STATE) / JOURNAL_NAME),
            hint="free disk space or fix permissions, then rerun",
        ) from None
    failed = roots.path(Area.STATE) / JOURNAL_NAME  # what to name if writing fails
    try:
        # Folder entries need to be durable only before the journal goes: fsync each changed folder once
        # at the end rather than after every file (half of all fsyncs on a large series).
        dirty: set[tuple[Area, tuple[str, ...]]] = set()
        for entry, data in zip(entries, contents, strict=True):
            failed = roots.path(entry.area) / entry.path
            _write_entry(roots, disk, entry, data)
            dirty.add((entry.area, entry.parts[:-1]))
        for area, folders in sorted(dirty, key=lambda d: (d[0].value, d[1])):
            failed = roots.path(area).joinpath(*folders)
            _fsync_folder(roots, disk, area, folders)
        failed = roots.path(Area.STATE) / JOURNAL_NAME
        _drop_journal(roots, disk)
    except BaseException as exc:
        try:
            _roll_back(roots, disk, entries)
            _drop_journal(roots, disk)
        except (OSError, PatchkitError) as again:
            raise RecoveryFailedError(
                f"writing failed ({_describe(exc)}) and so did restoring the tree ({_describe(again)}); "
                "the journal is kept",
                where=str(failed),
                hint="fix the cause (disk space, permissions), then run any patchkit command on this root: "
                "it rolls the tree back first",
            ) from None
        if isinstance(exc, OSError):
            raise WriteFailedError(
                f"writing failed: {exc.strerror}; the tree was restored, nothing changed",
                where=str(failed),
                hint="free disk space or fix permissions, then rerun",
            ) from None
        raise


def _write_entry(roots: _Roots, disk: _Disk, entry: _Entry, data: bytes | None) -> None:
    parts = entry.parts
    if data is None:
        parent = _open_parent(roots, entry.area, parts[:-1], entry.path, disk, create=None)
        if parent is None:
            return
        try:
            disk.unlink(parent, parts[-1])  # the folder is fsynced at the end of the transaction
        except FileNotFoundError:
            return
        finally:
            os.close(parent)
        for folder, _ in reversed(entry.folders):  # like git apply: a deletion that empties a folder removes it
            if _rmdir_if_empty(roots, entry.area, folder, disk) is False:
                break
        return
    assert entry.after is not None
    parent = _open_parent(roots, entry.area, parts[:-1], entry.path, disk, create={})
    assert parent is not None
    try:
        _put(disk, parent, parts[-1], data, entry.after.mode, sync_folder=False)
    finally:
        os.close(parent)


def _fsync_folder(roots: _Roots, disk: _Disk, area: Area, folders: tuple[str, ...]) -> None:
    """fsync one folder a transaction changed (it may be gone: a deletion can empty and remove it)."""
    fd = _open_parent(roots, area, folders, "/".join(folders) or ".", disk, create=None) if folders else None
    if folders and fd is None:
        return
    try:
        disk.fsync(fd if fd is not None else roots.fd(area), folders[-1] if folders else ".")
    finally:
        if fd is not None:
            os.close(fd)


# ---------------------------------------------------------------------------------------------------- recovery


def recover(root: Path) -> Recovery | None:
    """Finish or undo the transaction an interrupted process left on root; None if there is none.

    Rolls forward (only cleans up) when every file already has its new content, else restores every file and
    folder to its original bytes and mode. The caller holds the exclusive lock.
    """
    root_fd = open_root(root)
    try:
        state_fd = open_child_dir(root_fd, STATE_DIR, STATE_DIR, str(root / STATE_DIR))
    except PatchkitError as exc:
        os.close(root_fd)
        raise RecoveryFailedError(f"cannot open the state folder: {exc}", where=str(root)) from None
    if state_fd is None:
        os.close(root_fd)
        return None
    roots = _Roots(root, root_fd, state_fd)
    disk = _Disk()
    try:
        raw = _read(roots, Area.STATE, JOURNAL_NAME)
        if raw.data is None:
            # Killed while writing the journal: the tree was never touched; only the temp file is left.
            with contextlib.suppress(FileNotFoundError):
                disk.unlink(state_fd, _temp_name(JOURNAL_NAME))
            return None
        label, entries = _parse_journal(raw.data, roots.path(Area.STATE) / JOURNAL_NAME)
        for entry in entries:
            _clear_temp(roots, disk, entry)
        if all(_matches(_read(roots, e.area, e.path), e.after) for e in entries):
            for entry in entries:
                if entry.after is None:
                    for folder, _ in reversed(entry.folders):
                        if _rmdir_if_empty(roots, entry.area, folder, disk) is False:
                            break
            direction, count = Direction.FORWARD, len(entries)
        else:
            direction, count = Direction.BACK, _roll_back(roots, disk, entries)
        _drop_journal(roots, disk)
    except (OSError, PatchkitError) as exc:
        if isinstance(exc, RecoveryFailedError):
            raise
        raise RecoveryFailedError(
            f"cannot recover the interrupted transaction: {_describe(exc)}; the journal is kept",
            where=str(root / STATE_DIR / JOURNAL_NAME),
            hint="fix the cause and rerun any patchkit command on this root, or restore the tree from the "
            "image and delete the journal",
        ) from None
    finally:
        os.close(state_fd)
        os.close(root_fd)
    return Recovery(root, label, direction, count)


def _roll_back(roots: _Roots, disk: _Disk, entries: Sequence[_Entry]) -> int:
    """Put every entry back to its original bytes and mode; returns how many needed rewriting."""
    rewritten = 0
    for entry in reversed(entries):
        _clear_temp(roots, disk, entry)
        before = entry.before
        if _same(_read(roots, entry.area, entry.path), before):
            continue
        rewritten += 1
        parts = entry.parts
        create = None if before.data is None else dict(entry.folders)
        parent = _open_parent(roots, entry.area, parts[:-1], entry.path, disk, create=create)
        if parent is None:
            continue
        try:
            if before.data is None:
                with contextlib.suppress(FileNotFoundError):
                    disk.unlink(parent, parts[-1])
                disk.fsync(parent, parts[-1])
            else:
                assert before.mode is not None
                _put(disk, parent, parts[-1], before.data, before.mode)
        finally:
            os.close(parent)
    created = {(e.area, folder) for e in entries for folder, mode in e.folders if mode is None}
    for area, folder in sorted(created, key=lambda item: item[1].count("/"), reverse=True):
        _rmdir_if_empty(roots, area, folder, disk)
    return rewritten


def _clear_temp(roots: _Roots, disk: _Disk, entry: _Entry) -> None:
    parts = entry.parts
    parent = _open_parent(roots, entry.area, parts[:-1], entry.path, disk, create=None)
    if parent is None:
        return
    try:
        disk.unlink(parent, _temp_name(parts[-1]))
        disk.fsync(parent, parts[-1])
    except FileNotFoundError:
        pass
    finally:
        os.close(parent)


# ------------------------------------------------------------------------------------------------------ journal


def _journal_chunks(label: str, entries: Sequence[_Entry]) -> list[bytes]:
    """The journal: one JSON header line, then every original's bytes back to back (no base64, no copy)."""
    blobs: list[bytes] = []
    offset = 0
    items = []
    for e in entries:
        before = None
        if e.before.data is not None:
            before = {"mode": e.before.mode, "offset": offset, "size": len(e.before.data)}
            blobs.append(e.before.data)
            offset += len(e.before.data)
        items.append({
            "area": e.area.value,
            "path": e.path,
            "before": before,
            "after": None if e.after is None else {"mode": e.after.mode, "sha256": e.after.sha256},
            "folders": [[folder, mode] for folder, mode in e.folders],
        })
    doc = {"format": JOURNAL_FORMAT, "label": label, "pid": os.getpid(), "entries": items}
    # ensure_ascii: file names that are not valid UTF-8 survive as escaped surrogates, and no newline.
    return [json.dumps(doc, ensure_ascii=True, sort_keys=True).encode("ascii") + b"\n", *blobs]


def _parse_journal(data: bytes, where: Path) -> tuple[str, list[_Entry]]:
    """The journal's label and entries; RecoveryFailedError if it is not one patchkit wrote."""
    try:
        header, _, body = data.partition(b"\n")
        doc = json.loads(header)
        if doc["format"] != JOURNAL_FORMAT:
            raise ValueError(f"format {doc['format']!r}")
        label = doc["label"]
        if not isinstance(label, str):
            raise TypeError("label")
        entries = [_parse_entry(item, body) for item in doc["entries"]]
    except (ValueError, KeyError, TypeError, AttributeError, PatchkitError) as exc:
        raise RecoveryFailedError(
            f"the journal of an interrupted transaction is unreadable ({exc}); the tree may be half patched",
            where=str(where),
            hint="restore the tree from the image, then delete the journal",
        ) from None
    return label, entries


def _parse_entry(item: Any, body: bytes) -> _Entry:
    area = Area(item["area"])
    path = item["path"]
    if not isinstance(path, str):
        raise TypeError("path")
    parts = split_relative(path)  # a planted journal must not reach outside the root either
    before = item["before"]
    after = item["after"]
    folders = tuple((str(f), _opt_int(m)) for f, m in item["folders"])
    if [f for f, _ in folders] != ["/".join(parts[:i]) for i in range(1, len(parts))]:
        raise ValueError(f"folders of {path!r} do not match its path")
    return _Entry(
        area=area,
        path=path,
        before=Snapshot(path, None, None) if before is None else Snapshot(
            path, _blob(body, before["offset"], before["size"]), _int(before["mode"])
        ),
        after=None if after is None else _Target(str(after["sha256"]), _int(after["mode"])),
        folders=folders,
    )


def _blob(body: bytes, offset: Any, size: Any) -> bytes:
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (offset, size)):
        raise TypeError("offset/size")
    if offset < 0 or size < 0 or offset + size > len(body):
        raise ValueError("an original lies outside the journal (truncated?)")
    return body[offset:offset + size]


def _int(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 0o7777:
        raise TypeError(f"mode {value!r}")
    return value


def _opt_int(value: Any) -> int | None:
    return None if value is None else _int(value)


def _drop_journal(roots: _Roots, disk: _Disk) -> None:
    with contextlib.suppress(FileNotFoundError):  # gone already if only the fsync after it failed
        disk.unlink(roots.state_fd, JOURNAL_NAME)
    disk.fsync(roots.state_fd, JOURNAL_NAME)


# ------------------------------------------------------------------------------------------------- primitives


@contextlib.contextmanager
def _open_roots(root: Path) -> Iterator[_Roots]:
    root_fd = open_root(root)
    try:
        state_fd = open_child_dir(root_fd, STATE_DIR, STATE_DIR, str(root / STATE_DIR))
        if state_fd is None:
            raise FileNotFoundError(errno.ENOENT, "missing", str(root / STATE_DIR))
        try:
            yield _Roots(root, root_fd, state_fd)
        finally:
            os.close(state_fd)
    finally:
        os.close(root_fd)


def _entry(roots: _Roots, area: Area, before: Snapshot, after: Snapshot) -> _Entry:
    parts = split_relative(before.path)
    folders: list[tuple[str, int | None]] = []
    fd: int | None = os.dup(roots.fd(area))
    shown = roots.path(area)
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
    if fd is not None:
        os.close(fd)
    target = None
    if after.data is not None:
        assert after.mode is not None
        target = _Target(hashlib.sha256(after.data).hexdigest(), after.mode)
    return _Entry(area, before.path, before, target, tuple(folders))


def _read(roots: _Roots, area: Area, rel: str) -> Snapshot:
    return read_at(roots.fd(area), roots.path(area), rel)


def _open_parent(
    roots: _Roots,
    area: Area,
    folders: tuple[str, ...],
    rel: str,
    disk: _Disk,
    *,
    create: Mapping[str, int | None] | None,
) -> int | None:
    """Descriptor of the folder holding `rel`, walked without following links.

    create=None: None if a folder is missing. Otherwise missing folders are made, each with the mode
    `create` records for it (the default mode when it records none).
    """
    fd = os.dup(roots.fd(area))
    shown = roots.path(area)
    try:
        for i, part in enumerate(folders):
            shown = shown / part
            child = open_child_dir(fd, part, rel, str(shown))
            if child is None:
                if create is None:
                    os.close(fd)
                    return None
                disk.mkdir(fd, part)
                child = open_child_dir(fd, part, rel, str(shown))
                if child is None:
                    raise FileNotFoundError(errno.ENOENT, "vanished after mkdir", str(shown))
                mode = create.get("/".join(folders[: i + 1]))
                if mode is not None:  # restoring a folder a deletion removed: give it its old mode back
                    disk.fchmod(child, mode, part)
                disk.fsync(fd, part)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _put(
    disk: _Disk,
    dir_fd: int,
    name: str,
    data: bytes | Sequence[bytes],
    mode: int,
    tmp: str | None = None,
    *,
    sync_folder: bool = True,
) -> None:
    """Write `name` atomically: temp file in the same folder, chmod, fsync, os.replace, fsync the folder.

    sync_folder=False leaves the folder's fsync to the caller (a transaction fsyncs each folder once).
    """
    tmp = tmp or _temp_name(name)
    fd = disk.create(dir_fd, tmp)
    try:
        for chunk in [data] if isinstance(data, bytes) else data:
            view = memoryview(chunk)
            while view:
                view = view[disk.write(fd, view, name):]
        disk.fchmod(fd, mode, name)
        disk.fsync(fd, name)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    os.close(fd)
    try:
        disk.replace(dir_fd, tmp, name)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    if sync_folder:
        disk.fsync(dir_fd, name)


def _rmdir_if_empty(roots: _Roots, area: Area, folder: str, disk: _Disk) -> bool | None:
    """Remove `folder` if it is empty: True removed, False not empty, None already gone."""
    parts = split_relative(folder)
    parent = _open_parent(roots, area, parts[:-1], folder, disk, create=None)
    if parent is None:
        return None
    try:
        disk.rmdir(parent, parts[-1])
        disk.fsync(parent, parts[-1])
        return True
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
            return False
        raise
    finally:
        os.close(parent)


def _temp_name(name: str) -> str:
    return f".{name}{TEMP_SUFFIX}"


def _same(snap: Snapshot, other: Snapshot) -> bool:
    return (snap.data, snap.mode) == (other.data, other.mode)


def _matches(snap: Snapshot, target: _Target | None) -> bool:
    if target is None or snap.data is None:
        return target is None and snap.data is None
    return snap.mode == target.mode and hashlib.sha256(snap.data).hexdigest() == target.sha256


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return f"{exc.filename + ': ' if exc.filename else ''}{exc.strerror or exc}"
    return str(exc) or type(exc).__name__
