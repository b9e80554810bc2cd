"""Crash safety through the real CLI: SIGKILL at every write point, injected I/O errors, recovery messages.

The diff (made by git) creates a file in new folders, deletes the only file of a folder, renames with an edit
into a new folder, changes a mode and modifies files, one with invalid UTF-8. After each kill the next run
must find the tree byte-identical (bytes, modes, folders) to the whole original or the whole patched tree,
and `status` must say which.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.safety_helpers import (
    PATCH_ID,
    Case,
    build_case,
    error_campaign,
    fast_workdir,
    fault_env,
    image,
    kill_campaign,
    run_forked,
    run_subprocess,
    whole_state,
)


@pytest.fixture(scope="module")
def case(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Case]:
    with fast_workdir(tmp_path_factory.mktemp("crash")) as workdir:
        yield build_case(workdir)


@pytest.mark.parametrize("action", ["apply", "revert"])
def test_a_kill_at_every_write_point_ends_whole(case: Case, action: str) -> None:
    # Every third kill point is repeated with a second kill inside the recovery itself, at a point that
    # cycles through the recovery's operations (scripts/safety_report.py tries every pair).
    result = kill_campaign(case, action, lambda n: [] if n % 3 else [n % 11])
    assert result.failures == []
    assert result.outside_writes == 0
    assert result.kill_points >= 40, "the campaign must reach every file of the write phase"
    assert result.recovery_kills >= 10
    assert result.ended_before and result.ended_after, "both rollback and roll-forward must be exercised"


def test_recovery_is_reported_on_stderr_by_a_fresh_interpreter(case: Case) -> None:
    root = case.fresh("e2e")
    killed = run_subprocess(case.args("apply", root), fault_env(30))
    assert killed.killed
    assert whole_state(case, root) is None, "op 30 is mid-write: the tree must be mixed until recovered"
    status = run_subprocess(case.args("status", root))
    assert status.code == 3, status.err
    lines = status.err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"patchkit: recovered an interrupted apply of {PATCH_ID} on {root}: rolled back ")
    assert image(root) == case.original
    again = run_subprocess(case.args("status", root))
    assert again.code == 3 and again.err == "", "recovery happens once"


def test_recovery_runs_before_a_broken_manifest_is_even_read(case: Case, tmp_path: Path) -> None:
    root = case.fresh("manifest-broken")
    assert run_forked(case.args("apply", root), fault_env(30)).killed
    broken = tmp_path / "patches" / PATCH_ID
    broken.mkdir(parents=True)
    (broken / "manifest.toml").write_text("id = [", encoding="utf-8")
    run = run_forked(["status", PATCH_ID, "--root", str(root), "--patches", str(tmp_path / "patches")])
    assert run.code == 2
    assert "recovered an interrupted apply" in run.err and "not valid TOML" in run.err
    assert image(root) == case.original


@pytest.mark.parametrize(
    ("errno_name", "action", "step"),
    [("ENOSPC", "apply", 1), ("EACCES", "apply", 3), ("EROFS", "revert", 3), ("EIO", "revert", 5)],
)
def test_an_io_error_at_any_write_point_restores_the_tree(case: Case, errno_name: str, action: str, step: int) -> None:
    """Exit 7, a message saying what happened, and the tree exactly as it was: no recovery needed afterwards."""
    result = error_campaign(case, action, errno_name, step)
    assert result.failures == []
    assert result.outside_writes == 0
    assert result.failed_runs * step >= 40


def test_an_io_error_message_names_the_file(case: Case) -> None:
    root = case.fresh("names")
    run = run_forked(case.args("apply", root), fault_env(12, "ENOSPC"))
    assert run.code == 7
    assert f"patchkit: error: {root}/engine/" in run.err, run.err
    assert "writing failed: No space left on device; the tree was restored" in run.err
    assert "hint: free disk space" in run.err


@contextlib.contextmanager
def read_only(root: Path) -> Iterator[None]:
    """Bind-mount root read-only over itself (needs CAP_SYS_ADMIN; the test is skipped without it)."""
    if shutil.which("mount") is None:
        pytest.skip("no mount command")
    bind = subprocess.run(["mount", "--bind", str(root), str(root)], capture_output=True, check=False)
    if bind.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {bind.stderr.decode(errors='replace').strip()}")
    try:
        remount = subprocess.run(["mount", "-o", "remount,ro,bind", str(root)], capture_output=True, check=False)
        if remount.returncode != 0:
            pytest.skip("cannot remount read-only here")
        yield
    finally:
        subprocess.run(["umount", str(root)], capture_output=True, check=False)


def test_a_read_only_tree_with_a_journal_exits_8_and_is_recovered_once_writable(case: Case) -> None:
    root = case.fresh("read-only")
    assert run_forked(case.args("status", root)).code == 3  # creates .patchkit while still writable
    clean = case.fresh("read-only-clean")
    assert run_forked(case.args("status", clean)).code == 3
    with read_only(clean):
        assert run_forked(case.args("status", clean)).code == 3, "status needs no write without a journal"
    assert run_forked(case.args("apply", root), fault_env(30)).killed
    mixed = image(root)
    with read_only(root):
        run = run_forked(case.args("status", root))
        assert run.code == 8, run.err
        assert "cannot be written" in run.err and f"interrupted apply of {PATCH_ID}" in run.err
        assert "Traceback" not in run.err
        assert image(root) == mixed
    run = run_forked(case.args("status", root))
    assert run.code == 3 and "recovered an interrupted apply" in run.err
    assert image(root) == case.original
