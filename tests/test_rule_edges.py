"""Rules that a one-character slip would break unnoticed: each test here kills a mutant of scripts/mutants.py
that the rest of the suite let through. A file exclude and a rename's old path, `--complete` on a conflict, a
rename with both paths present, a hunk pinned to line 1, a hunk cut short by the end of the file, excluding a
file's last hunk; lint: PK204 on a waiver another patch rightly claims, PK208 and a glob matching two files, a
waiver naming a longer file name, patching in a scratch folder. Through the real CLI on real trees and
registries, with real git as the oracle where git has an answer.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from patchkit.scan import ScanConfig, scan_files
from tests.conftest import Registry, cli, git, git_diff, read_tree, write_tree
from tests.lint_helpers import FIXTURES, REPO, copy_scenario, findings, isolate_env, lint, lint_scenario

LINES = [b"line %d\n" % i for i in range(1, 41)]
BEFORE = b"".join(LINES)

# ------------------------------------------------------------------------------- file excludes and renames

RENAME_BEFORE = {"old/moved.py": BEFORE, "keep.py": b"keep = 1\n"}
RENAME_AFTER = {"old/moved.py": None, "new/moved.py": BEFORE.replace(b"line 20\n", b"line twenty\n"),
                "keep.py": b"keep = 2\n"}


@pytest.mark.parametrize("pattern", ["old/moved.py", "old", "old/*.py"])
def test_a_file_exclude_matches_a_renames_old_path(
    tmp_path: Path, registry: Registry, engine: Path, pattern: str
) -> None:
    diff = git_diff(tmp_path, RENAME_BEFORE, RENAME_AFTER)
    assert b"rename from old/moved.py\nrename to new/moved.py\n" in diff  # git saw the rename
    registry.add("p", diff, exclude={pattern: "the old module stays where it is"})
    write_tree(engine, RENAME_BEFORE)
    done = cli("apply", "p", "--root", engine, "--patches", registry.path, "--json")
    assert done.code == 0, done.out + done.err
    # The whole rename is excluded (both of its paths): the old file stays, nothing appears at the new path.
    assert read_tree(engine) == {"old/moved.py": (BEFORE, False), "keep.py": (b"keep = 2\n", False)}
    assert sorted(e["path"] for e in done.json()["excluded"]) == ["new/moved.py", "old/moved.py"]


# ------------------------------------------------------------------------------ --complete and a conflict


def test_complete_never_writes_a_conflicted_tree(tmp_path: Path, registry: Registry, engine: Path) -> None:
    after = BEFORE.replace(b"line 3\n", b"changed 3\n").replace(b"line 35\n", b"changed 35\n")
    registry.add("p", git_diff(tmp_path, {"f.py": BEFORE}, {"f.py": after}))
    # Hunk 1 applied, hunk 2's lines drifted to something that is neither its old nor its new content.
    drifted = BEFORE.replace(b"line 3\n", b"changed 3\n").replace(b"line 35\n", b"someone else's 35\n")
    write_tree(engine, {"f.py": drifted})
    status = cli("status", "p", "--root", engine, "--patches", registry.path, "--json")
    assert status.json()["state"] == "conflict", status.out
    for action, extra in (("apply", ()), ("revert", ("--force",))):
        refused = cli(action, "p", "--root", engine, "--patches", registry.path, "--complete", *extra, "--json")
        assert refused.code == 1, (action, refused.out, refused.err)
        doc = refused.json()
        assert (doc["state"], doc["result"]) == ("conflict", "refused"), doc
        assert "hunk 2" in doc["reason"], doc["reason"]
        assert read_tree(engine) == {"f.py": (drifted, False)}
        assert not (engine / ".patchkit" / "applied").exists(), "no record of a change that was not made"


# --------------------------------------------------------------------------------- PK204 and a claimed waiver

OTHER_MANIFEST = """\
id = "tool-pr77"
title = "A second patch, introduced by pull request 2106 of this repository"
diff = "pr77.diff"

[upstream]
repo = "example-org/tool"
pr = 77

[target]
name = "tool"
pinned_commit = "unknown"

[waiver]
introduced_by = 2106
"""

OTHER_WAIVER = """\
# Waiver for tool-pr77

## What is patched

`tool-pr77` makes the tool's launcher honour the engine's port.

## Why the unmodified upstream image cannot run

The pinned tool ignores the port and the engine cannot start.

## Upstream PR

example-org/tool#77

## Removal plan

