"""Lint is documented, wired into the CLI, and shipped as a pre-commit hook and a workflow example."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from patchkit.lint.findings import Rule
from tests.lint_helpers import REPO, _chdir, isolate_env, lint

DOCS = (REPO / "docs" / "lint.md").read_text(encoding="utf-8")


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_env(monkeypatch)


def test_every_rule_is_in_the_docs_table_with_its_severity() -> None:
    table = dict(re.findall(r"^\| (PK\d{3}) \| (error|warning) \|", DOCS, re.MULTILINE))
    assert table == {rule.code: rule.severity.value for rule in Rule}


def test_rule_codes_are_unique_and_stable_in_shape() -> None:
    codes = [rule.code for rule in Rule]
    assert len(set(codes)) == len(codes)
    assert all(re.fullmatch(r"PK[1-4]\d\d", code) for code in codes)


def test_help_lists_every_option() -> None:
    run = lint("--help")
    assert run.exit_code == 0
    for option in (
        "--patches", "--waivers", "--strict", "--base", "--pr", "--format", "--no-scan", "--baseline",
        "--write-baseline",
    ):
        assert option in run.stdout and option in DOCS


def test_cli_registers_lint() -> None:
    # A fresh interpreter: the test helpers register the command themselves until cli/main.py does.
    result = subprocess.run(
        [sys.executable, "-m", "patchkit", "lint", "--help"], capture_output=True, text=True, cwd=REPO
    )
    assert result.returncode == 0, result.stderr
    assert "--waivers" in result.stdout


def test_pre_commit_hook_runs_lint_on_the_whole_registry() -> None:
    hooks = (REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8")
    assert re.search(r"^- id: patchkit-lint$", hooks, re.MULTILINE)
    assert re.search(r"^  entry: patchkit lint$", hooks, re.MULTILINE)
    assert re.search(r"^  pass_filenames: false$", hooks, re.MULTILINE)


def test_workflow_example_runs_history_mode_with_annotations() -> None:
    workflow = (REPO / "examples" / "github-workflow-lint.yml").read_text(encoding="utf-8")
    assert "run: patchkit lint --base origin/main --format github" in workflow
    assert "fetch-depth: 0" in workflow


def test_the_documented_run_on_the_consumer_repository_is_real() -> None:
    """docs/lint.md and the README show `patchkit lint` on fixtures/consumer-repo: it must be today's output."""
    block = DOCS.split("$ cd fixtures/consumer-repo && patchkit lint\n", 1)[1].split("```", 1)[0]
    with _chdir(REPO / "fixtures" / "consumer-repo"):
        run = lint()
    assert run.exit_code == 1
    assert block.splitlines() == run.stdout.splitlines() + run.stderr.splitlines()
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert run.stderr.strip() in readme
    for line in run.stdout.splitlines():
        assert line.split(" error: ")[0].split(" warning: ")[0] in readme
