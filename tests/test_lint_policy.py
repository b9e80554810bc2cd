"""Waiver rules that fit real repositories: waiver-only folders, translations, pending waivers, heading variants,
introduced_by equal to the upstream PR, several upstream PRs or a local patch, excludes named in prose."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from patchkit.lint.findings import Rule
from patchkit.lint.inputs import read_lint_input
from patchkit.lint.rules import check_upstream_cited
from tests.lint_helpers import FIXTURES, findings, isolate_env, lint

MANIFEST = "patches/enginex-pr512/manifest.toml"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_env(monkeypatch)


@pytest.fixture
def clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The clean registry as its own project (a pyproject.toml of its own, so the scan stays inside it)."""
    root = tmp_path / "repo"
    shutil.copytree(FIXTURES / "clean", root)
    (root / "pyproject.toml").write_text("[tool.patchkit]\n")
    monkeypatch.chdir(root)
    return root


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new))


def test_waiver_only_repository_with_default_patches_folder(clean: Path) -> None:
    shutil.rmtree(clean / "patches")
    run = lint("--format", "json")
    assert "patches folder does not exist" not in run.stderr
    # Its waiver names no patch and no patch site: an orphan, but linted (sections checked) all the same.
    assert run.codes() == ["PK209"]
    _edit(clean / "waivers" / "7001.md", "## Removal plan", "## Later")
    assert sorted(lint("--format", "json").codes()) == ["PK205", "PK209"]


def test_a_configured_patches_folder_that_is_missing_is_still_an_error(clean: Path) -> None:
    shutil.rmtree(clean / "patches")
    (clean / "pyproject.toml").write_text('[tool.patchkit]\npatches = "patches"\n')
    run = lint()
    assert run.exit_code == 2 and "patches folder does not exist" in run.stderr


def test_translations_are_accepted_when_their_original_exists(clean: Path) -> None:
    waivers = clean / "waivers"
    for name in ("7001_zh.md", "7001.zh-CN.md", "README.md", "README_zh.md"):
        (waivers / name).write_text("# 译本\n")
    assert lint("--format", "json").codes() == []
    (waivers / "7002_ja.md").write_text("# 翻訳\n")
    (bad,) = findings(lint("--format", "json"), "PK203")
    assert bad["path"] == "waivers/7002_ja.md"
    assert "translation of 7002.md, which does not exist" in bad["message"]


def test_pending_waiver_is_a_warning_naming_the_rename(clean: Path) -> None:
    shutil.copy(clean / "waivers" / "7001.md", clean / "waivers" / "PENDING-moe-fix.md")
    run = lint("--format", "json")
    assert run.exit_code == 0
    (pending,) = findings(run, "PK210")
    assert pending["severity"] == "warning"
    assert "git mv waivers/PENDING-moe-fix.md waivers/N.md" in pending["message"]
    assert lint("--strict").exit_code == 1


@pytest.mark.parametrize(
    ("name", "advice"),
    [
        ("moe fix.md", "rename it to <PR number>.md"),
        ("qwen3-fix.md", "rename it to <PR number>.md"),  # never "rename it to 3.md"
        ("fix-for-2306.md", "rename it to <PR number>.md"),
        ("2306-draft.md", "rename it to 2306.md"),
        ("PR_2306.md", "rename it to 2306.md"),
    ],
)
def test_a_misnamed_waiver_gets_a_number_only_when_it_has_one(clean: Path, name: str, advice: str) -> None:
    shutil.copy(clean / "waivers" / "7001.md", clean / "waivers" / name)
    (bad,) = findings(lint("--format", "json"), "PK203")
    assert advice in bad["message"]
    if "<PR number>" in advice:
        assert f"PENDING-{Path(name).stem.lower().replace(' ', '-')}.md" in bad["message"]


@pytest.mark.parametrize(
    "heading", ["## Upstream status", "## Upstream PR / issue links", "## Links", "### 3. Upstream tracking"]
)
def test_upstream_heading_variants(clean: Path, heading: str) -> None:
    _edit(clean / "waivers" / "7001.md", "## Upstream PR", heading)
    assert findings(lint("--format", "json"), "PK205") == []


def test_a_missing_section_is_named(clean: Path) -> None:
    _edit(clean / "waivers" / "7001.md", "## Upstream PR", "## Elsewhere")
    (missing,) = findings(lint("--format", "json"), "PK205")
    assert missing["message"].startswith("no 'upstream PR/issue link' section")
    assert '"Upstream status"' in missing["message"]


