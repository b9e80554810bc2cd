"""The root's lock, `<root>/.patchkit/lock`: one writer at a time, readers beside each other.

A writer (apply, revert) takes an exclusive flock, creating the state folder, its .gitignore and the lock
file if needed, and writes its pid and start time into the lock file so a waiting process can say who it
waits for. The lock file is 0600 and root's (or the running user's): nobody else can open it, so nobody else
can hold it and stall a container start. A reader (status, apply --dry-run, a restart's fast-path check)
creates nothing: it takes a shared flock on the lock file if there is one it may open, else a shared flock on
the root folder itself. The writer that creates the lock file also takes that folder lock exclusively, and
waits for it (so a reader never sees even the first-ever apply half way); later writers take it only if it is
free, never waiting for it: any user who can open the root folder can flock it. A reader that locked the folder
looks for the lock file again once it holds it, and takes that instead if one appeared.

`--lock-timeout N` (LockWait) is the time a command waits in all, over every lock it takes (a start may take
it shared for the fast path, then exclusively, then the folder's), and who it waits for is said once.
An interrupted transaction is recovered first, under the exclusive lock (a reader upgrades in place), before
the caller looks at the tree.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import pwd
import re
import stat
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from patchkit.display import shown_label
from patchkit.errors import (
    LockFailedError,
    LockTimeoutError,
    LockUnsupportedError,
    PatchkitError,
    RecoveryFailedError,
    RootNotWritableError,
    WriteFailedError,
)
from patchkit.input.tree import STATE_DIR, Root, open_child_dir
from patchkit.workspace.names import GITIGNORE_NAME, JOURNAL_NAME, LOCK_NAME, TEMP_NAME
from patchkit.workspace.trust import LOCK_FILE_MODE, check_trusted, open_state_dir, read_state

if TYPE_CHECKING:
    from patchkit.workspace.recovery import Recovery

# The writing code (workspace.recovery, .commit and what they use) is imported only where it runs: a reader
# (status) on a root with no interrupted transaction never loads it.

DEFAULT_LOCK_TIMEOUT = 300.0
WAIT_NOTICE_AFTER = 1.0  # seconds of waiting before `on_wait` is told who holds the lock
_HOLDER = rb"pid=(\d{1,10}) since=(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)\n"  # compiled when first read (re caches it)


class LockHolder(NamedTuple):  # immutable and compared by value, ~5x cheaper to create than a frozen dataclass
    """Who holds (or last held) a root's lock: the patchkit writer it names (`since` set, as it wrote into the
    lock file), or (`since` None) a process the kernel's lock table names."""

    pid: int
    since: str | None  # UTC, ISO 8601; None: not a patchkit writer that said so
    path: Path  # the lock file
    user: str | None = None  # the holder's user name (or uid), when /proc tells


WaitHook = Callable[[LockHolder | None, Path], None]


@dataclass(eq=False)
class LockWait:
    """One command's patience for the root's lock: `timeout` seconds of waiting in all, however many times the
    command takes the lock, and `on_wait(holder, lock_path)` told once, after WAIT_NOTICE_AFTER seconds of it."""

    timeout: float
    on_wait: WaitHook | None = None
    waited: float = 0.0  # seconds waited so far, by every lock this command took
    told: bool = False

    def left(self) -> float:
        return max(0.0, self.timeout - self.waited)


