"""diffs.py: parsing bytes into frozen records, validation unidiff skips, excludes and the hunk-set digest."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchkit.diff.diffs import parse_diff
from patchkit.diff.filtering import filter_diff, match_exclude
from patchkit.diff.hunks import FileOp
from patchkit.errors import DiffError, ManifestError, UnsafePathError
from patchkit.input.excludes import Exclude
from tests.conftest import git_diff

SIMPLE = b"""diff --git a/x.py b/x.py
index 1111111..2222222 100644
--- a/x.py
+++ b/x.py
@@ -1,3 +1,3 @@
 one
-two
+TWO
 three
"""


def test_lines_are_bytes_with_endings() -> None:
    diff = parse_diff(SIMPLE, 1, "s.diff")
    (f,) = diff.files
    assert (f.old_path, f.new_path, f.op) == ("x.py", "x.py", FileOp.MODIFY)
    (h,) = f.hunks
    assert h.old_lines == (b"one\n", b"two\n", b"three\n")
    assert h.new_lines == (b"one\n", b"TWO\n", b"three\n")
    assert (h.leading, h.trailing, h.diff_line) == (1, 1, 5)


def test_crlf_content_survives(tmp_path: Path) -> None:
    data = git_diff(tmp_path, {"w.txt": b"a\r\nb\r\n"}, {"w.txt": b"a\r\nB\r\n"})
    (h,) = parse_diff(data, 1, "d").files[0].hunks
    assert h.old_lines == (b"a\r\n", b"b\r\n")
    assert h.new_lines == (b"a\r\n", b"B\r\n")


def test_no_newline_marker_strips_only_its_side(tmp_path: Path) -> None:
    data = git_diff(tmp_path, {"n.txt": b"a\nb"}, {"n.txt": b"a\nb\nc\n"})
    (h,) = parse_diff(data, 1, "d").files[0].hunks
    assert h.old_lines == (b"a\n", b"b")
    assert h.new_lines == (b"a\n", b"b\n", b"c\n")


def test_invalid_utf8_content_is_kept_as_bytes(tmp_path: Path) -> None:
    data = git_diff(tmp_path, {"l.txt": b"caf\xe9\n"}, {"l.txt": b"caf\xe9!\n"})
    (h,) = parse_diff(data, 1, "d").files[0].hunks
    assert h.old_lines == (b"caf\xe9\n",)


def test_whole_file_operations(tmp_path: Path) -> None:
    before = {"del.py": b"gone\n", "old.py": b"x\n" * 10, "run.sh": b"#!/bin/sh\n"}
    after = {"del.py": None, "old.py": None, "new.py": b"x\n" * 10, "run.sh": (b"#!/bin/sh\n", True),
             "made.py": b"new\n"}
    files = {f.path: f for f in parse_diff(git_diff(tmp_path, before, after), 1, "d").files}
    assert files["del.py"].op is FileOp.DELETE and files["del.py"].new_path is None
    assert files["made.py"].op is FileOp.CREATE and files["made.py"].new_mode == 0o100644
    assert files["new.py"].op is FileOp.RENAME and files["new.py"].old_path == "old.py"
    assert files["run.sh"].mode_change == (0o100644, 0o100755)
    assert files["run.sh"].hunks == ()


def test_quoted_and_spaced_paths(tmp_path: Path) -> None:
    before = {"a dir/naïve file.py": b"1\n", "plain b/x y.py": b"1\n"}
    after = {"a dir/naïve file.py": b"2\n", "plain b/x y.py": b"2\n"}
    paths = {f.path for f in parse_diff(git_diff(tmp_path, before, after), 1, "d").files}
    assert paths == {"a dir/naïve file.py", "plain b/x y.py"}


def test_strip_zero_and_two() -> None:
    assert parse_diff(SIMPLE.replace(b"a/x", b"a/src/x").replace(b"b/x", b"b/src/x"), 2, "d").files[0].path == "x.py"
    plain = b"--- x.py\n+++ x.py\n@@ -1 +1 @@\n-a\n+b\n"
    assert parse_diff(plain, 0, "d").files[0].path == "x.py"
    with pytest.raises(DiffError, match="too few components"):
        parse_diff(plain, 1, "d")


@pytest.mark.parametrize(
    ("mutation", "message", "line"),
    [
        (lambda d: d.replace(b"@@ -1,3 +1,3 @@", b"@@ -1,2 +1,2 @@"), "header counts are already used up", 9),
        (lambda d: d.replace(b"@@ -1,3 +1,3 @@", b"@@ -1,4 +1,4 @@"), "ends early", None),
        (lambda d: d.replace(b" three\n", b""), "ends early", None),
        (lambda d: d.replace(b"@@ -1,3 +1,3 @@", b"@@ -1,3 +1,2 @@"), "more lines than its header", 9),
        (lambda d: d.replace(b"--- a/x.py", b"--- a/y.py"), "conflicting headers", 3),
        (lambda d: d.split(b"@@", 1)[1].join([b"@@", b""]).join([b"", b""]), "before any file header", 1),
        (lambda d: d.replace(b"@@ -1,3 +1,3 @@", b"@@ -1,x +1,3 @@"), "malformed hunk header", 5),
        (lambda d: d.replace(b"\n", b"\r\n"), "CRLF", 1),
        (lambda d: d + b"+\x00\n", "NUL", 10),
        (lambda d: b"", "empty", None),
        (lambda d: b"hello world\nthis is not a diff\n", "no file changes", None),
    ],
)
def test_malformed_diffs_name_the_line(mutation, message: str, line: int | None) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(DiffError, match=message) as info:
        parse_diff(mutation(SIMPLE), 1, "s.diff")
    if line is not None:
        assert info.value.where == f"s.diff:{line}"


@pytest.mark.parametrize(
    "path", [b"a/../etc/passwd", b"a/x/../../y", b'"a/\\056\\056/x"', b"a/.git/config", b"a/.patchkit/lock"]
)
def test_unsafe_paths_are_refused(path: bytes) -> None:
    data = SIMPLE.replace(b"a/x.py", path).replace(b"b/x.py", b"b" + path.lstrip(b'"')[1:].rstrip(b'"'))
    data = data.replace(b"diff --git", b"diff --git-not")  # keep it a plain ---/+++ diff
    with pytest.raises(UnsafePathError):
        parse_diff(data, 1, "d")


def test_copies_are_refused_with_a_hint() -> None:
    data = b"diff --git a/x b/y\nsimilarity index 100%\ncopy from x\ncopy to y\n"
    with pytest.raises(DiffError, match="--no-renames"):
        parse_diff(data, 1, "d")


def test_filter_drops_excluded_files_and_refuses_dead_excludes(tmp_path: Path) -> None:
    diff = parse_diff(git_diff(tmp_path, {"a/x.py": b"1\n", "b/y.py": b"1\n"},
                               {"a/x.py": b"2\n", "b/y.py": b"2\n"}), 1, "d")
    kept = filter_diff(diff, [Exclude("b/y.py", "why")])
    assert [f.path for f in kept.files] == ["a/x.py"]
    assert kept.excluded == ("b/y.py",)
    with pytest.raises(ManifestError, match="matches no file"):
        filter_diff(diff, [Exclude("b/typo.py", "why")])
    with pytest.raises(ManifestError, match="empty"):
        filter_diff(diff, [Exclude("a", "why"), Exclude("b/**", "why")])


def test_binary_in_filtered_set_is_refused_but_excludable(tmp_path: Path) -> None:
    diff = parse_diff(git_diff(tmp_path, {"i.bin": b"\0\1\2", "t.py": b"1\n"}, {"i.bin": b"\2\1\0", "t.py": b"2\n"}),
                      1, "d")
    with pytest.raises(DiffError, match=r"i.bin: binary patch") as info:
        filter_diff(diff, [])
    assert info.value.hint is not None and "exclude" in info.value.hint
    assert [f.path for f in filter_diff(diff, [Exclude("*.bin", "asset")]).files] == ["t.py"]


@pytest.mark.parametrize(
    ("pattern", "path", "hit"),
    [
        ("atom/x.py", "atom/x.py", True),
        ("atom/x.py", "atom/x.pyc", False),
        ("atom", "atom/deep/x.py", True),
        ("atom/", "atom/x.py", True),
        ("atom/*.py", "atom/x.py", True),
        ("atom/*.py", "atom/deep/x.py", False),
        ("atom/**/x.py", "atom/x.py", True),
        ("atom/**/x.py", "atom/a/b/x.py", True),
        ("**/backends.py", "atom/model_ops/attentions/backends.py", True),
        ("atom/?.py", "atom/xy.py", False),
        ("atom/[xy].py", "atom/y.py", True),
    ],
)
def test_exclude_patterns(pattern: str, path: str, hit: bool) -> None:
    assert match_exclude(pattern, path) is hit


def test_digest_ignores_header_noise_but_not_content() -> None:
    base = filter_diff(parse_diff(SIMPLE, 1, "d"), []).digest
    noisy = SIMPLE.replace(b"index 1111111..2222222", b"index abcdef0..0fedcba").replace(
        b"@@ -1,3 +1,3 @@", b"@@ -1,3 +1,3 @@ def section():"
    )
    assert filter_diff(parse_diff(noisy, 1, "d"), []).digest == base
    changed = SIMPLE.replace(b"+TWO", b"+Two")
    assert filter_diff(parse_diff(changed, 1, "d"), []).digest != base


def test_format_patch_series_with_signatures(tmp_path: Path) -> None:
    one = SIMPLE
    two = SIMPLE.replace(b"-two\n+TWO", b"-TWO\n+2").replace(b" one", b" one")
    mail = b"From abc Mon Sep 17 00:00:00 2001\nSubject: [PATCH 1/2] x\n\n---\n" + one + b"-- \n2.39.5\n\n"
    mail += b"From def Mon Sep 17 00:00:00 2001\nSubject: [PATCH 2/2] y\n\n---\n" + two + b"-- \n2.39.5\n"
    diff = parse_diff(mail, 1, "series.patch")
    assert [f.path for f in diff.files] == ["x.py", "x.py"]


@pytest.mark.parametrize("blank", [b" \n", b"\n"])  # a blank context line with its space, or without (git apply
def test_a_hunks_gaps_are_its_context_runs_between_changes(blank: bytes) -> None:  # reads both)
    """Hunk.gaps: (new offset, old offset, length) of each context run between the first and the last change,
    the same whether the hunk takes the parser's plain road or the one for blank and marker lines."""
    data = (b"diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,6 +1,6 @@\n-a\n b\n c\n-d\n+D\n" + blank
            + b"+e\n f\n@@ -9,2 +9,2 @@\n x\n-y\n+Y\n")
    first, second = parse_diff(data, 1, "d").files[0].hunks
    assert first.gaps == ((0, 1, 2), (3, 4, 1)) and first.leading == 0 and first.trailing == 1
    assert second.gaps == ()
