"""Issue 32 item 5, the root's lock against other users, as root with a real unprivileged user:

- the lock file is 0600: another user cannot open it, so cannot hold it and stall a container start (it was
  0644: a read-only descriptor flocks as well as any, and the start waited --lock-timeout and failed);
- the root folder, which anyone who may open it can flock, never stalls a write once the lock file exists;
- another user's `status` still answers (it reads under the folder's shared lock);
- `--lock-timeout N` is the time a command waits in all (a start took the lock twice and waited about 2N), and
  what it waits for is said once on stderr, terminal or not.

Everything drives the real CLI in forked children; the other user's holds run in a child that dropped to them.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import needs_root
from tests.safety_helpers import Case, chown_tree, image, run_forked, run_here, shared_case
from tests.test_untrusted_state import run_as_that_user

pytestmark = needs_root
STATE = ".patchkit"


@pytest.fixture(scope="module")
def case() -> Iterator[Case]:
    with shared_case() as made:
        yield made


@contextlib.contextmanager
def held_as(path: Path, user: tuple[int, int], flags: int = os.O_RDONLY) -> Iterator[str]:
    """A child running as `user` opens `path` and holds flock(LOCK_EX) on it until the block ends; yields what it
    managed: "held", or the error (e.g. "PermissionError") that stopped it."""
    ready_r, ready_w = os.pipe()
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        os.close(ready_r)
        os.close(done_w)
        word = b"held"
        try:
            os.setgroups([])
            os.setgid(user[1])
            os.setuid(user[0])
            fd = os.open(path, flags)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            word = type(exc).__name__.encode()
        os.write(ready_w, word)
        os.read(done_r, 1)  # until the test is done
        os._exit(0)
    os.close(ready_w)
    os.close(done_r)
    try:
        yield os.read(ready_r, 64).decode()
    finally:
        os.close(done_w)
        os.waitpid(pid, 0)
        os.close(ready_r)


def used_once(case: Case, name: str, user: tuple[int, int]) -> Path:
    """A tree of the user's with a lock file made by a root apply (then reverted): what a container leaves."""
    root = case.fresh(name)
    chown_tree(root, *user)
    assert run_here(case.args("apply", root)) == 0
    assert run_here(case.args("revert", root)) == 0
    return root


def test_another_user_cannot_open_the_lock_so_cannot_stall_an_apply(case: Case, user: tuple[int, int]) -> None:
    root = used_once(case, "lock-other-user", user)
    lock = root / STATE / "lock"
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600 and lock.stat().st_uid == 0
    with held_as(lock, user) as got:
        started = time.monotonic()
        run = run_forked(case.args("apply", root, "--lock-timeout", "3"))
        took = time.monotonic() - started
    assert got == "PermissionError", f"another user could open and hold the lock: {got}"
    assert run.code == 0 and took < 2.5, (run.code, took, run.err)
    assert image(root) == case.patched


def test_another_user_holding_the_root_folder_does_not_stall_a_later_apply(case: Case, user: tuple[int, int]) -> None:
    """The folder lock is there for readers of a tree without a lock file; once the file exists a writer takes
    the folder's only if it is free (any user who may open the root can flock it)."""
    root = used_once(case, "lock-other-folder", user)
    with held_as(root, user, os.O_RDONLY | os.O_DIRECTORY) as got:
        started = time.monotonic()
        run = run_forked(case.args("apply", root, "--lock-timeout", "3"))
        took = time.monotonic() - started
    assert got == "held"
    assert run.code == 0 and took < 2.5, (run.code, took, run.err)
    assert image(root) == case.patched


def test_another_users_status_still_answers(case: Case, user: tuple[int, int]) -> None:
    root = used_once(case, "lock-other-status", user)
    assert run_here(case.args("apply", root)) == 0
    run_as_that_user(case, user, case.args("status", root))  # exit 0: applied, read under the folder's lock


def test_an_older_0644_lock_is_made_0600_by_the_next_write(case: Case, user: tuple[int, int]) -> None:
    root = used_once(case, "lock-old-mode", user)
    os.chmod(root / STATE / "lock", 0o644)
    assert run_here(case.args("apply", root)) == 0
    assert stat.S_IMODE((root / STATE / "lock").stat().st_mode) == 0o600
    with held_as(root / STATE / "lock", user) as got:
        assert got == "PermissionError"


@pytest.mark.parametrize("records", [False, True], ids=["first start", "restart"])
def test_the_lock_timeout_is_the_whole_wait_and_what_it_waits_for_is_said_once(case: Case, records: bool) -> None:
    """A start takes the lock more than once (the restart check shared, the write exclusive): the time given is
    for all of them (it waited about twice as long), and the one line on stderr names the lock and its holder."""
    root = case.fresh(f"lock-timeout-{records}")
    assert run_here(case.args("apply", root)) == 0
    if not records:
        assert run_here(case.args("revert", root)) == 0
    else:  # a record that is there but no longer answers (the tree was changed): both looks, then the full path
        (root / "engine" / "keep.py").write_bytes(b"untouched = 2\n")
    lock = root / STATE / "lock"
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        started = time.monotonic()
        run = run_forked(case.args("apply", root, "--lock-timeout", "2"))
        took = time.monotonic() - started
    finally:
        os.close(fd)
    assert run.code == 6, (run.code, run.err)
    assert 2.0 <= took < 3.5, f"--lock-timeout 2 waited {took:.1f}s"
    lines = run.err.splitlines()
    assert lines[0] == f"patchkit: waiting for the lock on {lock} held by pid {os.getpid()} (user root) ...", run.err
    assert run.err.count("waiting for the lock") == 1, run.err
    assert "has held the lock for over 2s" in run.err


def test_a_fifo_at_the_locks_name_is_refused_not_waited_on_by_another_users_status(
    case: Case, user: tuple[int, int]
) -> None:
    """Root's `.patchkit/lock` is a FIFO (0644: the user may read it, not write it). The user's `status` opens it
    read-only, sees it is no regular file and fails (the lock is not a regular file) at once: it never blocks
    in the open, waiting for a writer that never comes.

    Kills patchkit/workspace/lock.py:329:core/ReplaceBinaryOperator_BitOr_BitAnd#21 (`O_NOFOLLOW & O_NONBLOCK`:
    the read-only open lost O_NONBLOCK and hung on the FIFO)."""
    import signal

    root = used_once(case, "lock-fifo", user)
    assert run_here(case.args("apply", root)) == 0
    lock = root / STATE / "lock"
    lock.unlink()
    os.mkfifo(lock, 0o644)
    os.chmod(lock, 0o644)
    from patchkit.run.fastpath import code_fingerprint

    code_fingerprint()  # as run_as_that_user: the child must not read the checkout
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        os.setgroups([])
        os.setgid(user[1])
        os.setuid(user[0])
        os.chdir(case.workdir)
        signal.alarm(10)  # a hang ends here, as SIGALRM (the answer takes about a second)
        with open(os.devnull, "w") as quiet, contextlib.redirect_stderr(quiet), contextlib.redirect_stdout(quiet):
            code = run_here(case.args("status", root))
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert not os.WIFSIGNALED(status), f"status hung on the FIFO (killed by signal {os.WTERMSIG(status)})"
    assert os.WEXITSTATUS(status) not in (0, 3), os.WEXITSTATUS(status)
    assert stat.S_ISFIFO(os.lstat(lock).st_mode)
