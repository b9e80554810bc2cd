"""The two halves of the trust rule for `.patchkit`, one at a time (tests/test_untrusted_state.py breaks both at
once): a file or folder only its group could write, and another user's file inside a folder root owns.

As root, with a real unprivileged user; the trees and registry are those of tests/safety_helpers.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import needs_root
from tests.safety_helpers import (
    PATCH_ID,
    Case,
    image,
    interrupted_tree,
    run_forked,
    shared_case,
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
