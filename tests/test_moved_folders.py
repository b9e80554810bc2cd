"""Issue 21, the write stage's honesty, as root with the engine tree owned by a real unprivileged user:

- a folder the tree's owner moves out of the tree between the plan and the replace: the write does not land in
  the tree, so the run says so naming the file, restores every file (the moved folder's too, through the
  folder the transaction wrote in), leaves no temp file or kept link anywhere, and exits 7;
- recovery puts a kept original back only if it is the file the journal recorded (all of it: inode, size,
  mtime, owner), else exit 8 naming the file;
- the lock file is state like the rest: owned by the running user or root, not writable by group or others.

Everything drives the real CLI in forked children; the owner's steps run as that user. The hook point between
the plan and the replace is the transaction's own replace (workspace.disk.Disk.replace), wrapped in the child.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchkit.workspace.names import TEMP_NAME
from tests.conftest import needs_root
from tests.safety_helpers import (
    Case,
    Image,
    as_user,
    chown_tree,
    fault_env,
    image,
    move_before_replace,
    run_forked,
    shared_case,
    whole_state,
)

pytestmark = needs_root
STATE = ".patchkit"
HOOKED = "engine/tools/helper.py"  # a modification; its folder holds nothing else


@pytest.fixture(scope="module")
def case() -> Iterator[Case]:
    with shared_case() as made:
        yield made


def give_tree(root: Path, user: tuple[int, int]) -> None:
    """The engine's files to the user, patchkit's own state (if any) staying root's, as after a root run."""
    chown_tree(root, *user)
    state = root / STATE
    if state.is_dir():
        for path in [state, *state.rglob("*")]:
            os.chown(path, 0, 0, follow_symlinks=False)


def strays(*folders: Path) -> list[str]:
    return sorted(str(p) for folder in folders for p in folder.rglob("*") if TEMP_NAME.fullmatch(p.name))


def sub_image(whole: Image, folder: str) -> Image:
    prefix = folder + "/"
    return {rel[len(prefix):]: v for rel, v in whole.items() if rel.startswith(prefix)}


def without(whole: Image, folder: str) -> Image:
    return {rel: v for rel, v in whole.items() if rel != folder and not rel.startswith(folder + "/")}


@pytest.mark.parametrize("action", ["apply", "revert"])
@pytest.mark.parametrize("moved", ["engine/tools", "engine"], ids=["its folder", "the top folder"])
def test_a_folder_moved_out_during_the_write_is_reported_restored_and_left_clean(
    case: Case, user: tuple[int, int], action: str, moved: str
) -> None:
    root = case.fresh(f"moved-{action}-{moved.replace('/', '-')}", patched=action == "revert")
    start = image(root)
    give_tree(root, user)
    outside = case.workdir / f"outside-{action}-{moved.replace('/', '-')}"
    shutil.rmtree(outside, ignore_errors=True)
    outside.mkdir()
    os.chown(outside, *user)
    target = outside / Path(moved).name

    def owner_moves_it() -> None:  # what the tree's owner can do at any moment
        as_user(*user, lambda: os.rename(root / moved, target))

    run = run_forked(case.args(action, root), before=move_before_replace(Path(HOOKED).name, owner_moves_it))
    assert target.is_dir(), "the hook did not run: the replace of the hooked file was never reached"
    assert run.code == 7, (run.code, run.out, run.err)
    assert "did not land in the tree" in run.err and "Traceback" not in run.err, run.err
    assert f"{root}/{moved}/" in run.err, run.err  # names a file under the folder that went away
    assert "applied" not in run.out and "reverted" not in run.out, run.out
    # Every file is back as it was: the tree's (minus what its owner moved away) and the moved folder's.
    assert image(root) == without(start, moved)
    assert image(target) == sub_image(start, moved)
    assert strays(root, outside) == [], "no temp file or kept link may be left, in the tree or the moved folder"
    assert not (root / STATE / "journal.json").exists()
    assert not (root / STATE / "applied" / "safety-pr1.json").exists() or action == "revert"


