"""Tests written to kill the survivors of the mutation run in the judge (patchkit/judge/: state.py, treestate.py,
rewrite.py; scripts/mutation.py, docs/testing.md), kept apart from the workspace's (test_mutation_kills.py) so that
a judge module's test selection runs these, not the workspace's slower ones (locks held, kill campaigns).

Each test names the mutant it was written against (its id in the run's output); each was seen failing with that
mutant applied to a copy of the module, and passing without it.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FileSpec, Registry, cli, git_diff, read_tree, write_tree

BEFORE = {
    "engine/a.py": b"".join(b"a line %d\n" % i for i in range(1, 9)),
    "engine/b.py": b"".join(b"b line %d\n" % i for i in range(1, 9)),
}
AFTER = {
    "engine/a.py": BEFORE["engine/a.py"].replace(b"a line 4\n", b"a line 4 patched\n"),
    "engine/b.py": BEFORE["engine/b.py"].replace(b"b line 4\n", b"b line 4 patched\n"),
}


def test_a_refusal_names_the_conflicting_file_not_the_clean_one_before_it(tmp_path: Path, registry: Registry) -> None:
    """The first file is clean (not yet applied), the second one drifted: the refusal names the second one's hunk.

    Kills patchkit/judge/treestate.py:43:core/AddNot#2 (`if not verdict.state in (AMBIGUOUS, CONFLICT)`), which
    blamed the first file that is *not* undecided, with its own detail."""
    registry.add("two-files", git_diff(tmp_path, BEFORE, AFTER))
    root = tmp_path / "engine-root"
    write_tree(root, BEFORE)
    write_tree(root, {"engine/b.py": BEFORE["engine/b.py"].replace(b"b line 4\n", b"someone else\n")})
    res = cli("apply", "two-files", "--root", root, "--patches", registry.path, "--json")
    assert res.code == 1
    reason = res.json()["reason"]
    assert reason.endswith(" (engine/b.py hunk 1 @@ -1,7 +1,7 @@: at line 4 the diff expects 'b line 4' (or its "
                           "post-image), the file has 'someone else')"), reason
    assert (root / "engine/a.py").read_bytes() == BEFORE["engine/a.py"]


def _conflict_detail(tmp_path: Path, registry: Registry, old: list[bytes], new: list[bytes], tree: list[bytes]) -> str:
    """git's diff of engine/a.py from `old` to `new` on a tree holding `tree`: the one hunk's conflict detail."""
    registry.add("p", git_diff(tmp_path, {"engine/a.py": b"".join(old)}, {"engine/a.py": b"".join(new)}))
    root = tmp_path / "engine-root"
    write_tree(root, {"engine/a.py": b"".join(tree)})
    res = cli("status", "p", "--root", root, "--patches", registry.path, "--json")
    assert res.code == 5, (res.code, res.out, res.err)
    (hunk,) = res.json()["files"][0]["hunks"]
    assert hunk["state"] == "conflict", hunk
    return str(hunk["detail"])


def test_a_conflict_quotes_a_line_of_60_characters_whole_and_cuts_a_longer_one_there(
    tmp_path: Path, registry: Registry
) -> None:
    """A context line of 60 characters where the tree has one of 61: the conflict's detail quotes the first whole
    and the second cut at 60 characters, with "...".

    Kills patchkit/judge/matching.py:546's cut at 61 or 59 characters and its `len(text) > 61`, `> 59`, `== 60`,
    `>= 60` (the full run of 2026-12-06: no test quoted a line near the cut)."""
    old = [b"line %d\n" % i for i in range(10)]
    old[3] = b"a" * 60 + b"\n"
    new = list(old)
    new[5] = b"changed\n"
    tree = list(old)
    tree[3] = b"b" * 61 + b"\n"
    detail = _conflict_detail(tmp_path, registry, old, new, tree)
    assert detail == (f"at line 4 the diff expects '{'a' * 60}' (or its post-image), "
                      f"the file has '{'b' * 60}...'"), detail


@pytest.mark.parametrize("shift", [0, 300])
def test_a_conflict_past_the_end_of_the_file_says_end_of_file(tmp_path: Path, registry: Registry, shift: int) -> None:
    """A hunk near the end of a file whose last two lines are gone from the tree: the hunk's context runs past
    the end, and the detail says the file has the end of the file there. Also with 300 lines above it all.

    Kills, with the shift, patchkit/judge/matching.py:517:core/ReplaceComparisonOperator_Lt_IsNot#5 (`pos + i
    is not len(lines)`: past line 256 the line past the end was read, an IndexError, exit 10; the full run of
    2026-12-06)."""
    old = [b"line %d\n" % i for i in range(shift + 20)]
    new = list(old)
    new[-3] = b"changed\n"
    detail = _conflict_detail(tmp_path, registry, old, new, old[:-2])
    assert detail == (f"at line {shift + 19} the diff expects 'line {shift + 18}' (or its post-image), "
                      "the file has end of file"), detail


def test_an_ambiguous_reading_at_the_first_line_is_named_line_1(tmp_path: Path, registry: Registry) -> None:
    """Both images of the one hunk start at line 1 (its added block repeats its own context): the detail names
    line 1 both ways, not line 2.

    Kills patchkit/judge/state.py's `(pos or 0) + 1` -> `(pos or 1) + 1` in `_tie` (cosmic-ray
    core/NumberReplacer, seed 5 on the merged judge), which counted a reading at the file's first line as line 2."""
    from tests import test_lookalikes as lookalikes

    base = b"a = 1\n\n" + lookalikes.MID + b"z = 1\n" + lookalikes.TAIL
    patched = b"a = 1\nt = 0\n\na = 1\n\n" + lookalikes.MID + b"z = 1\n" + lookalikes.TAIL
    registry.add("p", git_diff(tmp_path, {lookalikes.PATH: base}, {lookalikes.PATH: patched}, context=1))
    root = tmp_path / "engine-root"
    write_tree(root, {lookalikes.PATH: patched + b"# local\n"})
    res = cli("status", "p", "--root", root, "--patches", registry.path, "--json")
    assert res.code == 5, (res.out, res.err)
    (hunk,) = res.json()["files"][0]["hunks"]
    assert hunk["state"] == "ambiguous"
    assert hunk["detail"].startswith("read as unapplied, its pre-image is at line 1; read as applied, its "
                                     "post-image is at line 1; each reading"), hunk["detail"]


@pytest.mark.parametrize("umask", [0o022, 0o077, 0], ids=["umask 022", "umask 077", "umask 0"])
def test_created_files_get_exactly_the_diffs_modes_and_a_mode_change_gives_execute_to_readers(
    tmp_path: Path, registry: Registry, umask: int
) -> None:
    """A created file is 0644 or 0755, exactly the diff's 100644 / 100755, whatever the umask (git apply's own
    result, its oracle, agrees under umask 022). A 100644 -> 100755 change on a file that is 0654 (group may
    execute, its owner may not: not executable as git counts it) gives execute to exactly those who may read:
    0755, as git apply makes it.

    Kills patchkit/judge/rewrite.py:105:core/NumberReplacer#22 to #25 (`new_file_mode` giving 0756, 0754, 0645,
    0643) and :99:core/ReplaceBinaryOperator_BitOr_BitXor#2 and _BitOr_Add#2 (the exec bits added by `^` or `+`:
    0745 or 0765 from 0654)."""
    before = {"engine/run.sh": (b"#!/bin/sh\n", False)}
    after = {"engine/run.sh": (b"#!/bin/sh\n", True), "engine/new.py": b"new = 1\n",
             "engine/tool.sh": (b"#!/bin/sh\necho tool\n", True)}
    diff = git_diff(tmp_path, before, after)
    registry.add("p", diff)
    root, oracle = tmp_path / "engine-root", tmp_path / "oracle"
    for tree in (root, oracle):
        write_tree(tree, before)
        os.chmod(tree / "engine/run.sh", 0o654)
    (tmp_path / "p.diff").write_bytes(diff)
    old = os.umask(0o022)
    try:
        subprocess.run(["git", "apply", str(tmp_path / "p.diff")], cwd=oracle, check=True)
    finally:
        os.umask(old)
    want = {"engine/run.sh": 0o755, "engine/new.py": 0o644, "engine/tool.sh": 0o755}
    assert {rel: stat.S_IMODE((oracle / rel).stat().st_mode) for rel in want} == want, "git's own answer"
    old = os.umask(umask)
    try:
        res = cli("apply", "p", "--root", root, "--patches", registry.path)
    finally:
        os.umask(old)
    assert res.code == 0, res.err
    assert {rel: stat.S_IMODE((root / rel).stat().st_mode) for rel in want} == want


def _applied_below_a_line_added_on_top(tmp_path: Path, registry: Registry, old: bytes, new: bytes, hunks: int,
                                       context: int = 3) -> Path:
    """git's diff of engine/a.py from `old` to `new` (`hunks` hunks), applied to `old` with a line added on top
    (so the diff's blob ids prove nothing and the gaps decide): `apply` writes `new` below that line. The root."""
    diff = git_diff(tmp_path, {"engine/a.py": old}, {"engine/a.py": new}, context=context)
    assert diff.count(b"\n@@ ") == hunks, diff
    registry.add("p", diff)
    root = tmp_path / "engine-root"
    write_tree(root, {"engine/a.py": b"top\n" + old})
    res = cli("apply", "p", "--root", root, "--patches", registry.path)
    assert res.code == 0, res
    assert (root / "engine/a.py").read_bytes() == b"top\n" + new
    return root


@pytest.mark.parametrize("shift", [0, 300])
def test_a_copy_of_a_hunk_in_the_unchanged_lines_between_two_hunks_is_excluded_by_the_gaps(
        tmp_path: Path, registry: Registry, shift: int) -> None:
    """Five hunks (-U1); hunk 4's pre-image also occurs among the unchanged lines between hunks 3 and 4, and the
    file has one line added at its top (so the diff's blob ids prove nothing). Hunks 3 and 5 are certain and
    the gaps between them are exactly the diff's, so the copy cannot be hunk 4: apply applies it. Also with 300
    lines above it all, past Python's cached small ints.

    Kills patchkit/judge/state.py:624:core/ReplaceBinaryOperator_Sub_RShift#7 (`hunks[i >> 1].old_len`: the gap
    above hunk 4 was counted from the end of hunk 2's length, 3 lines, not hunk 3's, 4, so it read as not exact
    and the copy made hunk 4 ambiguous: apply refused); with the shift, :630's `loc.pos is end + gaps[i]` (no
    gap past line 256 read exact; the full run of 2026-12-06)."""
    lines = [b"p%d\n" % i for i in range(shift)] + [b"u%d\n" % i for i in range(40)]
    lines[shift + 22:shift + 25] = lines[shift + 30:shift + 33] = [b"x\n", b"y\n", b"z\n"]
    old = b"".join(lines)
    new = lines.copy()
    for i in (3, 8, 13, 14, 36):
        new[shift + i] = b"changed %d\n" % i
    new[shift + 31] = b"Y\n"
    _applied_below_a_line_added_on_top(tmp_path, registry, old, b"".join(new), 5, context=1)


@pytest.mark.parametrize("above", [0, 1])
def test_the_line_git_would_use_instead_is_named_one_based(
    tmp_path: Path, registry: Registry, engine: Path, above: int
) -> None:
    """test_state.py's last line without a newline: git would patch the copy of the block that does end in one,
    which starts at line 11 (ten lines above it); the hunk is ambiguous, naming that line and where patchkit read
    it (line 21, the hunk's own place: ten lines below where the diff expects it), and `status -v` names that
    too. With a line above it all, the numbers are odd (0-based), where `| 1` and `^ 1` are not `+ 1`.

    Kills patchkit/judge/state.py:745:core/NumberReplacer#159 (`theirs + 0`: the message named line 10, one
    above the copy) and, with the line above, :745's `theirs | 1`, `theirs ^ 1`; :748's line of the hunk's own
    image (`ours + 2`, `ours - 1`, `ours | 1`, `ours >> 1`, ...: the full run of 2026-12-06); and
    :782:core/ReplaceComparisonOperator_IsNot_Is#21 (`(loc.pos,) if loc.pos is None else ()`: the doubted hunk
    kept no candidate, and the table lost its "matches at 21")."""
    lines = [b"value_%d = compute(%d)\n" % (i, i) for i in range(20)]
    top = b"# top\n" * above
    before = top + b"".join(lines[:19]) + b"value_19 = compute(19)"
    after = before.replace(lines[17], b"changed = 17\n")
    registry.add("p", git_diff(tmp_path, {"f.py": before}, {"f.py": after}))
    tree = top + b"".join(lines[:10]) + b"".join(lines[14:20]) + b"".join(lines[10:19]) + b"value_19 = compute(19)"
    write_tree(engine, {"f.py": tree})
    status = cli("status", "p", "--root", engine, "--patches", registry.path, "--json")
    assert status.code == 5, status.out
    detail = status.json()["files"][0]["hunks"][0]["detail"]
    said = f"its image is at line {21 + above}, but `git apply` would use the match at line {11 + above};"
    assert said in detail, detail
    table = cli("status", "p", "--root", engine, "--patches", registry.path, "-v")
    at = 15 + above
    row = f"hunk 1 @@ -{at},6 +{at},6 @@: ambiguous (expected line {at}, matches at {21 + above})"
    assert row in table.out, table.out


def _cut_short_by_the_end(tmp_path: Path, registry: Registry, engine: Path, shift: int, tail: bytes) -> list[Any]:
    """A hand-edited hunk whose added block repeats its own last line, at the end of the file (one line of
    trailing context, the section's other hunk three), `shift` lines further down, on the tree it gives with
    `tail` after it: `status`'s hunks (exit 5)."""
    lines = [b"value_%d = compute(%d)\n" % (i, i) for i in range(20 + shift)]
    before = b"".join(lines) + b"\nx = 1\n"
    after = before.replace(lines[3], b"changed = 3\n").replace(b"\nx = 1\n", b"\nx = 1\n\nx = 1\n")
    diff = git_diff(tmp_path, {"f.py": before}, {"f.py": after})
    diff = b"\n".join(line for line in diff.split(b"\n") if not line.startswith(b"index "))
    last = len(lines)  # the 1-based line of the last value_ line
    diff = diff[:diff.index(b"@@ -%d,3" % last)] + b"".join([
        b"@@ -%d,4 +%d,6 @@\n" % (last - 1, last - 1),
        b" value_%d = compute(%d)\n" % (last - 2, last - 2), b" value_%d = compute(%d)\n" % (last - 1, last - 1),
        b" \n+x = 1\n+\n x = 1\n",
    ])
    registry.add("p", diff)
    write_tree(engine, {"f.py": after + tail})
    status = cli("status", "p", "--root", engine, "--patches", registry.path, "--json")
    assert status.code == 5, status.out
    hunks: list[Any] = status.json()["files"][0]["hunks"]
    assert hunks[0]["state"] == "applied" and hunks[1]["state"] == "ambiguous", hunks
    return hunks


@pytest.mark.parametrize("shift", [0, 300])
def test_a_hunk_cut_short_by_the_end_of_the_file_prefers_the_reading_that_ends_there(
        tmp_path: Path, registry: Registry, engine: Path, shift: int) -> None:
    """Applied, the last hunk's pre- and post-image both start at line 19 (or 319), and only the post-image ends
    where the diff saw the file end (_cut_short_by_the_end). That reading is kept (_edges): the hunk is ambiguous
    for the pre-image inside it, read as applied, not a tie of two readings.

    Kills patchkit/judge/state.py:731:core/NumberReplacer#154 (`len(fitting) == 2`: the one fitting reading was
    dropped, both readings kept, and the detail became the tie's "each reading of the whole file holds"), and,
    past line 256, :724's `loc.pos + loc.span is not n` (no reading fitted; the full run of 2026-12-06)."""
    hunks = _cut_short_by_the_end(tmp_path, registry, engine, shift, b"")
    assert hunks[1]["detail"].startswith(f"read as applied, its post-image is at line {19 + shift}, but its "
                                         f"pre-image is also at line {19 + shift};"), hunks[1]["detail"]


def test_a_hunk_cut_short_by_the_end_with_no_reading_ending_there_is_a_tie(
        tmp_path: Path, registry: Registry, engine: Path) -> None:
    """The same, with a line after it on the tree: no reading ends where the diff saw the file end, the
    preference leaves none, and both readings are kept: a tie, saying so, not the first reading.

    Kills patchkit/judge/state.py:731:core/ReplaceComparisonOperator_Eq_LtE#16 (`len(fitting) <= 1`: no reading
    kept, and the first one read taken; the full run of 2026-12-06)."""
    hunks = _cut_short_by_the_end(tmp_path, registry, engine, 0, b"z\n")
    assert hunks[1]["detail"] == ("read as unapplied, its pre-image is at line 19; read as applied, its post-image "
                                  "is at line 19; each reading of the whole file holds, and position cannot tell "
                                  "them apart"), hunks[1]["detail"]


def test_a_file_touched_three_times_with_its_first_two_sections_applied_reads_partial(
    tmp_path: Path, registry: Registry
) -> None:
    """A diff that touches one file three times: line 5 x -> y, then y -> z (on top of the first), then line 8. On
    a tree where the first two are applied (line 5 is z) and the third not, the chain reads "the first two
    applied": the second is peeled off before the first is read (the first, read on the tree, sees neither x nor
    y). status says partial; apply --complete completes it.

    Kills patchkit/judge/state.py:205's `range(len(chain), -1, -2)` and `~1` (the largest j tried in steps of two:
    j = 2 of 3 never tried, the chain read forward as a conflict; the full run of 2026-12-06). The chains of the
    other tests have two sections, where the forward reading agrees with j = 0 and 1."""
    lines = [b"line %d\n" % i for i in range(1, 13)]
    base = b"".join(lines)
    step1 = base.replace(b"line 5\n", b"line 5 y\n")
    step2 = step1.replace(b"line 5 y\n", b"line 5 z\n")
    step3 = step2.replace(b"line 8\n", b"line 8 w\n")
    diff = b"".join(git_diff(tmp_path, {"engine/f.py": a}, {"engine/f.py": b})
                    for a, b in ((base, step1), (step1, step2), (step2, step3)))
    registry.add("p", diff)
    root = tmp_path / "engine-root"
    write_tree(root, {"engine/f.py": step2})
    res = cli("status", "p", "--root", root, "--patches", registry.path)
    assert res.code == 4, (res.code, res.out, res.err)
    assert cli("apply", "p", "--complete", "--root", root, "--patches", registry.path).code == 0
    assert (root / "engine/f.py").read_bytes() == step3


@pytest.mark.parametrize("drifted", [3, 2])
def test_a_file_touched_three_times_with_one_section_drifted_names_that_section(
    tmp_path: Path, registry: Registry, drifted: int
) -> None:
    """A diff that touches one file three times: line 5 x -> y, and y -> z on top of it, as sections 1 and 2 or 1
    and 3, and line 10 as the remaining one. On a tree where none is applied and line 10 was edited by someone
    else, no "first j applied" reading holds, so the chain is read forward (each unapplied section applied
    before the next is read): the line-10 section conflicts, and it is the one named ("section 3 is conflict",
    "section 2 is conflict"); the state is conflict.

    Kills patchkit/judge/state.py:216-217's mutants of that forward reading (an unapplied section not applied, or
    reverted, before the next: the section on top of it then conflicted and was named instead), :258's of the
    section's number (section 2 tells `bad + 1` from `bad | 1` and `bad ^ 1`) and :261's AddNot#23 (the undecided
    section made ambiguous and the others kept), the full run of 2026-12-06."""
    lines = [b"line %d\n" % i for i in range(1, 15)]
    base = b"".join(lines)
    edits = {"y": (b"line 5\n", b"line 5 y\n"), "z": (b"line 5 y\n", b"line 5 z\n"),
             "w": (b"line 10\n", b"line 10 w\n")}
    contents = [base]
    for name in ("y", "z", "w") if drifted == 3 else ("y", "w", "z"):
        contents.append(contents[-1].replace(*edits[name]))
    diff = b"".join(git_diff(tmp_path, {"engine/f.py": a}, {"engine/f.py": b})
                    for a, b in itertools.pairwise(contents))
    registry.add("p", diff)
    root = tmp_path / "engine-root"
    write_tree(root, {"engine/f.py": base.replace(b"line 10\n", b"line 10 someone else\n")})
    res = cli("status", "p", "--root", root, "--patches", registry.path, "--json")
    assert res.code == 5, (res.code, res.out, res.err)
    data = res.json()
    assert data["state"] == "conflict", data
    assert f"3 sections of the diff touch this file, and section {drifted} is conflict" in res.out, res.out


def _ambiguous_and_left_alone(tmp_path: Path, registry: Registry, diff: bytes, tree: bytes, said: str) -> None:
    """engine/f.py holding `tree`: `status` reads the patch ambiguous, saying `said`; `apply` refuses, writing
    nothing."""
    registry.add("p", diff)
    root = tmp_path / "engine-root"
    write_tree(root, {"engine/f.py": tree})
    res = cli("status", "p", "--root", root, "--patches", registry.path, "--json")
    assert res.code == 5, (res.code, res.out, res.err)
    assert res.json()["state"] == "ambiguous", res.out
    assert said in res.out, res.out
    assert cli("apply", "p", "--root", root, "--patches", registry.path).code == 1
    assert (root / "engine/f.py").read_bytes() == tree


def test_a_diff_that_makes_a_change_and_takes_it_back_reads_ambiguous(tmp_path: Path, registry: Registry) -> None:
    """A diff that touches one file twice, the second section taking the first back (line 5 x -> y, then y -> x:
    a commit and its revert in one series): on the tree (line 5 is x) both readings hold, the search takes
    "both applied", and its round trip in memory fails: reverted, the chain reads applied again. The file is
    ambiguous, saying why; nothing is written by an apply.

    Kills patchkit/judge/state.py's mutants of the chain's round trip that let it pass or name another section
    (:273 ZeroIterationForLoop, :299-:302's test of the goal and the section's number; the full run of
    2026-12-06): no other test's chain failed its round trip."""
    lines = [b"line %d\n" % i for i in range(1, 12)]
    base = b"".join(lines)
    changed = base.replace(b"line 5\n", b"line 5 y\n")
    diff = git_diff(tmp_path, {"engine/f.py": base}, {"engine/f.py": changed}) + git_diff(
        tmp_path, {"engine/f.py": changed}, {"engine/f.py": base})
    said = ("2 sections of the diff touch this file; after reverting it in memory, section 1 of the sections "
            "touching it reads applied, not unapplied")
    _ambiguous_and_left_alone(tmp_path, registry, diff, base, said)


def test_a_chain_whose_second_section_fails_the_move_is_named_by_its_number(tmp_path: Path, registry: Registry) -> None:
    """Three sections touch one file of repeated lines (b b b b; a line put between the middle two; another
    after the first and the fourth made `a`; the first made `u30`), the tree has the first two applied: the
    search reads it partial, and applying the chain in memory leaves the second section reading conflict. The
    file is ambiguous, the message naming section 2; nothing is written by an apply. (Found by a random search
    of 6,000 chains of repeated lines, with difflib's diffs of one line of context: the only case there whose round
    trip fails at a section other than the first.)

    Kills patchkit/judge/state.py:302's `bad | 1` and `bad ^ 1` (section 1 or 0 named; the full run of
    2026-12-06): every other failing round trip failed at section 1, where `+`, `|` and `^` agree."""
    versions = [b"b\nb\nb\nb\n", b"b\nb\nu30\nb\nb\n", b"b\nu9\nb\nu30\nb\na\n", b"u30\nu9\nb\nu30\nb\na\n"]
    diff = "".join(  # git places the inserted lines elsewhere among the b's: these are difflib's sections
        line for old, new in itertools.pairwise(versions)
        for line in difflib.unified_diff(old.decode().splitlines(keepends=True), new.decode().splitlines(keepends=True),
                                         "a/engine/f.py", "b/engine/f.py", n=1)
    ).encode()
    said = ("3 sections of the diff touch this file; after applying it in memory, section 2 of the sections "
            "touching it reads conflict, not applied")
    _ambiguous_and_left_alone(tmp_path, registry, diff, versions[2], said)


@pytest.mark.parametrize("there", ["neither", "both"])
def test_a_rename_with_neither_or_both_of_its_paths_there_is_a_conflict_saying_which(
    tmp_path: Path, registry: Registry, there: str
) -> None:
    """A rename (old/moved.py to new/moved.py, one line changed) on a tree where neither path exists, or both
    do: a conflict whose detail says which of the two it is; nothing is written by an apply.

    Kills patchkit/judge/state.py:361:core/AddNot#39 (the two details swapped; the full run of 2026-12-06): no
    test of the judge's selection had a rename with neither path there."""
    body = b"".join(b"moved line %d\n" % i for i in range(1, 8))
    other = {"engine/keep.py": b"keep = 1\n"}
    diff = git_diff(tmp_path, {**other, "engine/old/moved.py": body},
                    {"engine/old/moved.py": None, "engine/new/moved.py": body.replace(b"line 4", b"line four")})
    assert b"rename from engine/old/moved.py" in diff, diff
    registry.add("p", diff)
    root = tmp_path / "engine-root"
    tree = dict(other) if there == "neither" else {**other, "engine/old/moved.py": body, "engine/new/moved.py": body}
    write_tree(root, tree)
    res = cli("status", "p", "--root", root, "--patches", registry.path, "--json")
    assert res.code == 5 and res.json()["state"] == "conflict", (res.code, res.out, res.err)
    detail = ("neither engine/old/moved.py nor engine/new/moved.py exists" if there == "neither"
              else "both engine/old/moved.py and engine/new/moved.py exist")
    assert detail in res.out, res.out
    before = read_tree(root)
    assert cli("apply", "p", "--root", root, "--patches", registry.path).code == 1
    assert read_tree(root) == before


@pytest.mark.parametrize("tree", ["unapplied", "applied"])
def test_a_file_whose_hunks_and_mode_read_cleanly_carries_no_detail(tmp_path: Path, registry: Registry,
                                                                    tree: str) -> None:
    """A section that changes one line and the exec bit, on a tree where both read unapplied (or both applied):
    the file's verdict has no detail (a detail is the reason a file is undecided), in JSON and in the text.

    Kills patchkit/judge/state.py:391:core/AddNot#43 (every file then said "file mode is 644, neither the old nor
    the new mode of the diff"; the full run of 2026-12-06). The branch it negates is dead: _judge_mode reads the
    exec bit as the old or the new one, never a conflict (left for the run after this one: state.py's record
    is keyed by its code)."""
    before = b"".join(b"tool line %d\n" % i for i in range(1, 8))
    after = before.replace(b"line 4", b"line four")
    diff = git_diff(tmp_path, {"engine/tool.sh": (before, False)}, {"engine/tool.sh": (after, True)})
    assert b"new mode 100755" in diff, diff
    registry.add("p", diff)
    root = tmp_path / "engine-root"
    write_tree(root, {"engine/tool.sh": (before, False) if tree == "unapplied" else (after, True)})
    res = cli("status", "p", "--root", root, "--patches", registry.path, "--json")
    assert res.code == (3 if tree == "unapplied" else 0), (res.code, res.out, res.err)
    (file,) = res.json()["files"]
    assert file["state"] == tree and file["detail"] is None, file
    text = cli("status", "p", "--root", root, "--patches", registry.path, "-v")
    assert text.code == res.code and "tool.sh" in text.out, (text.code, text.out, text.err)
    assert "file mode" not in text.out + text.err, text.out


def test_a_whole_file_rewrite_of_300_lines_and_a_search_past_300_copies_of_a_line_are_judged(
    tmp_path: Path, registry: Registry
) -> None:
    """Two files past 256 lines, where Python's cached small ints end: one rewritten whole (every line changed:
    one hunk pinned to both ends, its image of 300 lines the whole file), one of 300 identical lines with a
    drifted hunk whose image starts with that line (git's search walks past the last of its 300 places). The
    first reads unapplied (then applied after an apply), the second a conflict naming its hunk; no internal
    error (exit 10).

    Kills patchkit/judge/matching.py:102:core/ReplaceComparisonOperator_NotEq_IsNot#0 (`n is not m`: the whole
    file's image never found past 256 lines) and :90's `down is not count` (the search read past its last
    position: an IndexError); the full run of 2026-12-06."""
    whole = b"".join(b"w %d\n" % i for i in range(300))
    rewritten = b"".join(b"W %d\n" % i for i in range(300))
    same = b"x\n" * 300 + b"a\nb\nc\nd\ne\nf\n"
    changed = same.replace(b"b\nc\n", b"b\nC\n")
    diff = git_diff(tmp_path, {"engine/whole.py": whole, "engine/same.py": same},
                    {"engine/whole.py": rewritten, "engine/same.py": changed})
    registry.add("p", diff)
    root = tmp_path / "engine-root"
    write_tree(root, {"engine/whole.py": whole, "engine/same.py": same.replace(b"a\n", b"A\n")})  # same.py drifted
    res = cli("status", "p", "--root", root, "--patches", registry.path, "--json")
    assert res.code == 5, (res.code, res.out, res.err)
    by_path = {f["path"]: f for f in res.json()["files"]}
    assert by_path["engine/whole.py"]["state"] == "unapplied", by_path
    assert by_path["engine/same.py"]["state"] == "conflict", by_path
    write_tree(root, {"engine/same.py": same})
    assert cli("apply", "p", "--root", root, "--patches", registry.path).code == 0
    assert (root / "engine/whole.py").read_bytes() == rewritten
    assert (root / "engine/same.py").read_bytes() == changed


def _unapplied_then_applied(tmp_path: Path, registry: Registry, diff: bytes, tree: bytes, patched: bytes,
                            extra: str = "") -> None:
    """engine/f.py holding `tree`: `status` reads the patch unapplied; `apply` writes `patched`."""
    registry.add("p", diff, extra=extra)
    root = tmp_path / "engine-root"
    write_tree(root, {"engine/f.py": tree})
    res = cli("status", "p", "--root", root, "--patches", registry.path, "--json")
    assert res.code == 3 and res.json()["state"] == "unapplied", (res.code, res.out, res.err)
    assert cli("apply", "p", "--root", root, "--patches", registry.path).code == 0
    assert (root / "engine/f.py").read_bytes() == patched


def test_a_tree_the_diffs_blob_ids_prove_stays_proved_when_the_manifests_fingerprint_is_of_another_image(
    tmp_path: Path, registry: Registry
) -> None:
    """The file is exactly the diff's base (its `index` line's blob id proves every hunk unapplied), with a copy
    of the hunk's pre-image further down (by position alone, ambiguous); the manifest's `[base]` fingerprints
    another image (the older engine the patch was also ported to). The blob ids decide: unapplied, and apply
    patches the hunk's own place, not the copy.

    Kills patchkit/judge/state.py:435:core/ReplaceAndWithOr#5 (the fingerprint asked even when the blob ids
    proved a reading, and its None then discarding their proof; the full run of 2026-12-06)."""
    block = b"".join(b"def helper_%d():\n    return %d\n" % (i, i) for i in range(4))
    base = b"# head\n" + block + b"".join(b"filler %d\n" % i for i in range(30)) + block + b"# tail\n"
    changed = base.replace(b"    return 1\n", b"    return 100\n", 1)
    diff = git_diff(tmp_path, {"engine/f.py": base}, {"engine/f.py": changed})
    other_image = hashlib.sha256(b"# the older engine's file\n").hexdigest()
    _unapplied_then_applied(tmp_path, registry, diff, base, changed, extra=f'[base]\n"engine/f.py" = "{other_image}"\n')


def test_a_file_no_reading_completes_is_reported_by_its_first_reading(tmp_path: Path, registry: Registry) -> None:
    """Two hunks (-U1); on the tree, hunk 1's own place is rewritten, its post-image sits three lines above it
    and its pre-image three lines below (a tie: two readings, unapplied first), and hunk 2 is drifted (a
    conflict in both). No reading is complete: the file is a conflict, reported by the first reading, the same
    on every run (hunk 1 unapplied, its pre-image at line 12), never by another one.

    Kills patchkit/judge/state.py:471:core/NumberReplacer#45 (`readings[-1]`: hunk 1 reported applied, at line
    6; the full run of 2026-12-06)."""
    lines = [b"l%d\n" % i for i in range(1, 31)]
    lines[9], lines[24] = b"alpha\n", b"gamma\n"
    base = b"".join(lines)
    changed = base.replace(b"alpha\n", b"beta\n").replace(b"gamma\n", b"delta\n")
    diff = git_diff(tmp_path, {"engine/f.py": base}, {"engine/f.py": changed}, context=1)
    assert diff.count(b"\n@@ ") == 2, diff
    tree = list(lines)
    tree[5:8] = [b"l9\n", b"beta\n", b"l11\n"]  # the post-image, 3 lines above the hunk's place (line 9)
    tree[8:11] = [b"z1\n", b"z2\n", b"z3\n"]
    tree[11:14] = [b"l9\n", b"alpha\n", b"l11\n"]  # the pre-image, 3 lines below
    tree[24] = b"epsilon\n"
    registry.add("p", diff)
    root = tmp_path / "engine-root"
    write_tree(root, {"engine/f.py": b"".join(tree)})
    for _ in range(2):
        res = cli("status", "p", "--root", root, "--patches", registry.path, "--json")
        assert res.code == 5, (res.code, res.out, res.err)
        (file,) = res.json()["files"]
        assert file["state"] == "conflict", file
        first, second = file["hunks"]
        assert (first["state"], second["state"]) == ("unapplied", "conflict"), file["hunks"]
        assert first["found_line"] == 12, first


def test_a_reading_left_incomplete_does_not_hide_a_complete_one_after_it(tmp_path: Path, registry: Registry) -> None:
    """A two-hunk section of a file of repeated lines (a a u a x to a u a: difflib's -U1 diff, each hunk taking
    one line out) on the tree `a a`: the first reading position gives is incomplete (hunk 2 finds nothing after
    hunk 1's place), a later one is complete (read as applied) and is judged: its round trip fails, so the file
    is ambiguous, saying so, and not a conflict about the end of the file.

    Kills patchkit/judge/state.py:455:core/ReplaceContinueWithBreak#0 (the readings after an incomplete one
    dropped; found by scripts/chain_search.py --single --replace 455 continue break, seed 21: 2 cases in
    77,968 trees), and the round trip's message in full: :811's verb swapped, :814's `and` for `or` (a hunk
    read in the other state at the same line let through); the full run of 2026-12-06."""
    old, new = ["a\n", "a\n", "u\n", "a\n", "x\n"], ["a\n", "u\n", "a\n"]
    diff = "".join(difflib.unified_diff(old, new, "a/engine/f.py", "b/engine/f.py", n=1)).encode()
    assert diff.count(b"@@ -") == 2, diff
    said = ("read as applied, the file does not survive a round trip: after reverting in memory this hunk reads "
            "applied at line 1, not unapplied at line 1")
    _ambiguous_and_left_alone(tmp_path, registry, diff, b"a\na\n", said)


def test_a_failed_round_trip_names_both_lines_one_based_at_even_lines(tmp_path: Path, registry: Registry) -> None:
    """A section of a file of repeated lines below three distinct ones (difflib's -U1 diff of p0 p1 p2 u u a a a
    into p0 p1 p2 u u a) on the tree p0 p1 p2 a: read applied, its round trip fails, and the message names the
    line the hunk was found at after reverting (6) and the line it was wanted at (4), both one-based from an odd
    0-based line, where `| 1` and `^ 1` are not `+ 1`.

    Kills patchkit/judge/state.py:815's `loc.pos | 1` and `^ 1`, :818's `(pos or 0) | 1`, `^ 1` and `(pos and
    0) + 1` (ids of the full run of 2026-12-06; the failing round trip tested before was at line 1, where they
    agree). Found by a random search of difflib diffs of repeated lines for a failing round trip at even lines."""
    pre = ["p0\n", "p1\n", "p2\n"]
    old, new = [*pre, "u\n", "u\n", "a\n", "a\n", "a\n"], [*pre, "u\n", "u\n", "a\n"]
    diff = "".join(difflib.unified_diff(old, new, "a/engine/f.py", "b/engine/f.py", n=1)).encode()
    said = ("read as applied, the file does not survive a round trip: after reverting in memory this hunk reads "
            "applied at line 6, not unapplied at line 4")
    _ambiguous_and_left_alone(tmp_path, registry, diff, "".join([*pre, "a\n"]).encode(), said)


def test_a_section_with_a_hunk_excluded_is_still_proved_by_the_diffs_old_blob_id(
    tmp_path: Path, registry: Registry
) -> None:
    """Two hunks of one file, the second excluded by the manifest: the filtered section makes another file than
    the diff's new one, so only the old blob id is kept. The tree is exactly the diff's base, with a copy of hunk
    1's pre-image further down (by position alone, ambiguous): the old blob id proves hunk 1 unapplied, and
    apply patches its own place, not the copy, and leaves hunk 2's lines alone.

    Kills patchkit/judge/state.py:484's `not old_blob or not new_blob` and `old_blob and not new_blob` (a proof
    with only the old id given up), :514's `and` of the two ids and the old one asked of the file applied, and
    :564's `_gives` of no id as True (a drifted file proved); the full run of 2026-12-06."""
    block = b"".join(b"def helper_%d():\n    return %d\n" % (i, i) for i in range(4))
    tail = b"".join(b"tail %d\n" % i for i in range(12))
    base = b"# head\n" + block + b"".join(b"filler %d\n" % i for i in range(30)) + block + tail
    changed = base.replace(b"    return 1\n", b"    return 100\n", 1).replace(b"tail 9\n", b"tail nine\n")
    diff = git_diff(tmp_path, {"engine/f.py": base}, {"engine/f.py": changed})
    assert diff.count(b"\n@@ ") == 2, diff
    folder = registry.add("p", diff)
    with (folder / "manifest.toml").open("a", encoding="utf-8") as manifest:  # [exclude] is its last table
        manifest.write('"engine/f.py" = { hunks = [2], reason = "not ours" }\n')
    root = tmp_path / "engine-root"
    write_tree(root, {"engine/f.py": base})
    res = cli("status", "p", "--root", root, "--patches", registry.path, "--json")
    assert res.code == 3 and res.json()["state"] == "unapplied", (res.code, res.out, res.err)
    # Drifted (a line of the head changed): no id proves it, and the copy leaves it ambiguous. No proof may
    # come from the missing new id (state.py:564's `return True` for it).
    write_tree(root, {"engine/f.py": base.replace(b"# head\n", b"# head, edited\n")})
    drifted = cli("status", "p", "--root", root, "--patches", registry.path, "--json")
    assert drifted.code == 5 and drifted.json()["state"] == "ambiguous", (drifted.code, drifted.out)
    write_tree(root, {"engine/f.py": base})
    assert cli("apply", "p", "--root", root, "--patches", registry.path).code == 0
    assert (root / "engine/f.py").read_bytes() == base.replace(b"    return 1\n", b"    return 100\n", 1)


def _one_line_file_diff(base: bytes, new: bytes, hunks: bytes) -> bytes:
    """A hand-written diff of engine/f.py with real git's blob ids of `base` and `new` on its index line."""
    blob = [subprocess.run(["git", "hash-object", "--stdin"], input=data, capture_output=True, check=True)
            .stdout.decode().strip()[:12].encode() for data in (base, new)]
    return (b"diff --git a/engine/f.py b/engine/f.py\nindex %s..%s 100644\n--- a/engine/f.py\n+++ b/engine/f.py\n"
            % (blob[0], blob[1])) + hunks


def test_a_proof_by_blob_id_reads_every_branch_of_a_file_of_one_repeated_line(
    tmp_path: Path, registry: Registry
) -> None:
    """A file of 40 identical lines and a diff (hand-written, -U1, with real git's blob ids) that puts one more
    such line in at eight places: every hunk reads both ways where its header puts it, 256 readings, and only
    one of them (all unapplied) gives a blob id of the diff. The proof walks them all, eight branches waiting
    when it finds that one, and proves the file unapplied; apply writes the diff's new file.

    Kills patchkit/judge/state.py:491:core/ReplaceBinaryOperator_Add_LShift#4 (the walk's bound as
    `len(found) << len(stack)`: 1 << 8 stopped it with branches left, and position then read the file
    ambiguous) and :504's push guard as `len(found) << len(stack) + 1` (None at the next push); the full run
    of 2026-12-06."""
    line = b"x = 0\n"
    places = [3 + 5 * k for k in range(8)]  # the 1-based line each hunk's context starts at
    base, new = line * 40, line * 48
    hunks = b"".join(b"@@ -%d,2 +%d,3 @@\n x = 0\n+x = 0\n x = 0\n" % (at, at + k) for k, at in enumerate(places))
    _unapplied_then_applied(tmp_path, registry, _one_line_file_diff(base, new, hunks), base, new)


@pytest.mark.parametrize("tree", ["unapplied", "applied"])
def test_a_proof_by_blob_id_holds_with_a_hunk_pinned_to_the_end_past_line_256(
    tmp_path: Path, registry: Registry, tree: str
) -> None:
    """A file of 300 identical lines and a last line; the diff (hand-written, -U1, real git's blob ids) puts
    one more identical line in at two places and changes the last line (a hunk pinned to the end, where git
    looks at the file's length less the image's: a number computed, past 256). The blob ids prove the file
    unapplied on the base and applied on the patched file (position alone does not: its round trip fails).

    Kills patchkit/judge/state.py:499:core/ReplaceComparisonOperator_Eq_Is#2 (`locate(...) is pos`: the end
    pin's line is another int object than the header's past 256, and the proof of the post-image was lost;
    the full run of 2026-12-06), and :503's `growth | grows` and `growth ^ grows` (a branch read applied on top
    of another applied one carried the wrong growth, and the pinned hunk was looked for a line off). :500's
    `is pos`, the pre-image's, is not: on the base, position reads the file unapplied by the pinned hunk's
    distance."""
    line = b"x = 0\n"
    base, new = line * 300 + b"end = 1\n", line * 302 + b"end = 2\n"
    hunks = (b"@@ -10,2 +10,3 @@\n x = 0\n+x = 0\n x = 0\n@@ -100,2 +101,3 @@\n x = 0\n+x = 0\n x = 0\n"
             b"@@ -300,2 +302,2 @@\n x = 0\n-end = 1\n+end = 2\n")
    registry.add("p", _one_line_file_diff(base, new, hunks))
    root = tmp_path / "engine-root"
    write_tree(root, {"engine/f.py": base if tree == "unapplied" else new})
    res = cli("status", "p", "--root", root, "--patches", registry.path, "--json")
    assert res.code == (3 if tree == "unapplied" else 0), (res.code, res.out, res.err)
    assert res.json()["state"] == tree, res.out


def test_a_tree_two_readings_prove_with_different_states_is_not_proved(tmp_path: Path, registry: Registry) -> None:
    """A file of 40 identical lines and a diff (hand-written, -U1, real git's blob ids) that puts one more such
    line in at two places; the tree has 41: applying either hunk alone gives the diff's new file, so two readings
    (hunk 1 applied, hunk 2 not; and the other way) each give its blob id. Two proofs that disagree prove
    nothing: position reads the file, and it cannot tell them apart either (ambiguous), never partial with one
    of them picked.

    Kills patchkit/judge/state.py:518:core/NumberReplacer#60 (the proof refused only for three or more
    different readings; the full run of 2026-12-06)."""
    line = b"x = 0\n"
    hunks = b"@@ -10,2 +10,3 @@\n x = 0\n+x = 0\n x = 0\n@@ -30,2 +31,3 @@\n x = 0\n+x = 0\n x = 0\n"
    registry.add("p", _one_line_file_diff(line * 40, line * 42, hunks))
    root = tmp_path / "engine-root"
    write_tree(root, {"engine/f.py": line * 41})
    res = cli("status", "p", "--root", root, "--patches", registry.path, "--json")
    assert res.code == 5 and res.json()["state"] == "ambiguous", (res.code, res.out, res.err)


@pytest.mark.parametrize("proof", ["blob ids", "fingerprint"])
def test_a_proved_reading_reports_each_hunks_expected_line(tmp_path: Path, registry: Registry, proof: str) -> None:
    """A tree its proof reads (the diff's own base, its blob id; or, a line between the hunks edited so the ids
    prove nothing, the image the manifest's `[base]` fingerprints): every hunk unapplied where git puts it, each
    hunk's expected line as its header has it, line 1 for the first.

    Kills patchkit/judge/state.py:517's expected lines of a proved reading and :544's of a fingerprinted one
    (`pos or 1`, `pos or -1`, `pos and 0`; the full run of 2026-12-06)."""
    base = b"".join(b"line %d\n" % i for i in range(1, 31))
    new = base.replace(b"line 1\n", b"line one\n").replace(b"line 20\n", b"line twenty\n")
    diff = git_diff(tmp_path, {"engine/f.py": base}, {"engine/f.py": new})
    assert b"@@ -1,4 +1,4 @@" in diff and b"@@ -17,7 +17,7 @@" in diff, diff
    tree = base if proof == "blob ids" else base.replace(b"line 10\n", b"line 10, ported\n")
    extra = "" if proof == "blob ids" else f'[base]\n"engine/f.py" = "{hashlib.sha256(tree).hexdigest()}"\n'
    registry.add("p", diff, extra=extra)
    root = tmp_path / "engine-root"
    write_tree(root, {"engine/f.py": tree})
    res = cli("status", "p", "--root", root, "--patches", registry.path, "--json")
    assert res.code == 3, (res.code, res.out, res.err)
    (file,) = res.json()["files"]
    assert [(h["state"], h["expected_line"], h["found_line"]) for h in file["hunks"]] == [
        ("unapplied", 1, 1), ("unapplied", 17, 17)], file["hunks"]


@pytest.mark.parametrize("shift", [0, 300])
def test_a_copy_of_the_last_hunk_is_excluded_by_where_the_diff_saw_the_file_end(
    tmp_path: Path, registry: Registry, shift: int
) -> None:
    """Two hunks (-U3); the last one's trailing context is cut short by the end of the file (two lines of
    three), and its pre-image also occurs between the hunks; the file has one line added at its top (so the
    diff's blob ids prove nothing). Hunk 1 is certain, and the last hunk ends exactly where the file ends, as the
    diff saw: the copy cannot be it, and apply patches the real place. Also with 300 lines above it all.

    Kills patchkit/judge/state.py:634's end anchor read from the first hunk's trailing context (`hunks[-0]`),
    or only from a hunk without any (`trailing > size`), or taken as reached (`end <= len(...)`, below), and,
    past line 256, `end is len(content.lines)` (the full run of 2026-12-06)."""
    lines = [b"p%d\n" % i for i in range(shift)] + [b"u%d\n" % i for i in range(40)]
    region = [b"a\n", b"b\n", b"c\n", b"y\n", b"d\n", b"e\n"]
    lines[shift + 15:shift + 21] = lines[shift + 34:shift + 40] = region
    old = b"".join(lines)
    new = lines.copy()
    new[shift + 8] = b"changed 8\n"
    new[shift + 37] = b"Y\n"
    root = _applied_below_a_line_added_on_top(tmp_path, registry, old, b"".join(new), 2)  # the last cut: d, e
    # A line added below it all: the last hunk no longer ends where the file does, nothing excludes the copy
    # (:634's `end <= len(...)` took the end as reached), and apply refuses, writing nothing.
    drifted = b"top\n" + old + b"bottom\n"
    write_tree(root, {"engine/a.py": drifted})
    res = cli("apply", "p", "--root", root, "--patches", registry.path)
    assert res.code == 1 and "ambiguous" in res.out, res
    assert (root / "engine/a.py").read_bytes() == drifted


@pytest.mark.parametrize("shift", [0, 300])
def test_a_copy_of_a_hunk_git_pins_to_the_end_is_not_the_hunk(
    tmp_path: Path, registry: Registry, shift: int
) -> None:
    """Two hunks (-U3); the last one changes the file's last line, so it has no trailing context and git anchors
    it to the end of the file; its pre-image also occurs between the hunks, and the file has one line added at
    its top (the blob ids prove nothing). The copy is not at the end, so it cannot be the hunk, and the hunk's
    own place is: apply patches the end. Also with 300 lines above it all.

    Kills, with the shift, patchkit/judge/matching.py:307:core/ReplaceComparisonOperator_Eq_Is#4 (_at_pin's
    `pos + len(image) is n`: past line 256 the end-anchored image had no possible place at all, and the hunk
    read ambiguous; the full run of 2026-12-06)."""
    lines = [b"p%d\n" % i for i in range(shift)] + [b"u%d\n" % i for i in range(30)]
    lines[shift + 14:shift + 18] = lines[-4:]  # a copy of the last hunk's pre-image (the file's last 4 lines)
    new = list(lines)
    new[shift + 5] = b"changed 5\n"
    new[-1] = b"LAST\n"
    _applied_below_a_line_added_on_top(tmp_path, registry, b"".join(lines), b"".join(new), 2)


@pytest.mark.parametrize("shift", [0, 300])
def test_a_copy_git_would_take_above_the_hunk_before_is_named_as_gits_choice(
    tmp_path: Path, registry: Registry, shift: int
) -> None:
    """Two hunks (-U3) on a tree where hunk 1 is at its own line, 30 lines were added between the hunks, and a
    copy of hunk 2's pre-image replaced 7 lines above hunk 1: nearer to the line hunk 2's header names than its
    own place. Hunk 2's header line is where the hunks before it put it, so the reading takes its own place
    (past hunk 1) and git's own search, which has no such bound, would take the copy: ambiguous, saying that
    `git apply` would use the match at the copy's line. Also with 300 lines above it all.

    Kills, with the shift, patchkit/judge/matching.py:265:core/ReplaceComparisonOperator_NotEq_IsNot#1
    (`header is not expected`: past line 256 the two equal lines were taken as different, and the hunk was
    named ambiguous between the same line twice; the full run of 2026-12-06)."""
    lines = [b"p%d\n" % i for i in range(shift)] + [b"u%d\n" % i for i in range(40)]
    block = [b"x%d\n" % i for i in range(1, 8)]
    lines[shift + 25:shift + 32] = block
    new = list(lines)
    new[shift + 12], new[shift + 28] = b"changed 12\n", b"X4\n"
    registry.add("p", git_diff(tmp_path, {"engine/a.py": b"".join(lines)}, {"engine/a.py": b"".join(new)}))
    tree = list(lines)
    tree[shift + 1:shift + 8] = block
    tree[shift + 25:shift + 25] = [b"added %d\n" % i for i in range(30)]
    root = tmp_path / "engine-root"
    write_tree(root, {"engine/a.py": b"".join(tree)})
    res = cli("status", "p", "--root", root, "--patches", registry.path, "--json")
    assert res.code == 5, (res.code, res.out, res.err)
    first, second = res.json()["files"][0]["hunks"]
    assert first["state"] == "unapplied", first
    assert second["detail"] == (f"read as unapplied, its image is at line {56 + shift}, but `git apply` would use "
                                f"the match at line {2 + shift}; a look-alike is near, and position cannot tell "
                                "which one is the hunk"), second


@pytest.mark.parametrize("shift", [0, 300])
def test_a_copy_after_the_hunk_that_follows_is_excluded_by_the_order_from_the_right(
    tmp_path: Path, registry: Registry, shift: int
) -> None:
    """Three hunks (-U1), the file with one line added at its top (the blob ids prove nothing). Hunk 1 has a copy
    of its pre-image between hunks 2 and 3; hunk 2 has one that ends inside hunk 3's image (hunk 3's first line
    is hunk 2's last). By order alone, from the right: hunk 2 must end before hunk 3 starts, so its copy is
    impossible and hunk 2's latest start is its own place, above hunk 1's copy, which is impossible too. Every
    hunk is certain, and apply applies each at its own place. Also with 300 lines above it all.

    Kills patchkit/judge/matching.py:353's right-to-left bound of possible_places: a place's end as `pos | span`,
    `pos - span`, `^`, `&`, `//`, ... and the bound taken from `latest[i + 0]`, `[i - 1]`, `[i & 1]`, `[i + 2]`
    (hunk 2's copy kept, so hunk 1's copy below hunk 2 kept, and hunk 1 read ambiguous; the full run of
    2026-12-06: no test had a copy that only the right-to-left pass excludes)."""
    lines = [b"p%d\n" % i for i in range(shift)] + [b"u%d\n" % i for i in range(60)]
    at = shift
    lines[at + 30:at + 33] = lines[at + 4:at + 7]  # hunk 1's pre-image again, between hunks 2 and 3
    lines[at + 39] = lines[at + 16]  # hunk 3's first line is hunk 2's last ...
    lines[at + 37:at + 40] = lines[at + 14:at + 17]  # ... and a copy of hunk 2's pre-image ends inside hunk 3
    new = list(lines)
    new[at + 5], new[at + 15], new[at + 40] = b"changed 5\n", b"changed 15\n", b"changed 40\n"
    _applied_below_a_line_added_on_top(tmp_path, registry, b"".join(lines), b"".join(new), 3, context=1)


def test_two_copies_each_excluded_by_its_own_certain_neighbours(tmp_path: Path, registry: Registry) -> None:
    """Six hunks (-U1); hunks 2 and 4 (1-based) each have a copy of their pre-image just above them, past the
    certain hunk before each; the file has one line added at its top (the blob ids prove nothing). Each copy is
    excluded by the gaps between its own certain neighbours: apply applies every hunk at its own place.

    Kills patchkit/judge/state.py:648:core/ReplaceBinaryOperator_Sub_RShift#9 (the run's left anchor looked for
    at `certain[first >> 1]`: for hunk 4 that is hunk 2, which is not certain, so hunk 4's copy was not excluded
    and it read ambiguous; the full run of 2026-12-06)."""
    lines = [b"u%d\n" % i for i in range(45)]
    lines[9:12] = lines[5:8] = [b"a1\n", b"a2\n", b"a3\n"]
    lines[23:26] = lines[19:22] = [b"b1\n", b"b2\n", b"b3\n"]
    old = b"".join(lines)
    new = lines.copy()
    for i in (3, 17, 31, 38):
        new[i] = b"changed %d\n" % i
    new[10], new[24] = b"A2\n", b"B2\n"
    _applied_below_a_line_added_on_top(tmp_path, registry, old, b"".join(new), 6, context=1)


def test_a_copy_is_excluded_by_the_certain_hunk_right_above_it_when_one_further_up_is_not(
    tmp_path: Path, registry: Registry
) -> None:
    """Seven hunks (-U1), the file with a line added on top (the blob ids prove nothing). Hunk 6 (1-based) has a
    copy of its pre-image right below hunk 5, too near it for the diff's gap; hunk 3 one right below hunk 2, so
    it is not certain either (both places keep the hunks in order), and hunks 4 and 5 are. Hunk 6's run starts
    at hunk 5, the certain hunk right above it, which excludes the copy; hunk 3's run, between hunks 2 and 4,
    excludes its own. Apply applies every hunk at its own place.

    Kills patchkit/judge/state.py:646:core/ReplaceBinaryOperator_Sub_RShift#8 (_exact_run's left walk asking
    `certain[first >> 1]` for `certain[first - 1]`: from hunk 6 it asked hunk 3, walked past hunk 5 and stopped
    at hunk 4, whose neighbour below, hunk 3, is no anchor: no run, and hunk 6 read ambiguous; ids of the full
    run of 2026-12-06)."""
    lines = [b"u%d\n" % i for i in range(56)]
    lines[33:36] = lines[37:40]  # hunk 6's pre-image, right below hunk 5's (30-32)
    lines[12:15] = lines[16:19]  # hunk 3's, right below hunk 2's (9-11)
    new = lines.copy()
    for i in (3, 10, 17, 24, 31, 38, 45):
        new[i] = b"changed %d\n" % i
    _applied_below_a_line_added_on_top(tmp_path, registry, b"".join(lines), b"".join(new), 7, context=1)


def test_a_file_of_300_hunks_whose_last_has_a_copy_is_read_by_the_gaps_to_its_end(
    tmp_path: Path, registry: Registry
) -> None:
    """300 hunks (-U3) in one file; the last one's trailing context is cut short by the end of the file and its
    pre-image also occurs above it, past the certain hunk before it; the file has a line added at its top (the
    blob ids prove nothing). The gaps from the certain hunk to the end exclude the copy: apply applies them all.

    Kills patchkit/judge/state.py:650:core/ReplaceComparisonOperator_Lt_IsNot#1 (the run's right walk as
    `past is not count`: past the cached small ints, index count of the certain list, an internal error) and
    :652's `past is count` (the same index); the full run of 2026-12-06."""
    lines = [b"u%d\n" % i for i in range(300 * 8 + 20)]
    region = [b"r1\n", b"r2\n", b"r3\n", b"r4\n", b"r5\n", b"r6\n"]
    lines[-6:] = region
    lines[-14:-8] = region  # the copy, between the 300th hunk's place and the one before
    old = list(lines)
    new = list(lines)
    for k in range(299):
        new[8 * k + 4] = b"changed %d\n" % k
    new[-3] = b"R4\n"
    _applied_below_a_line_added_on_top(tmp_path, registry, b"".join(old), b"".join(new), 300)


