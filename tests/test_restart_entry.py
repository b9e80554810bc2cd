"""The restart entry (patchkit.cli.restart): the program answers a restart before click loads, byte for byte as
the full judgement (PATCHKIT_NO_FASTPATH=1) answers it, and falls through to the full CLI for anything else.

Every run is the real program (`python -m patchkit`) in a fresh interpreter, from a folder with no
pyproject.toml above it; whether the entry answered is read from the modules the run loaded (`-X importtime`:
click is imported by the full CLI, never by the entry).
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from patchkit.run.fastpath import add_block  # setup only: a record sealed as patchkit seals one
from tests.conftest import FileSpec, Registry, cli, git, git_diff, write_tree

pytestmark = pytest.mark.version_sensitive  # the records' code fingerprint hashes sys.version


def lines(name: str, count: int) -> bytes:
    return b"".join(b"%s = compute_%s(%d)\n" % (name.encode(), name.encode(), i) for i in range(count))


BASE: dict[str, FileSpec] = {
    "eng/core.py": lines("core", 40), "eng/solo.py": lines("solo", 12), "eng/skip.py": lines("skip", 5),
    "eng/tool.sh": b"#!/bin/sh\necho one\n",
}
WITH_A: dict[str, FileSpec] = {
    **BASE, "eng/core.py": lines("core", 40).replace(b"(5)", b"(5, a=1)"),
    "eng/skip.py": lines("skip", 5).replace(b"(2)", b"(2, never)"), "eng/tool.sh": (b"#!/bin/sh\necho one\n", True),
}
WITH_AB: dict[str, FileSpec] = {
    **WITH_A, "eng/core.py": lines("core", 40).replace(b"(5)", b"(5, a=1)").replace(b"(30)", b"(30, b=2)"),
    "eng/solo.py": lines("solo", 12).replace(b"(3)", b"(3, b=2)"),
}
SKIP = {"eng/skip.py": "rewritten upstream: not ported"}


def program(cwd: Path, *args: str | Path, env: Mapping[str, str] | None = None,
            importtime: bool = False) -> tuple[int, bytes, bytes]:
    """Exit code, stdout and stderr of `python -m patchkit ARGS` run from `cwd`, in a clean environment."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PATCHKIT_", "FORCE_COLOR", "CLICOLOR"))}
    command = [sys.executable, *(["-X", "importtime"] if importtime else []), "-m", "patchkit", *map(str, args)]
    done = subprocess.run(command, cwd=cwd, env={**clean, **(env or {})}, capture_output=True, check=False)
    return done.returncode, done.stdout, done.stderr


def answered(cwd: Path, *args: str | Path, env: Mapping[str, str] | None = None) -> bool:
    """Whether the program answered from the restart entry: it never imported click."""
    _, _, err = program(cwd, *args, env=env, importtime=True)
    imported = {line.split("|")[-1].strip() for line in err.decode().splitlines() if line.startswith("import time:")}
    assert "patchkit.cli.start" in imported, err.decode()[-2000:]
    return "click" not in imported


def same_bytes(cwd: Path, *args: str | Path, env: Mapping[str, str] | None = None) -> tuple[int, bytes, bytes]:
    """The program's answer, which must be the full judgement's to the byte (exit code, stdout, stderr)."""
    fast = program(cwd, *args, env=env)
    full = program(cwd, *args, env={**(env or {}), "PATCHKIT_NO_FASTPATH": "1"})
    assert fast == full, (fast, full)
    return fast


@pytest.fixture
def single(tmp_path: Path, registry: Registry, engine: Path) -> Path:
    """pa applied on its own (one exclude, one mode change)."""
    write_tree(engine, BASE)
    registry.add("pa", git_diff(tmp_path, BASE, WITH_A), exclude=SKIP)
    assert cli("apply", "pa", "--root", engine, "--patches", registry.path).code == 0
    return engine


