"""`patchkit new`: the shipped template, filled in, checked like any manifest, vendored in the same step."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchkit.input.manifest import load_manifest
from patchkit.tooling.scaffold import read_template
from tests.conftest import cli, git, git_diff, write_tree

# version_sensitive: the templates are read through importlib.resources (Traversable moved in 3.11).
pytestmark = pytest.mark.version_sensitive


def lines(name: str, count: int) -> bytes:
    return b"".join(b"%s %d\n" % (name.encode(), i) for i in range(1, count + 1))


def test_new_scaffolds_a_pending_entry_from_the_template(patches: Path) -> None:
    result = cli("new", "vllm-pr12", "--patches", patches, "--target", "vllm", "--repo", "vllm-project/vllm",
                 "--pr", "12", "--pr", "ROCm/aiter#7", "--title", 'Fix "quoted" KV \\ path')
    assert result.code == 0, result.err
    text = (patches / "vllm-pr12" / "manifest.toml").read_text()
    assert "# One patch = one folder" in text and "# prefix = " in text  # the commented template, kept
    spec = load_manifest(patches / "vllm-pr12")
    assert spec.pending and spec.title == 'Fix "quoted" KV \\ path'
    assert [str(p) for p in spec.upstream.prs] == ["vllm-project/vllm#12", "ROCm/aiter#7"]
    assert "patchkit vendor vllm-pr12" in result.out
    # lint sees a pending entry, not a broken one
    again = cli("new", "vllm-pr12", "--patches", patches, "--target", "vllm", "--repo", "a/b", "--pr", "1")
    assert again.code == 2 and "exists already" in again.err
    assert (patches / "vllm-pr12" / "manifest.toml").read_text() == text


def test_new_local_and_bad_values_leave_nothing(patches: Path) -> None:
    result = cli("new", "launcher-fix", "--patches", patches, "--target", "vllm", "--local", "our launcher only",
                 "--introduced-by", "31")
    assert result.code == 0, result.err
    spec = load_manifest(patches / "launcher-fix")
    assert spec.upstream.is_local and spec.upstream.reason == "our launcher only" and spec.introduced_by == 31
    for args, message in [
        (("--repo", "not-a-repo", "--pr", "3"), "owner/name"),
        (("--repo", "a/b", "--pr", "x#3"), "must be a PR number or"),
        (("--repo", "a/b"), "at least one --pr"),
        (("--local", "why", "--pr", "3"), "exclude each other"),
    ]:
        bad = cli("new", "bad-one", "--patches", patches, "--target", "vllm", *args)
        assert bad.code == 2 and message in bad.err, bad.err
    bad = cli("new", "../escape", "--patches", patches, "--target", "x", "--local", "r")
    assert bad.code == 2 and "not a patch id" in bad.err
    assert sorted(p.name for p in patches.iterdir()) == ["launcher-fix"]  # no staging folder left either


def test_new_from_git_vendors_and_records_the_source(tmp_path: Path, patches: Path) -> None:
    repo = tmp_path / "upstream"
    repo.mkdir()
    git(repo, "init", "-q")
    write_tree(repo, {"vllm/a.py": lines("a", 20)})
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    base = git(repo, "rev-parse", "HEAD").stdout.decode().strip()
    write_tree(repo, {"vllm/a.py": lines("a", 20).replace(b"a 9\n", b"a nine\n")})
    git(repo, "commit", "-qam", "fix")
    head = git(repo, "rev-parse", "HEAD").stdout.decode().strip()
    engine = tmp_path / "engine"
    write_tree(engine, {"vllm/a.py": lines("a", 20)})
    result = cli("new", "vllm-pr5", "--patches", patches, "--target", "vllm", "--repo", "vllm-project/vllm",
                 "--pr", "5", "--from-git", repo, "--range", f"{base}..HEAD", "--base-tree", engine, "--json")
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["created"]["source"] == {
        "kind": "git", "repo": str(repo), "range": f"{base}..HEAD", "base_commit": base, "head_commit": head,
    }
    spec = load_manifest(patches / "vllm-pr5")
    assert not spec.pending and spec.base_files
    listed = cli("list", "--patches", patches).out
    assert f"from {repo} {base}..HEAD ({base[:12]}..{head[:12]})" in listed
    assert cli("apply", "vllm-pr5", "--root", engine, "--patches", patches).code == 0


def test_a_failed_vendor_in_new_keeps_the_pending_entry(tmp_path: Path, patches: Path) -> None:
    # Issue 26: removing it left nothing to edit; the entry stays, pending, and the message says what to run.
    diff = git_diff(tmp_path, {"a.py": lines("a", 9)}, {"a.py": lines("a", 10)})
    (tmp_path / "x.diff").write_bytes(diff)
    engine = tmp_path / "engine"
    write_tree(engine, {"a.py": lines("a", 10)})  # already applied: not a base tree
    result = cli("new", "p", "--patches", patches, "--target", "e", "--local", "r", "--from", tmp_path / "x.diff",
                 "--base-tree", engine)
    assert result.code == 2 and "not unapplied" in result.err and "a.py hunk 1" in result.err
    assert [p.name for p in patches.iterdir()] == ["p"]
    assert load_manifest(patches / "p").pending and "the new entry is kept, pending" in result.err


def test_the_template_is_read_as_package_data() -> None:
    # importlib.resources, not a path next to the source: it works from a wheel or a zip. (That the wheel
    # holds every file under patchkit/, the template included, is tests/test_packaging.py's check.)
    text = read_template()
    assert "$upstream" in text and "# One patch = one folder" in text


def test_new_places_paths_and_stacks(tmp_path: Path, patches: Path) -> None:
    before = {"aiter/ops.py": lines("ops", 20), "csrc/k.cu": lines("k", 20)}
    after = {"aiter/ops.py": lines("ops", 20).replace(b"ops 4\n", b"ops four\n"),
             "csrc/k.cu": lines("k", 20).replace(b"k 9\n", b"k nine\n")}
    (tmp_path / "pr55.diff").write_bytes(git_diff(tmp_path, before, after))
    engine = tmp_path / "site"
    write_tree(engine, {"aiter/ops.py": before["aiter/ops.py"], "aiter_meta/csrc/k.cu": before["csrc/k.cu"]})
    result = cli("new", "aiter-pr55", "--patches", patches, "--target", "aiter", "--repo", "ROCm/aiter", "--pr",
                 "55", "--path", "csrc/=aiter_meta/csrc/", "--from", tmp_path / "pr55.diff", "--base-tree", engine)
    assert result.code == 0, result.err
    spec = load_manifest(patches / "aiter-pr55")
    assert spec.path_map.folders == (("csrc/", "aiter_meta/csrc/"),)
    assert {p for p, _ in spec.base_files} == {"aiter/ops.py", "aiter_meta/csrc/k.cu"}
    stacked = cli("new", "aiter-next", "--patches", patches, "--target", "aiter", "--local", "r",
                  "--after", "aiter-pr55", "--prefix", "aiter_meta/")
    assert stacked.code == 0, stacked.err
    spec = load_manifest(patches / "aiter-next")
    assert (spec.after, spec.path_map.prefix) == (("aiter-pr55",), "aiter_meta/")
    bad = cli("new", "x", "--patches", patches, "--target", "a", "--local", "r", "--path", "csrc/")
    assert bad.code == 2 and "FROM/=TO/" in bad.out + bad.err
    assert cli("apply", "aiter-pr55", "--root", engine, "--patches", patches).code == 0
    assert b"k nine" in (engine / "aiter_meta/csrc/k.cu").read_bytes()