def test_the_same_run_without_a_move_still_succeeds(case: Case, user: tuple[int, int]) -> None:
    """The hook alone changes nothing: the check after the last replace passes on an undisturbed tree."""
    root = case.fresh("unmoved")
    chown_tree(root, *user)
    run = run_forked(case.args("apply", root), before=move_before_replace(Path(HOOKED).name, lambda: None))
    assert run.code == 0, run.err
    assert whole_state(case, root) == "after"


def test_a_file_rewritten_in_place_after_its_replace_is_not_reported_as_written(
    case: Case, user: tuple[int, int]
) -> None:
    """Same inode, same size, other bytes, written by the owner after patchkit's replace (before the run ends):
    the check compares the bytes, not only the identity."""
    root = case.fresh("rewritten-in-place")
    give_tree(root, user)
    helper = root / HOOKED

    def owner_rewrites_it() -> None:
        def rewrite() -> None:
            data = helper.read_bytes()
            with open(helper, "r+b") as handle:
                handle.write(bytes([data[0] ^ 1]))

        as_user(*user, rewrite)

    run = run_forked(case.args("apply", root), before=move_before_replace("safety-pr1.json", owner_rewrites_it))
    assert run.code == 7, (run.code, run.err)
    assert f"{helper}: the write did not land in the tree: its content is not what patchkit just wrote" in run.err
    assert strays(root) == [] and not (root / STATE / "journal.json").exists()


# ------------------------------------------------------------------------------------------- recovery


def interrupted_with_kept_original(case: Case, name: str, user: tuple[int, int]) -> tuple[Path, Path, Path]:
    """An apply on a user-owned tree SIGKILLed once a file was replaced: (root, the replaced file, its kept link,
    which holds the original and is the only name left of it)."""
    for n in range(8, 80):
        root = case.fresh(name)
        chown_tree(root, *user)
        run_forked(case.args("apply", root), fault_env(n))
        journal = root / STATE / "journal.json"
        if not journal.exists():
            continue
        header = json.loads(journal.read_bytes().partition(b"\n")[0])
        for entry in header["entries"]:
            if entry["area"] != "tree" or entry["before"] is None:
                continue
            path = root / entry["path"]
            kept = path.parent / entry["keep"]
            if kept.exists() and path.exists() and path.stat().st_ino != kept.stat().st_ino:
                return root, path, kept
    raise AssertionError("no kill point left a replaced file with its kept original")


def test_a_kept_original_changed_in_place_is_not_put_back(case: Case, user: tuple[int, int]) -> None:
    """Same inode number, other content: an inode comparison alone would rename it back as the original."""
    root, path, kept = interrupted_with_kept_original(case, "kept-changed", user)
    in_tree = path.read_bytes()

    def tamper() -> None:
        with open(kept, "ab") as handle:
            handle.write(b"import os; os.system('id')\n")

    as_user(*user, tamper)
    run = run_forked(case.args("status", root))
    assert run.code == 8, (run.code, run.err)
    rel = path.relative_to(root).as_posix()
    assert f"the kept original of {rel} is not the file the journal recorded" in run.err, run.err
    assert "size" in run.err and "mtime_ns" in run.err and str(kept) in run.err, run.err
    assert "Traceback" not in run.err
    assert path.read_bytes() == in_tree, "the tampered file must not be renamed into the tree"
    assert (root / STATE / "journal.json").exists(), "the journal is kept for a manual recovery"


def test_a_kept_original_replaced_by_another_file_is_not_put_back(case: Case, user: tuple[int, int]) -> None:
    root, path, kept = interrupted_with_kept_original(case, "kept-replaced", user)
    in_tree = path.read_bytes()
    planted = b"planted = True\n"

    def replace_it() -> None:
        kept.unlink()
        kept.write_bytes(planted)

    as_user(*user, replace_it)
    run = run_forked(case.args("status", root))
    assert run.code == 8, (run.code, run.err)
    assert f"the kept original of {path.relative_to(root).as_posix()}" in run.err, run.err
    assert path.read_bytes() == in_tree and path.read_bytes() != planted
    assert (root / STATE / "journal.json").exists()


