"""The restart fast path (patchkit.fastpath): `apply` on a tree patchkit applied answers from the record.

Every test drives the real CLI on a real tree with a diff made by real git, and compares the answer with the
full judgement's (PATCHKIT_NO_FASTPATH=1) on the same tree: the fast path may only ever skip work, never
answer differently. Which path answered is read from PATCHKIT_DEBUG_FASTPATH's line on stderr.
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from patchkit.fastpath import BLOCK
from tests.conftest import CliResult, FileSpec, Registry, cli, git_diff, read_tree, write_tree

PID = "fast-pr1"


def lines(name: str, count: int) -> bytes:
    return b"".join(b"%s = compute_%s(%d)\n" % (name.encode(), name.encode(), i) for i in range(count))


BEFORE: dict[str, FileSpec] = {
    "eng/core.py": lines("core", 60),
    "eng/script.sh": b"#!/bin/sh\necho one\necho two\n",
    "eng/old.py": lines("old", 10),
    "eng/moved.py": lines("moved", 30),
    "eng/crlf.txt": b"one\r\ntwo\r\nthree\r\n",
}
AFTER: dict[str, FileSpec] = {
    "eng/core.py": lines("core", 60).replace(b"compute_core(7)", b"compute_core(7, fast=True)")
    .replace(b"compute_core(50)", b"compute_core(50)  # tail"),
    "eng/script.sh": (b"#!/bin/sh\necho one\necho two\n", True),  # a mode change only
    "eng/old.py": None,  # deleted
    "eng/new.py": lines("new", 5),  # created
    "eng/moved.py": None,
    "eng/renamed.py": lines("moved", 30),  # a pure rename
    "eng/crlf.txt": b"one\r\nTWO\r\nthree\r\n",
}


def record_path(root: Path, pid: str = PID) -> Path:
    return root / ".patchkit" / "applied" / f"{pid}.json"


def run(*args: str | Path, fast: bool = True) -> tuple[CliResult, bool]:
    """The CLI's result and whether the fast path answered."""
    saved = os.environ.get("PATCHKIT_NO_FASTPATH")
    os.environ["PATCHKIT_DEBUG_FASTPATH"] = "1"
    if not fast:
        os.environ["PATCHKIT_NO_FASTPATH"] = "1"
    try:
        result = cli(*args)
    finally:
        os.environ.pop("PATCHKIT_DEBUG_FASTPATH")
        os.environ.pop("PATCHKIT_NO_FASTPATH", None)
        if saved is not None:
            os.environ["PATCHKIT_NO_FASTPATH"] = saved
    used = "fast path used" in result.err
    # no line at all: the command failed before it reported (the full path's error, checked by same_answer)
    assert used or "fast path not used" in result.err or result.code == 2, result
    return result, used


def same_answer(*args: str | Path) -> tuple[CliResult, bool]:
    """Run with the fast path allowed, then without it: the answer (exit code, stdout) must be the same."""
    quick, used = run(*args)
    full, full_used = run(*args, fast=False)
    assert not full_used
    def err(r: CliResult) -> str:
        return "".join(line for line in r.err.splitlines(keepends=True) if "debug: fast path" not in line)

    assert (quick.code, quick.out, err(quick)) == (full.code, full.out, err(full)), (quick, full)
    return quick, used


@pytest.fixture
def applied(tmp_path: Path, registry: Registry, engine: Path) -> Path:
    write_tree(engine, BEFORE)
    registry.add(PID, git_diff(tmp_path, BEFORE, AFTER))
    result, used = run("apply", PID, "--root", engine, "--patches", registry.path)
    assert result.code == 0 and not used, result
    return engine


def test_a_rerun_is_answered_from_the_record_and_writes_nothing(applied: Path, registry: Registry) -> None:
    state = {p.name: p.read_bytes() for p in (applied / ".patchkit" / "applied").iterdir()}
    tree = read_tree(applied)
    result, used = same_answer("apply", PID, "--root", applied, "--patches", registry.path)
    assert used
    assert result.code == 0 and "already applied, nothing written" in result.out
    assert read_tree(applied) == tree
    assert {p.name: p.read_bytes() for p in (applied / ".patchkit" / "applied").iterdir()} == state


def test_the_record_names_every_path_of_the_hunk_set_as_the_apply_left_it(applied: Path) -> None:
    block = json.loads(record_path(applied).read_bytes())[BLOCK]
    files = block["files"]
    assert set(files) == {"eng/core.py", "eng/script.sh", "eng/old.py", "eng/new.py", "eng/moved.py",
                          "eng/renamed.py", "eng/crlf.txt"}
    assert files["eng/old.py"] is None and files["eng/moved.py"] is None
    script = applied / "eng/script.sh"
    assert files["eng/script.sh"] == {
        "sha256": hashlib.sha256(script.read_bytes()).hexdigest(), "mode": 0o755, "size": script.stat().st_size,
    }


