"""plan.py and rewrite.py: every new file computed in memory first; one bad file means nothing is written."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from patchkit.diff.diffs import parse_diff
from patchkit.diff.filtering import filter_diff
from patchkit.errors import ExitCode, InternalError, RefusedError
from patchkit.judge.rewrite import with_exec
from patchkit.outcome import PatchState
from patchkit.plan.plan import plan_changes
from tests.conftest import Registry, cli, git_diff, read_tree, write_tree
from tests.rooted import scan_tree

BEFORE = {
    "a.py": b"".join(b"a%d\n" % i for i in range(20)),
    "z.py": b"".join(b"z%d\n" % i for i in range(20)),
    "run.sh": b"#!/bin/sh\n",
}
AFTER = {
    "a.py": BEFORE["a.py"].replace(b"a5\n", b"a five\n"),
    "z.py": BEFORE["z.py"].replace(b"z15\n", b"z fifteen\n"),
    "run.sh": (b"#!/bin/sh\n", True),
    "new/made.py": b"made\n",
}


def hunk_set(tmp_path: Path):  # type: ignore[no-untyped-def]
    return filter_diff(parse_diff(git_diff(tmp_path, BEFORE, AFTER), 1, "d"), [])


def test_forward_plan_is_the_target_and_reverse_plan_the_original(tmp_path: Path, engine: Path) -> None:
    write_tree(engine, BEFORE)
    hs = hunk_set(tmp_path)
    plan = plan_changes(scan_tree(engine, hs), forward=True)
    after = {c.path: c.after for c in plan.changes}
    assert after["a.py"].data == AFTER["a.py"]
    assert after["z.py"].data == AFTER["z.py"]
    assert after["new/made.py"].data == b"made\n"
    assert after["run.sh"].mode is not None and after["run.sh"].mode & 0o111 == 0o111
    assert after["run.sh"].data == BEFORE["run.sh"]  # a mode-only change keeps the bytes
    assert read_tree(engine)["a.py"][0] == BEFORE["a.py"]  # planning writes nothing

    write_tree(engine, AFTER)
    tree = scan_tree(engine, hs)
    assert tree.state is PatchState.APPLIED
    back = {c.path: c.after for c in plan_changes(tree, forward=False).changes}
    assert back["a.py"].data == BEFORE["a.py"] and not back["new/made.py"].exists
    assert back["run.sh"].mode is not None and back["run.sh"].mode & 0o111 == 0


def test_the_plans_verdicts_are_what_a_rerun_judges_on_the_tree_it_leaves(tmp_path: Path, engine: Path) -> None:
    # The write stage stores these in the applied record instead of judging the written tree again.
    def states(verdicts):  # type: ignore[no-untyped-def]
        return [(v.section.path, v.state, [h.state for h in v.hunks], v.presence, v.mode) for v in verdicts]

    write_tree(engine, BEFORE)
    hs = hunk_set(tmp_path)
    unapplied = scan_tree(engine, hs)
    forward = plan_changes(unapplied, forward=True)
    assert forward.sections == hs.files
    write_tree(engine, AFTER)
    applied = scan_tree(engine, hs)
    assert states(forward.verdicts) == states(applied.files)
    assert {v.state for v in forward.verdicts} == {PatchState.APPLIED}
    assert states(plan_changes(applied, forward=False).verdicts) == states(unapplied.files)


def test_conflict_in_the_last_file_refuses_the_whole_plan(tmp_path: Path, engine: Path) -> None:
    write_tree(engine, {**BEFORE, "z.py": BEFORE["z.py"].replace(b"z14\n", b"local\n")})
    with pytest.raises(RefusedError, match=r"z.py"):
        plan_changes(scan_tree(engine, hunk_set(tmp_path)), forward=True)


def test_cli_writes_nothing_when_the_last_file_conflicts(tmp_path: Path, registry: Registry, engine: Path) -> None:
    registry.add("p", git_diff(tmp_path, BEFORE, AFTER))
    write_tree(engine, {**BEFORE, "z.py": BEFORE["z.py"].replace(b"z14\n", b"local\n")})
    before = read_tree(engine)
    res = cli("apply", "p", "--root", engine, "--patches", registry.path, "--json")
    assert res.code == 1 and res.json()["result"] == "refused"
    assert read_tree(engine) == before
    assert not (engine / "new").exists()


@pytest.mark.parametrize(
    ("mode", "executable", "expected"),
    [(0o644, True, 0o755), (0o600, True, 0o700), (0o640, True, 0o750), (0o755, False, 0o644), (0o4755, False, 0o4644)],
)
def test_exec_bits_follow_read_bits(mode: int, executable: bool, expected: int) -> None:
    assert with_exec(mode, executable) == expected


def test_a_plan_whose_result_does_not_read_as_its_goal_is_an_internal_error(tmp_path: Path, engine: Path) -> None:
    # state.py only reports a state whose replay passed its round trip, so this cannot come from a real
    # judgement: a tree state that leaves out one unapplied section makes the planned tree read partial.
    write_tree(engine, BEFORE)
    tree = scan_tree(engine, hunk_set(tmp_path))
    assert tree.state is PatchState.UNAPPLIED
    lacking = replace(tree, files=tuple(v for v in tree.files if v.section.path != "z.py"))
    with pytest.raises(InternalError, match="would read as partial") as caught:
        plan_changes(lacking, forward=True)
    assert caught.value.exit_code is ExitCode.INTERNAL and int(ExitCode.INTERNAL) == 10
    assert read_tree(engine)["z.py"][0] == BEFORE["z.py"]
