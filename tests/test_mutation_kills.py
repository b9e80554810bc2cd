"""Tests written to kill the survivors of the mutation run (scripts/mutation.py, docs/testing.md).

Each test names the mutant it was written against (its id in the run's output); each was seen failing with that
mutant applied to a copy of the module, and passing without it.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import itertools
import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from patchkit.cli.main import run
from patchkit.input.trust import Flaw, Refusal, check_trusted_path
from tests import test_fastpath as fast
from tests.conftest import CliResult, Registry, after_the_landing_check, cli, git_diff, needs_root, write_tree
from tests.rooted import locked
from tests.safety_helpers import (
    as_user,
    build_case,
    chown_tree,
    fault_env,
    image,
    interrupted_tree,
    move_before_replace,
    report_one_free_block,
    run_forked,
    run_here,
    shared_case,
    shared_workdir,
    whole_state,
)

BEFORE = {
    "engine/a.py": b"".join(b"a line %d\n" % i for i in range(1, 9)),
    "engine/b.py": b"".join(b"b line %d\n" % i for i in range(1, 9)),
}
AFTER = {
    "engine/a.py": BEFORE["engine/a.py"].replace(b"a line 4\n", b"a line 4 patched\n"),
    "engine/b.py": BEFORE["engine/b.py"].replace(b"b line 4\n", b"b line 4 patched\n"),
}



@pytest.fixture
def fast_applied(tmp_path: Path, registry: Registry, engine: Path) -> Path:
    """test_fastpath's engine, applied once (so its record carries a fast_path block)."""
    write_tree(engine, fast.BEFORE)
    registry.add(fast.PID, git_diff(tmp_path, fast.BEFORE, fast.AFTER))
    result, used = fast.run("apply", fast.PID, "--root", engine, "--patches", registry.path)
    assert result.code == 0 and not used, result
    return engine


def _sealed(template: bytes) -> bytes:
    """`template` (holding `"seal": "000…0"`) sealed as fastpath.add_block seals: sha256 of the bytes, seal zeroed."""
    zero = b"0" * 64
    assert template.count(zero) == 1
    return template.replace(zero, hashlib.sha256(template).hexdigest().encode())


@pytest.mark.parametrize("forged", [
    b'[{"fast_path": {"seal": "' + b"0" * 64 + b'"}}]\n',  # a sealed array: indexing it by "fast_path" is a TypeError
    b'"\\"seal\\": \\"' + b"0" * 64 + b'\\"\\n"\n',  # a sealed string
], ids=["array", "string"])
def test_a_sealed_record_that_is_not_an_object_is_answered_by_the_full_judgement(
    fast_applied: Path, registry: Registry, forged: bytes
) -> None:
    """A record in the trusted state folder that carries a valid seal but is not a JSON object: the fast path
    declines (it never raises for what it finds), and the answer is the full path's, byte for byte: applied, the
    record said to be invalid. (Before run/records.parse_record checked the top level, the full path crashed
    here with an internal error, exit 10: `'list' object has no attribute 'get'`.)

    Kills patchkit/run/fastpath.py:202:core/ExceptionReplacer#8 (TypeError no longer caught: the restart crashed
    with an internal error instead of falling back)."""
    fast.record_path(fast_applied).write_bytes(_sealed(forged))
    result, used = fast.same_answer("apply", fast.PID, "--root", fast_applied, "--patches", registry.path)
    assert not used
    assert result.code == 0, result  # the tree is applied, by content
    assert "record invalid: unreadable record: a record is a JSON object, not" in result.out, result


def _resealed(data: bytes) -> bytes:
    """A record's bytes with its fast_path seal recomputed (anyone who can write the record can do this)."""
    start = data.rindex(b'"seal": "') + len(b'"seal": "')
    return _sealed(data[:start] + b"0" * 64 + data[start + 64:])


def test_a_resealed_record_that_names_a_smaller_strip_runs_the_full_judgement(
    fast_applied: Path, registry: Registry
) -> None:
    """The record's strip must be the manifest's: a record resealed with strip 0 (the manifest says 1) is not
    believed. First, as a control, the same record resealed unchanged is believed (the reseal is right).

    Kills patchkit/run/fastpath.py:205:core/ReplaceComparisonOperator_NotEq_Gt#1 (`record.strip > spec.strip`),
    which believed any record with a smaller strip."""
    path = fast.record_path(fast_applied)
    raw = path.read_bytes()
    path.write_bytes(_resealed(raw))
    _, used = fast.same_answer("apply", fast.PID, "--root", fast_applied, "--patches", registry.path)
    assert used  # the control: a correctly resealed, unchanged record
    assert raw.count(b'"strip": 1,') == 1
    path.write_bytes(_resealed(raw.replace(b'"strip": 1,', b'"strip": 0,')))
    _, used = fast.same_answer("apply", fast.PID, "--root", fast_applied, "--patches", registry.path)
    assert not used


def _patchkit(args: list[str | Path], *, fast_path: bool) -> subprocess.CompletedProcess[bytes]:
    """`python -m patchkit ...` in its own interpreter, given 60 s: a run that blocks fails instead of hanging."""
    env = {**os.environ, "PATCHKIT_DEBUG_FASTPATH": "1"}
    env.pop("PATCHKIT_NO_FASTPATH", None)
    if not fast_path:
        env["PATCHKIT_NO_FASTPATH"] = "1"
    return subprocess.run([sys.executable, "-m", "patchkit", *map(str, args)], capture_output=True, env=env,
                          check=False, timeout=60)


def test_a_record_replaced_by_a_fifo_never_blocks_a_restart(fast_applied: Path, registry: Registry) -> None:
    """A FIFO where the record was (in a trusted state folder): the restart neither blocks on opening it nor
    crashes; it answers as the full judgement does (exit 2, the record is not a regular file).

    Kills patchkit/run/fastpath.py:256:core/ReplaceBinaryOperator_BitOr_BitAnd#7 (`O_NONBLOCK & O_CLOEXEC`, which
    dropped O_NONBLOCK: the open waited for a writer forever)."""
    record = fast.record_path(fast_applied)
    record.unlink()
    os.mkfifo(record, 0o644)
    args: list[str | Path] = ["apply", fast.PID, "--root", fast_applied, "--patches", registry.path]
    quick = _patchkit(args, fast_path=True)
    full = _patchkit(args, fast_path=False)
    assert b"fast path used" not in quick.stderr, quick
    assert (quick.returncode, quick.stdout, quick.stderr) == (full.returncode, full.stdout, full.stderr)
    assert quick.returncode == 2 and b"is not a regular file" in quick.stderr, quick  # the state error, as named


@needs_root
def test_an_unprivileged_user_trusts_state_that_root_wrote(user: tuple[int, int]) -> None:
    """Root applied the patch (its `.patchkit` is root's, 0755/0644) on a tree the service user owns; that user's
    `status` trusts root's state (root could have written anything anyway) and reads the record: applied, exit 0.

    Kills patchkit/workspace/trust.py:54:core/NumberReplacer#7 (`uid not in (-1, os.geteuid())`), which as root
    is the same check and so survived every root-run test; as the user it refused root's state (exit 2)."""
    with shared_case() as case:
        root = case.fresh("root-applied", patched=True)
        chown_tree(root, *user)
        for dirpath, dirnames, filenames in os.walk(root / ".patchkit"):
            os.chown(dirpath, 0, 0)
            for name in dirnames + filenames:
                os.chown(os.path.join(dirpath, name), 0, 0, follow_symlinks=False)

        def status() -> None:
            os.chdir(case.workdir)  # not the checkout, which may be 0700 (status reads ./pyproject.toml)
            out = io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
                code = run(case.args("status", root, "--json"))
            if code != 0:
                raise AssertionError(f"status as the user: exit {code}: {out.getvalue()}")
            data = json.loads(out.getvalue())
            if data["state"] != "applied" or '"record": {"state": "current"' not in json.dumps(data):
                raise AssertionError(out.getvalue())

        # Every module status --json loads, imported here first: the forked user cannot read a checkout in a
        # 0700 folder. (As root it is the same answer: root owns the state.)
        assert run_here(case.args("status", root, "--json")) == 0
        as_user(*user, status)


@needs_root
def test_an_unprivileged_run_refuses_a_file_of_a_user_with_a_smaller_uid(user: tuple[int, int]) -> None:
    """Run as the unprivileged user, the trust rule refuses a file owned by another, non-root user whose uid is
    smaller than its own (uid - 1): only root and the running user are trusted owners.

    Kills patchkit/input/trust.py:74:core/ReplaceComparisonOperator_Eq_LtE#1 (`uid <= os.geteuid()`), which as
    root is `uid == 0` and so survived every root-run test; as the user it trusted the smaller uid's file."""
    uid, gid = user
    assert uid > 1  # so uid - 1 is another user, not root
    with shared_workdir() as folder:
        target = folder / "smaller-uid.toml"
        target.write_bytes(b"")
        os.chown(target, uid - 1, gid)

        def check() -> None:
            found = check_trusted_path(target, folder=False)
            if not (isinstance(found, Refusal) and found.flaw is Flaw.OWNER and found.uid == uid - 1):
                raise AssertionError(f"{target} (uid {uid - 1}) as uid {uid}: {found}")

        as_user(uid, gid, check)


def _hunk_headers(diff: bytes) -> list[bytes]:
    return [line.split(b" @@")[0] + b" @@" for line in diff.splitlines() if line.startswith(b"@@ ")]


def test_a_later_section_inside_or_below_a_kept_grown_hunk_gets_the_headers_git_reads(tmp_path: Path) -> None:
    """One file touched twice (B -> M -> T, -U3). B -> M: hunk 1 deletes B's first three lines (excluded), hunk 2
    inserts two lines after `line 20` (kept). M -> T: hunk 3 changes the line after hunk 2's inserts, so its leading
    context starts inside hunk 2 (past its own leading context); hunk 4 changes a line below everything. The
    oracle is real `git apply` and the headers the test writes itself by line identity
    (test_differential.filtered_diff); `patchkit show` of the filtered hunk set must carry the same headers.

    Kills patchkit/diff/filtering.py:135:core/ReplaceBinaryOperator_Add_LShift#1 (a line inside a kept hunk of a
    lower section: `base << kept + j`) and :144:core/ReplaceBinaryOperator_Add_RShift#6 (a line below a kept hunk
    that grew the file: `base >> kept`); each moved a header git then reads at the wrong place."""
    from tests import test_differential as oracle  # its helpers: git's diffs, identities, git apply

    work = tmp_path / "work"
    work.mkdir()
    path = "src/engine/mod_0.py"
    base = [b"line %d\n" % i for i in range(1, 41)]
    middle = base[3:]
    middle[17:17] = [b"inserted 1\n", b"inserted 2\n"]  # after `line 20` (index 16 of M)
    top = list(middle)
    top[20] = b"changed near the inserts\n"  # hunk 3: context from index 17, hunk 2's first inserted line
    top[34] = b"changed below\n"  # hunk 4
    twice = (oracle.make_diff(work, {path: base}, {path: middle}, 3, "")
             + oracle.make_diff(work, {path: middle}, {path: top}, 3, ""))
    sections = oracle.parse_sections(twice)
    fresh = iter(range(10_000))
    ids = oracle.with_ids({path: base}, fresh)
    steps = oracle.chain_steps(sections, ids, fresh)
    assert [(st.section, st.number, st.hunk.old_start) for st in steps] == [(0, 1, 1), (0, 2, 18), (1, 3, 18),
                                                                           (1, 4, 32)]
    kept = frozenset({1, 2, 3})
    filtered = oracle.filtered_diff(sections, steps, ids, kept)
    pristine, whole = oracle.construct(ids, steps, frozenset()), oracle.construct(ids, steps, kept)
    assert filtered is not None and pristine is not None and whole is not None
    assert oracle.git_result(work, pristine, filtered) == whole
    registry = tmp_path / "patches"
    folder = Registry(registry).add("p", twice, strip=2)
    oracle.add_hunk_excludes(folder, path, [1])
    shown = cli("show", "p", "--patches", registry)
    assert shown.code == 0, shown.err
    assert _hunk_headers(shown.out.encode()) == _hunk_headers(filtered), shown.out
    assert oracle.git_result(work, pristine, shown.out.encode(), "-p1") == whole
    code, after, out = oracle.run_patchkit(work, registry, "p", pristine, "apply")
    assert (code, after) == (0, whole), out


@pytest.mark.parametrize("created", [False, True], ids=["modified", "created"])
def test_an_exclude_of_every_hunk_of_a_modified_file_is_refused_a_created_file_keeps_its_creation(
    tmp_path: Path, registry: Registry, created: bool
) -> None:
    """A hunk exclude that drops every hunk of a modified file is refused at load (exit 2, the manifest line, the
    whole-file exclude as the hint); the only hunk of a created file may be dropped (git creates the file empty).

    Kills patchkit/diff/filtering.py:179:core/ReplaceComparisonOperator_Is_LtE#0 (`f.op <= FileOp.MODIFY`: an
    Enum without an order, so the load crashed with a TypeError)."""
    before = {"engine/a.py": b"a 1\na 2\na 3\n"}
    after = {"engine/a.py": b"a 1\na two\na 3\n", "engine/new.py": b"n 1\nn 2\n"}
    folder = registry.add("p", git_diff(tmp_path, before, after))
    excluded = "engine/new.py" if created else "engine/a.py"
    with (folder / "manifest.toml").open("a") as manifest:
        manifest.write(f'"{excluded}" = {{ hunks = [1], reason = "not ported" }}\n')
    root = tmp_path / "engine-root"
    write_tree(root, before)
    res = cli("status", "p", "--root", root, "--patches", registry.path)
    if created:
        assert (res.code, res.out) == (3, "p: unapplied (1 hunk in 2 files)\n"), (res.out, res.err)
        return
    assert res.code == 2, (res.out, res.err)
    assert f"manifest.toml:{(folder / 'manifest.toml').read_text().count(chr(10))}: exclude 'engine/a.py' drops " \
           "every hunk of the file" in res.err, res.err
    assert 'hint: exclude the whole file instead: "engine/a.py" = "not ported"' in res.err, res.err


