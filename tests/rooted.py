"""The engine-side functions that take a `tree.Root`, called with a path: each opens the root for the one call
(as a command opens it once for its run) and closes it after. For tests that drive those functions directly."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from patchkit.input import tree
from patchkit.input.tree import Snapshot, open_root

if TYPE_CHECKING:
    from patchkit.diff.hunkset import HunkSet
    from patchkit.judge.treestate import TreeState
    from patchkit.plan.plan import FileChange
    from patchkit.workspace.recovery import Recovery


def read_snapshot(root: Path, rel: str) -> Snapshot:
    with open_root(root) as handle:
        return tree.read_snapshot(handle, rel)


def read_all(root: Path, paths: Iterable[str]) -> dict[str, Snapshot]:
    with open_root(root) as handle:
        return tree.read_all(handle, paths)


def scan_tree(root: Path, hunk_set: HunkSet) -> TreeState:
    from patchkit.judge import state

    with open_root(root) as handle:
        return state.scan_tree(handle, hunk_set)


def commit_changes(root: Path, changes: Sequence[FileChange], **kwargs: Any) -> None:
    from patchkit.workspace import commit

    with open_root(root) as handle:
        commit.commit_changes(handle, changes, **kwargs)


def recover(root: Path) -> Recovery | None:
    from patchkit.workspace import recovery

    with open_root(root) as handle:
        return recovery.recover(handle)


@contextlib.contextmanager
def locked(root: Path, timeout: float, **kwargs: Any) -> Iterator[Recovery | None]:
    from patchkit.workspace import lock

    with open_root(root) as handle, lock.locked(handle, timeout, **kwargs) as recovered:
        yield recovered


def restart_outcomes(
    specs: Sequence[Any], root: Path, action: Any, options: Any, *, waited: bool = False
) -> tuple[Any, Any, bool]:
    from patchkit.run import actions

    with open_root(root) as handle:
        return actions.restart_outcomes(specs, handle, action, options, waited=waited)


__all__ = ["commit_changes", "locked", "read_all", "read_snapshot", "recover", "restart_outcomes",
           "scan_tree"]
