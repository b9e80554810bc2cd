"""`patchkit doctor` through the real CLI: what each check says, the exit code, that its hook answer is the real
`apply --all --dry-run`'s, that the hints it prints run as printed, and that it writes nothing anywhere."""

from __future__ import annotations

import errno
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Registry, cli, git_diff, write_tree
from tests.output_helpers import cli_env, command, run_plain
from tests.schema_check import SCHEMA, errors_of

# version_sensitive: doctor reports and checks the interpreter and its environment.
pytestmark = pytest.mark.version_sensitive

BEFORE = {"eng/a.py": b"one\ntwo\nthree\nfour\n", "eng/b.py": b"x\ny\nz\n"}
AFTER = {"eng/a.py": b"one\nTWO\nthree\nfour\n", "eng/b.py": b"x\nY\nz\n"}


def _snapshot(folder: Path) -> dict[str, tuple[int, bytes | None]]:
    """Every entry below folder with its mode and (for files) content: anything doctor wrote would show."""
    out: dict[str, tuple[int, bytes | None]] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            out[str(path.relative_to(folder))] = (st.st_mode, path.read_bytes() if path.is_file() else None)
    return out


def _rows(out: str) -> dict[str, str]:
    """check name -> the rest of its line."""
    rows = {}
    for line in out.splitlines():
        name, _, rest = line.partition("  ")
        if name and not name.startswith(" ") and rest:
            rows[name.strip()] = rest.strip()
    return rows


@pytest.fixture
def setup(tmp_path: Path, registry: Registry) -> tuple[Registry, Path]:
    registry.add("p", git_diff(tmp_path, BEFORE, AFTER))
    engine = tmp_path / "engine"
    write_tree(engine, BEFORE)
    return registry, engine


def test_without_a_root_it_checks_patchkit_and_the_registry(setup: tuple[Registry, Path]) -> None:
    registry, _ = setup
    res = cli("doctor", "--patches", registry.path)
    assert res.code == 0, res.out + res.err
    rows = _rows(res.out)
    assert rows["registry"] == f"ok: {registry.path}: 1 patch for engine"
    assert rows["patchkit"].startswith("ok: patchkit ") and rows["interpreter"].startswith("ok: Python 3.")
    assert rows["hook"].startswith("-: no --root"), rows
    assert res.out.splitlines()[-1] == "doctor: no problems, no warnings"
    # the same install folder as --version names (the package, not one of its subfolders)
    version = run_plain(command("--version"), cli_env()).out.splitlines()[2]
    assert rows["patchkit"].endswith(version), (rows["patchkit"], version)


def test_the_hook_answer_is_the_dry_runs_and_nothing_is_written(setup: tuple[Registry, Path], tmp_path: Path) -> None:
    registry, engine = setup
    env = cli_env(PATCHKIT_ROOT=str(engine), PATCHKIT_PATCHES=str(registry.path))
    home = tmp_path / "home"
    home.mkdir()
    env["HOME"] = str(home)
    before = (_snapshot(engine), _snapshot(registry.path), _snapshot(home))
    res = run_plain(command("doctor"), env)
    assert res.code == 0, res.out + res.err
    rows = _rows(res.out)
    hook = f"patchkit apply --all --patches {registry.path} --root {engine}"
    assert rows["hook"] == f"ok: `{hook}` would exit 0: dry run, nothing written: the only patch would end " \
        "applied; would write 2 files", rows
    assert rows["state"] == "ok: no .patchkit yet: the first apply creates it"
    assert rows["lock"].startswith("ok: flock works on ")
    assert (_snapshot(engine), _snapshot(registry.path), _snapshot(home)) == before
    dry = run_plain(command(*shlex.split(hook)[1:], "--dry-run"), env)
    assert dry.code == 0 and "would write 2 files" in dry.out
    # once applied, the hook is a no-op and doctor reads the state folder (trusted) without touching it
    assert cli("apply", "p", "--root", engine, "--patches", registry.path).code == 0
    applied = _snapshot(engine)
    again = _rows(run_plain(command("doctor"), env).out)
    assert again["hook"].endswith("would exit 0: the only patch is already applied (nothing written)"), again
    assert again["state"].startswith(f"ok: {engine}/.patchkit: trusted (owner uid {os.geteuid()}, mode "), again
    assert _snapshot(engine) == applied