def test_introduced_by_equal_to_the_upstream_pr_warns(clean: Path) -> None:
    _edit(clean / MANIFEST, "introduced_by = 7001", "introduced_by = 512")
    shutil.move(clean / "waivers" / "7001.md", clean / "waivers" / "512.md")
    run = lint("--format", "json")
    (same,) = findings(run, "PK211")
    assert (same["path"], same["line"], same["severity"]) == (MANIFEST, 20, "warning")
    assert "also the upstream PR of patch enginex-pr512 (example-org/enginex#512)" in same["message"]


@pytest.mark.parametrize(
    ("pattern", "prose"),
    [
        ("enginex/attn/", "The folder `enginex/attn/` is left out"),
        ("enginex/attn/**", "Nothing under enginex/attn is ported"),
        ("enginex/*/registry.py", "`enginex/attn/registry.py` is left out"),
    ],
)
def test_excludes_named_as_a_folder_or_by_their_files(clean: Path, pattern: str, prose: str) -> None:
    _edit(clean / MANIFEST, '"enginex/attn/registry.py" =', f'"{pattern}" =')
    waiver = clean / "waivers" / "7001.md"
    _edit(waiver, "`enginex/attn/registry.py` is left out", prose)
    assert findings(lint("--format", "json"), "PK208") == []
    _edit(waiver, prose, "One file is left out")
    assert len(findings(lint("--format", "json"), "PK208")) == 1


def test_several_upstream_prs_and_local_origin_are_read_from_the_raw_manifest(clean: Path) -> None:
    manifest = clean / MANIFEST
    _edit(manifest, "pr = 512\n", 'pr = 512\nprs = ["example-org/enginex#513", 514, "other/fork#7"]\n')
    lint_input = read_lint_input(Path("patches"), Path("waivers"))
    (claim,) = lint_input.claims
    assert claim.upstream_prs == (
        ("example-org/enginex", 512), ("example-org/enginex", 513), ("example-org/enginex", 514), ("other/fork", 7)
    )
    # The manifest loader may not know `prs` yet; the rule reads the claim either way.
    spec = read_lint_input(Path("patches"), Path("waivers")).specs or _spec_without(manifest, "prs = ")
    found = list(check_upstream_cited(dataclasses.replace(lint_input, specs=spec)))
    assert [f.rule for f in found] == [Rule.WAIVER_UPSTREAM_UNCITED] * 3
    assert [f.message.split(" of patch")[0] for f in found] == [
        "does not cite the upstream PR example-org/enginex#513",
        "does not cite the upstream PR example-org/enginex#514",
        "does not cite the upstream PR other/fork#7",
    ]
    _edit(clean / "waivers" / "7001.md", "## Removal plan", "Also example-org/enginex#513, #514 and "
          "https://github.com/example-org/enginex/pull/514 and other/fork#7.\n\n## Removal plan")
    lint_input = read_lint_input(Path("patches"), Path("waivers"))
    assert list(check_upstream_cited(dataclasses.replace(lint_input, specs=spec))) == []


def test_a_local_patch_must_say_it_is_local(clean: Path) -> None:
    manifest = clean / MANIFEST
    _edit(manifest, "pr = 512\n", 'pr = 512\norigin = "local"\nreason = "ROCm-only workaround"\n')
    spec = _spec_without(manifest, "origin = ", "reason = ")
    lint_input = dataclasses.replace(read_lint_input(Path("patches"), Path("waivers")), specs=spec)
    (local,) = check_upstream_cited(lint_input)
    assert 'is local (origin = "local" ("ROCm-only workaround"))' in local.message
    _edit(clean / "waivers" / "7001.md", "## Upstream PR", "## Upstream PR\n\nA local patch: there is no upstream PR.")
    lint_input = dataclasses.replace(read_lint_input(Path("patches"), Path("waivers")), specs=spec)
    assert list(check_upstream_cited(lint_input)) == []


def _spec_without(manifest: Path, *prefixes: str) -> tuple[object, ...]:
    """The manifest loaded with the keys this version's loader does not know yet left out."""
    from patchkit.input.manifest import load_manifest

    original = manifest.read_text()
    manifest.write_text("".join(line for line in original.splitlines(True) if not line.startswith(prefixes)))
    try:
        return (load_manifest(manifest.parent.resolve()),)
    finally:
        manifest.write_text(original)
