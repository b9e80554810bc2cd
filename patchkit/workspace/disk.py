"""Every operation that changes the disk: counted for fault injection, exclusive where it creates.

Temp files are created with O_CREAT|O_EXCL|O_NOFOLLOW under a short random name (`.patchkit-<hex>.tmp`,
26 bytes, so it fits next to any legal name), then checked on the descriptor (a regular file with one link,
owned by us) before a byte is written. Nothing planted at a name can be written through, and only names this
run created are ever removed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import stat
from collections.abc import Callable, Sequence

from patchkit.workspace.names import TEMP_PREFIX

# Test-only fault injection, documented in docs/safety.md.
FAULT_AFTER_ENV = "PATCHKIT_FAULT_AFTER"
FAULT_ERRNO_ENV = "PATCHKIT_FAULT_ERRNO"
# With the errno: from the fault on, every operation that needs a new inode or block fails the same way
# (a disk that stays full), while renames, unlinks and fsyncs still work.
FAULT_PERSIST_ENV = "PATCHKIT_FAULT_PERSIST"
# Instead of the SIGKILL: send this signal (TERM, INT) to the process at the fault and again before every
# later operation, as a supervisor repeating SIGTERM or a user hammering Ctrl-C would.
FAULT_SIGNAL_ENV = "PATCHKIT_FAULT_SIGNAL"

# On a content change a file keeps only its rwx bits (setuid, setgid and sticky go, as with git), and file
# capabilities are not carried over: the kernel drops both when a file is written, for the same reason.
PERMISSION_BITS = 0o777
_DROPPED_XATTRS = frozenset({"security.capability"})


def random_name(kind: str) -> str:
    """A fresh unpredictable name in a folder: `.patchkit-<16 hex>.tmp` or `.orig`.

    os.urandom is what secrets.token_hex reads; importing secrets would load random, hmac and base64 (~2 ms).
    """
    return f"{TEMP_PREFIX}{os.urandom(8).hex()}.{kind}"


class Disk:
    """Each operation is counted so tests can fail or kill at each one.

    Test-only: PATCHKIT_FAULT_AFTER=N SIGKILLs the process just before operation N+1 of a transaction (or of
    a recovery); with PATCHKIT_FAULT_ERRNO=<errno name> that operation raises that error instead, once (or,
    with PATCHKIT_FAULT_PERSIST=1, every later operation that needs space too). Unset, each operation costs
    one `is None` check.
    """

    def __init__(self, *, faults: bool = True) -> None:
        after = os.environ.get(FAULT_AFTER_ENV, "") if faults else ""
        self._left: int | None = int(after) if after.isdigit() else None
        name = os.environ.get(FAULT_ERRNO_ENV, "")
        code = getattr(errno, name, None) if name.startswith("E") else None
        self._errno: int | None = code if isinstance(code, int) else None
        self._persist = bool(os.environ.get(FAULT_PERSIST_ENV)) and self._errno is not None
        self._full = False
        sig = os.environ.get(FAULT_SIGNAL_ENV, "") if faults else ""
        self._signal: int | None = getattr(signal, f"SIG{sig}", None) if sig.isalpha() else None
        self._signalling = False

    def _tick(self, what: str, *, allocates: bool = False) -> None:
        if self._full and allocates:
            assert self._errno is not None
            raise OSError(self._errno, os.strerror(self._errno), what)
        if self._signalling:
            assert self._signal is not None
            os.kill(os.getpid(), self._signal)
        if self._left is None:
            return
        if self._left > 0:
            self._left -= 1
            return
        self._left = None
        if self._signal is not None:
            self._signalling = True
            os.kill(os.getpid(), self._signal)
            return
        if self._errno is None:
            os.kill(os.getpid(), signal.SIGKILL)
            raise AssertionError("unreachable: SIGKILL cannot be caught")
        self._full = self._persist
        raise OSError(self._errno, os.strerror(self._errno), what)

    def create(self, dir_fd: int, name: str) -> int:
        """A new file `name` that nobody else can have put there: exclusive, no link followed, checked."""
        self._tick(name, allocates=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(name, flags, 0o600, dir_fd=dir_fd)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_uid != os.geteuid():
            os.close(fd)  # cannot happen with O_EXCL on a sane filesystem; never write into it if it does
            raise OSError(errno.EEXIST, "the new temp file is not a fresh file of ours", name)
        return fd

    def write(self, fd: int, data: memoryview, name: str) -> int:
        self._tick(name, allocates=True)
        return os.write(fd, data)

    def fchown(self, fd: int, uid: int, gid: int, name: str) -> None:
        self._tick(name)
        os.fchown(fd, uid, gid)

    def fchmod(self, fd: int, mode: int, name: str) -> None:
        self._tick(name)
        os.fchmod(fd, mode)

    def fsync(self, fd: int, name: str) -> None:
        self._tick(name)
        os.fsync(fd)

    def replace(self, dir_fd: int, src: str, dst: str) -> None:
        self._tick(dst)
        os.replace(src, dst, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)

    def link(self, dir_fd: int, src: str, dst: str) -> None:
        self._tick(dst, allocates=True)
        os.link(src, dst, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)

    def unlink(self, dir_fd: int, name: str) -> None:
        self._tick(name)
        os.unlink(name, dir_fd=dir_fd)

    def mkdir(self, dir_fd: int, name: str) -> None:
        self._tick(name, allocates=True)
        os.mkdir(name, 0o700, dir_fd=dir_fd)  # the real mode is set on the descriptor, never by the umask

    def rmdir(self, dir_fd: int, name: str) -> None:
        self._tick(name)
        os.rmdir(name, dir_fd=dir_fd)


def lstat_at(dir_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def unlink_present(disk: Disk, dir_fd: int, name: str) -> bool:
    """Unlink `name` if it is there (a read-only folder fails even for a missing name: look first)."""
    if lstat_at(dir_fd, name) is None:
        return False
    try:
        disk.unlink(dir_fd, name)
    except FileNotFoundError:
        return False
    return True


def copy_xattrs(src_fd: int, dst_fd: int) -> None:
    """Carry extended attributes (POSIX ACLs are two of them) over, where the filesystem allows."""
    try:
        names = os.listxattr(src_fd)
    except OSError:  # ENOTSUP and friends: nothing to carry
        return
    for name in names:
        if name in _DROPPED_XATTRS:
            continue
        with contextlib.suppress(OSError):
            os.setxattr(dst_fd, name, os.getxattr(src_fd, name))


def put_file(
    disk: Disk,
    dir_fd: int,
    name: str,
    data: bytes | Sequence[bytes],
    mode: int,
    *,
    tmp: str | None = None,
    owner: tuple[int, int] | None = None,
    like_fd: int | None = None,
    before_replace: Callable[[], None] | None = None,
    sync_folder: bool = True,
) -> None:
    """Write `name` atomically: an exclusive temp file in the same folder, written, owned, chmodded,
    fsynced, then os.replace'd over `name`, and the folder fsynced.

    `owner` (uid, gid) is given to the temp file first (a root run keeps a file's owner); `like_fd` is the
    original, whose extended attributes are carried over; `before_replace` is called right before the
    replace and may raise to stop it. sync_folder=False leaves the folder's fsync to the caller.
    """
    tmp = tmp or random_name("tmp")
    fd = disk.create(dir_fd, tmp)
    try:
        try:
            for chunk in [data] if isinstance(data, bytes) else data:
                view = memoryview(chunk)
                while view:
                    view = view[disk.write(fd, view, name):]
            if owner is not None and owner != (os.geteuid(), os.getegid()):
                with contextlib.suppress(PermissionError):  # not root: the file becomes ours, like git apply
                    disk.fchown(fd, owner[0], owner[1], name)
            if like_fd is not None:
                copy_xattrs(like_fd, fd)
            disk.fchmod(fd, mode, name)  # after fchown, which clears setuid/setgid
            disk.fsync(fd, name)
        finally:
            os.close(fd)
        if before_replace is not None:
            before_replace()
        disk.replace(dir_fd, tmp, name)
    except BaseException:
        with contextlib.suppress(OSError):
            unlink_present(Disk(faults=False), dir_fd, tmp)
        raise
    if sync_folder:
        disk.fsync(dir_fd, name)
