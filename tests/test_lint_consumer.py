"""`patchkit lint` on a consuming benchmark repository (fixtures/consumer-repo), through the real CLI.

The repository has no patches/ registry, only waivers in docs/waiver/ (one with a translation, one pending),
and scripts with patch sites of every kind next to harmless look-alikes.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from patchkit.scan.rules import SCAN_RULES
from patchkit.scan.sites import SiteKind
from tests.conftest import git
from tests.lint_helpers import REPO, Run, findings, isolate_env, lint

CONSUMER = REPO / "fixtures" / "consumer-repo"
LAUNCH = "benchmarks/sglang/mi355x/launch_server.sh"
APPLY = "benchmarks/sglang/mi355x/apply_eagle_fix.sh"

# Every site of the fixture: (path, line, kind). The first five are uncovered.
REBUILD = "benchmarks/vllm/rebuild_vllm.sh"
UNCOVERED = {
    (".github/workflows/benchmark.yml", 17, "pip-fork"),
    (LAUNCH, 13, "in-place-edit"),
    (LAUNCH, 16, "file-write"),
    ("docker/Dockerfile", 5, "copy-over"),
    ("runners/atom/run_atom.sh", 7, "git-apply"),
}
COVERED = {
    (APPLY, 9, "git-checkout"),
    (APPLY, 11, "patch"),
    (APPLY, 11, "heredoc-diff"),
    (APPLY, 21, "git-apply"),
    (APPLY, 21, "heredoc-diff"),
    ("runners/vllm/tune_vllm.py", 12, "python-write"),
    # A rebuilt vLLM: one site of each shape of replacing installed code, named by the pending waiver.
    (REBUILD, 8, "pip-index"),
    (REBUILD, 12, "git-checkout"),
    (REBUILD, 13, "in-place-edit"),
    (REBUILD, 14, "source-install"),
    (REBUILD, 17, "metadata-edit"),
    (REBUILD, 18, "download-over"),
    (REBUILD, 19, "engine-remove"),
    (REBUILD, 30, "unresolved-write"),
}


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_env(monkeypatch)


@pytest.fixture
def consumer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "consumer"
    shutil.copytree(CONSUMER, root)
    monkeypatch.chdir(root)
    return root


def _sites(run: Run) -> set[tuple[str, int, str]]:
    return {(s["path"], s["line"], s["kind"]) for s in run.json()["sites"]}


def test_static_run_finds_every_site_and_fails_the_uncovered_ones(consumer: Path) -> None:
    run = lint("--format", "json")
    assert run.exit_code == 1
    data = run.json()
    assert data["patches_engine"] is True and data["passed"] is False and data["change_patches_engine"] is None
    assert _sites(run) == UNCOVERED | COVERED  # and none of the look-alikes
    uncovered = {(f["path"], f["line"]) for f in findings(run, "PK401")}
    assert uncovered == {(path, line) for path, line, _ in UNCOVERED}
    covered = {(s["path"], s["line"], s["kind"]): s["covered_by"] for s in data["sites"] if s["covered_by"]}
    assert covered[(APPLY, 11, "patch")] == {"kind": "waiver", "by": "docs/waiver/2306.md"}
    assert covered[("runners/vllm/tune_vllm.py", 12, "python-write")]["by"] == "docs/waiver/PENDING-vllm-block-size.md"
    # The waiver-only repository: no registry error, the covering waiver is no orphan, the translation and
    # README are accepted, the pending waiver is a warning naming the rename.
    assert {f["rule"] for f in data["findings"]} == {"PK401", "PK210"}
    (pending,) = findings(run, "PK210")
    assert "git mv docs/waiver/PENDING-vllm-block-size.md docs/waiver/N.md" in pending["message"]
    assert "3.md" not in pending["message"]


def test_messages_name_the_site_what_is_patched_and_the_waiver_to_write(consumer: Path) -> None:
    run = lint()
    assert run.exit_code == 1
    line = next(x for x in run.stdout.splitlines() if x.startswith(f"{LAUNCH}:13:"))
    assert "PK401 error: patch site (in-place-edit)" in line
    assert "<sglang>/srt/managers/scheduler.py" in line  # resolved through find_spec
    assert f"add docs/waiver/N.md, N the pull request that introduces it, naming {LAUNCH}" in line
    assert "5 errors, 1 warning" in run.stderr and "19 patch sites, 5 uncovered" in run.stderr
    # Every finding starts with file:line (a finding about a whole file points at its line 1).
    for text in run.stdout.splitlines():
        place = text.split(": ", 1)[0]
        assert place.rsplit(":", 1)[-1].isdigit(), text


def test_naming_the_file_in_a_waiver_covers_its_sites(consumer: Path) -> None:
    waiver = consumer / "docs" / "waiver" / "2310.md"
    text = (consumer / "docs" / "waiver" / "2306.md").read_text()
    link = "https://github.com/example/inference-benchmarks/blob/main/runners/atom/run_atom.sh#L7"
    waiver.write_text(text.replace("2306", "2310").replace(f"[{APPLY}](../../{APPLY})", link))
    run = lint("--format", "json")
    remaining = {(f["path"], f["line"]) for f in findings(run, "PK401")}
    assert ("runners/atom/run_atom.sh", 7) not in remaining and len(remaining) == 4
    # A relative link from the waiver's folder counts too, and a waiver naming nothing is an orphan.
    waiver.write_text(text.replace("2306", "2310").replace(f"[{APPLY}](../../{APPLY})", "[x](../../docker/Dockerfile)"))
    run = lint("--format", "json")
    assert ("docker/Dockerfile", 5) not in {(f["path"], f["line"]) for f in findings(run, "PK401")}
    waiver.write_text(text.replace("2306", "2310").replace(f"[{APPLY}](../../{APPLY})", "no script named"))
    assert [f["path"] for f in findings(lint("--format", "json"), "PK209")] == ["docs/waiver/2310.md"]


def test_a_site_running_a_registry_patch_is_covered_by_the_registry(consumer: Path) -> None:
    shutil.copytree(REPO / "fixtures" / "lint" / "clean" / "patches", consumer / "patches")
    shutil.copy(REPO / "fixtures" / "lint" / "clean" / "waivers" / "7001.md", consumer / "docs" / "waiver")
    script = consumer / "runners" / "atom" / "run_atom.sh"
    script.write_text(script.read_text().replace('"$HERE/atom_moe_fix.diff"', "patches/enginex-pr512/pr512.diff"))
    run = lint("--format", "json")
    site = next(s for s in run.json()["sites"] if s["path"] == "runners/atom/run_atom.sh")
    assert site["covered_by"] == {"kind": "registry", "by": "enginex-pr512"}
    assert "runners/atom/run_atom.sh" not in {f["path"] for f in findings(run, "PK401")}
    # The registry in a variable: the patch's own folder and diff name still tell it.
    script.write_text(script.read_text().replace("patches/enginex-pr512/", '"$PATCHES"/enginex-pr512/'))
    site = next(s for s in lint("--format", "json").json()["sites"] if s["path"] == "runners/atom/run_atom.sh")
    assert site["covered_by"] == {"kind": "registry", "by": "enginex-pr512"}
    script.write_text(script.read_text().replace("enginex-pr512/pr512.diff", "enginex-pr512/other.diff"))
    site = next(s for s in lint("--format", "json").json()["sites"] if s["path"] == "runners/atom/run_atom.sh")
    assert site["covered_by"] is None


@pytest.mark.parametrize("kind", list(SiteKind), ids=lambda k: k.label)
def test_each_rule_alone_reports_its_sites(consumer: Path, kind: SiteKind) -> None:
    """Switching one rule off (scan-ignore) loses exactly the sites of its kind: each rule finds its own."""
    everything = _sites(lint("--format", "json"))
    assert any(k == kind.label for _, _, k in everything), f"the fixture has no {kind.label} site"
    pyproject = consumer / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + f'scan-ignore = ["{kind.label}"]\n')
    without = _sites(lint("--format", "json"))
    assert without == {s for s in everything if s[2] != kind.label}


def test_the_rule_registry_has_one_rule_per_kind() -> None:
    assert set(SCAN_RULES) == set(SiteKind)
    assert len(set(SCAN_RULES.values())) == len(SiteKind)


def test_unknown_scan_ignore_kind_is_bad_input(consumer: Path) -> None:
    pyproject = consumer / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + 'scan-ignore = ["sed"]\n')
    run = lint()
    assert run.exit_code == 2
    assert "unknown site kinds: sed" in run.stderr and "in-place-edit" in run.stderr


def test_no_scan_lints_waivers_only(consumer: Path) -> None:
    run = lint("--no-scan", "--format", "json")
    assert run.json()["sites"] == [] and findings(run, "PK401") == []
    # Without the scan, waiver 2306 covers no site it can see: an orphan.
    assert [f["path"] for f in findings(run, "PK209")] == ["docs/waiver/2306.md"]


# ------------------------------------------------------------------------------------------------ baseline


def test_write_baseline_accepts_todays_sites_and_new_ones_still_fail(consumer: Path) -> None:
    run = lint("--write-baseline")
    assert run.exit_code == 0
    assert "wrote 5 accepted patch sites to .patchkit-baseline.json" in run.stderr
    entries = json.loads((consumer / ".patchkit-baseline.json").read_text())["sites"]
    assert {(e["path"], e["kind"]) for e in entries} == {(p, k) for p, _, k in UNCOVERED}
    assert all("line" not in e for e in entries)
    assert lint().exit_code == 0
    # Moving the site (lines above it) keeps it accepted: the fingerprint has no line number.
    launch = consumer / LAUNCH
    launch.write_text(launch.read_text().replace("set -euo pipefail\n", "set -euo pipefail\n\n# moved\n\n"))
    assert lint().exit_code == 0
    # A new site fails, named by its own line.
    launch.write_text(launch.read_text() + 'sed -i "s/a/b/" "$SGL_DIR/srt/server_args.py"\n')
    run = lint("--format", "json")
    assert run.exit_code == 1
    (new,) = findings(run, "PK401")
    assert new["path"] == LAUNCH and new["line"] == len(launch.read_text().splitlines())
    # Changing an accepted command makes it a new site, and its old entry stale.
    dockerfile = consumer / "docker" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text().replace("docker/fused_moe.py", "docker/fused_moe_v2.py"))
    run = lint("--format", "json")
    assert {f["path"] for f in findings(run, "PK401")} == {LAUNCH, "docker/Dockerfile"}
    (stale,) = findings(run, "PK404")
    assert "docker/Dockerfile: copy-over: COPY docker/fused_moe.py" in stale["message"]
    baseline_lines = (consumer / ".patchkit-baseline.json").read_text().splitlines()
    assert stale["path"] == ".patchkit-baseline.json" and '"fingerprint"' in baseline_lines[stale["line"] - 1]


def test_a_malformed_baseline_is_bad_input(consumer: Path) -> None:
    (consumer / ".patchkit-baseline.json").write_text("{not json")
    run = lint()
    assert run.exit_code == 2
    assert ".patchkit-baseline.json" in run.stderr and "--write-baseline" in run.stderr


# ------------------------------------------------------------------------------------------------ history


def _commit(root: Path, message: str) -> None:
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)


@pytest.fixture
def history(consumer: Path) -> Path:
    """main: the fixture with its uncovered sites accepted in a baseline; then a feature branch."""
    git(consumer, "init", "-q", "-b", "main")
    assert lint("--write-baseline").exit_code == 0
    _commit(consumer, "benchmarks, waivers and the accepted baseline")
    git(consumer, "checkout", "-q", "-b", "feature")
    return consumer


NEW_SCRIPT = "benchmarks/sglang/mi355x/apply_moe_fix.sh"


def _add_site(root: Path, repository: Path | None = None) -> None:
    script = root / NEW_SCRIPT
    script.write_text("#!/bin/sh\ncd /sgl-workspace/sglang\ngit apply \"$(dirname \"$0\")/moe.diff\"\n")
    _commit(repository or root, "add a patch site")


def _waiver(root: Path, number: int, names: str, repository: Path | None = None) -> None:
    text = (root / "docs" / "waiver" / "2306.md").read_text().replace("2306", str(number))
    (root / "docs" / "waiver" / f"{number}.md").write_text(text.replace(APPLY, names))
    _commit(repository or root, f"waiver {number}")


def test_history_a_pr_adding_a_site_without_its_waiver_fails(history: Path) -> None:
    _add_site(history)
    run = lint("--base", "main", "--pr", "2400", "--format", "json")
    assert run.exit_code == 1
    (unwaived,) = findings(run, "PK402")
    assert (unwaived["path"], unwaived["line"]) == (NEW_SCRIPT, 3)
    assert "add docs/waiver/2400.md to this pull request, naming " + NEW_SCRIPT in unwaived["message"]
    data = run.json()
    assert data["change_patches_engine"] is True
    assert [s["path"] for s in data["sites"] if s["new"]] == [NEW_SCRIPT]


def test_history_the_same_pr_with_its_waiver_passes(history: Path) -> None:
    _add_site(history)
    _waiver(history, 2400, NEW_SCRIPT)
    run = lint("--base", "main", "--pr", "2400", "--format", "json")
    assert run.exit_code == 0, run.stdout
    assert findings(run, "PK402") == [] and findings(run, "PK403") == []


def test_history_a_waiver_named_after_another_pr_does_not_cover_a_new_site(history: Path) -> None:
    _add_site(history)
    _waiver(history, 2399, NEW_SCRIPT)
    run = lint("--base", "main", "--pr", "2400", "--format", "json")
    (unwaived,) = findings(run, "PK402")
    assert "docs/waiver/2399.md names the file" in unwaived["message"]
    assert "#2400" in unwaived["message"]


def test_history_changing_a_waived_site_needs_this_prs_waiver(history: Path) -> None:
    script = history / APPLY
    script.write_text(script.read_text().replace("--fuzz=3", "--fuzz=0"))
    _commit(history, "change a site")
    run = lint("--base", "main", "--pr", "2401", "--format", "json")
    assert run.exit_code == 1
    changed = findings(run, "PK402")
    # The command changed, so both of its sites did: the patch run and the heredoc diff it reads.
    assert {(f["path"], f["line"]) for f in changed} == {(APPLY, 11)} and len(changed) == 2
    assert all("docs/waiver/2306.md names the file" in f["message"] for f in changed)


def test_history_unrelated_edits_keep_sites_pre_existing(history: Path) -> None:
    script = history / APPLY
    script.write_text("# a new first line\n" + script.read_text())
    _commit(history, "comment only")
    run = lint("--base", "main", "--pr", "2402", "--format", "json")
    assert run.exit_code == 0, run.stdout
    assert run.json()["change_patches_engine"] is False


def test_history_pre_existing_site_needs_its_waiver_on_the_base(history: Path) -> None:
    (history / ".patchkit-baseline.json").unlink()  # the PR drops the accepted baseline
    _commit(history, "drop the baseline")
    run = lint("--base", "main", "--pr", "2403", "--format", "json")
    base_unwaived = {(f["path"], f["line"]) for f in findings(run, "PK403")}
    assert base_unwaived == {(path, line) for path, line, _ in UNCOVERED}
    assert findings(run, "PK402") == []


def test_history_without_pr_number_warns_when_a_new_waiver_covers_the_site(history: Path) -> None:
    _add_site(history)
    _waiver(history, 2400, NEW_SCRIPT)
    run = lint("--base", "main", "--format", "json")
    assert run.exit_code == 0
    (unknown,) = [f for f in findings(run, "PK303") if f["path"] == NEW_SCRIPT]
    assert "pass --pr N" in unknown["message"]


def test_github_annotations_point_at_each_uncovered_site(consumer: Path) -> None:
    run = lint("--format", "github")
    errors = [line for line in run.stdout.splitlines() if line.startswith("::error ")]
    places = {line.split("::")[1] for line in errors}
    assert places == {
        f"error file={path.replace(':', '%3A')},line={line},title=PK401" for path, line, _ in UNCOVERED
    }


def test_patchkits_own_code_has_no_patch_sites(monkeypatch: pytest.MonkeyPatch) -> None:
    """A large real code base full of file writes and subprocess calls, none of them onto an engine path."""
    monkeypatch.chdir(REPO)
    run = lint("--format", "json")
    data = run.json()
    assert data["files_scanned"] > 40
    assert data["sites"] == [] and [f for f in data["findings"] if f["rule"].startswith("PK4")] == []


def test_history_in_a_project_below_the_repository_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A monorepo: the consuming project (its pyproject.toml) is bench/, the git repository the folder above."""
    repo = tmp_path / "mono"
    project = repo / "bench"
    shutil.copytree(CONSUMER, project)
    (repo / "README.md").write_text("a monorepo\n")
    monkeypatch.chdir(project)
    git(repo, "init", "-q", "-b", "main")
    assert lint("--write-baseline").exit_code == 0
    (project / "docs" / "waiver" / "README.md").write_text("mentions runners/atom/run_atom.sh but is no waiver\n")
    _commit(repo, "base")
    git(repo, "checkout", "-q", "-b", "feature")
    _add_site(project, repo)
    run = lint("--base", "main", "--pr", "2400", "--format", "json")
    assert [(f["path"], f["line"]) for f in findings(run, "PK402")] == [(NEW_SCRIPT, 3)]
    assert findings(run, "PK403") == []  # the pre-existing sites: accepted on the base
    _waiver(project, 2400, NEW_SCRIPT, repo)
    assert lint("--base", "main", "--pr", "2400").exit_code == 0
    # Without the baseline, pre-existing sites need a waiver on the base: 2306.md covers its script there,
    # the README (which names run_atom.sh) is no waiver.
    (project / ".patchkit-baseline.json").unlink()
    _commit(repo, "drop the baseline")
    run = lint("--base", "main", "--pr", "2400", "--format", "json")
    assert {(f["path"], f["line"]) for f in findings(run, "PK403")} == {(p, line) for p, line, _ in UNCOVERED}


