"""The engine root as a command holds it (Root, opened once by open_root), and the reads of its tree.

The reads themselves (link-free path resolution and byte-exact snapshots) are patchkit.input.reads, the
standard library's light modules alone so the restart entry can use them; they are named here too, as every
stage has always imported them from this module.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from patchkit.input.reads import (
    NAME_MAX,
    STATE_DIR,
    Snapshot,
    iter_all_at,
    open_child_dir,
    open_folder,
    open_root_fd,
    read_all_at,
    read_at,
    read_entry,
    split_relative,
    trim_chain,
)

__all__ = [
    "NAME_MAX",
    "STATE_DIR",
    "Root",
    "Snapshot",
    "iter_all_at",
    "open_child_dir",
    "open_folder",
    "open_root",
    "open_root_fd",
    "read_all",
    "read_all_at",
    "read_at",
    "read_entry",
    "read_snapshot",
    "split_relative",
    "trim_chain",
]


@dataclass(frozen=True)
class Root:
    """The engine root, opened once per command (open_root): every read, the lock, the state folder, recovery
    and the transaction work relative to `fd`, so what "the root" is cannot change between them.

    `path` (absolute, symlink-free) is for messages, the journal, and the one deliberate fresh look after a
    transaction (workspace.commit checks the path still names this folder); `dev`/`ino` are its identity.
    Close it with `close()`, or use it as a context manager.
    """

    fd: int
    path: Path
    dev: int
    ino: int

    @property
    def state_path(self) -> Path:
        return self.path / STATE_DIR

    def close(self) -> None:
        os.close(self.fd)

    def __enter__(self) -> Root:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_root(root: Path) -> Root:
    """The root, opened once: an absolute, symlink-free directory, with its descriptor and identity."""
    fd, real = open_root_fd(root)
    st = os.fstat(fd)
    return Root(fd, Path(real), st.st_dev, st.st_ino)


def read_snapshot(root: Root, rel: str) -> Snapshot:
    """`rel` under root, as found: walked link-free, read with O_NOFOLLOW."""
    return read_at(root.fd, root.path, rel)


def read_all(root: Root, paths: Iterable[str]) -> dict[str, Snapshot]:
    """Every path under root, each as read_snapshot reads it, walking each folder once for consecutive paths."""
    return read_all_at(root.fd, root.path, paths)
