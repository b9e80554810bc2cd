"""`patchkit doctor`: one read-only report of what a run here would meet: patchkit and its interpreter, the
registry, the engine root, the lock's filesystem, the trust of `.patchkit`, and what the container hook
(`apply --all`) would do, as its dry run answers.

Reads only: the lock is probed with a shared, non-blocking flock on the root folder (as a reader takes it),
released at once; `.patchkit` is opened only if it exists, and checked as every command checks it; the hook's
dry run runs with the parse cache off, and not at all while an interrupted transaction waits to be rolled
back (any other command would roll it back first, which writes).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import sys
import zipfile
from enum import Enum
from pathlib import Path
from typing import Any, NamedTuple

import click

from patchkit import __version__, source_archive
from patchkit.cli.commands.options import FolderPath, Selection, choose_root, invocation, json_option, patches_option
from patchkit.cli.main import install_folder
from patchkit.display import show_path
from patchkit.errors import ExitCode, PatchkitError
from patchkit.input.registry import check_registry_folder, find_locations, load_registry, stray_folders
from patchkit.input.tree import STATE_DIR, Root, open_root
from patchkit.outcome import Action
from patchkit.run.actions import Options
from patchkit.run.series import load_series, run_series
from patchkit.speak.console import echo, settings
from patchkit.speak.report import render_json, series_lines, summary_line, versioned
from patchkit.workspace.lock import needs_recovery, pending_label
from patchkit.workspace.trust import open_state_dir

OLDEST_PYTHON = (3, 10)
LOCK_UNSUPPORTED = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)


class CheckState(Enum):
    OK = "ok"
    WARNING = "warning"  # worth knowing; a run still works
    PROBLEM = "problem"  # a run here fails or refuses: doctor exits 1
    SKIPPED = "skipped"  # not checked (no --root, or an earlier problem)


class Check(NamedTuple):
    check: str
    state: CheckState
    detail: str
    hint: str | None = None


class _Problem(Exception):
    """A check that found a problem, raised inside it and turned into its Check."""

    def __init__(self, detail: str, hint: str | None = None) -> None:
        super().__init__(detail)
        self.detail, self.hint = detail, hint


def check_patchkit() -> Check:
    detail = f"patchkit {__version__}, installed in {install_folder()}"
    archive = source_archive()
    if archive is None:
        return Check("patchkit", CheckState.OK, detail)
    # patchkit.pyz: a start loads the archive's bytecode for this interpreter (scripts/build_pyz.py), if any.
    tag = sys.implementation.cache_tag
    try:
        with zipfile.ZipFile(archive) as pyz:
            compiled = f"patchkit/__pycache__/__init__.{tag}.pyc" in pyz.namelist()
    except (OSError, zipfile.BadZipFile):
        compiled = False
    if compiled:
        return Check("patchkit", CheckState.OK, f"{detail}, with bytecode for {tag}")
    return Check(
        "patchkit", CheckState.WARNING, f"{detail}, with no bytecode for {tag}: every start compiles the modules "
        "it imports (0.1 to 0.2 s of CPU)",
        f"build patchkit.pyz with bytecode for this interpreter ({sys.executable}): build_pyz.py's --bytecode "
        "option, docs/containers.md",
    )


def check_interpreter() -> Check:
    version = ".".join(map(str, sys.version_info[:3]))
    flags = [name for name, on in (("-I", sys.flags.isolated), ("-S", sys.flags.no_site)) if on]
    detail = f"Python {version} ({sys.executable or 'unknown interpreter'})" + (
        f", run with {' '.join(flags)}" if flags else "")
    if sys.version_info[:2] < OLDEST_PYTHON:  # pragma: no cover - patchkit does not import on older ones
        return Check("interpreter", CheckState.PROBLEM, detail, "patchkit needs Python 3.10 or newer")
    return Check("interpreter", CheckState.OK, detail)


def check_registry(patches_dir: str | None) -> tuple[Check, bool]:
    """The registry's check, and whether the hook can be asked about it."""
    try:
        folder = find_locations(patches=patches_dir).patches
        check_registry_folder(folder)
        specs = load_registry(folder)
    except PatchkitError as exc:
        where = f"{exc.where}: " if exc.where else ""
        return Check("registry", CheckState.PROBLEM, where + exc.message, exc.hint), False
    shown = folder.absolute()
    pending = [s.id for s in specs if s.pending]
    strays = [p.name for p in stray_folders(folder)]
    if not specs:
        return Check("registry", CheckState.PROBLEM, f"{shown} holds no patches",
                     "`patchkit new ID --target NAME` creates one"), False
    detail = f"{shown}: {len(specs)} patch{'' if len(specs) == 1 else 'es'}"
    targets = sorted({s.target.name for s in specs})
    detail += f" for {', '.join(targets)}"
    if pending or strays:
        notes = ([f"pending (not vendored): {', '.join(pending)}"] if pending else []) + (
            [f"folders without manifest.toml: {', '.join(strays)}"] if strays else [])
        return Check("registry", CheckState.WARNING, f"{detail}; {'; '.join(notes)}",
                     "`patchkit lint --strict` lists what to fix"), True
    return Check("registry", CheckState.OK, detail), True


