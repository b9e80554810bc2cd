"""Concurrency: processes started side by side on one root, released at the same instant through a pipe."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator

import pytest

from tests.conftest import cli
from tests.safety_helpers import (
    REPO,
    Case,
    build_case,
    describe_mix,
    fast_workdir,
    fault_env,
    image,
    race,
    run_forked,
)

RACERS = 8


@pytest.fixture(scope="module")
def case(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Case]:
    with fast_workdir(tmp_path_factory.mktemp("races")) as workdir:
        yield build_case(workdir)


@pytest.mark.parametrize("round_", range(3))
def test_eight_appliers_exactly_one_writes(case: Case, round_: int) -> None:
    root = case.fresh(f"eight-{round_}")
    runs = race(case, root, [("apply", {})] * RACERS)
    assert [r.code for r in runs] == [0] * RACERS, [r.err for r in runs]
    results = Counter(r.json()["result"] for r in runs)
    assert results == {"applied": 1, "already-applied": RACERS - 1}
    assert image(root) == case.patched, describe_mix(case.patched, root)


@pytest.mark.parametrize("round_", range(4))
def test_apply_and_revert_racing_leave_a_whole_tree(case: Case, round_: int) -> None:
    root = case.fresh(f"mixed-{round_}", patched=bool(round_ % 2))
    actions = ["apply", "revert"] * (RACERS // 2)
    runs = race(case, root, [(a, {}) for a in actions])
    assert all(r.code == 0 for r in runs), [r.err for r in runs]
    # A revert recreates a deleted file with the default mode, as git apply -R does: "before" is either the
    # pristine tree or the reverted one.
    now = image(root)
    end = "after" if now == case.patched else "before" if now in (case.original, case.reverted) else None
    assert end is not None, describe_mix(case.original, root)
    # Serialised by the lock, every writer saw what the one before it left, so writes alternate: the end
    # state is the start state toggled once per write.
    results = Counter(r.json()["result"] for r in runs)
    toggles = results["applied"] - results["reverted"]
    assert toggles in ((0, -1) if round_ % 2 else (0, 1)), results
    assert end == ("after" if (round_ % 2) + toggles else "before")
    status = run_forked(case.args("status", root, "--json")).json()["state"]
    assert status == {"before": "unapplied", "after": "applied"}[end]


def test_a_writer_killed_mid_race_is_recovered_by_the_others(case: Case) -> None:
    root = case.fresh("killed-racer")
    runs = race(case, root, [("apply", fault_env(30))] + [("apply", {})] * (RACERS - 1))
    survivors = [r for r in runs if not r.killed]
    assert all(r.code == 0 for r in survivors), [r.err for r in survivors]
    assert Counter(r.json()["result"] for r in survivors)["applied"] == 1
    assert image(root) == case.patched, describe_mix(case.patched, root)
    if runs[0].killed:  # the faulty writer got the lock first: someone must have said it rolled it back
        assert sum("recovered an interrupted apply" in r.err for r in survivors) == 1


def test_status_waits_for_a_writer_and_never_sees_half_a_tree(case: Case) -> None:
    root = case.fresh("readers")
    runs = race(case, root, [("apply", {})] + [("status", {})] * (RACERS - 1))
    assert runs[0].code == 0
    assert {r.json()["state"] for r in runs[1:]} <= {"unapplied", "applied"}
    assert image(root) == case.patched


def test_lock_timeout_exits_6_with_a_clear_message(case: Case) -> None:
    root = case.fresh("timeout")
    (root / ".patchkit").mkdir()
    fd = os.open(root / ".patchkit" / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        run = run_forked(case.args("apply", root, "--lock-timeout", "0.3"))
        status = run_forked(case.args("status", root, "--lock-timeout", "0"))
    finally:
        os.close(fd)
    assert run.code == 6 and status.code == 6
    # the holder is this test process, not patchkit: the kernel's lock table names it
    assert f"a process (pid {os.getpid()}) has held the lock for over 0.3s" in run.err
    assert "hint: wait for it to finish, or raise --lock-timeout" in run.err
    assert image(root) == case.original
    assert run_forked(case.args("apply", root, "--lock-timeout", "0")).code == 0  # released with the holder


def test_eight_fresh_interpreters_racing(case: Case) -> None:
    """The same race with real `python -m patchkit` processes: nothing shared but the file system."""
    root = case.fresh("interpreters")
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "patchkit", *case.args("apply", root, "--json")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO,
        )
        for _ in range(RACERS)
    ]
    outputs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0] * RACERS, [err for _, err in outputs]
    results = Counter(json.loads(out)["result"] for out, _ in outputs)
    assert results == {"applied": 1, "already-applied": RACERS - 1}
    assert image(root) == case.patched


@pytest.mark.parametrize("round_", range(3))
def test_readers_of_a_fresh_tree_never_see_the_first_apply_half_way(case: Case, round_: int) -> None:
    # No lock file exists yet and readers create none: they lock the root folder, which the writer takes too.
    root = case.fresh(f"first-apply-{round_}")
    runs = race(case, root, [("apply", {})] + [("status", {})] * (RACERS - 1))
    assert runs[0].code == 0, runs[0].err
    states = Counter(r.json()["state"] for r in runs[1:])
    assert set(states) <= {"unapplied", "applied"}, states
    assert image(root) == case.patched


@pytest.mark.parametrize("err", [errno.ENOLCK, errno.EOPNOTSUPP])
def test_a_filesystem_without_locks_is_a_clear_refusal_never_a_silent_race(
    case: Case, err: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where flock is refused (an NFSv3 mount without lockd, some FUSE): exit 6, said so, nothing written."""
    root = case.fresh(f"no-locks-{err}")

    def refuse(fd: int, flags: int) -> None:
        raise OSError(err, os.strerror(err))

    monkeypatch.setattr("patchkit.workspace.lock.fcntl.flock", refuse)
    for action in ("apply", "status"):
        run = cli(*case.args(action, root))
        assert run.code == 6, (action, run.err)
        assert "refuses file locks" in run.err and "local storage" in run.err
    assert image(root) == case.original
