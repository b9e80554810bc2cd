"""Issue 32, one trust rule (patchkit.input.trust): each edge of the rule pinned on the module, and through the
CLI of each reader that uses it (the state folder, the restart fast path; the engine's interpreter is in
tests/test_untrusted_env.py).

As root, with a real unprivileged user: that user owns the "other user's" entries, and runs patchkit itself
where the question is what a non-root user believes of root's state. Everything lives in a shared work folder
(tests/safety_helpers.py), never under the checkout, so the tests pass from a checkout in a 0700 folder.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchkit.input.trust import Flaw, Refusal, check_trusted_path, open_trusted_path, refusal
from tests.conftest import needs_root
from tests.safety_helpers import (
    PATCH_ID,
    Case,
    as_user,
    chown_tree,
    image,
    run_forked,
    shared_case,
    shared_workdir,
)

pytestmark = needs_root
STATE = ".patchkit"
RECORD = f"{STATE}/applied/{PATCH_ID}.json"


@pytest.fixture(scope="module")
def case() -> Iterator[Case]:
    with shared_case() as made:
        yield made


@pytest.fixture
def scratch() -> Iterator[Path]:
    with shared_workdir() as folder:
        yield folder


def flaw_of(path: Path, *, folder: bool) -> Flaw | None:
    """The rule's verdict on `path` and the folders above it, through the module's descriptor walk."""
    found = check_trusted_path(path, folder=folder)
    return None if found is None else found.flaw


def lstat_flaw(path: Path) -> Flaw | None:
    found = refusal(os.lstat(path), str(path))
    return None if found is None else found.flaw


# ------------------------------------------------------------------------------------ the rule, on the module


def test_an_entry_another_user_owns_is_refused(scratch: Path, user: tuple[int, int]) -> None:
    (scratch / "theirs").mkdir()
    (scratch / "theirs.txt").write_bytes(b"x")
    for entry, folder in ((scratch / "theirs", True), (scratch / "theirs.txt", False)):
        assert flaw_of(entry, folder=folder) is None and lstat_flaw(entry) is None  # root's: trusted
        os.chown(entry, *user)
        assert flaw_of(entry, folder=folder) is lstat_flaw(entry) is Flaw.OWNER
        found = check_trusted_path(entry, folder=folder)
        assert isinstance(found, Refusal) and found.shown == str(entry)
        assert found.describe().startswith(f"is owned by uid {user[0]}")
    inner = scratch / "theirs" / "inner.txt"  # root's file in the other user's folder: replaceable by them
    inner.write_bytes(b"x")
    found = check_trusted_path(inner, folder=False)
    assert isinstance(found, Refusal) and (found.flaw, found.shown) == (Flaw.OWNER, str(scratch / "theirs"))


@pytest.mark.parametrize("mode", [0o664, 0o646, 0o666, 0o1666, 0o1777, 0o1757], ids=oct)
def test_a_file_others_may_write_is_refused_sticky_or_not(scratch: Path, mode: int) -> None:
    path = scratch / "file"
    path.write_bytes(b"x")
    os.chmod(path, mode)
    assert flaw_of(path, folder=False) is lstat_flaw(path) is Flaw.WRITABLE
    found = refusal(os.lstat(path), str(path))
    assert found is not None and found.describe() == f"is writable by group or others (mode {mode:04o})"


@pytest.mark.parametrize("mode", [0o775, 0o757, 0o777], ids=oct)
def test_a_folder_others_may_write_is_refused(scratch: Path, mode: int) -> None:
    folder = scratch / "open"
    folder.mkdir()
    (folder / "file").write_bytes(b"x")
    os.chmod(folder, mode)
    assert flaw_of(folder, folder=True) is lstat_flaw(folder) is Flaw.WRITABLE
    assert flaw_of(folder / "file", folder=False) is Flaw.WRITABLE  # everything under it too


@pytest.mark.parametrize("mode", [0o1777, 0o1775, 0o1757], ids=oct)
def test_a_sticky_folder_others_may_write_is_trusted_as_a_folder(
    scratch: Path, user: tuple[int, int], mode: int
) -> None:
    folder = scratch / "tmp-like"
    folder.mkdir()
    os.chmod(folder, mode)
    (folder / "ours.txt").write_bytes(b"x")
    assert flaw_of(folder, folder=True) is None and lstat_flaw(folder) is None
    assert flaw_of(folder / "ours.txt", folder=False) is None  # nobody else can rename it away
    (folder / "planted.txt").write_bytes(b"x")
    os.chown(folder / "planted.txt", *user)  # what others may add there is theirs, and refused
    assert flaw_of(folder / "planted.txt", folder=False) is Flaw.OWNER
    os.chown(folder, *user)  # the sticky exception is for the write bits only, never for the owner
    assert flaw_of(folder, folder=True) is Flaw.OWNER


def test_a_link_is_refused_at_the_end_and_on_the_way(scratch: Path) -> None:
    (scratch / "real").mkdir()
    (scratch / "real" / "file").write_bytes(b"x")
    (scratch / "to-folder").symlink_to(scratch / "real")
    (scratch / "to-file").symlink_to(scratch / "real" / "file")
    assert flaw_of(scratch / "real" / "file", folder=False) is None
    assert lstat_flaw(scratch / "to-file") is Flaw.LINK
    assert flaw_of(scratch / "to-file", folder=False) is Flaw.LINK
    assert flaw_of(scratch / "to-folder", folder=True) is Flaw.LINK
    found = check_trusted_path(scratch / "to-folder" / "file", folder=False)
    assert isinstance(found, Refusal) and (found.flaw, found.shown) == (Flaw.LINK, str(scratch / "to-folder"))


def test_the_walk_opens_what_it_checked(scratch: Path) -> None:
    path = scratch / "data"
    path.write_bytes(b"checked bytes")
    fd = open_trusted_path(path, folder=False, flags=os.O_RDONLY)
    assert not isinstance(fd, Refusal)
    try:
        assert os.read(fd, 100) == b"checked bytes"
        assert os.fstat(fd).st_ino == path.stat().st_ino
    finally:
        os.close(fd)
    missing = check_trusted_path(scratch / "none", folder=False)
    assert isinstance(missing, Refusal) and missing.flaw is Flaw.UNCHECKABLE and missing.absent


def test_a_link_is_refused_when_the_caller_gives_its_own_open_flags(scratch: Path) -> None:
    """A caller's own flags (os.O_RDONLY, to read the file) keep the walk link-free: a link to a trusted file at
    the end is refused, not followed. Kills the mutants of patchkit/input/trust.py:101 that drop O_NOFOLLOW from
    a caller's flags (`flags | O_NOFOLLOW // O_CLOEXEC`, `flags % O_NOFOLLOW | ...`, `O_NOFOLLOW >> O_CLOEXEC`)."""
    (scratch / "real").write_bytes(b"trusted bytes")
    (scratch / "to-real").symlink_to(scratch / "real")
    for flags in (os.O_RDONLY, os.O_RDONLY | os.O_NONBLOCK):
        found = open_trusted_path(scratch / "to-real", folder=False, flags=flags)
        if not isinstance(found, Refusal):
            os.close(found)
        assert isinstance(found, Refusal) and found.flaw is Flaw.LINK, found