def mount_of(path: Path) -> tuple[str, str] | None:
    """(mount point, filesystem type) of the mount holding `path`, from /proc/self/mountinfo (Linux)."""
    try:
        rows = Path("/proc/self/mountinfo").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    best: tuple[str, str] | None = None
    text = str(path)
    for row in rows:
        left, _, right = row.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or not tail:
            continue
        point = fields[4].replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\")
        inside = text == point or text.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best[0])):
            best = (point, tail[0])
    return best


def check_root_tree(root: Root) -> Check:
    st = os.fstat(root.fd)
    owner = "you" if st.st_uid == os.geteuid() else f"uid {st.st_uid}"
    detail = f"{root.path}: a folder owned by {owner}"
    with contextlib.suppress(FileNotFoundError):
        os.stat(".git", dir_fd=root.fd, follow_symlinks=False)
        detail += ", a git checkout"
    if not os.access(".", os.W_OK, dir_fd=root.fd):
        return Check("root", CheckState.WARNING, f"{detail}; not writable by this user",
                     "status works; apply and revert need to write the tree (run them as its owner)")
    return Check("root", CheckState.OK, detail)


def check_lock(root: Root) -> Check:
    mount = mount_of(root.path)
    where = f"{mount[1]} filesystem mounted at {mount[0]}" if mount else "an unknown filesystem"
    # flock belongs to an open file description: the root's own, opened again relative to its descriptor
    fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=root.fd)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return Check("lock", CheckState.WARNING, f"flock works on {where}; a writer holds the root now",
                         "another patchkit apply or revert is running on this root")
        if exc.errno in LOCK_UNSUPPORTED:
            return Check("lock", CheckState.PROBLEM, f"{where} refuses flock ({exc.strerror})",
                         "patchkit cannot lock this root (exit 6): see docs/containers.md, \"Locking\"")
        raise _Problem(f"cannot lock {root.path}: {exc.strerror}") from None
    finally:
        os.close(fd)
    return Check("lock", CheckState.OK, f"flock works on {where}")


def check_state(root: Root) -> tuple[Check, bool]:
    """`.patchkit` as every command checks it (owner, mode, no link), and whether a transaction is pending."""
    shown = root.state_path
    try:
        state_fd = open_state_dir(root, create=False)
    except PatchkitError as exc:
        return Check("state", CheckState.PROBLEM, exc.message, exc.hint), False
    if state_fd is None:
        return Check("state", CheckState.OK, f"no {STATE_DIR} yet: the first apply creates it"), True
    try:
        st = os.fstat(state_fd)
        names = sorted(os.listdir(state_fd))
    finally:
        os.close(state_fd)
    detail = f"{shown}: trusted (owner uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):o})"
    records = [n for n in names if n.endswith(".json")]
    if records:
        detail += f", {len(records)} record{'' if len(records) == 1 else 's'}"
    if needs_recovery(root):
        return Check("state", CheckState.WARNING, f"{detail}; an interrupted {pending_label(root)} left a journal",
                     "the next patchkit command on this root rolls it back first (doctor writes nothing)"), False
    return Check("state", CheckState.OK, detail), True


def check_hook(root: Root, patches_dir: str | None, target: tuple[str, ...], shown_root: str) -> Check:
    """What `apply --all` would do on the root now: its dry run's answer."""
    patches = find_locations(patches=patches_dir).patches
    commands = invocation(shown_root, patches, Selection(None, target or None))
    try:
        specs = load_series(patches, target or None)
        series = run_series(specs, root, Action.APPLY, Options(dry_run=True, invocation=commands))
    except PatchkitError as exc:
        where = f"{exc.where}: " if exc.where else ""
        return Check("hook", CheckState.PROBLEM, f"apply --all would exit {int(exc.exit_code)}: {where}{exc.message}",
                     exc.hint)
    lines = series_lines(series, settings().verbose, commands)
    said = next((line.removeprefix("series: ") for line in lines if line.startswith("series: ")), lines[-1])
    command = commands.series_command("apply")
    if series.left:  # the first patch it refuses, and why: what the hook's log would show first
        said = f"{summary_line(series.left[0])}, so the whole series is refused"
    if series.exit_code is ExitCode.OK:
        return Check("hook", CheckState.OK, f"`{command}` would exit 0: {click.unstyle(said)}")
    return Check("hook", CheckState.PROBLEM, f"`{command}` would exit {int(series.exit_code)}: {click.unstyle(said)}",
                 f"`{commands.series_command('status')} -v` shows every hunk")


