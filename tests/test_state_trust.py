"""The two halves of the trust rule for `.patchkit`, one at a time (tests/test_untrusted_state.py breaks both at
once): a file or folder only its group could write, and another user's file inside a folder root owns.

As root, with a real unprivileged user; the trees and registry are those of tests/safety_helpers.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchkit.errors import UnsafePathError
from patchkit.input.tree import open_root
from patchkit.workspace.trust import open_state_dir, read_state
from tests.conftest import needs_root
from tests.safety_helpers import (
    PATCH_ID,
    Case,
    as_user,
    image,
    interrupted_tree,
    run_forked,
    shared_case,
    shared_workdir,
)

pytestmark = needs_root
STATE = ".patchkit"
JOURNAL = f"{STATE}/journal.json"
RECORD = f"{STATE}/applied/{PATCH_ID}.json"


@pytest.fixture(scope="module")
def case() -> Iterator[Case]:
    with shared_case() as made:
        yield made


def refused(case: Case, root: Path, action: str, needle: str) -> None:
    before, state_before = image(root), image(root / STATE)
    run = run_forked(case.args(action, root))
    assert run.code == 2, (run.code, run.out, run.err)
    assert needle in run.err and "Traceback" not in run.err, run.err
    assert image(root) == before, "nothing may be written to the tree"
    assert image(root / STATE) == state_before, "nor to the state folder"


@pytest.mark.parametrize(
    ("target", "mode"), [(STATE, 0o775), (JOURNAL, 0o660), (STATE, 0o770)]
)
def test_a_journal_only_its_group_could_write_is_never_replayed(case: Case, target: str, mode: int) -> None:
    root = interrupted_tree(case, f"group-{mode:o}-{target.replace('/', '-')}")
    os.chmod(root / target, mode)
    refused(case, root, "status", "writable by group or others")


@pytest.mark.parametrize(("target", "mode"), [(f"{STATE}/applied", 0o775), (RECORD, 0o664)])
def test_state_only_its_group_could_write_is_refused(case: Case, target: str, mode: int) -> None:
    root = case.fresh(f"group-record-{mode:o}", patched=True)
    os.chmod(root / target, mode)
    refused(case, root, "revert", "writable by group or others")


@pytest.mark.parametrize("action", ["status", "apply", "revert"])
def test_a_journal_another_user_owns_is_refused_in_a_folder_root_owns(
    case: Case, user: tuple[int, int], action: str
) -> None:
    root = interrupted_tree(case, f"file-owner-{action}")
    assert os.stat(root / STATE).st_uid == 0
    os.chown(root / JOURNAL, *user)  # only the file: every folder above it is root's, 0755
    refused(case, root, action, f"is owned by uid {user[0]}")


def test_a_state_file_another_user_owns_is_refused_in_a_folder_root_owns(case: Case, user: tuple[int, int]) -> None:
    root = case.fresh("file-owner-record", patched=True)
    os.chown(root / RECORD, *user)
    refused(case, root, "revert", f"is owned by uid {user[0]}")
    refused(case, root, "status", f"is owned by uid {user[0]}")


def test_a_state_folder_another_patchkit_makes_first_is_opened_and_left_as_it_made_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two patchkits create `.patchkit` at once and the other one's mkdir wins (simulated: it makes the folder,
    0750, just before ours): ours opens that folder (no FileExistsError escapes) and leaves its mode to the one
    that made it. Kills patchkit/workspace/trust.py:75:core/ExceptionReplacer#1 (the EEXIST escaped) and
    :76:core/ReplaceFalseWithTrue#0 (`made = True`: the other's folder fchmod-ed to 0755)."""
    engine = tmp_path / "engine"
    engine.mkdir()
    real_mkdir = os.mkdir

    def racing(path: str, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        if path == ".patchkit":
            real_mkdir(path, 0o750, dir_fd=dir_fd)  # the other patchkit, first
            os.chmod(path, 0o750, dir_fd=dir_fd)  # whatever the umask
        real_mkdir(path, mode, dir_fd=dir_fd)

    monkeypatch.setattr(os, "mkdir", racing)
    with open_root(engine) as root:
        fd = open_state_dir(root, create=True)
    assert fd is not None
    os.close(fd)
    assert (engine / ".patchkit").stat().st_mode & 0o7777 == 0o750


def test_a_state_folder_an_unprivileged_user_creates_gets_its_mode(user: tuple[int, int]) -> None:
    """The unprivileged user (a uid above CPython's cached small ints) creates `.patchkit` in a tree it owns: the
    folder it made is its own and gets STATE_DIR_MODE, 0755. Kills
    patchkit/workspace/trust.py:80:core/ReplaceComparisonOperator_Eq_Is#0 (`st_uid is os.geteuid()`: true for
    root's uid 0 only, so a user's folder stayed 0700)."""
    uid, gid = user
    assert uid > 256  # past the cached small ints, where `is` and `==` of two ints part
    with shared_workdir() as folder:
        engine = folder / "engine"
        engine.mkdir()
        os.chown(engine, uid, gid)

        def create() -> None:
            with open_root(engine) as root:
                fd = open_state_dir(root, create=True)
            assert fd is not None
            os.close(fd)

        as_user(uid, gid, create)
        made = (engine / STATE).stat()
        assert (made.st_uid, made.st_mode & 0o7777) == (uid, 0o755)


def test_a_state_file_that_is_a_dangling_link_is_refused_and_a_missing_one_is_absent(tmp_path: Path) -> None:
    """In a trusted `.patchkit/applied/`, a record that is a link to nowhere is refused as a link (not read as
    absent through it), and a record that is not there is absent (no error). Kills
    patchkit/workspace/trust.py:114:core/ReplaceFalseWithTrue#1 (the stat followed the link: FileNotFoundError,
    so "absent") and :115:core/ExceptionReplacer#2 (a missing record's FileNotFoundError escaped)."""
    engine = tmp_path / "engine"
    (engine / STATE / "applied").mkdir(parents=True)
    (engine / STATE / "applied" / "dangling.json").symlink_to(tmp_path / "nowhere")
    with open_root(engine) as root:
        with pytest.raises(UnsafePathError, match="symbolic link"):
            read_state(root, "applied/dangling.json")
        missing = read_state(root, "applied/missing.json")
    assert (missing.data, missing.mode) == (None, None)
