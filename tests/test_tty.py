"""On a real terminal (a pseudo-terminal): colour conventions, progress and the lock-wait note."""

from __future__ import annotations

import fcntl
import json
import os
import pwd
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import Registry, cli, git_diff, write_tree
from tests.output_helpers import cli_env, command, run_on_tty
from tests.schema_check import check

ESC = "\x1b["
BEFORE = {"eng/a.py": b"".join(b"line %d\n" % i for i in range(12))}
AFTER = {"eng/a.py": BEFORE["eng/a.py"].replace(b"line 4\n", b"line four\n")}


@pytest.fixture
def args(tmp_path: Path, registry: Registry, engine: Path) -> list[str]:
    registry.add("p", git_diff(tmp_path, BEFORE, AFTER))
    write_tree(engine, BEFORE)
    return ["--root", str(engine), "--patches", str(registry.path)]


@pytest.mark.parametrize(
    ("env", "options", "stdout_tty", "coloured"),
    [
        ({}, [], True, True),  # a terminal: colour
        ({}, [], False, False),  # a pipe: none
        ({"NO_COLOR": "1"}, [], True, False),
        ({"NO_COLOR": ""}, [], True, True),  # NO_COLOR means any non-empty value
        ({"TERM": "dumb"}, [], True, False),
        ({"FORCE_COLOR": "1"}, [], False, True),
        ({"CLICOLOR_FORCE": "1"}, [], False, True),
        ({"FORCE_COLOR": "0"}, [], False, False),
        ({"NO_COLOR": "1", "FORCE_COLOR": "1"}, [], True, False),
        ({}, ["--color", "never"], True, False),
        ({"NO_COLOR": "1"}, ["--color", "always"], False, True),
        ({}, ["--color=always"], False, True),
    ],
)
def test_colour_follows_the_conventions(args: list[str], env: dict[str, str], options: list[str],
                                        stdout_tty: bool, coloured: bool) -> None:
    res = run_on_tty(command("status", "p", *args, *options), cli_env(**env), stdout_tty=stdout_tty)
    assert res.code == 3, res.err
    assert res.out.replace(ESC + "33m", "").replace(ESC + "0m", "").startswith("p: unapplied (1 hunk in 1 file)")
    assert (ESC in res.out) is coloured, res.out


def test_colour_option_goes_before_the_command_too(args: list[str]) -> None:
    res = run_on_tty(command("--color", "never", "status", "p", *args), cli_env(), stdout_tty=True)
    assert res.code == 3 and ESC not in res.out and res.out.startswith("p: unapplied")


def test_progress_shows_each_phase_on_a_terminal_and_then_clears(args: list[str]) -> None:
    res = run_on_tty(command("apply", "p", *args), cli_env(PATCHKIT_PROGRESS_DELAY="0"))
    assert res.code == 0, res.err
    for phase in ("parsing the diff (p)", "judging the tree (p)", "writing (p)"):
        assert phase in res.err, res.err
    assert res.err.endswith("\r" + ESC + "K\r")  # the line is cleared before the result
    assert res.out == f"p: {ESC}32mapplied (1 hunk in 1 file; 1 file written){ESC}0m\n"


def test_a_progress_line_fits_a_narrow_terminal(args: list[str]) -> None:
    res = run_on_tty(command("status", "p", *args), cli_env(PATCHKIT_PROGRESS_DELAY="0"), columns=24)
    frames = [f.removesuffix(ESC + "K") for f in res.err.split("\r") if f.strip(ESC + "K")]
    assert frames and all(len(f) <= 23 for f in frames), frames
    assert frames[0] == "patchkit: | parsing the"


@pytest.mark.parametrize(("env", "options", "stderr_tty"), [
    ({"PATCHKIT_PROGRESS_DELAY": "0"}, ["-q"], True),  # -q: nothing extra
    ({"PATCHKIT_PROGRESS_DELAY": "0"}, [], False),  # not a terminal: nothing extra
    ({"PATCHKIT_PROGRESS_DELAY": "5"}, [], True),  # a run quicker than the delay: nothing extra
])
def test_no_progress_when_quiet_piped_or_quick(args: list[str], env: dict[str, str], options: list[str],
                                               stderr_tty: bool) -> None:
    res = run_on_tty(command("status", "p", *args, *options), cli_env(**env), stderr_tty=stderr_tty)
    assert res.code == 3
    assert res.err == ""


