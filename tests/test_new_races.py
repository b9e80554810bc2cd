"""Issue 32 item 2, `new --from-tree EDITED` run as root on a copy an unprivileged user owns: a folder the
user swaps for a link (to a root-only folder, as /etc is) between the walk and the read is refused, exit 2
naming the link, and nothing of what it points to reaches the diff or anything written.

The CLI runs in a forked child; the hook between the walk and the read wraps the walk (treediff._entries) so
that, once both trees are listed, the user swaps the folder.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import needs_root
from tests.safety_helpers import as_user, chown_tree, run_forked, shared_workdir, write_files

pytestmark = needs_root
SECRET = b"root:$6$never-in-a-diff$:19000:0:99999:7:::\n"
PRISTINE = {
    "pkg/top.py": (b"top = 1\n", 0o644),
    "pkg/sub/shadow": (b"placeholder = 1\n" * 3, 0o644),
    "pkg/sub/other.py": (b"other = 1\n", 0o644),
}


def make_trees(workdir: Path, user: tuple[int, int]) -> tuple[Path, Path, Path, Path]:
    """(workdir, pristine, edited, secret) in a folder the user reaches: the edited copy is the user's, the
    secret folder root's, 0700."""
    pristine, edited, secret = workdir / "pristine", workdir / "edited", workdir / "secret"
    write_files(pristine, PRISTINE)
    shutil.copytree(pristine, edited)
    (edited / "pkg/top.py").write_bytes(b"top = 2\n")
    (edited / "pkg/sub/shadow").write_bytes(b"placeholder = 2\n" * 3)
    chown_tree(edited, *user)
    secret.mkdir(mode=0o700)
    (secret / "shadow").write_bytes(SECRET)
    (secret / "other.py").write_bytes(b"other = 1\n")  # the folder's other name, so a read gets that far
    os.chmod(secret / "shadow", 0o600)
    return workdir, pristine, edited, secret


@pytest.fixture()
def trees(user: tuple[int, int]) -> Iterator[tuple[Path, Path, Path, Path]]:
    with shared_workdir() as workdir:
        yield make_trees(workdir, user)


def swap_after_the_walk(swap: Callable[[], None]) -> Callable[[], None]:
    """In the forked child: run `swap` once both trees have been walked, before any file is read."""

    def install() -> None:
        from patchkit.tooling import treediff

        real = treediff._entries
        calls: list[int] = []

        def entries(*args: object) -> object:
            found = real(*args)  # type: ignore[arg-type]
            calls.append(1)
            if len(calls) == 2:
                swap()
            return found

        treediff._entries = entries  # type: ignore[assignment]

    return install


def written(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in folder.rglob("*") if p.is_file()) if folder.exists() else b""


def test_a_folder_swapped_for_a_link_after_the_walk_is_refused_and_never_read(
    trees: tuple[Path, Path, Path, Path], user: tuple[int, int]
) -> None:
    workdir, pristine, edited, secret = trees

    def user_swaps() -> None:
        as_user(*user, lambda: (os.rename(edited / "pkg/sub", edited / "pkg/sub.real"),
                                os.symlink(secret, edited / "pkg/sub")))

    patches = workdir / "patches"
    run = run_forked(
        ["new", "kv", "--patches", str(patches), "--target", "pkg", "--local", "r",
         "--from-tree", str(edited), "--base-tree", str(pristine)],
        before=lambda: (os.chdir(workdir), swap_after_the_walk(user_swaps)()),
    )
    assert (edited / "pkg/sub").is_symlink(), "the hook did not run"
    assert SECRET not in written(patches) and SECRET not in run.out.encode() and SECRET not in run.err.encode()
    assert run.code == 2, (run.code, run.out, run.err)
    assert f"{edited}/pkg/sub" in run.err and "symbolic link" in run.err and "Traceback" not in run.err, run.err
    assert not list(patches.rglob("*.diff")) if patches.exists() else True


def test_the_same_trees_without_a_swap_make_the_diff(trees: tuple[Path, Path, Path, Path]) -> None:
    """The hook alone changes nothing: both edits are in the diff."""
    workdir, pristine, edited, _ = trees
    patches = workdir / "patches"
    run = run_forked(
        ["new", "kv", "--patches", str(patches), "--target", "pkg", "--local", "r",
         "--from-tree", str(edited), "--base-tree", str(pristine)],
        before=lambda: (os.chdir(workdir), swap_after_the_walk(lambda: None)()),
    )
    assert run.code == 0, run.err
    diff = (patches / "kv" / "kv.diff").read_bytes()
    assert b"+top = 2" in diff and b"+placeholder = 2" in diff