def test_an_untouched_kept_original_is_still_put_back(case: Case, user: tuple[int, int]) -> None:
    root, path, kept = interrupted_with_kept_original(case, "kept-untouched", user)
    original = kept.stat().st_ino
    run = run_forked(case.args("status", root))
    assert run.code == 3 and "recovered an interrupted apply" in run.err, run.err
    assert not kept.exists() and not (root / STATE / "journal.json").exists()
    assert path.stat().st_ino == original  # renamed back: the original inode itself


# ----------------------------------------------------------------------------------------------- lock


@pytest.mark.parametrize("action", ["status", "apply"])
def test_a_lock_file_planted_by_the_tree_owner_is_refused(case: Case, user: tuple[int, int], action: str) -> None:
    root = case.fresh(f"planted-lock-{action}")
    chown_tree(root, *user)

    def plant() -> None:
        os.mkdir(root / STATE, 0o755)
        (root / STATE / "lock").write_bytes(b"")
        os.chmod(root / STATE / "lock", 0o644)

    as_user(*user, plant)
    os.chown(root / STATE, 0, 0)  # the folder is root's (as a root run makes it); the file in it is not
    before = image(root)
    run = run_forked(case.args(action, root))
    assert run.code == 2, (run.code, run.err)
    assert f"{root}/{STATE}/lock" in run.err and f"is owned by uid {user[0]}" in run.err, run.err
    assert image(root) == before
    assert (root / STATE / "lock").read_bytes() == b"", "nothing is written into it"


def test_a_lock_file_others_could_write_is_refused(case: Case) -> None:
    root = case.fresh("writable-lock")
    os.mkdir(root / STATE, 0o755)
    (root / STATE / "lock").write_bytes(b"")
    os.chmod(root / STATE / "lock", 0o664)
    run = run_forked(case.args("apply", root))
    assert run.code == 2 and "writable by group or others" in run.err, run.err
    assert whole_state(case, root) == "before"


def test_a_folder_moved_out_and_replaced_by_a_link_to_it_is_reported_not_followed(
    case: Case, user: tuple[int, int]
) -> None:
    """The tree's owner moves engine/tools out of the tree right before the replace and leaves a symbolic link to
    it at its name: the file lands (through the held folder) outside the tree, and the check after the write,
    walking the tree by name without following links, says so: exit 7, every file put back.

    Kills patchkit/workspace/commit.py:90:core/ReplaceBinaryOperator_BitOr_BitAnd#3 (`O_NOFOLLOW & O_CLOEXEC`,
    no O_NOFOLLOW in the walk: the link was followed to the moved folder, the one written in, so the write counted
    as landed; finishing the transaction then failed on the link, exit 8, the journal kept and nothing put back)."""
    root = case.fresh("moved-and-linked")
    start = image(root)
    give_tree(root, user)
    outside = case.workdir / "outside-moved-and-linked"
    shutil.rmtree(outside, ignore_errors=True)
    outside.mkdir()
    os.chown(outside, *user)
    target = outside / "tools"

    def owner_moves_it_and_links_it() -> None:
        as_user(*user, lambda: (os.rename(root / "engine/tools", target), os.symlink(target, root / "engine/tools")))

    run = run_forked(case.args("apply", root),
                     before=move_before_replace(Path(HOOKED).name, owner_moves_it_and_links_it))
    assert (root / "engine/tools").is_symlink(), "the hook did not run"
    assert run.code == 7, (run.code, run.out, run.err)
    assert "did not land in the tree" in run.err and "Traceback" not in run.err, run.err
    assert image(target) == sub_image(start, "engine/tools")
    assert strays(root, outside) == []
    assert not (root / STATE / "journal.json").exists()