@pytest.fixture
def series(tmp_path: Path, registry: Registry, engine: Path) -> Path:
    """pa then pb (after = ["pa"]), applied by `apply --all`."""
    write_tree(engine, BASE)
    registry.add("pa", git_diff(tmp_path, BASE, WITH_A), exclude=SKIP)
    registry.add("pb", git_diff(tmp_path, WITH_A, WITH_AB), extra='after = ["pa"]')
    assert cli("apply", "--all", "--root", engine, "--patches", registry.path).code == 0
    return engine


MODES = [[], ["-q"], ["--json"], ["--quiet", "--json"]]


@pytest.mark.parametrize("mode", MODES, ids=["text", "-q", "--json", "--quiet --json"])
def test_apply_id_is_answered_before_click_byte_for_byte(single: Path, registry: Registry, work: Path,
                                                         mode: list[str]) -> None:
    args = ("apply", "pa", *mode, "--root", single, "--patches", registry.path)
    code, out, err = same_bytes(work, *args)
    assert code == 0 and err == b""
    assert answered(work, *args)
    if "--json" in mode:
        assert json.loads(out)["result"] == "already-applied"
    else:
        assert out == (b"" if "-q" in mode else b"pa: already applied, nothing written\n")


@pytest.mark.parametrize("mode", MODES, ids=["text", "-q", "--json", "--quiet --json"])
def test_apply_all_is_answered_before_click_byte_for_byte(series: Path, registry: Registry, work: Path,
                                                          mode: list[str]) -> None:
    args = ("apply", "--all", *mode, "--root", series, "--patches", registry.path)
    code, out, err = same_bytes(work, *args)
    assert code == 0 and err == b""
    assert answered(work, *args)
    if "--json" in mode:
        assert [p["patch"] for p in json.loads(out)["patches"]] == ["pa", "pb"]


@pytest.mark.parametrize("mode", [[], ["--json"]], ids=["text", "--json"])
def test_a_series_of_one_reads_alike(single: Path, registry: Registry, work: Path, mode: list[str]) -> None:
    """`apply --all` on a registry of the one patch applied alone: its record names that series of one."""
    args = ("apply", "--all", *mode, "--root", single, "--patches", registry.path)
    code, out, _ = same_bytes(work, *args)
    assert code == 0 and answered(work, *args)
    if not mode:
        assert out.endswith(b"series: the only patch is already applied (nothing written)\n")


@pytest.mark.parametrize("env", [{"NO_COLOR": "1"}, {"TERM": "dumb"}, {"LANG": "C", "LC_ALL": "C"}],
                         ids=["NO_COLOR", "TERM=dumb", "C locale"])
@pytest.mark.parametrize("mode", [[], ["--json"]], ids=["text", "--json"])
def test_colourless_environments_read_alike(series: Path, registry: Registry, work: Path, env: dict[str, str],
                                            mode: list[str]) -> None:
    args = ("apply", "--all", *mode, "--root", series, "--patches", registry.path)
    assert same_bytes(work, *args, env=env)[0] == 0
    assert answered(work, *args, env=env)


def test_the_root_and_registry_may_come_from_the_environment_or_relative(
    single: Path, registry: Registry, work: Path
) -> None:
    env = {"PATCHKIT_ROOT": str(single), "PATCHKIT_PATCHES": str(registry.path)}
    for args, extra in (((), env), ((f"--root={os.path.relpath(single, work)}/", f"--patches={registry.path}"), {})):
        for mode in ([], ["--json"]):
            assert same_bytes(work, "apply", "pa", *mode, *args, env=extra)[0] == 0
            assert answered(work, "apply", "pa", *mode, *args, env=extra)