def test_a_hunk_with_five_copies_names_four_of_them(tmp_path: Path, registry: Registry) -> None:
    """One hunk whose pre-image occurs five more times in the file (a line added at the top: the blob ids prove
    nothing, and nothing excludes the copies): ambiguous, its detail naming the first four other places, not
    more, not fewer.

    Kills patchkit/judge/state.py:658's `others[:5]` and `others[:3]` (the full run of 2026-12-06)."""
    block = [b"x = 1\n", b"y = 2\n", b"z = 3\n"]
    lines = [b"u%d\n" % i for i in range(60)]
    for start in (5, 14, 23, 32, 41, 50):
        lines[start:start + 3] = block
    new = lines.copy()
    new[24] = b"y = 20\n"
    diff = git_diff(tmp_path, {"engine/a.py": b"".join(lines)}, {"engine/a.py": b"".join(new)}, context=1)
    registry.add("six", diff)
    root = tmp_path / "engine-root"
    write_tree(root, {"engine/a.py": b"top\n" + b"".join(lines)})
    res = cli("status", "six", "--root", root, "--patches", registry.path, "--json")
    assert res.code == 5, (res.code, res.out, res.err)
    (hunk,) = res.json()["files"][0]["hunks"]
    assert hunk["state"] == "ambiguous" and hunk["detail"].count("is also at line") == 4, hunk


