"""A diff made from two trees: `patchkit new ID --from-tree EDITED --base-tree PRISTINE`.

Both trees are walked without following links; a file is changed when its bytes or its executable bit differ
(the only mode a diff carries), added or removed. git makes the diff of exactly those files
(forge.diff_snapshots: pinned options, no config, attributes neutralised), so CRLF, a missing final newline and
odd names come out as git writes them. A binary file cannot be carried by a text diff: it is listed, and the
caller excludes it or refuses. Bytecode caches (`__pycache__`), `.git` and `.patchkit` are not compared.
Nothing here writes to either tree.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from patchkit.errors import BadInputError
from patchkit.input.tree import Snapshot
from patchkit.tooling.forge import diff_snapshots

SKIPPED_FOLDERS = frozenset({".git", ".patchkit", "__pycache__"})
_BINARY_PROBE = 8000  # git's own test: a NUL byte in the first 8000 bytes makes a file binary


@dataclass(frozen=True)
class TreeDiff:
    data: bytes  # git's diff of the changed files (binary ones as "Binary files ... differ")
    changed: tuple[str, ...]  # every path that differs, sorted
    binary: tuple[str, ...]  # the changed paths a text diff cannot carry


def diff_trees(base: Path, edited: Path) -> TreeDiff:
    """The diff from `base` to `edited`; refuses a link that differs, an unreadable file, and no difference."""
    for label, folder in (("--base-tree", base), ("--from-tree", edited)):
        if not folder.is_dir():
            raise BadInputError(f"{label} is not a folder", where=str(folder))
    if base.resolve() == edited.resolve():
        raise BadInputError("--from-tree and --base-tree are the same folder", where=str(edited),
                            hint="--from-tree is a copy of the pristine tree with your edits")
    old, new = _entries(base), _entries(edited)
    before: dict[str, Snapshot] = {}
    after: dict[str, Snapshot] = {}
    binary: list[str] = []
    for path in sorted(old.keys() | new.keys()):
        a, b = old.get(path), new.get(path)
        if a is not None and b is not None and _same_link(base / path, a, edited / path, b):
            continue
        if any(p is not None and stat.S_ISLNK(p.st_mode) for p in (a, b)):
            raise BadInputError(
                f"{path} is a symbolic link in one of the trees and differs: patchkit patches regular files only",
                where=str(edited / path), hint="make the same link in both trees, or change the file it points to",
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
            "the two trees hold the same files: there is nothing to make a patch of", where=str(edited),
            hint="edit the copy (--from-tree), not the pristine tree (--base-tree)",
        )
    return TreeDiff(diff_snapshots(before, after), tuple(sorted(after)), tuple(binary))


def _entries(root: Path) -> dict[str, os.stat_result]:
    """POSIX relative path -> lstat of every regular file and link below root (folders are implied)."""
    out: dict[str, os.stat_result] = {}
    for folder, dirnames, filenames in os.walk(root, onerror=_walk_error):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_FOLDERS)
        here = Path(folder)
        for name in [*filenames, *(d for d in dirnames if (here / d).is_symlink())]:
            full = here / name
            info = full.lstat()
            if stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode):
                out[PurePosixPath(full.relative_to(root).as_posix()).as_posix()] = info
    return out


def _walk_error(exc: OSError) -> None:
    raise BadInputError(f"cannot read the folder: {exc.strerror}", where=str(exc.filename)) from None


def _same_link(first: Path, a: os.stat_result, second: Path, b: os.stat_result) -> bool:
    """Both are links with the same target (a link that is the same in both trees is no change)."""
    if not (stat.S_ISLNK(a.st_mode) and stat.S_ISLNK(b.st_mode)):
        return False
    return os.readlink(first) == os.readlink(second)


def _executable(info: os.stat_result) -> bool:
    return bool(info.st_mode & 0o100)


def _snapshot(root: Path, path: str, info: os.stat_result | None) -> Snapshot:
    if info is None:
        return Snapshot(path, None, None)
    try:
        with open(root / path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise BadInputError(f"cannot read the file: {exc.strerror}", where=str(root / path)) from None
    return Snapshot(path, data, stat.S_IMODE(info.st_mode))