def _apply_with_umask_0(root: Path, registry: Registry) -> CliResult:
    """`apply p` on `root` with the process umask 0 (restored after): a mode patchkit does not set itself shows."""
    old = os.umask(0)
    try:
        return cli("apply", "p", "--root", root, "--patches", registry.path)
    finally:
        os.umask(old)


def _state_dir_spy(monkeypatch: pytest.MonkeyPatch, root: Path, then: Callable[[], None]) -> list[int]:
    """os.mkdir, watched: right after the real mkdir of `root/.patchkit` (the first moment another user could see
    it) record its mode, then run `then` (a racer's move); the modes seen are returned."""
    real = os.mkdir
    seen: list[int] = []

    def mkdir(path: str | Path, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        real(path, mode, dir_fd=dir_fd)
        if str(path) == ".patchkit" and dir_fd is not None and os.path.samestat(os.fstat(dir_fd), os.stat(root)):
            seen.append(stat.S_IMODE(os.stat(root / ".patchkit", follow_symlinks=False).st_mode))
            then()

    monkeypatch.setattr(os, "mkdir", mkdir)
    return seen


def test_the_state_folder_is_never_open_to_others_even_before_its_mode_is_set(
    tmp_path: Path, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a umask of 0, `.patchkit` as mkdir leaves it (before the fchmod to 0755) is 0700: in that window
    nobody else may enter it or write in it. Afterwards it is 0755, and the apply went through.

    Kills patchkit/workspace/trust.py:73:core/NumberReplacer#8 and #9 (`os.mkdir(STATE_DIR, 0o701)` / `0o677`)."""
    registry.add("p", git_diff(tmp_path, BEFORE, AFTER))
    root = tmp_path / "engine-root"
    write_tree(root, BEFORE)
    seen = _state_dir_spy(monkeypatch, root, lambda: None)
    res = _apply_with_umask_0(root, registry)
    assert res.code == 0, (res.out, res.err)
    assert seen == [0o700]
    assert stat.S_IMODE((root / ".patchkit").stat().st_mode) == 0o755


@needs_root
def test_a_state_folder_swapped_in_right_after_the_mkdir_is_refused_and_left_as_it_was(
    tmp_path: Path, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Root runs apply; right after its mkdir of `.patchkit`, another user (uid 54321) puts a 0777 folder of their
    own in its place. patchkit refuses it (exit 2, untrusted state, the tree untouched) and never changes it: no
    fchmod of a folder it did not make, its mode and owner stay as the other user left them.

    Kills patchkit/workspace/trust.py:80:core/ReplaceComparisonOperator_Eq_GtE#0 (`st_uid >= geteuid()`: as
    root, every owner passes, and the impostor was made 0755 before the refusal)."""
    registry.add("p", git_diff(tmp_path, BEFORE, AFTER))
    root = tmp_path / "engine-root"
    write_tree(root, BEFORE)
    state = root / ".patchkit"

    def swap() -> None:
        state.rename(root / "made-by-patchkit")
        state.mkdir()
        os.chown(state, 54321, 54321)
        state.chmod(0o777)

    seen = _state_dir_spy(monkeypatch, root, swap)
    res = cli("apply", "p", "--root", root, "--patches", registry.path)
    assert res.code == 2 and "state folder" in res.err, (res.out, res.err)
    assert seen == [0o700]
    st = state.stat()
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o777, 54321, 54321)
    assert (root / "engine/a.py").read_bytes() == BEFORE["engine/a.py"]
    assert (root / "engine/b.py").read_bytes() == BEFORE["engine/b.py"]



# ------------------------------------------------------------------ workspace/folders.py (its full run, 2026-12-03)

NESTED_BEFORE = {"engine/a.py": b"one\n", "engine/d1/d2/d3/only.py": b"the only file of d3\n"}
NESTED_AFTER = {"engine/d1/d2/d3/only.py": None, "engine/a.py": b"two\n"}


def test_a_rollback_remakes_three_removed_folders_each_with_its_own_journaled_mode(
    tmp_path: Path, registry: Registry
) -> None:
    """Killed mid-apply (journal written), then engine/d1 (0777, holding d2 0701 and d2/d3 0750) is removed
    whole by someone else; the next command rolls back and makes the three folders again, each with the mode the
    journal recorded for it, and only.py with its bytes.

    Kills patchkit/workspace/folders.py:85:core/NumberReplacer#2 (`folders[: i + 2]`: each folder got the mode of
    the one below it) and :85:core/ReplaceBinaryOperator_Add_LShift#0 (`folders[: i << 1]`: d2 got d3's), and
    :87:core/NumberReplacer#5 (`mode & 0o776`: d1 lost its others-exec bit) and
    :87:core/ReplaceBinaryOperator_BitAnd_Mod#0 (`mode % 0o777`: 0777 became 0000)."""
    import shutil

    registry.add("nested", git_diff(tmp_path, NESTED_BEFORE, NESTED_AFTER))
    root = tmp_path / "engine-root"
    write_tree(root, NESTED_BEFORE)
    modes = {"engine/d1": 0o777, "engine/d1/d2": 0o701, "engine/d1/d2/d3": 0o750}
    for folder in sorted(modes, reverse=True):
        os.chmod(root / folder, modes[folder])
    killed = run_forked(["apply", "nested", "--root", str(root), "--patches", str(registry.path)], fault_env(12))
    assert killed.killed and (root / ".patchkit" / "journal.json").exists()
    shutil.rmtree(root / "engine/d1")
    res = cli("status", "nested", "--root", root, "--patches", registry.path)
    assert res.code == 3 and "rolled back" in res.err, res.err
    assert {folder: stat.S_IMODE(os.stat(root / folder).st_mode) for folder in modes} == modes
    assert (root / "engine/d1/d2/d3/only.py").read_bytes() == NESTED_BEFORE["engine/d1/d2/d3/only.py"]


SPREAD_AFTER = {"top.py": b"at the top of the root\n", "engine/n1/n2/f.py": b"in two new folders\n"}


def _apply_with_fsync_hook(
    tmp_path: Path, registry: Registry, on_fsync: Callable[[Path, str], None]
) -> tuple[Path, str]:
    """Apply a patch writing top.py (at the root) and engine/n1/n2/f.py (two new folders) in a forked CLI whose
    os.fsync first calls on_fsync(root, the path of the descriptor); the root and the run's stderr."""
    registry.add("spread", git_diff(tmp_path, {"engine/a.py": b"one\n"}, SPREAD_AFTER))
    root = tmp_path / "engine-root"
    write_tree(root, {"engine/a.py": b"one\n"})

    def hook() -> None:
        real = os.fsync

        def fsync(fd: int) -> None:
            on_fsync(root, os.readlink(f"/proc/self/fd/{fd}"))
            real(fd)

        os.fsync = fsync

    run = run_forked(["apply", "spread", "--root", str(root), "--patches", str(registry.path)], before=hook)
    return root, run.err if run.code else ""


def test_the_end_of_a_commit_fsyncs_each_changed_folder_and_the_root_once(tmp_path: Path, registry: Registry) -> None:
    """The folder a new file landed in (engine/n1/n2) and the root (top.py) are each fsynced once, at the end.

    Kills patchkit/workspace/folders.py:101:core/AddNot#8 (`if not folders`: no folder below the root was
    fsynced) and :102:core/AddNot#9 (`if not folders and fd is None: return`: the root was not)."""
    log = tmp_path / "fsyncs"

    def record(root: Path, path: str) -> None:
        with open(log, "a", encoding="utf-8") as out:
            out.write(path + "\n")

    root, err = _apply_with_fsync_hook(tmp_path, registry, record)
    assert err == ""
    synced = log.read_text(encoding="utf-8").splitlines()
    assert synced.count(str(root)) == 1, synced
    assert synced.count(str(root / "engine/n1/n2")) == 1, synced
    assert synced.count(str(root / ".patchkit/applied")) == 1, synced


def test_a_final_fsync_that_keeps_failing_is_described_by_its_error_text(tmp_path: Path, registry: Registry) -> None:
    """fsync of the root fails (EIO, as the kernel reports it: no file name) at the end, and again on the retry:
    the journal is kept and the message gives the error's text twice, not Python's `[Errno 5] ...` form.

    Kills patchkit/workspace/folders.py:140:core/ReplaceOrWithAnd#1 (`exc.strerror and exc`)."""

    def fail_at_root(root: Path, path: str) -> None:
        if path == str(root):
            raise OSError(errno.EIO, os.strerror(errno.EIO))

    root, err = _apply_with_fsync_hook(tmp_path, registry, fail_at_root)
    assert "every file was written, but finishing the transaction failed (Input/output error; then " \
        "Input/output error); the journal is kept" in err, err
    assert (root / ".patchkit" / "journal.json").exists()


def test_a_folder_swapped_for_a_link_before_the_final_fsync_is_named_by_its_path(
    tmp_path: Path, registry: Registry
) -> None:
    """Between the writes and the final fsyncs engine/n1/n2 is moved away and a link put in its place: the
    fsync walk refuses it, naming the path it walked ('engine/n1/n2'), and the journal is kept.

    Kills patchkit/workspace/folders.py:101:core/ReplaceOrWithAnd#0 (`"/".join(folders) and "."`: the message
    said '.' goes through a link)."""

    def swap(root: Path, path: str) -> None:
        folder = root / "engine/n1"
        if path == str(root) and not (folder / "moved").exists():  # the root's fsync comes first at the end
            os.rename(folder / "n2", folder / "moved")
            os.symlink("moved", folder / "n2")

    root, err = _apply_with_fsync_hook(tmp_path, registry, swap)
    assert "finishing the transaction failed" in err, err
    assert "'engine/n1/n2' goes through a symbolic link" in err, err
    assert "'.' goes through" not in err, err
    assert (root / ".patchkit" / "journal.json").exists()


def test_a_failing_fsync_after_a_folder_removal_in_recovery_names_the_removed_folder(
    tmp_path: Path, registry: Registry
) -> None:
    """Killed at the end of an apply that emptied engine/d1/d2/d3 (every file written, the folders not yet
    removed): the next run rolls forward and removes d3, d2, d1. An I/O error injected at its first operation
    (the rmdir of d3) and at its second (the fsync of d2 that makes the removal durable) names d3 both times.

    Kills patchkit/workspace/folders.py:121:core/NumberReplacer#15 (`parts[-0]`) and
    :121:core/ReplaceUnaryOperator_USub_Not#4 (`parts[not 1]`): the fsync named engine, the path's first part."""
    registry.add("nested", git_diff(tmp_path, NESTED_BEFORE, NESTED_AFTER))

    def killed_at(n: int, tag: str) -> tuple[Path, bool]:
        root = tmp_path / f"{tag}-{n}"
        write_tree(root, NESTED_BEFORE)
        run = run_forked(["apply", "nested", "--root", str(root), "--patches", str(registry.path)], fault_env(n))
        return root, run.killed

    last = None  # the last kill point that leaves d3 in place with the journal kept
    for n in range(200):
        root, killed = killed_at(n, "probe")
        if not killed:
            break
        if (root / "engine/d1/d2/d3").is_dir():
            last = n
    assert last is not None
    for op in (0, 1):
        root, killed = killed_at(last, f"op{op}")
        assert killed and (root / "engine/a.py").read_bytes() == b"two\n"
        run = run_forked(["status", "nested", "--root", str(root), "--patches", str(registry.path)],
                         fault_env(op, "EIO"))
        assert run.code == 8, run.err
        assert "cannot recover the interrupted transaction: d3: Input/output error; the journal is kept" in run.err, \
            (op, run.err)


def test_a_file_longer_than_its_size_said_is_refused_not_cut_at_the_limit() -> None:
    """Against patchkit/input/environment.py:384:core/ReplaceBinaryOperator_Add_Mul#1 (`left = limit * 1`): the
    read asks for one byte past the limit, so a file that grew after its fstat (here a /proc file, regular and of
    size 0, whose text is longer than the limit) is refused, not returned cut at the limit."""
    from patchkit.input.environment import _read_fd

    fd = os.open("/proc/self/status", os.O_RDONLY)
    try:
        with pytest.raises(OSError, match="grew past 16 bytes"):
            _read_fd(fd, 16, Path("/proc/self/status"))
    finally:
        os.close(fd)


# workspace/lock.py, the held-out sample of seed 51 (docs/testing.md, "The map's blind spots")


def test_a_writer_that_writes_nothing_still_keeps_its_state_folder_out_of_git(
    tmp_path: Path, registry: Registry
) -> None:
    """The first patchkit command on a git checkout is an apply that finds the patch already there (exit 0,
    nothing to write): it still made `.patchkit` (its lock), and the lock's writer puts the `.gitignore` in it,
    so `git status` stays clean.

    Kills patchkit/workspace/lock.py:346:core/AddNot#35 (`if not state_fd is not None` in _ensure_gitignore: the
    .gitignore was only made by a commit, and a no-op apply left `?? .patchkit/` in the checkout)."""
    registry.add("p", git_diff(tmp_path, BEFORE, AFTER))
    root = tmp_path / "engine-root"
    write_tree(root, AFTER)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"],
                   check=True)
    res = cli("apply", "p", "--root", root, "--patches", registry.path)
    assert res.code == 0 and "already applied" in res.out, (res.out, res.err)
    assert (root / ".patchkit" / "lock").is_file()
    assert (root / ".patchkit" / ".gitignore").read_bytes() == b"*\n"
    left = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=all"],
                          capture_output=True, text=True, check=True).stdout
    assert left == "", left


