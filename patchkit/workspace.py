"""The only module that writes to the engine tree: a lock, then atomic per-file replaces.

Each new file is written to a temporary file in its own directory, fsynced, given its mode and moved over the
old one with os.replace; the directory is fsynced after. If a write fails, the files already replaced are put
back from their in-memory originals before the error is raised, so the tree ends as it began.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from patchkit.errors import LockTimeoutError, UnsafePathError, WriteFailedError
from patchkit.plan import FileChange
from patchkit.tree import STATE_DIR, Snapshot, read_snapshot, resolve_inside

LOCK_NAME = "lock"
DEFAULT_LOCK_TIMEOUT = 300.0


def state_dir(root: Path) -> Path:
    """`<root>/.patchkit`, created on demand with a .gitignore so it never shows up in `git status`."""
    folder = root / STATE_DIR
    if folder.is_symlink():
        raise UnsafePathError(f"{folder} is a symbolic link; patchkit keeps its state only in a real folder")
    folder.mkdir(exist_ok=True)
    ignore = folder / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n", encoding="ascii")
    return folder


@contextlib.contextmanager
def locked(root: Path, timeout: float, *, shared: bool = False) -> Iterator[None]:
    """Hold `<root>/.patchkit/lock` from the state check to the last write.

    Readers (status) take a shared lock and skip it on a read-only tree, where no writer can run anyway.
    """
    try:
        path = state_dir(root) / LOCK_NAME
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        if shared and exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            yield
            return
        raise WriteFailedError(f"cannot create the lock file: {exc.strerror}", where=str(root / STATE_DIR)) from None
    try:
        _acquire(fd, path, timeout, shared)
        yield
    finally:
        os.close(fd)  # closing releases the flock


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


def commit_changes(root: Path, changes: Sequence[FileChange]) -> None:
    """Write every change, or none: on failure, restore what was already replaced and raise."""
    for change in changes:  # re-check under the lock: the plan must still describe the tree
        if read_snapshot(root, change.path) != change.before:
            raise WriteFailedError(
                f"{change.path} changed while the plan was being made", where=str(root),
                hint="another tool wrote to the tree without patchkit's lock; rerun",
            )
    done: list[FileChange] = []
    try:
        for change in changes:
            _write(root, change.path, change.after)
            done.append(change)
    except OSError as exc:
        failed = exc.filename or (changes[len(done)].path if len(done) < len(changes) else "?")
        for change in reversed(done):
            _write(root, change.path, change.before)
        raise WriteFailedError(
            f"cannot write {failed}: {exc.strerror}; the tree was restored, nothing changed",
            where=str(root),
            hint="free disk space or fix permissions, then rerun",
        ) from None


def _write(root: Path, rel: str, snap: Snapshot) -> None:
    path = resolve_inside(root, rel)
    if snap.data is None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        _fsync_dir(path.parent)
        _remove_empty_parents(root, path.parent)
        return
    assert snap.mode is not None
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.patchkit-tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        view = memoryview(snap.data)
        while view:
            view = view[os.write(fd, view):]
        os.fchmod(fd, snap.mode)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _remove_empty_parents(root: Path, folder: Path) -> None:
    # Like git apply: a deletion that empties a folder removes the folder too.
    while folder != root and root in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
