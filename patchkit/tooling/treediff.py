"""A diff made from two trees: `patchkit new ID --from-tree EDITED --base-tree PRISTINE`.

Both trees are opened once and walked, then read, through folder descriptors opened without following links
(input.tree.open_child_dir, read_at): a folder swapped for a link between the walk and the read (to /etc, say)
is refused, never read through, so nothing outside the two trees can reach the diff. A file is changed when its
bytes or its executable bit differ (the only mode a diff carries), added or removed. git makes the diff of
exactly those files (forge.diff_snapshots: pinned options, no config, attributes neutralised), so CRLF, a
missing final newline and odd names come out as git writes them. A binary file cannot be carried by a text
diff: it is listed, and the caller excludes it or refuses. Bytecode caches (`__pycache__`), `.git` and
`.patchkit` are not compared. Nothing here writes to either tree.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from patchkit.errors import BadInputError, UnsafePathError
from patchkit.input.tree import Snapshot, open_child_dir, read_at
from patchkit.tooling.forge import diff_snapshots

SKIPPED_FOLDERS = frozenset({".git", ".patchkit", "__pycache__"})
_BINARY_PROBE = 8000  # git's own test: a NUL byte in the first 8000 bytes makes a file binary


@dataclass(frozen=True)
class TreeDiff:
    data: bytes  # git's diff of the changed files (binary ones as "Binary files ... differ")
    changed: tuple[str, ...]  # every path that differs, sorted
    binary: tuple[str, ...]  # the changed paths a text diff cannot carry


@dataclass(frozen=True)
class _Tree:
    """One of the two trees, opened once: its descriptor (every walk and read starts there) and its path."""

    fd: int
    path: Path


def diff_trees(base: Path, edited: Path) -> TreeDiff:
    """The diff from `base` to `edited`; refuses a link that differs, an unreadable file, and no difference."""
    with contextlib.ExitStack() as opened:
        old_tree = _open_tree("--base-tree", base, opened)
        new_tree = _open_tree("--from-tree", edited, opened)
        if os.path.samestat(os.fstat(old_tree.fd), os.fstat(new_tree.fd)):
            raise BadInputError("--from-tree and --base-tree are the same folder", where=str(edited),
                                hint="--from-tree is a copy of the pristine tree with your edits")
        return _diff(old_tree, new_tree)


def _open_tree(label: str, folder: Path, opened: contextlib.ExitStack) -> _Tree:
    """The folder given on the command line (links in its own path are the user's to give), opened once."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        why = "is not a folder" if exc.errno in (errno.ENOENT, errno.ENOTDIR) else f"cannot be read: {exc.strerror}"
        raise BadInputError(f"{label} {why}", where=str(folder)) from None
    opened.callback(os.close, fd)
    return _Tree(fd, Path(os.path.abspath(folder)))


def _diff(base: _Tree, edited: _Tree) -> TreeDiff:
    old, new = _entries(base), _entries(edited)
    before: dict[str, Snapshot] = {}
    after: dict[str, Snapshot] = {}
    binary: list[str] = []
    for path in sorted(old.keys() | new.keys()):
        a, b = old.get(path), new.get(path)
        if a is not None and b is not None and _same_link(base, path, a, edited, b):
            continue
        if any(p is not None and stat.S_ISLNK(p.st_mode) for p in (a, b)):
            raise BadInputError(
                f"{path} is a symbolic link in one of the trees and differs: patchkit patches regular files only",
                where=str(edited.path / path), hint="make the same link in both trees, or change the file it points to",
            )
        if a is not None and b is not None and a.st_size == b.st_size and _executable(a) == _executable(b):
            first, second = _snapshot(base, path, a), _snapshot(edited, path, b)
            if first.data == second.data:
                continue
        before[path] = _snapshot(base, path, a)
        after[path] = _snapshot(edited, path, b)
        if any(s.data is not None and b"\0" in s.data[:_BINARY_PROBE] for s in (before[path], after[path])):
            binary.append(path)
    if not after:
        raise BadInputError(
            "the two trees hold the same files: there is nothing to make a patch of", where=str(edited.path),
            hint="edit the copy (--from-tree), not the pristine tree (--base-tree)",
        )
    return TreeDiff(diff_snapshots(before, after), tuple(sorted(after)), tuple(binary))


def _entries(tree: _Tree) -> dict[str, os.stat_result]:
    """POSIX relative path -> lstat of every regular file and link below the tree (folders are implied), walked
    through descriptors: each folder opened link-free from its parent's (a link swapped in is refused)."""
    out: dict[str, os.stat_result] = {}
    _walk(tree.fd, str(tree.path).rstrip("/"), "", out)
    return out


def _walk(fd: int, shown: str, prefix: str, out: dict[str, os.stat_result]) -> None:
    try:
        with os.scandir(fd) as listing:
            found = sorted((entry.name, entry.stat(follow_symlinks=False)) for entry in listing)
    except OSError as exc:
        raise BadInputError(f"cannot read the folder: {exc.strerror}", where=shown) from None
    for name, info in found:
        rel = f"{prefix}{name}"
        if stat.S_ISDIR(info.st_mode):
            if name in SKIPPED_FOLDERS:
                continue
            child = open_child_dir(fd, name, rel, f"{shown}/{name}")
            if child is None:
                raise UnsafePathError(f"{rel!r} vanished while the tree was walked", where=f"{shown}/{name}",
                                      hint="make the diff from trees nothing else changes meanwhile")
            try:
                _walk(child, f"{shown}/{name}", f"{rel}/", out)
            finally:
                os.close(child)
        elif stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode):
            out[rel] = info


def _same_link(first: _Tree, path: str, a: os.stat_result, second: _Tree, b: os.stat_result) -> bool:
    """Both are links with the same target (a link that is the same in both trees is no change)."""
    if not (stat.S_ISLNK(a.st_mode) and stat.S_ISLNK(b.st_mode)):
        return False
    return _read_link(first, path) == _read_link(second, path)


def _read_link(tree: _Tree, path: str) -> str:
    """A link's target, read from its folder's descriptor (the folders on the way walked link-free)."""
    folder, _, name = path.rpartition("/")
    fd = os.dup(tree.fd)
    try:
        for part in folder.split("/") if folder else ():
            child = open_child_dir(fd, part, path, str(tree.path / folder))
            os.close(fd)
            if child is None:
                raise UnsafePathError(f"{path!r} vanished while the trees were compared", where=str(tree.path / path))
            fd = child
        return os.readlink(name, dir_fd=fd)
    except OSError as exc:
        raise BadInputError(f"cannot read the link: {exc.strerror}", where=str(tree.path / path)) from None
    finally:
        os.close(fd)


def _executable(info: os.stat_result) -> bool:
    return bool(info.st_mode & 0o100)


def _snapshot(tree: _Tree, path: str, info: os.stat_result | None) -> Snapshot:
    """The file's bytes and mode, read link-free from the tree's descriptor (read_at: every folder opened with
    O_NOFOLLOW, the file too, and checked to be the file its lstat saw)."""
    if info is None:
        return Snapshot(path, None, None)
    snap = read_at(tree.fd, tree.path, path)
    if snap.data is None:
        raise UnsafePathError(f"{path!r} vanished while the trees were compared", where=str(tree.path / path),
                              hint="make the diff from trees nothing else changes meanwhile")
    return snap
