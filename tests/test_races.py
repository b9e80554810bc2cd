"""Concurrency: processes started side by side on one root, released at the same instant through a pipe."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import cli
from tests.safety_helpers import (
    REPO,
    Case,
    Child,
    Run,
    build_case,
    describe_mix,
    fast_workdir,
    fault_env,
    image,
    race,
    run_forked,
    start_forked,
    wait_forked,
    whole_state,
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


# ------------------------------------------------------------------ restarts under the shared lock (issue #25)


def _restart(case: Case, root: Path, *extra: str, env: dict[str, str] | None = None) -> Run:
    return run_forked(case.args("apply", root, "--json", *extra), {"PATCHKIT_DEBUG_FASTPATH": "1", **(env or {})})


@contextlib.contextmanager
def _flocked(root: Path, how: str) -> Iterator[None]:
    """The root's lock file held ("LOCK_SH", "LOCK_EX") by another process, as another patchkit process would
    hold it (not this one: a forked run would inherit the descriptor, and the lock with it)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time\n"
         f"fd = os.open(sys.argv[1], os.O_RDWR | os.O_NOFOLLOW); fcntl.flock(fd, fcntl.{how}); print(flush=True)\n"
         "time.sleep(600)", str(root / ".patchkit" / "lock")],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"\n"  # held
        yield
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()


def test_restarts_check_beside_each_other_and_never_while_a_writer_holds_the_lock(case: Case) -> None:
    root = case.fresh("restart-shared", patched=True)  # applied by patchkit: its records answer a restart
    with _flocked(root, "LOCK_SH"):  # another restart checking right now
        beside = _restart(case, root, "--lock-timeout", "0.5")
    assert beside.code == 0 and beside.json()["result"] == "already-applied", beside.err
    assert "fast path used" in beside.err
    with _flocked(root, "LOCK_EX"):  # a writer in the middle of its transaction
        during = _restart(case, root, "--lock-timeout", "0.5")
    assert during.code == 6 and "has held the lock" in during.err, during  # no answer at all, not a guess
    assert image(root) == case.patched


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat_file:
        return stat_file.read().rpartition(")")[2].split()[0] == "T"


# Stopped after 13 operations, the revert has written its journal and no file yet (one operation more since it
# also removes the kept verdicts, applied/<id>.files); after 30, some files.
@pytest.mark.parametrize(("after", "tree"), [(13, "before"), (30, None)], ids=["journal-only", "half-written"])
def test_a_restart_never_answers_from_a_half_written_tree_and_recovers_a_killed_writer_first(
    case: Case, after: int, tree: str | None
) -> None:
    root = case.fresh(f"restart-mid-write-{after}", patched=True)
    # A revert stopped (SIGSTOP) in the middle of its transaction: lock held, journal written, the tree mixed.
    fault = {"PATCHKIT_FAULT_AFTER": str(after), "PATCHKIT_FAULT_SIGNAL": "STOP"}
    writer = start_forked(case.args("revert", root), fault)
    try:
        deadline = time.monotonic() + 60
        while not _stopped(writer.pid):
            assert time.monotonic() < deadline, "the writer never reached its fault"
            time.sleep(0.02)
        assert (root / ".patchkit" / "journal.json").exists()
        assert whole_state(case, root, forward=False) == tree
        during = _restart(case, root, "--lock-timeout", "0.5")
        assert during.code == 6, during  # it waits for the writer: no answer from the tree as it is now
    finally:
        os.kill(writer.pid, signal.SIGKILL)
        os.kill(writer.pid, signal.SIGCONT)
        assert wait_forked(writer).killed
    # The writer is gone and its journal is left: the restart rolls the revert back before it answers.
    after_kill = _restart(case, root)
    assert after_kill.code == 0 and after_kill.json()["result"] == "already-applied", after_kill.err
    assert "recovered an interrupted revert" in after_kill.err, after_kill.err
    assert not (root / ".patchkit" / "journal.json").exists()
    assert image(root) == case.patched, describe_mix(case.patched, root)


def _wait_queued_for_lock(child: Child, root: Path) -> None:
    """Until the start holds the root's lock file open: with no record it declined the fast path without
    opening it, parsed, and now waits on it to look again (the only other opener, recovery, has no journal)."""
    lock = str(root / ".patchkit" / "lock")
    deadline = time.monotonic() + 60
    while True:
        with contextlib.suppress(OSError):  # an fd may close between listdir and readlink
            fds = Path(f"/proc/{child.pid}/fd")
            if any(os.readlink(fds / fd) == lock for fd in os.listdir(fds)):
                return
        assert time.monotonic() < deadline, "the start never queued for the lock after its parse"
        time.sleep(0.02)


def test_a_start_that_parsed_while_another_wrote_answers_from_the_new_records(case: Case) -> None:
    done = case.fresh("restart-written-meanwhile-done", patched=True)
    root = case.fresh("restart-written-meanwhile")
    (root / ".patchkit").mkdir(mode=0o755)
    (root / ".patchkit" / "lock").touch(mode=0o644)
    with _flocked(root, "LOCK_EX"):  # the first start is writing
        child = start_forked(case.args("apply", root, "--json"), {"PATCHKIT_DEBUG_FASTPATH": "1"})
        _wait_queued_for_lock(child, root)  # this one found no record, parsed, and now waits for the lock
        # What the first start's transaction leaves: the patched tree and its records.
        shutil.rmtree(root / "engine")
        shutil.copytree(done / "engine", root / "engine", symlinks=True)
        shutil.copytree(done / ".patchkit" / "applied", root / ".patchkit" / "applied")
    run = wait_forked(child)
    assert run.code == 0 and run.json()["result"] == "already-applied", run.err
    assert "fast path used" in run.err  # looked again under the lock: no full judgement queued for the writer
    assert image(root) == case.patched


def test_a_series_start_that_parsed_while_another_wrote_answers_from_the_new_records(case: Case) -> None:
    done = case.fresh("series-written-meanwhile-done", patched=True)
    root = case.fresh("series-written-meanwhile")
    (root / ".patchkit").mkdir(mode=0o755)
    (root / ".patchkit" / "lock").touch(mode=0o644)
    args = ["apply", "--all", "--root", str(root), "--patches", str(case.patches), "--json"]
    with _flocked(root, "LOCK_EX"):
        child = start_forked(args, {"PATCHKIT_DEBUG_FASTPATH": "1"})
        _wait_queued_for_lock(child, root)
        shutil.rmtree(root / "engine")
        shutil.copytree(done / "engine", root / "engine", symlinks=True)
        shutil.copytree(done / ".patchkit" / "applied", root / ".patchkit" / "applied")
    run = wait_forked(child)
    assert run.code == 0 and run.json()["result"] == "already-applied", run.err
    assert "fast path used" in run.err
    assert image(root) == case.patched


def test_sixteen_series_starts_on_one_root_one_writer_all_ready(case: Case) -> None:
    root = case.fresh("series-starts")
    read_end, write_end = os.pipe()
    args = ["apply", "--all", "--root", str(root), "--patches", str(case.patches), "--json"]
    children = [start_forked(args, {}, gate=(read_end, write_end)) for _ in range(16)]
    os.close(read_end)
    os.close(write_end)
    runs = [wait_forked(child) for child in children]
    assert [r.code for r in runs] == [0] * 16, [r.err for r in runs]
    assert Counter(r.json()["result"] for r in runs) == {"applied": 1, "already-applied": 15}
    assert image(root) == case.patched, describe_mix(case.patched, root)