def test_sed_ie_and_cp_t_name_their_engine_targets_find_newer_and_git_options_do_not(consumer: Path) -> None:
    """Survivors of scan/rules.py's mutation samples (docs/testing.md), on one script: sed's `-ie` is -i with the
    backup suffix `e` (GNU sed), not perl's -i -e, so the word after it is the file, an engine file here. A git
    command of options only (`git --version`) is read to its end, no further. A `find` edits below its first
    folder only: an engine file it compares dates with (`-newer`) is not edited. `cp -t DIR` copies into the
    folder after `-t`; a `-t` with nothing after it leaves the last operand the destination. A pip URL with no
    path after its host still names a fork, and `pip install NAME` in an engine root installs from the index, not
    the folder of that name."""
    script = consumer / "runners" / "mutation_kills.sh"
    script.write_text("#!/bin/bash\nsed -e 's/a/b/' -ie /sgl-workspace/sglang/python/x.py\ngit --version\n"
                      "find . -newer /sgl-workspace/sglang/python/x.py -exec sed -i 's/a/b/' {} +\n"
                      "cp -t /sgl-workspace/sglang/python/ fix.py\ncp fix.py /sgl-workspace/sglang/python/y.py -t\n"
                      "pip install git+https://example.com\ncd /sgl-workspace\npip install sglang\n",
                      encoding="utf-8")
    run = lint("--format", "json")
    assert run.exit_code == 1, run.stdout + run.stderr
    mine = {(s["line"], s["kind"]) for s in run.json()["sites"] if s["path"] == "runners/mutation_kills.sh"}
    assert mine == {(2, "in-place-edit"), (5, "copy-over"), (6, "copy-over"), (7, "pip-fork")}