def test_a_relative_path_is_not_walked(scratch: Path) -> None:
    """Only an absolute path is walked from `/`; a relative one is refused as uncheckable, whatever exists at the
    names it holds. Kills patchkit/input/trust.py:122:core/ReplaceOrWithAnd#2 (`not absolute and not parts`)."""
    relative = Path(*scratch.parts[1:]) / "file"
    (scratch / "file").write_bytes(b"x")
    found = check_trusted_path(relative, folder=False)
    assert isinstance(found, Refusal) and (found.flaw, found.detail) == (Flaw.UNCHECKABLE, "not an absolute path")


def test_a_file_on_the_way_is_named_where_it_stands_and_is_not_absent(scratch: Path) -> None:
    """A file where the path needs a folder: the refusal names that file (opened as a folder, it fails there), as
    uncheckable but not absent (it exists). Kills patchkit/input/trust.py:128:core/ReplaceComparisonOperator_Eq_LtE#2
    and :130:core/ReplaceOrWithAnd#3 (the folders on the way opened as files: the refusal named the next name)
    and :170:core/ReplaceComparisonOperator_Eq_GtE#3 (`errno >= ENOENT`: ENOTDIR counted as absent) and
    :170:core/ReplaceOrWithAnd#5 (`strerror and str(exc)`: the detail became the whole exception's text)."""
    (scratch / "file").write_bytes(b"x")
    for flags in (None, os.O_RDONLY):
        found = open_trusted_path(scratch / "file" / "below", folder=False, flags=flags)
        if not isinstance(found, Refusal):
            os.close(found)
        assert isinstance(found, Refusal), found
        assert (found.flaw, found.shown, found.absent) == (Flaw.UNCHECKABLE, str(scratch / "file"), False), found
        assert found.detail == os.strerror(errno.ENOTDIR), found  # the system's words, not the whole exception


