"""End-to-end scenarios from fixtures/scenarios/<name>/, driven through the real CLI.

A scenario folder holds `before/` and `after/` (whole upstream trees; the diff is made from them by real git,
`stages` may add `after2/` etc. to concatenate several commits' diffs), optionally `tree/` (the engine tree
to patch, default `before/`) and `expect/`, and `scenario.toml` with excludes and steps. A step either runs a
command (`run`, checked by `exit`, `state`, `result`, `says`, `tree`) or edits the tree (`set` a file to its
version in a stage folder, or "absent"). `tree = "after"` means: the start tree with every non-excluded change
between `before/` and the last stage; "start": untouched; any other name: that folder exactly.
Each scenario runs on a plain directory and on a git checkout of the same tree.

The expected trees never ask patchkit which paths an exclude matches: git answers that, with its own pathspec
matching (`git diff --name-only -- ':(glob)PATTERN'` over the upstream commits the diff was made from).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from patchkit.input.tomlcompat import tomllib
from tests.conftest import Registry, cli, copy_tree, git, read_tree

SCENARIOS = Path(__file__).resolve().parent.parent / "fixtures" / "scenarios"
NAMES = sorted(p.name for p in SCENARIOS.iterdir() if (p / "scenario.toml").is_file())


def _make_diff(folder: Path, stages: list[str], work: Path) -> bytes:
    """The diff real git makes from `before/` through each stage, committed in turn in work/upstream."""
    repo = work / "upstream"
    repo.mkdir()
    git(repo, "init", "-q")
    copy_tree(folder / "before", repo)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "before")
    diff = b""
    for stage in stages:
        for child in repo.iterdir():
            if child.name != ".git":
                shutil.rmtree(child) if child.is_dir() else child.unlink()
        # Fresh mtimes: a preserved mtime, equal size and a reused inode would make git skip the file.
        shutil.copytree(folder / stage, repo, copy_function=shutil.copy, dirs_exist_ok=True)
        git(repo, "add", "-A")
        diff += git(repo, "diff", "--cached", "--no-color", "-M").stdout
        git(repo, "commit", "-q", "-m", stage)
    return diff


def _excluded_by_git(work: Path, stages: list[str], exclude: Mapping[str, str]) -> set[str]:
    """The paths changed between `before/` and the last stage that the excludes name, as git's pathspecs see
    it: `:(glob)` magic (`*` within a folder, `**` across folders), a plain path matching itself and every path
    under it. Both paths of a rename (--no-renames lists them apart)."""
    if not exclude:
        return set()
    listed = git(work / "upstream", "diff", "--name-only", "--no-renames", "-z", f"HEAD~{len(stages)}", "HEAD",
                 "--", *(f":(glob){pattern}" for pattern in exclude)).stdout
    return {os.fsdecode(path) for path in listed.split(b"\0") if path}


def _expected(folder: Path, name: str, start: dict[str, tuple[bytes, bool]], final: str,
              excluded: set[str]) -> dict[str, tuple[bytes, bool]]:
    if name == "start":
        return start
    if name != "after" and name != final:
        return read_tree(folder / name)
    before, after = read_tree(folder / "before"), read_tree(folder / final)
    expected = dict(start)
    for path in set(before) | set(after):
        if before.get(path) == after.get(path) or path in excluded:
            continue
        if path in after:
            expected[path] = after[path]
        else:
            expected.pop(path, None)
    return expected


@pytest.mark.parametrize("kind", ["plain", "git"])
@pytest.mark.parametrize("name", NAMES)
def test_scenario(name: str, kind: str, tmp_path: Path, registry: Registry) -> None:
    folder = SCENARIOS / name
    spec: dict[str, Any] = tomllib.loads((folder / "scenario.toml").read_text(encoding="utf-8"))
    stages: list[str] = spec.get("stages", ["after"])
    exclude: dict[str, str] = spec.get("exclude", {})
    registry.add(name, _make_diff(folder, stages, tmp_path), exclude=exclude, strip=spec.get("strip", 1))
    excluded = _excluded_by_git(tmp_path, stages, exclude)

    root = tmp_path / "engine"
    copy_tree(folder / ("tree" if (folder / "tree").exists() else "before"), root)
    if kind == "git":
        git(root, "init", "-q")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "pinned")
    start = read_tree(root)

    for number, step in enumerate(spec["step"], 1):
        label = f"{name} step {number} {step}"
        if "set" in step:
            for path, stage in step["set"].items():
                target = root / path
                if stage == "absent":
                    target.unlink()
                else:
                    shutil.copy2(folder / stage / path, target)
            continue
        res = cli(*step["run"][:1], name, "--root", root, "--patches", registry.path, *step["run"][1:], "--json")
        assert res.code == step["exit"], f"{label}: exit {res.code}\n{res.out}\n{res.err}"
        if "state" in step or "result" in step:
            doc = res.json()
            assert doc["state"] == step.get("state", doc["state"]), label
            assert doc["result"] == step.get("result", doc["result"]), label
        if "says" in step:
            assert step["says"] in res.out + res.err, f"{label}: {res.out}{res.err}"
        if "tree" in step:
            expected = _expected(folder, step["tree"], start, stages[-1], excluded)
            assert read_tree(root) == expected, label