def test_the_lock_file_is_never_open_to_others_even_before_its_mode_is_set(
    tmp_path: Path, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a umask of 0, the lock file as its O_CREAT open leaves it (before the fchmod to 0600) is already 0600:
    in that window nobody else may open it (and hold its flock, stalling every start). Afterwards it is 0600.

    Kills patchkit/workspace/lock.py:316:core/NumberReplacer#51 (the create's mode 0o600 into 383, 0o577: for
    that instant the lock was readable and executable by everyone)."""
    registry.add("p", git_diff(tmp_path, BEFORE, AFTER))
    root = tmp_path / "engine-root"
    write_tree(root, BEFORE)
    real = os.open
    seen: list[int] = []

    def spy(path: str | Path, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        fd = real(path, flags, mode, dir_fd=dir_fd)
        if str(path) == "lock" and flags & os.O_CREAT:
            seen.append(stat.S_IMODE(os.fstat(fd).st_mode))
        return fd

    monkeypatch.setattr(os, "open", spy)
    res = _apply_with_umask_0(root, registry)
    assert res.code == 0, (res.out, res.err)
    assert seen == [0o600]
    assert stat.S_IMODE((root / ".patchkit" / "lock").stat().st_mode) == 0o600


@needs_root
def test_a_lock_holder_whose_uid_has_no_name_is_named_by_its_uid(tmp_path: Path, registry: Registry) -> None:
    """The lock is held by a process running as a uid that has no passwd entry (a container's numeric user): the
    waiting apply's one line names its pid and that uid, then it times out (exit 6), nothing written.

    Kills patchkit/workspace/lock.py:242:core/ExceptionReplacer#11 (the KeyError of pwd.getpwuid escaped the wait
    notice: the apply crashed instead of waiting)."""
    uid = next(u for u in range(54000, 55000) if not _has_passwd_entry(u))
    registry.add("p", git_diff(tmp_path, BEFORE, AFTER))
    root = tmp_path / "engine-root"
    write_tree(root, BEFORE)
    assert cli("apply", "p", "--root", root, "--patches", registry.path).code == 0
    assert cli("revert", "p", "--root", root, "--patches", registry.path).code == 0
    lock = root / ".patchkit" / "lock"
    fd = os.open(lock, os.O_RDWR)
    holder = subprocess.Popen(  # flocks the descriptor it inherits, as that uid, until its stdin closes
        ["/usr/bin/python3", "-c", "import fcntl, sys; fcntl.flock(int(sys.argv[1]), fcntl.LOCK_EX); "
         "print('held', flush=True); sys.stdin.read()", str(fd)],
        pass_fds=(fd,), user=uid, group=uid, extra_groups=[], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        cwd="/")
    try:
        os.close(fd)
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        run = run_forked(["apply", "p", "--root", str(root), "--patches", str(registry.path), "--lock-timeout", "2"])
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait()
    assert run.code == 6, (run.code, run.err)
    first = run.err.splitlines()[0]
    assert first == f"patchkit: waiting for the lock on {lock} held by pid {holder.pid} (user {uid}) ...", run.err
    assert (root / "engine/a.py").read_bytes() == BEFORE["engine/a.py"]


def _has_passwd_entry(uid: int) -> bool:
    import pwd

    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


# workspace/commit.py, the held-out sample of seed 52


def test_the_room_a_write_needs_is_counted_in_whole_4_kib_blocks(
    tmp_path: Path, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filesystem with one free block refuses the apply before anything is written, and the message's count of
    the bytes the write needs is whole 4 KiB blocks: the journal and each written file rounded up (two small
    files, a record and the journal here: at least four blocks).

    Kills patchkit/workspace/commit.py:85:core/NumberReplacer#7 (`_BLOCK = 4095`) and
    :319:core/ReplaceBinaryOperator_Mul_BitOr#5 (`-(-size // _BLOCK) | _BLOCK`: a block and a byte or two)."""
    registry.add("p", git_diff(tmp_path, BEFORE, AFTER))
    root = tmp_path / "engine-root"
    write_tree(root, BEFORE)
    report_one_free_block(monkeypatch)
    res = cli("apply", "p", "--root", root, "--patches", registry.path)
    assert res.code == 7 and "not enough room on the filesystem" in res.err, (res.code, res.err)
    needs = int(res.err.split("this write needs ", 1)[1].split(" bytes", 1)[0])
    assert needs % 4096 == 0 and needs >= 4 * 4096, (needs, res.err)
    assert (root / "engine/a.py").read_bytes() == BEFORE["engine/a.py"]
    assert (root / "engine/b.py").read_bytes() == BEFORE["engine/b.py"]


@pytest.mark.parametrize("what", ["changed in place", "read error"])
def test_a_file_changed_or_unreadable_right_after_the_write_is_a_write_that_did_not_land(
    tmp_path: Path, registry: Registry, monkeypatch: pytest.MonkeyPatch, what: str
) -> None:
    """Right after the check after the write has looked at b.py (its lstat: the inode and size written), another
    writer changes its first byte in place (same inode, same size, bytes that sort lower), or its read-back fails
    with an I/O error (EIO, injected into the check's pread only). The run says the write did not land, why,
    exit 7, every file put back; never exit 0, never an internal error.

    Kills patchkit/workspace/commit.py:676:core/ReplaceComparisonOperator_Eq_LtE#3 (`found <= data`: bytes that
    sort lower than the ones written passed as written) and :672:core/ExceptionReplacer#19 (the read-back's
    OSError escaping: exit 10); the full run of 2026-12-06."""
    import errno

    from patchkit.workspace import commit as commit_module

    registry.add("p", git_diff(tmp_path, BEFORE, AFTER))
    root = tmp_path / "engine-root"
    write_tree(root, BEFORE)
    real_lstat, real_pread = commit_module.lstat_at, os.pread
    hooked: list[bool] = []

    def in_the_check(name: str) -> bool:
        return name == "b.py" and sys._getframe(2).f_code.co_name == "_landed_here" and not hooked

    def lstat_then_change(folder: int, name: str) -> os.stat_result | None:
        st = real_lstat(folder, name)
        if what == "changed in place" and in_the_check(name):
            hooked.append(True)
            fd = os.open(root / "engine/b.py", os.O_WRONLY)
            try:
                os.pwrite(fd, b"\0", 0)
            finally:
                os.close(fd)
        return st

    def pread(fd: int, n: int, offset: int) -> bytes:
        if what == "read error" and in_the_check("b.py") and os.fstat(fd).st_size == len(AFTER["engine/b.py"]):
            hooked.append(True)
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real_pread(fd, n, offset)

    monkeypatch.setattr(commit_module, "lstat_at", lstat_then_change)
    monkeypatch.setattr(os, "pread", pread)
    res = cli("apply", "p", "--root", root, "--patches", registry.path)
    assert hooked, "the hook did not run"
    assert res.code == 7, (res.code, res.out, res.err)
    why = "its content is not what patchkit just wrote" if what == "changed in place" else (
        "it cannot be read back (Input/output error)")
    assert f"did not land in the tree: {why}" in res.err, res.err
    assert (root / "engine/a.py").read_bytes() == BEFORE["engine/a.py"]
    assert (root / "engine/b.py").read_bytes() == BEFORE["engine/b.py"]


def test_an_empty_file_written_is_read_back_too(
    tmp_path: Path, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The patch creates an empty file; right after the check after the write has looked at it (its lstat: empty,
    the inode written), another writer appends to it. The read-back reads it as it reads every file written (the
    size written plus one byte), sees bytes patchkit did not write, and the run fails, every file put back: the
    same answer as for a file with content (it read nothing back for an empty one, and ended exit 0).

    Written against patchkit/workspace/commit.py:647:core/AddNot#60 (`pread ... if not data`), which read an
    empty file back and so was stricter than the code; the code now reads it back (no `if data`)."""
    after = {**AFTER, "engine/c.py": b""}
    registry.add("p", git_diff(tmp_path, BEFORE, after))
    root = tmp_path / "engine-root"
    write_tree(root, BEFORE)

    def append_theirs() -> None:
        with open(root / "engine/c.py", "ab") as out:
            out.write(b"theirs = 1\n")

    appended = after_the_landing_check(monkeypatch, "c.py", append_theirs)

    res = cli("apply", "p", "--root", root, "--patches", registry.path)
    assert appended, "the hook did not run"
    assert res.code == 7, (res.code, res.out, res.err)
    assert "did not land in the tree: its content is not what patchkit just wrote" in res.err, res.err
    assert (root / "engine/a.py").read_bytes() == BEFORE["engine/a.py"]
    assert (root / "engine/b.py").read_bytes() == BEFORE["engine/b.py"]


class _Clock:
    """time for workspace/lock.py on a clock that moves only when the lock's poll sleeps; `on_sleep(elapsed)`
    runs after each sleep (it may release the lock). Everything else is the real time module."""

    def __init__(self, on_sleep: Callable[[float], None]) -> None:
        self.now, self.on_sleep, self.sleeps = 1000.0, on_sleep, 0

    def __getattr__(self, name: str) -> object:
        return getattr(time, name)

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.sleeps += 1
        self.on_sleep(self.now - 1000.0)


def _held_lock(root: Path) -> int:
    """A descriptor holding `root`'s patchkit lock (made by a first lock taken and released), as another
    writer would: flock belongs to an open file description, so this process's own locked() waits for it."""
    import fcntl

    with locked(root, 1):
        pass
    fd = os.open(root / ".patchkit" / "lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


@pytest.mark.parametrize(("release_at", "told_times"), [(0.05, 0), (0.9, 0), (1.2, 1)])
def test_a_waiter_is_told_who_holds_the_lock_after_one_second_of_waiting_not_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, release_at: float, told_times: int
) -> None:
    """The wait notice comes once the lock has been busy for one second (on a clock that moves with the poll's
    sleeps): a holder that lets go at 0.9 s is never announced, one that lets go at 1.2 s is, once.

    Kills patchkit/workspace/lock.py:56:core/NumberReplacer#2 and #3 (`WAIT_NOTICE_AFTER = 2.0` / `0.0`),
    :80:core/NumberReplacer#5 (`waited: float = -1.0`: a second of patience more before the notice) and
    :419:core/ReplaceBinaryOperator_Mul_Add#3 (`delay + 2`: 200 ms sleeps from the second poll on, a lock let go
    at 50 ms taken at 210 ms)."""
    import fcntl

    from patchkit.workspace import lock as lock_module

    fd = _held_lock(tmp_path)
    try:
        def release(elapsed: float) -> None:
            if elapsed >= release_at:
                fcntl.flock(fd, fcntl.LOCK_UN)

        clock = _Clock(release)
        monkeypatch.setattr(lock_module, "time", clock)
        told: list[object] = []
        with locked(tmp_path, 10, on_wait=lambda holder, path: told.append(holder)):
            took = clock.now - 1000.0
    finally:
        os.close(fd)
    # The poll's sleeps double from 10 ms up to 200 ms: a lock let go is taken within the time waited so far, and
    # a wait of a second is a dozen polls, not a hundred (kills :419 `delay * 1`, the full run of 2026-12-06)
    assert release_at <= took <= min(2 * release_at + 0.01, release_at + 0.2) + 1e-9, took
    assert len(told) == told_times, (told, took)
    assert clock.sleeps <= 6 + (took - 0.31) / 0.2 + 1, (clock.sleeps, took)


@pytest.mark.parametrize("timeout", [1, 0])
def test_a_lock_timeout_is_the_time_waited_from_the_first_busy_look(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, timeout: int
) -> None:
    """`--lock-timeout 1` against a holder that never lets go gives up after one second of waiting (on a clock
    that moves with the poll's sleeps), not later; `--lock-timeout 0` at the first busy look, without a sleep.

    Kills patchkit/workspace/lock.py:80:core/NumberReplacer#5 (`waited: float = -1.0`: two seconds) and
    :84:core/NumberReplacer#6 (`max(1.0, ...)` in `LockWait.left`: a second for `--lock-timeout 0`)."""
    from patchkit.errors import LockTimeoutError
    from patchkit.workspace import lock as lock_module

    fd = _held_lock(tmp_path)
    try:
        clock = _Clock(lambda elapsed: None)
        monkeypatch.setattr(lock_module, "time", clock)
        with pytest.raises(LockTimeoutError, match=f"has held the lock for over {timeout}s"), \
                locked(tmp_path, timeout):
            pass
    finally:
        os.close(fd)
    assert timeout <= clock.now - 1000.0 < timeout + 0.01, clock.now - 1000.0


def test_the_lock_timeout_is_five_minutes_unless_given() -> None:
    """`apply --help` says the default --lock-timeout, 300 seconds (README: "the root's lock").

    Kills patchkit/workspace/lock.py:55:core/NumberReplacer#0 and #1 (`DEFAULT_LOCK_TIMEOUT = 301.0` / `299.0`)."""
    res = cli("apply", "--help")
    assert res.code == 0
    assert "[default: 300.0; x>=0]" in " ".join(res.out.split()), res.out


def test_a_deletion_three_folders_deep_not_made_yet_makes_the_recovery_roll_back(tmp_path: Path) -> None:
    """An apply that deletes engine/sub/gone.py is killed once every file is written and the journal is still
    there; the deleted file is then back (put back by hand, or never deleted). The recovery must look for it
    where it stands, three folders deep, find it, and roll the whole apply back, not call it complete.

    Kills patchkit/workspace/recovery.py:120:core/ReplaceUnaryOperator_Delete_USub#0 and _USub_UAdd#0
    (`entry.parts[:1]`: the file looked for in engine/) and :124:core/ReplaceUnaryOperator_Delete_USub#1
    (`entry.parts[1]`: engine/sub/sub looked for), each of which rolled forward and left the file."""
    gone = (b"gone = 1\n", 0o644)
    before = {"engine/sub/gone.py": gone, "engine/sub/keep.py": (b"keep = 1\n", 0o644),
              "engine/top.py": (b"top = 1\n", 0o644)}
    after = {"engine/sub/gone.py": None, "engine/sub/keep.py": (b"keep = 2\n", 0o644),
             "engine/top.py": (b"top = 2\n", 0o644)}
    case = build_case(tmp_path, before, after)
    journal = Path(".patchkit/journal.json")
    last = None  # the last kill point after which the journal waits and every file is already written
    for n in itertools.count():
        root = case.fresh("killed")
        run = run_forked(case.args("apply", root), fault_env(n))
        if not run.killed:
            break
        if (root / journal).exists() and whole_state(case, root) == "after":
            last = n
    assert last is not None, "no kill point leaves the journal behind a whole patched tree"
    root = case.fresh("killed")
    assert run_forked(case.args("apply", root), fault_env(last)).killed
    (root / "engine/sub/gone.py").write_bytes(gone[0])
    os.chmod(root / "engine/sub/gone.py", gone[1])
    status = run_forked(case.args("status", root))
    assert ": rolled back " in status.err and "completed" not in status.err, status.err
    assert status.code == 3 and status.out == "safety-pr1: unapplied (3 hunks in 3 files)\n", status
    assert not (root / journal).exists()
    assert whole_state(case, root) == "before", status.err


def test_a_deletion_that_empties_two_nested_folders_removes_both_as_git_apply_does(
    tmp_path: Path, registry: Registry
) -> None:
    """Deleting engine/x/y/only.py empties engine/x/y and then engine/x: both go, as with `git apply` (the
    oracle, run on a copy), and engine/ (which keeps a file) stays.

    Kills patchkit/workspace/recovery.py:156:core/ReplaceComparisonOperator_Is_IsNot#8 (`... is not False:
    break` in `finish`), which stopped after the first folder removed and left engine/x behind, empty."""
    before = {"engine/x/y/only.py": b"only = 1\n", "engine/keep.py": b"keep = 1\n"}
    diff = git_diff(tmp_path, before, {"engine/x/y/only.py": None})
    registry.add("p", diff)
    root, oracle = tmp_path / "engine-root", tmp_path / "oracle"
    write_tree(root, before)
    write_tree(oracle, before)
    (tmp_path / "p.diff").write_bytes(diff)
    subprocess.run(["git", "apply", str(tmp_path / "p.diff")], cwd=oracle, check=True)
    assert not (oracle / "engine/x").exists() and (oracle / "engine/keep.py").exists(), "git's own answer"
    res = cli("apply", "p", "--root", root, "--patches", registry.path)
    assert res.code == 0, res.err
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if ".patchkit" not in p.parts) == \
        sorted(p.relative_to(oracle).as_posix() for p in oracle.rglob("*")) == ["engine", "engine/keep.py"]