def _flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01  # same size: only the hash can tell
    path.write_bytes(bytes(data))


def _edit_record_field(root: Path) -> None:
    path = record_path(root)
    path.write_bytes(path.read_bytes().replace(b'"applied_at": "2', b'"applied_at": "1', 1))


def _edit_record_digest(root: Path) -> None:
    path = record_path(root)
    raw = json.loads(path.read_bytes())
    digest = raw["hunkset_sha256"]
    other = ("0" if digest[0] != "0" else "1") + digest[1:]
    path.write_bytes(path.read_bytes().replace(digest.encode(), other.encode()))


def _edit_record_whitespace(root: Path) -> None:
    path = record_path(root)
    path.write_bytes(path.read_bytes().replace(b'"format": 1', b'"format":  1', 1))


def _edit_record_files(root: Path) -> None:
    # Claim the pre-apply content of core.py: a forged "applied" record for an unpatched file.
    path = record_path(root)
    raw = path.read_bytes()
    now = hashlib.sha256((root / "eng/core.py").read_bytes()).hexdigest()
    before = BEFORE["eng/core.py"]
    assert isinstance(before, bytes)
    path.write_bytes(raw.replace(now.encode(), hashlib.sha256(before).hexdigest().encode()))


def _drop_block(root: Path) -> None:
    # A record from before the fast path existed.
    path = record_path(root)
    raw = json.loads(path.read_bytes())
    del raw[BLOCK]
    path.write_bytes((json.dumps(raw, indent=2) + "\n").encode())


MUTATIONS: dict[str, Callable[[Path], None]] = {
    "one byte of a modified file": lambda root: _flip_byte(root / "eng/core.py"),
    "one byte of a CRLF file": lambda root: _flip_byte(root / "eng/crlf.txt"),
    "the exec bit the diff set, taken away": lambda root: (root / "eng/script.sh").chmod(0o644),
    "a permission bit the diff does not touch": lambda root: (root / "eng/core.py").chmod(0o640),
    "a deleted file back": lambda root: (root / "eng/old.py").write_bytes(lines("old", 10)),
    "a created file removed": lambda root: (root / "eng/new.py").unlink(),
    "the renamed file back at its old name": lambda root: (root / "eng/renamed.py").rename(root / "eng/moved.py"),
    "a touched file turned into a link": lambda root: (
        (root / "eng/new.py").rename(root / "eng/new-real.py"), (root / "eng/new.py").symlink_to("new-real.py")),
    "one byte of the record (a field)": _edit_record_field,
    "one byte of the record (its hunk-set digest)": _edit_record_digest,
    "one byte of the record (whitespace)": _edit_record_whitespace,
    "the record's file hashes": _edit_record_files,
    "a record without the fast_path block": _drop_block,
    "the record removed": lambda root: record_path(root).unlink(),
    "the record made group-writable": lambda root: record_path(root).chmod(0o664),
    "the applied folder made world-writable": lambda root: record_path(root).parent.chmod(0o777),
    "the record replaced by a link to a copy": lambda root: (
        shutil.copy(record_path(root), root / "copy.json"), record_path(root).unlink(),
        record_path(root).symlink_to(root / "copy.json")),
}


@pytest.mark.parametrize("mutation", MUTATIONS, ids=list(MUTATIONS))
def test_any_change_to_a_touched_file_or_the_record_runs_the_full_judgement(
    applied: Path, registry: Registry, mutation: str
) -> None:
    MUTATIONS[mutation](applied)
    _, used = same_answer("apply", PID, "--root", applied, "--patches", registry.path, "--dry-run")
    assert not used
    _, used = same_answer("apply", PID, "--root", applied, "--patches", registry.path)
    assert not used


def test_a_changed_manifest_runs_the_full_judgement(applied: Path, registry: Registry) -> None:
    manifest = registry.path / PID / "manifest.toml"
    manifest.write_bytes(manifest.read_bytes().replace(b'title = "test patch"', b'title = "test patch!"'))
    result, used = same_answer("apply", PID, "--root", applied, "--patches", registry.path)
    assert not used and result.code == 0


def test_a_changed_diff_runs_the_full_judgement(applied: Path, registry: Registry) -> None:
    # Same hunks, one more line of mail preamble: another diff (sha256) that gives the same hunk set.
    folder = registry.path / PID
    diff = b"From: someone\n" + (folder / "change.diff").read_bytes()
    (folder / "change.diff").write_bytes(diff)
    manifest = folder / "manifest.toml"
    text = manifest.read_text()
    old = next(line for line in text.splitlines() if line.startswith("sha256 = "))
    manifest.write_text(text.replace(old, f'sha256 = "{hashlib.sha256(diff).hexdigest()}"'))
    result, used = same_answer("apply", PID, "--root", applied, "--patches", registry.path)
    assert not used and result.code == 0


