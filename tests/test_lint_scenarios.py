"""`patchkit lint` end to end through the CLI, on the fixture registries under fixtures/lint/."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.lint_helpers import REPO, copy_scenario, findings, isolate_env, lint, lint_scenario

TEXT_LINE = re.compile(r"^[^:]+(?::\d+)?: PK\d{3} (?:error|warning): .+$")


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_env(monkeypatch)


# ------------------------------------------------------------------------------------------ the real registry


def test_project_registry_lints_clean_with_pending_as_a_warning() -> None:
    run = lint("--patches", str(REPO / "patches"), "--waivers", str(REPO / "waivers"), "--format", "json")
    assert run.exit_code == 0, run.stdout
    assert [(f["rule"], f["severity"]) for f in run.json()["findings"]] == [("PK102", "warning")]
    assert "patchkit vendor atom-pr2106" in run.json()["findings"][0]["message"]


def test_project_registry_fails_under_strict_while_pending() -> None:
    run = lint("--patches", str(REPO / "patches"), "--waivers", str(REPO / "waivers"), "--strict", "--format", "json")
    assert run.exit_code == 1
    assert [(f["rule"], f["severity"]) for f in run.json()["findings"]] == [("PK102", "error")]


def test_project_registry_found_through_pyproject(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    run = lint("--format", "json")
    assert run.exit_code == 0
    assert [(f["rule"], f["path"]) for f in run.json()["findings"]] == [
        ("PK102", "patches/atom-pr2106/manifest.toml")
    ]


# ---------------------------------------------------------------------------------------- clean and lenient


def test_clean_registry_is_clean_even_under_strict() -> None:
    run = lint_scenario("clean", "--strict")
    assert (run.exit_code, run.stdout) == (0, "")
    assert "clean (1 patch, 1 waiver checked; " in run.stderr


def test_headings_are_matched_leniently() -> None:
    # Numbered, upper-case and punctuated headings, setext headings, synonyms ("Scope", "Rationale",
    # "References", "Exit plan", "When to remove it") and one heading covering two topics ("What ... and why?").
    run = lint_scenario("lenient-headings", "--format", "json")
    assert run.exit_code == 0
    assert set(run.codes()) == {"PK102"}


# ------------------------------------------------------------------------------------ the misnamed waiver


def test_waiver_named_after_the_upstream_pr_is_caught() -> None:
    run = lint_scenario("misnamed-waiver", "--format", "json")
    assert run.exit_code == 1
    (named,) = findings(run, "PK204")
    assert named["path"] == "waivers/2106.md"
    assert "named after upstream PR #2106; name it after the introducing PR #2816" in named["message"]
    assert named["message"].endswith("waivers/2816.md")  # the git mv that fixes it
    (missing,) = findings(run, "PK202")
    assert (missing["path"], missing["line"]) == ("patches/engine-pr2106/manifest.toml", 20)
    assert "waivers/2816.md" in missing["message"] and "rename" in missing["message"]
    assert findings(run, "PK209") == []  # PK204 explains this waiver better than "orphan"


def test_renaming_the_misnamed_waiver_fixes_it(tmp_path: Path) -> None:
    root = copy_scenario("misnamed-waiver", tmp_path)
    (root / "waivers" / "2106.md").rename(root / "waivers" / "2816.md")
    run = lint_scenario(root, "--format", "json")
    assert run.exit_code == 0
    assert run.codes() == ["PK102"]


# ------------------------------------------------------------------------------------ waiver content rules


def test_missing_and_empty_sections_are_reported_with_their_lines() -> None:
    run = lint_scenario("incomplete-waiver", "--format", "json")
    assert run.exit_code == 1
    sections = {(f["line"], f["message"].split(";")[0]) for f in findings(run, "PK205")}
    # "## Removal plan" inside a code fence is not a heading; "## Why" holds only a comment and TODO.
    assert sections == {
        (1, "no 'removal plan' section (a heading such as \"Removal plan\")"),
        (9, "section 'Why' (why the unmodified upstream image cannot run) is empty"),
    }


def test_upstream_pr_must_be_cited(tmp_path: Path) -> None:
    run = lint_scenario("incomplete-waiver", "--format", "json")
    (uncited,) = findings(run, "PK206")
    assert uncited["line"] == 14  # the "## Links" heading
    assert "example-org/enginex#640" in uncited["message"]
    root = copy_scenario("incomplete-waiver", tmp_path)
    waiver = root / "waivers" / "7100.md"
    waiver.write_text(waiver.read_text().replace("See the upstream", "See example-org/enginex#640, the upstream"))
    assert findings(lint_scenario(root, "--format", "json"), "PK206") == []


def test_patch_id_must_be_named() -> None:
    (unnamed,) = findings(lint_scenario("incomplete-waiver", "--format", "json"), "PK207")
    assert "enginex-pr640" in unnamed["message"]


def test_excluded_paths_must_be_named_in_the_waiver() -> None:
    (undocumented,) = findings(lint_scenario("incomplete-waiver", "--format", "json"), "PK208")
    assert undocumented["line"] == 4  # the "What changes" heading
    assert "enginex/spec/tree_verify.py" in undocumented["message"]
    assert "tree-attention rewrite" in undocumented["message"]  # the manifest's reason, quoted


def test_a_removed_patch_leaves_an_orphan_waiver(tmp_path: Path) -> None:
    root = copy_scenario("clean", tmp_path)
    shutil.rmtree(root / "patches" / "enginex-pr512")
    run = lint_scenario(root, "--format", "json")
    assert run.exit_code == 1
    (orphan,) = findings(run, "PK209")
    assert orphan["path"].endswith("waivers/7001.md")


# ---------------------------------------------------------------------------------- manifests and file names


@pytest.fixture(scope="module")
def bad_manifests() -> list[dict[str, object]]:
    run = lint_scenario("bad-manifests", "--format", "json")
    assert run.exit_code == 1
    findings: list[dict[str, object]] = run.json()["findings"]
    return findings


def _about(found: list[dict[str, object]], rule: str, path_end: str) -> list[dict[str, object]]:
    return [f for f in found if f["rule"] == rule and str(f["path"]).endswith(path_end)]


def test_broken_manifests_are_findings_not_crashes(bad_manifests: list[dict[str, object]]) -> None:
    (wrong_id,) = _about(bad_manifests, "PK101", "wrong-id/manifest.toml")
    assert wrong_id["line"] == 2 and "does not match the folder name" in str(wrong_id["message"])
    (no_reason,) = _about(bad_manifests, "PK101", "no-reason/manifest.toml")
    assert no_reason["line"] == 14 and "needs a reason" in str(no_reason["message"])
    (no_manifest,) = _about(bad_manifests, "PK101", "no-manifest")
    assert "no manifest.toml" in str(no_manifest["message"])
    (bad_toml,) = _about(bad_manifests, "PK101", "bad-toml/manifest.toml")
    assert bad_toml["line"] == 3 and "not valid TOML" in str(bad_toml["message"])


def test_waiver_of_a_broken_manifest_is_not_an_orphan(bad_manifests: list[dict[str, object]]) -> None:
    # 101.md belongs to two manifests that fail to load; only 9999.md belongs to none.
    assert [f["path"] for f in bad_manifests if f["rule"] == "PK209"] == ["waivers/9999.md"]


def test_manifest_must_name_its_waiver(bad_manifests: list[dict[str, object]]) -> None:
    (undeclared,) = _about(bad_manifests, "PK201", "no-waiver/manifest.toml")
    assert "introduced_by = N" in str(undeclared["message"])


def test_waiver_must_exist(bad_manifests: list[dict[str, object]]) -> None:
    (missing,) = _about(bad_manifests, "PK202", "missing-waiver/manifest.toml")
    assert missing["line"] == 15 and "waivers/104.md" in str(missing["message"])


def test_diff_hash_is_checked(bad_manifests: list[dict[str, object]]) -> None:
    (mismatch,) = _about(bad_manifests, "PK103", "bad-hash/manifest.toml")
    assert "the manifest records 0000" in str(mismatch["message"])
    (unrecorded,) = _about(bad_manifests, "PK103", "no-hash/manifest.toml")
    assert "no sha256 recorded" in str(unrecorded["message"])


def test_dead_exclude_is_reported_at_its_line(bad_manifests: list[dict[str, object]]) -> None:
    (dead,) = _about(bad_manifests, "PK104", "dead-exclude/manifest.toml")
    assert dead["line"] == 15 and "'enginex/attn/regstry.py' matches no file" in str(dead["message"])


def test_unparsable_diff_is_reported(bad_manifests: list[dict[str, object]]) -> None:
    assert _about(bad_manifests, "PK104", "unparsable-diff/change.diff")


def test_waiver_file_names(bad_manifests: list[dict[str, object]]) -> None:
    misnamed = {str(f["path"]).rsplit("/", 1)[1]: str(f["message"]) for f in bad_manifests if f["rule"] == "PK203"}
    assert set(misnamed) == {"pr-105.md", "0106.md", "notes"}  # README.md is allowed
    assert "rename it to 105.md" in misnamed["pr-105.md"]
    assert "rename it to 106.md" in misnamed["0106.md"]


def test_only_listed_findings_in_bad_manifests(bad_manifests: list[dict[str, object]]) -> None:
    # The clean parts of the fixture (waivers 101 and 103, which cover their patches) raise nothing.
    assert not [f for f in bad_manifests if str(f["path"]).endswith(("101.md", "103.md"))]


# ----------------------------------------------------------------------------------------- output and exits


def test_text_output_is_file_line_rule_severity_message() -> None:
    run = lint_scenario("misnamed-waiver")
    lines = run.stdout.splitlines()
    assert lines and all(TEXT_LINE.match(line) for line in lines)
    assert (
        "waivers/2106.md:1: PK204 error: waiver named after upstream PR #2106; name it after the introducing "
        "PR #2816 (patch engine-pr2106): git mv waivers/2106.md waivers/2816.md"
    ) in lines
    assert "2 errors, 1 warning" in run.stderr


def test_github_output_is_workflow_commands() -> None:
    run = lint_scenario("misnamed-waiver", "--format", "github")
    lines = run.stdout.splitlines()
    assert (
        "::error file=waivers/2106.md,line=1,title=PK204::waiver named after upstream PR #2106; name it after "
        "the introducing PR #2816 (patch engine-pr2106): git mv waivers/2106.md waivers/2816.md"
    ) in lines
    assert any(line.startswith("::warning file=") and ",title=PK102::" in line for line in lines)
    assert run.stderr == ""  # annotations only: no summary to confuse the log


def test_json_output_counts() -> None:
    data = json.loads(lint_scenario("misnamed-waiver", "--format", "json").stdout)
    assert (data["errors"], data["warnings"]) == (2, 1)
    assert {"rule", "severity", "path", "line", "message"} == set(data["findings"][0])


def test_missing_patches_folder_is_bad_input(tmp_path: Path) -> None:
    run = lint("--patches", str(tmp_path / "nope"))
    assert run.exit_code == 2
    assert "patches folder does not exist" in run.stderr


def test_pr_without_base_is_bad_input() -> None:
    run = lint_scenario("clean", "--pr", "2816")
    assert run.exit_code == 2
    assert "--base" in run.stderr


def test_unknown_format_is_a_usage_error() -> None:
    assert lint_scenario("clean", "--format", "xml").exit_code == 2


# ------------------------------------------------------------------------------------------- configuration


def _consumer_repo(tmp_path: Path, scenario: str) -> Path:
    """A consuming repository keeping its registry where [tool.patchkit] says."""
    root = tmp_path / "consumer"
    shutil.copytree(REPO / "fixtures" / "lint" / scenario / "patches", root / "third_party" / "patches")
    shutil.copytree(REPO / "fixtures" / "lint" / scenario / "waivers", root / "docs" / "waiver")
    (root / "pyproject.toml").write_text(
        '[tool.patchkit]\npatches = "third_party/patches"\nwaivers = "docs/waiver"\n'
    )
    return root


def test_folders_come_from_tool_patchkit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _consumer_repo(tmp_path, "misnamed-waiver")
    monkeypatch.chdir(root / "docs")  # found by walking up, resolved against pyproject.toml's folder
    run = lint("--format", "json")
    (named,) = findings(run, "PK204")
    assert named["path"] == "waiver/2106.md"  # relative to where lint runs


def test_waivers_option_overrides_tool_patchkit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _consumer_repo(tmp_path, "clean")
    monkeypatch.chdir(root)
    assert lint().exit_code == 0
    (root / "elsewhere").mkdir()
    run = lint("--waivers", "elsewhere", "--format", "json")
    (missing,) = findings(run, "PK202")
    assert "elsewhere/7001.md" in missing["message"]
