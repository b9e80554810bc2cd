"""Issue 32 item 6 (part), another process changing the tree during the write, as root on a tree an
unprivileged user owns (the user's steps run as that user, in the forked child, at one operation of the write):

- a same-size edit in place that puts the mtime back, before the original's kept link is made: refused (exit 7),
  their edit kept (it was overwritten with exit 0: size, inode and mtime all matched);
- a same-size edit in place right before the replace, after the last check: their edit is renamed back and the
  run fails (exit 7; it was lost with exit 0), also when it puts the mtime back (caught by the bytes);
- a file the patch deletes, created again while patchkit finishes (after its check of every path): exit 7 saying
  so, their file kept (it was exit 0 on a tree that reads conflict).

Hook points: the transaction's own operations (workspace.disk.Disk), wrapped in the child.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import needs_root
from tests.safety_helpers import Case, as_user, chown_tree, image, run_forked, shared_case
from tests.test_moved_folders import strays

pytestmark = needs_root
HOOKED = "engine/tools/helper.py"  # modified by the patch
DELETED = "engine/legacy/gone.py"  # deleted by the patch; its folder is left empty (and removed)


@pytest.fixture(scope="module")
def case() -> Iterator[Case]:
    with shared_case() as made:
        yield made


def at_operation(op: str, wanted: Callable[[tuple[str, ...]], bool], step: Callable[[], None]) -> Callable[[], None]:
    """In the forked child: run `step` once, right before the first Disk.<op> whose arguments `wanted` accepts."""

    def install() -> None:
        from patchkit.workspace.disk import Disk

        real = getattr(Disk, op)
        done: list[bool] = []

        def hooked(self: Disk, dir_fd: int, *args: str) -> object:
            if not done and wanted(args):
                done.append(True)
                step()
            return real(self, dir_fd, *args)

        setattr(Disk, op, hooked)

    return install


def edit_in_place(path: Path, *, keep_mtime: bool) -> Callable[[], None]:
    def edit() -> None:
        st = path.stat()
        data = path.read_bytes()
        with open(path, "r+b") as handle:
            handle.write(b"X" if data[:1] != b"X" else b"Y")  # same size, other bytes
        if keep_mtime:
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))

    return edit


def tree_of_user(case: Case, name: str, user: tuple[int, int]) -> Path:
    root = case.fresh(name)
    chown_tree(root, *user)
    return root


def test_an_edit_in_place_that_puts_the_mtime_back_is_seen(case: Case, user: tuple[int, int]) -> None:
    root = tree_of_user(case, "edit-mtime-back", user)
    helper = root / HOOKED
    edit = edit_in_place(helper, keep_mtime=True)
    run = run_forked(case.args("apply", root), before=at_operation(
        "link", lambda a: a[0] == Path(HOOKED).name, lambda: as_user(*user, edit)))
    assert run.code == 7, (run.code, run.out, run.err)
    theirs = helper.read_bytes()
    assert theirs.startswith(b"X"), "the hook did not run, or their edit was overwritten"
    assert f"{HOOKED} changed while patchkit was writing it" in run.err and "Traceback" not in run.err, run.err
    assert image(root)[HOOKED][1] == theirs and theirs != case.patched[HOOKED][1], "their edit is kept"
    assert strays(root) == [] and not (root / ".patchkit" / "journal.json").exists()


@pytest.mark.parametrize("keep_mtime", [False, True])
def test_an_edit_in_place_right_before_the_replace_is_kept_not_overwritten(
    case: Case, user: tuple[int, int], keep_mtime: bool
) -> None:
    """With the mtime put back, the edit is caught too: by the original's bytes, read again by its kept link
    after the replace (its size and mtime are the judged ones, and the replace itself moves its ctime). Before
    the fix, that edit was overwritten, exit 0 (found writing a test for patchkit/workspace/commit.py:704's
    ctime comparison, the full run of 2026-12-06: no edit before the replace had kept its mtime)."""
    root = tree_of_user(case, f"edit-before-replace-{keep_mtime}", user)
    helper = root / HOOKED
    edit = edit_in_place(helper, keep_mtime=keep_mtime)
    run = run_forked(case.args("apply", root), before=at_operation(
        "replace", lambda a: a[1] == Path(HOOKED).name and a[0].endswith(".tmp"), lambda: as_user(*user, edit)))
    assert run.code == 7, (run.code, run.out, run.err)
    assert f"{HOOKED} changed while patchkit was writing it" in run.err, run.err
    theirs = helper.read_bytes()
    assert theirs.startswith(b"X") and theirs[1:] == case.original[HOOKED][1][1:], "their edit is back, not ours"
    others = {p: v for p, v in image(root).items() if p != HOOKED}
    assert others == {p: v for p, v in case.original.items() if p != HOOKED}, "every other file restored"
    assert strays(root) == [] and not (root / ".patchkit" / "journal.json").exists()


def test_a_deleted_file_created_again_while_patchkit_finishes_is_not_exit_0(case: Case, user: tuple[int, int]) -> None:
    root = tree_of_user(case, "deleted-back", user)
    gone = root / DELETED

    def recreate() -> None:
        gone.write_bytes(b"mine = 1\n")

    run = run_forked(case.args("apply", root), before=at_operation(
        "rmdir", lambda a: True, lambda: as_user(*user, recreate)))
    assert gone.read_bytes() == b"mine = 1\n", "the hook did not run, or their file was not kept"
    assert run.code == 7, (run.code, run.out, run.err)
    assert f"the write completed, but {DELETED}, which this change deletes, was created again" in run.err, run.err
    assert not (root / ".patchkit" / "journal.json").exists() and strays(root) == []


def test_the_same_hooks_without_a_change_still_succeed(case: Case, user: tuple[int, int]) -> None:
    for op in ("link", "replace", "rmdir"):
        root = tree_of_user(case, f"hooks-unchanged-{op}", user)
        run = run_forked(case.args("apply", root), before=at_operation(op, lambda a: True, lambda: None))
        assert run.code == 0, (op, run.err)
        assert image(root) == case.patched


def test_a_file_created_again_is_found_past_a_deletion_whose_folder_went_away(user: tuple[int, int]) -> None:
    """Two deletions: the first empties its folder (removed at the end), the second leaves its folder; the second
    file is created again while patchkit finishes: the check of what the change deleted passes over the first
    (its folder gone) and finds the second (exit 7, their file kept).

    Kills patchkit/workspace/commit.py:505:core/ReplaceContinueWithBreak#2 (the full run of 2026-12-06), under
    which the check stopped at the first deletion whose folder was gone, and the run ended exit 0."""
    before = {"engine/aaa/first.py": (b"first = 1\n", 0o644), "engine/legacy/gone.py": (b"gone = 1\n", 0o644),
              "engine/legacy/keep.py": (b"keep = 1\n", 0o644)}
    after = {"engine/aaa/first.py": None, "engine/legacy/gone.py": None}
    with shared_case(before, after) as case:
        root = tree_of_user(case, "two-deleted", user)
        gone = root / "engine/legacy/gone.py"

        def recreate() -> None:
            gone.write_bytes(b"mine = 1\n")

        run = run_forked(case.args("apply", root), before=at_operation(
            "rmdir", lambda a: True, lambda: as_user(*user, recreate)))
        assert gone.read_bytes() == b"mine = 1\n", "the hook did not run, or their file was not kept"
        assert run.code == 7, (run.code, run.out, run.err)
        assert "the write completed, but engine/legacy/gone.py, which this change deletes, was created again" \
            in run.err, run.err
        assert not (root / "engine/aaa").exists()


def test_a_fifo_put_at_the_name_right_after_the_kept_link_does_not_hang_the_check(
    case: Case, user: tuple[int, int]
) -> None:
    """Right after the original's kept link is made, the tree's owner puts a FIFO at the file's name. The check
    of the judged bytes opens the name without blocking (O_NONBLOCK), sees another file and stops: exit 7,
    "changed while patchkit was writing it", never a hang waiting for a writer (an alarm in the child ends it
    otherwise).

    Kills patchkit/workspace/commit.py's `_as_judged` open flags without O_NONBLOCK (`O_NONBLOCK & O_CLOEXEC`,
    `O_NONBLOCK // O_CLOEXEC`; the full run of 2026-12-06, as :714 BitAnd#30 and FloorDiv#30 before the fix
    moved them)."""
    root = tree_of_user(case, "fifo-after-link", user)
    helper = root / HOOKED

    def swap() -> None:
        helper.unlink()
        os.mkfifo(helper)

    def install() -> None:
        import signal

        from patchkit.workspace.disk import Disk

        signal.alarm(20)  # a blocking open of the FIFO would wait forever
        real = Disk.link
        done: list[bool] = []

        def link(self: Disk, dir_fd: int, *args: str) -> None:
            real(self, dir_fd, *args)
            if not done and args[0] == helper.name:
                done.append(True)
                as_user(*user, swap)

        Disk.link = link  # type: ignore[method-assign]

    run = run_forked(case.args("apply", root), before=install)
    assert run.signal is None, (run.signal, run.out, run.err)
    assert run.code == 7, (run.code, run.out, run.err)
    assert f"{HOOKED} changed while patchkit was writing it" in run.err, run.err