def test_a_diff_that_no_longer_matches_its_manifest_is_refused_as_before(applied: Path, registry: Registry) -> None:
    diff = registry.path / PID / "change.diff"
    diff.write_bytes(diff.read_bytes() + b"\n")
    quick = cli("apply", PID, "--root", applied, "--patches", registry.path)
    os.environ["PATCHKIT_NO_FASTPATH"] = "1"
    try:
        full = cli("apply", PID, "--root", applied, "--patches", registry.path)
    finally:
        del os.environ["PATCHKIT_NO_FASTPATH"]
    assert quick.code == full.code != 0 and quick.err == full.err and "sha256" in quick.err


@pytest.mark.parametrize("flag", ["--json", "-v", "--dry-run"])
def test_reports_that_need_per_hunk_verdicts_take_the_full_path(applied: Path, registry: Registry, flag: str) -> None:
    result, used = same_answer("apply", PID, "--root", applied, "--patches", registry.path, flag)
    assert not used and result.code == 0


def test_status_and_revert_always_judge_in_full(applied: Path, registry: Registry) -> None:
    _, used = same_answer("status", PID, "--root", applied, "--patches", registry.path)
    assert not used
    result, used = run("revert", PID, "--root", applied, "--patches", registry.path)
    assert not used and result.code == 0
    assert read_tree(applied) == {p: (d, False) for p, d in BEFORE.items() if isinstance(d, bytes)}


def test_a_record_owned_by_another_user_is_not_trusted(applied: Path, registry: Registry) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to hand the record to another user")
    name = "patchkit-fastpath-test"
    if subprocess.run(["id", name], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
    os.chown(record_path(applied), pwd.getpwnam(name).pw_uid, -1)
    _, used = same_answer("apply", PID, "--root", applied, "--patches", registry.path)
    assert not used


# ---------------------------------------------------------------------------------------------------- series

SERIES_BASE: dict[str, FileSpec] = {"eng/shared.py": lines("shared", 30), "eng/solo.py": lines("solo", 12)}
WITH_A: dict[str, FileSpec] = {**SERIES_BASE, "eng/shared.py": lines("shared", 30).replace(b"(5)", b"(5, a=1)")}
WITH_AB: dict[str, FileSpec] = {
    **WITH_A,
    "eng/shared.py": lines("shared", 30).replace(b"(5)", b"(5, a=1)").replace(b"(20)", b"(20, b=2)"),
    "eng/solo.py": lines("solo", 12).replace(b"(3)", b"(3, b=2)"),
}


@pytest.fixture
def series(tmp_path: Path, registry: Registry, engine: Path) -> Path:
    write_tree(engine, SERIES_BASE)
    registry.add("pa", git_diff(tmp_path, SERIES_BASE, WITH_A))
    registry.add("pb", git_diff(tmp_path, WITH_A, WITH_AB), extra='after = ["pa"]')
    result, used = run("apply", "--all", "--root", engine, "--patches", registry.path)
    assert result.code == 0 and not used, result
    return engine


def test_a_series_rerun_is_answered_from_the_records(series: Path, registry: Registry) -> None:
    result, used = same_answer("apply", "--all", "--root", series, "--patches", registry.path)
    assert used and result.code == 0
    assert "already applied, nothing written" in result.out


def test_the_series_fast_path_holds_only_for_the_same_series(series: Path, registry: Registry) -> None:
    # One patch of the series alone was judged on another stack: the full judgement decides.
    _, used = same_answer("apply", "pb", "--root", series, "--patches", registry.path)
    assert not used
    shutil.rmtree(registry.path / "pb")
    _, used = same_answer("apply", "--all", "--root", series, "--patches", registry.path)
    assert not used


def test_a_changed_shared_file_runs_the_full_judgement_for_the_series(series: Path, registry: Registry) -> None:
    shared = series / "eng/shared.py"
    shared.write_bytes(shared.read_bytes().replace(b"(5, a=1)", b"(5, a=2)"))
    result, used = same_answer("apply", "--all", "--root", series, "--patches", registry.path)
    assert not used and result.code != 0


def test_an_adopted_tree_is_answered_from_its_record_after_adoption(
    tmp_path: Path, registry: Registry, engine: Path
) -> None:
    # A tree patched by something else (here: the after-image written directly), then adopted.
    write_tree(engine, {**BEFORE, **AFTER})
    registry.add(PID, git_diff(tmp_path, BEFORE, AFTER))
    result, used = run("apply", PID, "--root", engine, "--patches", registry.path, "--adopt")
    assert result.code == 0 and not used, result
    assert BLOCK in json.loads(record_path(engine).read_bytes())
    result, used = same_answer("apply", PID, "--root", engine, "--patches", registry.path)
    assert used and result.code == 0
