"""Issue 10, privilege and trust: `.patchkit` is input like any other, run as root next to an unprivileged user.

Everything here drives the real CLI (forked) on real trees; the attacker's steps run as a real unprivileged
user (created with useradd if needed) wherever the attack is something that user does.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import needs_root
from tests.safety_helpers import (
    PATCH_ID,
    Case,
    as_user,
    chown_tree,
    fault_env,
    image,
    interrupted_tree,
    run_forked,
    run_here,
    shared_case,
)

pytestmark = needs_root
STATE = ".patchkit"


@pytest.fixture(scope="module")
def case() -> Iterator[Case]:
    with shared_case() as made:
        yield made


def refused(case: Case, root: Path, action: str, needle: str) -> str:
    before = image(root)
    state_before = image(root / STATE) if (root / STATE).is_dir() else None
    run = run_forked(case.args(action, root))
    assert run.code == 2, (run.code, run.err)
    assert needle in run.err and "Traceback" not in run.err, run.err
    assert image(root) == before, "nothing may be written to the tree"
    if state_before is not None:
        assert image(root / STATE) == state_before, "nor to the state folder"
    return run.err


@pytest.mark.parametrize("action", ["status", "apply", "revert"])
def test_a_journal_another_user_owns_is_never_replayed(case: Case, user: tuple[int, int], action: str) -> None:
    root = interrupted_tree(case, f"owned-{action}")
    os.chown(root / STATE, *user)
    os.chown(root / STATE / "journal.json", *user)
    err = refused(case, root, action, f"is owned by uid {user[0]}")
    assert f"{root}/{STATE}" in err and "chown" in err  # names the folder and says what to do


@pytest.mark.parametrize("target", ["folder", "journal"])
def test_a_journal_others_could_write_is_never_replayed(case: Case, target: str) -> None:
    root = interrupted_tree(case, f"writable-{target}")
    os.chmod(root / STATE if target == "folder" else root / STATE / "journal.json", 0o777)
    refused(case, root, "status", "writable by group or others")


def test_a_journal_planted_by_the_tree_owner_cannot_write_setuid_files_or_into_git(
    case: Case, user: tuple[int, int]
) -> None:
    root = interrupted_tree(case, "planted")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_bytes(b"[core]\n")
    chown_tree(root, *user)
    os.chown(root / STATE, 0, 0)  # root's real state stays root's: the attacker swaps it instead
    os.chown(root / STATE / "journal.json", 0, 0)
    real = (root / STATE / "journal.json").read_bytes()
    header, _, body = real.partition(b"\n")
    doc = json.loads(header)
    for entry in doc["entries"]:
        if entry["before"]:
            entry["before"]["mode"] = 0o4755  # "restore" everything setuid
    doc["entries"].append({**doc["entries"][0], "path": ".git/config"})
    forged = json.dumps(doc).encode() + b"\n" + body

    def swap() -> None:  # what the tree's owner can do: move root's folder away, put their own in its place
        os.rename(root / STATE, root / ".patchkit-old")
        os.mkdir(root / STATE, 0o755)
        (root / STATE / "journal.json").write_bytes(forged)

    as_user(*user, swap)
    refused(case, root, "status", f"is owned by uid {user[0]}")
    assert not any(p.stat().st_mode & (stat.S_ISUID | stat.S_ISGID) for p in root.rglob("*") if p.is_file())
    assert (root / ".git" / "config").read_bytes() == b"[core]\n"


def test_a_forged_record_and_stored_diff_cannot_make_revert_write(case: Case, user: tuple[int, int]) -> None:
    root = case.fresh("forged-record", patched=True)
    chown_tree(root, *user)
    for path in [root / STATE, *(root / STATE).rglob("*")]:
        os.chown(path, 0, 0)
    record_name = f"applied/{PATCH_ID}.json"
    record = json.loads((root / STATE / record_name).read_bytes())
    record["hunkset_sha256"] = "0" * 64  # a "stale" record: revert would take the stored copy at its word

    def forge() -> None:
        shutil.copytree(root / STATE, root / ".elsewhere", ignore=shutil.ignore_patterns("lock"))  # 0600, root's
        os.rename(root / STATE, root / ".patchkit-old")
        os.rename(root / ".elsewhere", root / STATE)
        (root / STATE / record_name).write_text(json.dumps(record), encoding="utf-8")

    as_user(*user, forge)
    assert (root / STATE / record_name).stat().st_uid == user[0]
    refused(case, root, "revert", f"is owned by uid {user[0]}")
    tree = {p: v for p, v in image(root).items() if not p.startswith(".patchkit-old")}
    assert tree == case.patched, "the tree is still the patched one"


def run_as_that_user(case: Case, user: tuple[int, int], args: list[str]) -> None:
    """Run patchkit as the unprivileged user (in a forked child that dropped to it); fail unless it exits 0.

    A checkout under a private folder (mode 0700, as a home folder is) is out of that user's reach: its venv,
    its interpreter, its sources. So the user runs patchkit in this process's fork, with nothing left to read
    from the checkout: every module a run needs was imported here (build_case ran each command in-process),
    the code fingerprint the applied record carries (which reads every module's source) is computed here
    before the fork, and the child works from the world-readable work folder, not from the checkout (whose
    pyproject.toml the registry lookup would read). The parse cache is turned off: it lives in the test
    session's private temp folder.
    """
    from patchkit.run.fastpath import code_fingerprint

    code_fingerprint()  # cached in this process: the child reuses it instead of reading the checkout's sources

    def child() -> None:
        os.chdir(case.workdir)
        if run_here(args) != 0:
            os._exit(3)

    as_user(*user, child)


def test_state_another_user_made_by_running_patchkit_is_refused_until_chowned(
    case: Case, user: tuple[int, int]
) -> None:
    root = case.fresh("users-own")
    chown_tree(root, *user)
    run_as_that_user(case, user, case.args("apply", root))
    assert (root / STATE).stat().st_uid == user[0]
    refused(case, root, "status", f"is owned by uid {user[0]}")
    for path in [root / STATE, *(root / STATE).rglob("*")]:
        os.chown(path, 0, 0)  # what the hint says to do once the content is known to be good
    assert run_forked(case.args("status", root)).code == 0


def test_a_record_nobody_else_could_write_is_still_used(case: Case, user: tuple[int, int]) -> None:
    # The other half of the rule: a tree owned by a service user, patched by root, keeps working.
    root = case.fresh("service-user")
    chown_tree(root, *user)
    assert run_forked(case.args("apply", root)).code == 0
    run = run_forked(case.args("status", root, "--json"))
    assert run.code == 0 and run.json()["state"] == "applied", run.err
    assert run_forked(case.args("revert", root)).code == 0


def test_umask_000_gives_explicit_modes(case: Case) -> None:
    root = case.fresh("umask")
    old = os.umask(0)
    try:
        killed = run_forked(case.args("apply", root), fault_env(14))
        assert killed.killed
        journal = root / STATE / "journal.json"
        assert journal.exists() and stat.S_IMODE(journal.stat().st_mode) == 0o600
        done = run_forked(case.args("apply", root))
    finally:
        os.umask(old)
    assert done.code == 0, done.err
    modes = {p.relative_to(root).as_posix(): stat.S_IMODE(p.lstat().st_mode) for p in root.rglob("*")}
    assert modes[STATE] == 0o755
    assert modes[f"{STATE}/applied"] == 0o755
    assert modes[f"{STATE}/applied/{PATCH_ID}.json"] == 0o644
    assert modes[f"{STATE}/lock"] == 0o600  # nobody else may open (and hold) it
    assert modes["engine/plugins"] == modes["engine/plugins/extra"] == 0o755
    assert modes["engine/plugins/extra/added.py"] == 0o644  # the diff's 100644, not 0666
    assert not [p for p, m in modes.items() if m & 0o002], "nothing world-writable"
    assert image(root) == case.patched
    run = run_forked(case.args("status", root, "--json"))
    assert run.json()["state"] == "applied"


def test_root_keeps_owners_and_drops_setuid_on_a_rewritten_file(case: Case, user: tuple[int, int]) -> None:
    root = case.fresh("setuid")
    chown_tree(root, *user)
    helper = root / "engine/tools/helper.py"  # modified by the diff, stays 0755
    os.chmod(helper, 0o6755)
    os.chown(root / "engine/core.py", user[0], 0)  # a group that differs from the user's
    run = run_forked(case.args("apply", root))
    assert run.code == 0, run.err
    st = helper.stat()
    assert (st.st_uid, st.st_gid) == user
    assert stat.S_IMODE(st.st_mode) == 0o755, "setuid/setgid are dropped on a content change, like git"
    core = (root / "engine/core.py").stat()
    assert (core.st_uid, core.st_gid) == (user[0], 0)
    assert (root / "engine/run.sh").stat().st_uid == user[0]  # a mode-only change keeps the owner too
    setuid = [p for p in root.rglob("*") if p.is_file() and p.stat().st_mode & (stat.S_ISUID | stat.S_ISGID)]
    assert setuid == []


def test_read_only_commands_create_nothing(case: Case) -> None:
    root = case.fresh("read-only-commands")
    for args in (case.args("status", root), case.args("apply", root, "--dry-run")):
        run = run_forked(args)
        assert run.code in (0, 3), run.err
        assert not (root / STATE).exists() and not (root / ".gitignore").exists()
    assert image(root) == case.original


def test_a_journal_moved_in_from_another_tree_is_refused_but_a_moved_tree_recovers(case: Case) -> None:
    """Kills patchkit/workspace/journal.py:152:core/ReplaceComparisonOperator_NotEq_Lt#2 (`written_for < root`:
    a journal of a root whose path sorts after this one's was replayed here): moved both ways."""
    for source_name, target_name in (("journal-source", "journal-target"), ("journal-z-source", "journal-a-target")):
        source = interrupted_tree(case, source_name)
        target = case.fresh(target_name)
        os.rename(source / STATE, target / STATE)  # root's own, trusted folder, but written for another root
        refused(case, target, "status", "written for another root")
    moved = interrupted_tree(case, "journal-moved")
    renamed = moved.with_name("journal-moved-elsewhere")  # the same volume mounted at another path
    shutil.rmtree(renamed, ignore_errors=True)
    os.rename(moved, renamed)
    run = run_forked(case.args("status", renamed))
    assert run.code == 3 and "recovered an interrupted apply" in run.err, run.err
    assert image(renamed) == case.original


def test_a_journal_of_another_root_is_refused_whichever_inode_number_is_higher(case: Case) -> None:
    """A journal moved in from another tree, at another path and on a folder of a lower, then a higher, inode
    number than the one it was written for: refused both times (a journal is replayed only on its own root: the
    same path, or the same folder moved).

    Kills patchkit/workspace/journal.py:152:core/ReplaceComparisonOperator_NotEq_Lt#3 (`written_ino < root_ino`:
    a journal of a root whose folder's inode number is higher was replayed here; the full run of 2026-12-06)."""
    targets = [case.fresh(f"journal-ino-target-{i}") for i in range(4)]  # folders made before the source's
    source = interrupted_tree(case, "journal-ino-source")
    written = source.stat().st_ino
    targets += [case.fresh(f"journal-ino-target-{i}") for i in range(4, 8)]  # and after it
    lower = [t for t in targets if t.stat().st_ino < written]
    higher = [t for t in targets if t.stat().st_ino > written]
    if not lower or not higher:
        pytest.skip("no target folder on both sides of the source's inode number on this filesystem")
    for target in (lower[0], higher[0]):
        shutil.copytree(source / STATE, target / STATE, symlinks=True)  # root's own copy, trusted, another root
        refused(case, target, "status", "written for another root")


def test_a_journal_on_its_own_path_recovers_when_the_root_folder_was_made_again(case: Case) -> None:
    """The root folder made again at its own path around the same files (every entry renamed into a new folder
    that then takes the old one's name: another inode, the same path, each file's inode kept): the journal is
    the root's, and the interrupted apply is recovered.

    Kills patchkit/workspace/journal.py:152:core/ReplaceComparisonOperator_NotEq_IsNot#2 (`written_for is not
    ...`: the path never matched, and a root whose folder is new was refused; the full run of 2026-12-06)."""
    root = interrupted_tree(case, "journal-root-made-again")
    again = root.with_name("journal-root-made-again-new")
    shutil.rmtree(again, ignore_errors=True)
    again.mkdir()
    os.chmod(again, stat.S_IMODE(root.stat().st_mode))
    for entry in os.listdir(root):
        os.rename(root / entry, again / entry)
    root.rmdir()
    os.rename(again, root)
    run = run_forked(case.args("status", root))
    assert run.code == 3 and "recovered an interrupted apply" in run.err, run.err
    assert image(root) == case.original


@pytest.mark.parametrize("folder", ["aaa", "zzz"])
def test_a_journal_whose_folders_do_not_match_a_path_is_unreadable(case: Case, folder: str) -> None:
    """A journal (root's own, trusted) whose entry for a file two folders deep lists another second folder, one
    that sorts before the real one or after it: the journal is unreadable, nothing is replayed, and the tree and
    the journal stay as they were.

    Kills patchkit/workspace/journal.py:175's folders compared with `>`, `<` and `is` (a list of folders that
    sorts one way, or any list, was taken for the path's own; the full run of 2026-12-06)."""
    root = interrupted_tree(case, f"journal-folders-{folder}")
    journal = root / STATE / "journal.json"
    header, _, body = journal.read_bytes().partition(b"\n")
    doc = json.loads(header)
    entry = next(e for e in doc["entries"] if e["path"].count("/") == 2)
    entry["folders"][1][0] = f"{entry['folders'][0][0]}/{folder}"
    journal.write_bytes(json.dumps(doc, ensure_ascii=True, sort_keys=True).encode("ascii") + b"\n" + body)
    before, kept = image(root), journal.read_bytes()
    run = run_forked(case.args("status", root))
    assert run.code == 8 and "do not match its path" in run.err and "Traceback" not in run.err, run.err
    assert image(root) == before and journal.read_bytes() == kept


def test_a_user_who_cannot_reach_the_root_gets_a_clear_error(case: Case, user: tuple[int, int]) -> None:
    root = case.fresh("unreachable")
    hidden = case.workdir / "hidden"
    hidden.mkdir(mode=0o700, exist_ok=True)
    inner = hidden / "tree"
    shutil.rmtree(inner, ignore_errors=True)
    os.rename(root, inner)

    def status() -> None:
        import contextlib
        import io

        from patchkit.cli.main import run

        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = run(case.args("status", inner))
        if code != 2 or "cannot reach the engine root" not in err.getvalue() or "Traceback" in err.getvalue():
            raise AssertionError((code, err.getvalue()))

    as_user(*user, status)
