"""Issue 21, `patchkit lint` on a hostile pull request: CI runs it on forks' changes, so every file of the
repository (pyproject.toml, the registry, the waivers, links, the folder layout) is the attacker's.

Each test lays out a real repository in a temporary folder, with a file outside it standing for the CI
machine's own files, and drives the real CLI from the repository's root as CI does. Nothing outside the
repository may be read (its content never reaches the output), written, or turned into a crash.
"""

from __future__ import annotations

import json
import os
import subprocess
import tracemalloc
from pathlib import Path

import pytest

from patchkit.lint.waivers import Topic, parse_waiver
from tests.lint_helpers import FIXTURES, Run, _chdir, isolate_env, lint

SECRET = "ci-deploy-token-name"  # a key name of the machine's file: it must never be echoed


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_env(monkeypatch)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path)


def make_repo(tmp_path: Path) -> Path:
    """A consuming repository (a clean registry and its waivers) next to the machine's own files."""
    outside = tmp_path / "machine"
    outside.mkdir()
    (outside / "config.toml").write_text(f'{SECRET} = "x"\n[waiver]\nintroduced_by = 1\n')
    (outside / "notes.md").write_text(f"# {SECRET}\n\n## Why\nsecret\n")
    (outside / "baseline.json").write_text('{"version": 1, "sites": []}\n')
    root = tmp_path / "repo"
    subprocess.run(["cp", "-r", str(FIXTURES / "clean"), str(root)], check=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def outside(repo: Path) -> Path:
    return repo.parent / "machine"


def project(repo: Path, table: str) -> None:
    (repo / "pyproject.toml").write_text(f"[tool.patchkit]\n{table}\n")


def lint_in(repo: Path, *args: str) -> Run:
    with _chdir(repo):
        return lint(*args)


def machine_files(repo: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(outside(repo).iterdir())}


def refused(run: Run, *needles: str) -> None:
    assert run.exit_code == 2, (run.exit_code, run.stdout, run.stderr)
    text = run.stdout + run.stderr
    assert SECRET not in text, text
    for needle in needles:
        assert needle in text, text


# ------------------------------------------------------------------------------ [tool.patchkit] paths


@pytest.mark.parametrize("value", ["abs", "../machine/new.json", "sub/../../machine/new.json"])
def test_a_baseline_outside_the_repository_is_never_written(repo: Path, value: str) -> None:
    target = str(outside(repo) / "new.json") if value == "abs" else value
    project(repo, f'baseline = "{target}"')
    before = machine_files(repo)
    run = lint_in(repo, "--write-baseline")
    refused(run, "[tool.patchkit] baseline", "pyproject.toml", "outside the project")
    assert machine_files(repo) == before and not (outside(repo) / "new.json").exists()
    refused(lint_in(repo), "[tool.patchkit] baseline")


def test_a_baseline_link_out_of_the_repository_is_neither_read_nor_written(repo: Path) -> None:
    (repo / ".patchkit-baseline.json").symlink_to(outside(repo) / "baseline.json")
    before = machine_files(repo)
    for args in ((), ("--write-baseline",)):
        refused(lint_in(repo, *args), "baseline", "is a link to")
        assert machine_files(repo) == before
        assert (repo / ".patchkit-baseline.json").is_symlink()


@pytest.mark.parametrize("key", ["patches", "waivers"])
def test_registry_folders_outside_the_repository_are_not_read(repo: Path, key: str) -> None:
    for value in (str(outside(repo)), "../machine"):
        project(repo, f'{key} = "{value}"')
        refused(lint_in(repo, "--no-scan"), f"[tool.patchkit] {key}", "pyproject.toml")
    (repo / "elsewhere").symlink_to(outside(repo))
    project(repo, f'{key} = "elsewhere"')
    refused(lint_in(repo, "--no-scan"), f"[tool.patchkit] {key}", "is a link to")


def test_a_folder_named_on_the_command_line_may_be_anywhere(repo: Path) -> None:
    """The person running lint chose it: the confinement is for what the repository says."""
    run = lint_in(repo, "--no-scan", "--patches", str(repo / "patches"), "--waivers", str(repo / "waivers"))
    assert run.exit_code == 0, run.stderr


# ------------------------------------------------------------------------------ links out of the repository


def test_a_waiver_linked_to_a_file_outside_is_not_read(repo: Path) -> None:
    (repo / "waivers" / "77.md").symlink_to(outside(repo) / "notes.md")
    refused(lint_in(repo, "--no-scan", "--format", "json"), "waivers/77.md", "is a link to")


def test_a_manifest_linked_to_a_file_outside_is_not_read(repo: Path) -> None:
    folder = repo / "patches" / "linked"
    folder.mkdir()
    (folder / "manifest.toml").symlink_to(outside(repo) / "config.toml")
    refused(lint_in(repo, "--no-scan"), "manifest.toml", "is a link to")


def test_a_patch_folder_linked_outside_is_not_read(repo: Path) -> None:
    (outside(repo) / "folder").mkdir()
    (outside(repo) / "folder" / "manifest.toml").write_text(f'{SECRET} = "x"\n')
    (repo / "patches" / "linked").symlink_to(outside(repo) / "folder")
    refused(lint_in(repo, "--no-scan"), "patches/linked", "is a link to")


def test_links_inside_the_repository_still_work(repo: Path) -> None:
    first = next(p for p in sorted((repo / "waivers").iterdir()) if p.name[0].isdigit())
    shutil_target = repo / "docs-waiver.md"
    first.rename(shutil_target)
    first.symlink_to(shutil_target)
    run = lint_in(repo, "--no-scan")
    assert run.exit_code == 0, run.stdout + run.stderr


# ------------------------------------------------------------------------------ shape and size


def test_1500_nested_folders_are_walked_not_a_crash(repo: Path) -> None:
    folder = repo / "tools"
    folder.mkdir()
    for _ in range(1500):  # one level at a time: Path.mkdir(parents=True) recurses too
        folder = folder / "d"
        folder.mkdir()
    (folder / "fix.sh").write_text("git apply /tmp/fix.diff\n")
    try:
        run = lint_in(repo, "--format", "json")
        assert run.exit_code == 1, (run.exit_code, run.stderr[-2000:])  # the site found, not a RecursionError
        sites = [s["path"] for s in run.json()["sites"]]
        assert sites == [folder.relative_to(repo).joinpath("fix.sh").as_posix()]
    finally:
        subprocess.run(["rm", "-rf", str(repo / "tools")], check=True)  # shutil.rmtree recurses: too deep


def test_a_huge_sparse_script_is_sized_before_it_is_read(repo: Path) -> None:
    big = repo / "tools" / "huge.sh"
    big.parent.mkdir()
    with big.open("wb") as handle:
        handle.truncate(1 << 30)  # 1 GiB, no block on disk
    tracemalloc.start()
    try:
        run = lint_in(repo)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Not read, and not skipped in silence either: a script lint cannot read fails the check (issue #32, 3).
    assert run.exit_code == 1, run.stderr
    assert run.stdout.startswith("tools/huge.sh: PK405 error: larger than 4 MiB: not read"), run.stdout
    assert peak < 64 << 20, f"lint allocated {peak >> 20} MiB for a 1 GiB file it does not scan"


# Issue #32, 3: a valid script (bash -n accepts it) whose middle lint cannot follow. Each hides nothing: the
# file fails the check (PK405 is an error naming the line) and the sites before and after it are reported.
_BEFORE_AND_AFTER = "git apply /tmp/before.diff\n{middle}git apply /tmp/after.diff\n"
_HOSTILE_MIDDLES = {
    "substitutions 1,000 deep": 'x="' + "$(echo \"" * 1000 + "hi" + '\")' * 1000 + '"\n',
    "substitutions 1,000 deep, a tree with an error": "x=" + "$(echo " * 1000 + "$()" + ")" * 1000 + "\n",
    "embedded shells 1,000 deep": "".join(f"sh <<E{i}\n" for i in range(1000))
    + "".join(f"E{i}\n" for i in reversed(range(1000))),
    "embedded Python 20,000 terms long": 'python3 -c "import subprocess; x = ' + "+".join(["1"] * 20000) + '"\n',
}


@pytest.mark.parametrize("shape", sorted(_HOSTILE_MIDDLES))
def test_a_script_too_deep_to_follow_fails_lint_and_its_other_sites_are_reported(repo: Path, shape: str) -> None:
    script = repo / "tools" / "run.sh"
    script.parent.mkdir()
    script.write_text(_BEFORE_AND_AFTER.format(middle=_HOSTILE_MIDDLES[shape]))
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0  # valid shell
    last = len(script.read_text().splitlines())
    run = lint_in(repo, "--format", "json")
    assert run.exit_code == 1, run.stderr
    unreadable = [(f["severity"], f["path"], f["line"]) for f in run.json()["findings"] if f["rule"] == "PK405"]
    assert unreadable == [("error", "tools/run.sh", 10 if "shells" in shape else 2)], run.stdout
    uncovered = [(f["path"], f["line"]) for f in run.json()["findings"] if f["rule"] == "PK401"]
    assert uncovered == [("tools/run.sh", 1), ("tools/run.sh", last)]
    text = lint_in(repo).stdout
    assert "nested" in text and "exclude it ([tool.patchkit] scan-exclude" in text, text


def test_a_script_with_a_nul_byte_fails_lint_a_data_file_does_not(repo: Path) -> None:
    (repo / "benchmarks").mkdir()
    (repo / "benchmarks" / "weights.bin").write_bytes(b"\0" * 100 + b"git apply /tmp/x.diff\n")  # no script
    (repo / "benchmarks" / "run.sh").write_bytes(b"echo start\ntrue \0\ngit apply /tmp/x.diff\n")
    run = lint_in(repo, "--format", "json")
    assert run.exit_code == 1, run.stderr
    found = [(f["rule"], f["severity"], f["path"], f["line"]) for f in run.json()["findings"]]
    assert found == [("PK405", "error", "benchmarks/run.sh", 2)], run.stdout
    assert "remove the NUL bytes, or exclude it" in lint_in(repo).stdout


def test_a_huge_waiver_is_refused_before_it_is_read(repo: Path) -> None:
    big = repo / "waivers" / "88.md"
    with big.open("wb") as handle:
        handle.truncate(1 << 30)
    tracemalloc.start()
    try:
        run = lint_in(repo, "--no-scan")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    refused(run, "waivers/88.md", "over the limit")
    assert peak < 64 << 20, f"lint allocated {peak >> 20} MiB before refusing"


def test_the_waiver_parser_reads_a_huge_hostile_waiver_correctly() -> None:
    """Its result on inputs the old regexes took minutes over (200 000 quote markers: past 120 s); how its
    time grows is measured by benchmarks/lint_growth.py, not here."""
    markers = "> " * 200_000
    text = (
        "# Waiver\n\n## What is patched\n" + markers + "x\n\n## Why" + " " * 100_000 + "##\n" + "<!--" * 50_000
        + " open\nreal reason\n\n## Removal\n" + "- " * 100_000 + "\n"
        + "".join(f"### step {i}\n" for i in range(20_000))
    )
    doc = parse_waiver(text)
    assert doc.title is not None and doc.title.text == "Waiver"
    what = doc.section_for(Topic.WHAT)
    assert what is not None and what.content == ((markers + "x").strip(),)
    why = doc.section_for(Topic.WHY)
    assert why is not None and why.heading.text == "Why" and why.heading.line == 6
    assert why.content == ("<!--" * 50_000 + " open", "real reason")  # an unclosed comment hides nothing
    removal = doc.section_for(Topic.REMOVAL)
    assert removal is not None and removal.is_empty  # a line of list markers is a placeholder
    assert len(doc.sections) == 3 + 20_000 and doc.sections[-1].heading.line == 12 + 20_000 - 1


def test_a_hostile_baseline_file_is_bounded_too(repo: Path) -> None:
    baseline = repo / ".patchkit-baseline.json"
    baseline.write_text(json.dumps({"version": 1, "sites": []}))
    with baseline.open("r+b") as handle:
        handle.truncate(1 << 30)
    refused(lint_in(repo), ".patchkit-baseline.json", "over the limit")
    os.unlink(baseline)


def test_a_pyproject_linked_outside_is_not_read(repo: Path) -> None:
    (outside(repo) / "pyproject.toml").write_text(f'[tool.patchkit]\npatches = "/{SECRET}"\n')
    (repo / "pyproject.toml").symlink_to(outside(repo) / "pyproject.toml")
    refused(lint_in(repo, "--no-scan"), "pyproject.toml", "is a link to")


def test_a_huge_pyproject_is_refused_unread(repo: Path) -> None:
    with (repo / "pyproject.toml").open("wb") as handle:
        handle.truncate(1 << 30)
    tracemalloc.start()
    try:
        run = lint_in(repo, "--no-scan")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    refused(run, "pyproject.toml", "over the limit")
    assert peak < 64 << 20, f"lint allocated {peak >> 20} MiB before refusing"
