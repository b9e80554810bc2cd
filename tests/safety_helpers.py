"""Helpers for the safety tests: trees with every kind of change, diffs made by real git, exact tree images,
and patchkit runs in forked children that a fault can kill without taking pytest down.

A forked child runs the real CLI (cli.run) in a copy of this process, so a campaign of hundreds of kills costs
milliseconds per run instead of an interpreter start; `run_subprocess` is there for the end-to-end checks.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import itertools
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from patchkit.workspace.names import TEMP_NAME
from tests.conftest import FileSpec, git_diff

REPO = Path(__file__).resolve().parent.parent
PATCH_ID = "safety-pr1"


# (bytes, mode) per path; None in an "after" spec deletes the path.
Files = Mapping[str, tuple[bytes, int] | None]

# The "before" tree: tiny made-up engine files. Non-UTF-8 bytes on purpose: files are bytes, not text.
BEFORE: dict[str, tuple[bytes, int] | None] = {
    "engine/core.py": (b"".join(b"line %d\n" % i for i in range(1, 31)) + b"latin1: caf\xe9 \xff\xfe\n", 0o644),
    "engine/old_name.py": (b"".join(b"def f%d():\n    return %d\n" % (i, i) for i in range(12)), 0o644),
    "engine/run.sh": (b"#!/bin/sh\necho run\n", 0o644),
    "engine/legacy/gone.py": (b"obsolete = True\n", 0o640),
    "engine/keep.py": (b"untouched = 1\n", 0o600),
    "engine/tools/helper.py": (b"x = 1\ny = 2\nz = 3\n", 0o755),
}

# Every kind of change: modify (two hunks), rename with an edit into a new folder, mode change, delete that
# empties a folder, create in a new nested folder, modify of an executable.
AFTER: dict[str, tuple[bytes, int] | None] = {
    "engine/core.py": (
        b"header\n" + b"".join(b"line %d\n" % i for i in range(1, 31) if i != 20) + b"latin1: caf\xe9 \xff\xfe!\n",
        0o644,
    ),
    "engine/old_name.py": None,
    "engine/moved/new_name.py": (
        b"".join(b"def f%d():\n    return %d\n" % (i, i) for i in range(12)).replace(b"return 5", b"return 55"),
        0o644,
    ),
    "engine/run.sh": (b"#!/bin/sh\necho run\n", 0o755),
    "engine/legacy/gone.py": None,
    "engine/plugins/extra/added.py": (b"added = True\n\xc3\x28 invalid utf-8 is fine\n", 0o644),
    "engine/tools/helper.py": (b"x = 1\ny = 22\nz = 3\n", 0o755),
}


def write_files(root: Path, files: Files) -> None:
    for rel, spec in files.items():
        path = root / rel
        if spec is None:
            path.unlink(missing_ok=True)
            continue
        data, mode = spec
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        path.chmod(mode)


def exec_bits(files: Files) -> dict[str, FileSpec]:
    """`files` as conftest's tree spec, for conftest.git_diff: git records a file's exec bit, no other mode bit."""
    return {rel: None if spec is None else (spec[0], bool(spec[1] & 0o100)) for rel, spec in files.items()}


def add_patch(patches: Path, patch_id: str, diff: bytes, extra: str = "") -> Path:
    """A registry entry for `diff`, its sha256 recorded."""
    folder = patches / patch_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "change.diff").write_bytes(diff)
    (folder / "manifest.toml").write_text(
        f'id = "{patch_id}"\ntitle = "safety test"\ndiff = "change.diff"\n'
        f'sha256 = "{hashlib.sha256(diff).hexdigest()}"\n{extra}\n'
        '[upstream]\nrepo = "example/engine"\npr = 1\n[target]\nname = "engine"\n[waiver]\nintroduced_by = 2\n',
        encoding="utf-8",
    )
    return folder


# An exact image of a tree: every file (bytes, mode), link and folder (mode), .patchkit left out.
Image = dict[str, tuple[str, bytes, int]]


def report_one_free_block(monkeypatch: Any) -> None:
    """Make os.fstatvfs say every filesystem has one free block (of its own size) left: a write of any size is
    refused for want of room, whatever the real disk has. `monkeypatch`: pytest's fixture (undone after the test)."""
    real = os.fstatvfs

    def one_block(fd: int) -> os.statvfs_result:
        v = real(fd)
        return os.statvfs_result((v.f_bsize, v.f_frsize, v.f_blocks, 1, 1, v.f_files, v.f_ffree, v.f_favail,
                                  v.f_flag, v.f_namemax))

    monkeypatch.setattr(os, "fstatvfs", one_block)