def test_a_link_that_vanishes_before_its_second_look_is_uncheckable(scratch: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The open of a link to read it fails (ELOOP) and the lstat that would tell it is a link fails too (the entry
    removed in between, simulated): the entry is uncheckable, and no OSError escapes. Kills
    patchkit/input/trust.py:168:core/ExceptionReplacer#3 (that lstat's OSError no longer caught)."""
    (scratch / "real").write_bytes(b"x")
    (scratch / "to-real").symlink_to(scratch / "real")
    real_stat = os.stat

    def vanished(path: object, *args: object, **kwargs: object) -> os.stat_result:
        if path == "to-real" and kwargs.get("dir_fd") is not None:
            raise FileNotFoundError(2, "No such file or directory")
        return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "stat", vanished)
    found = open_trusted_path(scratch / "to-real", folder=False, flags=os.O_RDONLY)  # not O_PATH: ELOOP
    assert isinstance(found, Refusal) and (found.flaw, found.shown) == (Flaw.UNCHECKABLE, str(scratch / "to-real"))


def test_an_open_the_system_refuses_with_eperm_is_not_an_absent_entry(scratch: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """An open that fails with EPERM (a security module's veto, simulated) is uncheckable, not absent: only
    ENOENT means there is no such entry. Kills patchkit/input/trust.py:170:core/ReplaceComparisonOperator_Eq_LtE#3
    (`errno <= ENOENT`, which takes EPERM, errno 1, for absent)."""
    (scratch / "vetoed").write_bytes(b"x")
    real_open = os.open

    def veto(path: object, *args: object, **kwargs: object) -> int:
        if path == "vetoed":
            raise PermissionError(errno.EPERM, os.strerror(errno.EPERM))
        return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", veto)
    found = check_trusted_path(scratch / "vetoed", folder=False)
    assert isinstance(found, Refusal) and (found.flaw, found.absent) == (Flaw.UNCHECKABLE, False), found


def test_a_file_300_folders_deep_is_walked_to_its_end(scratch: Path) -> None:
    """The walk tells the last name from the folders by its depth, for any depth: a file below 300 folders (more
    than CPython's cached small ints) is trusted and opened as a file. Kills
    patchkit/input/trust.py:128:core/ReplaceComparisonOperator_Eq_Is#1 (`depth is len(parts)`)."""
    deep = scratch.joinpath(*["d"] * 300)
    deep.mkdir(parents=True)
    (deep / "file").write_bytes(b"deep bytes")
    fd = open_trusted_path(deep / "file", folder=False, flags=os.O_RDONLY)
    assert not isinstance(fd, Refusal), fd
    try:
        assert os.read(fd, 100) == b"deep bytes"
    finally:
        os.close(fd)


def test_roots_entries_are_trusted_by_every_user(scratch: Path, user: tuple[int, int]) -> None:
    """Root may write anything anyway: what root owns is as good as the running user's own, for any user;
    another user's is not, whoever runs."""
    (scratch / "roots.txt").write_bytes(b"x")
    (scratch / "users.txt").write_bytes(b"x")
    os.chown(scratch / "users.txt", *user)
    (scratch / "third.txt").write_bytes(b"x")
    os.chown(scratch / "third.txt", user[0] + 1, user[1])

    def check() -> None:
        assert flaw_of(scratch / "roots.txt", folder=False) is None
        assert flaw_of(scratch / "users.txt", folder=False) is None  # the running user's own
        assert flaw_of(scratch / "third.txt", folder=False) is Flaw.OWNER

    as_user(*user, check)
    assert flaw_of(scratch / "users.txt", folder=False) is Flaw.OWNER  # and root does not trust the user's


# ------------------------------------------------------------------------------------ the state folder, by CLI


def refused(case: Case, root: Path, action: str, needle: str) -> None:
    before = image(root), image(root / STATE)
    run = run_forked(case.args(action, root))
    assert run.code == 2, (run.code, run.err)
    assert needle in run.err and "Traceback" not in run.err, run.err
    assert (image(root), image(root / STATE)) == before, "nothing may be written"


def test_a_sticky_world_writable_record_is_refused(case: Case) -> None:
    root = case.fresh("sticky-record", patched=True)
    os.chmod(root / RECORD, 0o1777)
    refused(case, root, "status", "writable by group or others (mode 1777)")
    refused(case, root, "revert", "writable by group or others (mode 1777)")


def test_a_sticky_state_folder_of_roots_is_trusted_like_tmp(case: Case, user: tuple[int, int]) -> None:
    """Others may add names to a sticky `.patchkit` but not rename root's away: its records are still root's.
    What they add is theirs, and refused."""
    root = case.fresh("sticky-state", patched=True)
    os.chmod(root / STATE, 0o1777)
    run = run_forked(case.args("status", root, "--json"))
    assert run.code == 0 and run.json()["state"] == "applied", run.err
    os.chmod(root / STATE, 0o0777)  # without the sticky bit anyone could rename the records away
    refused(case, root, "status", "writable by group or others (mode 0777)")
    os.chmod(root / STATE, 0o1777)
    planted = root / STATE / "journal.json"
    planted.write_text("{}")
    os.chown(planted, *user)
    refused(case, root, "status", f"is owned by uid {user[0]}")


def test_a_linked_state_folder_is_refused(case: Case) -> None:
    root = case.fresh("linked-state", patched=True)
    os.rename(root / STATE, root / "elsewhere")
    (root / STATE).symlink_to("elsewhere")
    refused(case, root, "status", "symbolic link")


# ------------------------------------------------------------------- a non-root user on a tree root patched


def as_that_user(case: Case, user: tuple[int, int], args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """Run the CLI as the unprivileged user (a forked child that dropped to it, as
    test_untrusted_state.run_as_that_user explains: nothing read from the checkout); (exit, stdout, stderr)."""
    from patchkit.run.fastpath import code_fingerprint

    code_fingerprint()  # computed here: the child cannot read the checkout's sources
    answers = case.workdir / f"answers-{user[0]}"
    answers.mkdir(exist_ok=True)
    os.chown(answers, *user)  # the child writes its answer there
    result = answers / "run.json"
    result.unlink(missing_ok=True)

    def child() -> None:
        from patchkit.cli.main import run

        os.chdir(case.workdir)
        os.environ.update(env)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = run(args)
        result.write_text(json.dumps([code, out.getvalue(), err.getvalue()]))

    as_user(*user, child)
    code, out, err = json.loads(result.read_text())
    result.unlink()
    return code, out, err


def root_patched(case: Case, user: tuple[int, int], name: str) -> Path:
    """A tree the service user owns, patched by root (the container's start): `.patchkit` is root's."""
    root = case.fresh(name)
    chown_tree(root, *user)
    run = run_forked(case.args("apply", root))
    assert run.code == 0, run.err
    assert (root / STATE).stat().st_uid == 0 and (root / RECORD).stat().st_uid == 0
    return root


def test_a_non_root_status_reads_roots_records(case: Case, user: tuple[int, int]) -> None:
    tree = root_patched(case, user, "non-root-status")
    before = image(tree), image(tree / STATE)
    for extra in ((), ("--json",)):
        code, out, err = as_that_user(case, user, case.args("status", tree, *extra), {})
        assert code == 0, (code, err)
        if extra:
            assert json.loads(out)["state"] == "applied"
    assert (image(tree), image(tree / STATE)) == before


def test_a_non_root_restart_is_answered_from_roots_records(case: Case, user: tuple[int, int]) -> None:
    tree = root_patched(case, user, "non-root-restart")
    before = image(tree), image(tree / STATE)
    code, _, err = as_that_user(case, user, case.args("apply", tree), {"PATCHKIT_DEBUG_FASTPATH": "1"})
    assert code == 0 and "fast path used" in err, (code, err)
    assert (image(tree), image(tree / STATE)) == before
    # The record given to the user, read by root: the user's record is not root's to believe (the full path
    # refuses it, exit 2).
    os.chown(tree / RECORD, *user)
    run = run_forked(case.args("apply", tree), {"PATCHKIT_DEBUG_FASTPATH": "1"})
    assert run.code == 2 and "fast path used" not in run.err and f"owned by uid {user[0]}" in run.err, run.err


@pytest.mark.parametrize("change", ["sticky-record", "group-folder", "linked-folder"])
def test_a_restart_does_not_believe_a_record_the_rule_refuses(case: Case, change: str) -> None:
    root = case.fresh(f"fast-{change}", patched=True)
    run = run_forked(case.args("apply", root), {"PATCHKIT_DEBUG_FASTPATH": "1"})
    assert run.code == 0 and "fast path used" in run.err, run.err
    applied = root / STATE / "applied"
    if change == "sticky-record":
        os.chmod(root / RECORD, 0o1777)
    elif change == "group-folder":
        os.chmod(applied, 0o775)
    else:
        os.rename(applied, root / STATE / "real-applied")
        applied.symlink_to("real-applied")
    run = run_forked(case.args("apply", root), {"PATCHKIT_DEBUG_FASTPATH": "1"})
    assert "fast path used" not in run.err, run.err
    assert stat.S_ISDIR(os.stat(applied).st_mode)