def test_a_kill_at_any_point_of_an_apply_that_empties_three_nested_folders_ends_whole(
    tmp_path: Path, registry: Registry
) -> None:
    """The apply deletes engine/d1/d2/d3/only.py, which empties d3, d2 and d1 (all three go, as with git apply).
    Killed after each of its operations in turn, the next `status` recovers a tree that is whole: as before, or
    as after, with no emptied folder left behind; a kill between two of the removals leaves d3 already gone, and
    the roll forward goes on with d2 and d1.

    Kills patchkit/workspace/recovery.py:156:core/ReplaceComparisonOperator_Is_NotEq#1 (`... != False: break` in
    `finish`: it stopped at the folder already gone, and left d2 and d1 empty)."""
    registry.add("nested", git_diff(tmp_path, NESTED_BEFORE, NESTED_AFTER))
    args = ["--patches", str(registry.path)]
    reference = tmp_path / "reference"
    write_tree(reference, NESTED_BEFORE)
    before = image(reference)
    assert run_here(["apply", "nested", "--root", str(reference), *args]) == 0
    after = image(reference)
    assert sorted(after) == ["engine", "engine/a.py"], "the three emptied folders go"
    between = 0  # kills that left d3 removed and d2 still there
    for n in itertools.count():
        root = tmp_path / f"killed-{n}"
        write_tree(root, NESTED_BEFORE)
        if not run_forked(["apply", "nested", "--root", str(root), *args], fault_env(n)).killed:
            break
        between += not (root / "engine/d1/d2/d3").exists() and (root / "engine/d1/d2").exists()
        status = run_forked(["status", "nested", "--root", str(root), *args])
        assert status.code in (0, 3), (n, status.err)
        assert image(root) in (before, after), (n, status.err, sorted(image(root)))
        assert image(root) == (after if status.code == 0 else before), (n, status.out)
    assert between, "no kill fell between the removals of d3 and d2"


def test_a_file_of_someone_else_in_a_folder_the_apply_made_is_kept_by_its_rollback(
    tmp_path: Path, registry: Registry
) -> None:
    """The apply makes engine/new/sub/x.py (two new folders); while it runs, someone puts engine/new/theirs.py
    into the folder it just made. An I/O error at any later operation rolls the apply back in the same run:
    x.py and sub go, `new` stays with their file in it (its removal is refused, ENOTEMPTY, and that is not an
    error), and the run ends as any failed write does (exit 7, every file put back).

    Kills patchkit/workspace/recovery.py:182:core/ExceptionReplacer#3 (`except OSError` gone: the ENOTEMPTY
    escaped the rollback) and :183:core/AddNot#20 (the rollback raised exactly on ENOTEMPTY, EEXIST, ENOENT)."""
    before = {"engine/a.py": b"one\n"}
    registry.add("made", git_diff(tmp_path, before, {"engine/a.py": b"two\n", "engine/new/sub/x.py": b"x = 1\n"}))

    def theirs_after_sub() -> None:
        from patchkit.workspace.disk import Disk

        real = Disk.mkdir

        def mkdir(self: Disk, dir_fd: int, name: str) -> None:
            real(self, dir_fd, name)
            if name == "sub":  # dir_fd: engine/new, made by this apply a moment ago
                os.close(os.open("theirs.py", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=dir_fd))

        Disk.mkdir = mkdir  # type: ignore[method-assign]  # in the forked child only

    rolled_back = 0
    for n in itertools.count():
        root = tmp_path / f"eio-{n}"
        write_tree(root, before)
        run = run_forked(["apply", "made", "--root", str(root), "--patches", str(registry.path)],
                         fault_env(n, "EIO"), before=theirs_after_sub)
        if run.code == 0:
            break
        assert run.code == 7, (n, run.err)
        assert (root / "engine/a.py").read_bytes() == b"one\n", (n, run.err)
        assert not (root / "engine/new/sub").exists(), (n, run.err)
        assert not (root / ".patchkit/journal.json").exists(), (n, run.err)
        rolled_back += (root / "engine/new/theirs.py").exists()
    assert rolled_back >= 2, "no rollback met their file in the folder the apply made"


@pytest.mark.parametrize("moved_before", ["keep.py", "x.py"])
def test_a_folder_moved_out_mid_write_is_neither_made_again_nor_left_with_a_folder_of_ours(
    tmp_path: Path, registry: Registry, moved_before: str
) -> None:
    """The apply edits engine/a/b/c/keep.py and makes engine/a/b/c/new/x.py. Right before the replace of one of
    them, engine/a/b/c is moved out of the tree. Either way the run fails (exit 7, "did not land") and leaves:
    in the moved folder, keep.py as it was and no folder `new` (made four folders down, below the folder held,
    it is removed through that folder, wherever it is now); in the tree, engine/a/b and nothing below it.

    Moved before keep.py's replace, x.py's folder was then walked to by name, and the c it found gone was made
    again in the tree, with `new` in it, both left behind (a bug: patchkit now makes only the folders the plan
    found absent). Moved before x.py's, it kills patchkit/workspace/recovery.py:192:
    core/ReplaceBinaryOperator_Sub_RShift#0 (`range(len(parts) >> 1, ...)` in `_below_held`: the walk started
    above the held folder, went by name from the root, found nothing, and left `new` in the moved folder)."""
    before = {"engine/a/b/c/keep.py": b"keep = 1\n"}
    after = {"engine/a/b/c/keep.py": b"keep = 2\n", "engine/a/b/c/new/x.py": b"x = 1\n"}
    registry.add("deep", git_diff(tmp_path, before, after))
    root, outside = tmp_path / "engine-root", tmp_path / "outside"
    write_tree(root, before)
    outside.mkdir()

    run = run_forked(["apply", "deep", "--root", str(root), "--patches", str(registry.path)],
                     before=move_before_replace(moved_before, lambda: os.rename(root / "engine/a/b/c", outside / "c")))
    assert (outside / "c").is_dir(), "the hook did not run"
    assert run.code == 7 and "did not land in the tree" in run.err, (run.code, run.err)
    assert sorted(p.relative_to(outside).as_posix() for p in outside.rglob("*")) == ["c", "c/keep.py"], run.err
    assert (outside / "c/keep.py").read_bytes() == b"keep = 1\n"
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if ".patchkit" not in p.parts) == \
        ["engine", "engine/a", "engine/a/b"], run.err
    assert not (root / ".patchkit/journal.json").exists()



DEEP_BEFORE = {"engine/d1/d2/deep.py": b"".join(b"deep line %d\n" % i for i in range(1, 9)), "engine/top.py": b"top\n"}
DEEP_AFTER = {"engine/d1/d2/deep.py": DEEP_BEFORE["engine/d1/d2/deep.py"].replace(b"line 4\n", b"line 4 new\n"),
              "engine/top.py": b"top 2\n"}


def _killed_with_a_kept_original(tmp_path: Path, registry: Registry, tag: str,
                                 prepare: Callable[[Path], None] = lambda root: None) -> tuple[Path, Path]:
    """A tree whose apply of DEEP_* was SIGKILLed once engine/d1/d2/deep.py was replaced and its kept original
    (the `.orig` link beside it) was still there: the root and the kept link."""
    registry.add("deep", git_diff(tmp_path, DEEP_BEFORE, DEEP_AFTER))
    for n in itertools.count():
        root = tmp_path / f"{tag}-{n}"
        write_tree(root, DEEP_BEFORE)
        prepare(root)
        run = run_forked(["apply", "deep", "--root", str(root), "--patches", str(registry.path)], fault_env(n))
        assert run.killed, "no kill point left the replaced file's kept original behind"
        kept = sorted((root / "engine/d1/d2").glob(".patchkit-*.orig"))
        if kept and (root / "engine/d1/d2/deep.py").read_bytes() == DEEP_AFTER["engine/d1/d2/deep.py"]:
            return root, kept[0]
    raise AssertionError("unreachable")


def test_a_kept_original_changed_in_place_to_a_smaller_older_file_is_not_put_back(
    tmp_path: Path, registry: Registry
) -> None:
    """After the kill, the kept original (a link to the original inode, three folders down) is cut shorter and
    its mtime set back a day: the same inode, but not the file the journal recorded. The recovery refuses to put
    it back (exit 8, the journal kept) and names the kept link where it stands.

    Kills patchkit/workspace/recovery.py:304:core/ReplaceComparisonOperator_NotEq_Gt#0 (`now > then`: a smaller
    size and an older mtime went unseen, and the changed file was put back) and :264:
    core/ReplaceUnaryOperator_Delete_USub#14 and _USub_UAdd#14 (`entry.parts[:1]`: the message named
    engine/<kept link>, a path that does not exist)."""
    root, kept = _killed_with_a_kept_original(tmp_path, registry, "changed")
    st = kept.stat()
    kept.write_bytes(b"deep line 1\n")
    os.utime(kept, ns=(st.st_atime_ns, st.st_mtime_ns - 86_400 * 10**9))
    status = run_forked(["status", "deep", "--root", str(root), "--patches", str(registry.path)])
    assert status.code == 8, status.err
    assert "the kept original of engine/d1/d2/deep.py is not the file the journal recorded (size 12, journaled" \
        in status.err, status.err
    assert f"mtime_ns {st.st_mtime_ns - 86_400 * 10**9}, journaled {st.st_mtime_ns}" in status.err, status.err
    assert f"patchkit: error: {kept}:" in status.err, status.err
    assert (root / ".patchkit/journal.json").exists() and kept.exists()


@needs_root
def test_a_file_written_back_from_the_journal_keeps_its_owner_and_is_counted(
    tmp_path: Path, registry: Registry, user: tuple[int, int]
) -> None:
    """The engine's files belong to an unprivileged user; root's apply is killed once engine/d1/d2/deep.py was
    replaced, and the kept original is then removed. The recovery writes the journal's copy back: the bytes as
    they were, owned by that user as before (not by root), and it counts the file among those rolled back.

    Kills patchkit/workspace/recovery.py:286:core/AddNot#35 and _Is_IsNot#15 (the owner taken when there is no
    original: the copy written back owned by root) and :290:core/ReplaceTrueWithFalse#5 (`_write_back`
    returning False: one file fewer in "rolled back N files")."""
    root, kept = _killed_with_a_kept_original(tmp_path, registry, "gone", lambda r: chown_tree(r, *user))
    control = tmp_path / "control"  # the same kill, the kept link left alone: renamed back, counted the same
    write_tree(control, DEEP_BEFORE)
    chown_tree(control, *user)
    n = int(root.name.rsplit("-", 1)[1])
    assert run_forked(["apply", "deep", "--root", str(control), "--patches", str(registry.path)], fault_env(n)).killed
    kept.unlink()
    said = []
    for tree in (root, control):
        status = run_forked(["status", "deep", "--root", str(tree), "--patches", str(registry.path)])
        assert status.code == 3, status.err
        said.append(status.err.split(": rolled back ", 1)[1])
        deep = tree / "engine/d1/d2/deep.py"
        assert deep.read_bytes() == DEEP_BEFORE["engine/d1/d2/deep.py"]
        assert (deep.stat().st_uid, deep.stat().st_gid) == user, tree.name
    assert said[0] == said[1] and said[0].startswith("1 file"), said