def image(root: Path) -> Image:
    out: Image = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not (Path(dirpath) == root and d == ".patchkit")]
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            rel = path.relative_to(root).as_posix()
            if stat.S_ISREG(st.st_mode):
                out[rel] = ("file", path.read_bytes(), stat.S_IMODE(st.st_mode))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", b"", stat.S_IMODE(st.st_mode))
            else:
                out[rel] = ("other", os.fsencode(os.readlink(path)) if stat.S_ISLNK(st.st_mode) else b"", 0)
    return out


@dataclass(frozen=True)
class Case:
    """A registry with one patch, a pristine tree, and the reference trees clean runs produce."""

    workdir: Path
    patches: Path
    pristine: Path  # the "before" tree; copied for each run
    original: Image
    patched: Image  # what a clean apply makes of pristine
    reverted: Image  # what a clean revert makes of the patched tree

    def fresh(self, name: str, patched: bool = False) -> Path:
        root = self.workdir / name
        if root.exists():
            shutil.rmtree(root)
        shutil.copytree(self.pristine, root, symlinks=True)
        if patched:
            assert run_here(self.args("apply", root)) == 0
        return root

    def args(self, action: str, root: Path, *extra: str) -> list[str]:
        return [action, PATCH_ID, "--root", str(root), "--patches", str(self.patches), *extra]


def build_case(workdir: Path, before: Files = BEFORE, after: Files = AFTER) -> Case:
    patches = workdir / "patches"
    add_patch(patches, PATCH_ID, git_diff(workdir, exec_bits(before), exec_bits(after)))
    pristine = workdir / "pristine"
    pristine.mkdir()
    write_files(pristine, before)
    os.chmod(pristine / "engine", 0o750)  # folder modes must survive a rollback too
    case = Case(workdir, patches, pristine, image(pristine), {}, {})
    done = case.fresh("reference")
    # In-process, so this process has imported everything a run needs and forked children start warm.
    assert run_here(case.args("apply", done)) == 0
    patched = image(done)
    assert run_here(case.args("revert", done)) == 0
    assert run_here(case.args("status", done)) == 3
    return Case(workdir, patches, pristine, case.original, patched, image(done))


def warm_up(workdir: Path) -> None:
    """Run each command once in this process, so forked children do not each import lazily loaded modules."""
    root = workdir / "warm-up"
    write_files(root, {"w.py": (b"w = 1\n", 0o644)})
    add_patch(workdir / "warm-up-patches", "warm", b"--- a/w.py\n+++ b/w.py\n@@ -1 +1 @@\n-w = 1\n+w = 2\n")
    for action in ("status", "apply", "revert"):
        run_here([action, "warm", "--root", str(root), "--patches", str(workdir / "warm-up-patches")])


def run_here(args: Sequence[str]) -> int:
    """Run the CLI in this process, output discarded; the exit code."""
    from patchkit.cli.main import run

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return run(list(args))


def _tmpfs() -> Path | None:
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else None


@contextlib.contextmanager
def fast_workdir(fallback: Path) -> Iterator[Path]:
    """A scratch folder on tmpfs when there is one (fsync is free there; a SIGKILL loses nothing either way)."""
    shm = _tmpfs()
    if shm is not None:
        folder = Path(tempfile.mkdtemp(prefix="patchkit-safety-", dir=shm))
        try:
            yield folder
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    else:
        yield fallback


@contextlib.contextmanager
def shared_workdir() -> Iterator[Path]:
    """The security tests' scratch folder (the conftest `user` fixture's other half): on tmpfs when there is
    one, else in the system's temp folder, and 0755, so that the unprivileged user reaches the registry, the
    trees and the environments made in it. Never under the checkout or pytest's base folder: both may be
    private (0700), and the tests must pass from such a checkout."""
    folder = Path(tempfile.mkdtemp(prefix="patchkit-safety-", dir=_tmpfs()))
    try:
        os.chmod(folder, 0o755)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def shared_case(before: Files = BEFORE, after: Files = AFTER) -> Iterator[Case]:
    """build_case in a shared_workdir: the case a security test module shares (in a module-scoped fixture)."""
    with shared_workdir() as workdir:
        yield build_case(workdir, before, after)


# --------------------------------------------------------------------------------------------- running


@dataclass(frozen=True)
class Run:
    code: int | None  # exit code; None when a signal ended the process
    signal: int | None
    out: str
    err: str

    @property
    def killed(self) -> bool:
        return self.signal == signal.SIGKILL

    def json(self) -> Any:
        return json.loads(self.out)