@pytest.mark.parametrize(("above", "mirrored"), [(0, False), (12, False), (0, True)])
def test_a_run_of_two_uncertain_hunks_excludes_the_second_ones_copy_by_the_first_ones_earliest_end(
    tmp_path: Path, registry: Registry, above: int, mirrored: bool
) -> None:
    """Four hunks (-U1): the first and the last certain, the two between each with a copy of its pre-image, the
    file with a line added on top (the blob ids prove nothing). Hunk 2's copy sits right below hunk 1, too near it
    for the diff's gap, so hunk 2 can only end at its own place; hunk 3's copy sits right below hunk 2's own
    place, too near it too (it would fit only if hunk 2 could end at its copy). Both copies are excluded, and
    apply applies every hunk at its own place.

    Kills patchkit/judge/state.py:683's filter of the places a run's hunk may take on the way from its left
    anchor (the gap dropped or bent: `low[m] - gaps[m]`, `| gaps[m]`, `^`, `&`, `>>`, `==`, `<=`, `!=`, `is`,
    `is not`; the ends as `pos - span`, `pos | span`, `pos ^ span`): no test had a run of two uncertain hunks,
    where the first one's places bound the second one's (the full run of 2026-12-06). With 12 lines and two
    more certain hunks above it all, the run starts at hunk 4: kills :681's `located[j >> 1]` for the left
    anchor (hunk 2's end taken for hunk 3's). Mirrored (the file's lines in reverse order: the copies below
    their hunks, bounded by the right pass's latest starts): kills :689's `p.pos ^ gaps[m]`."""
    # 0-based, before the line on top: hunk 1's image at 2-4; the copies at 14 and 25, the own places at 18 and
    # 28; hunk 4's image at 35-37. On the tree (one line lower) the numbers share bits (6 | 13 = 15, 19 | 3 =
    # 19) so that `|` and `^` for `+` move the bounds too.
    lines = [b"u%d\n" % i for i in range(45)]
    lines[14:17] = lines[18:21] = [b"a1\n", b"a2\n", b"a3\n"]
    lines[25:28] = lines[28:31] = [b"b1\n", b"b2\n", b"b3\n"]
    new = lines.copy()
    new[3], new[19], new[29], new[36] = b"H0\n", b"A2\n", b"B2\n", b"H3\n"
    top = [b"v%d\n" % i for i in range(above)]
    changed_top = [b"V%d\n" % i if i in (3, 8) else line for i, line in enumerate(top)]
    old_lines, new_lines = top + lines, changed_top + new
    if mirrored:
        old_lines, new_lines = old_lines[::-1], new_lines[::-1]
    _applied_below_a_line_added_on_top(tmp_path, registry, b"".join(old_lines), b"".join(new_lines),
                                       6 if above else 4, context=1)