def _folders_around(workdir: Path, inode: int, name: str) -> tuple[Path, Path]:
    """Two folders of the same filesystem, one whose inode number is below `inode`, one above (comparisons of
    identities as tuples must not pass either way)."""
    made = []
    for n in range(40):
        folder = workdir / f"{name}-{n}"
        folder.mkdir(exist_ok=True)
        made.append(folder)
    below = [f for f in [workdir, *made] if f.stat().st_ino < inode]
    above = [f for f in made if f.stat().st_ino > inode]
    if not below or not above:
        pytest.skip(f"no folder with an inode number on each side of {inode} here")
    return below[0], above[0]


@pytest.mark.parametrize("what", ["moved away", "a link to a folder below it", "a link to a folder above it"])
def test_a_root_moved_or_replaced_during_the_write_is_reported_and_restored_where_it_went(
    case: Case, what: str
) -> None:
    """Right before the last replace, the root's path stops naming the folder being written: it is moved away
    (nothing at the path), or a link to another folder (of a lower, or a higher, inode number) is put there. The
    write is reported as not landed ("the root's path no longer names the folder patchkit wrote in"), exit 7, and
    every file is put back in the moved root, through the descriptors the transaction holds.

    Kills patchkit/workspace/commit.py:614's comparisons of the root's identity (`>=`, `<=`, `is not`) and
    :615/:616's (the OSError of a root that is gone escaping; `same_root = True` there), the full run of
    2026-12-06: no test had moved the root itself."""
    slug = what.replace(" ", "-")
    root = case.fresh(f"root-{slug}")
    start = image(root)
    moved = case.workdir / f"root-{slug}-moved"
    shutil.rmtree(moved, ignore_errors=True)
    below, above = _folders_around(case.workdir, root.stat().st_ino, f"around-{slug}")

    def move_the_root() -> None:
        os.rename(root, moved)
        if what != "moved away":
            root.symlink_to(below if "below" in what else above)

    run = run_forked(case.args("apply", root), before=move_before_replace(Path(HOOKED).name, move_the_root))
    assert moved.is_dir(), "the hook did not run"
    assert run.code == 7, (run.code, run.out, run.err)
    assert "the root's path no longer names the folder patchkit wrote in" in run.err, run.err
    assert image(moved) == start
    assert strays(moved) == [] and not (moved / STATE / "journal.json").exists()


@pytest.mark.parametrize("side", ["below", "above"])
def test_a_folder_swapped_for_another_during_the_write_is_named_moved_or_replaced(case: Case, side: str) -> None:
    """Right before the last replace, the folder being written in is moved out and another folder (of a lower,
    or a higher, inode number) is moved in at its name: the check after the write says the folder was moved or
    replaced (exit 7, everything put back), not merely that the file is not the one written.

    Kills patchkit/workspace/commit.py:648's comparisons of the folder's identity (`>` with a lower inode, `<`
    with a higher one; the full run of 2026-12-06): as (device, inode) tuples, either order must be caught."""
    def made(when: str) -> list[Path]:
        folders = [case.workdir / f"swap-in-{side}-{when}-{n}" for n in range(20)]
        for f in folders:
            f.mkdir(exist_ok=True)
        return folders

    earlier = made("before")  # on tmpfs, ext4 and most: lower inode numbers than the tree's, the later ones higher
    root = case.fresh(f"swapped-{side}")
    folder = root / Path(HOOKED).parent
    inode = folder.stat().st_ino
    candidates = [f for f in [*earlier, *made("after")] if (f.stat().st_ino < inode) == (side == "below")]
    if not candidates:
        pytest.skip(f"no folder with an inode number {side} {inode} here")
    other = candidates[0]
    outside = case.workdir / f"swapped-{side}-out"
    shutil.rmtree(outside, ignore_errors=True)
    outside.mkdir()

    def swap() -> None:
        os.rename(folder, outside / "tools")
        os.rename(other, folder)

    run = run_forked(case.args("apply", root), before=move_before_replace(Path(HOOKED).name, swap))
    assert (outside / "tools").is_dir(), "the hook did not run"
    assert run.code == 7, (run.code, run.out, run.err)
    assert "its folder was moved or replaced while patchkit wrote in it" in run.err, run.err