def test_a_roll_forward_past_a_deleted_files_folder_that_went_away_still_cleans_the_next_folder(
    tmp_path: Path, registry: Registry
) -> None:
    """The apply deletes engine/x/old.py and engine/z/gone.py; it is killed once both are gone and before its
    clean-up (each deleted file's kept original still beside where it was). Then engine/x goes away (its owner
    moves it out). The next run finds every file as the apply left it and rolls forward: the first deletion's
    folder is not there to clean, and the clean-up goes on to engine/z, where no link or temp file of
    patchkit's is left.

    Kills patchkit/workspace/recovery.py:147:core/ReplaceContinueWithBreak#0 (`break` in `finish`: the clean-up
    stopped at the folder that was gone and left gone.py's kept original in engine/z)."""
    before = {"engine/x/old.py": b"old\n", "engine/x/other.py": b"other\n", "engine/z/gone.py": b"gone\n",
              "engine/z/stays.py": b"stays\n"}
    registry.add("two", git_diff(tmp_path, before, {"engine/x/old.py": None, "engine/z/gone.py": None}))
    args = ["--patches", str(registry.path)]

    def killed_at(n: int) -> tuple[Path, bool]:
        root = tmp_path / f"killed-{n}"
        write_tree(root, before)
        return root, run_forked(["apply", "two", "--root", str(root), *args], fault_env(n)).killed

    last = None  # the last kill point with both files gone and their kept originals still there
    for n in itertools.count():
        root, killed = killed_at(n)
        if not killed:
            break
        gone = not (root / "engine/x/old.py").exists() and not (root / "engine/z/gone.py").exists()
        if gone and all(any((root / f"engine/{d}").glob(".patchkit-*.orig")) for d in "xz"):
            last = n
    assert last is not None, "no kill point leaves both kept originals behind both deletions"
    root, _ = killed_at(last)
    os.rename(root / "engine/x", tmp_path / "moved-x")
    status = run_forked(["status", "two", "--root", str(root), *args])
    assert ": completed it" in status.err and status.code == 0, status.err
    assert sorted(p.name for p in (root / "engine/z").iterdir()) == ["stays.py"], status.err
    assert not (root / ".patchkit/journal.json").exists()


def test_an_io_error_in_the_rollback_through_a_moved_folder_names_what_it_was_undoing(
    tmp_path: Path, registry: Registry
) -> None:
    """The apply edits engine/a/b/c/keep.py and makes engine/a/b/c/new/x.py; right before x.py's replace,
    engine/a/b/c is moved out of the tree, so the run rolls back through the folders it held. An I/O error
    injected at each operation in turn: those that strike the rollback end exit 8, the journal kept, naming what
    the rollback was undoing; each of its steps is an operation and the fsync that makes it durable, named
    alike: the removal of the folder `new` (four folders down, through the held c) and its fsync both name `new`.

    Kills patchkit/workspace/recovery.py:181 `parts[-1]` into `parts[-2]`, `[-0]`, `[1]`, `[~1]`, `[not 1]`,
    `[+1]` (core/NumberReplacer#20, #21, ReplaceUnaryOperator_Delete_USub#7, _USub_Invert#7, _USub_Not#7,
    _USub_UAdd#7): the fsync after that removal named c, engine or a."""
    before = {"engine/a/b/c/keep.py": b"keep = 1\n"}
    after = {"engine/a/b/c/keep.py": b"keep = 2\n", "engine/a/b/c/new/x.py": b"x = 1\n"}
    registry.add("deep", git_diff(tmp_path, before, after))
    named: list[str] = []
    for n in range(200):
        root, outside = tmp_path / f"root-{n}", tmp_path / f"outside-{n}"
        write_tree(root, before)
        outside.mkdir()

        def move_c(root: Path = root, outside: Path = outside) -> None:
            os.rename(root / "engine/a/b/c", outside / "c")

        run = run_forked(["apply", "deep", "--root", str(root), "--patches", str(registry.path)],
                         fault_env(n, "EIO"), before=move_before_replace("x.py", move_c))
        if run.code == 8:
            said = run.err.split("and so did restoring the tree (", 1)[1].split(": Input/output error)", 1)[0]
            named.append(said)
        elif named:
            break  # past the rollback's last operation
        else:
            assert run.code == 7, (n, run.err)
    assert "new" in named, named
    assert [named[i] for i in range(0, len(named), 2)] == [named[i] for i in range(1, len(named), 2)], named
    assert not {"c", "b", "a", "engine"} & set(named), named


def test_an_interrupted_transactions_label_is_shown_only_when_it_is_printable_text(tmp_path: Path) -> None:
    """The label a journal gives (`apply of demo-pr2106`) is named in the lock's refusal to write over a pending
    journal; a label that is not text, or holds control characters, is shown as "transaction".

    Kills patchkit/workspace/lock.py:201:core/ReplaceAndWithOr#3 (`isinstance(label, str) or ...`: a label
    with an escape sequence shown as it is, and a number raising AttributeError)."""
    from patchkit.workspace.lock import pending_label
    from tests.rooted import open_root

    state = tmp_path / ".patchkit"
    state.mkdir(mode=0o700)
    for label, shown in [("apply of p", "apply of p"), ("apply \x1b]0;pwned\x07", "transaction"), (5, "transaction")]:
        journal = state / "journal.json"
        journal.write_bytes(json.dumps({"label": label}).encode() + b"\n")
        journal.chmod(0o600)
        with open_root(tmp_path) as root:
            assert pending_label(root) == shown, label


def _hold_in_a_child(path: Path, how: str) -> tuple[int, int]:
    """A child process holding a lock on `path` (`flock` or a POSIX `lockf`) until its pipe closes: (pid, fd)."""
    import fcntl

    ready_r, ready_w = os.pipe()
    hold_r, hold_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        fd = os.open(path, os.O_RDWR)
        if how == "flock":
            fcntl.flock(fd, fcntl.LOCK_EX)
        else:
            fcntl.lockf(fd, fcntl.LOCK_EX)
        os.write(ready_w, b"x")
        os.close(hold_w)
        os.read(hold_r, 1)
        os._exit(0)
    os.close(hold_r)
    os.read(ready_r, 1)
    return pid, hold_w


def _release(child: tuple[int, int]) -> None:
    os.close(child[1])
    os.waitpid(child[0], 0)


def test_the_lock_holder_is_the_pid_holding_this_file_not_another_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """lock_pids names the process that holds a lock on the lock file: read from /proc/locks, where a lock on
    another file (held by another process) is listed too and must be left out; and, where /proc/locks cannot be
    read, asked with F_GETLK (a POSIX lock: its holder; no lock: nobody).

    Kills patchkit/workspace/lock.py:273:core/ReplaceAndWithOr#6 (`... or f[5] == key ...`: every listed lock's
    pid), :279:core/NumberReplacer#39 (an F_GETLK query of length -1: EINVAL, nobody named) and
    :283:core/AddNot#27 (the holder named when the answer is F_UNLCK, nobody when it is locked)."""
    import builtins

    from patchkit.workspace.lock import lock_pids

    ours, other = tmp_path / "lock", tmp_path / "unrelated"
    ours.write_bytes(b"")
    other.write_bytes(b"")
    unrelated = _hold_in_a_child(other, "flock")
    holder = _hold_in_a_child(ours, "flock")
    fd = os.open(ours, os.O_RDONLY)
    try:
        assert lock_pids(fd) == (holder[0],)
    finally:
        _release(holder)
        _release(unrelated)
    real_open = builtins.open

    def no_proc_locks(file: object, *args: object, **kwargs: object) -> object:
        if file == "/proc/locks":
            raise PermissionError(errno.EACCES, "denied", file)
        return real_open(file, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(builtins, "open", no_proc_locks)
    try:
        assert lock_pids(fd) is None, "no lock: F_GETLK answers F_UNLCK"
        posix = _hold_in_a_child(ours, "lockf")
        try:
            assert lock_pids(fd) == (posix[0],)
        finally:
            _release(posix)
    finally:
        os.close(fd)


def test_a_status_on_a_state_folder_whose_lock_file_is_gone_still_answers(
    tmp_path: Path, registry: Registry
) -> None:
    """The lock file of a root patchkit applied to was removed (by hand, or by a clean-up): a `status` finds no
    lock file to open, locks the root folder instead, and answers as before, creating nothing.

    Kills patchkit/workspace/lock.py:325:core/AddNot#32 (`if not create: raise`: the reader's missing lock file
    raised, "cannot create the lock file", exit 7)."""
    registry.add("p", git_diff(tmp_path, BEFORE, AFTER))
    root = tmp_path / "engine-root"
    write_tree(root, BEFORE)
    assert cli("apply", "p", "--root", root, "--patches", registry.path).code == 0
    (root / ".patchkit" / "lock").unlink()
    res = cli("status", "p", "--root", root, "--patches", registry.path)
    assert res.code == 0, res.err
    assert res.out == "p: applied (2 hunks in 2 files)\n", res.out
    assert not (root / ".patchkit" / "lock").exists()


def _inodes_asked(tmp_path: Path, name: str, created: str, monkeypatch: pytest.MonkeyPatch) -> int:
    """How many inodes an apply that edits engine/a.py and creates `created` says it needs, on a filesystem
    that reports none free (the refusal names the count; nothing is written)."""
    real = os.fstatvfs

    def no_inodes(fd: int) -> os.statvfs_result:
        v = real(fd)
        return os.statvfs_result((v.f_bsize, v.f_frsize, v.f_blocks, v.f_bfree, v.f_bavail, max(v.f_files, 1000),
                                  0, 0, v.f_flag, v.f_namemax))

    registry = Registry(tmp_path / f"patches-{name}")
    registry.path.mkdir()
    registry.add("p", git_diff(tmp_path, BEFORE, {**AFTER, created: b"new = 1\n"}))
    root = tmp_path / f"root-{name}"
    write_tree(root, BEFORE)
    with monkeypatch.context() as patched:
        patched.setattr(os, "fstatvfs", no_inodes)
        res = cli("apply", "p", "--root", root, "--patches", registry.path)
    assert res.code == 7 and "not enough room on the filesystem" in res.err, res.err
    assert not (root / created).exists()
    return int(res.err.split(" bytes and ", 1)[1].split(" inodes", 1)[0])


def test_a_created_file_in_two_new_folders_needs_three_inodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The room check counts an inode for each file written and for each folder it must make: the same patch
    with its new file two new folders down needs two inodes more than with it beside the others.

    Kills patchkit/workspace/commit.py:303:core/ReplaceBinaryOperator_Add_RShift#4 (`1 >> missing`: a file in
    new folders counted as no inode at all)."""
    beside = _inodes_asked(tmp_path, "beside", "engine/c.py", monkeypatch)
    deeper = _inodes_asked(tmp_path, "deeper", "engine/new/sub/c.py", monkeypatch)
    assert deeper - beside == 2, (beside, deeper)
    # one new folder: one inode more (kills `1 | missing`, commit.py:307 Add_BitOr#4, the full run of 2026-12-06:
    # the same for an even number of folders)
    assert _inodes_asked(tmp_path, "one-down", "engine/new/c.py", monkeypatch) - beside == 1


def _two_files(tmp_path: Path, registry: Registry, second: str) -> tuple[dict[str, bytes], Path, Path]:
    """Patch "p" edits engine/a.py and `second` (BEFORE's two files); the tree written, an empty folder outside
    it made: (the tree's files, the root, the outside folder)."""
    before = {"engine/a.py": BEFORE["engine/a.py"], second: BEFORE["engine/b.py"]}
    registry.add("p", git_diff(tmp_path, before, {"engine/a.py": AFTER["engine/a.py"], second: AFTER["engine/b.py"]}))
    root, outside = tmp_path / "engine-root", tmp_path / "outside"
    write_tree(root, before)
    outside.mkdir()
    return before, root, outside


def test_a_folder_replaced_by_a_file_mid_write_is_said_to_be_no_folder(tmp_path: Path, registry: Registry) -> None:
    """Right before engine/sub/b.py's replace, engine/sub is moved out of the tree and a regular file put at its
    name: the check after the write cannot walk through it ("Not a directory") and the run fails, exit 7, every
    file put back through the folders it held.

    Kills patchkit/workspace/commit.py:90:core/ReplaceBinaryOperator_BitOr_Mod#1 (`O_RDONLY % O_DIRECTORY`: the
    walk's open lost O_DIRECTORY, opened the file, and said the folder was replaced instead)."""
    before, root, outside = _two_files(tmp_path, registry, "engine/sub/b.py")

    def swap() -> None:
        os.rename(root / "engine/sub", outside / "sub")
        (root / "engine/sub").write_bytes(b"not a folder\n")

    run = run_forked(["apply", "p", "--root", str(root), "--patches", str(registry.path)],
                     before=move_before_replace("b.py", swap))
    assert (outside / "sub").is_dir(), "the hook did not run"
    assert run.code == 7, run.err
    assert "its folder cannot be walked to from the root (Not a directory)" in run.err, run.err
    assert (outside / "sub/b.py").read_bytes() == before["engine/sub/b.py"]
    assert (root / "engine/a.py").read_bytes() == before["engine/a.py"]





def test_a_modified_files_folder_moved_out_before_its_write_is_not_made_again_by_the_rollback(
    tmp_path: Path, registry: Registry
) -> None:
    """The apply edits engine/a.py and then engine/d/other.py; right before a.py's replace, engine/d (not yet
    opened by the write) is moved out of the tree. other.py's write finds its folder gone and the run fails (exit
    7, "did not land"); the rollback puts a.py back and leaves other.py alone, where it went: it makes no
    engine/d in the tree and writes no copy of other.py there.

    The rollback used to write other.py's original back from the journal, making engine/d again in the tree
    beside the moved one (the entry whose write never began was undone as if it had)."""
    before, root, outside = _two_files(tmp_path, registry, "engine/d/other.py")
    run = run_forked(["apply", "p", "--root", str(root), "--patches", str(registry.path)],
                     before=move_before_replace("a.py", lambda: os.rename(root / "engine/d", outside / "d")))
    assert (outside / "d").is_dir(), "the hook did not run"
    assert run.code == 7 and "did not land in the tree" in run.err, (run.code, run.err)
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if ".patchkit" not in p.parts) == \
        ["engine", "engine/a.py"], run.err
    assert (root / "engine/a.py").read_bytes() == before["engine/a.py"]
    assert sorted(p.name for p in (outside / "d").iterdir()) == ["other.py"]
    assert (outside / "d/other.py").read_bytes() == before["engine/d/other.py"]
    assert not (root / ".patchkit/journal.json").exists()


def test_a_status_refuses_a_lock_that_is_a_link_and_does_not_fall_back_to_the_folders_lock(
    tmp_path: Path, registry: Registry
) -> None:
    """The tree's lock file is swapped for a link (to a file of the same owner, so nothing else refuses it first):
    a status, which only opens the lock (it never creates it), fails on the link (exit 7, naming the lock and what
    the open said) instead of taking the root folder's lock as a reader without any lock file does.

    Kills patchkit/workspace/lock.py:112:core/ReplaceAndWithOr#1 (`if not (shared or exc.errno in ...)`, the full
    run of 2026-12-06), under which a reader passed over any failure to open the lock and read on."""
    registry.add("p", git_diff(tmp_path, BEFORE, AFTER))
    root = tmp_path / "engine-root"
    write_tree(root, BEFORE)
    assert cli("apply", "p", "--root", root, "--patches", registry.path).code == 0
    lock = root / ".patchkit" / "lock"
    (root / ".patchkit" / "elsewhere").write_bytes(b"")
    lock.unlink()
    lock.symlink_to("elsewhere")
    res = cli("status", "p", "--root", root, "--patches", registry.path)
    assert res.code == 7, (res.code, res.out, res.err)
    assert f"{lock}: cannot open the lock file: Too many levels of symbolic links" in res.err, res.err
    assert res.out == ""


def test_a_status_waits_for_a_first_apply_that_holds_the_root_folder_before_any_lock_file_exists(
    tmp_path: Path, registry: Registry
) -> None:
    """No lock file yet (the first apply ever is creating it): the writer holds the root folder's lock, and a
    status, which finds no lock file to open, waits for the folder's lock (here past --lock-timeout: exit 6)
    rather than read a tree half way through its first apply.

    Kills patchkit/workspace/lock.py:124:core/ReplaceComparisonOperator_IsNot_Is#0 (`fd is None and root_fd is
    None`, the full run of 2026-12-06), under which such a reader took no lock at all."""
    import fcntl

    registry.add("p", git_diff(tmp_path, BEFORE, AFTER))
    root = tmp_path / "engine-root"
    write_tree(root, BEFORE)
    folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)
        res = cli("status", "p", "--root", root, "--patches", registry.path, "--lock-timeout", "0.5")
    finally:
        os.close(folder)
    assert res.code == 6, (res.code, res.out, res.err)
    assert "has held the lock for over 0.5s" in res.err, res.err
    assert cli("status", "p", "--root", root, "--patches", registry.path).code == 3  # unapplied, once released