Remove it once the pinned image contains example-org/tool#77.
"""


def test_a_waiver_another_patch_claims_is_not_called_misnamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # engine-pr2106 (upstream PR 2106, introduced by 2816) has its waiver under the right name, 2816.md; the
    # 2106.md next to it is tool-pr77's own waiver (introduced_by = 2106): a namesake, not a mistake.
    isolate_env(monkeypatch)
    root = copy_scenario("misnamed-waiver", tmp_path)
    (root / "waivers" / "2106.md").rename(root / "waivers" / "2816.md")
    (root / "patches" / "tool-pr77").mkdir()
    (root / "patches" / "tool-pr77" / "manifest.toml").write_text(OTHER_MANIFEST, encoding="utf-8")
    (root / "waivers" / "2106.md").write_text(OTHER_WAIVER, encoding="utf-8")
    run = lint_scenario(root, "--format", "json")
    assert run.exit_code == 0, run.stdout
    assert findings(run, "PK204") == [] and findings(run, "PK209") == []
    # The same 2106.md with no patch claiming it is the mistake PK204 names.
    shutil.rmtree(root / "patches" / "tool-pr77")
    (named,) = findings(lint_scenario(root, "--format", "json"), "PK204")
    assert named["path"] == "waivers/2106.md"


# ------------------------------------------------------------------------------ a hunk pinned to line 1


def git_applies(tmp: Path, files: dict[str, bytes], diff: bytes) -> bool:
    """Whether real `git apply --check` accepts `diff` on a tree of `files`."""
    root = tmp / f"git-apply-{len(list(tmp.glob('git-apply-*')))}"
    write_tree(root, files)
    (tmp / "oracle.diff").write_bytes(diff)
    return git(root, "apply", "--check", str(tmp / "oracle.diff"), check=False).returncode == 0


def test_a_hunk_at_line_1_matches_only_at_the_start_like_git(tmp_path: Path, registry: Registry, engine: Path) -> None:
    after = BEFORE.replace(b"line 2\n", b"line two\n")
    diff = git_diff(tmp_path, {"f.py": BEFORE}, {"f.py": after})
    assert b"@@ -1,5 +1,5 @@" in diff
    registry.add("p", diff)
    moved = b"# a header someone added\n" + BEFORE  # the hunk's lines are all there, one line further down
    write_tree(engine, {"f.py": moved})
    # The oracle: git pins a hunk that starts at line 1 to the start of the file, and so refuses it here.
    assert git_applies(tmp_path, {"f.py": BEFORE}, diff) and not git_applies(tmp_path, {"f.py": moved}, diff)
    status = cli("status", "p", "--root", engine, "--patches", registry.path, "--json")
    assert status.json()["state"] == "conflict", status.out
    assert cli("apply", "p", "--root", engine, "--patches", registry.path).code == 1
    assert read_tree(engine) == {"f.py": (moved, False)}


# ---------------------------------------------------------------------------------- a rename, both paths there


def test_a_rename_whose_old_and_new_paths_both_exist_is_a_conflict(
    tmp_path: Path, registry: Registry, engine: Path
) -> None:
    registry.add("p", git_diff(tmp_path, RENAME_BEFORE, RENAME_AFTER))
    both = {**RENAME_BEFORE, "new/moved.py": BEFORE}  # someone copied the file over by hand
    write_tree(engine, both)
    status = cli("status", "p", "--root", engine, "--patches", registry.path, "--json")
    assert status.code == 5 and status.json()["state"] == "conflict", status.out
    (renamed,) = [f for f in status.json()["files"] if f["path"] == "new/moved.py"]
    assert renamed["state"] == "conflict" and "both old/moved.py and new/moved.py exist" in renamed["detail"]
    for action, extra in (("apply", ()), ("revert", ("--force",))):
        assert cli(action, "p", "--root", engine, "--patches", registry.path, *extra).code == 1
    assert read_tree(engine) == {path: (data, False) for path, data in both.items()}


# ------------------------------------------------------------------------------ excluding a file's last hunk


def test_a_hunk_exclude_may_name_the_files_last_hunk(tmp_path: Path, registry: Registry, engine: Path) -> None:
    after = BEFORE.replace(b"line 3\n", b"changed 3\n").replace(b"line 35\n", b"changed 35\n")
    folder = registry.add("p", git_diff(tmp_path, {"f.py": BEFORE}, {"f.py": after}))
    with (folder / "manifest.toml").open("a", encoding="utf-8") as manifest:
        manifest.write('"f.py" = { hunks = [2], reason = "line 35 stays as the image ships it" }\n')
    write_tree(engine, {"f.py": BEFORE})
    done = cli("apply", "p", "--root", engine, "--patches", registry.path)
    assert done.code == 0, done.out + done.err
    assert read_tree(engine) == {"f.py": (BEFORE.replace(b"line 3\n", b"changed 3\n"), False)}


# ---------------------------------------------------------------------- a hunk cut short by the end of the file


def test_a_hunk_cut_short_by_the_end_of_the_file_is_not_placed_by_position_alone(
    tmp_path: Path, registry: Registry, engine: Path
) -> None:
    # With -U2, the hunk that deletes one `a` of the last run has 2 lines of leading context and 1 trailing:
    # the diff saw the file end there. In the tree (two lines added at the top) its pre-image is at line 8, where
    # git applies it, but its post-image is also at line 4: a tree patched there with five lines appended would
    # look the same, and nothing else in the patch tells the two apart (docs/judgement.md: a look-alike the
    # evidence does not exclude makes the hunk ambiguous). So patchkit names both places and writes nothing.
    before, after = b"b\na\na\nb\nb\na\na\na\nb\n", b"b\na\na\nb\nb\na\na\nb\n"
    repo = tmp_path / "upstream"
    write_tree(repo, {"f": before})
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "before")
    write_tree(repo, {"f": after})
    diff = git(repo, "diff", "-U2", "--no-color").stdout
    assert b"@@ -6,4 +6,3 @@" in diff
    registry.add("p", diff)
    tree = b"b\na\n" + before
    write_tree(engine, {"f": tree})
    status = cli("status", "p", "--root", engine, "--patches", registry.path, "--json")
    hunk = status.json()["files"][0]["hunks"][0]
    assert status.json()["state"] == "ambiguous" and {4, 8} <= set(hunk["candidate_lines"]), status.out
    assert "line 8" in hunk["detail"] and "line 4" in hunk["detail"]
    assert cli("apply", "p", "--root", engine, "--patches", registry.path).code == 1
    assert read_tree(engine) == {"f": (tree, False)}  # refused: nothing written


# ----------------------------------------------------------------------- PK208 and a glob matching two files


def test_a_glob_exclude_is_documented_only_by_naming_every_file_it_matches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate_env(monkeypatch)
    root = tmp_path / "repo"
    shutil.copytree(FIXTURES / "clean", root)
    (root / "pyproject.toml").write_text("[tool.patchkit]\n")
    monkeypatch.chdir(root)
    manifest = root / "patches" / "enginex-pr512" / "manifest.toml"
    text = manifest.read_text()
    assert '"enginex/attn/registry.py" =' in text
    manifest.write_text(text.replace('"enginex/attn/registry.py" =', '"enginex/*/[kr]*.py" ='))
    # The glob matches enginex/cache/kv_pool.py and enginex/attn/registry.py; the waiver names only the second.
    (undocumented,) = findings(lint("--format", "json"), "PK208")
    assert "enginex/*/[kr]*.py" in undocumented["message"]
    waiver = root / "waivers" / "7001.md"
    waiver.write_text(waiver.read_text() + "\n`enginex/cache/kv_pool.py` is left out too.\n")
    assert findings(lint("--format", "json"), "PK208") == []


# ------------------------------------------------------------------------------ scan: scratch folders, names


def _sites(path: str, text: str) -> list[tuple[int, str, str | None]]:
    return [(s.line, s.kind.label, s.engine_path) for s in scan_files([(path, text.encode())], ScanConfig()).sites]


def test_patching_in_a_scratch_folder_under_tmp_is_not_a_patch_site() -> None:
    text = (
        "cd /tmp/build\n"
        "git apply fix.diff\n"
        "patch -d /tmp/src -p1 -i fix.diff\n"
        "cd /opt/ATOM\n"
        "git apply fix.diff\n"  # the engine: a site
    )
    assert _sites("run.sh", text) == [(5, "git-apply", "/opt/ATOM")]


def test_a_waiver_naming_a_longer_file_name_does_not_cover_the_site(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate_env(monkeypatch)
    root = tmp_path / "consumer"
    shutil.copytree(REPO / "fixtures" / "consumer-repo", root)
    monkeypatch.chdir(root)
    site = ("runners/atom/run_atom.sh", 7)
    assert site in {(f["path"], f["line"]) for f in findings(lint("--format", "json"), "PK401")}
    text = (root / "docs" / "waiver" / "2306.md").read_text()
    apply = "benchmarks/sglang/mi355x/apply_eagle_fix.sh"
    waiver = root / "docs" / "waiver" / "2310.md"
    for near_miss in ("runners/atom/run_atom.sh.bak", "runners/atom/run_atom.shx", "runners/atom/run_atom.sh-old"):
        waiver.write_text(text.replace("2306", "2310").replace(f"[{apply}](../../{apply})", f"`{near_miss}`"))
        uncovered = {(f["path"], f["line"]) for f in findings(lint("--format", "json"), "PK401")}
        assert site in uncovered, near_miss
    waiver.write_text(text.replace("2306", "2310").replace(f"[{apply}](../../{apply})", "`runners/atom/run_atom.sh`."))
    assert site not in {(f["path"], f["line"]) for f in findings(lint("--format", "json"), "PK401")}