def test_a_run_of_two_uncertain_hunks_is_bounded_by_the_whole_length_of_the_hunk_above_it(
    tmp_path: Path, registry: Registry
) -> None:
    """The run of two uncertain hunks above (12 lines and two certain hunks over it all), with the certain hunk
    right above the run changing five lines (a 7-line image, the hunks over it 3): the run's left anchor is that
    hunk's end, 4 lines below where a 3-line image would end, and hunk 4's copy sits just 4 lines above its own
    place: excluded by the whole length only.

    Kills patchkit/judge/state.py:681:core/ReplaceBinaryOperator_Sub_RShift#11 (the left anchor's span taken from
    hunk j >> 1, the 3-line hunk 2, for hunk j - 1's; ids of the full run of 2026-12-06)."""
    lines = [b"u%d\n" % i for i in range(45)]
    lines[14:17] = lines[18:21] = [b"a1\n", b"a2\n", b"a3\n"]
    lines[25:28] = lines[28:31] = [b"b1\n", b"b2\n", b"b3\n"]
    new = lines.copy()
    new[3:8] = [b"H0 %d\n" % i for i in range(5)]
    new[19], new[29], new[36] = b"A2\n", b"B2\n", b"H3\n"
    top = [b"v%d\n" % i for i in range(12)]
    changed_top = [b"V%d\n" % i if i in (3, 8) else line for i, line in enumerate(top)]
    _applied_below_a_line_added_on_top(tmp_path, registry, b"".join(top + lines), b"".join(changed_top + new), 6,
                                       context=1)


