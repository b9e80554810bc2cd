"""The hints of `new` and `vendor` name what was recorded, and run as printed from another folder, offline:
[source] path relative to the project holding the registry (not to where vendor ran), the stale-pin hint from
the entry's own diff and the other re-vendor hints from the local file the diff came from (not the forge URL),
and "exists already" with the registry it was said of."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import git_diff

OFFLINE = {"PATH": "/usr/bin:/bin", "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}


def patchkit(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "patchkit", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, check=False, env={**OFFLINE, "HOME": str(cwd)})


def run_printed(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    words = shlex.split(command)
    assert words[0] == "patchkit", command
    return patchkit(*words[1:], cwd=cwd)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A consuming repository: pyproject.toml, a registry in patches/, the diff in diffs/, and other folders."""
    repo = tmp_path / "repo"
    (tmp_path / "g").mkdir()
    (repo / "diffs").mkdir(parents=True)
    (repo / "pyproject.toml").write_text("[tool.patchkit]\npatches = \"patches\"\n", encoding="utf-8")
    (repo / "diffs" / "fix.diff").write_bytes(git_diff(tmp_path / "g", {"eng/a.py": b"1\n2\n3\n"},
                                                       {"eng/a.py": b"1\nTWO\n3\n"}))
    (tmp_path / "elsewhere").mkdir()
    return repo


def test_source_path_is_relative_to_the_project_and_a_rerun_from_elsewhere_writes_nothing(project: Path) -> None:
    made = patchkit("new", "fix", "--patches", project / "patches", "--target", "eng", "--repo", "o/eng",
                    "--pr", "7", "--from", "fix.diff", cwd=project / "diffs")
    assert made.returncode == 0, made.stderr
    manifest = (project / "patches" / "fix" / "manifest.toml").read_text(encoding="utf-8")
    assert 'path = "diffs/fix.diff"' in manifest, manifest  # not "fix.diff", where `new` happened to run
    again = patchkit("vendor", "fix", "--patches", project / "patches", "--from", project / "diffs" / "fix.diff",
                     cwd=project.parent / "elsewhere")
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("fix: already vendored"), again.stdout


def test_the_re_pin_hint_names_the_local_file_and_runs_offline_from_another_folder(project: Path) -> None:
    made = patchkit("new", "fix", "--patches", project / "patches", "--target", "eng", "--repo", "o/eng",
                    "--pr", "7", "--from", project / "diffs" / "fix.diff", cwd=project)
    assert made.returncode == 0, made.stderr
    manifest = project / "patches" / "fix" / "manifest.toml"
    text = manifest.read_text(encoding="utf-8")
    manifest.write_text(text.replace("strip = 1", "strip = 1\nprefix = \"sub/\""), encoding="utf-8")  # stale pin
    stale = patchkit("status", "fix", "--patches", project / "patches", "--root", project, cwd=project.parent)
    assert stale.returncode == 2 and "re-pin its own diff with" in stale.stderr, stale.stderr
    hinted = re.search(r"re-pin its own diff with `([^`]+)`", stale.stderr)
    assert hinted is not None
    # the entry's own diff (the bytes the pin is about, always there), not the forge URL: it runs offline
    assert "github.com" not in hinted.group(1) and str(project / "patches" / "fix" / "fix.diff") in hinted.group(1)
    repinned = run_printed(hinted.group(1), project.parent / "elsewhere")
    assert repinned.returncode == 0, repinned.stderr
    assert "re-vendored" not in repinned.stdout and "recorded anew" in repinned.stdout  # the same diff
    assert 'path = "diffs/fix.diff"' in manifest.read_text(encoding="utf-8")  # [source] kept
    pending = patchkit("status", "fix", "--patches", project / "patches", "--root", project, "--strict-base",
                       cwd=project.parent)
    assert "github.com" not in pending.stdout + pending.stderr  # vendor_command names the recorded file too


def test_exists_already_names_the_registry_and_its_hint_runs_from_another_folder(project: Path) -> None:
    args = ["new", "fix", "--patches", project / "patches", "--target", "eng", "--local", "ours",
            "--from", project / "diffs" / "fix.diff"]
    assert patchkit(*args, cwd=project).returncode == 0
    twice = patchkit(*args, cwd=project)
    assert twice.returncode == 2 and "exists already" in twice.stderr
    hint = twice.stderr.split("re-vendor it: ", 1)[1].strip()
    assert f"--patches {project / 'patches'}" in hint, hint
    done = run_printed(hint.replace("SOURCE", str(project / "diffs" / "fix.diff")), project.parent / "elsewhere")
    assert done.returncode == 0 and "already vendored" in done.stdout, done.stdout + done.stderr


