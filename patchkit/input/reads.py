"""Reading the engine tree without following a link: safe path resolution and byte-exact snapshots.

Every path patchkit touches is checked by `split_relative` (no `..`, no absolute path, no NUL) and then walked
one component at a time through directory file descriptors opened with O_NOFOLLOW, so a symlink anywhere on
the way is refused, wherever it points: writing through it would change a file patchkit was not asked to
change. Walking by descriptor (rather than checking a path and then opening it) also means a link swapped in
between the check and the open is refused instead of followed.

The standard library's light modules alone (no pathlib, no dataclasses): the restart entry
(patchkit.cli.restart) reads every file a record lists with these, before anything heavier loads. The command's
Root (input.tree) is made of open_root_fd's answer.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Generator, Iterable
from typing import TYPE_CHECKING, NamedTuple

from patchkit.errors import BadInputError, UnsafePathError
from patchkit.input.limits import MAX_TREE_FILE_BYTES, MAX_TREE_READ_BYTES

if TYPE_CHECKING:
    from pathlib import Path

STATE_DIR = ".patchkit"
NAME_MAX = 255  # bytes per path component, on every filesystem patchkit writes to

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO swapped in after the lstat must not hang.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class Snapshot(NamedTuple):
    """A file as found: absent, its exact bytes and permission bits, or (`unread`) only known to be there.

    An unread snapshot (data None, mode set) is a file patchkit removes without reading it: a stale bytecode
    cache (patchkit.plan.bytecode), which the transaction deletes by renaming it to its kept name, so a rollback
    renames it back and the journal never holds a copy of it."""

    path: str
    data: bytes | None  # None: the file does not exist, or (mode set) its bytes were not read
    mode: int | None  # permission bits (st_mode & 0o7777) when it exists

    @property
    def exists(self) -> bool:
        return self.data is not None or self.mode is not None

    @property
    def unread(self) -> bool:
        return self.data is None and self.mode is not None

    @property
    def executable(self) -> bool:
        return bool(self.mode is not None and self.mode & 0o100)


def open_root_fd(root: str | Path) -> tuple[int, str]:
    """The root's descriptor and its absolute, symlink-free path (tree.open_root makes the command's Root of
    them; the restart entry, patchkit.cli.restart, uses them as they are)."""
    real = os.path.realpath(root)
    try:
        fd = os.open(real, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise BadInputError("the engine root does not exist", where=str(root), hint="check --root") from None
    except NotADirectoryError:
        if os.path.lexists(real):
            raise BadInputError("the engine root is not a directory", where=str(root), hint="check --root") from None
        raise BadInputError("the engine root does not exist", where=str(root), hint="check --root") from None
    except OSError as exc:  # e.g. a folder on the way this user may not enter
        raise BadInputError(f"cannot reach the engine root: {exc.strerror}", where=str(root)) from None
    return fd, real


def split_relative(rel: str) -> tuple[str, ...]:
    """The components of a plain relative path, or UnsafePathError for anything that could leave the root."""
    parts = tuple(rel.split("/"))
    if "\0" in rel or rel.startswith("/") or any(p in ("..", ".", "") for p in parts):
        raise UnsafePathError(f"path {rel!r} is not a plain relative path inside the root")
    for part in parts:
        size = len(os.fsencode(part))
        if size > NAME_MAX:
            raise UnsafePathError(
                f"a name in {rel!r} is {size} bytes long; a file name may have at most {NAME_MAX}",
                hint="shorten the name in the diff",
            )
    return parts


def open_child_dir(parent_fd: int, name: str, rel: str, shown: str) -> int | None:
    """Open folder `name` under `parent_fd` without following a link; None if it does not exist.

    `rel` is the path being resolved and `shown` the folder's full path, both for messages.
    """
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise BadInputError(f"cannot open the folder: {exc.strerror}", where=shown) from None
        if stat.S_ISLNK(os.stat(name, dir_fd=parent_fd, follow_symlinks=False).st_mode):
            raise _link_error(rel, shown, os.readlink(name, dir_fd=parent_fd)) from None
        if rel == name:  # the folder asked for itself (the state folder), not one on the way to a file
            raise UnsafePathError(f"{rel!r} is not a directory", where=shown, hint=f"remove {shown}") from None
        raise UnsafePathError(f"a parent of {rel!r} is not a directory", where=shown) from None


def open_folder(base_fd: int, base: str | Path, parts: tuple[str, ...], rel: str) -> int | None:
    """Descriptor of base/parts walked link-free, or None if some component is missing. Caller closes it."""
    fd = os.dup(base_fd)
    shown = str(base).rstrip("/")  # a string, not a Path: joining Paths per component cost more than the opens
    for part in parts:
        shown = f"{shown}/{part}"
        try:
            child = open_child_dir(fd, part, rel, shown)
        finally:
            os.close(fd)
        if child is None:
            return None
        fd = child
    return fd


def read_entry(dir_fd: int, name: str, rel: str, shown: str, *, limit: int = MAX_TREE_FILE_BYTES) -> Snapshot:
    """Snapshot of `name` in an open folder: lstat, then open with O_NOFOLLOW and check it is the same file.

    A file over `limit` bytes is refused on its fstat, before a byte is read, and the read itself stops past
    `limit` (a file growing while it is read is refused too): a planted huge or sparse file costs one fstat."""
    try:
        before = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return Snapshot(rel, None, None)
    if stat.S_ISLNK(before.st_mode):
        raise _link_error(rel, shown, os.readlink(name, dir_fd=dir_fd))
    if not stat.S_ISREG(before.st_mode):
        raise UnsafePathError(f"{rel!r} is not a regular file", where=shown)
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePathError(f"{rel!r} became a symbolic link while being read", where=shown) from None
        raise BadInputError(f"cannot read {rel!r}: {exc.strerror}", where=shown) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino):
            raise UnsafePathError(f"{rel!r} was replaced while being read", where=shown, hint="rerun")
        if st.st_size > limit:
            raise _size_error(rel, shown, f"{st.st_size} bytes", limit)
        chunks = []
        left = limit + 1  # one byte more than allowed: enough to see that the file grew past the bound
        while left > 0 and (chunk := os.read(fd, min(1 << 20, left))):
            chunks.append(chunk)
            left -= len(chunk)
        if left <= 0:
            raise _size_error(rel, shown, f"more than {limit} bytes (it grew while being read)", limit)
    except OSError as exc:
        raise BadInputError(f"cannot read {rel!r}: {exc.strerror}", where=shown) from None
    finally:
        os.close(fd)
    return Snapshot(rel, b"".join(chunks), stat.S_IMODE(st.st_mode))


def read_all_at(base_fd: int, base: str | Path, paths: Iterable[str]) -> dict[str, Snapshot]:
    """read_at for many paths, with each folder walked once per run of its files (see iter_all_at).

    Every file is bounded by MAX_TREE_FILE_BYTES, and all of them together by MAX_TREE_READ_BYTES (a tree with
    a large file at every patched path is refused once the sum passes it, holding at most one file more)."""
    found: dict[str, Snapshot] = {}
    total = 0
    with contextlib.closing(iter_all_at(base_fd, base, paths)) as snapshots:
        for rel, snap in snapshots:
            total += len(snap.data or b"")
            if total > MAX_TREE_READ_BYTES:
                raise UnsafePathError(
                    f"the files this command reads add up to more than {MAX_TREE_READ_BYTES} bytes "
                    f"({MAX_TREE_READ_BYTES >> 20} MiB, the bound of patchkit.input.limits) at {rel!r} "
                    f"({len(snap.data or b'')} bytes); nothing was written",
                    where=f"{str(base).rstrip('/')}/{rel}",
                    hint="check the tree for planted large files at the paths the diff patches, "
                    "or split the patch",
                )
            found[rel] = snap
    return found


def iter_all_at(base_fd: int, base: str | Path, paths: Iterable[str]) -> Generator[tuple[str, Snapshot], None, None]:
    """(path, read_at snapshot) for each path, one at a time (a caller that drops each keeps one file in memory).

    The descriptors of the folders on the way are kept while the next path shares them (a diff lists a folder's
    files together), so each folder is opened once per run of paths, not once per file. Every folder is still
    opened link-free from its parent's descriptor; at most one chain is open, and closing the generator (or
    finishing it) closes it."""
    chain: list[tuple[str, int]] = []  # the open folders from base down: (name, descriptor)
    top = str(base).rstrip("/")
    try:
        for rel in paths:
            parts = split_relative(rel)
            folders = parts[:-1]
            kept = trim_chain(chain, folders)
            for depth in range(kept, len(folders)):
                parent = chain[-1][1] if chain else base_fd
                child = open_child_dir(parent, folders[depth], rel, "/".join((top, *folders[: depth + 1])))
                if child is None:
                    break
                chain.append((folders[depth], child))
            if len(chain) < len(folders):
                yield rel, Snapshot(rel, None, None)
            else:
                yield rel, read_entry(chain[-1][1] if chain else base_fd, parts[-1], rel, "/".join((top, *parts)))
    finally:
        for _, fd in chain:
            os.close(fd)


def trim_chain(chain: list[tuple[str, int]], folders: tuple[str, ...]) -> int:
    """Keep the open folders of `chain` (name, descriptor) that `folders` starts with, close the rest; how many
    are kept. A walk over sorted paths reuses what the previous path opened."""
    kept = 0
    while kept < min(len(chain), len(folders)) and chain[kept][0] == folders[kept]:
        kept += 1
    for _, fd in chain[kept:]:
        os.close(fd)
    del chain[kept:]
    return kept


def read_at(base_fd: int, base: str | Path, rel: str) -> Snapshot:
    """`rel` under the open folder `base_fd` (whose path is `base`, for messages)."""
    parts = split_relative(rel)
    folder = open_folder(base_fd, base, parts[:-1], rel)
    if folder is None:
        return Snapshot(rel, None, None)
    try:
        return read_entry(folder, parts[-1], rel, "/".join((str(base).rstrip("/"), *parts)))
    finally:
        os.close(folder)


def _size_error(rel: str, shown: str, size: str, limit: int) -> UnsafePathError:
    return UnsafePathError(
        f"{rel!r} is {size}, over the limit of {limit} bytes ({limit >> 20} MiB) for a file patchkit "
        "reads; nothing was read or written",
        where=shown,
        hint="no engine source the diff patches is that large: check what is at that path (it may have been "
        "planted there), then remove or replace it, or exclude the file in the manifest",
    )


def _link_error(rel: str, shown: str, target: str) -> UnsafePathError:
    return UnsafePathError(
        f"{rel!r} goes through a symbolic link ({shown} -> {target})",
        where=shown,
        hint="patchkit never reads or writes through links; replace the link with the real file or folder",
    )
