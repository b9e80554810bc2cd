"""Issue 27: every message tells the truth and the next step, through the real CLI.

Each test reads the words a user sees (not only the exit code). The hints are run exactly as printed, by a
shell, from another folder than the run that printed them: every suggested command must work there.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import FileSpec, Registry, cli, git_diff, read_tree, write_tree
from tests.output_helpers import REPO, Run, cli_env, command, run_plain

LINES = b"".join(b"line %d\n" % i for i in range(1, 31))
BASE: dict[str, FileSpec] = {"pkg/a.py": LINES, "pkg/b.py": LINES}
FIXED: dict[str, FileSpec] = {
    "pkg/a.py": LINES.replace(b"line 5\n", b"line five\n").replace(b"line 25\n", b"line twenty-five\n"),
    "pkg/b.py": LINES.replace(b"line 10\n", b"line ten\n"),
}
COMMAND = re.compile(r"`(patchkit [^`]+)`")
DIST = "patchkit-engine"  # the distribution that installs patchkit (pyproject.toml)




def run_in(cwd: Path, env: dict[str, str], *args: str | Path) -> Run:
    done = subprocess.run(command(*args), env=env, cwd=cwd, capture_output=True, check=False, timeout=120,
                          stdin=subprocess.DEVNULL)
    return Run(done.returncode, done.stdout.decode(), done.stderr.decode())


def hints(text: str) -> list[str]:
    return COMMAND.findall(text)


def paste(hint: str, env: dict[str, str], cwd: Path) -> Run:
    """A hint run as a user pastes it: by a shell, in another folder."""
    done = subprocess.run(["/bin/sh", "-c", hint], env=env, cwd=cwd, capture_output=True, check=False,
                          timeout=120, stdin=subprocess.DEVNULL)
    return Run(done.returncode, done.stdout.decode(), done.stderr.decode())


@pytest.fixture
def work(tmp_path: Path, registry: Registry) -> Path:
    """A folder holding `patches/` (one patch `p`) and an engine tree `engine/` at its base: runs from here
    name them by relative paths, as a user in that folder does."""
    registry.add("p", git_diff(tmp_path, BASE, FIXED))
    write_tree(tmp_path / "engine", BASE)
    return tmp_path


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    folder = tmp_path / "somewhere" / "else"
    folder.mkdir(parents=True)
    return folder


# ------------------------------------------------------------------------------------ 2, 3: pasted hints


def test_a_partial_refusals_hints_run_as_printed_from_another_folder(
    work: Path, elsewhere: Path, shim: dict[str, str]
) -> None:
    assert run_in(work, shim, "apply", "p", "--root", "engine", "--patches", "patches").code == 0
    write_tree(work / "engine", {"pkg/b.py": LINES})  # restored by a reinstall: the tree is partial
    refused = run_in(work, shim, "apply", "p", "--root", "engine", "--patches", "patches")
    assert refused.code == 1, refused.err
    printed = hints(refused.out)
    engine, patches = work / "engine", work / "patches"
    common = f"--patches {patches} --root {engine}"
    assert f"patchkit apply p {common} --complete" in printed
    assert f"patchkit revert p {common} --complete" in printed
    assert f"patchkit status p {common} -v" in printed
    table = paste(f"patchkit status p {common} -v", shim, elsewhere)
    assert table.code == 4 and "unapplied  pkg/b.py" in table.out, table.err
    # Item 3: the record says patchkit applied it; the note says what apply really does and what works.
    note = next(line for line in table.out.splitlines() if "the record says patchkit applied it" in line)
    assert "no longer has all of it" in note and "`apply` refuses a partially patched tree" in note
    assert "applies it again" not in note
    assert hints(note) == [f"patchkit apply p {common} --complete"]
    done = paste(hints(note)[0], shim, elsewhere)
    assert done.code == 0 and "applied" in done.out, done.err
    assert read_tree(engine) == {k: (v, False) for k, v in FIXED.items() if isinstance(v, bytes)}


def test_a_conflict_and_series_hints_run_as_printed(work: Path, elsewhere: Path, shim: dict[str, str]) -> None:
    write_tree(work / "engine", {"pkg/a.py": LINES.replace(b"line 4\n", b"\n")})  # a blank line: drifted
    refused = run_in(work, shim, "apply", "--all", "--root", "engine", "--patches", "patches")
    assert refused.code == 1
    printed = hints(refused.out)
    engine, patches = work / "engine", work / "patches"
    assert printed == [
        f"patchkit apply --all --patches {patches} --root {engine} --keep-going",
        f"patchkit status p --patches {patches} --root {engine} -v",
    ], refused.out
    assert paste(printed[0], shim, elsewhere).code == 1  # runs (and refuses the one conflicting patch)
    table = paste(printed[1], shim, elsewhere)
    assert table.code == 5 and "conflict   pkg/a.py" in table.out
    # A conflict reason says it once (the hunk line), and a blank line is named as one.
    single = run_in(work, shim, "apply", "p", "--root", "engine", "--patches", "patches").out
    assert "the file has a blank line" in single and "the file has ''" not in single
    assert single.count("the diff expects 'line 4'") == 1, single
    assert "some hunks match neither the old nor the new content; the tree has drifted\n" in single


def test_an_outside_patched_trees_revert_hints_run_as_printed(
    tmp_path: Path, work: Path, elsewhere: Path, shim: dict[str, str]
) -> None:
    write_tree(work / "engine", FIXED)  # patched by a script: no record
    refused = run_in(work, shim, "revert", "p", "--root", "engine", "--patches", "patches")
    assert refused.code == 1
    engine, patches = work / "engine", work / "patches"
    adopt, force = f"patchkit apply p --patches {patches} --root {engine} --adopt", \
        f"patchkit revert p --patches {patches} --root {engine} --force"
    assert adopt in hints(refused.out) and force in hints(refused.out)
    adopted = paste(adopt, shim, elsewhere)
    assert adopted.code == 0 and "adopted" in adopted.out, adopted.err


def test_a_root_from_package_run_hints_with_the_same_options(
    tmp_path: Path, registry: Registry, elsewhere: Path, shim: dict[str, str]
) -> None:
    # The tree is the install folder of a distribution of this interpreter's environment: patchkit itself,
    # looked up with --python given as a path relative to the folder the run starts in. Only readers run on it.
    found = subprocess.run([sys.executable, "-c", f"import importlib.metadata as m; m.distribution('{DIST}')"],
                           capture_output=True, check=False)
    if found.returncode != 0:
        pytest.skip("patchkit is not installed in this interpreter's environment (run from PYTHONPATH alone)")
    interpreter = Path(sys.executable)
    before = {"patchkit/__init__.py": b"this is not the file the diff expects\n"}
    registry.add("q", git_diff(tmp_path, before, {"patchkit/__init__.py": b"changed\n"}))
    run = run_in(interpreter.parent, shim, "apply", "q", "--dry-run", "--root-from-package", DIST,
                 "--python", f"./{interpreter.name}", "--patches", registry.path)
    assert run.code == 1, run.err  # --dry-run: a reader, it creates nothing in the checkout
    wanted = (f"patchkit status q --patches {registry.path} --root-from-package {DIST} "
              f"--python {interpreter} -v")
    assert hints(run.out) == [wanted], run.out
    again = paste(wanted, shim, elsewhere)
    assert again.code == 5 and "conflict" in again.out, again.err


def test_the_demo_hints_carry_its_registry() -> None:
    out = cli("demo").out
    every = [h for h in hints(out) if h.startswith("patchkit status demo-pr2106")]
    assert every and all("--patches /" in h and "--root /" in h for h in every), out


# ------------------------------------------------------------------------------ 1, 7: the registry folder


@pytest.mark.parametrize("action", ["status", "apply", "revert"])
def test_a_missing_registry_says_the_folder_does_not_exist(
    tmp_path: Path, action: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # a folder with no patches/ in it: the wrong working folder
    write_tree(tmp_path / "engine", BASE)
    res = cli(action, "demo-pr2106", "--root", "engine")
    assert res.code == 2
    assert f"patchkit: error: {tmp_path / 'patches'}: the patches folder does not exist" in res.err
    assert "pass --patches DIR" in res.err and "known patches: none" not in res.err
    (tmp_path / "afile").write_text("x")
    res = cli(action, "demo-pr2106", "--root", "engine", "--patches", "afile")
    assert res.code == 2 and f"{tmp_path / 'afile'}: the patches folder is a file, not a folder" in res.err
    res = cli(action, "--all", "--root", "engine")
    assert res.code == 2 and "the patches folder does not exist" in res.err


def test_vendor_and_list_on_a_missing_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.diff").write_bytes(git_diff(tmp_path, BASE, FIXED))
    res = cli("vendor", "p", "--from", "x.diff")
    assert res.code == 2 and f"{tmp_path / 'patches'}: the patches folder does not exist" in res.err
    res = cli("list", "--patches", "x.diff")
    assert res.code == 2 and "the patches folder is a file, not a folder" in res.err


def test_a_folder_without_manifest_is_warned_of_and_an_empty_registry_says_so(
    registry: Registry, work: Path
) -> None:
    (registry.path / "half-made").mkdir()
    (registry.path / ".git").mkdir()  # hidden: not looked at
    res = cli("list", "--patches", registry.path)
    assert res.code == 0 and res.out.startswith("p: ")
    assert res.err == (f"patchkit: warning: {registry.path / 'half-made'}: no manifest.toml, so it is not a "
                       "patch; skipped\n")
    series = cli("status", "--all", "--root", work / "engine", "--patches", registry.path)
    assert series.code == 3 and "half-made: no manifest.toml" in series.err
    named = cli("status", "half-made", "--root", work / "engine", "--patches", registry.path)
    assert named.code == 2 and "the folder of patch 'half-made' has no manifest.toml" in named.err
    assert cli("list", "--patches", registry.path, "-q").err == ""
    empty = work / "empty"
    empty.mkdir()
    res = cli("list", "--patches", empty)
    assert res.code == 0 and res.out == ""
    assert f"patchkit: note: the registry {empty} holds no patches" in res.err
    assert f"`patchkit new ID --patches {empty} --target NAME` creates one" in res.err


# --------------------------------------------------------------------------------------- 4, 5: the diff


def test_a_mistyped_pinned_diff_is_missing_not_pending(registry: Registry, work: Path) -> None:
    manifest = registry.path / "p" / "manifest.toml"
    manifest.write_text(manifest.read_text().replace('diff = "change.diff"', 'diff = "chnage.diff"'))
    res = cli("status", "p", "--root", work / "engine", "--patches", registry.path)
    assert res.code == 2
    assert "pending" not in res.err
    assert f"{manifest}:3: the diff chnage.diff is not in the patch folder, but the manifest pins its sha256" \
        in res.err
    assert "did you mean 'change.diff'?" in res.err and 'fix the manifest\'s diff = "change.diff"' in res.err
    assert "[pending" not in cli("list", "--patches", registry.path).out


@pytest.mark.parametrize(("content", "error"), [
    (b"<!DOCTYPE html>\n<html><body>Sign in to GitHub</body></html>\n", "this is an HTML page, not a diff"),
    (b"", "the diff is empty"),
    (None, "the diff's own header lines end in CRLF"),
])
def test_an_unpinned_file_that_is_no_diff_is_reported_before_its_pin(
    tmp_path: Path, registry: Registry, work: Path, content: bytes | None, error: str
) -> None:
    diff = git_diff(tmp_path, BASE, FIXED)
    folder = registry.add("u", diff)
    manifest = folder / "manifest.toml"
    manifest.write_text(re.sub(r'(?m)^sha256 = ".*"\n', "", manifest.read_text()))
    res = cli("status", "u", "--root", work / "engine", "--patches", registry.path)
    assert res.code == 2 and "no sha256 recorded for change.diff" in res.err  # a real diff: pin it
    (folder / "change.diff").write_bytes(diff.replace(b"\n", b"\r\n") if content is None else content)
    res = cli("status", "u", "--root", work / "engine", "--patches", registry.path)
    assert res.code == 2 and error in res.err and "sha256" not in res.err, res.err


# ----------------------------------------------------------------------------------- 6: output errors


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_stdout_is_an_output_error_not_a_bug(work: Path, registry: Registry) -> None:
    args = command("status", "p", "--root", work / "engine", "--patches", registry.path)
    with open("/dev/full", "w") as full:
        done = subprocess.run(args, env=cli_env(), stdout=full, stderr=subprocess.PIPE, check=False, timeout=60)
    err = done.stderr.decode()
    assert done.returncode == 11, err
    assert err.startswith("patchkit: error: cannot write to stdout: No space left on device\n  hint: ")
    assert "internal error" not in err
    # stderr full as well: nothing can be said, the code still says what happened
    with open("/dev/full", "w") as full:
        done = subprocess.run(args, env=cli_env(), stdout=full, stderr=full, check=False, timeout=60)
    assert done.returncode == 11
    bad = command("status", "nope", "--root", work / "engine", "--patches", registry.path)
    with open("/dev/full", "w") as full:
        done = subprocess.run(bad, env=cli_env(), stdout=subprocess.PIPE, stderr=full, check=False, timeout=60)
    assert done.returncode == 2  # the error's own code: its message was lost, not the verdict


def test_an_eio_on_stdout_is_an_output_error(work: Path, registry: Registry) -> None:
    # stdout a terminal that went away (its master side closed): every write fails with EIO.
    import pty

    master, slave = pty.openpty()
    os.close(master)
    try:
        done = subprocess.run(command("status", "p", "--root", work / "engine", "--patches", registry.path),
                              env=cli_env(), stdout=slave, stderr=subprocess.PIPE, check=False, timeout=60)
    finally:
        os.close(slave)
    err = done.stderr.decode()
    assert done.returncode == 11, err
    assert err.startswith("patchkit: error: cannot write to stdout: Input/output error\n"), err


# -------------------------------------------------------------------------------------- 8: the lock


@pytest.fixture
def foreign_lock(work: Path) -> Iterator[int]:
    """The root's lock file flocked by a process that is not patchkit; its pid."""
    state = work / "engine" / ".patchkit"
    state.mkdir()
    (state / "lock").write_bytes(b"")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR); "
         "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(120)", str(state / "lock")],
        stdout=subprocess.PIPE,
    )
    assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
    try:
        yield holder.pid
    finally:
        holder.kill()
        holder.wait()


