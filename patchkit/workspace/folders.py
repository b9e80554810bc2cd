"""Walking to a path's folder for writing: link-free, descriptor by descriptor, creating folders on demand.

Every path is walked through folder descriptors opened with O_NOFOLLOW (tree.open_child_dir): no write goes
through a symlink, wherever it points, and nothing outside the root is ever opened for writing. Folders under
`.patchkit` are checked for trust on the way (trust.py).
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from patchkit.input.tree import STATE_DIR, Root, Snapshot, open_child_dir, read_at, split_relative
from patchkit.workspace.disk import Disk, lstat_at, unlink_present
from patchkit.workspace.journal import Area
from patchkit.workspace.names import JOURNAL_NAME
from patchkit.workspace.trust import STATE_DIR_MODE, open_state_dir, trusted_fd

ENGINE_DIR_MODE = 0o755  # a folder a diff creates: like git with the usual umask, whatever the umask is


@dataclass(frozen=True)
class Roots:
    root: Path
    tree_fd: int
    state_fd: int

    def fd(self, area: Area) -> int:
        return self.tree_fd if area is Area.TREE else self.state_fd

    def path(self, area: Area) -> Path:
        return self.root if area is Area.TREE else self.root / STATE_DIR


@contextlib.contextmanager
def open_roots(root: Root, *, create: bool) -> Iterator[Roots | None]:
    """The root's descriptor and its (trusted) state folder's; None when the state folder is missing."""
    state_fd = open_state_dir(root, create=create)
    if state_fd is None:
        yield None
        return
    try:
        yield Roots(root.path, root.fd, state_fd)
    finally:
        os.close(state_fd)


def read(roots: Roots, area: Area, rel: str) -> Snapshot:
    return read_at(roots.fd(area), roots.path(area), rel)


class FolderGone(FileNotFoundError):
    """open_parent met a missing folder it was not asked to make (one that was there and is gone)."""


def open_parent(
    roots: Roots,
    area: Area,
    folders: tuple[str, ...],
    rel: str,
    disk: Disk,
    *,
    create: Mapping[str, int | None] | None,
) -> int | None:
    """Descriptor of the folder holding `rel`, walked without following links.

    create=None: None if a folder is missing. Otherwise the missing folders `create` lists are made, each with
    the mode it records for it (0755 in the tree, 0755 in the state folder, when it records none), set on the
    descriptor so the umask plays no part; a missing folder it does not list raises FolderGone, before any
    folder is made.
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
                if "/".join(folders[: i + 1]) not in create:
                    raise FolderGone(errno.ENOENT, "a folder that was there is gone", str(shown))
                disk.mkdir(fd, part)
                child = open_child_dir(fd, part, rel, str(shown))
                if child is None:
                    raise FileNotFoundError(errno.ENOENT, "vanished after mkdir", str(shown))
                mode = create.get("/".join(folders[: i + 1]))
                default = ENGINE_DIR_MODE if area is Area.TREE else STATE_DIR_MODE
                disk.fchmod(child, default if mode is None else mode & 0o777, part)
                disk.fsync(fd, part)
            elif area is Area.STATE:
                trusted_fd(child, str(shown), roots.path(Area.STATE))
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def fsync_folder(roots: Roots, disk: Disk, area: Area, folders: tuple[str, ...]) -> None:
    """fsync one folder a transaction changed (it may be gone: a deletion can empty and remove it)."""
    fd = open_parent(roots, area, folders, "/".join(folders) or ".", disk, create=None) if folders else None
    if folders and fd is None:
        return
    try:
        disk.fsync(fd if fd is not None else roots.fd(area), folders[-1] if folders else ".")
    finally:
        if fd is not None:
            os.close(fd)


def rmdir_if_empty(roots: Roots, area: Area, folder: str, disk: Disk) -> bool | None:
    """Remove `folder` if it is empty: True removed, False not empty, None already gone."""
    parts = split_relative(folder)
    parent = open_parent(roots, area, parts[:-1], folder, disk, create=None)
    if parent is None:
        return None
    try:
        if lstat_at(parent, parts[-1]) is None:  # look first: a read-only folder refuses even a missing name
            return None
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


def drop_journal(roots: Roots, disk: Disk) -> None:
    unlink_present(disk, roots.state_fd, JOURNAL_NAME)  # gone already if only the fsync after it failed
    disk.fsync(roots.state_fd, JOURNAL_NAME)


def describe(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return f"{exc.filename + ': ' if exc.filename else ''}{exc.strerror or exc}"
    return str(exc) or type(exc).__name__