def test_a_tie_reports_the_hunks_below_it_as_expected_by_the_first_reading(
    tmp_path: Path, registry: Registry
) -> None:
    """Two hunks (-U1): hunk 1 adds two lines (a 3-line pre-image, a 5-line post-image), hunk 2 changes one. On
    the tree hunk 1's pre-image sits 2 lines above its expected line and its post-image 2 below (a tie), and hunk
    2's pre-image 3 lines below where either reading expects it (line 17 after the pre-image, 23 after the
    post-image): both readings hold equally near, hunk 1 is ambiguous, and hunk 2, read alike, is reported as
    the first reading (hunk 1 unapplied) expects it: at line 17.

    Kills patchkit/judge/state.py:756:core/NumberReplacer#162 and #163 (`readings[1]`, `readings[-1]` as the
    tie's template: hunk 2 expected at line 23; ids of the full run of 2026-12-06)."""
    top = [f"L{i}\n" for i in range(10)]
    fill, tail = [f"f{i}\n" for i in range(5)], [f"t{i}\n" for i in range(5)]
    pre1, post1 = ["c1\n", "X\n", "c2\n"], ["c1\n", "Y1\n", "Y2\n", "Y3\n", "c2\n"]
    pre2, post2 = ["d1\n", "Z\n", "d2\n"], ["d1\n", "W\n", "d2\n"]
    old, new = top + pre1 + fill + pre2 + tail, top + post1 + fill + post2 + tail
    tree = top[:8] + pre1 + ["q\n"] + post1 + ["r1\n", "r2\n"] + pre2 + tail
    registry.add("p", "".join(difflib.unified_diff(old, new, "a/engine/f.py", "b/engine/f.py", n=1)).encode())
    root = tmp_path / "engine-root"
    write_tree(root, {"engine/f.py": "".join(tree).encode()})
    res = cli("status", "p", "--root", root, "--patches", registry.path, "--json")
    assert res.code == 5, (res.code, res.out, res.err)
    first, second = res.json()["files"][0]["hunks"]
    assert first["state"] == "ambiguous" and "each reading of the whole file holds" in first["detail"], first
    assert (second["state"], second["found_line"], second["expected_line"]) == ("unapplied", 20, 17), second