@pytest.mark.parametrize("extra, env", [
    (["-v"], {}), (["--strict-base"], {}), (["--dry-run"], {}), (["--color", "never"], {}),
    (["--lock-timeout", "5"], {}), (["--", "pa"], {}), ([], {"FORCE_COLOR": "1"}),
    ([], {"PATCHKIT_DEBUG_FASTPATH": "1"}), ([], {"PATCHKIT_NO_FASTPATH": "1"}), ([], {"PATCHKIT_TARGET": "engine"}),
], ids=["-v", "--strict-base", "--dry-run", "--color", "--lock-timeout", "--", "FORCE_COLOR", "DEBUG", "NO_FASTPATH",
        "TARGET"])
def test_any_other_shape_falls_through_to_the_full_cli(single: Path, registry: Registry, work: Path,
                                                       extra: list[str], env: dict[str, str]) -> None:
    patch = [] if extra[:1] == ["--"] else ["pa"]
    args = ("apply", *patch, "--root", single, "--patches", registry.path, *extra)
    assert not answered(work, *args, env=env)


def test_a_journal_pending_falls_through_and_is_recovered(single: Path, registry: Registry, work: Path) -> None:
    args = ("apply", "pa", "--root", single, "--patches", registry.path)
    journal = single / ".patchkit" / "journal.json"
    journal.write_bytes(b"")  # not a journal patchkit wrote: the full path reports it, the entry never answers
    assert not answered(work, *args)
    journal.unlink()
    assert answered(work, *args)


