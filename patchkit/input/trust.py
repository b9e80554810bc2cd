"""The one trust rule: which files and folders patchkit may rely on, checked on descriptors.

Every reader of something that decides what patchkit does (the state folder `.patchkit` and its journal, lock
and records, workspace.trust; the restart fast path's records, run.fastpath; the engine's interpreter,
site-packages and metadata, input.environment; a compiled hunk set, diff.compiled) asks this module, and
only this module, whether to believe it. The rule:

- **Owner**: root or the running user. Root may write anything anyway, so state root wrote is as good as the
  running user's own for every user: a non-root `status` on a tree root patched reads root's records.
- **Nobody else can write it**: no group or other write bit. The one exception is a *folder* with the sticky
  bit (`/tmp`, mode 1777): others may add entries there but cannot rename or replace ours, and every entry on
  the way is checked in turn. On a regular *file* the sticky bit protects nothing: a 1777 file is
  world-writable and refused.
- **No link**: the entry checked is the entry used. A chain is walked one component at a time from `/` (or
  from a folder already checked) with O_NOFOLLOW, each folder's descriptor checked as it is opened
  (`fstat`), and the next name opened relative to it, never by path again: a link anywhere, or one swapped in
  while the walk runs, is refused (`Flaw.LINK`).

Inside a folder that passes, nobody else can swap an entry, so what is opened from it is what was checked.
The callers turn a `Refusal` into their own answer: an UntrustedStateError (exit 2) for the state folder, an
UntrustedEnvironmentError (exit 2) for the environment, "run the full judgement" for the fast path.
"""

from __future__ import annotations

import errno
import os
import pwd
import stat
from enum import Enum
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from pathlib import Path

# O_PATH: a folder on the way (or an interpreter) needs only search (or execute) permission to be checked.
_PATH_FLAG = getattr(os, "O_PATH", os.O_RDONLY)
_WALK_FLAGS = _PATH_FLAG | os.O_NOFOLLOW | os.O_CLOEXEC
_DIR_FLAGS = _WALK_FLAGS | os.O_DIRECTORY
_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH


class Flaw(Enum):
    """Why an entry is not trusted."""

    LINK = "link"  # a symbolic link (or one swapped in during the walk)
    OWNER = "owner"  # owned by someone other than root or the running user
    WRITABLE = "writable"  # group or others may write it (and it is no sticky folder)
    UNCHECKABLE = "uncheckable"  # it could not be looked at (missing, not a folder on the way, no permission)


class Refusal(NamedTuple):
    """An entry the rule refuses: where, why, and its owner and mode as found (for the message)."""

    shown: str  # its full path, for messages
    flaw: Flaw
    uid: int = -1
    mode: int = 0
    detail: str = ""  # UNCHECKABLE: what the system said
    absent: bool = False  # UNCHECKABLE because there is no such entry (ENOENT)

    def describe(self) -> str:
        """What is wrong, as the end of a sentence naming the entry ("<path> is owned by uid 1001 (svc)")."""
        if self.flaw is Flaw.LINK:
            return "is a symbolic link (or became one while being checked)"
        if self.flaw is Flaw.OWNER:
            return f"is owned by uid {self.uid}{_user_name(self.uid)}"
        if self.flaw is Flaw.WRITABLE:
            return f"is writable by group or others (mode {stat.S_IMODE(self.mode):04o})"
        return f"cannot be checked ({self.detail})"


def trusted_owner(uid: int) -> bool:
    """Whether `uid` may have written what patchkit relies on: root, or the user patchkit runs as."""
    return uid == 0 or uid == os.geteuid()


def refusal(st: os.stat_result, shown: str) -> Refusal | None:
    """THE rule, on the fstat of a descriptor (or the lstat of the entry about to be opened); None: trusted."""
    mode = st.st_mode
    if stat.S_ISLNK(mode):
        return Refusal(shown, Flaw.LINK, st.st_uid, mode)
    if not trusted_owner(st.st_uid):
        return Refusal(shown, Flaw.OWNER, st.st_uid, mode)
    if mode & _OTHERS_WRITE and not (stat.S_ISDIR(mode) and mode & stat.S_ISVTX):
        return Refusal(shown, Flaw.WRITABLE, st.st_uid, mode)
    return None


def fd_refusal(fd: int, shown: str) -> Refusal | None:
    """The rule on what an open descriptor refers to."""
    return refusal(os.fstat(fd), shown)


def open_trusted_child(
    parent_fd: int, name: str, shown: str, *, folder: bool, flags: int | None = None
) -> int | Refusal:
    """`name` under the (checked) folder `parent_fd`, opened link-free and checked on its descriptor.

    `flags` (e.g. os.O_RDONLY | os.O_NONBLOCK for a file to read) replace the default O_PATH; the descriptor is
    the caller's to close. A refusal closes it."""
    base = _WALK_FLAGS if flags is None else flags | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(name, base | (os.O_DIRECTORY if folder else 0), dir_fd=parent_fd)
    except OSError as exc:
        return _open_refusal(parent_fd, name, shown, exc)
    try:
        found = fd_refusal(fd, shown)
    except OSError as exc:
        os.close(fd)
        return Refusal(shown, Flaw.UNCHECKABLE, detail=exc.strerror or str(exc))
    if found is not None:
        os.close(fd)
        return found
    return fd


def open_trusted_path(path: Path, *, folder: bool, flags: int | None = None) -> int | Refusal:
    """Absolute `path` walked from `/`: every folder on the way and the entry itself pass the rule, each checked
    on the descriptor it is opened as, the next name opened from it. The descriptor of the last entry (O_PATH
    unless `flags` say how to open it), or the first refusal."""
    parts = path.parts
    if not path.is_absolute() or not parts:
        return Refusal(str(path), Flaw.UNCHECKABLE, detail="not an absolute path")
    fd = _checked_root()
    if isinstance(fd, Refusal):
        return fd
    for depth, name in enumerate(parts[1:], start=2):
        last = depth == len(parts)
        try:
            child = open_trusted_child(fd, name, os.path.join(*parts[:depth]), folder=folder or not last,
                                       flags=flags if last else None)
        finally:
            os.close(fd)
        if isinstance(child, Refusal):
            return child
        fd = child
    return fd


def check_trusted_path(path: Path, *, folder: bool) -> Refusal | None:
    """open_trusted_path's verdict alone (the descriptor closed): the first entry of `/`..`path` refused."""
    found = open_trusted_path(path, folder=folder)
    if isinstance(found, Refusal):
        return found
    os.close(found)
    return None


def _checked_root() -> int | Refusal:
    """`/` itself, opened and checked like every folder under it."""
    try:
        fd = os.open("/", _DIR_FLAGS)
    except OSError as exc:
        return Refusal("/", Flaw.UNCHECKABLE, detail=exc.strerror or str(exc))
    found = fd_refusal(fd, "/")
    if found is not None:
        os.close(fd)
        return found
    return fd


def _open_refusal(parent_fd: int, name: str, shown: str, exc: OSError) -> Refusal:
    """What a failed link-free open means: a link (ELOOP, or ENOTDIR on a link), else what the system said."""
    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
        try:
            if stat.S_ISLNK(os.stat(name, dir_fd=parent_fd, follow_symlinks=False).st_mode):
                return Refusal(shown, Flaw.LINK)
        except OSError:
            pass
    return Refusal(shown, Flaw.UNCHECKABLE, detail=exc.strerror or str(exc), absent=exc.errno == errno.ENOENT)


def _user_name(uid: int) -> str:
    try:
        return f" ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return ""
