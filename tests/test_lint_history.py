"""History mode (`patchkit lint --base REV`) on real git repositories built in each test."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import git
from tests.lint_helpers import FIXTURES, findings, isolate_env, lint

NEW_PATCH = "patches/engine-pr2106"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_env(monkeypatch)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A consuming repository: the clean registry committed on main, then a feature branch checked out."""
    root = tmp_path / "consumer"
    shutil.copytree(FIXTURES / "clean", root)
    git(root, "init", "-q", "-b", "main")
    _commit(root, "registry with one patch")
    git(root, "checkout", "-q", "-b", "feature")
    monkeypatch.chdir(root)
    return root


def _commit(root: Path, message: str) -> None:
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)


def _add_new_patch(root: Path, introduced_by: int, waiver_name: str) -> None:
    """The misnamed-waiver entry, as a pull request would add it."""
    source = FIXTURES / "misnamed-waiver"
    shutil.copytree(source / NEW_PATCH, root / NEW_PATCH)
    manifest = root / NEW_PATCH / "manifest.toml"
    manifest.write_text(manifest.read_text().replace("introduced_by = 2816", f"introduced_by = {introduced_by}"))
    shutil.copy(source / "waivers" / "2106.md", root / "waivers" / waiver_name)
    _commit(root, "add engine-pr2106")


def _history(*args: str, env: dict[str, str | None] | None = None) -> tuple[int, list[dict[str, object]]]:
    run = lint("--base", "main", "--format", "json", *args, env=env)
    assert run.exit_code in (0, 1), run.stderr
    return run.exit_code, [f for f in run.json()["findings"] if str(f["rule"]).startswith("PK3")]


def test_new_patch_with_its_own_waiver_passes(repo: Path) -> None:
    _add_new_patch(repo, 2816, "2816.md")
    assert _history("--pr", "2816") == (0, [])


def test_waiver_named_after_upstream_pr_passes_static_checks_but_not_history(repo: Path) -> None:
    # The real review's mistake, made consistently: introduced_by = 2106 and waivers/2106.md. Every file
    # agrees with every other, so only the pull request's own number can reveal it.
    _add_new_patch(repo, 2106, "2106.md")
    static = lint("--format", "json")
    assert static.exit_code == 0
    code, found = _history("--pr", "2816")
    assert code == 1
    (wrong,) = found
    assert wrong["rule"] == "PK302" and wrong["path"] == f"{NEW_PATCH}/manifest.toml" and wrong["line"] == 20
    assert "introduced_by = 2106 (that is the upstream PR), but it is added by pull request #2816" in str(
        wrong["message"]
    )
    assert "set introduced_by = 2816 and name its waiver waivers/2816.md" in str(wrong["message"])


def test_pr_number_from_github_ref(repo: Path) -> None:
    _add_new_patch(repo, 2106, "2106.md")
    _, found = _history(env={"GITHUB_REF": "refs/pull/2816/merge"})
    assert [f["rule"] for f in found] == ["PK302"]
    assert "(from GITHUB_REF)" in str(found[0]["message"])


def test_pr_number_from_github_event_file(repo: Path, tmp_path: Path) -> None:
    _add_new_patch(repo, 2106, "2106.md")
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"action": "opened", "pull_request": {"number": 2816}}))
    _, found = _history(env={"GITHUB_EVENT_PATH": str(event)})
    assert [f["rule"] for f in found] == ["PK302"]
    assert "pull request #2816 (from GITHUB_EVENT_PATH)" in str(found[0]["message"])


def test_pr_option_wins_over_environment(repo: Path) -> None:
    _add_new_patch(repo, 2816, "2816.md")
    assert _history("--pr", "2816", env={"GITHUB_REF": "refs/pull/1/merge"}) == (0, [])


def test_unknown_pr_number_is_a_warning_and_an_error_under_strict(repo: Path) -> None:
    _add_new_patch(repo, 2816, "2816.md")
    code, found = _history()
    assert code == 0
    assert [(f["rule"], f["severity"]) for f in found] == [("PK303", "warning")]
    strict = lint("--base", "main", "--strict", "--format", "json")
    assert strict.exit_code == 1
    assert [f["severity"] for f in findings(strict, "PK303")] == ["error"]


def test_new_patch_without_a_new_waiver(repo: Path) -> None:
    # The new patch points at a waiver that already existed on main: the PR did not write one.
    _add_new_patch(repo, 7001, "unused.md")
    (repo / "waivers" / "unused.md").unlink()
    _commit(repo, "drop the copied waiver")
    code, found = _history("--pr", "7001")
    assert code == 1
    (unchanged,) = found
    assert unchanged["rule"] == "PK301"
    assert "engine-pr2106 is added in main..HEAD but its waiver waivers/7001.md is not" in str(unchanged["message"])