@pytest.mark.parametrize("above", [0, 8])
def test_a_hunk_whose_images_sit_equally_far_above_and_below_is_a_tie_even_at_line_1(
    tmp_path: Path, registry: Registry, above: int
) -> None:
    """A hunk (-U1) expected at line 3; on the tree its pre-image sits at line 1 and its post-image at line 5, two
    lines from it either way: position cannot tell them apart (ambiguous, the tie's detail), and the image at the
    file's first line is not nearer for being at line 1. With 8 lines and a hunk of their own above (read alike
    by both readings), the tie is still found past it.

    Kills patchkit/judge/state.py:701's distances (`pos or 1`, `pos or -1`: a reading at line 1 measured from
    line 2 or 0; `pos | e`, `pos ^ e` for `pos - e`) and, with the hunk above, :761's `break` for `continue` (the
    hunks after the first one both readings agree on left undoubted); the full run of 2026-12-06."""
    head = [b"h%d\n" % i for i in range(above)]
    new_head = [b"H3\n" if i == 3 else line for i, line in enumerate(head)]
    tail = b"".join(b"tail %d\n" % i for i in range(10))
    base = b"".join(head) + b"a\nb\np\nX\nq\n" + tail
    patched = b"".join(new_head) + b"a\nb\np\nY\nq\n" + tail
    diff = git_diff(tmp_path, {"engine/f.py": base}, {"engine/f.py": patched}, context=1)
    assert b"@@ -%d,3 +%d,3 @@" % (above + 3, above + 3) in diff, diff
    tree = b"".join(head) + b"p\nX\nq\nz\np\nY\nq\n" + tail
    _ambiguous_and_left_alone(tmp_path, registry, diff, tree, "each reading of the whole file holds")


