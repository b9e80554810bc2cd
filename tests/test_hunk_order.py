"""A file section's hunks must be in the order of their lines, each past the end of the one before (diffs._check_order).

git writes them so; `git apply` also takes a diff whose hunks were swapped by hand (it applies them in diff order,
each searched around its own line), but patchkit reads a file hunk after hunk down the file, and such a diff was
judged by a wrong order: a pristine tree read `unapplied` or, when the hunks change the line count, `conflict`
("the tree has drifted"). Every command now refuses it as a diff error (exit 2), before reading the tree. Each
diff here is made by real git and then edited as a hand edit would: hunks swapped, or a second diff's hunk
spliced in. (Hunks in git's order applying as `git apply` applies them: test_state.py's class 5 and the
differential test, tests/test_differential.py.)
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import Registry, cli, git, git_diff, read_tree, write_tree

NUMBERS = b"".join(b"%d\n" % i for i in range(1, 101))  # seq 1 100
ORDER = "patchkit needs the hunks of a file section in the order of their lines, each past the end of the one before"


def _sections(diff: bytes) -> tuple[bytes, list[bytes]]:
    """(the file header, each hunk with its @@ line) of a one-file diff."""
    head, *hunks = re.split(rb"(?m)^(?=@@ )", diff)
    return head, hunks


def _swapped(tmp_path: Path, after: bytes) -> bytes:
    """git's diff of NUMBERS -> `after` (two hunks), with its two hunks swapped."""
    diff = git_diff(tmp_path, {"f.txt": NUMBERS}, {"f.txt": after})
    head, hunks = _sections(diff)
    assert len(hunks) == 2
    return head + hunks[1] + hunks[0]


def _git_apply_check(tmp_path: Path, diff: bytes, *args: str) -> bool:
    """Does real `git apply --check` take the diff on a pristine tree (the oracle: the diff is one git applies)?"""
    repo = tmp_path / f"git-{len(list(tmp_path.glob('git-*')))}"
    repo.mkdir()
    write_tree(repo, {"f.txt": NUMBERS})
    (tmp_path / "oracle.diff").write_bytes(diff)
    return git(repo, "apply", "--check", *args, str(tmp_path / "oracle.diff"), check=False).returncode == 0


# The two shapes the mutation triage found: the hunk of line 77 before the hunk of line 7, neither changing the
# line count (read `unapplied`, applied), and the same with lines added (read `conflict`, exit 5).
SHAPES = {
    "same count": (NUMBERS.replace(b"\n10\n", b"\nten\n").replace(b"\n80\n", b"\neighty\n"),
                   "hunk 2 @@ -7,7 +7,7 @@ comes before hunk 1 @@ -77,7 +77,7 @@", 14),
    "lines added": (NUMBERS.replace(b"\n10\n", b"\nten\nten-b\n").replace(b"\n80\n", b"\neighty\neighty-b\neighty-c\n"),
                    "hunk 2 @@ -7,7 +7,8 @@ comes before hunk 1 @@ -77,7 +78,9 @@", 16),
}


def _refused(result_err: str, message: str, where: str) -> None:
    assert f"{where}: f.txt: {message} (old side: lines 7-13, hunk 1 lines 77-83); {ORDER}" in result_err
    hint = "hint: put the file's hunks in the order of their lines, or regenerate the diff with `git diff`"
    assert hint in result_err


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_swapped_hunks_are_refused_by_every_command_and_nothing_is_written(
    tmp_path: Path, registry: Registry, engine: Path, shape: str
) -> None:
    after, message, line = SHAPES[shape]
    diff = _swapped(tmp_path, after)
    assert _git_apply_check(tmp_path, diff)  # git takes it: the refusal is patchkit's rule, not a broken diff
    folder = registry.add("p", diff)
    write_tree(engine, {"f.txt": NUMBERS})
    where = f"{folder / 'change.diff'}:{line}"
    for action in (["status"], ["status", "--json"], ["apply"], ["apply", "--complete"], ["revert"],
                   ["revert", "--force"]):
        result = cli(*action[:1], "p", "--root", engine, "--patches", registry.path, *action[1:])
        assert result.code == 2, (action, result.out, result.err)
        _refused(result.err, message, where)
        assert read_tree(engine) == {"f.txt": (NUMBERS, False)}
        assert not (engine / ".patchkit").exists(), action
    compiled = cli("compile", "--patches", registry.path)
    assert compiled.code == 2, compiled.out + compiled.err
    _refused(compiled.err, message, where)
    assert sorted(p.name for p in folder.iterdir()) == ["change.diff", "manifest.toml"]  # no .compiled written
    linted = cli("lint", "--patches", registry.path, "--waivers", tmp_path / "no-waivers", "--no-scan")
    assert linted.code == 1, linted.out + linted.err
    assert f"{where}: PK104 error: f.txt: {message} (old side: lines 7-13, hunk 1 lines 77-83); {ORDER}" in linted.out


def _spliced(tmp_path: Path, first: bytes, second: bytes) -> bytes:
    """One section with the hunk of git's diff NUMBERS -> `first`, then the hunk of git's diff NUMBERS -> `second`."""
    head, (one,) = _sections(git_diff(tmp_path, {"f.txt": NUMBERS}, {"f.txt": first}))
    _, (two,) = _sections(git_diff(tmp_path, {"f.txt": NUMBERS}, {"f.txt": second}))
    return head + one + two


