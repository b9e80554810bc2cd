"""state.py: combining hunk states, undecidable hunks, and the plan's refusal to write them."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchkit.matching import HunkState
from patchkit.state import PatchState, combine
from tests.conftest import Registry, cli, git_diff, read_tree, write_tree

A, U, C, X = HunkState.APPLIED, HunkState.UNAPPLIED, HunkState.CONFLICT, HunkState.AMBIGUOUS


@pytest.mark.parametrize(
    ("units", "expected"),
    [
        ([A, A], PatchState.APPLIED),
        ([U, U], PatchState.UNAPPLIED),
        ([A, U], PatchState.PARTIAL),
        ([A, U, C], PatchState.CONFLICT),
        ([A, X], PatchState.AMBIGUOUS),
        ([X, C], PatchState.CONFLICT),
        ([PatchState.PARTIAL, PatchState.APPLIED], PatchState.PARTIAL),
        ([PatchState.UNAPPLIED, PatchState.APPLIED], PatchState.PARTIAL),
    ],
)
def test_combine(units: list[HunkState | PatchState], expected: PatchState) -> None:
    assert combine(units) is expected


def _block(prefix: str, lines: range) -> bytes:
    return b"".join(f"{prefix}{i}\n".encode() for i in lines)


def test_undecidable_hunk_is_named_and_never_written(tmp_path: Path, registry: Registry, engine: Path) -> None:
    before = _block("L", range(30))
    after = before.replace(b"L15\n", b"changed\n")
    registry.add("p", git_diff(tmp_path, {"f.py": before}, {"f.py": after}))
    # The hunk is expected at line 13 (L12..L18). The post-image sits ten lines above that, the pre-image ten
    # lines below: equally near, both readings hold, and nothing else in the file tells them apart.
    pre = _block("L", range(12, 19))
    post = pre.replace(b"L15\n", b"changed\n")
    tree = _block("junk", range(2)) + post + _block("gap", range(13)) + pre + _block("end", range(3))
    write_tree(engine, {"f.py": tree})

    status = cli("status", "p", "--root", engine, "--patches", registry.path, "--json")
    assert status.code == 5
    doc = status.json()
    assert doc["state"] == "ambiguous"
    hunk = doc["files"][0]["hunks"][0]
    assert hunk["state"] == "ambiguous" and "line 3" in hunk["detail"] and "line 23" in hunk["detail"]
    assert sorted(hunk["candidate_lines"]) == [3, 23]
    for action in ("apply", "revert"):
        refused = cli(action, "p", "--root", engine, "--patches", registry.path)
        assert refused.code == 1
        assert "ambiguous" in refused.out
    for action in ("apply", "revert"):
        assert cli(action, "p", "--root", engine, "--patches", registry.path, "--complete").code == 1
    assert read_tree(engine) == {"f.py": (tree, False)}


def test_the_rest_of_the_file_settles_a_look_alike(tmp_path: Path, registry: Registry, engine: Path) -> None:
    # Deleting the first of two equal line pairs: the post-image is a prefix of the pre-image, both at line 1.
    # Only the reading "unapplied" puts the second hunk where the diff says it is.
    before = b"\nb\na\nb\na\nb\nb\na\na\na\na"
    after = b"\nb\na\nb\nb\na\na\na\na\na"
    registry.add("p", git_diff(tmp_path, {"f": before}, {"f": after}))
    write_tree(engine, {"f": before})
    assert cli("status", "p", "--root", engine, "--patches", registry.path).code == 3
    assert cli("apply", "p", "--root", engine, "--patches", registry.path).code == 0
    assert (engine / "f").read_bytes() == after
    assert cli("status", "p", "--root", engine, "--patches", registry.path).code == 0