def test_series_progress_names_the_patch_being_parsed(args: list[str]) -> None:
    res = run_on_tty(command("status", "--all", *args), cli_env(PATCHKIT_PROGRESS_DELAY="0"))
    assert res.code == 3 and "parsing the diff (p)" in res.err and "judging the tree (the series)" in res.err


@contextmanager
def held_lock(root: Path, holder: bytes | None) -> Iterator[threading.Event]:
    """Hold root's lock as a writer would, `holder` (what a writer writes into the lock file) in it, until the
    yielded event is set (or 60 s pass)."""
    common = ["--root", root, "--patches", root.parent / "patches"]
    assert cli("apply", "p", *common).code == 0 and cli("revert", "p", *common).code == 0  # a writer made the lock
    fd = os.open(root / ".patchkit" / "lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    if holder is not None:
        os.pwrite(fd, holder, 0)
    release = threading.Event()

    def hold() -> None:
        release.wait(60)
        os.close(fd)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        yield release
    finally:
        release.set()
        thread.join()


def release_on(text: str, release: threading.Event) -> Callable[[str, subprocess.Popen[bytes]], None]:
    return lambda err, proc: release.set() if text in err else None


def test_waiting_for_the_lock_says_who_holds_it(args: list[str], engine: Path) -> None:
    with held_lock(engine, f"pid={os.getpid()} since=2026-01-02T03:04:05Z\n".encode()) as release:
        started = time.monotonic()
        res = run_on_tty(command("apply", "p", *args, "--lock-timeout", "60"), cli_env(),
                         on_err=release_on("patchkit: waiting for the lock on", release))
    assert res.code == 0, res.err
    assert time.monotonic() - started >= 1.0
    lock = engine / ".patchkit" / "lock"
    user = pwd.getpwuid(os.getuid()).pw_name
    note = f"patchkit: waiting for the lock on {lock} held by pid {os.getpid()} (user {user}), patchkit since " \
        "2026-01-02T03:04:05Z ...\n"
    assert res.err.count(note) == 1, res.err


def test_waiting_for_a_lock_whose_file_names_nobody_or_lies(args: list[str], engine: Path) -> None:
    with held_lock(engine, f"pid={os.getpid()} since=\x1b[31mred\n".encode()) as release:
        res = run_on_tty(command("status", "p", *args), cli_env(),
                         on_err=release_on("patchkit: waiting for the lock on", release))
    assert res.code == 3
    lock = engine / ".patchkit" / "lock"
    user = pwd.getpwuid(os.getuid()).pw_name
    # this test, not patchkit: the kernel's lock table names it, the lock file's line is not believed
    assert f"patchkit: waiting for the lock on {lock} held by pid {os.getpid()} (user {user}) ...\n" in res.err
    assert "\x1b[31m" not in res.err


def test_the_lock_note_without_a_terminal_is_one_plain_line(args: list[str], engine: Path) -> None:
    # the lock stays taken: the run waits past the one-second notice, says so once (a container's log has no
    # spinner), then times out (exit 6)
    with held_lock(engine, f"pid={os.getpid()} since=2026-01-02T03:04:05Z\n".encode()):
        res = run_on_tty(command("status", "p", *args, "--lock-timeout", "1.5"), cli_env(), stderr_tty=False)
    assert res.code == 6
    lines = res.err.splitlines()
    assert lines[0].startswith(f"patchkit: waiting for the lock on {engine}/.patchkit/lock held by pid "), res.err
    assert res.err.count("waiting for the lock") == 1 and "\r" not in res.err and "\x1b" not in res.err
    assert lines[1].startswith("patchkit: error: "), res.err


def test_an_interrupt_under_json_still_prints_a_json_error(args: list[str], engine: Path) -> None:
    sent = []

    def interrupt(err: str, proc: subprocess.Popen[bytes]) -> None:
        if "waiting for the lock" in err and not sent:
            sent.append(proc.pid)
            proc.send_signal(signal.SIGINT)

    with held_lock(engine, None):
        res = run_on_tty(command("apply", "p", *args, "--json"), cli_env(), stdout_tty=False, on_err=interrupt)
    assert sent and res.code == 130, res.err
    check(json.loads(res.out), "error")
    assert json.loads(res.out) == {
        "schema_version": 1, "error": "interrupted; stopped before the write phase: nothing was written",
        "exit_code": 130, "where": None, "hint": "rerun the command; it is safe to repeat",
    }
