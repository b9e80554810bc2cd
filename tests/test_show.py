"""`patchkit show`: the filtered hunk set as a diff, checked against real git (git diff makes the input, git
apply and git apply --numstat judge the output) and against what `patchkit apply` writes."""

from __future__ import annotations

import base64
import json
import random
import shutil
from pathlib import Path

import pytest

from tests.conftest import FileSpec, Registry, cli, git, git_diff, read_tree, write_tree
from tests.schema_check import SCHEMA, errors_of


def _drop_index_lines(diff: bytes) -> bytes:
    """git's blob hashes and rename similarity: show has neither (patchkit keeps no blobs or scores)."""
    dropped = (b"index ", b"similarity index ")
    return b"".join(line for line in diff.splitlines(keepends=True) if not line.startswith(dropped))


def _without_files(diff: bytes, names: set[str]) -> bytes:
    """git's diff minus the sections of the given (plain) paths: the oracle for an exclude."""
    out, keep = [], True
    for line in diff.splitlines(keepends=True):
        if line.startswith(b"diff --git "):
            keep = not any(line == f"diff --git a/{n} b/{n}\n".encode() for n in names)
        if keep:
            out.append(line)
    return b"".join(out)


def _pristine_repo(tmp: Path, files: dict[str, FileSpec], name: str) -> Path:
    repo = tmp / name
    repo.mkdir()
    git(repo, "init", "-q")
    write_tree(repo, files)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", "pristine")
    return repo


def _nasty_trees(seed: int) -> tuple[dict[str, FileSpec], dict[str, FileSpec]]:
    """Repeated lines, CRLF, no final newline, spaces and non-ASCII in names, a created executable file, a
    deleted one, a renamed one with an edit, a mode-only change, hunks far apart, planted copies of a hunk."""
    rng = random.Random(seed)
    block = [b"x = 1\n", b"y = 2\n", b"x = 1\n", b"return x\n"]
    body = [rng.choice(block) for _ in range(40)] + [b"planted\n", b"x = 1\n", b"planted\n"]
    edited = list(body)
    for at in rng.sample(range(len(body)), 4):
        edited[at] = b"CHANGED %d\n" % at
    before: dict[str, FileSpec] = {
        "eng/run.py": b"".join(body),
        "eng/sp ace.txt": b"one\r\ntwo\r\nthree\r\n",
        "eng/\u00e9t\u00e9.py": "caf\u00e9\n".encode(),
        "eng/noeol.txt": b"a\nb",
        "eng/old_name.py": b"".join(block * 5),
        "eng/gone.py": b"bye\n",
        "eng/mode.sh": b"#!/bin/sh\n",
        "eng/skip.py": b"skip me\n",
    }
    after: dict[str, FileSpec] = {
        "eng/run.py": b"".join(edited),
        "eng/sp ace.txt": b"one\r\nTWO\r\nthree\r\n",
        "eng/\u00e9t\u00e9.py": "caf\u00e8\n".encode(),
        "eng/noeol.txt": b"a\nB",
        "eng/old_name.py": None,
        "eng/new_name.py": b"".join(block * 5).replace(b"return x\n", b"return y\n", 1),
        "eng/gone.py": None,
        "eng/made.sh": (b"#!/bin/sh\necho made\n", True),
        "eng/mode.sh": (b"#!/bin/sh\n", True),
        "eng/skip.py": b"skipped\n",
    }
    return before, after