def test_a_file_of_one_repeated_line_with_more_readings_than_the_bound_is_not_decided(
    tmp_path: Path, registry: Registry
) -> None:
    """A file of 40 identical lines, a line on top, and a diff (hand-written, -U1) that puts one more such line in
    at eight places: with the line on top no blob id proves anything, and by position every hunk reads both ways
    where its header puts it: 256 readings, cut at the bound (64). The file is ambiguous, never decided: every
    hunk, on which the kept readings disagree, is ambiguous for the tie, and none gets the cut list's own doubt
    ("too many look-alikes"), which is for a cut list whose readings all agree.

    Kills patchkit/judge/state.py:771's test of a cut list (`cut or all(...)`: the first hunk doubted as well;
    the comparisons of the states as `>`, `<`, ...; the full run of 2026-12-06): no test had a list cut short."""
    line = b"x = 0\n"
    places = [3 + 5 * k for k in range(8)]
    hunks = b"".join(b"@@ -%d,2 +%d,3 @@\n x = 0\n+x = 0\n x = 0\n" % (at, at + k) for k, at in enumerate(places))
    diff = b"diff --git a/engine/f.py b/engine/f.py\n--- a/engine/f.py\n+++ b/engine/f.py\n" + hunks
    registry.add("p", diff)
    root = tmp_path / "engine-root"
    write_tree(root, {"engine/f.py": b"top\n" + line * 40})
    res = cli("status", "p", "--root", root, "--patches", registry.path, "--json")
    assert res.code == 5 and res.json()["state"] == "ambiguous", (res.code, res.out, res.err)
    hunks = res.json()["files"][0]["hunks"]
    tie = "each reading of the whole file holds"
    assert all(h["state"] == "ambiguous" and tie in h["detail"] for h in hunks), hunks
    assert "too many equally near look-alikes" not in res.out, res.out