def _held_folder(root: Path, how: int) -> int:
    """The root folder opened and flocked `how` (another patchkit's reader or first writer): its descriptor."""
    import fcntl

    folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(folder, how)
    return folder


def test_readers_of_a_tree_without_a_lock_file_share_the_root_folder(tmp_path: Path, registry: Registry) -> None:
    """No lock file yet, and another reader holds the root folder's lock shared: a status takes it shared too and
    answers at once.

    Kills patchkit/workspace/lock.py:125:core/ReplaceTrueWithFalse#0 (the reader's folder lock taken exclusive,
    the full run of 2026-12-06): two readers of a fresh tree then waited for each other."""
    import fcntl

    registry.add("p", git_diff(tmp_path, BEFORE, AFTER))
    root = tmp_path / "engine-root"
    write_tree(root, BEFORE)
    folder = _held_folder(root, fcntl.LOCK_SH)
    try:
        res = cli("status", "p", "--root", root, "--patches", registry.path, "--lock-timeout", "0.5")
    finally:
        os.close(folder)
    assert res.code == 3, (res.code, res.out, res.err)
    assert not (root / ".patchkit").exists()  # a reader creates nothing


def test_a_first_apply_waits_for_a_reader_that_holds_the_root_folder(tmp_path: Path, registry: Registry) -> None:
    """No lock file yet, and a reader holds the root folder's lock (shared): the first apply, which creates the
    lock file, takes the folder's lock exclusive too, so it waits for that reader (here past --lock-timeout:
    exit 6, the tree as it was); once the reader is gone it applies.

    Kills patchkit/workspace/lock.py:139:core/ReplaceFalseWithTrue#6 (the writer's folder lock taken shared, the
    full run of 2026-12-06), under which a reader that found no lock file read a tree half way through its first
    apply."""
    import fcntl

    registry.add("p", git_diff(tmp_path, BEFORE, AFTER))
    root = tmp_path / "engine-root"
    write_tree(root, BEFORE)
    folder = _held_folder(root, fcntl.LOCK_SH)
    try:
        res = cli("apply", "p", "--root", root, "--patches", registry.path, "--lock-timeout", "0.5")
    finally:
        os.close(folder)
    assert res.code == 6, (res.code, res.out, res.err)
    assert {name: (root / name).read_bytes() for name in BEFORE} == BEFORE
    assert cli("apply", "p", "--root", root, "--patches", registry.path).code == 0
    assert {name: (root / name).read_bytes() for name in AFTER} == AFTER


def test_a_shared_lock_that_finds_a_journal_waits_for_the_other_readers_before_it_recovers(tmp_path: Path) -> None:
    """An apply was killed mid-write and its journal waits (it came after this command's own look for one, which
    recovers under the exclusive lock), and another reader holds the lock file shared: a shared lock that finds
    the journal turns exclusive before it recovers, so it waits for that reader (here past its timeout:
    LockTimeoutError, the journal and the half-written tree left as they were); alone, it recovers.

    Kills patchkit/workspace/lock.py:130:core/AddNot#9 and :131:core/ReplaceFalseWithTrue#5 (the shared lock kept
    for the recovery, the full run of 2026-12-06), under which a reader rolled the tree back while other readers
    read it."""
    import fcntl

    from patchkit.errors import LockTimeoutError

    case = build_case(tmp_path)
    root = interrupted_tree(case, "interrupted")
    journal = root / ".patchkit" / "journal.json"
    half = image(root)
    lock = os.open(root / ".patchkit" / "lock", os.O_RDONLY)
    try:
        fcntl.flock(lock, fcntl.LOCK_SH)
        with pytest.raises(LockTimeoutError), locked(root, 0.5, shared=True):
            pass
    finally:
        os.close(lock)
    assert journal.exists() and image(root) == half
    with locked(root, 0.5, shared=True) as recovered:
        assert recovered is not None
    assert not journal.exists() and image(root) == case.original


@needs_root
def test_a_user_who_may_not_write_the_tree_is_told_so_not_that_it_is_read_only(user: tuple[int, int]) -> None:
    """An unprivileged user runs apply on a tree root owns: the lock file cannot be created (EACCES), exit 2, and
    the hint says this user may not write it (run as root or the owner), not that the filesystem is read-only.

    Kills patchkit/workspace/lock.py:156:core/ReplaceComparisonOperator_Eq_LtE#0 (`exc.errno <= errno.EROFS`, the
    full run of 2026-12-06), under which EACCES (13 <= 30) got the read-only filesystem's hint."""
    with shared_case() as case:
        root = case.fresh("root-owned")
        assert run_here(case.args("status", root)) == 3  # what the forked user needs, imported here first

        def apply() -> None:
            os.chdir(case.workdir)  # not the checkout, which may be 0700 (a run reads ./pyproject.toml)
            err = io.StringIO()
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                code = run(case.args("apply", root))
            said = err.getvalue()
            if code != 2 or "Permission denied" not in said or f"this user may not write {root}/.patchkit" not in said:
                raise AssertionError(f"apply as the user: exit {code}: {said}")
            if "read-only filesystem" in said:
                raise AssertionError(said)

        as_user(*user, apply)
        assert image(root) == case.original


def test_a_state_folder_that_cannot_be_listed_leaves_the_recovery_to_the_lock(
    tmp_path: Path, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Listing `.patchkit` fails (an I/O error of the filesystem) where the lock looks for a journal: nothing is
    taken to be pending, and the status goes on to its answer through the lock file (which it opens by name).

    Kills patchkit/workspace/lock.py:178:core/ExceptionReplacer#2 (the full run of 2026-12-06), under which the
    OSError escaped and the status ended as an internal error."""
    registry.add("p", git_diff(tmp_path, BEFORE, AFTER))
    root = tmp_path / "engine-root"
    write_tree(root, BEFORE)
    assert cli("apply", "p", "--root", root, "--patches", registry.path).code == 0
    real = os.listdir

    def failing(path: Any = ".") -> list[str]:
        if isinstance(path, int):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real(path)

    monkeypatch.setattr(os, "listdir", failing)
    res = cli("status", "p", "--root", root, "--patches", registry.path)
    assert res.code == 0, (res.code, res.out, res.err)


@pytest.mark.parametrize("journal", ["not-json", "a-list", "a-folder", "a-fifo", "a-link", "others-may-write"])
def test_a_journal_whose_label_cannot_be_read_is_an_interrupted_transaction(
    tmp_path: Path, registry: Registry, journal: str
) -> None:
    """doctor names what an interrupted transaction was doing from its journal's first line; when that cannot be
    read (not JSON, not an object, not a regular file, a file others could have written) it says "transaction",
    with the warning and exit 0 as for any journal.

    Kills patchkit/workspace/lock.py:199:core/ExceptionReplacer#3 to #6 (each of OSError, ValueError,
    AttributeError and PatchkitError taken out of pending_label's except, the full run of 2026-12-06): doctor then
    ended as an internal error."""
    registry.add("p", git_diff(tmp_path, BEFORE, AFTER))
    root = tmp_path / "engine-root"
    write_tree(root, BEFORE)
    assert cli("apply", "p", "--root", root, "--patches", registry.path).code == 0
    path = root / ".patchkit" / "journal.json"
    if journal == "a-folder":
        path.mkdir()
    elif journal == "a-fifo":
        os.mkfifo(path, 0o600)
    elif journal == "a-link":
        path.symlink_to("lock")
    else:
        path.write_bytes({"not-json": b"not json\n", "a-list": b"[1]\n"}.get(journal, b'{"label": "apply of p"}\n'))
        path.chmod(0o666 if journal == "others-may-write" else 0o600)
    res = cli("doctor", "--root", root, "--patches", registry.path)
    assert res.code == 0, (res.code, res.out, res.err)
    state = next(line for line in res.out.splitlines() if line.startswith("state"))
    assert state.endswith("; an interrupted transaction left a journal"), state


@needs_root
def test_a_journal_another_user_may_not_reach_is_an_interrupted_transaction(user: tuple[int, int]) -> None:
    """root's `.patchkit` is listable by others but not searchable (mode 0744): an unprivileged user's doctor sees a
    journal there but cannot stat it (EACCES), and says "an interrupted transaction left a journal".

    Kills patchkit/workspace/lock.py:199:core/ExceptionReplacer#3 (OSError taken out of pending_label's except,
    the full run of 2026-12-06), which no run as root can reach."""
    with shared_case() as case:
        root = case.fresh("unsearchable-state", patched=True)
        (root / ".patchkit" / "journal.json").write_bytes(b'{"label": "apply of p"}\n')
        (root / ".patchkit" / "journal.json").chmod(0o600)
        (root / ".patchkit").chmod(0o744)
        assert run_here(["doctor", "--root", str(root), "--patches", str(case.patches)]) == 0  # imports, as root

        def doctor() -> None:
            os.chdir(case.workdir)  # not the checkout, which may be 0700
            out = io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
                code = run(["doctor", "--root", str(root), "--patches", str(case.patches)])
            state = next((line for line in out.getvalue().splitlines() if line.startswith("state")), "")
            if not state.endswith("; an interrupted transaction left a journal"):
                raise AssertionError(f"doctor as the user: exit {code}: {out.getvalue()}")

        as_user(*user, doctor)


@contextlib.contextmanager
def _lock_holders(lock: Path, how: str, count: int = 1) -> Iterator[list[subprocess.Popen[bytes]]]:
    """`count` processes (root's) that each open `lock` and flock it `how` ("LOCK_EX", "LOCK_SH") until the block
    ends."""
    holders = [subprocess.Popen(
        ["/usr/bin/python3", "-c", f"import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR); "
         f"fcntl.flock(fd, fcntl.{how}); print('held', flush=True); sys.stdin.read()", str(lock)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd="/") for _ in range(count)]
    try:
        for holder in holders:
            assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        yield holders
    finally:
        for holder in holders:
            assert holder.stdin is not None
            holder.stdin.close()
            holder.wait()


def _applied_and_reverted(tmp_path: Path, registry: Registry) -> Path:
    """A tree that has had an apply and a revert: its lock file exists, nobody holds it."""
    registry.add("p", git_diff(tmp_path, BEFORE, AFTER))
    root = tmp_path / "engine-root"
    write_tree(root, BEFORE)
    assert cli("apply", "p", "--root", root, "--patches", registry.path).code == 0
    assert cli("revert", "p", "--root", root, "--patches", registry.path).code == 0
    return root


def test_a_waiter_only_asks_whether_the_named_writer_is_alive(tmp_path: Path, registry: Registry) -> None:
    """The lock file names a live process that does not hold the lock (a bystander): a waiting apply asks whether
    it is alive (signal 0) and sends it nothing (the bystander is still running after the apply timed out), and,
    since the kernel names another holder, it names that one, never the bystander.

    Kills patchkit/workspace/lock.py:214:core/NumberReplacer#18 (`os.kill(pid, 1)`: a waiter sent SIGHUP to
    whatever pid the lock file named) and :260/:261's mutants of verified_holder (AddNot#24, IsNot_Is#6,
    ReplaceAndWithOr#4, Is_IsNot#5: the named writer taken without the kernel's word), the full run of
    2026-12-06."""
    root = _applied_and_reverted(tmp_path, registry)
    lock = root / ".patchkit" / "lock"
    # every signal at its default action (a run under nohup would have it ignore SIGHUP): any signal ends it
    bystander = subprocess.Popen(["sleep", "60"], preexec_fn=lambda: [
        signal.signal(number, signal.SIG_DFL) for number in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM)])
    try:
        with _lock_holders(lock, "LOCK_EX") as (holder,):
            lock.write_bytes(b"pid=%d since=2026-01-01T00:00:00Z\n" % bystander.pid)
            run = run_forked(["apply", "p", "--root", str(root), "--patches", str(registry.path),
                              "--lock-timeout", "1.5"])
        assert run.code == 6, (run.code, run.err)
        assert bystander.poll() is None, "the waiter signalled the process the lock file named"
        assert run.err.splitlines()[0] == (f"patchkit: waiting for the lock on {lock} held by pid {holder.pid} "
                                           "(user root) ..."), run.err
        assert f"{lock}: a process (pid {holder.pid}) has held the lock for over 1.5s" in run.err, run.err
    finally:
        bystander.kill()
        bystander.wait()


def test_a_lock_shared_by_two_holders_is_said_to_be_held_by_the_first(tmp_path: Path, registry: Registry) -> None:
    """Two processes hold the lock shared: a waiting apply's one line names the first pid the kernel's lock table
    gives (the lower), then it times out naming both.

    Kills patchkit/workspace/lock.py:230:core/NumberReplacer#23 (`pids[-1]`, the full run of 2026-12-06)."""
    root = _applied_and_reverted(tmp_path, registry)
    lock = root / ".patchkit" / "lock"
    with _lock_holders(lock, "LOCK_SH", count=2) as holders:
        run = run_forked(["apply", "p", "--root", str(root), "--patches", str(registry.path), "--lock-timeout", "1.5"])
    first, second = sorted(holder.pid for holder in holders)
    assert run.code == 6, (run.code, run.err)
    assert run.err.splitlines()[0] == f"patchkit: waiting for the lock on {lock} held by pid {first} (user root) ...", \
        run.err
    assert f"a process (pid {first}, {second}) has held the lock" in run.err, run.err


