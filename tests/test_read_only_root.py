"""Issue 32 item 6 (part), a root on a read-only filesystem (a read-only bind mount of it; skipped where mount is
not allowed): `apply` refuses before the write phase with exit 2 (nothing was written; 7 says "restored") and a
hint that says what to do, and `doctor` says that apply would fail, not "lock ok" and "would exit 0".
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import needs_root
from tests.safety_helpers import Case, image, run_forked, shared_case
from tests.test_crash import read_only

pytestmark = needs_root


@pytest.fixture(scope="module")
def case() -> Iterator[Case]:
    with shared_case() as made:
        yield made


@pytest.mark.parametrize("used", [False, True], ids=["never applied", "applied and reverted before"])
def test_apply_on_a_read_only_root_exits_2_with_a_hint_and_writes_nothing(case: Case, used: bool) -> None:
    root = case.fresh(f"ro-apply-{used}")
    if used:  # the lock file is there: opening it for writing fails instead of creating it
        assert run_forked(case.args("apply", root)).code == 0
        assert run_forked(case.args("revert", root)).code == 0
    before = image(root)
    with read_only(root):
        run = run_forked(case.args("apply", root))
        status = run_forked(case.args("status", root))
    assert run.code == 2, (run.code, run.err)
    assert "Read-only file system" in run.err and "nothing was written" in run.err, run.err
    assert "hint: the root is on a read-only filesystem" in run.err and "Traceback" not in run.err, run.err
    assert status.code == 3, status.err  # reading works
    assert image(root) == before


def test_doctor_on_a_read_only_root_says_apply_would_fail(case: Case) -> None:
    root = case.fresh("ro-doctor")
    with read_only(root):
        run = run_forked(["doctor", "--root", str(root), "--patches", str(case.patches), "--json"])
    rows = {c["check"]: c for c in run.json()["checks"]}
    assert rows["root"]["state"] == "problem" and "read-only filesystem" in rows["root"]["detail"], rows["root"]
    assert "run them as its owner" not in (rows["root"].get("hint") or "")
    assert rows["lock"]["state"] == "problem", rows["lock"]
    assert rows["hook"]["state"] == "problem" and "would exit 2" in rows["hook"]["detail"], rows["hook"]
    assert run.code != 0