def test_a_busy_lock_falls_through(single: Path, registry: Registry, work: Path) -> None:
    """A writer holds the lock: the entry does not wait; the full path (click loaded) waits and says for whom, and
    answers as soon as the lock is free. (The lock is let go once the wait is said, so the run never sits out
    the 300 s default timeout.)"""
    args = ("apply", "pa", "--root", single, "--patches", registry.path, "--json")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PATCHKIT_", "FORCE_COLOR", "CLICOLOR"))}
    fd = os.open(single / ".patchkit" / "lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    child = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "patchkit", *map(str, args)], cwd=work,
                             env=clean, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    err = b""
    try:
        assert child.stderr is not None
        while b"patchkit: waiting for the lock" not in err:
            line = child.stderr.readline()
            if not line:  # the child ended without waiting
                break
            err += line
    finally:
        os.close(fd)
    out, rest = child.communicate(timeout=120)
    err += rest
    assert b"patchkit: waiting for the lock" in err, err[-2000:]
    imported = {line.split("|")[-1].strip() for line in err.decode().splitlines() if line.startswith("import time:")}
    assert "click" in imported and child.returncode == 0, (child.returncode, out, err[-2000:])
    assert json.loads(out)["state"] == "applied"
    assert answered(work, *args)


@pytest.mark.parametrize("change", ["engine file", "engine mode", "manifest", "diff", "record", "code"])
def test_any_change_the_records_do_not_vouch_for_falls_through(single: Path, registry: Registry, work: Path,
                                                               change: str) -> None:
    args = ("apply", "pa", "--json", "--root", single, "--patches", registry.path)
    target = {
        "engine file": single / "eng/core.py", "engine mode": single / "eng/tool.sh",
        "manifest": registry.path / "pa" / "manifest.toml", "diff": registry.path / "pa" / "change.diff",
        "record": single / ".patchkit" / "applied" / "pa.json",
    }.get(change)
    if change == "engine mode":
        target.chmod(0o644)
    elif change == "record":
        target.write_bytes(target.read_bytes().replace(b'"strip": 1', b'"strip": 1 '))
    elif change == "code":  # sealed by other code (another patchkit, another Python): the seal itself holds
        path = single / ".patchkit/applied/pa.json"
        record = json.loads(path.read_bytes())
        block = record.pop("fast_path")
        block.pop("seal")
        path.write_bytes(add_block((json.dumps(record, indent=2) + "\n").encode(), {**block, "code": "0" * 64}))
    else:
        assert target is not None
        target.write_bytes(target.read_bytes() + b"\n")
    assert not answered(work, *args)
    program(work, *args)  # the full path answers (whatever it says), and the entry never did


def test_a_registry_the_records_do_not_name_falls_through(series: Path, registry: Registry, work: Path,
                                                          tmp_path: Path) -> None:
    args = ("apply", "--all", "--root", series, "--patches", registry.path)
    assert answered(work, *args)
    (registry.path / "notes").mkdir()  # a stray folder: the full path warns of it
    assert not answered(work, *args)
    (registry.path / "notes").rmdir()
    registry.add("pc", git_diff(tmp_path, WITH_AB, WITH_AB | {"eng/solo.py": b"x = 1\n"}))
    assert not answered(work, *args)  # a patch the series did not judge
    assert not answered(work, "apply", "pa", "--root", series, "--patches", registry.path)  # not a series of one


def test_a_pyproject_on_the_way_up_falls_through(single: Path, registry: Registry, work: Path) -> None:
    args = ("apply", "pa", "--root", single, "--patches", registry.path)
    (work / "pyproject.toml").write_text("[tool.patchkit]\n")
    assert not answered(work, *args)


def test_a_pinned_checkout_falls_through_and_a_pinned_tree_without_git_answers(
    tmp_path: Path, registry: Registry, engine: Path, work: Path
) -> None:
    write_tree(engine, BASE)
    pinned = "a" * 40
    registry.add("pa", git_diff(tmp_path, BASE, WITH_A), extra="")
    manifest = registry.path / "pa" / "manifest.toml"
    manifest.write_text(manifest.read_text().replace('name = "engine"', f'name = "engine"\npinned_commit = "{pinned}"'))
    assert cli("apply", "pa", "--root", engine, "--patches", registry.path).code == 0
    args = ("apply", "pa", "--json", "--root", engine, "--patches", registry.path)
    assert json.loads(same_bytes(work, *args)[1])["base"]["pinned_commit"] == pinned
    assert answered(work, *args)
    git(engine, "init", "-q")
    assert not answered(work, *args)  # HEAD against the pinned commit: git answers, on the full path


def test_a_record_owned_by_another_user_falls_through(single: Path, registry: Registry, work: Path,
                                                      user: tuple[int, int]) -> None:
    record = single / ".patchkit" / "applied" / "pa.json"
    os.chown(record, user[0], -1)
    assert not answered(work, "apply", "pa", "--root", single, "--patches", registry.path)


def test_a_removed_working_folder_falls_through(single: Path, registry: Registry, tmp_path: Path) -> None:
    """os.getcwd() fails there: the entry declines (it never crashes a start), and the full CLI answers."""
    gone = tmp_path / "gone"
    gone.mkdir()
    probe = ("import os, sys\nos.chdir(sys.argv[1])\nos.rmdir(sys.argv[1])\n"
             "from patchkit.cli.restart import answer\nprint(answer(sys.argv[2:]))\n")
    done = subprocess.run([sys.executable, "-c", probe, str(gone), "apply", "pa", "--root", str(single),
                           "--patches", str(registry.path)], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout) == (0, "None\n"), done.stderr


# The verdicts as a --json restart shows them (`.patchkit/applied/<id>.files`, bound by the sha256 the sealed record
# names): printed as kept when they are exactly what the record seals, else rendered from the recorded verdicts.


def _reseal(record_path: Path, **changes: object) -> None:
    """Rewrite a record's fast_path block with `changes` (a value None drops the key), sealed as patchkit seals."""
    record = json.loads(record_path.read_bytes())
    block = record.pop("fast_path")
    block.pop("seal")
    for key, value in changes.items():
        if value is None:
            block.pop(key, None)
        else:
            block[key] = value
    record_path.write_bytes(add_block((json.dumps(record, indent=2) + "\n").encode(), block))


def _sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def test_an_apply_keeps_the_shown_verdicts_and_a_revert_removes_them(single: Path, registry: Registry,
                                                                      work: Path) -> None:
    shown = single / ".patchkit" / "applied" / "pa.files"
    record = json.loads((single / ".patchkit" / "applied" / "pa.json").read_bytes())
    assert record["fast_path"]["shown"] == _sha256(shown.read_bytes())
    document = json.loads(same_bytes(work, "apply", "pa", "--json", "--root", single, "--patches", registry.path)[1])
    assert json.loads(shown.read_bytes()) == document["files"]
    assert cli("revert", "pa", "--root", single, "--patches", registry.path).code == 0
    assert not shown.exists() and not (single / ".patchkit" / "applied" / "pa.json").exists()


@pytest.mark.parametrize("verb", ["single", "series"])
@pytest.mark.parametrize("route", ["entry", "cli"])
def test_a_json_restart_prints_the_shown_verdicts_the_record_seals(
    request: pytest.FixtureRequest, registry: Registry, work: Path, verb: str, route: str
) -> None:
    """What the sealed sha256 names is what is printed, on the entry and on the CLI's fast path (--color never:
    the entry declines): a shown file rewritten and the record resealed to it (as only its owner can) shows."""
    engine: Path = request.getfixturevalue(verb)
    pid = "pa" if verb == "single" else "pb"
    marked = b'[\n  "printed as kept"\n]'
    (engine / ".patchkit" / "applied" / f"{pid}.files").write_bytes(marked)
    _reseal(engine / ".patchkit" / "applied" / f"{pid}.json", shown=_sha256(marked))
    target = [pid] if verb == "single" else ["--all"]
    args = ("apply", *target, "--json", "--root", engine, "--patches", registry.path,
            *(["--color", "never"] if route == "cli" else []))
    assert answered(work, *args) is (route == "entry")
    code, out, _ = program(work, *args)
    documents = json.loads(out).get("patches", [json.loads(out)])
    assert code == 0 and [d["files"] for d in documents if d["patch"] == pid] == [["printed as kept"]]


@pytest.mark.parametrize("change", ["changed", "removed", "a link", "a folder", "not ours", "old record"])
@pytest.mark.parametrize("route", ["entry", "cli"])
def test_shown_verdicts_the_record_does_not_seal_are_rendered_again(
    series: Path, registry: Registry, work: Path, user: tuple[int, int], change: str, route: str
) -> None:
    """Anything but the sealed bytes read under the trust rule, and an older record without them: the recorded
    verdicts rendered again, the full path's bytes; never the file's text. (A link, and a file of another
    owner, hold text the record is resealed to: only the trust rule refuses them.)"""
    applied = series / ".patchkit" / "applied"
    shown = applied / "pa.files"
    forged = shown.read_bytes().replace(b'"applied"', b'"conflict"', 1)
    if change == "changed":
        shown.write_bytes(forged)
    elif change == "removed":
        shown.unlink()
    elif change == "a link":
        (series / "elsewhere.files").write_bytes(forged)
        shown.unlink()
        shown.symlink_to(series / "elsewhere.files")
        _reseal(applied / "pa.json", shown=_sha256(forged))
    elif change == "a folder":
        shown.unlink()
        shown.mkdir()
    elif change == "not ours":
        shown.write_bytes(forged)
        _reseal(applied / "pa.json", shown=_sha256(forged))
        os.chown(shown, user[0], -1)
    else:  # a record written before the shown verdicts were kept: no `shown` key, no file
        shown.unlink()
        _reseal(applied / "pa.json", shown=None)
    args = ("apply", "--all", "--json", "--root", series, "--patches", registry.path,
            *(["--color", "never"] if route == "cli" else []))
    assert answered(work, *args) is (route == "entry")
    code, out, err = same_bytes(work, *args)
    assert code == 0 and err == b"" and b'"conflict"' not in out
    assert [p["result"] for p in json.loads(out)["patches"]] == ["already-applied"] * 2
