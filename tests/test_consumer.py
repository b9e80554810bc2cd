"""The consuming repository's real shapes, end to end through the CLI, on fixtures/consumer/ (our own content):
a dist-packages-like root with two packages and a data folder; a multi-PR patch with a hunk-level exclude, a
local patch, a [paths]-mapped patch, a prefix-mapped patch, a patch stacked on another's result, and one
waiver covering all of them. Diffs are made by real git from upstream-layout trees and vendored by the CLI."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.conftest import cli, git_diff, read_tree

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "consumer"

# patch -> (upstream path -> where the file lives in the engine), and the patch whose result it is made on.
LAYOUT: dict[str, tuple[dict[str, str], str | None]] = {
    "vllm-multi": ({"vllm/a.py": "vllm/a.py", "vllm/sampler.py": "vllm/sampler.py"}, None),
    "vllm-stacked": ({"vllm/a.py": "vllm/a.py"}, "vllm-multi"),
    "launcher-local": ({"vllm/entry.py": "vllm/entry.py"}, None),
    "aiter-pr55": ({"aiter/ops.py": "aiter/ops.py", "csrc/kernel.cu": "aiter_meta/csrc/kernel.cu"}, None),
    "aiter-meta-tune": ({"configs/tuned.csv": "aiter_meta/configs/tuned.csv"}, None),
}


def _setup(tmp_path: Path) -> tuple[Path, Path, Path]:
    patches, waivers, engine = tmp_path / "patches", tmp_path / "waivers", tmp_path / "dist-packages"
    shutil.copytree(FIXTURE / "patches", patches)
    shutil.copytree(FIXTURE / "waivers", waivers)
    shutil.copytree(FIXTURE / "engine", engine)
    for pid, (files, on_top_of) in LAYOUT.items():
        before = {
            up: (FIXTURE / "upstream" / on_top_of / up).read_bytes() if on_top_of else (engine / there).read_bytes()
            for up, there in files.items()
        }
        after = {up: (FIXTURE / "upstream" / pid / up).read_bytes() for up in files}
        diff = tmp_path / f"{pid}.diff"
        diff.write_bytes(git_diff(tmp_path, before, after))
        vendored = cli("vendor", pid, "--patches", patches, "--from", diff, "--base-tree", engine)
        assert vendored.code == 0, vendored.err
    return patches, waivers, engine


def test_the_consumer_registry_end_to_end(tmp_path: Path) -> None:
    patches, waivers, engine = _setup(tmp_path)
    pristine = read_tree(engine)
    expect = read_tree(FIXTURE / "expect")
    common = ("--root", engine, "--patches", patches)

    linted = cli("lint", "--patches", patches, "--waivers", waivers, "--strict")
    assert linted.code == 0, linted.out + linted.err

    listed = cli("list", "--patches", patches).out
    assert "vllm-multi: vllm-project/vllm#101, vllm-project/vllm#102, vllm-project/vllm#103, ROCm/aiter#7" in listed
    assert "launcher-local: local (only our benchmark launcher needs it" in listed
    assert "paths csrc/ -> aiter_meta/csrc/" in listed and "paths under aiter_meta/" in listed

    status = cli("status", "--all", "--target", "vllm,aiter", "--strict-base", *common, "--json")
    assert status.code == 3, status.out  # unapplied, and the base verifiably pinned (not 9)
    assert {p["patch"]: p["state"] for p in status.json()["patches"]} == dict.fromkeys(LAYOUT, "unapplied")

    applied = cli("apply", "--all", "--target", "vllm", "--target", "aiter", "--strict-base", *common, "--json")
    assert applied.code == 0, applied.out
    doc = applied.json()
    assert [p["patch"] for p in doc["patches"]][:2] == ["aiter-meta-tune", "aiter-pr55"]  # `after` order, by id
    assert read_tree(engine) == expect

    rerun = cli("apply", "--all", "--target", "vllm,aiter", *common)
    assert rerun.code == 0 and rerun.out.count("already applied, nothing written") == len(LAYOUT), rerun.out
    assert read_tree(engine) == expect

    table = cli("status", "--all", "--strict-base", *common)
    assert table.code == 0, table.out
    records = sorted(p.name for p in (engine / ".patchkit" / "applied").iterdir())
    assert records == sorted(f"{pid}.{ext}" for pid in LAYOUT for ext in ("diff", "files", "json"))

    reverted = cli("revert", "--all", "--target", "vllm,aiter", *common)
    assert reverted.code == 0, reverted.out
    assert read_tree(engine) == pristine
    left = sorted(str(p.relative_to(engine)) for p in (engine / ".patchkit").rglob("*"))
    assert set(left) <= {".patchkit/lock", ".patchkit/.gitignore"}, left


def test_one_target_at_a_time_and_a_waiver_that_forgets_a_pr(tmp_path: Path) -> None:
    patches, waivers, engine = _setup(tmp_path)
    common = ("--root", engine, "--patches", patches)
    assert cli("apply", "--all", "--target", "aiter", *common).code == 0
    assert (engine / "vllm/a.py").read_bytes() == (FIXTURE / "engine/vllm/a.py").read_bytes()
    assert cli("apply", "--all", "--target", "vllm", *common).code == 0
    assert read_tree(engine) == read_tree(FIXTURE / "expect")

    waiver = waivers / "3001.md"
    waiver.write_text(waiver.read_text().replace("vllm-project/vllm#103 and ", "").replace(
        "a local fix: no upstream PR exists", "our own fix"))
    text = waiver.read_text().replace("local, no upstream PR", "no upstream PR")
    waiver.write_text(text)
    linted = cli("lint", "--patches", patches, "--waivers", waivers)
    assert linted.code == 1
    assert "does not cite the upstream PR vllm-project/vllm#103 of patch vllm-multi" in linted.out
    assert "patch launcher-local is local" in linted.out and "the waiver does not say so" in linted.out
