"""tree.read_all: one walk per folder for many paths, with exactly what read_snapshot gives for each path."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from patchkit.errors import PatchkitError
from patchkit.input.tree import Snapshot
from tests.rooted import read_all, read_snapshot


def one_by_one(root: Path, paths: list[str]) -> dict[str, Snapshot] | str:
    try:
        return {p: read_snapshot(root, p) for p in paths}
    except PatchkitError as exc:
        return f"{type(exc).__name__}: {exc}"


def batched(root: Path, paths: list[str]) -> dict[str, Snapshot] | str:
    try:
        return read_all(root, paths)
    except PatchkitError as exc:
        return f"{type(exc).__name__}: {exc}"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    for rel, data in {
        "a/b/c/one.py": b"1\n", "a/b/c/two.py": b"2\r\n", "a/b/three.py": b"", "a/four.py": b"4",
        "x/y/five.py": b"5\n", "top.py": b"top\n", "a/b/d/six.py": b"6\n",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    os.chmod(root / "a/four.py", 0o755)
    (root / "afile").write_bytes(b"not a folder\n")
    return root


PATHS = [
    "a/b/c/one.py", "a/b/c/two.py", "a/b/three.py", "a/four.py", "x/y/five.py", "top.py", "a/b/d/six.py",
    "a/b/c/missing.py", "a/missing/deeper/file.py", "missing/file.py", "x/y/z/none.py", "a/b/c/one.py",
]


def test_any_order_of_paths_reads_as_one_by_one(tree: Path) -> None:
    rng = random.Random(3)
    for _ in range(200):
        paths = rng.sample(PATHS, rng.randint(1, len(PATHS)))
        assert batched(tree, paths) == one_by_one(tree, paths)


@pytest.mark.parametrize("bad", ["afile/inside.py", "link/file.py", "a/b/linked.py", "a/b"])
def test_links_and_non_folders_fail_as_one_by_one(tree: Path, bad: str) -> None:
    (tree / "link").symlink_to(tree / "a")
    (tree / "a/b/linked.py").symlink_to(tree / "top.py")
    for paths in ([bad], ["a/b/c/one.py", bad, "top.py"], ["x/y/five.py", "a/b/c/two.py", bad]):
        expected = one_by_one(tree, paths)
        assert isinstance(expected, str)  # the case is a refusal
        assert batched(tree, paths) == expected


def test_no_descriptor_is_left_open(tree: Path) -> None:
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        batched(tree, PATHS)
        batched(tree, ["a/b/c/one.py", "link-missing/x", "afile/inside.py"])
    assert len(os.listdir("/proc/self/fd")) == before