def test_a_lock_holder_gone_from_proc_is_named_without_a_user(
    tmp_path: Path, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The holder's /proc entry cannot be read when the waiter looks for its user (it exited that instant, or
    /proc hides it): the waiting line names the pid alone.

    Kills patchkit/workspace/lock.py:238:core/ExceptionReplacer#10 (the OSError of that stat escaped, the full run
    of 2026-12-06): the waiting apply crashed."""
    root = _applied_and_reverted(tmp_path, registry)
    lock = root / ".patchkit" / "lock"
    real = os.stat

    def no_proc(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if isinstance(path, str) and path.startswith("/proc/"):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        return real(path, *args, **kwargs)

    with _lock_holders(lock, "LOCK_EX") as (holder,):
        monkeypatch.setattr(os, "stat", no_proc)  # in the forked run too
        run = run_forked(["apply", "p", "--root", str(root), "--patches", str(registry.path), "--lock-timeout", "1.5"])
        monkeypatch.undo()
    assert run.code == 6, (run.code, run.err)
    assert run.err.splitlines()[0] == f"patchkit: waiting for the lock on {lock} held by pid {holder.pid} ...", run.err


@needs_root
def test_a_user_waiting_for_roots_writer_names_it_without_signalling_it(user: tuple[int, int]) -> None:
    """The tree's lock file is the user's, and a root process holds it, named in it as a patchkit writer: the
    user's status, which may not signal root's processes (EPERM), takes it to be alive and names it when it
    times out (exit 6).

    Kills patchkit/workspace/lock.py:217:core/ExceptionReplacer#9 (the PermissionError of `os.kill(pid, 0)`
    escaped, the full run of 2026-12-06), which no run as root can reach."""
    with shared_workdir() as folder:
        registry = Registry(folder / "patches")
        root = _applied_and_reverted(folder, registry)
        lock = root / ".patchkit" / "lock"
        assert cli("status", "p", "--root", root, "--patches", registry.path).code == 3  # imports, as root
        import encodings.ascii  # noqa: F401  lock_pids reads /proc/locks as ascii: the codec, imported as root too
        os.chown(lock, *user)  # root trusts it no more; the user does (its own)
        with _lock_holders(lock, "LOCK_EX") as (holder,):
            lock.write_bytes(b"pid=%d since=2026-01-01T00:00:00Z\n" % holder.pid)

            def status() -> None:
                os.chdir(folder)  # not the checkout, which may be 0700
                err = io.StringIO()
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                    code = run(["status", "p", "--root", str(root), "--patches", str(registry.path),
                                "--lock-timeout", "0.5"])
                said = f"another patchkit process (pid {holder.pid}, since 2026-01-01T00:00:00Z) has held the lock"
                if code != 6 or said not in err.getvalue():
                    raise AssertionError(f"status as the user: exit {code}: {err.getvalue()}")

            as_user(*user, status)


def test_the_kernels_lock_table_is_read_for_this_file_s_holders_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """lock_pids on a lock table as /proc/locks gives it (fed here): the holders of this file's key, once each,
    in order; not a waiter ("->"), not an open file description lock (pid -1), not a holder in another pid
    namespace (pid 0), not this process, not another file's; a line cut short before the key is passed over.

    Kills patchkit/workspace/lock.py:277's mutants of the pid filter (`p != 0`, `p > -1`, `p >= 0`, `p > 1`,
    `... or p != os.getpid()`) and :273's of the line's length (`> 6`, `> 4`, `>= 5`, `!= 5`), the full run of
    2026-12-06."""
    import builtins

    from patchkit.workspace.lock import lock_pids

    path = tmp_path / "lock"
    path.write_bytes(b"")
    fd = os.open(path, os.O_RDONLY)
    st = os.fstat(fd)
    key = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    table = "".join(f"{line}\n" for line in (
        f"1: FLOCK  ADVISORY  WRITE 4321 {key} 0 EOF",
        f"1: -> FLOCK  ADVISORY  WRITE 777 {key} 0 EOF",
        f"2: OFDLCK ADVISORY  WRITE -1 {key} 0 EOF",
        f"3: FLOCK  ADVISORY  READ 0 {key} 0 EOF",
        f"4: FLOCK  ADVISORY  READ {os.getpid()} {key} 0 EOF",
        f"5: FLOCK  ADVISORY  READ 1 {key} 0 EOF",
        f"6: FLOCK  ADVISORY  READ 4321 {key} 0 EOF",
        "7: FLOCK  ADVISORY  WRITE 999 00:00:1 0 EOF",
        "8: FLOCK  ADVISORY  WRITE",  # lines cut short: four and five fields are passed over, six are read
        "8: FLOCK  ADVISORY  WRITE 555",
        f"8: FLOCK  ADVISORY  WRITE 555 {key}",
        f"9: POSIX  ADVISORY  WRITE 1234 {key} 0 EOF",
    ))
    real_open = builtins.open

    def fed(file: object, *args: object, **kwargs: object) -> object:
        if file == "/proc/locks":
            return io.StringIO(table)
        return real_open(file, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(builtins, "open", fed)
    try:
        assert lock_pids(fd) == (1, 555, 1234, 4321)
    finally:
        os.close(fd)


def _lockf_range_in_a_child(path: Path, start: int) -> tuple[int, int]:
    """A child process holding a POSIX write lock on one byte of `path`, at `start`, until its pipe closes."""
    import fcntl

    ready_r, ready_w = os.pipe()
    hold_r, hold_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        fd = os.open(path, os.O_RDWR)
        fcntl.lockf(fd, fcntl.LOCK_EX, 1, start)
        os.write(ready_w, b"x")
        os.close(hold_w)
        os.read(hold_r, 1)
        os._exit(0)
    os.close(hold_r)
    os.read(ready_r, 1)
    return pid, hold_w


def test_f_getlk_asks_about_the_whole_file_and_names_only_a_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where /proc/locks cannot be read, lock_pids asks F_GETLK about the whole file: a POSIX lock on its first
    byte only, or on a later byte only, is found and its holder named; an open file description lock (which
    F_GETLK reports with pid -1) names nobody; an F_GETLK the filesystem refuses (ENOLCK) names nobody.

    Kills patchkit/workspace/lock.py:279's mutants of the query's start and length (NumberReplacer#36, #38),
    :283's of the answer's pid test (`!= 0`, `> -1`, `>= 0`, `... or answer[4] > 0`) and :281's
    ExceptionReplacer#13 (the OSError escaped), the full run of 2026-12-06."""
    import builtins
    import fcntl
    import struct

    from patchkit.workspace import lock as lock_module

    path = tmp_path / "lock"
    path.write_bytes(b"0123456789")
    fd = os.open(path, os.O_RDONLY)
    real_open = builtins.open

    def no_proc_locks(file: object, *args: object, **kwargs: object) -> object:
        if file == "/proc/locks":
            raise PermissionError(errno.EACCES, "denied", file)
        return real_open(file, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(builtins, "open", no_proc_locks)
    try:
        for start in (0, 5):
            child = _lockf_range_in_a_child(path, start)
            try:
                assert lock_module.lock_pids(fd) == (child[0],), start
            finally:
                _release(child)
        other = os.open(path, os.O_RDWR)
        try:
            fcntl.fcntl(other, fcntl.F_OFD_SETLK, struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0))
            assert lock_module.lock_pids(fd) is None
        finally:
            os.close(other)

        def refused(*args: object) -> bytes:
            raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

        monkeypatch.setattr(fcntl, "fcntl", refused)
        assert lock_module.lock_pids(fd) is None
    finally:
        os.close(fd)


_IN_A_NAMESPACE = """
import builtins, errno, fcntl, os, sys
from patchkit.workspace.lock import lock_pids

def ask(fd):  # /proc/locks, then F_GETLK alone
    table = lock_pids(fd)
    real = builtins.open
    def no_table(file, *args, **kwargs):
        if file == '/proc/locks':
            raise PermissionError(errno.EACCES, 'denied', file)
        return real(file, *args, **kwargs)
    builtins.open = no_table
    try:
        return f"{table} {lock_pids(fd)}"
    finally:
        builtins.open = real

path, how = sys.argv[1], sys.argv[2]
if how == "pid 1":  # this process (pid 1 here, as a container's entrypoint) holds the lock; its child asks
    holder = os.open(path, os.O_RDWR)
    fcntl.lockf(holder, fcntl.LOCK_EX)
    child = os.fork()
    if child == 0:
        print(os.getpid(), ask(os.open(path, os.O_RDONLY)), flush=True)
        os._exit(0)
    os.waitpid(child, 0)
elif how == "pid 2":  # its first child (pid 2: the entrypoint's patchkit) holds the lock; pid 1 asks
    ready, hold = os.pipe(), os.pipe()
    child = os.fork()
    if child == 0:
        fcntl.lockf(os.open(path, os.O_RDWR), fcntl.LOCK_EX)
        os.write(ready[1], b"x")
        os.close(hold[1])
        os.read(hold[0], 1)
        os._exit(0)
    os.read(ready[0], 1)
    print(os.getpid(), ask(os.open(path, os.O_RDONLY)), flush=True)
    os.close(hold[1])
    os.waitpid(child, 0)
else:
    print(os.getpid(), ask(os.open(path, os.O_RDONLY)))
"""


@needs_root
def test_a_holder_is_named_as_the_waiters_pid_namespace_sees_it(tmp_path: Path) -> None:
    """The waiter runs in a pid namespace of its own (as in a container). A holder outside it has pid 0 there, in
    /proc/locks and in F_GETLK's answer: nobody is named rather than "pid 0". The namespace's pid 1 (a container's
    entrypoint that runs patchkit itself) holding it is named pid 1, both ways, and its pid 2 pid 2 (F_UNLCK is 2).

    Kills patchkit/workspace/lock.py:283's `answer[4] > -1`, `>= 0`, `> 1` and `answer[-1] != F_UNLCK` (the pid
    for the lock's type) (the full run of 2026-12-06)."""
    if subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True).returncode:
        pytest.skip("unshare --pid cannot make a pid namespace here")
    path = tmp_path / "lock"
    path.write_bytes(b"")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}

    def in_a_namespace(how: str) -> str:
        done = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", _IN_A_NAMESPACE,
                               str(path), how], capture_output=True, text=True, env=env, check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout

    child = _lockf_range_in_a_child(path, 0)
    try:
        assert in_a_namespace("outside") == "1 () None\n"
    finally:
        _release(child)
    assert in_a_namespace("pid 1") == "2 (1,) (1,)\n"
    assert in_a_namespace("pid 2") == "1 (2,) (2,)\n"


