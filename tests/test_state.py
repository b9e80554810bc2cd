"""state.py: combining hunk states, undecidable hunks, and the plan's refusal to write them."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchkit.outcome import HunkState, PatchState, combine
from tests.conftest import CliResult, Registry, cli, git, git_diff, read_tree, write_tree

A, U, C, X = HunkState.APPLIED, HunkState.UNAPPLIED, HunkState.CONFLICT, HunkState.AMBIGUOUS


@pytest.mark.parametrize(
    ("units", "expected"),
    [
        ([A, A], PatchState.APPLIED),
        ([U, U], PatchState.UNAPPLIED),
        ([A, U], PatchState.PARTIAL),
        ([A, U, C], PatchState.CONFLICT),
        ([A, X], PatchState.AMBIGUOUS),
        ([X, C], PatchState.CONFLICT),
        ([PatchState.PARTIAL, PatchState.APPLIED], PatchState.PARTIAL),
        ([PatchState.UNAPPLIED, PatchState.APPLIED], PatchState.PARTIAL),
    ],
)
def test_combine(units: list[HunkState | PatchState], expected: PatchState) -> None:
    assert combine(units) is expected


def _block(prefix: str, lines: range) -> bytes:
    return b"".join(f"{prefix}{i}\n".encode() for i in lines)


def test_undecidable_hunk_is_named_and_never_written(tmp_path: Path, registry: Registry, engine: Path) -> None:
    before = _block("L", range(30))
    after = before.replace(b"L15\n", b"changed\n")
    registry.add("p", git_diff(tmp_path, {"f.py": before}, {"f.py": after}))
    # The hunk is expected at line 13 (L12..L18). The post-image sits ten lines above that, the pre-image ten
    # lines below: equally near, both readings hold, and nothing else in the file tells them apart.
    pre = _block("L", range(12, 19))
    post = pre.replace(b"L15\n", b"changed\n")
    tree = _block("junk", range(2)) + post + _block("gap", range(13)) + pre + _block("end", range(3))
    write_tree(engine, {"f.py": tree})

    status = cli("status", "p", "--root", engine, "--patches", registry.path, "--json")
    assert status.code == 5
    doc = status.json()
    assert doc["state"] == "ambiguous"
    hunk = doc["files"][0]["hunks"][0]
    assert hunk["state"] == "ambiguous" and "line 3" in hunk["detail"] and "line 23" in hunk["detail"]
    assert sorted(hunk["candidate_lines"]) == [3, 23]
    for action in ("apply", "revert"):
        refused = cli(action, "p", "--root", engine, "--patches", registry.path)
        assert refused.code == 1
        assert "ambiguous" in refused.out
    for action in ("apply", "revert"):
        assert cli(action, "p", "--root", engine, "--patches", registry.path, "--complete").code == 1
    assert read_tree(engine) == {"f.py": (tree, False)}


def test_the_rest_of_the_file_settles_a_look_alike(tmp_path: Path, registry: Registry, engine: Path) -> None:
    # Deleting the first of two equal line pairs: the post-image is a prefix of the pre-image, both at line 1.
    # Only the reading "unapplied" puts the second hunk where the diff says it is.
    before = b"\nb\na\nb\na\nb\nb\na\na\na\na"
    after = b"\nb\na\nb\nb\na\na\na\na\na"
    registry.add("p", git_diff(tmp_path, {"f": before}, {"f": after}))
    write_tree(engine, {"f": before})
    assert cli("status", "p", "--root", engine, "--patches", registry.path).code == 3
    assert cli("apply", "p", "--root", engine, "--patches", registry.path).code == 0
    assert (engine / "f").read_bytes() == after
    assert cli("status", "p", "--root", engine, "--patches", registry.path).code == 0


# ------------------------------------------------------------------------------------------------------------
# Issue 16: never a wrong verdict. One small case per class of the issue, each checked against real git.


def git_applied(tmp: Path, files: dict[str, bytes], diff: bytes, *args: str) -> dict[str, bytes] | None:
    """What real `git apply [args]` makes of a tree (None: git refuses)."""
    root = tmp / f"git-apply-{len(list(tmp.glob('git-apply-*')))}"
    root.mkdir()
    write_tree(root, files)
    (tmp / "oracle.diff").write_bytes(diff)
    if git(root, "apply", *args, str(tmp / "oracle.diff"), check=False).returncode != 0:
        return None
    return {p: data for p, (data, _) in read_tree(root).items()}


def contents(root: Path) -> dict[str, bytes]:
    return {p: data for p, (data, _) in read_tree(root).items()}


def run(registry: Registry, engine: Path, *args: str) -> CliResult:
    return cli(args[0], "p", "--root", engine, "--patches", registry.path, *args[1:])


LINES = [b"value_%d = compute(%d)\n" % (i, i) for i in range(30)]


def test_class1_a_copy_of_the_other_image_farther_away_is_named_never_decides(
    tmp_path: Path, registry: Registry, engine: Path
) -> None:
    # The change is two lines from the end: one line of trailing context, which once pinned the hunk to the
    # end of the file. The tree is shifted by three lines and ends with a copy of the post-image. The same
    # bytes are the patched file with a copy of the pre-image added above its post-image (issue #23): the
    # nearer image decides nothing, the hunk is ambiguous naming both places, and nothing is written.
    before = b"".join(LINES)
    after = before.replace(LINES[28], b"changed = 1\n")
    diff = git_diff(tmp_path, {"f.py": before}, {"f.py": after})
    registry.add("p", diff)
    post = b"".join(LINES[25:28]) + b"changed = 1\n" + LINES[29]
    pre = b"".join(LINES[25:30])
    for tree in (b"}\n\npass\n" + before + post, b"}\n\npass\n" + after + pre):
        write_tree(engine, {"f.py": tree})
        status = run(registry, engine, "status", "--json")
        assert status.code == 5, status.out
        hunk = status.json()["files"][0]["hunks"][0]
        assert hunk["state"] == "ambiguous" and sorted(hunk["candidate_lines"]) == [29, 34], hunk
        for action in (("apply",), ("revert", "--force"), ("apply", "--complete")):
            assert run(registry, engine, *action).code == 1
            assert contents(engine) == {"f.py": tree}


def _repeated_block_case(tmp_path: Path) -> tuple[bytes, bytes, bytes, bytes]:
    """(B, T, diff, subset): a -U1 diff of three hunks; the middle one inserts a copy of its own trailing
    context (`\n x = 1` before `\n x = 1`), so wherever it is applied its pre- and post-image both match at the
    same line. `subset` is B with only that hunk applied, by git. The hunk after it tells the readings apart:
    only "applied" puts it where the diff says."""
    before = b"".join(LINES[:10]) + b"\nx = 1\n" + b"".join(LINES[10:20])
    after = (
        before.replace(LINES[3], b"changed = 3\n").replace(b"\nx = 1\n", b"\nx = 1\n\nx = 1\n")
        .replace(LINES[15], b"changed = 15\n")
    )
    diff = git_diff(tmp_path, {"f.py": before}, {"f.py": after}, context=1)
    parts = diff.split(b"\n@@ ")
    assert len(parts) == 4, diff  # header + three hunks
    subset = git_applied(tmp_path, {"f.py": before}, parts[0] + b"\n@@ " + parts[2] + b"\n")
    assert subset is not None
    return before, after, diff, subset["f.py"]


def test_class2_a_proper_subset_applied_by_git_reads_partial(tmp_path: Path, registry: Registry, engine: Path) -> None:
    _, _, diff, subset = _repeated_block_case(tmp_path)
    registry.add("p", diff)
    write_tree(engine, {"f.py": subset})
    status = run(registry, engine, "status", "--json")
    assert status.code == 4, status.out
    assert [h["state"] for h in status.json()["files"][0]["hunks"]] == ["unapplied", "applied", "unapplied"]
    refused = run(registry, engine, "apply", "--json")
    assert refused.code == 1 and refused.json()["result"] == "refused"
    assert contents(engine) == {"f.py": subset}


def test_class3_complete_gives_exactly_the_target_or_the_original(
    tmp_path: Path, registry: Registry, engine: Path
) -> None:
    before, after, diff, subset = _repeated_block_case(tmp_path)
    registry.add("p", diff)
    write_tree(engine, {"f.py": subset})
    assert run(registry, engine, "apply", "--complete").code == 0
    assert contents(engine) == {"f.py": after} == git_applied(tmp_path, {"f.py": before}, diff)
    write_tree(engine, {"f.py": subset})
    assert run(registry, engine, "revert", "--complete", "--force").code == 0
    assert contents(engine) == {"f.py": before}


def _two_way_after_apply(tmp_path: Path) -> tuple[bytes, bytes, bytes]:
    """A -U1 diff whose second hunk inserts a copy of its own trailing context: once applied, that hunk's
    pre- and post-image both match at the same line, and git applies it both ways there."""
    before = b"".join(LINES[:10]) + b"\nx = 1\n" + b"".join(LINES[10:20])
    after = before.replace(LINES[3], b"changed = 3\n").replace(b"\nx = 1\n", b"\nx = 1\n\nx = 1\n")
    return before, after, git_diff(tmp_path, {"f.py": before}, {"f.py": after}, context=1)


def test_class3_complete_refuses_naming_the_hunk_when_its_result_would_not_read_applied(
    tmp_path: Path, registry: Registry, engine: Path
) -> None:
    before, after, diff = _two_way_after_apply(tmp_path)
    registry.add("p", diff)
    # hunk 1 applied, hunk 2 not, and a line added at the end: no blob id of the diff names the file, and the
    # completed file would read both ways at hunk 2
    half = before.replace(LINES[3], b"changed = 3\n") + b"# local\n"
    write_tree(engine, {"f.py": half})
    parts = diff.split(b"\n@@ ")
    alone = parts[0] + b"\n@@ " + parts[2]  # hunk 2 by itself: on the target, git applies it forward and in reverse
    assert git_applied(tmp_path, {"f.py": after}, alone) is not None
    assert git_applied(tmp_path, {"f.py": after}, alone, "-R") is not None
    for action in ("apply", "revert"):
        refused = run(registry, engine, action, "--complete", "--force" if action == "revert" else "--json", "--json")
        assert refused.code == 1, refused.out
        assert "hunk 2" in refused.json()["reason"], refused.out
    assert contents(engine) == {"f.py": half}


def test_class3_the_diffs_blob_ids_settle_a_block_that_repeats_its_own_context(
    tmp_path: Path, registry: Registry, engine: Path
) -> None:
    # Issue #23, 2a: once applied, hunk 2's images both match at one line. On the files the diff names by
    # their blob ids (its `index` line) that does not matter: the pristine file reads unapplied and is
    # applied exactly as git applies it, the result reads applied, revert gives the bytes back; the half
    # patched file is completed to exactly the target.
    before, after, diff = _two_way_after_apply(tmp_path)
    registry.add("p", diff)
    write_tree(engine, {"f.py": before})
    assert run(registry, engine, "status").code == 3
    assert run(registry, engine, "apply").code == 0
    assert contents(engine) == {"f.py": after} == git_applied(tmp_path, {"f.py": before}, diff)
    assert run(registry, engine, "status").code == 0
    assert run(registry, engine, "revert", "--force").code == 0
    assert contents(engine) == {"f.py": before}
    write_tree(engine, {"f.py": before.replace(LINES[3], b"changed = 3\n")})
    assert run(registry, engine, "status").code == 4
    assert run(registry, engine, "apply", "--complete").code == 0
    assert contents(engine) == {"f.py": after}


def test_class4_a_diff_git_applies_gets_a_state_and_json_never_a_maintainers_message(
    tmp_path: Path, registry: Registry, engine: Path
) -> None:
    before, _, diff = _two_way_after_apply(tmp_path)
    registry.add("p", diff)
    tree = before + b"# local\n"  # drifted: no blob id of the diff names it
    write_tree(engine, {"f.py": tree})
    status = run(registry, engine, "status", "--json")
    assert status.code == 5 and status.json()["state"] == "ambiguous"
    hunk = status.json()["files"][0]["hunks"][1]
    assert hunk["state"] == "ambiguous" and "round trip" in hunk["detail"]
    applied = run(registry, engine, "apply", "--json")
    assert applied.code == 1
    doc = applied.json()
    assert doc["result"] == "refused" and "hunk 2" in doc["reason"]
    assert "maintainers" not in applied.out + applied.err
    assert contents(engine) == {"f.py": tree}


def test_class5_offsets_with_repeated_lines_and_lines_after_the_last_hunk(
    tmp_path: Path, registry: Registry, engine: Path
) -> None:
    # Two hunks; the last one ends two lines before the end of the file (short trailing context). The tree
    # has lines inserted above both hunks, repeated lines near them, and lines appended after the end.
    body = [b"}\n", b"\n", b"pass\n"] * 3 + LINES[:12] + [b"}\n", b"\n"] + LINES[12:20]
    before = b"".join(body)
    after = before.replace(LINES[4], b"changed_4\n").replace(LINES[18], b"changed_18\n")
    diff = git_diff(tmp_path, {"f.py": before}, {"f.py": after})
    registry.add("p", diff)
    tree = b"}\n\npass\n}\n" + before + b"}\n\n"
    write_tree(engine, {"f.py": tree})
    expected = git_applied(tmp_path, {"f.py": tree}, diff)
    assert expected is not None
    assert run(registry, engine, "status").code == 3
    assert run(registry, engine, "apply").code == 0
    assert contents(engine) == expected
    assert run(registry, engine, "status").code == 0
    assert run(registry, engine, "revert", "--force").code == 0
    assert contents(engine) == {"f.py": tree}


def test_class6_a_single_u1_hunk_near_the_start_reads_unapplied_on_its_own_base(
    tmp_path: Path, registry: Registry, engine: Path
) -> None:
    before = b"".join(b"line %d\n" % i for i in range(1, 41))
    after = before.replace(b"line 2\n", b"line two\n")
    diff = git_diff(tmp_path, {"f.py": before}, {"f.py": after}, context=1)
    assert b"@@ -1,3 +1,3 @@" in diff
    registry.add("p", diff)
    write_tree(engine, {"f.py": before})
    assert run(registry, engine, "status").code == 3
    assert run(registry, engine, "apply").code == 0
    assert contents(engine) == {"f.py": after} == git_applied(tmp_path, {"f.py": before}, diff)
    assert run(registry, engine, "status").code == 0


def test_u0_diff_is_refused_at_load(tmp_path: Path, registry: Registry, engine: Path) -> None:
    before = b"".join(LINES)
    diff = git_diff(tmp_path, {"f.py": before}, {"f.py": before.replace(LINES[10], b"changed\n")}, context=0)
    registry.add("p", diff)
    write_tree(engine, {"f.py": before})
    for action in ("status", "apply"):
        res = run(registry, engine, action)
        assert res.code == 2
        assert "cannot be located safely" in res.err and "without -U0" in res.err and "hunk 1" in res.err
    assert contents(engine) == {"f.py": before}


def test_where_git_would_match_a_last_line_without_newline_elsewhere_the_hunk_is_ambiguous(
    tmp_path: Path, registry: Registry, engine: Path
) -> None:
    # The file ends without a newline, inside the hunk's trailing context. git matches that last line as a
    # prefix anywhere else (a copy of the block that does end in a newline), so it would patch the copy.
    # patchkit matches only exactly: it must not write where git would write elsewhere.
    before = b"".join(LINES[:19]) + b"value_19 = compute(19)"
    after = before.replace(LINES[17], b"changed = 17\n")
    diff = git_diff(tmp_path, {"f.py": before}, {"f.py": after})
    registry.add("p", diff)
    copy = b"".join(LINES[14:20])  # the pre-image (value_14 .. value_19), with a newline at its end
    tree = b"".join(LINES[:10]) + copy + b"".join(LINES[10:19]) + b"value_19 = compute(19)"
    theirs = git_applied(tmp_path, {"f.py": tree}, diff)
    assert theirs is not None and theirs["f.py"].startswith(b"".join(LINES[:10] + LINES[14:17]) + b"changed = 17\n")
    write_tree(engine, {"f.py": tree})
    status = run(registry, engine, "status", "--json")
    assert status.code == 5, status.out
    hunk = status.json()["files"][0]["hunks"][0]
    assert hunk["state"] == "ambiguous" and "git apply" in hunk["detail"]
    assert run(registry, engine, "apply").code == 1
    assert contents(engine) == {"f.py": tree}


def test_a_hunk_without_leading_context_is_refused_pinned_or_not(
    tmp_path: Path, registry: Registry, engine: Path
) -> None:
    # Issue #37, item 5: `@@ -5,2 +5,2 @@` whose first line is a change has nothing above it to say where it
    # belongs (only -U0 or a hand edit makes it past line 1). One rule, at load, whether the manifest pins the
    # diff's sha256 or not: exit 2 naming the file and hunk, with a hint that runs, and nothing written.
    before = b"".join(LINES[:12])
    diff = (b"diff --git a/f.py b/f.py\n--- a/f.py\n+++ b/f.py\n@@ -5,2 +5,2 @@\n-" + LINES[4] + b"+changed = 4\n "
            + LINES[5])
    folder = registry.add("p", diff)
    manifest = folder / "manifest.toml"
    pinned = manifest.read_text()
    unpinned = "\n".join(line for line in pinned.splitlines() if not line.startswith("sha256 = ")) + "\n"
    write_tree(engine, {"f.py": before})
    oracle = tmp_path / "oracle"
    oracle.mkdir()
    write_tree(oracle, {"f.py": before})
    (tmp_path / "u.diff").write_bytes(diff)
    # git itself would place it (no pin: it has trailing context), as it places any -U0 hunk with --unidiff-zero
    assert git(oracle, "apply", "--check", str(tmp_path / "u.diff"), check=False).returncode == 0
    for text in (unpinned, pinned):
        manifest.write_text(text)
        for action in ("status", "apply", "revert"):
            res = run(registry, engine, action)
            assert res.code == 2, (action, res.out, res.err)
            assert "f.py: hunk 1 @@ -5,2 +5,2 @@ has no context lines" in res.err, res.err
            assert f"{folder / 'change.diff'}:4" in res.err, res.err
            assert "without -U0" in res.err
            assert contents(engine) == {"f.py": before}
    # The hint runs as printed: the diff regenerated with git's default context loads and applies.
    base = {"f.py": before}
    fixed = git_diff(tmp_path, base, {"f.py": before.replace(LINES[4], b"changed = 4\n")})
    registry.add("p", fixed)
    assert run(registry, engine, "apply").code == 0
    assert contents(engine) == git_applied(tmp_path, base, fixed)


def git_checks(tmp: Path, files: dict[str, tuple[bytes, bool]], diff: bytes) -> tuple[int, int, str]:
    """(`git apply --check`, `git apply -R --check` exit codes, their stderr) on a tree of (bytes, exec)."""
    root = tmp / f"git-check-{len(list(tmp.glob('git-check-*')))}"
    root.mkdir()
    write_tree(root, dict(files))
    (tmp / "check.diff").write_bytes(diff)
    forward = git(root, "apply", "--check", str(tmp / "check.diff"), check=False)
    reverse = git(root, "apply", "-R", "--check", str(tmp / "check.diff"), check=False)
    return forward.returncode, reverse.returncode, (forward.stderr + reverse.stderr).decode()


SCRIPT = b"#!/bin/sh\necho started\n"


@pytest.mark.parametrize("executable", [True, False])
def test_a_created_file_with_the_diffs_bytes_but_the_other_exec_bit_is_a_conflict(
    tmp_path: Path, registry: Registry, engine: Path, executable: bool
) -> None:
    # Issue #37, item 3: the mode is part of a created file's post-image. `git apply -R --check` passes on it
    # (a warning only), but the file is not the one the diff creates: a revert and a new apply would give it
    # the diff's mode, so reading it `applied` would let status say the patch is in place when it is not.
    diff = git_diff(tmp_path, {"a.py": b"a\n"}, {"run.sh": (SCRIPT, executable)})
    assert (b"new file mode 100755" if executable else b"new file mode 100644") in diff
    registry.add("p", diff)
    tree = {"a.py": (b"a\n", False), "run.sh": (SCRIPT, not executable)}
    write_tree(engine, dict(tree))
    forward, reverse, said = git_checks(tmp_path, tree, diff)
    assert (forward, reverse) == (1, 0) and "expected 100" in said  # git: "applied", with a warning
    status = run(registry, engine, "status", "--json")
    assert status.code == 5, status.out
    detail = status.json()["files"][0]["hunks"][0]["detail"]
    shown = "644" if executable else "755"
    assert f"exists with the new content but mode {shown}" in detail, detail
    for action in ("apply", "revert", "apply --complete", "revert --complete"):
        assert run(registry, engine, *action.split()).code == 1, action
    assert read_tree(engine) == tree
    # With the diff's mode it is the created file: applied (adopted, as a tree patched by hand), and revert
    # removes it.
    write_tree(engine, {"run.sh": (SCRIPT, executable)})
    assert run(registry, engine, "status").code == 0
    assert run(registry, engine, "apply", "--adopt").code == 0
    assert run(registry, engine, "revert").code == 0
    assert read_tree(engine) == {"a.py": (b"a\n", False)}


def test_a_deleted_file_with_the_diffs_bytes_but_the_other_exec_bit_is_a_conflict(
    tmp_path: Path, registry: Registry, engine: Path
) -> None:
    # The mirror: the diff deletes run.sh as 100755, the tree has it at 644. It used to read `unapplied`, and
    # `apply` then `revert` gave the file back as 755: a mode widened that the user never had.
    diff = git_diff(tmp_path, {"run.sh": (SCRIPT, True), "a.py": b"a\n"}, {"run.sh": None})
    assert b"deleted file mode 100755" in diff
    registry.add("p", diff)
    tree = {"a.py": (b"a\n", False), "run.sh": (SCRIPT, False)}
    write_tree(engine, dict(tree))
    forward, _, said = git_checks(tmp_path, tree, diff)
    assert forward == 0 and "has type 100644, expected 100755" in said  # git would delete it, warning only
    status = run(registry, engine, "status", "--json")
    assert status.code == 5, status.out
    detail = status.json()["files"][0]["hunks"][0]["detail"]
    assert "exists with the content this diff deletes but mode 644" in detail, detail
    assert run(registry, engine, "apply").code == 1
    assert read_tree(engine) == tree
    # At the diff's mode it is unapplied, and apply then revert gives back exactly the file, mode included.
    write_tree(engine, {"run.sh": (SCRIPT, True)})
    pristine = read_tree(engine)
    assert run(registry, engine, "status").code == 3
    assert run(registry, engine, "apply").code == 0
    assert read_tree(engine) == {"a.py": (b"a\n", False)}
    assert run(registry, engine, "revert").code == 0
    assert read_tree(engine) == pristine


def test_a_mode_only_patch_is_judged_by_the_exec_bit(tmp_path: Path, registry: Registry, engine: Path) -> None:
    # `git apply` passes both --check and -R --check for a mode-only patch on either tree, so git's checks say
    # nothing here: the exec bit is the state. What apply and revert write is what git apply (-R) writes.
    before = {"run.sh": (SCRIPT, False)}
    diff = git_diff(tmp_path, before, {"run.sh": (SCRIPT, True)})
    assert b"old mode 100644\nnew mode 100755\n" in diff and b"@@" not in diff
    registry.add("p", diff)
    assert git_checks(tmp_path, before, diff)[:2] == (0, 0)
    assert git_checks(tmp_path, {"run.sh": (SCRIPT, True)}, diff)[:2] == (0, 0)
    write_tree(engine, dict(before))
    assert run(registry, engine, "status").code == 3
    assert run(registry, engine, "apply").code == 0
    oracle = tmp_path / "oracle"
    oracle.mkdir()
    write_tree(oracle, dict(before))
    git(oracle, "apply", str(tmp_path / "check.diff"))
    assert read_tree(engine) == read_tree(oracle) == {"run.sh": (SCRIPT, True)}
    assert run(registry, engine, "status").code == 0
    assert run(registry, engine, "apply").code == 0 and read_tree(engine) == read_tree(oracle)
    assert run(registry, engine, "revert").code == 0
    git(oracle, "apply", "-R", str(tmp_path / "check.diff"))
    assert read_tree(engine) == read_tree(oracle) == before


def test_a_plain_diff_creates_a_file_without_exec_bits(tmp_path: Path, registry: Registry, engine: Path) -> None:
    # A diff without git's headers gives no mode: the file it creates is 644 (as `patch` and `git apply` make
    # it), so the same bytes at 755 are a conflict, said with the mode it would have (once an internal error:
    # the message formatted the missing mode).
    diff = b"--- /dev/null\n+++ b/run.sh\n@@ -0,0 +1,2 @@\n+#!/bin/sh\n+echo started\n"
    registry.add("p", diff)
    write_tree(engine, {"run.sh": (SCRIPT, True)})
    status = run(registry, engine, "status", "--json")
    assert status.code == 5, status.out + status.err
    detail = status.json()["files"][0]["hunks"][0]["detail"]
    assert "the new content but mode 755; the diff creates it 100644 (the diff gives no mode)" in detail, detail
    write_tree(engine, {"run.sh": (SCRIPT, False)})
    assert run(registry, engine, "status").code == 0
    assert run(registry, engine, "apply", "--adopt").code == 0
    assert run(registry, engine, "revert").code == 0 and read_tree(engine) == {}
    assert run(registry, engine, "apply").code == 0
    oracle = tmp_path / "oracle"
    oracle.mkdir()
    (tmp_path / "plain.diff").write_bytes(diff)
    git(oracle, "apply", str(tmp_path / "plain.diff"))
    assert read_tree(engine) == read_tree(oracle) == {"run.sh": (SCRIPT, False)}


def test_a_copy_between_two_certain_hunks_is_excluded_by_them_even_with_drift_above(
    tmp_path: Path, registry: Registry
) -> None:
    """Three hunks (-U3, lines 10, 30, 50 of 80 changed). The tree has a line added at the top (so no hunk sits
    at its line from the start of the file) and, between hunks 1 and 2, seven lines replaced by a copy of hunk 2's
    pre-image. Hunks 1 and 3 have one place each: they anchor the run between them, whose gaps the diff fixes, and
    a hunk 2 on the copy would shorten the gap before it. So the tree is unapplied, every hunk at its real place;
    `apply` writes what git writes.

    Kills patchkit/judge/state.py:572:core/ReplaceComparisonOperator_Eq_Lt#9 (`len(p) < 1`: no hunk counted as
    certain, so nothing anchored the run and all three hunks read ambiguous)."""
    base = b"".join(b"line %d\n" % i for i in range(1, 81))
    after = base
    for i in (10, 30, 50):
        after = after.replace(b"line %d\n" % i, b"changed %d\n" % i)
    registry.add("p", git_diff(tmp_path, {"engine/mod.py": base}, {"engine/mod.py": after}))
    lines = base.splitlines(keepends=True)
    tree = b"".join([b"drift at the top\n", *lines[:14], *lines[26:33], *lines[21:]])
    root = tmp_path / "engine-root"
    write_tree(root, {"engine/mod.py": tree})
    res = cli("status", "p", "--root", root, "--patches", registry.path, "-v")
    assert res.code == 3 and "p: unapplied (3 hunks in 1 file)" in res.out, res.out
    assert "ambiguous" not in res.out, res.out
    oracle = tmp_path / "oracle"
    write_tree(oracle, {"engine/mod.py": tree})
    (tmp_path / "p.diff").write_bytes((registry.path / "p" / "change.diff").read_bytes())
    git(oracle, "init", "-q")
    git(oracle, "apply", str(tmp_path / "p.diff"))
    assert cli("apply", "p", "--root", root, "--patches", registry.path).code == 0
    assert read_tree(root) == read_tree(oracle)