@contextlib.contextmanager
def locked(
    root: Root, timeout: float | LockWait, *, shared: bool = False, on_wait: WaitHook | None = None
) -> Iterator[Recovery | None]:
    """Hold the root's lock from the state check to the last write; yield what recovery did, if any.

    `timeout`: seconds, or the command's LockWait (its on_wait is used then). `on_wait(holder, lock_path)` is
    called once if the lock is still busy after WAIT_NOTICE_AFTER seconds (holder None: nobody can be named).
    """
    wait = timeout if isinstance(timeout, LockWait) else LockWait(timeout, on_wait)
    path = root.state_path / LOCK_NAME
    pending = needs_recovery(root)
    created = False
    try:
        fd, created = _open_lock(root, create=not shared or pending)
    except OSError as exc:
        if pending:
            raise RecoveryFailedError(
                f"an interrupted {pending_label(root)} left a journal, but the root cannot be written "
                f"({exc.strerror}), so the tree cannot be rolled back and may be half patched",
                where=str(root.state_path / JOURNAL_NAME),
                hint="make the tree writable and rerun any patchkit command on it; it recovers first",
            ) from None
        if exc.errno in _NOT_WRITABLE and not shared:
            raise not_writable(root, exc) from None
        if not (shared and exc.errno in _NOT_WRITABLE):
            done = "open" if shared else "create"  # a reader never creates it
            raise WriteFailedError(f"cannot {done} the lock file: {exc.strerror}", where=str(path)) from None
        fd = None
    wrote_holder = False
    # A reader that finds no lock file it may open (nothing created for it) locks the root folder itself,
    # shared; the writer that creates the lock file takes that exclusively too, below, so a reader never sees
    # the first-ever apply half way.
    # flock belongs to an open file description: "." opened from the root's descriptor is a new one of the same
    # folder (never reached by path again), released when this lock ends rather than with the command's Root.
    root_fd = _reopen(root) if fd is None or not shared else None
    try:
        recovery = None
        if fd is None and root_fd is not None:
            _lock_folder(root_fd, path, wait, True, blocking=True)
            fd = _lock_file_since(root, root_fd)
        if fd is not None:
            _acquire(fd, path, wait, shared)
            if needs_recovery(root):
                if shared:  # flock converts the shared lock in place
                    _acquire(fd, path, wait, False)
                from patchkit.workspace.recovery import recover  # lazy: the write stage (only a journal needs it)

                recovery = recover(root)  # first: a refused journal means nothing at all is written
            if not shared:
                wrote_holder = _write_holder(fd)
                _ensure_gitignore(root)  # under the lock: recovery sweeps temp names in .patchkit
                assert root_fd is not None
                _lock_folder(root_fd, path, wait, False, blocking=created)
        yield recovery
    finally:
        if root_fd is not None:
            os.close(root_fd)
        if fd is not None:
            if wrote_holder:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, 0)  # nobody holds it now
            os.close(fd)  # closing releases the flock


_NOT_WRITABLE = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})


def not_writable(root: Root, exc: OSError) -> RootNotWritableError:
    """The refusal of a writer that cannot even create (or open for writing) the lock: nothing was written."""
    if exc.errno == errno.EROFS:
        hint = ("the root is on a read-only filesystem: apply and revert need it writable (mount it read-write, "
                "or apply when the image is built); status and apply --dry-run work read-only")
    else:
        hint = (f"this user may not write {root.state_path}: run apply and revert as root or as the owner of the "
                "tree and its .patchkit; status and apply --dry-run work without writing")
    return RootNotWritableError(
        f"cannot create the lock file: {exc.strerror}; the root cannot be written by this run, nothing was written",
        where=str(root.state_path / LOCK_NAME), hint=hint,
    )


def needs_recovery(root: Root) -> bool:
    """A journal, or a stray temp name of ours in the state folder (a kill while one was being written)."""
    try:
        folder = open_child_dir(root.fd, STATE_DIR, STATE_DIR, str(root.state_path))
    except PatchkitError:
        return False  # not a folder: the lock reports it
    if folder is None:
        return False
    try:
        names = os.listdir(folder)
    except OSError:
        return False
    finally:
        os.close(folder)
    return any(name == JOURNAL_NAME or TEMP_NAME.fullmatch(name) for name in names)


def recover_pending(root: Root, timeout: float | LockWait, on_wait: WaitHook | None = None) -> Recovery | None:
    """Recover an interrupted transaction on root, if its journal is there; cheap when there is none."""
    if not needs_recovery(root):
        return None
    with locked(root, timeout, on_wait=on_wait) as recovery:
        return recovery


def pending_label(root: Root) -> str:
    """What the interrupted transaction on root was doing, for a message ("transaction" if unknown)."""

    try:
        data = read_state(root, JOURNAL_NAME).data or b""
        label = json.loads(data.partition(b"\n")[0]).get("label")
    except (OSError, ValueError, AttributeError, PatchkitError):
        label = None
    return shown_label(label) if isinstance(label, str) and label.isprintable() else "transaction"


