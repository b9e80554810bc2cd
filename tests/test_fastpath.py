"""The restart fast path (patchkit.run.fastpath): `apply` on a tree patchkit applied answers from the record.

Every test drives the real CLI on a real tree with a diff made by real git, and compares the answer with the
full judgement's (PATCHKIT_NO_FASTPATH=1) on the same tree: the fast path may only ever skip work, never
answer differently. Which path answered is read from PATCHKIT_DEBUG_FASTPATH's line on stderr.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import pwd
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from patchkit.run.fastpath import BLOCK
from tests.conftest import CliResult, FileSpec, Registry, cli, git, git_diff, read_tree, write_tree

# version_sensitive: the status fast path's code fingerprint hashes sys.version and module specs.
pytestmark = pytest.mark.version_sensitive

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


def _edit_recorded_verdict(root: Path) -> None:
    # The report's last hunk verdict claims a conflict: its -v and --json would print it as recorded.
    path = record_path(root)
    raw = path.read_bytes()
    at = raw.rindex(b'\\"applied\\"')  # inside the report's JSON string
    path.write_bytes(raw[:at] + b'\\"conflict\\"' + raw[at + len(b'\\"applied\\"'):])


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
    "a recorded verdict": _edit_recorded_verdict,
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
    _, used = same_answer("apply", PID, "--root", applied, "--patches", registry.path, "--json")
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


MODES = [[], ["-q"], ["-v"], ["--json"], ["-v", "--color", "always"], ["--json", "-v"]]
MODE_IDS = ["text", "quiet", "verbose", "json", "verbose-colour", "json-verbose"]


@pytest.mark.parametrize("flags", MODES, ids=MODE_IDS)
def test_every_output_mode_is_answered_from_the_record_byte_for_byte(
    applied: Path, registry: Registry, flags: list[str]
) -> None:
    # The per-hunk verdicts of -v and --json come from the record: exactly what the full judgement prints.
    out = _same_bytes(["apply", PID, "--root", str(applied), "--patches", str(registry.path), *flags])
    if "--json" in flags:
        document = json.loads(out)
        assert document["result"] == "already-applied" and len(document["files"]) == 6
        assert {h["state"] for f in document["files"] for h in f["hunks"]} == {"applied"}
    elif "-v" in flags:
        assert b"hunk 1 @@" in out and b"eng/moved.py -> eng/renamed.py" in out
    elif "-q" in flags:
        assert out == b""


def test_a_dry_run_takes_the_full_path(applied: Path, registry: Registry) -> None:
    result, used = same_answer("apply", PID, "--root", applied, "--patches", registry.path, "--dry-run")
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
    for flag in ("--json", "-v"):  # the verdicts recorded at adoption are the ones a judgement finds now
        result, used = same_answer("apply", PID, "--root", engine, "--patches", registry.path, flag)
        assert used and result.code == 0


# ------------------------------------------------------------------------------------- the same report, byte for byte
# The fast path builds its Outcome and report from patchkit.outcome alone (state, matching and the other judging
# modules are not loaded): what it prints must still be exactly what the full judgement prints.


@pytest.fixture
def pinned_checkout(tmp_path: Path, registry: Registry, engine: Path) -> Path:
    """An applied tree that is a git checkout of its pinned commit (base pinned)."""
    write_tree(engine, BEFORE)
    git(engine, "init", "-q")
    git(engine, "add", "-A")
    git(engine, "commit", "-q", "-m", "pinned")
    pinned = git(engine, "rev-parse", "HEAD").stdout.decode().strip()
    folder = registry.add(PID, git_diff(tmp_path, BEFORE, AFTER))
    manifest = folder / "manifest.toml"
    manifest.write_text(manifest.read_text().replace('name = "engine"', f'name = "engine"\npinned_commit = "{pinned}"'))
    result, used = run("apply", PID, "--root", engine, "--patches", registry.path)
    assert result.code == 0 and not used, result
    return engine


def _move_head(engine: Path) -> None:
    """A newer engine image: HEAD descends from the pinned commit (the patched files are untouched)."""
    (engine / "unrelated.txt").write_text("bumped\n")
    git(engine, "add", "unrelated.txt")
    git(engine, "commit", "-q", "-m", "bump")


@pytest.mark.parametrize("flags", [[], ["--color", "always"], ["-q"]], ids=["plain", "colour", "quiet"])
def test_a_drifted_base_is_reported_alike_by_both_paths(
    pinned_checkout: Path, registry: Registry, flags: list[str]
) -> None:
    args = ("apply", PID, "--root", pinned_checkout, "--patches", registry.path, *flags)
    result, used = same_answer(*args)
    assert used and result.code == 0 and "drifted" not in result.out  # pinned: nothing to say beyond the line
    _move_head(pinned_checkout)
    result, used = same_answer(*args)
    assert used and result.code == 0
    if "-q" in flags:
        assert result.out == ""
    else:
        assert "descends from the pinned" in result.out and "applied by this version" in result.out
        assert ("\x1b[" in result.out) == ("always" in flags)


def test_strict_base_on_a_drifted_base_is_refused_by_the_full_judgement(
    pinned_checkout: Path, registry: Registry
) -> None:
    args = ("apply", PID, "--root", pinned_checkout, "--patches", registry.path, "--strict-base")
    result, used = same_answer(*args)
    assert used and result.code == 0
    _move_head(pinned_checkout)
    result, used = same_answer(*args)
    assert not used and result.code == 9, result


@pytest.mark.parametrize("flags", [[], ["--color", "always"]], ids=["plain", "colour"])
def test_a_series_rerun_reports_alike_by_both_paths(series: Path, registry: Registry, flags: list[str]) -> None:
    result, used = same_answer("apply", "--all", "--root", series, "--patches", registry.path, *flags)
    assert used and result.code == 0
    assert result.out.count("already applied, nothing written") == 2 and "series:" in result.out


def _program(args: list[str], fast: bool) -> tuple[int, bytes, bytes, bool]:
    """`python -m patchkit ...` in a fresh interpreter (only what the run imports is loaded): exit code, stdout,
    stderr without the debug line, and whether the fast path answered."""
    env = {**os.environ, "PATCHKIT_DEBUG_FASTPATH": "1"}
    env.pop("PATCHKIT_NO_FASTPATH", None)
    if not fast:
        env["PATCHKIT_NO_FASTPATH"] = "1"
    done = subprocess.run([sys.executable, "-m", "patchkit", *args], capture_output=True, env=env, check=False)
    err = b"".join(line for line in done.stderr.splitlines(keepends=True) if b"debug: fast path" not in line)
    return done.returncode, done.stdout, err, b"fast path used" in done.stderr


def _same_bytes(args: list[str]) -> bytes:
    *quick, used = _program(args, fast=True)
    *full, full_used = _program(args, fast=False)
    assert used and not full_used, (quick, full)
    assert quick == full and quick[0] == 0, (quick, full)
    return bytes(quick[1])


@pytest.mark.parametrize("flags", [[], ["--color", "always"]], ids=["plain", "colour"])
def test_the_program_prints_the_same_bytes_on_both_paths(
    pinned_checkout: Path, registry: Registry, flags: list[str]
) -> None:
    _move_head(pinned_checkout)  # a provenance line too
    out = _same_bytes(["apply", PID, "--root", str(pinned_checkout), "--patches", str(registry.path), *flags])
    assert b"already applied" in out and b"descends from the pinned" in out


@pytest.mark.parametrize("flags", MODES, ids=MODE_IDS)
def test_the_program_prints_the_same_bytes_for_a_series_on_both_paths(
    series: Path, registry: Registry, flags: list[str]
) -> None:
    out = _same_bytes(["apply", "--all", "--root", str(series), "--patches", str(registry.path), *flags])
    if "--json" in flags:
        document = json.loads(out)
        assert [p["result"] for p in document["patches"]] == ["already-applied"] * 2
        # pb is judged on the tree as pa leaves it: its hunk in the shared file has its own verdict and line
        assert [len(p["files"]) for p in document["patches"]] == [1, 2]
    elif "-q" in flags:
        assert out == b""
    else:
        assert out.count(b"already applied, nothing written") == 2


def test_a_drifted_base_reads_alike_in_every_mode(pinned_checkout: Path, registry: Registry) -> None:
    _move_head(pinned_checkout)
    for flags in (["-v"], ["--json"]):
        out = _same_bytes(["apply", PID, "--root", str(pinned_checkout), "--patches", str(registry.path), *flags])
        assert b"descends from" in out or b'"drifted"' in out


FINGERPRINT_PROBE = """
import importlib.util, sys
sys.path.insert(0, sys.argv[1])
from patchkit.run.fastpath import code_fingerprint
assert importlib.util.find_spec("patchkit").origin.startswith(sys.argv[1]), "not the copy"
print(code_fingerprint())
"""


def test_the_seal_covers_every_module_of_the_package_wherever_it_lives(tmp_path: Path) -> None:
    """The records' seal changes when any of patchkit's modules changes, not only the fast path's neighbours: a
    change to the judgement (in another folder than the fast path once the stages have folders of their own), to
    the writing code or to the vocabulary makes every record's fast answer stale."""
    source = Path(__file__).resolve().parent.parent / "patchkit"
    copy = tmp_path / "copy"
    shutil.copytree(source, copy / "patchkit", ignore=shutil.ignore_patterns("__pycache__"))

    def fingerprint() -> str:
        done = subprocess.run([sys.executable, "-c", FINGERPRINT_PROBE, str(copy)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    seen = {fingerprint()}
    for module in ("patchkit.judge.state", "patchkit.workspace.commit", "patchkit.outcome"):
        spec = importlib.util.find_spec(module)  # this checkout's file: the same place in the copy
        assert spec is not None and spec.origin is not None
        changed = copy / Path(spec.origin).relative_to(source.parent)
        changed.write_bytes(changed.read_bytes() + b"\n# changed\n")
        seen.add(fingerprint())
    assert len(seen) == 4


# The --json document is rendered with templates for its per-hunk rows (speak.report._files_text): the bytes must be
# exactly what json.dumps(indent=2, ensure_ascii=False) writes of the same document, on both paths, for any names.
ODD = "eng/o\u0308dd \"q\" \u00e9.py"  # a combining mark, quotes, non-ASCII
NASTY_BEFORE: dict[str, FileSpec] = {
    "eng/core.py": lines("core", 40),
    ODD: lines("odd", 12),
    "eng/twice.py": b"x = 1\ny = 2\n" * 3 + lines("twice", 8),  # the hunk's images occur more than once
    "eng/skip.py": lines("skip", 5),
}
NASTY_AFTER: dict[str, FileSpec] = {
    "eng/core.py": lines("core", 40).replace(b"compute_core(20)", b"compute_core(20)  # \xc3\xa9dit"),
    ODD: None,
    "eng/\u00e9t\u00e9/\"renamed\".py": lines("odd", 12),
    "eng/twice.py": b"x = 1\ny = 2\n" * 3 + lines("twice", 8).replace(b"(3)", b"(3, k=1)"),
    "eng/skip.py": lines("skip", 5).replace(b"(1)", b"(11)"),
}


def _as_json_dumps(out: bytes) -> bytes:
    return (json.dumps(json.loads(out), indent=2, ensure_ascii=False) + "\n").encode()


@pytest.mark.parametrize("verb", ["single", "series"])
def test_the_json_document_is_what_json_dumps_writes_on_both_paths(
    tmp_path: Path, registry: Registry, engine: Path, verb: str
) -> None:
    write_tree(engine, NASTY_BEFORE)
    registry.add(PID, git_diff(tmp_path, NASTY_BEFORE, NASTY_AFTER), exclude={"eng/skip.py": "upstream has it"})
    target = [PID] if verb == "single" else ["--all"]
    args = ["--root", str(engine), "--patches", str(registry.path), "--json"]
    # A refusal's document: conflicts and ambiguous hunks, with details and candidate lines.
    (engine / "eng/core.py").write_bytes(lines("core", 40).replace(b"compute_core(21)", b"changed(21)"))
    (engine / "eng/twice.py").write_bytes((b"x = 1\ny = 2\n" * 3 + lines("twice", 8)) * 2)
    _, out, _, _ = _program(["status", *target, *args], fast=False)
    document = json.loads(out)
    assert "files" in document or "patches" in document, out
    hunks = [h for p in document.get("patches", [document]) for f in p["files"] for h in f["hunks"]]
    assert {"conflict", "ambiguous"} <= {h["state"] for h in hunks}, out
    assert any(h["candidate_lines"] for h in hunks) and any(h["detail"] for h in hunks), out
    assert out == _as_json_dumps(out)
    # The applied tree's document, from the records and from the full judgement.
    write_tree(engine, NASTY_BEFORE)
    assert _program(["apply", *target, *args], fast=False)[0] == 0
    out = _same_bytes(["apply", *target, *args])
    assert json.dumps(ODD, ensure_ascii=False).encode() in out
    assert out == _as_json_dumps(out)