def signals_as_in_a_terminal() -> None:
    """For `before=` in a forked child: SIGINT and SIGTERM as an interactive start has them, however this run was
    started (a background job of a non-interactive shell starts with SIGINT ignored, which the CLI honours)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def run_forked(
    args: Sequence[str], env: Mapping[str, str] | None = None, before: Callable[[], None] | None = None
) -> Run:
    """Run the CLI on `args` in a forked child with extra environment `env` (and `before()` called in the child
    first, e.g. to hook a filesystem operation); wait for it."""
    return wait_forked(start_forked(args, env, before=before))


@dataclass(frozen=True)
class Child:
    pid: int
    out: Path
    err: Path


def start_forked(
    args: Sequence[str], env: Mapping[str, str] | None = None, gate: tuple[int, int] | None = None,
    before: Callable[[], None] | None = None,
) -> Child:
    """Fork a child that runs the CLI, after EOF on the `gate` pipe (read end, write end) if given; no wait."""
    out_fd, out_name = tempfile.mkstemp(prefix="pk-out-")
    err_fd, err_name = tempfile.mkstemp(prefix="pk-err-")
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child never returns to pytest
        code = 70
        try:
            os.dup2(out_fd, 1)
            os.dup2(err_fd, 2)
            sys.stdout = open(1, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
            os.environ.update(env or {})
            if gate is not None:
                os.close(gate[1])  # else this child would hold the gate open for itself
                os.read(gate[0], 1)
            if before is not None:
                before()
            from patchkit.cli.main import run

            code = run(list(args))
        except BaseException as exc:
            import traceback

            traceback.print_exception(exc)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.close(out_fd)
    os.close(err_fd)
    return Child(pid, Path(out_name), Path(err_name))


def wait_forked(child: Child) -> Run:
    _, status = os.waitpid(child.pid, 0)
    out = child.out.read_text(encoding="utf-8", errors="replace")
    err = child.err.read_text(encoding="utf-8", errors="replace")
    child.out.unlink()
    child.err.unlink()
    if os.WIFSIGNALED(status):
        return Run(None, os.WTERMSIG(status), out, err)
    return Run(os.WEXITSTATUS(status), None, out, err)


def move_before_replace(name: str, move: Callable[[], None]) -> Callable[[], None]:
    """In the forked child: run `move` once, right before the transaction replaces `name` with its new file."""

    def install() -> None:
        from patchkit.workspace.disk import Disk

        real = Disk.replace
        done: list[bool] = []

        def replace(self: Disk, dir_fd: int, src: str, dst: str) -> None:
            if dst == name and src.endswith(".tmp") and not done:
                done.append(True)
                move()
            real(self, dir_fd, src, dst)

        Disk.replace = replace  # type: ignore[method-assign]

    return install


def run_subprocess(args: Sequence[str], env: Mapping[str, str] | None = None) -> Run:
    """Run `python -m patchkit` for real: a fresh interpreter, as a container entrypoint would."""
    done = subprocess.run(
        [sys.executable, "-m", "patchkit", *args],
        env={**os.environ, **(env or {})},
        capture_output=True,
        cwd=REPO,
        check=False,
    )
    if done.returncode < 0:
        return Run(None, -done.returncode, done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace"))
    return Run(done.returncode, None, done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace"))


def fault_env(after: int, errno_name: str | None = None) -> dict[str, str]:
    env = {"PATCHKIT_FAULT_AFTER": str(after)}
    if errno_name:
        env["PATCHKIT_FAULT_ERRNO"] = errno_name
    return env


def whole_state(case: Case, root: Path, forward: bool = True) -> str | None:
    """'before' / 'after' when root is byte-identical to one whole state of the action, else None (mixed)."""
    start, end = (case.original, case.patched) if forward else (case.patched, case.reverted)
    now = image(root)
    if now == start:
        return "before"
    if now == end:
        return "after"
    return None


def interrupted_tree(case: Case, name: str) -> Path:
    """A fresh tree `name` whose apply was SIGKILLed mid-write: a real journal waits in .patchkit, the tree is
    mixed (the state tests' starting point: what may a recovery trust of it)."""
    for n in range(8, 60):
        root = case.fresh(name)
        run_forked(case.args("apply", root), fault_env(n))
        if (root / ".patchkit" / "journal.json").exists() and whole_state(case, root) is None:
            return root
    raise AssertionError("no kill point left a journal")


def describe_mix(expected: Image, root: Path) -> list[str]:
    """The paths where root differs from `expected`, for assertion messages."""
    now = image(root)
    return sorted(p for p in expected.keys() | now.keys() if expected.get(p) != now.get(p))


# ------------------------------------------------------------------------------------------- campaigns

STATUS_OF = {
    "before": {"apply": "unapplied", "revert": "applied"},
    "after": {"apply": "applied", "revert": "unapplied"},
}


@dataclass
class Campaign:
    """What a kill campaign saw. Every list is a failure and must stay empty."""

    action: str
    kill_points: int = 0  # runs SIGKILLed during the transaction
    recovery_kills: int = 0  # recoveries SIGKILLed in turn
    ended_before: int = 0
    ended_after: int = 0
    mixed: list[str] = field(default_factory=list)  # trees neither whole before nor whole after
    status_wrong: list[str] = field(default_factory=list)  # status disagreeing with the tree
    unreported: list[str] = field(default_factory=list)  # a journal recovered without the stderr line
    retry_failed: list[str] = field(default_factory=list)  # rerunning the action did not finish the job
    leftovers: list[str] = field(default_factory=list)  # journal or temp files left after recovery
    outside_writes: int = 0  # runs after which anything outside the root had changed

    @property
    def failures(self) -> list[str]:
        return self.mixed + self.status_wrong + self.unreported + self.retry_failed + self.leftovers


def kill_campaign(case: Case, action: str, recovery_faults: Callable[[int], Sequence[int]]) -> Campaign:
    """Kill `action` after each filesystem operation in turn, until it runs to the end.

    After the kill at operation n, a clean `status` must recover, find a whole tree and say which, and
    rerunning the action must finish it. Then for each j in recovery_faults(n), the kill at n is repeated and
    the recovery itself killed after j operations before the clean `status` (stopping at the first j the
    recovery outlives).
    """
    forward = action == "apply"
    result = Campaign(action)
    outside = outside_images(case)
    for n in itertools.count():
        root = case.fresh("campaign", patched=not forward)
        run = run_forked(case.args(action, root), fault_env(n))
        if not run.killed:  # n is past the last operation: the campaign is complete
            if run.code != 0 or whole_state(case, root, forward) != "after":
                result.retry_failed.append(f"unkilled run at {n}: exit {run.code} {run.err.strip()}")
            return result
        result.kill_points += 1
        _check_recovery(case, root, action, f"{action} killed after op {n}", None, result)
        for j in recovery_faults(n):
            root = case.fresh("campaign", patched=not forward)
            run_forked(case.args(action, root), fault_env(n))
            where = f"{action} killed after op {n}, recovery after op {j}"
            if not _check_recovery(case, root, action, where, j, result):
                break  # the recovery ran to its end: larger j kill nothing new
        result.outside_writes += outside != outside_images(case)
    raise AssertionError("unreachable")


def _check_recovery(case: Case, root: Path, action: str, where: str, j: int | None, result: Campaign) -> bool:
    """Check the tree after a kill (and, with j, a killed recovery); whether that recovery was killed."""
    forward = action == "apply"
    journal = root / ".patchkit" / "journal.json"
    stderr = ""
    killed = False
    if j is not None and journal.exists():
        attempt = run_forked(case.args("status", root, "--json"), fault_env(j))
        killed = attempt.killed
        if killed:
            result.recovery_kills += 1
        else:
            stderr += attempt.err
    had_journal = journal.exists()
    final = run_forked(case.args("status", root, "--json"))
    stderr += final.err
    state = whole_state(case, root, forward)
    if state is None:
        result.mixed.append(f"{where}: {describe_mix(case.original if forward else case.patched, root)}")
        return killed
    result.ended_before += state == "before"
    result.ended_after += state == "after"
    if final.json()["state"] != STATUS_OF[state][action]:
        result.status_wrong.append(f"{where}: tree is {state}, status says {final.json()['state']}")
    if had_journal and f"recovered an interrupted {action} of {PATCH_ID} on " not in stderr:
        result.unreported.append(f"{where}: {stderr.strip()!r}")
    stray = [p.name for p in root.rglob("*") if TEMP_NAME.fullmatch(p.name) or p.name == "journal.json"]
    if stray:
        result.leftovers.append(f"{where}: {stray}")
    if j is None:  # rerunning, as a restarted container does, must finish the job
        retry = run_forked(case.args(action, root))
        if retry.code != 0 or whole_state(case, root, forward) != "after":
            result.retry_failed.append(f"{where}: rerun exit {retry.code} {retry.err.strip()}")
    return killed


@dataclass
class ErrorCampaign:
    """What injecting an I/O error at each write point in turn did. Every list must stay empty."""

    action: str
    errno_name: str
    failed_runs: int = 0  # runs that hit the error (and must have exited 7 with the tree restored)
    finished_forward: int = 0  # runs that hit it in the clean-up after the last file (and must have finished)
    wrong_exit: list[str] = field(default_factory=list)
    not_restored: list[str] = field(default_factory=list)
    unclear: list[str] = field(default_factory=list)  # tracebacks, or a message that does not say what happened
    outside_writes: int = 0

    @property
    def failures(self) -> list[str]:
        return self.wrong_exit + self.not_restored + self.unclear


def count_operations(case: Case, action: str) -> int:
    """How many filesystem operations `action` makes on a fresh tree (the first n whose kill is not reached)."""
    low, high = 0, 1024  # a kill after op low is reached; after op high it is not
    while low + 1 < high:
        mid = (low + high) // 2
        root = case.fresh("count-ops", patched=action != "apply")
        if run_forked(case.args(action, root), fault_env(mid)).killed:
            low = mid
        else:
            high = mid
    return high


def error_campaign(case: Case, action: str, errno_name: str, step: int = 1) -> ErrorCampaign:
    """Make operation n (every step-th one) of `action` fail with errno_name, for every operation it makes.

    A failure before the last file is written must exit 7 with the tree restored; after it (the clean-up),
    the transaction only goes forward: the run must succeed with the tree finished.
    """
    forward = action == "apply"
    start = case.original if forward else case.patched
    end = case.patched if forward else case.reverted
    result = ErrorCampaign(action, errno_name)
    outside = outside_images(case)
    for n in range(0, count_operations(case, action), step):
        root = case.fresh("ioerror", patched=not forward)
        run = run_forked(case.args(action, root), fault_env(n, errno_name))
        result.outside_writes += outside != outside_images(case)
        if run.code == 0:
            result.finished_forward += 1
            if image(root) != end:
                result.not_restored.append(f"op {n}: exit 0 but not finished: {describe_mix(end, root)}")
            continue
        result.failed_runs += 1
        if run.code != 7:
            result.wrong_exit.append(f"op {n}: exit {run.code}: {run.err.strip()}")
        if "Traceback" in run.err or not ("nothing was changed" in run.err or "tree was restored" in run.err):
            result.unclear.append(f"op {n}: {run.err.strip()}")
        if image(root) != start or (root / ".patchkit" / "journal.json").exists():
            result.not_restored.append(f"op {n}: {describe_mix(start, root)}")
    return result


def outside_images(case: Case) -> tuple[Image, Image]:
    """What lies next to every root a case makes: the registry and the pristine tree."""
    return image(case.patches), image(case.pristine)


def race(case: Case, root: Path, runs: Sequence[tuple[str, Mapping[str, str]]]) -> list[Run]:
    """Start one child per (action, env) on root, released at the same instant; their results in order."""
    read_end, write_end = os.pipe()
    gate = (read_end, write_end)
    children = [start_forked(case.args(action, root, "--json"), env, gate=gate) for action, env in runs]
    os.close(read_end)
    os.close(write_end)  # EOF on the gate: every child starts now
    return [wait_forked(child) for child in children]


# ------------------------------------------------------------------------------------ users and mounts


def as_user(uid: int, gid: int, action: Callable[[], None]) -> None:
    """Run `action` in a forked child that has dropped to uid/gid for real; raise if it failed."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 1
        try:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            action()
            code = 0
        except BaseException:
            import traceback

            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"the action as uid {uid} failed"


def chown_tree(root: Path, uid: int, gid: int) -> None:
    """Give the whole tree (the root included) to uid:gid, as on an engine tree owned by a service user."""
    os.chown(root, uid, gid)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            os.chown(Path(dirpath) / name, uid, gid, follow_symlinks=False)


def mount_works() -> bool:
    """Whether this process may mount (root in a container that allows it)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    probe = Path(tempfile.mkdtemp(prefix="pk-mount-probe-"))
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe)], capture_output=True)
        if done.returncode != 0:
            return False
        subprocess.run(["umount", str(probe)], check=True, capture_output=True)
        return True
    finally:
        probe.rmdir()


@contextlib.contextmanager
def mounted(*args: str, target: Path) -> Iterator[Path]:
    """`mount <args> <target>` for the duration; unmounted (lazily, if busy) afterwards."""
    subprocess.run(["mount", *args, str(target)], check=True, capture_output=True)
    try:
        yield target
    finally:
        subprocess.run(["umount", "-l", str(target)], check=False, capture_output=True)


@contextlib.contextmanager
def read_only_folder(folder: Path) -> Iterator[Path]:
    """Make one folder inside a tree a read-only bind mount of itself (EROFS on every write in it)."""
    with mounted("--bind", str(folder), target=folder):
        subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], check=True, capture_output=True)
        yield folder