def read_holder(fd: int, path: Path) -> LockHolder | None:
    """The writer named in the lock file, if that process is still alive."""
    try:
        match = re.fullmatch(_HOLDER, os.pread(fd, 128, 0))
    except OSError:
        return None
    if match is None:
        return None
    pid = int(match.group(1))
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # alive, another user's
    return LockHolder(pid, match.group(2).decode(), path)


def current_holder(fd: int, path: Path) -> LockHolder | None:
    """Who holds the lock on `fd` now, with their user: the patchkit writer named in the lock file when it does
    hold it, else the first pid the kernel's lock table names, else None."""
    named = verified_holder(fd, path)
    if named is None:
        pids = lock_pids(fd)
        if not pids:
            return None
        named = LockHolder(pids[0], None, path)
    return named._replace(user=_user_of(named.pid))


def _user_of(pid: int) -> str | None:
    """The name (else the uid) of the user running `pid`, or None when /proc does not say."""
    try:
        uid = os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def describe_holder(fd: int, path: Path) -> str:
    """Who holds the lock on `fd`, as far as can be known: the patchkit writer named in the lock file when it
    does hold it, else the pids the kernel reports (any program may flock the file), else "a process"."""
    named = verified_holder(fd, path)
    if named is not None:
        return f"another patchkit process (pid {named.pid}, since {named.since})"
    pids = lock_pids(fd)
    return f"a process (pid {', '.join(map(str, pids))})" if pids else "a process"


def verified_holder(fd: int, path: Path) -> LockHolder | None:
    """read_holder, unless the kernel can say who holds the lock and the writer named in the file is not one
    of them (the name outlives its writer; another program may hold the lock)."""
    named = read_holder(fd, path)
    pids = lock_pids(fd) if named is not None else None
    return named if named is not None and (pids is None or named.pid in pids) else None


def lock_pids(fd: int) -> tuple[int, ...] | None:
    """The pids holding a lock on fd's file: /proc/locks (flock and POSIX locks, as this pid namespace sees
    them), else fcntl F_GETLK (a POSIX lock, as NFS makes of flock); None when neither can tell."""
    st = os.fstat(fd)
    key = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as table:
            # "1: FLOCK  ADVISORY  WRITE 1234 fe:00:2154578 0 EOF"; "1: -> FLOCK ..." is a waiter (maybe us)
            pids = [int(f[4]) for f in (line.split() for line in table)
                    if len(f) > 5 and f[1] != "->" and f[5] == key and f[4].lstrip("-").isdigit()]
    except OSError:
        pids = None
    if pids is not None:
        return tuple(sorted({p for p in pids if p > 0 and p != os.getpid()}))
    try:
        query = struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
        answer = struct.unpack("hhqqi4x", fcntl.fcntl(fd, fcntl.F_GETLK, query))
    except (OSError, struct.error, ValueError):
        return None
    return (answer[4],) if answer[0] != fcntl.F_UNLCK and answer[4] > 0 else None


def _open_lock(root: Root, *, create: bool) -> tuple[int | None, bool]:
    """The lock file's descriptor (None when a reader finds none, or no state folder, and creates nothing), and
    whether this call created it."""
    state_fd = open_state_dir(root, create=create)
    if state_fd is None:
        return None, False
    try:
        return _open_lock_file(state_fd, root.state_path / LOCK_NAME, create)
    finally:
        os.close(state_fd)


def _lock_file_since(root: Root, root_fd: int) -> int | None:
    """For a reader holding the root folder's lock: the lock file, if one it may open appeared meanwhile (its
    writer holds it, and will not wait for the folder), with the folder's lock released; else None."""
    try:
        fd, _ = _open_lock(root, create=False)
    except OSError:
        return None
    if fd is not None:
        fcntl.flock(root_fd, fcntl.LOCK_UN)  # before the file's lock: its writer may be waiting for the folder
    return fd


