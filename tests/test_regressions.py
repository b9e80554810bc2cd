"""The three failures of the hand-written shell patchkit replaces, each made impossible and pinned here.

1. apply with excluded files, then rerun: recognised as already applied, exit 0, nothing written;
2. excluded files are never read for state and never written, on any kind of tree;
3. a partially patched tree is `partial`, never `unapplied` or `conflict`, and never written without a flag.
Each runs on a plain directory and on a git checkout, and must behave identically.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import Registry, cli, git, git_diff, read_tree, write_tree

RUNNER = "atom/model_engine/model_runner.py"
LAYOUT = "atom/utils/kv_layout.py"
BACKENDS = "atom/model_ops/attentions/backends.py"
EAGLE = "atom/spec_decode/eagle_proposer.py"


def _lines(tag: str, n: int = 30) -> bytes:
    return b"".join(b"%s line %d\n" % (tag.encode(), i) for i in range(n))


# Upstream rewrote BACKENDS and EAGLE after the pinned commit, so their hunks cannot fit the pinned tree.
PINNED = {RUNNER: _lines(b"runner".decode()), LAYOUT: _lines("layout"), BACKENDS: _lines("old-backends"),
          EAGLE: _lines("old-eagle")}
UPSTREAM_BASE = {**PINNED, BACKENDS: _lines("new-backends"), EAGLE: _lines("new-eagle")}
UPSTREAM_PR = {
    RUNNER: PINNED[RUNNER].replace(b"runner line 5\n", b"runner line 5 flash\n"),
    LAYOUT: PINNED[LAYOUT].replace(b"layout line 20\n", b"layout line 20\nflash_shape()\n"),
    BACKENDS: UPSTREAM_BASE[BACKENDS].replace(b"new-backends line 3\n", b"guard\n"),
    EAGLE: UPSTREAM_BASE[EAGLE].replace(b"new-eagle line 9\n", b"guard\n"),
}
EXCLUDES = {BACKENDS: "rewritten after the pinned commit", EAGLE: "rewritten after the pinned commit"}


@pytest.fixture(params=["plain", "git"])
def pinned_tree(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    root = tmp_path / "engine"
    root.mkdir()
    write_tree(root, PINNED)
    if request.param == "git":
        git(root, "init", "-q")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "pinned")
    return root


@pytest.fixture
def patch_id(tmp_path: Path, registry: Registry) -> str:
    registry.add("atom-pr2106", git_diff(tmp_path, UPSTREAM_BASE, UPSTREAM_PR), exclude=EXCLUDES)
    return "atom-pr2106"


def _mtimes(root: Path) -> dict[str, int]:
    return {p: (root / p).stat().st_mtime_ns for p in read_tree(root)}


def test_rerun_after_apply_with_excludes_is_a_no_op(pinned_tree: Path, registry: Registry, patch_id: str) -> None:
    first = cli("apply", patch_id, "--root", pinned_tree, "--patches", registry.path, "--json")
    assert first.code == 0, first.err
    assert first.json()["result"] == "applied"
    assert sorted(e["path"] for e in first.json()["excluded"]) == sorted(EXCLUDES)
    patched = read_tree(pinned_tree)
    stamps = _mtimes(pinned_tree)

    again = cli("apply", patch_id, "--root", pinned_tree, "--patches", registry.path, "--json")
    assert again.code == 0, again.err
    assert again.json()["state"] == "applied"
    assert again.json()["result"] == "already-applied"
    assert again.json()["changes"] == []
    assert read_tree(pinned_tree) == patched
    assert _mtimes(pinned_tree) == stamps  # not rewritten with the same bytes either

    text = cli("apply", patch_id, "--root", pinned_tree, "--patches", registry.path)
    assert text.code == 0
    assert "already applied" in text.out


def test_whole_diff_would_not_fit_so_the_excludes_matter(tmp_path: Path, registry: Registry) -> None:
    # Control: without the excludes the same diff conflicts on the pinned tree (the shell's failure mode).
    root = tmp_path / "plain"
    root.mkdir()
    write_tree(root, PINNED)
    registry.add("whole", git_diff(tmp_path, UPSTREAM_BASE, UPSTREAM_PR))
    res = cli("apply", "whole", "--root", root, "--patches", registry.path)
    assert res.code == 1
    assert read_tree(root) == {k: (v, False) for k, v in PINNED.items()}


def test_excluded_files_are_never_written(pinned_tree: Path, registry: Registry, patch_id: str) -> None:
    assert cli("apply", patch_id, "--root", pinned_tree, "--patches", registry.path).code == 0
    tree = read_tree(pinned_tree)
    assert tree[BACKENDS] == (PINNED[BACKENDS], False)
    assert tree[EAGLE] == (PINNED[EAGLE], False)
    assert tree[RUNNER][0] == UPSTREAM_PR[RUNNER]
    assert tree[LAYOUT][0] == UPSTREAM_PR[LAYOUT]
    assert cli("revert", patch_id, "--root", pinned_tree, "--patches", registry.path).code == 0
    assert read_tree(pinned_tree) == {k: (v, False) for k, v in PINNED.items()}


@pytest.mark.parametrize("poison", ["fifo", "outside-link", "directory"])
def test_excluded_files_are_never_read(
    pinned_tree: Path, registry: Registry, patch_id: str, tmp_path: Path, poison: str
) -> None:
    # Anything that tried to read BACKENDS would hang (fifo), be refused (a link out of the root) or fail
    # (a directory). patchkit must not notice it at all.
    target = pinned_tree / BACKENDS
    target.unlink()
    if poison == "fifo":
        os.mkfifo(target)
    elif poison == "outside-link":
        (tmp_path / "secret").write_bytes(b"outside\n")
        target.symlink_to(tmp_path / "secret")
    else:
        target.mkdir()
    for action in ("status", "apply", "status", "revert"):
        res = cli(action, patch_id, "--root", pinned_tree, "--patches", registry.path)
        assert res.code in (0, 3), (action, res.out, res.err)
    if poison == "outside-link":
        assert (tmp_path / "secret").read_bytes() == b"outside\n"  # the file behind the link is untouched
    assert target.is_symlink() or target.is_dir() or target.is_fifo()  # and the excluded entry itself too


def test_partial_tree_is_partial_and_untouched(pinned_tree: Path, registry: Registry, patch_id: str) -> None:
    write_tree(pinned_tree, {RUNNER: UPSTREAM_PR[RUNNER]})  # a crash after the first file
    before = read_tree(pinned_tree)

    status = cli("status", patch_id, "--root", pinned_tree, "--patches", registry.path, "--json")
    assert status.code == 4
    doc = status.json()
    assert doc["state"] == "partial"
    states = {f["path"]: f["state"] for f in doc["files"]}
    assert states == {RUNNER: "applied", LAYOUT: "unapplied"}

    for action in ("apply", "revert"):
        res = cli(action, patch_id, "--root", pinned_tree, "--patches", registry.path, "--json")
        assert res.code == 1
        assert res.json()["result"] == "refused"
        assert read_tree(pinned_tree) == before

    refused = cli("apply", patch_id, "--root", pinned_tree, "--patches", registry.path)
    assert "partial" in refused.out and "--complete" in refused.out
    assert LAYOUT in refused.out  # the per-file table is shown on refusal

    done = cli("apply", patch_id, "--root", pinned_tree, "--patches", registry.path, "--complete", "--json")
    assert done.code == 0
    assert [c["path"] for c in done.json()["changes"]] == [LAYOUT]
    assert cli("status", patch_id, "--root", pinned_tree, "--patches", registry.path).code == 0


def test_partial_can_be_completed_backwards(pinned_tree: Path, registry: Registry, patch_id: str) -> None:
    write_tree(pinned_tree, {LAYOUT: UPSTREAM_PR[LAYOUT]})
    res = cli("revert", patch_id, "--root", pinned_tree, "--patches", registry.path, "--complete")
    assert res.code == 0, res.out
    assert read_tree(pinned_tree) == {k: (v, False) for k, v in PINNED.items()}


def test_drifted_tree_is_conflict_not_partial(pinned_tree: Path, registry: Registry, patch_id: str) -> None:
    write_tree(pinned_tree, {RUNNER: PINNED[RUNNER].replace(b"runner line 4\n", b"someone else\n")})
    res = cli("status", patch_id, "--root", pinned_tree, "--patches", registry.path, "--json")
    assert res.code == 5
    assert res.json()["state"] == "conflict"
    hunk = res.json()["files"][0]["hunks"][0]
    assert hunk["state"] == "conflict"
    assert "someone else" in hunk["detail"]