def run_checks(
    patches_dir: str | None, root: str | None, package: str | None, python: str | None, target: tuple[str, ...]
) -> list[Check]:
    checks = [check_patchkit(), check_interpreter()]
    registry, registry_ok = check_registry(patches_dir)
    checks.append(registry)
    skipped = "no --root (or PATCHKIT_ROOT, --root-from-package) given"
    if root is None and package is None:
        hint = "`patchkit doctor --root DIR` checks the engine tree too"
        return checks + [Check(name, CheckState.SKIPPED, skipped, hint) for name in ("root", "lock", "state", "hook")]
    try:
        chosen = choose_root(root, package, python)
        tree = open_root(Path(chosen))  # once, for every check below (tree.Root)
    except PatchkitError as exc:
        where = f"{exc.where}: " if exc.where else ""
        return checks + [Check("root", CheckState.PROBLEM, where + exc.message, exc.hint)] + [
            Check(name, CheckState.SKIPPED, "the root could not be checked") for name in ("lock", "state", "hook")]
    with tree:
        return checks + _tree_checks(tree, registry_ok, patches_dir, target, chosen)


def _tree_checks(
    tree: Root, registry_ok: bool, patches_dir: str | None, target: tuple[str, ...], shown: str
) -> list[Check]:
    checks: list[Check] = []
    for step in (check_root_tree, check_lock):
        try:
            checks.append(step(tree))
        except _Problem as exc:
            checks.append(Check(step.__name__.removeprefix("check_").replace("_tree", ""), CheckState.PROBLEM,
                                exc.detail, exc.hint))
    state, state_ok = check_state(tree)
    checks.append(state)
    if not (registry_ok and state_ok):
        why = "the registry has a problem" if not registry_ok else f"{STATE_DIR} must be settled first"
        checks.append(Check("hook", CheckState.SKIPPED, f"not asked: {why}"))
    else:
        checks.append(check_hook(tree, patches_dir, target, shown))
    return checks


def check_json(c: Check) -> dict[str, Any]:
    return {"check": c.check, "state": c.state.value, "detail": c.detail, "hint": c.hint}


_MARK = {CheckState.OK: "ok", CheckState.WARNING: "warning", CheckState.PROBLEM: "PROBLEM", CheckState.SKIPPED: "-"}


def check_lines(checks: list[Check]) -> list[str]:
    width = max(len(c.check) for c in checks)
    lines = []
    for c in checks:
        lines.append(f"{c.check.ljust(width)}  {_MARK[c.state]}: {show_path(c.detail)}")
        if c.hint and c.state in (CheckState.WARNING, CheckState.PROBLEM):
            lines.append(f"{' ' * width}  hint: {c.hint}")
    return lines


@click.command("doctor")
@patches_option
@click.option("--root", metavar="DIR", envvar="PATCHKIT_ROOT", show_envvar=True, type=FolderPath(),
              help="The engine tree to check (else only patchkit and the registry are).")
@click.option("--root-from-package", "package", metavar="NAME", envvar="PATCHKIT_ROOT_FROM_PACKAGE",
              show_envvar=True, help="Instead of --root: the install folder of Python distribution NAME.")
@click.option("--python", metavar="PATH", envvar="PATCHKIT_PYTHON", show_envvar=True,
              help="With --root-from-package: the engine's interpreter.")
@click.option("--target", metavar="NAME[,NAME]", envvar="PATCHKIT_TARGET", show_envvar=True, multiple=True,
              help="The hook's --target: only the patches of these engines.")
@json_option
def command(patches_dir: str | None, root: str | None, package: str | None, python: str | None,
            target: tuple[str, ...], as_json: bool) -> None:
    """Check what a run here would meet, in one report; writes nothing.

    patchkit and its interpreter, the registry, the engine root, whether its filesystem takes the lock
    (flock), whether .patchkit is trusted, and what the container hook would do (`apply --all`, as a dry
    run). Reads the same environment as the hook (PATCHKIT_ROOT, PATCHKIT_TARGET, ...). Writes nothing:
    no lock file, no state, no parse cache; an interrupted transaction is reported, not rolled back.

    Exit codes: 0 no problem (warnings allowed), 1 a problem found (the report says which and what to do),
    2 bad usage.

    \b
    Examples:
      patchkit doctor
      patchkit doctor --root /opt/ATOM --target ATOM
      PATCHKIT_ROOT=/opt/ATOM patchkit doctor --json
    """
    if root is not None and package is not None:
        choose_root(root, package, python)  # the usage error for both on the command line
    checks = run_checks(patches_dir, root, package, python, target)
    problems = sum(c.state is CheckState.PROBLEM for c in checks)
    code = ExitCode.REFUSED if problems else ExitCode.OK
    if as_json:
        echo(render_json(versioned({"healthy": not problems, "exit_code": int(code),
                                    "checks": [check_json(c) for c in checks]})))
    elif not (settings().quiet and not problems):
        for line in check_lines(checks):
            echo(line)
        warnings = sum(c.state is CheckState.WARNING for c in checks)
        echo(f"doctor: {problems or 'no'} problem{'' if problems == 1 else 's'}, "
             f"{warnings or 'no'} warning{'' if warnings == 1 else 's'}")
    click.get_current_context().exit(int(code))