def test_a_conflicting_tree_is_a_problem_whose_hint_runs(setup: tuple[Registry, Path], tmp_path: Path) -> None:
    registry, engine = setup
    shim = tmp_path / "bin"  # a `patchkit` on PATH that runs this checkout, as an installed one would
    shim.mkdir()
    (shim / "patchkit").write_text(f'#!/bin/sh\nexec {sys.executable} -m patchkit "$@"\n')
    (shim / "patchkit").chmod(0o755)
    env = cli_env()
    env["PATH"] = f"{shim}{os.pathsep}{env.get('PATH', '')}"
    write_tree(engine, {"eng/b.py": b"x\nsomething else\nz\n"})
    res = run_plain(command("doctor", "--root", engine, "--patches", registry.path), cli_env())
    assert res.code == 1, res.out + res.err
    rows = _rows(res.out)
    assert rows["hook"].startswith("PROBLEM: `patchkit apply --all --patches ") and "would exit 1: p: refused: " in \
        rows["hook"], rows
    hint = next(line for line in res.out.splitlines() if "hint: `patchkit status --all" in line)
    printed = hint.split("`")[1]
    ran = subprocess.run(printed, shell=True, cwd="/", capture_output=True, env=env, check=False)
    assert ran.returncode == 5 and b"conflict" in ran.stdout, ran  # the per-hunk table of the conflict
    assert res.out.splitlines()[-1] == "doctor: 1 problem, no warnings"


def test_a_missing_registry_and_a_missing_root_are_problems(tmp_path: Path) -> None:
    res = cli("doctor", "--patches", tmp_path / "nowhere", "--root", tmp_path / "gone")
    assert res.code == 1
    rows = _rows(res.out)
    assert rows["registry"].startswith(f"PROBLEM: {tmp_path / 'nowhere'}: ") and "does not exist" in rows["registry"]
    assert rows["root"] == f"PROBLEM: {tmp_path / 'gone'}: the engine root does not exist", rows
    assert rows["hook"].startswith("-: "), rows


def test_state_another_user_could_write_is_a_problem_and_the_hook_is_not_asked(setup: tuple[Registry, Path]) -> None:
    registry, engine = setup
    assert cli("apply", "p", "--root", engine, "--patches", registry.path).code == 0
    (engine / ".patchkit").chmod(0o777)
    try:
        res = cli("doctor", "--root", engine, "--patches", registry.path)
        assert res.code == 1
        rows = _rows(res.out)
        assert rows["state"].startswith("PROBLEM: the state folder is writable by group or others (mode 0777)"), rows
        assert rows["hook"] == "-: not asked: .patchkit must be settled first", rows
    finally:
        (engine / ".patchkit").chmod(0o755)


def test_an_interrupted_transaction_is_reported_not_rolled_back(setup: tuple[Registry, Path]) -> None:
    registry, engine = setup
    assert cli("apply", "p", "--root", engine, "--patches", registry.path).code == 0
    journal = engine / ".patchkit" / "journal.json"
    journal.write_bytes(b"{}")
    journal.chmod(0o644)
    res = cli("doctor", "--root", engine, "--patches", registry.path)
    assert res.code == 0, res.out  # a warning: the next command rolls it back
    rows = _rows(res.out)
    assert "left a journal" in rows["state"] and rows["state"].startswith("warning: "), rows
    assert rows["hook"].startswith("-: not asked"), rows
    assert journal.read_bytes() == b"{}"


def test_a_filesystem_without_flock_is_a_problem(setup: tuple[Registry, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    import fcntl

    registry, engine = setup

    def no_flock(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(fcntl, "flock", no_flock)
    res = cli("doctor", "--root", engine, "--patches", registry.path)
    assert res.code == 1
    rows = _rows(res.out)
    assert rows["lock"].startswith("PROBLEM: ") and "refuses flock (No locks available)" in rows["lock"], rows
    assert "docs/containers.md" in res.out


def test_doctor_json_is_the_schemas_and_its_exit_code(setup: tuple[Registry, Path]) -> None:
    registry, engine = setup
    write_tree(engine, {"eng/b.py": b"x\nsomething else\nz\n"})
    res = cli("doctor", "--root", engine, "--patches", registry.path, "--json")
    assert res.code == 1
    doc = res.json()
    assert errors_of(doc, SCHEMA["$defs"]["doctor"]) == [] and errors_of(doc, SCHEMA) == []
    assert doc["healthy"] is False and doc["exit_code"] == 1
    assert [c["check"] for c in doc["checks"]] == ["patchkit", "interpreter", "registry", "root", "lock", "state",
                                                   "hook"]
    assert {c["check"]: c["state"] for c in doc["checks"]}["hook"] == "problem"


def test_root_and_root_from_package_together_is_a_usage_error(setup: tuple[Registry, Path]) -> None:
    registry, engine = setup
    res = cli("doctor", "--root", engine, "--root-from-package", "x", "--patches", registry.path)
    assert res.code == 2 and "exclude each other" in res.err