def test_overlapping_hunks_are_refused(tmp_path: Path, registry: Registry, engine: Path) -> None:
    # Line 10 changed (hunk @@ -7,7 @@: lines 7-13), then line 16 changed (@@ -13,7 @@: lines 13-19): the two
    # share line 13, on both sides.
    diff = _spliced(tmp_path, NUMBERS.replace(b"\n10\n", b"\nten\n"), NUMBERS.replace(b"\n16\n", b"\nsixteen\n"))
    folder = registry.add("p", diff)
    write_tree(engine, {"f.txt": NUMBERS})
    for action in ("status", "apply", "revert"):
        result = cli(action, "p", "--root", engine, "--patches", registry.path)
        assert result.code == 2, (action, result.out, result.err)
        assert (f"{folder / 'change.diff'}:14: f.txt: hunk 2 @@ -13,7 +13,7 @@ overlaps hunk 1 @@ -7,7 +7,7 @@ "
                f"(old side: lines 13-19, hunk 1 lines 7-13); {ORDER}") in result.err
        assert "hint: regenerate the diff with `git diff` (a file's hunks never overlap" in result.err
        assert read_tree(engine) == {"f.txt": (NUMBERS, False)}


def test_hunks_in_line_order_on_the_old_side_only_are_refused(tmp_path: Path, registry: Registry,
                                                              engine: Path) -> None:
    # Hunk 2's new-side line edited onto hunk 1's new lines (a revert reads the new side): @@ -30,7 +13,7 @@
    # where git wrote +32 (hunk 1 adds two lines, its new side is lines 7-15).
    after = NUMBERS.replace(b"\n10\n", b"\nten\nten-b\nten-c\n").replace(b"\n33\n", b"\nthirty-three\n")
    diff = git_diff(tmp_path, {"f.txt": NUMBERS}, {"f.txt": after})
    assert b"@@ -30,7 +32,7 @@" in diff
    registry.add("p", diff.replace(b"@@ -30,7 +32,7 @@", b"@@ -30,7 +13,7 @@"))
    write_tree(engine, {"f.txt": NUMBERS})
    result = cli("status", "p", "--root", engine, "--patches", registry.path)
    assert result.code == 2, result.out + result.err
    assert ("f.txt: hunk 2 @@ -30,7 +13,7 @@ overlaps hunk 1 @@ -7,7 +7,9 @@ (new side: lines 13-19, hunk 1 "
            f"lines 7-15); {ORDER}") in result.err


def test_a_created_file_in_two_hunks_is_refused(tmp_path: Path, registry: Registry, engine: Path) -> None:
    # Both hunks insert before line 1 of the file that is not there: no order to read them in. git refuses it too.
    head, (hunk,) = _sections(git_diff(tmp_path, {}, {"f.txt": b"a\nb\n"}))
    assert hunk.startswith(b"@@ -0,0 +1,2 @@")
    registry.add("p", head + hunk + b"@@ -0,0 +3 @@\n+c\n")
    result = cli("status", "p", "--root", engine, "--patches", registry.path)
    assert result.code == 2, result.out + result.err
    assert ("f.txt: hunk 2 @@ -0,0 +3,1 @@ overlaps hunk 1 @@ -0,0 +1,2 @@ (old side: before line 1, hunk 1 "
            f"before line 1); {ORDER}") in result.err
    assert read_tree(engine) == {}


def test_insertions_before_and_after_line_1_are_in_line_order(tmp_path: Path, registry: Registry,
                                                              engine: Path) -> None:
    # `git diff -U0` of a line added above line 1 and one below it: @@ -0,0 @@ then @@ -1,0 @@, both inserting
    # (git writes -N,0 with N the line before the insertion): one after the other, so the order check lets the
    # diff through to the judgement (which reads it as a -U0 diff: pinned to the file's ends).
    before = {"f.txt": b"a\n"}
    diff = git_diff(tmp_path, before, {"f.txt": b"x\na\ny\n"}, context=0)
    _, hunks = _sections(diff)
    assert [h.split(b" @@")[0] for h in hunks] == [b"@@ -0,0 +1", b"@@ -1,0 +3"]
    registry.add("p", diff)
    write_tree(engine, before)
    result = cli("status", "p", "--root", engine, "--patches", registry.path, "-v")
    assert result.code != 2, result.out + result.err
    assert "order of their lines" not in result.out + result.err
    assert "hunk 1 @@ -0,0 +1,1 @@" in result.out and "hunk 2 @@ -1,0 +3,1 @@" in result.out
    # and the compiled form holds it: the compile's own load check (the same rule) takes it back
    compiled = cli("compile", "--patches", registry.path)
    assert compiled.code == 0 and "parsed at every start" not in compiled.err, compiled.out + compiled.err
    assert (registry.path / "p" / "p.compiled").is_file()
    again = cli("status", "p", "--root", engine, "--patches", registry.path, "-v")
    assert (again.code, again.out) == (result.code, result.out)