def test_a_lock_held_by_another_program_names_its_pid(work: Path, registry: Registry, foreign_lock: int) -> None:
    res = cli("apply", "p", "--root", work / "engine", "--patches", registry.path, "--lock-timeout", "0.3")
    assert res.code == 6
    assert f"a process (pid {foreign_lock}) has held the lock for over 0.3s" in res.err
    assert "another patchkit process" not in res.err


def test_a_stale_holder_name_is_not_taken_for_the_holder(work: Path, registry: Registry, foreign_lock: int) -> None:
    # The lock file names a live process (this one) that does not hold the lock.
    (work / "engine" / ".patchkit" / "lock").write_bytes(b"pid=%d since=2026-01-01T00:00:00Z\n" % os.getpid())
    res = cli("apply", "p", "--root", work / "engine", "--patches", registry.path, "--lock-timeout", "0.3")
    assert res.code == 6 and f"a process (pid {foreign_lock})" in res.err, res.err


# ------------------------------------------------------------------------------------------ 9: SIGTERM


def test_sigterm_before_the_write_phase_says_nothing_was_written(
    work: Path, registry: Registry, foreign_lock: int
) -> None:
    engine = work / "engine"
    proc = subprocess.Popen(command("apply", "p", "--root", engine, "--patches", registry.path),
                            env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lock = str(engine / ".patchkit" / "lock")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # waiting for the lock: it has opened the lock file
        fds = Path(f"/proc/{proc.pid}/fd")
        try:
            if any(os.readlink(fd) == lock for fd in fds.iterdir()):
                break
        except OSError:
            pass
        time.sleep(0.05)
    else:
        raise AssertionError("patchkit never opened the lock file")
    time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert err.decode() == "patchkit: terminated (SIGTERM); stopped before the write phase: nothing was written\n"
    assert read_tree(engine) == {k: (v, False) for k, v in BASE.items() if isinstance(v, bytes)}


# ------------------------------------------------------------------------------------- 10: the smaller


def test_no_stray_colour_reset_after_an_uncoloured_word(
    tmp_path: Path, registry: Registry, work: Path, shim: dict[str, str]
) -> None:
    res = run_in(work, shim, "--color", "always", "status", "p", "--root", "engine", "--patches", "patches", "-v")
    line = next(x for x in res.out.splitlines() if "base unknown" in x)
    assert "base unknown (" in line and "unknown\x1b[0m" not in line, repr(line)


@pytest.mark.parametrize(("args", "message"), [
    (["--json", "list"], "no such option --json before the command name; --json is an option of apply, doctor, "
     "list, new, revert, show, status, vendor: give it after the command, e.g. `patchkit list --json`"),
    (["status", "--dryrun", "p"], "no such option --dryrun for status; --dry-run is an option of apply, revert, "
     "vendor, not of status"),
    (["apply", "--dryrun", "p"], "no such option --dryrun; did you mean --dry-run?"),
])
def test_usage_errors_speak_as_every_other_error(args: list[str], message: str) -> None:
    res = run_plain(command(*args), cli_env())
    assert res.code == 2
    words = [a for a in args if not a.startswith("-")][:1]
    command_path = " ".join(["patchkit", *words]) if args[0] != "--json" else "patchkit"
    assert res.err.splitlines() == [
        f"patchkit: error: {message}",
        f"  usage: {command_path} [OPTIONS] " + ("COMMAND [ARGS]..." if command_path == "patchkit" else "[PATCH]"),
        f"  hint: see `{command_path} --help`",
    ]
    assert "Error:" not in res.err and "Did you mean" not in res.err and "--version" not in res.err


def test_status_without_a_patch_lists_the_ids(registry: Registry, work: Path) -> None:
    registry.add("other", b"")
    res = cli("status", "--root", work / "engine", "--patches", registry.path)
    assert res.code == 2
    assert res.err.splitlines()[0] == (f"patchkit: error: which patch? give PATCH or --all; known patches in "
                                       f"{registry.path}: other, p")


@pytest.mark.parametrize("name", ["", "status", "apply", "revert", "list", "demo", "lint", "vendor", "new"])
def test_help_is_never_cut_and_fits_80_columns(name: str) -> None:
    env = {**cli_env(), "COLUMNS": "80"}
    out = run_plain(command(*([name] if name else []), "--help"), env).out
    assert out and max(len(line) for line in out.splitlines()) <= 80, out
    commands = out.split("Commands:\n")[1] if "Commands:\n" in out else ""
    assert "..." not in commands, commands
    verbose = " ".join(out.split("-v, --verbose")[1].split("--color")[0].split())
    if name in ("status", "apply", "revert"):
        assert "per-hunk table" in verbose
    elif name:
        assert "per-hunk" not in verbose and verbose == "More detail: the traceback of an internal error.", verbose


def test_an_offline_vendor_from_url_suggests_a_file(registry: Registry, work: Path) -> None:
    url = "https://patchkit-test.invalid/pull/7.diff"  # .invalid never resolves (RFC 2606)
    res = cli("vendor", "p", "--patches", registry.path, "--from", url, "--timeout", "5")
    assert res.code == 2
    assert "cannot resolve the host patchkit-test.invalid" in res.err and "Errno" not in res.err
    assert f"`curl -fL -o 7.diff {url}`" in res.err and "--from 7.diff" in res.err


def test_quiet_quiets_new_vendor_and_demo(tmp_path: Path, registry: Registry) -> None:
    (tmp_path / "x.diff").write_bytes(git_diff(tmp_path, BASE, FIXED))
    made = cli("new", "n1", "--target", "engine", "--patches", registry.path, "--local", "ours", "-q")
    assert (made.code, made.out, made.err) == (0, "", "")
    vendored = cli("vendor", "n1", "--patches", registry.path, "--from", tmp_path / "x.diff", "-q")
    assert (vendored.code, vendored.out, vendored.err) == (0, "", "")
    assert "sha256" in (registry.path / "n1" / "manifest.toml").read_text()
    both = cli("new", "n2", "--target", "engine", "--patches", registry.path, "--local", "ours",
               "--from", tmp_path / "x.diff", "-q")
    assert (both.code, both.out, both.err) == (0, "", "")
    assert "created" in cli("new", "n3", "--target", "engine", "--patches", registry.path, "--local", "x").out
    demo = cli("demo", "-q")
    assert (demo.code, demo.out, demo.err) == (0, "", "")


def test_the_readme_states_the_suites_measured_duration() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "about 2 minutes" not in readme
    assert re.search(r"measured with `time [^`]*pytest[^`]*`.*\d+ min \d+ s wall", readme, re.S), \
        "the README gives the measured figure and how"


def test_output_md_lists_every_message_class_with_its_exit_code() -> None:
    from patchkit.errors import ExitCode

    text = (REPO / "docs" / "output.md").read_text(encoding="utf-8")
    table = text.split("## Messages")[1].split("\n## ")[0]
    rows = [line.split(" | ") for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    classes = {row[0].strip("| ") for row in rows}
    assert {"refusal", "bad input", "usage error", "lock", "internal error", "output error", "interrupted",
            "warning", "note"} <= classes, classes
    documented = {int(code) for row in rows for code in re.findall(r"\b\d+\b", row[2])}
    assert {int(c) for c in ExitCode} <= documented, documented
    assert all(len(row) == 4 and row[3].strip("| ") for row in rows), "every class has an example"