def _open_lock_file(state_fd: int, path: Path, create: bool) -> tuple[int | None, bool]:
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = None
    created = False
    if create:
        try:
            fd = os.open(LOCK_NAME, flags | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=state_fd)
            os.fchmod(fd, LOCK_FILE_MODE)  # explicit, whatever the umask: nobody else may open it
            created = True
        except FileExistsError:
            fd = None
    if fd is None:
        try:
            fd = os.open(LOCK_NAME, flags, dir_fd=state_fd)
        except FileNotFoundError:
            if create:
                raise
            return None, False
        except PermissionError:  # a reader of another user: a read-only descriptor flocks just as well
            if create:
                raise  # a writer must write its holder line, and the tree: this user may not (locked() says so)
            fd = os.open(LOCK_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=state_fd)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise WriteFailedError("the lock is not a regular file", where=str(path), hint=f"remove {path}")
    try:  # like every state file: the holder line is read and written, and nobody else may own it
        check_trusted(st, str(path), path.parent)
        if create and st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) != LOCK_FILE_MODE:
            os.fchmod(fd, LOCK_FILE_MODE)  # an older patchkit's 0644 lock: others could open and hold it
    except BaseException:
        os.close(fd)
        raise
    return fd, created


def _ensure_gitignore(root: Root) -> None:
    state_fd = open_state_dir(root, create=False)
    if state_fd is not None:
        try:
            if not _present(state_fd, GITIGNORE_NAME):  # every write but the first: nothing to do
                from patchkit.workspace.commit import ensure_gitignore  # lazy: the write stage
                from patchkit.workspace.folders import Roots

                ensure_gitignore(Roots(root.path, root.fd, state_fd))
        finally:
            os.close(state_fd)


def _reopen(root: Root) -> int:
    return os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=root.fd)


def _present(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _lock_folder(fd: int, path: Path, wait: LockWait, shared: bool, *, blocking: bool) -> None:
    """flock the root folder too; best effort (a filesystem without flock on folders, e.g. NFS, skips it).

    blocking=False: only if it is free at once (anyone who may open the root folder can flock it; a writer
    that did not create the lock file must not wait for them)."""
    try:
        if blocking:
            _acquire(fd, path, wait, shared)
        else:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except (LockUnsupportedError, BlockingIOError):
        pass
    except OSError as exc:
        if exc.errno != errno.EBADF and exc.errno not in _NO_LOCKS:
            raise _lock_failed(path.parent.parent, exc) from None


def _lock_failed(where: Path, exc: OSError) -> LockFailedError:
    """flock's own failure on the lock file or the root folder (`where`), said as such: exit 6, nothing written."""
    return LockFailedError(f"cannot lock it: {exc.strerror}; nothing was written", where=str(where),
                           hint="check the filesystem holding the root (its log, its health), then rerun")


def _write_holder(fd: int) -> bool:
    since = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:  # informational only
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid={os.getpid()} since={since}\n".encode(), 0)
    except OSError:
        return False
    return True


_NO_LOCKS = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL})


def _acquire(fd: int, path: Path, wait: LockWait, shared: bool) -> None:
    """flock `fd`, polling until `wait` has no time left (LockTimeoutError then); the time spent is added to it."""
    flags = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB
    start = time.monotonic()
    deadline = start + wait.left()
    delay = 0.01
    try:
        while not _try_flock(fd, flags, path):
            now = time.monotonic()
            if not wait.told and wait.on_wait is not None and wait.waited + now - start >= WAIT_NOTICE_AFTER:
                wait.told = True
                wait.on_wait(current_holder(fd, path), path)
            if now >= deadline:
                raise LockTimeoutError(
                    f"{describe_holder(fd, path)} has held the lock for over {wait.timeout:g}s",
                    where=str(path),
                    hint="wait for it to finish, or raise --lock-timeout; "
                    "the lock is released automatically when that process exits",
                )
            time.sleep(min(delay, max(deadline - now, 0.001)))  # never far past the deadline
            delay = min(delay * 2, 0.2)
    finally:
        wait.waited += time.monotonic() - start


def _try_flock(fd: int, flags: int, path: Path) -> bool:
    """One non-blocking flock: taken, or busy (False); LockUnsupportedError where the filesystem has no locks."""
    try:
        fcntl.flock(fd, flags)
    except BlockingIOError:
        return False
    except OSError as exc:
        if exc.errno not in _NO_LOCKS:
            raise _lock_failed(path, exc) from None
        raise LockUnsupportedError(
            f"the filesystem holding the root refuses file locks ({os.strerror(exc.errno)})",
            where=str(path),
            hint="patchkit never writes without its lock, so concurrent starts cannot race: mount the share "
            "with locking (NFSv4, or NFSv3 with lockd), or keep the engine tree on local storage",
        ) from None
    return True
