"""plan.py and rewrite.py: every new file computed in memory first; one bad file means nothing is written."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from patchkit.diff.diffs import parse_diff
from patchkit.diff.filtering import filter_diff
from patchkit.errors import ExitCode, InternalError, RefusedError
from patchkit.judge.rewrite import with_exec
from patchkit.outcome import PatchState
from patchkit.plan.plan import plan_changes
from tests.conftest import Registry, cli, git_diff, read_tree, write_tree
from tests.rooted import scan_tree
from tests.test_properties import SETTINGS, edits, git_apply, hunks_of, setup, tree_changes, workspace

PROPERTY = settings(SETTINGS, max_examples=max(SETTINGS.max_examples // 2, 20))

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


# The plan's check (state.judge_planned) takes what the tree's round trips judged instead of judging the
# planned tree again. It must give exactly the verdicts a fresh judgement of that tree gives, field for field
# (positions, expected lines, details, what its own round trip would find), and it must not judge again.


def _planned_and_fresh(tree, forward: bool, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    from patchkit.judge import state

    calls = []
    real = state._judge_lines
    monkeypatch.setattr(state, "_judge_lines", lambda *a: calls.append(a) or real(*a))
    try:
        plan = plan_changes(tree, forward=forward)
    except RefusedError:
        return None
    finally:
        monkeypatch.setattr(state, "_judge_lines", real)
    after = {**tree.snapshots, **{c.path: c.after for c in plan.changes}}
    return plan.verdicts, tuple(state.judge_sections(tree.hunk_set.files, after)), len(calls)


def _check_both_ways(tree, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    checked = 0
    for forward in (True, False):
        found = _planned_and_fresh(tree, forward, monkeypatch)
        if found is not None:
            planned, fresh, judged = found
            assert planned == fresh
            assert judged == 0  # taken from the round trip, not judged again
            checked += 1
    event(f"plans checked: {checked}")  # pytest --hypothesis-show-statistics: how many examples had one


@PROPERTY
@given(edits(), st.data())
def test_the_plans_check_is_a_fresh_judgement_of_the_planned_file(change, data) -> None:  # type: ignore[no-untyped-def]
    # one file, repeated lines, CRLF, no final newline, any subset of its hunks applied (by git)
    old, new = change
    with workspace() as work, pytest.MonkeyPatch.context() as monkeypatch:
        _, root, diff = setup(work, old, new)
        header, hunks = hunks_of(diff)
        if not hunks:
            return
        chosen = data.draw(st.sets(st.integers(0, len(hunks) - 1), max_size=len(hunks)))
        if chosen:
            git_apply(work, root, header + b"".join(h for i, h in enumerate(hunks) if i in chosen))
        _check_both_ways(scan_tree(root, filter_diff(parse_diff(diff, 1, "d"), [])), monkeypatch)


@PROPERTY
@given(tree_changes(), st.data())
def test_the_plans_check_is_a_fresh_judgement_of_the_planned_tree(change, data) -> None:  # type: ignore[no-untyped-def]
    # renames, deletes, creates, mode changes; each file of the tree from before or after the diff
    before, target = change
    with workspace() as work, pytest.MonkeyPatch.context() as monkeypatch:
        diff = git_diff(work, before, target)
        if not diff:
            return
        root = work / "engine"
        root.mkdir()
        write_tree(root, before)
        done = data.draw(st.sets(st.sampled_from(sorted(target))))
        write_tree(root, {name: target[name] for name in done})
        for name in done:
            if name.startswith("pkg/moved/"):  # a rename done: its old name is gone
                (root / name.replace("pkg/moved/", "pkg/")).unlink(missing_ok=True)
        _check_both_ways(scan_tree(root, filter_diff(parse_diff(diff, 1, "d"), [])), monkeypatch)


def test_the_plans_check_judges_again_what_the_round_trip_cannot_vouch_for(
    tmp_path: Path, engine: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_tree(engine, BEFORE)
    tree = scan_tree(engine, hunk_set(tmp_path))
    planned, fresh, judged = _planned_and_fresh(tree, True, monkeypatch)
    assert planned == fresh and judged == 0
    edited = [v for v in tree.files if v.moved[1] is not None]
    assert sorted(v.section.path for v in edited) == ["a.py", "z.py"]

    def forged(**change):  # type: ignore[no-untyped-def]
        return replace(tree, files=tuple(
            replace(v, moved=(v.moved[0], v.moved[1]._replace(**change))) if v.moved[1] else v for v in tree.files
        ))

    # a line count the written content does not have: judged again
    planned, fresh, judged = _planned_and_fresh(forged(lines=edited[0].moved[1].lines + 1), True, monkeypatch)
    assert planned == fresh and judged == 2
    # a reading whose way back does not lead where the tree's reading is: judged again
    shifted = edited[0].moved[1].reading
    wrong = shifted._replace(located=tuple(loc._replace(pos=(loc.pos or 0) + 1) for loc in shifted.located))
    planned, fresh, judged = _planned_and_fresh(forged(reading=wrong), True, monkeypatch)
    assert planned == fresh and judged == 2