def test_a_readers_read_only_fallback_open_of_the_lock_does_not_follow_a_link(
    tmp_path: Path, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader that may not open the lock for writing (another user's reader: EACCES, made here) opens it read-only
    instead, and not through a link either: the lock swapped for a link to a regular file is refused there (exit 7,
    the open's own words) rather than the link's target taken for the lock.

    Kills patchkit/workspace/lock.py:329's mutants that drop O_NOFOLLOW from that open (`BitOr_FloorDiv#20`,
    `BitOr_Mod#20`, held out with seed 81 and left; the full run of 2026-12-06)."""
    registry.add("p", git_diff(tmp_path, BEFORE, AFTER))
    root = tmp_path / "engine-root"
    write_tree(root, BEFORE)
    assert cli("apply", "p", "--root", root, "--patches", registry.path).code == 0
    lock = root / ".patchkit" / "lock"
    (root / ".patchkit" / "elsewhere").write_bytes(b"")
    (root / ".patchkit" / "elsewhere").chmod(0o600)
    lock.unlink()
    lock.symlink_to("elsewhere")
    real_open = os.open

    def writing_refused(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if path == "lock" and flags & os.O_RDWR:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", writing_refused)
    res = cli("status", "p", "--root", root, "--patches", registry.path)
    assert res.code == 7, (res.code, res.out, res.err)
    assert f"{lock}: cannot open the lock file: Too many levels of symbolic links" in res.err, res.err


def test_an_older_patchkits_0644_lock_is_made_private_by_a_writer_not_by_a_reader(
    tmp_path: Path, registry: Registry
) -> None:
    """A lock file of mode 0644 (an older patchkit made it so: anyone could open and hold it): a status leaves it
    as it is, an apply (the writer, whose lock it is) makes it 0600.

    Kills patchkit/workspace/lock.py:336's AddNot#34 and ReplaceAndWithOr#10/#11 (the reader's fchmod, the
    writer's left out; the full run of 2026-12-06)."""
    root = _applied_and_reverted(tmp_path, registry)
    lock = root / ".patchkit" / "lock"
    lock.chmod(0o644)
    assert cli("status", "p", "--root", root, "--patches", registry.path).code == 3
    assert stat.S_IMODE(lock.stat().st_mode) == 0o644
    assert cli("apply", "p", "--root", root, "--patches", registry.path).code == 0
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600
    # any other mode too, one below 0600 as well (kills :336 NotEq_Gt#3, `mode > 0o600`)
    lock.chmod(0o400)
    assert cli("revert", "p", "--root", root, "--patches", registry.path).code == 0
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600


@needs_root
def test_a_users_own_0644_lock_is_made_private_by_its_apply(user: tuple[int, int]) -> None:
    """The same, run by the unprivileged user on a tree and state it owns: its apply makes its 0644 lock 0600.

    Kills patchkit/workspace/lock.py:336:core/ReplaceComparisonOperator_Eq_Is#3 (`st.st_uid is os.geteuid()`,
    the full run of 2026-12-06): true for root's uid 0 (a cached int), false for the user's."""
    with shared_case() as case:
        root = case.fresh("users-lock", patched=True)
        assert run_here(case.args("revert", root)) == 0
        chown_tree(root, *user)
        lock = root / ".patchkit" / "lock"
        lock.chmod(0o644)

        def apply() -> None:
            os.chdir(case.workdir)  # not the checkout, which may be 0700
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                code = run(case.args("apply", root))
            if code != 0 or stat.S_IMODE(lock.stat().st_mode) != 0o600:
                raise AssertionError(f"apply as the user: exit {code}, lock mode {lock.stat().st_mode:o}")

        as_user(*user, apply)


@needs_root
def test_a_user_may_not_apply_on_roots_tree_even_through_an_older_0644_lock(user: tuple[int, int]) -> None:
    """root's tree with an older patchkit's 0644 lock (which anyone may open for reading): a user's apply is
    refused at the lock, as on any tree it may not write (exit 2, "this user may not write"), instead of taking
    the exclusive lock through a read-only descriptor and failing later; nothing is changed, the lock included."""
    with shared_case() as case:
        root = case.fresh("roots-tree", patched=True)
        assert run_here(case.args("revert", root)) == 0
        lock = root / ".patchkit" / "lock"
        lock.chmod(0o644)
        (root / "engine").chmod(0o755)  # readable by the user: only the lock stops it
        start = image(root)

        def apply() -> None:
            os.chdir(case.workdir)  # not the checkout, which may be 0700
            err = io.StringIO()
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                code = run(case.args("apply", root))
            said = err.getvalue()
            if code != 2 or f"hint: this user may not write {root}/.patchkit" not in said:
                raise AssertionError(f"apply as the user: exit {code}: {said}")

        as_user(*user, apply)
        assert image(root) == start


def test_a_journal_label_is_cut_short_in_doctors_line(tmp_path: Path, registry: Registry) -> None:
    """A journal whose label is 5,000 characters (a damaged file): doctor's line gives its first 200 and "..."."""
    root = _applied_and_reverted(tmp_path, registry)
    journal = root / ".patchkit" / "journal.json"
    journal.write_bytes(json.dumps({"label": "apply of " + "p" * 5000}).encode() + b"\n")
    journal.chmod(0o600)
    res = cli("doctor", "--root", root, "--patches", registry.path)
    state = next(line for line in res.out.splitlines() if line.startswith("state"))
    assert state.endswith("; an interrupted apply of " + "p" * 191 + "... left a journal"), state


def test_a_reader_still_waits_for_a_writer_through_the_root_folder_when_the_lock_file_is_gone(
    tmp_path: Path, registry: Registry
) -> None:
    """A writer holds the root's lock (its lock file was there before it: it also takes the root folder's lock,
    exclusive, without waiting), and the lock file is removed meanwhile (by hand, by a clean-up): a status, which
    finds no lock file, takes the root folder's lock shared, and so waits for the writer (here past
    --lock-timeout: exit 6).

    Kills patchkit/workspace/lock.py:378's mutants of the writer's non-blocking folder lock that take it shared
    or not at all (AddNot#38; `| LOCK_NB` into &, //, <<, >>, **, * or -: an invalid operation, or LOCK_UN), the
    full run of 2026-12-06."""
    root = _applied_and_reverted(tmp_path, registry)
    with locked(root, 5):
        (root / ".patchkit" / "lock").unlink()
        res = run_forked(["status", "p", "--root", str(root), "--patches", str(registry.path), "--lock-timeout", "0.5"])
    assert res.code == 6, (res.code, res.out, res.err)


def test_a_writer_that_did_not_make_the_lock_file_does_not_wait_for_a_reader_of_the_root_folder(
    tmp_path: Path, registry: Registry
) -> None:
    """A reader (that found no lock file) holds the root folder's lock, shared, and the lock file is there: a
    writer that did not create it takes the folder's lock only if it is free at once, and goes on without it
    (anyone who may open the root folder can flock it; a writer must not wait for them): the apply lands.

    Kills patchkit/workspace/lock.py:378's `| LOCK_NB` into `% LOCK_NB` (LOCK_EX alone: a blocking flock, which no
    --lock-timeout bounds), the full run of 2026-12-06."""
    import fcntl

    root = _applied_and_reverted(tmp_path, registry)
    folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(folder, fcntl.LOCK_SH)
        done = subprocess.run([sys.executable, "-m", "patchkit", "apply", "p", "--root", str(root), "--patches",
                               str(registry.path), "--lock-timeout", "1"], capture_output=True, text=True, timeout=20)
    finally:
        os.close(folder)
    assert done.returncode == 0, done.stderr
    assert (root / "engine/a.py").read_bytes() == AFTER["engine/a.py"]


def test_a_root_folder_that_refuses_flock_is_passed_over_by_a_writer(
    tmp_path: Path, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The root folder's flock is refused with ENOLCK (a filesystem whose folders take no locks, e.g. NFS): the
    lock on the folder is best effort, so a writer that did not make the lock file goes on without it (the lock
    file's own flock works): the apply lands.

    Kills patchkit/workspace/lock.py:382:core/ReplaceAndWithOr#12 (`errno != EBADF or errno not in _NO_LOCKS`, the
    full run of 2026-12-06), under which ENOLCK there ended the apply."""
    import fcntl

    root = _applied_and_reverted(tmp_path, registry)
    folder_ino = root.stat().st_ino
    real = fcntl.flock

    def no_folder_locks(fd: int, operation: int) -> None:
        if os.fstat(fd).st_ino == folder_ino:
            raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))
        real(fd, operation)

    monkeypatch.setattr(fcntl, "flock", no_folder_locks)
    res = cli("apply", "p", "--root", root, "--patches", registry.path)
    assert res.code == 0, (res.code, res.out, res.err)
    assert (root / "engine/a.py").read_bytes() == AFTER["engine/a.py"]


def test_a_holder_line_that_cannot_be_written_does_not_stop_the_apply(
    tmp_path: Path, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writing the holder line into the lock file fails (ENOSPC: the state folder's filesystem is full just then):
    the line is only informational, and the apply goes on and lands.

    Kills patchkit/workspace/lock.py:391:core/ExceptionReplacer#25 (the OSError of that write escaped: an
    internal error; the full run of 2026-12-06)."""
    root = _applied_and_reverted(tmp_path, registry)
    lock_ino = (root / ".patchkit" / "lock").stat().st_ino
    real = os.pwrite

    def full(fd: int, data: bytes, offset: int) -> int:
        if os.fstat(fd).st_ino == lock_ino:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", full)
    res = cli("apply", "p", "--root", root, "--patches", registry.path)
    assert res.code == 0, (res.code, res.out, res.err)
    assert (root / "engine/a.py").read_bytes() == AFTER["engine/a.py"]


@needs_root
def test_a_user_is_held_to_the_blocks_any_user_may_take(user: tuple[int, int], monkeypatch: pytest.MonkeyPatch) -> None:
    """Run by the unprivileged user on a tree it owns, the room check counts only the blocks and inodes any user
    may take (f_bavail, f_favail), not those kept for root: with plenty kept for root and none for users, the
    apply is refused (exit 7, not enough room), nothing written.

    Kills patchkit/workspace/commit.py:310:core/ReplaceComparisonOperator_Eq_GtE#1 (`os.geteuid() >= 0`: every
    user counted as root; the full run of 2026-12-06), which no run as root can tell."""
    real = os.fstatvfs

    def kept_for_root(fd: int) -> os.statvfs_result:
        v = real(fd)
        return os.statvfs_result((v.f_bsize, v.f_frsize, v.f_blocks, 1 << 20, 0, 1 << 20, 1 << 20, 0, v.f_flag,
                                  v.f_namemax))

    with shared_case() as case:
        root = case.fresh("users-share")
        chown_tree(root, *user)
        assert run_here(case.args("status", root)) == 3  # imports, as root
        monkeypatch.setattr(os, "fstatvfs", kept_for_root)  # in the forked child too

        def apply() -> None:
            os.chdir(case.workdir)  # not the checkout, which may be 0700
            err = io.StringIO()
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                code = run(case.args("apply", root))
            if code != 7 or "not enough room on the filesystem" not in err.getvalue():
                raise AssertionError(f"apply as the user: exit {code}: {err.getvalue()}")

        as_user(*user, apply)
        assert image(root) == case.original


@pytest.mark.parametrize(("failing", "code"), [("the-lock-file", errno.EIO), ("the-root-folder", errno.EIO),
                                            ("the-root-folder", errno.ENOMEM)])
def test_a_flock_that_fails_with_an_io_error_is_exit_6_naming_what_could_not_be_locked(
    tmp_path: Path, registry: Registry, monkeypatch: pytest.MonkeyPatch, failing: str, code: int
) -> None:
    """flock fails with EIO (a filesystem's own failure, not "no locks here"): on the lock file, or on the root
    folder that a writer which did not make the lock file locks too: the apply stops before anything is written,
    exit 6, naming what it could not lock and why (it was an internal error, exit 10).

    Kills patchkit/workspace/lock.py:382's AddNot#39, NotEq_Eq#4 and NotEq_Gt#4 (EIO on the root folder passed
    over as if the folder took no locks) and NotEq_LtE#4 (ENOMEM, above EBADF's number, passed over), the full run
    of 2026-12-06."""
    import fcntl

    root = _applied_and_reverted(tmp_path, registry)
    lock = root / ".patchkit" / "lock"
    inode = (lock if failing == "the-lock-file" else root).stat().st_ino
    real = fcntl.flock

    def failing_flock(fd: int, operation: int) -> None:
        if os.fstat(fd).st_ino == inode and operation & (fcntl.LOCK_SH | fcntl.LOCK_EX):
            raise OSError(code, os.strerror(code))
        real(fd, operation)

    monkeypatch.setattr(fcntl, "flock", failing_flock)
    res = cli("apply", "p", "--root", root, "--patches", registry.path)
    assert res.code == 6, (res.code, res.out, res.err)
    where = lock if failing == "the-lock-file" else root
    assert res.err.startswith(f"patchkit: error: {where}: cannot lock it: {os.strerror(code)}; nothing was written"), \
        res.err
    assert (root / "engine/a.py").read_bytes() == BEFORE["engine/a.py"]


@pytest.mark.parametrize("failure", [errno.EIO, errno.ESTALE])
@pytest.mark.parametrize("call", [1, 2])
def test_an_error_opening_the_original_for_its_judged_bytes_is_an_io_failure_not_a_change(
    tmp_path: Path, registry: Registry, monkeypatch: pytest.MonkeyPatch, failure: int, call: int
) -> None:
    """The open that reads the original's bytes again (commit.py `_as_judged`: through the kept link before the
    replace, call 1, or at its kept name right after it, call 2) fails with an I/O error (EIO), or a stale handle
    (ESTALE, a number above ELOOP's): the run fails naming that error, every file as it was, and does not call
    it a file changed by someone else, which only a link at the name (ELOOP) is.

    Kills patchkit/workspace/commit.py:725:core/ReplaceComparisonOperator_Eq_LtE#4 (`errno <= ELOOP`: EIO read
    as a link) and :725's Eq_GtE#4 (`>=`: ESTALE read as one); the full runs of 2026-12-06, the fix's code."""
    registry.add("p", git_diff(tmp_path, BEFORE, AFTER))
    root = tmp_path / "engine-root"
    write_tree(root, BEFORE)
    real_open = os.open
    calls: list[str] = []

    def failing_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if sys._getframe(1).f_code.co_name == "_as_judged":
            calls.append(str(path))
            if len(calls) == call:
                raise OSError(failure, os.strerror(failure))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", failing_open)
    res = cli("apply", "p", "--root", root, "--patches", registry.path)
    assert len(calls) >= call, calls
    assert res.code == 7, (res.code, res.out, res.err)
    assert f"engine/a.py: writing failed: {os.strerror(failure)}; the tree was restored" in res.err, res.err
    assert "changed while patchkit was writing it" not in res.err, res.err
    assert {path: (root / path).read_bytes() for path in BEFORE} == BEFORE
