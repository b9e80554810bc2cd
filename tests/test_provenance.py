"""Provenance at status/apply/revert time: pinned base, applied records, stale versions, upstream-contains.

Every scenario runs the real CLI on real temporary trees; git relations use real temporary repositories.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from patchkit.input.tree import open_root
from patchkit.outcome import Relation
from patchkit.run.provenance import HeadCheck, compare_head
from tests.conftest import FileSpec, cli, copy_tree, git, git_diff, read_tree, write_tree
from tests.provenance_helpers import (
    BASE,
    PID,
    add_entry,
    commit_all,
    edit,
    git_repo,
    sha,
    v1_files,
    v2_files,
)

EXCLUDE = {"eng/extra.py": "not ported"}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "engine"
    root.mkdir()
    write_tree(root, BASE)
    return root


def status(tree: Path, patches: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    result = cli("status", PID, "--root", tree, "--patches", patches, "--json", *extra)
    return result.code, result.json()


def record_path(tree: Path, suffix: str = "json") -> Path:
    return tree / ".patchkit" / "applied" / f"{PID}.{suffix}"


# ------------------------------------------------------------------------------------------- pinned commit


def head_of_checkout(repo: Path, pinned: str) -> HeadCheck:
    with open_root(repo) as root:
        return compare_head(root, pinned)


def test_head_relations_against_real_repositories(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    first = git_repo(repo, BASE, "first")
    pinned = commit_all(repo, v1_files(), "pinned")
    later = commit_all(repo, v2_files(), "later")

    assert head_of_checkout(repo, pinned).relation is Relation.DESCENDANT
    assert head_of_checkout(repo, pinned).head == later
    git(repo, "checkout", "-q", pinned)
    assert head_of_checkout(repo, pinned).relation is Relation.SAME
    git(repo, "checkout", "-q", first)
    assert head_of_checkout(repo, pinned).relation is Relation.ANCESTOR
    git(repo, "checkout", "-q", "--orphan", "elsewhere")
    git(repo, "commit", "-q", "-m", "unrelated root")
    assert head_of_checkout(repo, pinned).relation is Relation.UNRELATED
    missing = head_of_checkout(repo, "0123456789abcdef0123456789abcdef01234567")
    assert missing.relation is Relation.UNKNOWN_OBJECT
    assert missing.detail is not None and "not in" in missing.detail


def test_status_reports_pinned_and_strict_base_refuses_a_bumped_image(tmp_path: Path, patches: Path) -> None:
    root = tmp_path / "engine"
    pinned = git_repo(root, BASE)
    add_entry(patches, git_diff(tmp_path, BASE, v1_files()), pinned=pinned, excludes=EXCLUDE)

    code, data = status(root, patches, "--strict-base")
    assert code == 3  # unapplied; the base is verified, so --strict-base adds nothing
    assert data["base"] == {
        "state": "pinned", "pinned_commit": pinned, "head": pinned, "relation": "same",
        "fingerprint": [], "drifted": [], "unchecked": [], "detail": None,
    }

    bumped = commit_all(root, {"eng/util.py": b"bumped\n"}, "image bump")
    code, data = status(root, patches)
    assert code == 3  # drift explains, it does not change the verdict
    assert data["base"]["state"] == "drifted"
    assert data["base"]["relation"] == "descendant"
    assert data["base"]["head"] == bumped

    before = read_tree(root)
    result = cli("apply", PID, "--root", root, "--patches", patches, "--strict-base")
    assert result.code == 9
    assert "--strict-base" in result.out and "drifted" in result.out
    assert read_tree(root) == before

    result = cli("apply", PID, "--root", root, "--patches", patches)
    assert result.code == 0
    assert "base drifted (HEAD" in result.out and "descends from the pinned" in result.out


# ---------------------------------------------------------------------------------------- base fingerprint


def test_fingerprint_catches_a_drifted_plain_tree(tmp_path: Path, patches: Path, tree: Path) -> None:
    diff = git_diff(tmp_path, BASE, v1_files())
    add_entry(patches, None, excludes=EXCLUDE)
    (tmp_path / "pr.diff").write_bytes(diff)
    vendored = cli("vendor", PID, "--patches", patches, "--from", tmp_path / "pr.diff", "--base-tree", tree)
    assert vendored.code == 0, vendored.err
    assert "1 file fingerprinted" in vendored.out

    code, data = status(tree, patches, "--strict-base")
    assert (code, data["base"]["state"], data["base"]["fingerprint"]) == (3, "pinned", ["eng/core.py"])

    # The image now ships another core.py: far from the hunk, so the hunk still applies cleanly.
    drifted = tmp_path / "drifted"
    copy_tree(tree, drifted)
    core = (drifted / "eng/core.py").read_bytes()
    (drifted / "eng/core.py").write_bytes(edit(core, {b"core_20 = 20\n": b"core_20 = 21\n"}))
    code, data = status(drifted, patches)
    assert code == 3
    assert data["base"]["state"] == "drifted"
    assert data["base"]["drifted"] == ["eng/core.py"]
    assert data["base"]["relation"] is None  # not a git checkout: no git asked

    text = cli("status", PID, "--root", drifted, "--patches", patches)
    assert "base drifted (eng/core.py differ from [base])" in text.out

    assert cli("apply", PID, "--root", drifted, "--patches", patches, "--strict-base").code == 9
    assert cli("apply", PID, "--root", drifted, "--patches", patches).code == 0
    code, data = status(drifted, patches)
    assert (code, data["base"]["drifted"]) == (0, ["eng/core.py"])  # judged on the pre-image

    # An applied pinned tree reads as pinned: the pre-image is recovered from the applied file.
    assert cli("apply", PID, "--root", tree, "--patches", patches).code == 0
    code, data = status(tree, patches, "--strict-base")
    assert (code, data["base"]["state"]) == (0, "pinned")


def test_fingerprint_explains_a_conflict(tmp_path: Path, patches: Path, tree: Path) -> None:
    diff = git_diff(tmp_path, BASE, v1_files())
    pristine = (tree / "eng/core.py").read_bytes()
    add_entry(patches, diff, excludes=EXCLUDE, base={"eng/core.py": sha(pristine)})
    (tree / "eng/core.py").write_bytes(edit(pristine, {b"core_5 = 5\n": b"core_5 = 7\n"}))
    code, data = status(tree, patches)
    assert code == 5
    assert data["state"] == "conflict"
    assert data["base"]["drifted"] == ["eng/core.py"]


# ---------------------------------------------------------------------------------------- applied records


def test_apply_writes_a_record_and_revert_removes_it(tmp_path: Path, patches: Path, tree: Path) -> None:
    diff = git_diff(tmp_path, BASE, v1_files())
    add_entry(patches, diff, excludes=EXCLUDE)
    result = cli("apply", PID, "--root", tree, "--patches", patches, "--json")
    assert result.code == 0
    record = json.loads(record_path(tree).read_text())
    assert record["hunkset_sha256"] == result.json()["hunk_set_sha256"]
    assert record["diff_sha256"] == sha(diff)
    assert record["manifest_sha256"] == sha((patches / PID / "manifest.toml").read_bytes())
    assert record["applied_at"].endswith("Z") and record["tool_version"]
    assert record_path(tree, "diff").read_bytes() == diff

    code, data = status(tree, patches)
    assert code == 0
    assert data["record"]["state"] == "current"
    assert data["provenance"]["origin"] == "this-version"
    assert data["provenance"]["can_retire"] is False

    assert cli("revert", PID, "--root", tree, "--patches", patches).code == 0
    assert not record_path(tree).exists() and not record_path(tree, "diff").exists()
    assert read_tree(tree) == read_tree_of(BASE, tmp_path)


def read_tree_of(files: dict[str, FileSpec], tmp_path: Path) -> dict[str, tuple[bytes, bool]]:
    folder = tmp_path / f"expected-{len(list(tmp_path.glob('expected-*')))}"
    write_tree(folder, files)
    return read_tree(folder)


def test_stale_version_is_refused_then_reverted_from_the_stored_copy(
    tmp_path: Path, patches: Path, tree: Path
) -> None:
    pristine = read_tree(tree)
    v1 = git_diff(tmp_path, BASE, v1_files())
    v2 = git_diff(tmp_path, BASE, v2_files())
    folder = add_entry(patches, v1, excludes=EXCLUDE)
    assert cli("apply", PID, "--root", tree, "--patches", patches).code == 0
    with_v1 = read_tree(tree)

    # The registry moves on to v2 (a reviewed new diff) while the tree still holds v1.
    (folder / "change.diff").write_bytes(v2)
    add_entry(patches, v2, excludes=EXCLUDE)
    code, data = status(tree, patches)
    assert data["record"]["state"] == "stale"
    assert data["record"]["stored_copy_usable"] is True
    assert data["provenance"]["origin"] == "other-version"
    assert code == 5  # v2's changed hunk conflicts with v1's line; the record says why

    refused = cli("apply", PID, "--root", tree, "--patches", patches)
    assert refused.code == 1
    assert "another version of this patch" in refused.out and f"patchkit revert {PID}" in refused.out
    assert read_tree(tree) == with_v1

    reverted = cli("revert", PID, "--root", tree, "--patches", patches, "--json")
    assert reverted.code == 0
    assert reverted.json()["result"] == "reverted"
    assert reverted.json()["provenance"]["used_stored_copy"] is True
    assert read_tree(tree) == pristine
    assert not record_path(tree).exists()

    assert cli("apply", PID, "--root", tree, "--patches", patches).code == 0
    code, data = status(tree, patches)
    assert (code, data["record"]["state"], data["provenance"]["origin"]) == (0, "current", "this-version")
    assert record_path(tree, "diff").read_bytes() == v2


def test_upstream_contains_says_retire_and_writes_nothing(tmp_path: Path, patches: Path, tree: Path) -> None:
    core = BASE["eng/core.py"]
    assert isinstance(core, bytes)
    add_entry(patches, git_diff(tmp_path, BASE, v1_files()), excludes=EXCLUDE, base={"eng/core.py": sha(core)})
    # The new engine release ships the fix, and has moved on elsewhere in the file: the [base] shows it.
    released = edit(v1_files()["eng/core.py"], {b"core_20 = 20\n": b"core_20 = 200\n"})  # type: ignore[arg-type]
    write_tree(tree, {"eng/core.py": released})

    code, data = status(tree, patches)
    assert code == 0
    assert data["record"]["state"] == "none"
    assert data["provenance"]["origin"] == "upstream-contains"
    assert data["provenance"]["can_retire"] is True
    text = cli("status", PID, "--root", tree, "--patches", patches)
    assert "upstream-contains" in text.out and "can be retired" in text.out

    applied = cli("apply", PID, "--root", tree, "--patches", patches, "--json")
    assert applied.code == 0 and applied.json()["result"] == "already-applied"
    assert not record_path(tree).exists()

    # patchkit did not put the change there: revert would edit the engine image itself, so only --force does
    shipped = (tree / "eng/core.py").read_bytes()
    refused = cli("revert", PID, "--root", tree, "--patches", patches)
    assert refused.code == 1 and "--force" in refused.out
    assert (tree / "eng/core.py").read_bytes() == shipped
    forced = cli("revert", PID, "--root", tree, "--patches", patches, "--force", "--json")
    assert (forced.code, forced.json()["result"]) == (0, "reverted")
    assert (tree / "eng/core.py").read_bytes() == edit(core, {b"core_20 = 20\n": b"core_20 = 200\n"})


def test_revert_of_a_tree_without_the_change_drops_a_leftover_record(
    tmp_path: Path, patches: Path, tree: Path
) -> None:
    add_entry(patches, git_diff(tmp_path, BASE, v1_files()), excludes=EXCLUDE)
    assert cli("apply", PID, "--root", tree, "--patches", patches).code == 0
    write_tree(tree, BASE)  # the image was restored underneath the record

    assert cli("revert", PID, "--root", tree, "--patches", patches, "--dry-run").code == 0
    assert record_path(tree).exists()  # a dry run writes nothing
    result = cli("revert", PID, "--root", tree, "--patches", patches, "--json")
    assert (result.code, result.json()["result"]) == (0, "not-applied")
    assert not record_path(tree).exists()


def test_unreadable_record_is_reported_and_replaced(tmp_path: Path, patches: Path, tree: Path) -> None:
    add_entry(patches, git_diff(tmp_path, BASE, v1_files()), excludes=EXCLUDE)
    record_path(tree).parent.mkdir(parents=True)
    record_path(tree).write_text("{not json")
    code, data = status(tree, patches)
    assert (code, data["record"]["state"]) == (3, "invalid")
    assert "record invalid" in cli("status", PID, "--root", tree, "--patches", patches).out

    assert cli("apply", PID, "--root", tree, "--patches", patches).code == 0
    assert json.loads(record_path(tree).read_text())["patch"] == PID


def test_a_changed_exclude_breaks_the_hunkset_pin(tmp_path: Path, patches: Path, tree: Path) -> None:
    diff = git_diff(tmp_path, BASE, v1_files())
    add_entry(patches, None, excludes=EXCLUDE)
    (tmp_path / "pr.diff").write_bytes(diff)
    assert cli("vendor", PID, "--patches", patches, "--from", tmp_path / "pr.diff").code == 0
    manifest = patches / PID / "manifest.toml"
    manifest.write_text(manifest.read_text().replace('"eng/extra.py" = "not ported"\n', ""))

    result = cli("status", PID, "--root", tree, "--patches", patches)
    assert result.code == 2
    assert "the filtered hunk set has sha256" in result.err and "patchkit vendor" in result.err


# -------------------------------------------------------------------------------------- root from package


def _fake_distribution(site: Path, name: str, direct_url: dict[str, object] | None = None) -> None:
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "RECORD").write_text(f"{name}/__init__.py,,\n{name}-1.0.dist-info/METADATA,,\n")
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url))


def test_root_from_package(tmp_path: Path, patches: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    write_tree(site, {f"pkengine/{k.removeprefix('eng/')}": v for k, v in BASE.items()})
    write_tree(site, {"pkengine/__init__.py": b""})
    _fake_distribution(site, "pkengine")
    checkout = tmp_path / "checkout"
    write_tree(checkout, BASE)
    _fake_distribution(site, "pkeditable", {"url": checkout.as_uri(), "dir_info": {"editable": True}})
    monkeypatch.syspath_prepend(str(site))
    add_entry(patches, git_diff(tmp_path, BASE, v1_files()), excludes=EXCLUDE)

    # Editable: the source checkout is the tree.
    result = cli("status", PID, "--root-from-package", "pkeditable", "--patches", patches, "--json")
    assert (result.code, result.json()["root"]) == (3, str(checkout))

    # Installed: the site-packages folder holding the package. This diff names eng/..., which is not there.
    monkeypatch.setenv("PATCHKIT_ROOT", str(tmp_path / "ignored"))
    result = cli("status", PID, "--root-from-package", "pkengine", "--patches", patches, "--json")
    assert (result.code, result.json()["root"]) == (5, str(site))

    both = cli("status", PID, "--root", checkout, "--root-from-package", "pkengine", "--patches", patches)
    assert both.code == 2 and "exclude each other" in both.err
    missing = cli("status", PID, "--root-from-package", "no-such-dist-xyz", "--patches", patches)
    assert missing.code == 2 and "no installed Python distribution" in missing.err
    monkeypatch.delenv("PATCHKIT_ROOT")
    neither = cli("status", PID, "--patches", patches)
    assert neither.code == 2 and "--root-from-package" in neither.err


# ------------------------------------------------------------------------------------------- import cost


def test_status_on_a_plain_tree_does_not_import_gitpython(tmp_path: Path, patches: Path, tree: Path) -> None:
    add_entry(patches, git_diff(tmp_path, BASE, v1_files()), excludes=EXCLUDE, pinned="1" * 40)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "patchkit", "status", PID, "--root", str(tree),
         "--patches", str(patches)],
        capture_output=True, text=True, env=env, check=False,
    )
    assert done.returncode == 3, done.stderr[-2000:]
    modules = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert "patchkit.run.provenance" in modules
    assert not {"git", "tomlkit", "urllib.request"} & modules


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_checkout_without_pinned_commit_does_not_ask_git(tmp_path: Path, patches: Path) -> None:
    root = tmp_path / "engine"
    git_repo(root, BASE)
    add_entry(patches, git_diff(tmp_path, BASE, v1_files()), excludes=EXCLUDE)
    code, data = status(root, patches)
    assert (code, data["base"]["state"], data["base"]["head"]) == (3, "unknown", None)
    assert "pinned_commit is unknown" in data["base"]["detail"]


def test_strict_base_refuses_an_unverifiable_base(tmp_path: Path, patches: Path, tree: Path) -> None:
    add_entry(patches, git_diff(tmp_path, BASE, v1_files()), excludes=EXCLUDE)
    assert status(tree, patches)[0] == 3
    code, data = status(tree, patches, "--strict-base")
    assert (code, data["base"]["state"], data["provenance"]["strict_base"]) == (9, "unknown", True)
    before = read_tree(tree)
    assert cli("apply", PID, "--root", tree, "--patches", patches, "--strict-base").code == 9
    assert read_tree(tree) == before and not record_path(tree).exists()


def test_a_stale_record_with_a_damaged_stored_copy_is_refused_both_ways(
    tmp_path: Path, patches: Path, tree: Path
) -> None:
    add_entry(patches, git_diff(tmp_path, BASE, v1_files()), excludes=EXCLUDE)
    assert cli("apply", PID, "--root", tree, "--patches", patches).code == 0
    record_path(tree, "diff").write_bytes(b"tampered\n")
    add_entry(patches, git_diff(tmp_path, BASE, v2_files()), excludes=EXCLUDE)
    with_v1 = read_tree(tree)

    _, data = status(tree, patches)
    assert (data["record"]["state"], data["record"]["stored_copy_usable"]) == ("stale", False)
    assert "does not have the sha256" in data["record"]["detail"]
    for action in ("apply", "revert"):
        result = cli(action, PID, "--root", tree, "--patches", patches)
        assert result.code == 1 and "stored copy is unusable" in result.out, action
    assert read_tree(tree) == with_v1