@pytest.mark.parametrize("case", ["created, as the diff has it", "created, longer", "created, shorter",
                                  "created, executable", "deleted, as the diff has it", "deleted, other content"])
def test_a_created_or_deleted_file_is_read_whole_and_reported_where_it_was_found(
    tmp_path: Path, registry: Registry, case: str
) -> None:
    """A diff that creates engine/new.py and deletes engine/old.py, on trees where the file at stake is as the
    diff has it (found at line 1), longer or shorter than it (a conflict: other content), or with the other exec
    bit (a conflict naming the modes). The verdict, its detail and the line it was found at, in JSON.

    Kills patchkit/judge/state.py:854's and :858's byte comparisons as `>=`, `<=` and `is not` (a file with the
    diff's bytes and more, or fewer, read as the diff's; every conflict's detail as the mode one) and :871's line
    found (`1`, `-1` for line 0, `not snap.exists`, `or`, `== CONFLICT`) and expected (line 1); the full run of
    2026-12-06."""
    new = b"".join(b"new line %d\n" % i for i in range(5))
    old = b"".join(b"old line %d\n" % i for i in range(5))
    keep = {"engine/keep.py": b"keep = 1\n"}
    diff = git_diff(tmp_path, {**keep, "engine/old.py": old}, {"engine/old.py": None, "engine/new.py": new})
    registry.add("p", diff)
    tree: dict[str, FileSpec] = {**keep, "engine/old.py": old}
    if case.startswith("created"):
        tree["engine/new.py"] = {"created, as the diff has it": new, "created, longer": new + b"more\n",
                                 "created, shorter": new[:-5], "created, executable": (new, True)}[case]
    elif case == "deleted, other content":
        tree["engine/old.py"] = old + b"theirs\n"
    root = tmp_path / "engine-root"
    write_tree(root, tree)
    res = cli("status", "p", "--root", root, "--patches", registry.path, "--json")
    by_path = {f["path"]: f for f in res.json()["files"]}
    at_stake = by_path["engine/new.py" if case.startswith("created") else "engine/old.py"]
    (hunk,) = at_stake["hunks"]
    other = "already exists with content other than the file this diff creates"
    modes = "exists with the new content but mode 755; the diff creates it 100644"
    want = {
        "created, as the diff has it": ("applied", 1, None),
        "created, longer": ("conflict", None, other),
        "created, shorter": ("conflict", None, other),
        "created, executable": ("conflict", None, modes),
        "deleted, as the diff has it": ("unapplied", 1, None),
        "deleted, other content": ("conflict", None, "exists with content other than the file this diff deletes"),
    }[case]
    assert (at_stake["state"], hunk["found_line"], at_stake["detail"]) == want, (at_stake, res.out)
    assert hunk["expected_line"] == 1, hunk