def test_status_says_how_many_base_files_it_compared_and_why_not_the_rest(tmp_path: Path) -> None:
    before = {"eng/a.py": b"1\n2\n3\n", "eng/b.py": b"x\ny\nz\n"}
    after = {"eng/a.py": b"1\nTWO\n3\n", "eng/b.py": b"x\nY\nz\n"}
    (tmp_path / "g").mkdir()
    (tmp_path / "fix.diff").write_bytes(git_diff(tmp_path / "g", before, after))
    engine = tmp_path / "engine"
    for rel, data in before.items():
        (engine / rel).parent.mkdir(parents=True, exist_ok=True)
        (engine / rel).write_bytes(data)
    made = patchkit("new", "fix", "--patches", tmp_path / "patches", "--target", "eng", "--local", "ours",
                    "--from", tmp_path / "fix.diff", "--base-tree", engine, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert "base: 2 files fingerprinted" in made.stdout, made.stdout
    whole = patchkit("status", "fix", "--patches", tmp_path / "patches", "--root", engine, "-v", cwd=tmp_path)
    assert "base pinned (2 files match [base])" in whole.stdout, whole.stdout
    (engine / "eng" / "b.py").unlink()
    part = patchkit("status", "fix", "--patches", tmp_path / "patches", "--root", engine, "-v", cwd=tmp_path)
    assert "base pinned (1 of 2 files in [base] match; 1 cannot be compared: " in part.stdout, part.stdout


@pytest.mark.parametrize("bad, said", [
    (b"\n<!DOCTYPE html>\n<html><head><title>Pull 7</title></head><body>diff --git a/x b/x</body></html>\n",
     "this is an HTML page, not a diff"),
    (b"diff --git a/eng/a.py b/eng/a.py\r\n--- a/eng/a.py\r\n+++ b/eng/a.py\r\n@@ -1,3 +1,3 @@\r\n 1\r\n-2\r\n+TWO\r\n"
     b" 3\r\n", "the diff's own header lines end in CRLF"),
])
def test_new_from_a_file_that_is_no_diff_creates_nothing_and_the_same_command_runs_once_it_is(
        project: Path, bad: bytes, said: str) -> None:
    good = (project / "diffs" / "fix.diff").read_bytes()
    source = project / "diffs" / "saved.diff"
    source.write_bytes(bad)
    args = ["new", "fix", "--patches", project / "patches", "--target", "eng", "--local", "ours", "--from", source]
    refused = patchkit(*args, cwd=project.parent / "elsewhere")
    assert refused.returncode == 2 and said in refused.stderr, refused.stderr
    assert "nothing was created: this `patchkit new` command runs as it is" in refused.stderr
    assert "vendor it with" not in refused.stderr and not (project / "patches").exists()
    source.write_bytes(good)
    again = patchkit(*args, cwd=project.parent / "elsewhere")
    assert again.returncode == 0, again.stderr


SITE_DIFF_BEFORE = {"x.py": b"a\nb\nc\n"}
SITE_DIFF_AFTER = {"x.py": b"a\nB\nc\n"}


def test_from_site_left_to_do_names_the_repositorys_waiver_folder_and_the_scripts_root(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "docs" / "waiver").mkdir(parents=True)
    (repo / "runners").mkdir()
    (repo / "pyproject.toml").write_text('[tool.patchkit]\nwaivers = "docs/waiver"\n', encoding="utf-8")
    (repo / "docs" / "waiver" / "2306.md").write_text("# 2306\n", encoding="utf-8")
    (tmp_path / "g").mkdir()
    diff = git_diff(tmp_path / "g", SITE_DIFF_BEFORE, SITE_DIFF_AFTER)
    (repo / "runners" / "fix.diff").write_bytes(diff)
    (repo / "runners" / "fix.sh").write_text(
        '#!/bin/bash\n: "${ATOM_ROOT:=/opt/ATOM}"\ncd "$ATOM_ROOT" && git apply runners/fix.diff\n'
        "cat <<'EOF' | git -C /opt/ATOM apply\n" + diff.decode() + "EOF\n", encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    made = patchkit("new", "atom-fix", "--patches", repo / "patches", "--target", "atom", "--local", "ours",
                    "--introduced-by", "2306", "--from-site", f"{repo / 'runners' / 'fix.sh'}:3", cwd=elsewhere)
    assert made.returncode == 0, made.stderr
    left = made.stdout.split("left to do:")[1]
    assert f"the waiver: {repo / 'docs' / 'waiver' / '2306.md'} exists: name atom-fix in it" in left, left
    assert "waivers/2306.md" not in left
    assert f'apply atom-fix --patches {repo / "patches"} --root "$ATOM_ROOT"' in left, left  # not --root .
    assert "--root ." not in left
    fresh = patchkit("new", "atom-fix2", "--patches", repo / "patches", "--target", "atom", "--local", "ours",
                     "--introduced-by", "2400", "--from-site", f"{repo / 'runners' / 'fix.sh'}:4", cwd=repo)
    assert fresh.returncode == 0, fresh.stderr
    assert "the waiver: write docs/waiver/2400.md naming atom-fix2" in fresh.stdout, fresh.stdout
