"""Recovery checks what it restores: never a file that is not the original it kept (issue 21's last finding),
never a journal that lists one path twice.

During a transaction every replaced or deleted file keeps its original inode under a `.patchkit-<hex>.orig`
link next to it. Whoever owns the tree can swap that link for a file of their own while the apply is killed;
the next run's rollback must then not move the planted file into the tree. It may restore the journal's copy
of the original, or refuse (exit 8, naming the file, the journal kept); either way the planted bytes never
land at the file's name. Driven through the CLI only (the check itself may compare more than the inode).

The kept-link test runs as root, the tree owned by a real unprivileged user who plants the file.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from patchkit.workspace.names import TEMP_NAME
from tests.conftest import needs_root
from tests.safety_helpers import (
    Case,
    Run,
    as_user,
    chown_tree,
    fault_env,
    image,
    run_forked,
    shared_case,
    whole_state,
)

PLANTED = b"planted by the tree's owner: must never be renamed into the tree\n" * 3


@pytest.fixture(scope="module")
def case() -> Iterator[Case]:
    with shared_case() as made:
        yield made


def kept_links(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.orig") if TEMP_NAME.fullmatch(p.name) and ".patchkit" not in p.parts)


def without_temps(root: Path) -> dict[str, tuple[str, bytes, int]]:
    return {rel: v for rel, v in image(root).items() if not TEMP_NAME.fullmatch(rel.rsplit("/", 1)[-1])}


@needs_root
def test_a_kept_link_swapped_by_the_tree_owner_is_never_restored(case: Case, user: tuple[int, int]) -> None:
    attacked = 0
    for n in range(0, 200):
        root = case.fresh("kept-link")
        chown_tree(root, *user)
        run = run_forked(case.args("apply", root), fault_env(n))
        if not run.killed:
            break
        links = kept_links(root)
        if not links:
            continue

        def swap(links: list[Path] = links) -> None:
            # A new file (a new inode: the original is still linked) renamed over each kept link.
            for link in links:
                planted = link.with_name("planted.tmp")
                planted.write_bytes(PLANTED)
                os.rename(planted, link)

        as_user(*user, swap)
        attacked += 1
        where = f"kill after op {n}, swapped {[p.relative_to(root).as_posix() for p in links]}"
        after = run_forked(case.args("status", root))
        tree = image(root)
        landed = [rel for rel, (_, data, _) in tree.items() if data == PLANTED and not TEMP_NAME.fullmatch(
            rel.rsplit("/", 1)[-1])]
        assert landed == [], f"{where}: the planted file was restored as {landed}: {after.err}"
        assert "Traceback" not in after.err, after.err
        if after.code == 8:  # refused: the journal is kept for a person to look at, the file named
            assert (root / ".patchkit" / "journal.json").exists(), where
            assert any(p.name in after.err for p in links) or any(
                str(p.parent.relative_to(root)) in after.err for p in links), after.err
            continue
        assert after.code in (0, 3), f"{where}: exit {after.code}: {after.err}"
        # Rolled back to the original, or forward (every file was written: the kept links are only dropped).
        assert without_temps(root) in (case.original, case.patched), f"{where}: a mixed tree: {after.err}"
    assert attacked >= 3, f"only {attacked} kill points left a kept link to swap"


def test_a_journal_that_lists_a_path_twice_is_not_replayed(case: Case) -> None:
    for n in range(8, 60):
        root = case.fresh("listed-twice")
        run_forked(case.args("apply", root), fault_env(n))
        journal = root / ".patchkit" / "journal.json"
        if journal.exists() and whole_state(case, root) is None:
            break
    else:
        raise AssertionError("no kill point left a journal")
    header, _, body = journal.read_bytes().partition(b"\n")
    doc = json.loads(header)
    first = next(e for e in doc["entries"] if e["before"] is not None)
    doc["entries"].append({**first, "before": {**first["before"], "mode": 0o600}})  # the same path, restored twice
    journal.write_bytes(json.dumps(doc).encode() + b"\n" + body)
    before = image(root)
    run = run_forked(case.args("status", root))
    assert run.code == 8, (run.code, run.err)
    assert "journaled twice" in run.err and str(journal) in run.err and "Traceback" not in run.err, run.err
    assert image(root) == before and journal.exists()


@pytest.fixture(scope="module")
def mode_case() -> Iterator[Case]:
    # A mode-only change after an edit: after the edit lands, the mode-only file already has its new bytes.
    script = b"#!/bin/sh\necho run\n"
    before = {"engine/a_edited.sh": (b"#!/bin/sh\necho 1\n", 0o644), "engine/z_mode_only.sh": (script, 0o644)}
    after = {"engine/a_edited.sh": (b"#!/bin/sh\necho 2\n", 0o755), "engine/z_mode_only.sh": (script, 0o755)}
    with shared_case(before, after) as made:
        yield made


def _edit_whose_old_hash_sorts(higher: bool) -> tuple[bytes, bytes]:
    """An edit (old, new) whose old sha256 hex sorts after (or before) the new one's: a `>=` (or `<=`) of the
    two would pass."""
    old = b"#!/bin/sh\necho 1\n"
    new = next(b"#!/bin/sh\necho %d\n" % i for i in range(2, 100)
               if (hashlib.sha256(old).hexdigest() > hashlib.sha256(b"#!/bin/sh\necho %d\n" % i).hexdigest())
               == higher)
    return old, new


@pytest.fixture(scope="module")
def down_case() -> Iterator[Case]:
    # Two edits that keep their mode (the old hash sorting higher, lower) and a mode-only change down, to 0644.
    old, new = _edit_whose_old_hash_sorts(higher=True)
    old_b, new_b = _edit_whose_old_hash_sorts(higher=False)
    script = b"#!/bin/sh\necho run\n"
    before = {"engine/a_edited.sh": (old, 0o644), "engine/b_edited.sh": (old_b, 0o644),
              "engine/z_mode_down.sh": (script, 0o755)}
    after = {"engine/a_edited.sh": (new, 0o644), "engine/b_edited.sh": (new_b, 0o644),
             "engine/z_mode_down.sh": (script, 0o644)}
    with shared_case(before, after) as made:
        yield made


def test_recovery_says_forward_only_for_a_tree_that_is_whole_after(mode_case: Case) -> None:
    # "completed it" means every file has its new bytes AND its new mode; else the tree goes back.
    checked = 0
    for n in range(0, 200):
        root = mode_case.fresh("mode-kill")
        if not run_forked(mode_case.args("apply", root), fault_env(n)).killed:
            break
        if not (root / ".patchkit" / "journal.json").exists():
            continue
        run = run_forked(mode_case.args("status", root))
        checked += 1
        now = whole_state(mode_case, root)
        assert now is not None, f"kill after op {n}: a mixed tree"
        if "completed it" in run.err:
            assert now == "after" and run.code == 0, f"kill after op {n}: said forward, tree is {now}: {run.err}"
        else:
            assert now == "before" and run.code == 3, f"kill after op {n}: said {run.err!r}, tree is {now}"
    assert checked >= 3


def test_a_rollback_without_its_kept_links_restores_modes_too(mode_case: Case) -> None:
    # The kept `.orig` links lost (removed by the tree's owner, or by a cleanup) while the apply was killed: the
    # rollback writes the journal's copies back. A mode-only file whose bytes are already the original's is not
    # "restored" until its mode is too: the tree must be whole, never the old bytes with the new mode.
    checked = 0
    for n, root, run in _killed_then_links_removed(mode_case, "mode-nolinks"):
        checked += 1
        assert whole_state(mode_case, root) is not None, f"kill after op {n}, links removed: a mixed tree: {run.err}"
    assert checked >= 2, f"only {checked} kill points left kept links"


def _killed_then_links_removed(case: Case, label: str) -> Iterator[tuple[int, Path, Run]]:
    """For each kill point of `case`'s apply that leaves a journal and kept links: the links removed, then a
    `status` run (which recovers first): (the kill point, the root, that run), its stderr free of tracebacks."""
    for n in range(0, 200):
        root = case.fresh(label)
        if not run_forked(case.args("apply", root), fault_env(n)).killed:
            return
        links = kept_links(root)
        if not (root / ".patchkit" / "journal.json").exists() or not links:
            continue
        for link in links:
            link.unlink()
        run = run_forked(case.args("status", root))
        assert "Traceback" not in run.err, run.err
        yield n, root, run


@pytest.fixture(scope="module")
def open_case() -> Iterator[Case]:
    # A file every user may write (0777: a shared scratch script), edited: its mode is kept as it was.
    with shared_case({"engine/open.sh": (b"#!/bin/sh\necho 1\n", 0o777)},
                     {"engine/open.sh": (b"#!/bin/sh\necho 2\n", 0o777)}) as made:
        yield made


def test_a_rollback_without_its_kept_link_gives_a_0777_file_its_mode_back(open_case: Case) -> None:
    """As test_a_rollback_without_its_kept_links_restores_modes_too, for a file of mode 0777: the journal's copy
    is written back with its permission bits, all nine of them, so the tree is the original exactly.

    Kills patchkit/workspace/recovery.py:255:core/ReplaceBinaryOperator_BitAnd_Mod#0 (`mode % 0o777`: 0777
    became 0000)."""
    checked = 0
    for n, root, _ in _killed_then_links_removed(open_case, "open-nolinks"):
        checked += 1
        assert whole_state(open_case, root) is not None, f"kill after op {n}, links removed: {image(root)}"
    assert checked >= 1, "no kill point left a kept link"


def _forge_temp_not_ours(doc: dict[str, Any], body: bytes) -> bytes:
    doc["entries"][0]["temp"] = "evil.tmp"  # the right kind, not a name patchkit makes
    return body


def _forge_temp_of_the_wrong_kind(doc: dict[str, Any], body: bytes) -> bytes:
    entry = doc["entries"][0]
    entry["temp"] = entry["keep"]  # one of our names, but a kept link's (.orig) where the temp file's (.tmp) goes
    return body


def _forge_a_bool_uid(doc: dict[str, Any], body: bytes) -> bytes:
    next(e for e in doc["entries"] if e["before"] is not None)["before"]["uid"] = True  # JSON true, not a number
    return body


def _forge_a_negative_inode(doc: dict[str, Any], body: bytes) -> bytes:
    next(e for e in doc["entries"] if e["before"] is not None)["before"]["ino"] = -1  # no file has inode -1
    return body


def _forge_a_bool_mode(doc: dict[str, Any], body: bytes) -> bytes:
    next(e for e in doc["entries"] if e["before"] is not None)["before"]["mode"] = True  # not a mode: JSON true
    return body


def _forge_an_original_past_the_end(doc: dict[str, Any], body: bytes) -> bytes:
    # offset + size one past the end, while offset ^ size (== 0) is not: the bound is the sum
    before = next(e for e in doc["entries"] if e["before"] is not None and e["before"]["offset"] is not None)["before"]
    before["offset"] = before["size"] = len(body) // 2 + 1
    return body


def _forge_an_older_format(doc: dict[str, Any], body: bytes) -> bytes:
    doc["format"] = 2  # the journal format before this one (3): its fields are not the ones read here
    return body


def _forge_a_newer_format(doc: dict[str, Any], body: bytes) -> bytes:
    doc["format"] = 4  # a later patchkit's journal
    return body


def _forge_a_float_format(doc: dict[str, Any], body: bytes) -> bytes:
    doc["format"] = 3.0  # equal to 3, but not the integer patchkit writes
    return body


def _forge_a_state_file_under_the_lock(doc: dict[str, Any], body: bytes) -> bytes:
    # a state entry whose first component is a reserved state name (the lock), its last an ordinary one
    doc["entries"][0].update(area="state", path="lock/evil.json")
    return body


@pytest.mark.parametrize(("forge", "message"), [
    (_forge_temp_not_ours, "temp name 'evil.tmp'"),
    (_forge_temp_of_the_wrong_kind, "is not one patchkit makes"),
    (_forge_a_bool_uid, "number True"),
    (_forge_an_original_past_the_end, "an original lies outside the journal"),
    (_forge_a_negative_inode, "(number -1)"),
    (_forge_a_bool_mode, "(mode True)"),
    (_forge_an_older_format, "(format 2)"),
    (_forge_a_newer_format, "(format 4)"),
    (_forge_a_float_format, "(number 3.0)"),
    (_forge_a_state_file_under_the_lock, "state file name 'lock/evil.json' is reserved by patchkit"),
], ids=["temp-not-ours", "temp-of-the-wrong-kind", "bool-uid", "original-past-the-end", "negative-inode",
        "bool-mode", "older-format", "newer-format", "float-format", "state-file-under-the-lock"])
def test_a_journal_with_a_forged_field_is_not_replayed(
    case: Case, forge: Callable[[dict[str, Any], bytes], bytes], message: str
) -> None:
    """A journal left by a killed apply, one field changed: recovery refuses it as unreadable (exit 8, the
    journal named and kept, the tree untouched, no traceback).

    Kills patchkit/workspace/journal.py:170:core/ReplaceOrWithAnd#2 (a temp name had to fail both the pattern
    and the kind), :197:core/ReplaceOrWithAnd#3 (`True` taken as the number 1),
    :191:core/ReplaceBinaryOperator_Add_BitXor#1 (`offset ^ size` as the blob's end), :197 NumberReplacer#9
    (`value < -1`: a count of -1 passed), :203 ReplaceOrWithAnd#5 and #6 (`True` taken as mode 1), :31
    NumberReplacer#0 and #1 (the format written and read became 4 or 2: the other format's journal was replayed), :136
    NotEq_Gt#0 and NotEq_Lt#0 (an older or a newer format accepted; the format must be the integer 3, so
    `is not` there reads as `!=`: CPython's small ints are cached) and :89 NumberReplacer#3 (`parts[-1]`: a
    name under the lock passed as a state file)."""
    for n in range(8, 60):
        root = case.fresh("forged")
        run_forked(case.args("apply", root), fault_env(n))
        journal = root / ".patchkit" / "journal.json"
        if journal.exists() and whole_state(case, root) is None:
            break
    else:
        raise AssertionError("no kill point left a journal")
    header, _, body = journal.read_bytes().partition(b"\n")
    doc = json.loads(header)
    body = forge(doc, body)
    journal.write_bytes(json.dumps(doc).encode() + b"\n" + body)
    before = image(root)
    run = run_forked(case.args("status", root))
    assert run.code == 8, (run.code, run.err)
    assert "journal of an interrupted transaction is unreadable" in run.err and message in run.err, run.err
    assert str(journal) in run.err and "Traceback" not in run.err, run.err
    assert image(root) == before and journal.exists()


@pytest.fixture(scope="module")
def unicode_case() -> Iterator[Case]:
    # File and folder names outside ASCII (valid UTF-8: a diff may carry them, git quotes them octal-escaped).
    before = {"engine/d\u00e9j\u00e0 vu/caf\u00e9.py": (b"a = 1\nb = 2\n", 0o644),
              "engine/\u65e5\u672c.txt": (b"one\n", 0o600)}
    after = {"engine/d\u00e9j\u00e0 vu/caf\u00e9.py": (b"a = 1\nb = 3\n", 0o644),
             "engine/\u65e5\u672c.txt": (b"two\n", 0o600)}
    with shared_case(before, after) as made:
        yield made


def test_an_interrupted_apply_of_files_with_non_ascii_names_is_rolled_back(unicode_case: Case) -> None:
    """The journal names every path, and the paths of a tree need not be ASCII: a killed apply of such files
    leaves a journal the next run reads, and it puts the tree back whole (or completes it).

    Kills patchkit/workspace/journal.py:125:core/ReplaceTrueWithFalse#3 (`ensure_ascii=False`: a header with
    a non-ASCII name could not be encoded, so no apply of such a file could start)."""
    checked = 0
    for n in range(0, 100):
        root = unicode_case.fresh("unicode")
        if not run_forked(unicode_case.args("apply", root), fault_env(n)).killed:
            break
        if not (root / ".patchkit" / "journal.json").exists():
            continue
        checked += 1
        run = run_forked(unicode_case.args("status", root))
        assert run.code in (0, 3) and "Traceback" not in run.err, (n, run.code, run.err)
        assert whole_state(unicode_case, root) is not None, f"kill after op {n}: a mixed tree: {run.err}"
        assert not (root / ".patchkit" / "journal.json").exists()
    assert checked >= 2, f"only {checked} kill points left a journal"


MANY = 300  # more journal entries than CPython's cached small ints (up to 256)


@pytest.fixture(scope="module")
def many_case() -> Iterator[Case]:
    before = {f"engine/m/f{i:03}.py": (b"v = %d\n" % i, 0o644) for i in range(MANY)}
    after = {f"engine/m/f{i:03}.py": (b"v = %d\n" % -i, 0o644) for i in range(MANY)}
    with shared_case(before, after) as made:
        yield made


def test_an_interrupted_apply_of_300_files_is_rolled_back(many_case: Case) -> None:
    """A patch of 300 files: the journal of its killed apply lists 300 paths, none twice, and the next run
    rolls the tree back from it.

    Kills patchkit/workspace/journal.py:144:core/ReplaceComparisonOperator_NotEq_IsNot#1 (`len(set) is not
    len(list)`: true for two equal counts above 256, so every journal of more than 256 paths was refused as
    listing a path twice)."""
    for n in range(20, 400, 40):
        root = many_case.fresh("many")
        assert run_forked(many_case.args("apply", root), fault_env(n)).killed, n
        if (root / ".patchkit" / "journal.json").exists() and whole_state(many_case, root) is None:
            break
    else:
        raise AssertionError("no kill point left a journal and a mixed tree")
    run = run_forked(many_case.args("status", root))
    assert run.code == 3 and "rolled back" in run.err and "Traceback" not in run.err, (n, run.code, run.err)
    assert image(root) == many_case.original


@pytest.fixture(scope="module")
def closed_case() -> Iterator[Case]:
    # A file of mode 0000 (nobody but root may read it), edited: root's run reads and keeps that mode.
    with shared_case({"engine/closed.py": (b"a = 1\n", 0o000), "engine/open.py": (b"b = 1\n", 0o644)},
                     {"engine/closed.py": (b"a = 2\n", 0o000), "engine/open.py": (b"b = 2\n", 0o644)}) as made:
        yield made


@needs_root
def test_an_interrupted_apply_of_a_file_of_mode_0000_is_rolled_back(closed_case: Case) -> None:
    """Mode 0 is a mode like any other in the journal: the killed apply's journal is read back and the file
    returns with its bytes and its mode 0000.

    Kills patchkit/workspace/journal.py:203:core/ReplaceBinaryOperator_BitAnd_Pow#0 (`value ** ~widest`:
    0 ** -4096 raised ZeroDivisionError, a traceback instead of the rollback)."""
    checked = 0
    for n in range(0, 100):
        root = closed_case.fresh("closed")
        if not run_forked(closed_case.args("apply", root), fault_env(n)).killed:
            break
        if not (root / ".patchkit" / "journal.json").exists():
            continue
        checked += 1
        run = run_forked(closed_case.args("status", root))
        assert run.code in (0, 3) and "Traceback" not in run.err, (n, run.code, run.err)
        assert whole_state(closed_case, root) is not None, f"kill after op {n}: a mixed tree: {run.err}"
    assert checked >= 2, f"only {checked} kill points left a journal"


@pytest.fixture(scope="module")
def sticky_case() -> Iterator[Case]:
    # A shared folder with the sticky bit (mode 1777, as /tmp), a file in it edited and one created.
    with shared_case({"engine/shared/a.py": (b"a = 1\n", 0o644)},
                     {"engine/shared/a.py": (b"a = 2\n", 0o644), "engine/shared/b.py": (b"b = 1\n", 0o644)}) as made:
        yield made


def test_an_interrupted_apply_in_a_sticky_folder_is_rolled_back(sticky_case: Case) -> None:
    """The journal records the mode of each folder on a path's way, setuid, setgid and sticky bits included: a
    killed apply in a folder of mode 1777 leaves a journal the next run reads, and the tree comes back whole.

    Kills patchkit/workspace/journal.py:209:core/NumberReplacer#15 and ReplaceBinaryOperator_BitOr_Mod#2 (a
    folder's widest mode 0o6777 or 0o777: the sticky folder's journal was refused as unreadable)."""
    checked = 0
    for n in range(0, 100):
        root = sticky_case.fresh("sticky")
        os.chmod(root / "engine" / "shared", 0o1777)
        if not run_forked(sticky_case.args("apply", root), fault_env(n)).killed:
            break
        if not (root / ".patchkit" / "journal.json").exists():
            continue
        checked += 1
        run = run_forked(sticky_case.args("status", root))
        assert run.code in (0, 3) and "Traceback" not in run.err, (n, run.code, run.err)
        now = image(root)
        assert now["engine/shared"] == ("dir", b"", 0o1777), now
        assert {p: v for p, v in now.items() if p != "engine/shared"} in (
            {p: v for p, v in tree.items() if p != "engine/shared"}
            for tree in (sticky_case.original, sticky_case.patched)), f"kill after op {n}: a mixed tree: {run.err}"
    assert checked >= 2, f"only {checked} kill points left a journal"


@pytest.mark.parametrize(("which", "path", "put_back"), [
    ("down_case", "engine/a_edited.sh", "bytes"),
    ("down_case", "engine/b_edited.sh", "bytes"),
    ("down_case", "engine/z_mode_down.sh", "mode"),
    ("mode_case", "engine/z_mode_only.sh", "mode"),
], ids=["old-bytes-hash-higher", "old-bytes-hash-lower", "old-mode-0755", "old-mode-0644"])
def test_a_file_put_back_after_a_kill_that_left_only_the_end_to_do_is_not_counted_as_written(
    request: pytest.FixtureRequest, which: str, path: str, put_back: str
) -> None:
    """An apply killed at its last operation that leaves a journal (every file and record written): then the
    edited file gets its old bytes back (its mode unchanged), or the mode-only file its old mode 0755, as a
    person or a backup tool might. The recovery counts a file as written only with its new bytes and its new
    mode, so it rolls the tree back (exit 3, the tree as before), never forward over the old files.

    Kills patchkit/workspace/journal.py:215:core/ReplaceAndWithOr#2 (mode or bytes) and
    ReplaceComparisonOperator_Eq_GtE#1 and Eq_LtE#1 (`sha256 >= target`, `<=`: the old bytes' hash sorting
    higher, lower) with the bytes put back, and Eq_GtE#0 and Eq_LtE#0 (`mode >= target`, `<=`: 0755 counted
    as the 0644 to come, 0644 as 0755) with the mode: each said "completed it" over the old file; also Eq_IsNot#0
    and #1 (`is not`: the mode or the bytes no longer compared)."""
    chosen: Case = request.getfixturevalue(which)
    last = None
    for n in range(0, 200):
        root = chosen.fresh("put-back")
        if not run_forked(chosen.args("apply", root), fault_env(n)).killed:
            break
        if (root / ".patchkit" / "journal.json").exists():
            last = n
    assert last is not None, "no kill point left a journal"
    root = chosen.fresh("put-back")
    assert run_forked(chosen.args("apply", root), fault_env(last)).killed
    _, data, mode = chosen.original[path]
    if put_back == "bytes":
        (root / path).write_bytes(data)
    else:
        os.chmod(root / path, mode)
    run = run_forked(chosen.args("status", root))
    assert run.code == 3 and "completed it" not in run.err and "Traceback" not in run.err, (last, run.err)
    assert image(root) == chosen.original