def test_changed_patch_needs_its_waiver_changed(repo: Path) -> None:
    manifest = repo / "patches" / "enginex-pr512" / "manifest.toml"
    manifest.write_text(manifest.read_text().replace("registration guard", "registration check"))
    _commit(repo, "reword an exclude reason")
    code, found = _history("--pr", "2816")
    assert code == 1
    assert [(f["rule"], f["path"]) for f in found] == [("PK301", "patches/enginex-pr512/manifest.toml")]
    assert "is changed in main..HEAD but its waiver waivers/7001.md is not; update" in str(found[0]["message"])
    waiver = repo / "waivers" / "7001.md"
    waiver.write_text(waiver.read_text() + "\nThe exclude reason was reworded in this pull request.\n")
    _commit(repo, "update the waiver too")
    assert _history("--pr", "2816") == (0, [])


def test_changes_on_the_base_branch_are_not_this_branchs(repo: Path) -> None:
    # main moves on after the branch forked; diffing from the merge base keeps those changes out.
    git(repo, "checkout", "-q", "main")
    manifest = repo / "patches" / "enginex-pr512" / "manifest.toml"
    manifest.write_text(manifest.read_text().replace("registration guard", "registration check"))
    _commit(repo, "a change on main")
    git(repo, "checkout", "-q", "feature")
    assert _history("--pr", "2816") == (0, [])


def test_base_that_looks_like_an_option_is_refused(repo: Path) -> None:
    run = lint("--base=--output=pwned", "--format", "json")
    assert run.exit_code == 2
    assert "is not a revision" in run.stderr
    assert not (repo / "pwned").exists()


def test_unknown_base_is_bad_input_with_a_hint(repo: Path) -> None:
    run = lint("--base", "origin/main")
    assert run.exit_code == 2
    assert "cannot resolve --base 'origin/main'" in run.stderr and "fetch-depth: 0" in run.stderr


def test_history_needs_a_git_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "plain"
    shutil.copytree(FIXTURES / "clean", root)
    monkeypatch.chdir(root)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    run = lint("--base", "main")
    assert run.exit_code == 2
    assert "needs a git repository" in run.stderr


def test_static_lint_does_not_import_git(repo: Path) -> None:
    # Only history mode runs git (sealed: patchkit.input.sealedgit), and gitpython (~140 ms) is never loaded by
    # lint at all (a fresh interpreter to see it).
    code = (
        "import sys\n"
        "from patchkit.lint import LintRequest, run_lint\n"
        "run_lint(LintRequest())\n"
        "assert 'patchkit.input.sealedgit' not in sys.modules, 'sealed git imported'\n"
        "run_lint(LintRequest(base='main'))\n"
        "assert 'patchkit.input.sealedgit' in sys.modules and 'git' not in sys.modules\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_json_verdict_says_whether_the_change_patches_the_engine(repo: Path) -> None:
    (repo / "NOTES.md").write_text("no engine change\n")
    _commit(repo, "notes")
    data = lint("--base", "main", "--pr", "2816", "--format", "json").json()
    assert (data["patches_engine"], data["change_patches_engine"]) == (True, False)  # the registry has a patch
    _add_new_patch(repo, 2816, "2816.md")
    data = lint("--base", "main", "--pr", "2816", "--format", "json").json()
    assert data["change_patches_engine"] is True and data["passed"] is True
    assert lint("--format", "json").json()["change_patches_engine"] is None  # not history mode


@pytest.mark.parametrize("base", ["main", "v1", "refs/heads/main", "FETCH_HEAD", "HEAD~1", "packed", "worktree"])
def test_base_resolves_as_git_would_from_refs_patchkit_reads(repo: Path, monkeypatch: pytest.MonkeyPatch,
                                                             base: str) -> None:
    """git never reads this repository's refs store itself (patchkit.input.sealedgit): a branch, a tag, a full
    ref name, FETCH_HEAD, a revision expression, refs only in packed-refs, and a linked worktree all resolve."""
    main = git(repo, "rev-parse", "main").stdout.decode().strip()
    git(repo, "tag", "-a", "-m", "release", "v1", "main")
    manifest = repo / "patches" / "enginex-pr512" / "manifest.toml"
    manifest.write_text(manifest.read_text().replace("title = ", "title = 'edited' # ", 1))
    waiver = repo / "waivers" / "7001.md"
    waiver.write_text(waiver.read_text() + "\nEdited with the patch.\n")
    _commit(repo, "a change on the branch")
    (repo / ".git" / "FETCH_HEAD").write_text(f"{main}\t\tbranch 'main' of https://example.invalid/r\n")
    if base == "packed":
        git(repo, "pack-refs", "--all")
        assert not (repo / ".git" / "refs" / "heads" / "main").exists()
        base = "main"
    if base == "worktree":
        git(repo, "worktree", "add", "-q", "-b", "elsewhere", str(repo.parent / "linked"), "feature")
        monkeypatch.chdir(repo.parent / "linked")
        base = "main"
    run = lint("--base", base, "--format", "json")
    assert run.exit_code == 0, run.stderr
    changed = git(repo, "diff", "--name-only", f"{main}..feature").stdout.decode().split()
    assert changed == ["patches/enginex-pr512/manifest.toml", "waivers/7001.md"]  # the oracle: git itself
    report = run.json()  # the range was read: the registry changed, and with its waiver (no PK301)
    assert (report["change_patches_engine"], report["findings"]) == (True, []), report
