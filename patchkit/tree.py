"""Read-only access to the engine tree: safe path resolution and byte-exact snapshots.

Every path patchkit touches goes through `resolve_inside`, which refuses anything that would leave --root:
`..` components, absolute paths, and symlinks (a link inside the tree is never followed, wherever it points,
because writing through it would change a file patchkit was not asked to change).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from patchkit.errors import BadInputError, UnsafePathError

STATE_DIR = ".patchkit"


@dataclass(frozen=True)
class Snapshot:
    """A file as found: absent, or its exact bytes and permission bits."""

    path: str
    data: bytes | None  # None: the file does not exist
    mode: int | None  # permission bits (st_mode & 0o7777) when it exists

    @property
    def exists(self) -> bool:
        return self.data is not None

    @property
    def executable(self) -> bool:
        return bool(self.mode is not None and self.mode & 0o100)


def check_root(root: Path) -> Path:
    """The root as an absolute, symlink-free directory path."""
    if not root.exists():
        raise BadInputError("the engine root does not exist", where=str(root), hint="check --root")
    if not root.is_dir():
        raise BadInputError("the engine root is not a directory", where=str(root), hint="check --root")
    return Path(os.path.realpath(root))


def resolve_inside(root: Path, rel: str) -> Path:
    """`root/rel`, refusing any path that could leave root or pass through a symlink."""
    pure = PurePosixPath(rel)
    if pure.is_absolute() or not pure.parts or any(p in ("..", ".", "") for p in pure.parts) or "\0" in rel:
        raise UnsafePathError(f"path {rel!r} is not a plain relative path inside the root")
    current = root
    for part in pure.parts:
        current = current / part
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            break  # the rest does not exist yet; nothing to follow
        except NotADirectoryError:
            raise UnsafePathError(f"a parent of {rel!r} is not a directory", where=str(current)) from None
        if stat.S_ISLNK(st.st_mode):
            raise UnsafePathError(
                f"{rel!r} goes through a symbolic link ({current} -> {os.readlink(current)})",
                where=str(current),
                hint="patchkit never writes through links; replace the link with the real file or folder",
            )
    return root / Path(*pure.parts)


def read_snapshot(root: Path, rel: str) -> Snapshot:
    path = resolve_inside(root, rel)
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return Snapshot(rel, None, None)
    if not stat.S_ISREG(st.st_mode):
        raise UnsafePathError(f"{rel!r} is not a regular file", where=str(path))
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise BadInputError(f"cannot read {rel!r}: {exc.strerror}", where=str(path)) from None
    return Snapshot(rel, data, stat.S_IMODE(st.st_mode))