def _show(registry: Registry, *args: str) -> bytes:
    """show's stdout as bytes, from a real process (the CliRunner decodes stdout)."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "patchkit", "show", *args, "--patches", str(registry.path)],
        capture_output=True, check=False, cwd=registry.path.parent,
    )
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout


@pytest.mark.parametrize("seed", range(4))
def test_show_is_gits_diff_minus_the_excluded_files_and_git_applies_it(tmp_path: Path, registry: Registry,
                                                                     seed: int) -> None:
    before, after = _nasty_trees(seed)
    diff = git_diff(tmp_path, before, after)
    registry.add("p", diff, exclude={"eng/skip.py": "ships separately"})
    shown = _show(registry, "p")
    assert shown == _without_files(_drop_index_lines(diff), {"eng/skip.py"})
    repo = _pristine_repo(tmp_path, before, "pristine")
    (tmp_path / "shown.diff").write_bytes(shown)
    checked = git(repo, "apply", "--check", str(tmp_path / "shown.diff"), check=False)
    assert checked.returncode == 0, checked.stderr
    git(repo, "apply", str(tmp_path / "shown.diff"))
    expected = {**before, **after, "eng/skip.py": before["eng/skip.py"]}
    want = {k: (v, False) if isinstance(v, bytes) else v for k, v in expected.items() if v is not None}
    assert read_tree(repo) == want


def test_dropped_hunks_and_placed_paths_show_what_apply_writes(tmp_path: Path, registry: Registry) -> None:
    lines = [b"line %d\n" % i for i in range(60)]
    edited = list(lines)
    for at in (5, 30, 55):
        edited[at] = b"EDIT %d\n" % at
    edited[30] += b"ADDED 1\nADDED 2\n"  # the dropped hunk adds lines: the diff's third header says +55
    diff = git_diff(tmp_path, {"x.py": b"".join(lines)}, {"x.py": b"".join(edited)})
    registry.add("p", diff, exclude={"x.py": 'ignored'}, extra='prefix = "pkg/"')
    manifest = registry.path / "p" / "manifest.toml"
    manifest.write_text(manifest.read_text().replace('"x.py" = "ignored"',
                                                     '"x.py" = { hunks = [2], reason = "not ours" }'))
    shown = _show(registry, "p")
    assert b"diff --git a/pkg/x.py b/pkg/x.py\n" in shown and b"EDIT 30" not in shown
    assert shown.count(b"\n@@ ") + shown.startswith(b"@@ ") == 2
    assert b"@@ -53,7 +55,7 @@" in diff and b"@@ -53,7 +53,7 @@" in shown  # the new start from the kept hunks
    by_git = _pristine_repo(tmp_path, {"pkg/x.py": b"".join(lines)}, "by-git")
    (tmp_path / "shown.diff").write_bytes(shown)
    git(by_git, "apply", str(tmp_path / "shown.diff"))
    by_patchkit = tmp_path / "by-patchkit"
    write_tree(by_patchkit, {"pkg/x.py": b"".join(lines)})
    assert cli("apply", "p", "--root", by_patchkit, "--patches", registry.path).code == 0
    shutil.rmtree(by_git / ".git")
    assert read_tree(by_git) == read_tree(by_patchkit)
    assert b"EDIT 5" in (by_git / "pkg/x.py").read_bytes() and b"EDIT 30" not in (by_git / "pkg/x.py").read_bytes()


def test_a_later_section_that_reads_context_inside_a_dropped_hunk_shows_where_git_finds_it(
        tmp_path: Path, registry: Registry) -> None:
    """A file touched twice: the first section's hunk `-line 0`, ` line 1`, ` line 2`, `-line 3` is excluded, the
    second section inserts between `line 1` and `line 2`. In the filtered file those sit at lines 2-3 (the
    dropped hunk's `line 0` is still above them): the header must say so, for git pins a hunk at line 1 to the
    start of the file."""
    base = [b"line %d\n" % i for i in range(20)]
    middle = [line for i, line in enumerate(base) if i not in (0, 3)]
    middle[middle.index(b"line 15\n")] = b"EDIT 15\n"  # the section's other hunk, kept
    top = list(middle)
    top.insert(1, b"INSERTED\n")
    first = git_diff(tmp_path, {"x.py": b"".join(base)}, {"x.py": b"".join(middle)}, context=1)
    second = git_diff(tmp_path, {"x.py": b"".join(middle)}, {"x.py": b"".join(top)}, context=1)
    assert b"@@ -1,5 +1,3 @@" in first and b"@@ -1,2 +1,3 @@" in second
    registry.add("p", first + second, exclude={"x.py": "ignored"})
    manifest = registry.path / "p" / "manifest.toml"
    manifest.write_text(manifest.read_text().replace('"x.py" = "ignored"',
                                                     '"x.py" = { hunks = [1], reason = "not ours" }'))
    shown = _show(registry, "p")
    assert b"@@ -2,2 +2,3 @@" in shown, shown.decode()
    by_git = _pristine_repo(tmp_path, {"x.py": b"".join(base)}, "by-git")
    (tmp_path / "shown.diff").write_bytes(shown)
    done = git(by_git, "apply", str(tmp_path / "shown.diff"), check=False)
    assert done.returncode == 0, done.stderr
    want = list(base)
    want[15] = b"EDIT 15\n"
    want.insert(2, b"INSERTED\n")
    assert (by_git / "x.py").read_bytes() == b"".join(want)
    by_patchkit = tmp_path / "by-patchkit"
    write_tree(by_patchkit, {"x.py": b"".join(base)})
    assert cli("apply", "p", "--root", by_patchkit, "--patches", registry.path).code == 0
    assert (by_patchkit / "x.py").read_bytes() == b"".join(want)


def test_stat_counts_agree_with_git_apply_numstat(tmp_path: Path, registry: Registry) -> None:
    before, after = _nasty_trees(7)
    diff = git_diff(tmp_path, before, after)
    registry.add("p", diff, exclude={"eng/skip.py": "ships separately"})
    stat = cli("show", "p", "--stat", "--patches", registry.path)
    assert stat.code == 0, stat.err
    (tmp_path / "shown.diff").write_bytes(_show(registry, "p"))
    numstat = git(tmp_path, "apply", "--numstat", str(tmp_path / "shown.diff")).stdout.decode()
    total_added = total_removed = 0
    for row in numstat.splitlines():
        added, removed, _ = row.split("\t")
        total_added, total_removed = total_added + int(added), total_removed + int(removed)
    rows = stat.out.splitlines()
    files = len(numstat.splitlines())
    assert rows[-1] == f" {files} files changed, {total_added} insertions(+), {total_removed} deletions(-)"
    assert len(rows) == files + 1
    assert any(r.startswith(" eng/run.py ") and r.split("|")[1].split()[0] == "8" for r in rows), rows
    assert all("skip.py" not in r for r in rows)


def test_show_json_is_the_schemas_and_carries_the_same_bytes(tmp_path: Path, registry: Registry) -> None:
    before, after = _nasty_trees(1)
    registry.add("p", git_diff(tmp_path, before, after), exclude={"eng/skip.py": "ships separately"})
    res = cli("show", "p", "--json", "--patches", registry.path)
    assert res.code == 0, res.err
    doc = res.json()
    assert errors_of(doc, SCHEMA["$defs"]["show"]) == []
    assert errors_of(doc, SCHEMA) == []  # and the top-level oneOf picks exactly one definition
    assert doc["diff_encoding"] == "utf-8" and doc["diff"].encode() == _show(registry, "p")
    assert doc["excluded"] == [{"path": "eng/skip.py", "reason": "ships separately"}]
    made = next(f for f in doc["files"] if f["path"] == "eng/made.sh")
    assert made == {"path": "eng/made.sh", "old_path": None, "op": "create", "hunks": 1, "insertions": 2,
                    "deletions": 0}
    status = cli("status", "p", "--root", tmp_path, "--patches", registry.path, "--json").json()
    assert doc["hunk_set_sha256"] == status["hunk_set_sha256"]
    stat = cli("show", "p", "--json", "--stat", "--patches", registry.path).json()
    assert "diff" not in stat and errors_of(stat, SCHEMA["$defs"]["show"]) == []


def test_show_json_of_bytes_that_are_not_utf8_is_base64(tmp_path: Path, registry: Registry) -> None:
    registry.add("p", git_diff(tmp_path, {"a.txt": b"caf\xe9\n"}, {"a.txt": b"caf\xe8\n"}))
    doc = cli("show", "p", "--json", "--patches", registry.path).json()
    assert doc["diff_encoding"] == "base64"
    assert base64.b64decode(doc["diff"]) == _show(registry, "p")
    assert b"-caf\xe9\n+caf\xe8\n" in base64.b64decode(doc["diff"])
    assert errors_of(doc, SCHEMA["$defs"]["show"]) == []


def test_show_of_an_unknown_or_pending_patch_is_bad_input(tmp_path: Path, registry: Registry) -> None:
    registry.add("atom-pr1", git_diff(tmp_path, {"a": b"1\n"}, {"a": b"2\n"}))
    typo = cli("show", "atom-pr2", "--patches", registry.path)
    assert typo.code == 2 and typo.out == ""
    assert "did you mean 'atom-pr1'" in typo.err, typo.err
    (registry.path / "atom-pr1" / "change.diff").unlink()
    manifest = registry.path / "atom-pr1" / "manifest.toml"
    manifest.write_text("\n".join(x for x in manifest.read_text().splitlines() if not x.startswith("sha256")))
    pending = cli("show", "atom-pr1", "--patches", registry.path)
    assert pending.code == 2 and "patchkit vendor atom-pr1" in pending.err, pending.err
    as_json = cli("show", "nope", "--json", "--patches", registry.path)
    assert as_json.code == 2 and errors_of(json.loads(as_json.out), SCHEMA["$defs"]["error"]) == []
