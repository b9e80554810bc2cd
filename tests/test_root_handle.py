"""Issue 22, one root handle: a command opens the engine root by its path exactly once, and reaches everything
under it (the lock, the state folder, recovery, the reads, the transaction) from that descriptor.

A spy on os.open / os.listdir / os.scandir / os.stat / os.lstat counts the calls, in-process through the real
CLI, that name the root or a path inside it by path (no dir_fd): one open of the root, nothing inside it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Registry, cli, git_diff, write_tree

BEFORE = {
    "eng/m1.py": b"".join(b"a%d = %d\n" % (i, i) for i in range(20)),
    "eng/m2.py": b"".join(b"b%d = %d\n" % (i, i) for i in range(20)),
    "eng/sub/m3.py": b"c = 1\n",
    "top.py": b"t = 1\n",
}
FIRST = {"eng/m1.py": BEFORE["eng/m1.py"].replace(b"a5 = 5", b"a5 = 55"), "eng/new.py": b"new = 1\n"}
SECOND = {"eng/sub/m3.py": b"c = 2\n", "top.py": b"t = 2\n"}


class Spy:
    """Every path-named call of the watched os functions that reaches the root or below it."""

    def __init__(self, root: Path) -> None:
        self.root = os.path.realpath(root)
        self.calls: list[tuple[str, str]] = []

    def wrap(self, name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def spy(path: Any, *args: Any, **kwargs: Any) -> Any:
            if kwargs.get("dir_fd") is None and isinstance(path, (str, bytes, os.PathLike)):
                shown = os.fsdecode(os.fspath(path))
                if os.path.isabs(shown):
                    where = os.path.normpath(shown)
                    if where == self.root or where.startswith(self.root + os.sep):
                        self.calls.append((name, where))
            return real(path, *args, **kwargs)

        return spy

    def opens_of_root(self) -> int:
        return sum(1 for name, where in self.calls if name == "open" and where == self.root)

    def inside(self) -> list[tuple[str, str]]:
        return [(name, where) for name, where in self.calls if where != self.root]


@pytest.fixture
def tree(tmp_path: Path, registry: Registry) -> Iterator[tuple[Path, Path]]:
    engine = tmp_path / "engine"
    write_tree(engine, BEFORE)
    registry.add("first-pr1", git_diff(tmp_path, BEFORE, FIRST))
    registry.add("second-pr2", git_diff(tmp_path, BEFORE, SECOND), extra='after = ["first-pr1"]')
    (engine / "eng" / "__pycache__").mkdir()
    (engine / "eng" / "__pycache__" / "m1.cpython-312.pyc").write_bytes(b"stale")  # the bytecode scan runs too
    yield engine, registry.path


def counted(monkeypatch: pytest.MonkeyPatch, root: Path, *args: str | Path) -> Spy:
    spy = Spy(root)
    with monkeypatch.context() as patched:
        for name in ("open", "listdir", "scandir", "stat", "lstat"):
            patched.setattr(os, name, spy.wrap(name, getattr(os, name)))
        result = cli(*args)
    assert result.code in (0, 3), (args, result.code, result.err)
    return spy


@pytest.mark.parametrize(
    "steps",
    [
        [["status", "first-pr1"]],
        [["apply", "first-pr1"]],
        [["apply", "first-pr1"], ["apply", "first-pr1"]],  # the second: the restart fast path
        [["apply", "first-pr1", "--dry-run"]],
        [["apply", "first-pr1"], ["revert", "first-pr1"]],
        [["apply", "--all"]],
        [["apply", "--all"], ["status", "--all"]],
        [["apply", "--all"], ["apply", "--all"]],
        [["apply", "--all"], ["revert", "--all"]],
    ],
    ids=lambda steps: " then ".join(" ".join(s) for s in steps),
)
def test_each_command_opens_the_root_once_and_nothing_under_it_by_path(
    tree: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, steps: list[list[str]]
) -> None:
    engine, patches = tree
    for step in steps:
        spy = counted(monkeypatch, engine, *step, "--root", engine, "--patches", patches)
        assert spy.opens_of_root() == 1, (step, spy.calls)
        assert spy.inside() == [], (step, spy.inside())


def test_recovery_works_from_the_same_handle(tree: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """An interrupted apply's journal: the next status recovers it, still with one open of the root."""
    engine, patches = tree
    from tests.safety_helpers import run_forked

    killed = run_forked(["apply", "first-pr1", "--root", str(engine), "--patches", str(patches)],
                        {"PATCHKIT_FAULT_AFTER": "12"})
    assert killed.killed and (engine / ".patchkit" / "journal.json").exists()
    spy = Spy(engine)
    with monkeypatch.context() as patched:
        for name in ("open", "listdir", "scandir", "stat", "lstat"):
            patched.setattr(os, name, spy.wrap(name, getattr(os, name)))
        result = cli("status", "first-pr1", "--root", engine, "--patches", patches)
    assert result.code == 3 and "recovered an interrupted apply of first-pr1" in result.err, result.err
    assert spy.opens_of_root() == 1 and spy.inside() == [], spy.calls
    assert not (engine / ".patchkit" / "journal.json").exists()
