"""What the CLI prints, as a user and a script meet it: JSON against the published schema, errors, exit codes,
words, refusals, --strict-base, --dry-run, near misses, help, completion and pipes."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from patchkit.cli.main import COMMAND_MODULES, command_name
from tests.conftest import Registry, cli, git_diff, read_tree, write_tree
from tests.output_helpers import REPO, cli_env, command, run_into_closed_pipe, run_plain
from tests.schema_check import SCHEMA, check, errors_of

BEFORE = {
    "eng/a.py": b"".join(b"a line %d\n" % i for i in range(1, 31)),
    "eng/b.py": b"".join(b"b line %d\n" % i for i in range(1, 11)),
    "eng/skip.py": b"skip\n",
}


def _edit(files: dict[str, bytes], path: str, old: bytes, new: bytes) -> dict[str, bytes]:
    assert old in files[path]
    return {**files, path: files[path].replace(old, new, 1)}


AFTER = _edit(_edit(_edit(_edit(BEFORE, "eng/a.py", b"a line 3\n", b"a line 3!\n"), "eng/a.py", b"a line 25\n",
                            b"a line 25!\n"), "eng/b.py", b"b line 5\n", b"b line 5!\n"),
              "eng/skip.py", b"skip\n", b"skip!\n")
AFTER = {**AFTER, "eng/new.py": b"new\n"}


@pytest.fixture
def two_file(tmp_path: Path, registry: Registry, engine: Path) -> Path:
    """Patch `p`: two hunks in eng/a.py, one in eng/b.py, a created eng/new.py; eng/skip.py excluded."""
    registry.add("p", git_diff(tmp_path, BEFORE, AFTER), exclude={"eng/skip.py": "ships separately"})
    write_tree(engine, BEFORE)
    return engine


def run(*args: str | Path, registry: Registry, root: Path | None = None) -> tuple[int, str, str]:
    extra: list[str | Path] = ["--patches", registry.path] + (["--root", root] if root is not None else [])
    res = cli(*args, *extra)
    return res.code, res.out, res.err


# ------------------------------------------------------------------------------------------- JSON vs schema


def test_the_schema_checker_can_fail() -> None:
    doc = {"schema_version": 1, "error": "x", "exit_code": 2, "where": None, "hint": None}
    check(doc, "error")
    renamed = {**doc, "hint_text": doc["hint"]}
    del renamed["hint"]
    assert errors_of(renamed, SCHEMA["$defs"]["error"]) == [
        "$: missing key 'hint'", "$: key 'hint_text' is not in the schema"]
    assert errors_of({**doc, "later": 1}, SCHEMA["$defs"]["error"], strict=False) == []  # consumers: keys may come
    assert errors_of({**doc, "schema_version": 2}, SCHEMA["$defs"]["error"])
    assert errors_of({**doc, "exit_code": True}, SCHEMA["$defs"]["error"])


def test_every_command_prints_json_the_schema_describes(tmp_path: Path, registry: Registry, two_file: Path) -> None:
    root = two_file
    docs: list[tuple[str, dict[str, object]]] = []

    def doc(definition: str, *args: str | Path, code: int, root_: Path | None = root) -> dict[str, object]:
        got, out, err = run(*args, "--json", registry=registry, root=root_)
        assert got == code, (args, out, err)
        data = json.loads(out)
        check(data, definition)
        docs.append((definition, data))
        return data

    assert doc("status", "status", "p", code=3)["state"] == "unapplied"
    assert doc("status", "apply", "p", "--dry-run", code=0)["result"] == "dry-run"
    applied = doc("status", "apply", "p", code=0)
    assert applied["excluded"] == [{"path": "eng/skip.py", "reason": "ships separately"}]
    after = doc("status", "status", "p", "-v", code=0)
    assert after["record"]["hunk_set_sha256"] == applied["hunk_set_sha256"]  # type: ignore[index]
    doc("series", "status", "--all", code=0)
    doc("series", "revert", "--all", "--dry-run", code=0)
    assert doc("status", "revert", "p", code=0)["result"] == "reverted"
    doc("series", "apply", "--all", code=0)
    listed = doc("list", "list", code=0, root_=None)
    assert [e["patch"] for e in listed["patches"]] == ["p"]  # type: ignore[index]
    assert listed["patches"][0]["hunk_set_sha256"] is None  # type: ignore[index]  # not pinned in this manifest
    # vendor: a pending entry (its diff not there yet) vendored from a local file
    diff = registry.path / "p" / "change.diff"
    shutil.copy(diff, tmp_path / "local.diff")
    diff.unlink()
    vendored = doc("vendor", "vendor", "p", "--from", tmp_path / "local.diff", "--dry-run", code=0, root_=None)
    assert vendored["excluded"] == [{"path": "eng/skip.py", "reason": "ships separately"}]
    created = doc("new", "new", "q", "--target", "engine", "--repo", "a/b", "--pr", "5", code=0, root_=None)
    assert created["created"]["patch"] == "q" and created["vendored"] is None  # type: ignore[index]
    local = tmp_path / "local.diff"
    again = doc("new", "new", "r", "--target", "engine", "--local", "ours", "--from", local, code=0, root_=None)
    assert again["vendored"]["excluded"] == []  # type: ignore[index]
    # errors: pending entry, unknown patch, usage error, missing root
    assert doc("error", "status", "p", code=2)["hint"]
    assert "did you mean" not in str(doc("error", "status", "zzz", code=2)["error"])
    assert doc("error", "status", "p", "--bogus", code=2)["hint"] == "see `patchkit status --help`"
    missing = cli("list", "--patches", tmp_path / "nowhere", "--json")
    assert missing.code == 2
    check(missing.json(), "error")
    assert missing.json()["where"] == str(tmp_path / "nowhere")
    waivers = tmp_path / "waivers"
    waivers.mkdir()
    linted = cli("lint", "--patches", registry.path, "--waivers", waivers, "--format", "json")
    assert linted.code == 1  # p has no waiver
    check(linted.json(), "lint")
    docs.append(("lint", linted.json()))
    assert {f["rule"] for f in linted.json()["findings"]} and linted.json()["errors"] >= 1
    broken = cli("lint", "--patches", tmp_path / "nowhere", "--format=json")
    assert broken.code == 2
    check(broken.json(), "error")
    assert {d for d, _ in docs} == {"status", "series", "list", "vendor", "new", "error", "lint"}
    # one spelling per key across every document printed above
    keys = {k for _, d in docs for k in _all_keys(d)}
    assert "hunkset_sha256" not in keys and "id" not in keys and "pattern" not in keys


def _all_keys(value: object) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _all_keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _all_keys(v)}
    return set()


def test_the_schema_is_valid_json_schema_where_jsonschema_is_installed(
    registry: Registry, two_file: Path
) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    out = cli("status", "p", "--root", two_file, "--patches", registry.path, "--json").out
    jsonschema.validate(json.loads(out), SCHEMA)


def test_json_docs_and_readme_name_the_schema_keys() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    output = (REPO / "docs" / "output.md").read_text(encoding="utf-8")
    assert "docs/schema/patchkit.schema.json" in readme and "schema_version" in readme
    for definition in ("status", "series", "list", "vendor", "new", "error", "lint"):
        for key in SCHEMA["$defs"][definition]["properties"]:
            assert f"`{key}`" in output, (definition, key)


# ------------------------------------------------------------------------------------------ internal errors

FAULT = """
import sys
import patchkit.judge.state
def scan_tree(*args, **kwargs):
    raise RuntimeError("the state scan broke")
patchkit.judge.state.scan_tree = scan_tree
from patchkit.cli.main import main
main(prog_name="patchkit")
"""


def test_an_internal_error_exits_10_with_one_line_and_the_traceback_on_request(
    registry: Registry, two_file: Path
) -> None:
    args = [sys.executable, "-c", FAULT, "status", "p", "--root", str(two_file), "--patches", str(registry.path)]
    plain = run_plain(args, cli_env())
    assert plain.code == 10, plain
    assert plain.err.splitlines() == [
        "patchkit: internal error, please report: RuntimeError: the state scan broke "
        "(rerun with -v or PATCHKIT_TRACEBACK=1 for the traceback)"
    ]
    assert plain.out == ""
    for extra_args, env in (([], cli_env(PATCHKIT_TRACEBACK="1")), (["-v"], cli_env())):
        loud = run_plain(args + extra_args, env)
        assert loud.code == 10 and "Traceback (most recent call last)" in loud.err and "scan_tree" in loud.err
        assert loud.err.splitlines()[-1].startswith("patchkit: internal error, please report")
    as_json = run_plain([*args, "--json"], cli_env())
    assert as_json.code == 10
    data = json.loads(as_json.out)
    check(data, "error")
    assert data["exit_code"] == 10 and "RuntimeError: the state scan broke" in data["error"]


def test_internal_is_its_own_documented_exit_code() -> None:
    from patchkit.errors import ExitCode

    assert ExitCode.INTERNAL == 10 and ExitCode.INTERNAL not in (ExitCode.REFUSED, ExitCode.BAD_INPUT)
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| ([\d /]+) \|", readme, re.M)  # "| 7 |", "| 130 / 143 |"
    table = {int(code) for row in rows for code in row.split("/")}
    codes = {int(c) for c in ExitCode}
    assert codes <= table and table - codes <= {130}, (table, codes)
    listed = re.findall(r"\b(\d+) [a-z(-]", cli("--help").out.split("Exit codes:")[1].split("Shell")[0])
    assert {int(c) for c in listed} == {c for c in codes if c < 128}  # signals aside


# ---------------------------------------------------------------------------------------------------- pipes


@pytest.mark.parametrize(("prepare", "code"), [("apply", 0), (None, 3)])
def test_a_closed_pipe_keeps_the_exit_code(registry: Registry, two_file: Path, prepare: str | None,
                                           code: int) -> None:
    common = ["--root", str(two_file), "--patches", str(registry.path)]
    if prepare:
        assert cli(prepare, "p", *common).code == 0
    closed = run_into_closed_pipe(command("status", "p", "-v", *common), cli_env())
    assert closed.code == code, closed.err
    assert "Traceback" not in closed.err and "Broken pipe" not in closed.err
    # and as the issue saw it, through a shell
    line = " ".join(command("status", "p", "-v", *common))
    piped = subprocess.run(["bash", "-o", "pipefail", "-c", f"{line} | head -2"], env=cli_env(), cwd=REPO,
                           capture_output=True, text=True, check=False)
    assert piped.returncode == code and len(piped.stdout.splitlines()) == 2, piped.stderr


# ---------------------------------------------------------------------------------------------------- words


def test_counts_read_as_a_person_says_them(tmp_path: Path, registry: Registry, engine: Path) -> None:
    base = {"eng/x.py": b"".join(b"x %d\n" % i for i in range(20))}
    first = _edit(base, "eng/x.py", b"x 2\n", b"x 2!\n")
    second = _edit(first, "eng/x.py", b"x 15\n", b"x 15!\n")
    # one diff that touches the same file twice (two commits' diffs one after the other): still one file
    registry.add("twice", git_diff(tmp_path, base, first) + git_diff(tmp_path, first, second))
    registry.add("once", git_diff(tmp_path, base, first))
    write_tree(engine, base)
    assert cli("status", "twice", "--root", engine, "--patches", registry.path).out.splitlines()[0] == (
        "twice: unapplied (2 hunks in 1 file)")
    assert cli("status", "once", "--root", engine, "--patches", registry.path).out.splitlines()[0] == (
        "once: unapplied (1 hunk in 1 file)")
    shutil.rmtree(registry.path / "twice")
    status_all = cli("status", "--all", "--root", engine, "--patches", registry.path).out.splitlines()
    assert status_all[-1] == "series: unapplied (1 patch)"
    assert cli("apply", "--all", "--root", engine, "--patches", registry.path).out.splitlines()[-1] == (
        "series: applied 1 patch (1 file written)")
    assert cli("apply", "--all", "--root", engine, "--patches", registry.path).out.splitlines()[-1] == (
        "series: the only patch is already applied (nothing written)")
    assert cli("revert", "--all", "--root", engine, "--patches", registry.path).out.splitlines()[-1] == (
        "series: reverted 1 patch (1 file written)")


def test_a_series_revert_says_reverted_and_a_conflict_says_so(tmp_path: Path, registry: Registry,
                                                               engine: Path) -> None:
    base = {f"eng/f{i}.py": b"".join(b"f%d %d\n" % (i, j) for j in range(8)) for i in range(5)}
    for i in range(5):
        registry.add(f"p{i}", git_diff(tmp_path, base, _edit(base, f"eng/f{i}.py", b"f%d 3\n" % i, b"changed\n")))
    write_tree(engine, base)
    common = ["--root", engine, "--patches", registry.path]
    assert cli("apply", "--all", *common).code == 0
    reverted = cli("revert", "--all", *common)
    assert reverted.code == 0 and reverted.out.splitlines()[-1] == "series: reverted 5 patches (5 files written)"
    assert "not applied" not in reverted.out
    write_tree(engine, _edit(base, "eng/f2.py", b"f2 3\n", b"drifted\n"))
    refused = cli("apply", "p2", *common)
    assert refused.out.splitlines()[0] == "p2: refused: the tree conflicts with the patch; nothing written"


# ------------------------------------------------------------------------------------------------- refusals


def test_a_refusal_leads_with_the_failing_hunk_and_the_table_waits_for_v(
    registry: Registry, two_file: Path
) -> None:
    drifted = _edit(BEFORE, "eng/a.py", b"a line 25\n", b"a line 25 (local fix)\n")
    write_tree(two_file, drifted)
    before = read_tree(two_file)
    common = ["--root", two_file, "--patches", registry.path]
    short = cli("apply", "p", *common)
    assert short.code == 1 and read_tree(two_file) == before
    lines = short.out.splitlines()
    assert lines[0] == "p: refused: the tree conflicts with the patch; nothing written"
    assert lines[1].startswith("  eng/a.py: hunk 2 @@ -22,7 +22,7 @@ conflicts (expected at line 22")
    assert "a line 25 (local fix)" in lines[2]
    assert "eng/b.py" not in short.out and "hunk 1" not in short.out  # only what failed
    assert lines[-1] == f"  every hunk: `patchkit status p --patches {registry.path} --root {two_file} -v`"
    assert len(lines) <= 6
    full = cli("apply", "p", *common, "-v")
    assert full.code == 1
    assert "eng/b.py" in full.out and "hunk 1 @@" in full.out and "every hunk:" not in full.out


def test_a_conflict_refusal_names_its_first_conflicting_hunk_where_no_line_above_does(
    registry: Registry, two_file: Path
) -> None:
    # The decision's first undecided hunk (a field of it): in the JSON reason and under the -v table; the
    # short text's hunk lines above name it already, so its reason line leaves it out.
    write_tree(two_file, _edit(BEFORE, "eng/a.py", b"a line 25\n", b"a line 25 (local fix)\n"))
    common = ["--root", two_file, "--patches", registry.path]
    drifted = "some hunks match neither the old nor the new content; the tree has drifted"
    named = f"{drifted} (eng/a.py hunk 2 @@ -22,7 +22,7 @@: "
    reason = cli("apply", "p", *common, "--json").json()["reason"]
    assert reason.startswith(named) and reason.endswith(")"), reason
    assert f"  {drifted}" in cli("apply", "p", *common).out.splitlines()
    assert f"  {reason}" in cli("apply", "p", *common, "-v").out.splitlines()


def test_a_partial_refusal_names_what_is_patched_and_what_is_not(registry: Registry, two_file: Path) -> None:
    write_tree(two_file, {"eng/b.py": AFTER["eng/b.py"]})
    res = cli("apply", "p", "--root", two_file, "--patches", registry.path)
    assert res.code == 1
    assert res.out.splitlines()[0] == "p: refused: the tree is partially patched; nothing written"
    assert "  patched: eng/b.py; not patched: eng/a.py, eng/new.py" in res.out
    common = f"--patches {registry.path} --root {two_file}"
    assert f"`patchkit apply p {common} --complete` finishes the job" in res.out


# ---------------------------------------------------------------------------------------------- strict base


def test_strict_base_says_what_it_checked_what_differed_and_what_to_do(
    tmp_path: Path, registry: Registry, engine: Path
) -> None:
    wrong = hashlib.sha256(b"some other pre-image").hexdigest()
    registry.add("p", git_diff(tmp_path, BEFORE, AFTER), extra=f'[base]\n"eng/a.py" = "{wrong}"')
    write_tree(engine, BEFORE)
    common = ["--root", engine, "--patches", registry.path]
    status = cli("status", "p", *common, "--strict-base")
    assert status.code == 9
    assert "  --strict-base (exit 9): checked the [base] fingerprint of 1 file" in status.out
    assert "  found: eng/a.py differs from [base]" in status.out
    assert "what to do: use the engine image p was validated on" in status.out
    apply = cli("apply", "p", *common, "--strict-base")
    assert apply.code == 9 and read_tree(engine) == {k: (v, False) for k, v in BEFORE.items()}
    assert apply.out.splitlines()[0] == (
        "p: refused by --strict-base: the tree is not verifiably the pinned base; nothing written")
    assert "the tree is unapplied" not in apply.out and "not applied" not in apply.out.splitlines()[0]


def test_strict_base_without_anything_to_check_says_so(registry: Registry, two_file: Path) -> None:
    res = cli("status", "p", "--root", two_file, "--patches", registry.path, "--strict-base")
    assert res.code == 9
    assert res.out.splitlines()[2] == ("  --strict-base (exit 9): nothing to check: the manifest has no "
                                       "target.pinned_commit and no [base] fingerprint")
    assert "--base-tree" in res.out


# ------------------------------------------------------------------------------------------------- dry run


def test_dry_run_lists_the_files_it_would_write_and_writes_nothing(registry: Registry, two_file: Path) -> None:
    before = read_tree(two_file)
    res = cli("apply", "p", "--root", two_file, "--patches", registry.path, "--dry-run")
    assert res.code == 0 and read_tree(two_file) == before
    assert res.out.splitlines() == [
        "p: dry run: the patch is not applied; would write 3 files",
        "  would modify eng/a.py",
        "  would modify eng/b.py",
        "  would create eng/new.py",
    ]
    series = cli("apply", "--all", "--root", two_file, "--patches", registry.path, "--dry-run")
    assert "  would create eng/new.py" in series.out.splitlines()


# ------------------------------------------------------------------------------------------------ near misses


def test_a_mistyped_patch_id_or_command_gets_did_you_mean(tmp_path: Path, registry: Registry, engine: Path) -> None:
    registry.add("atom-pr2106", git_diff(tmp_path, {"a": b"1\n"}, {"a": b"2\n"}))
    res = cli("status", "atom-pr2016", "--root", engine, "--patches", registry.path)
    assert res.code == 2 and "did you mean 'atom-pr2106'?" in res.err
    typo = cli("stauts", "atom-pr2106")
    assert typo.code == 2 and "did you mean 'status'?" in typo.err


# ----------------------------------------------------------------------------------- global options, help


@pytest.mark.parametrize("module", COMMAND_MODULES)
def test_every_command_takes_quiet_verbose_and_color(module: str) -> None:
    text = cli(command_name(module), "--help").out
    assert "-q, --quiet" in text and "-v, --verbose" in text and "--color [auto|always|never]" in text


def test_verbose_and_quiet_work_before_or_after_the_command(registry: Registry, two_file: Path) -> None:
    common = ["--root", two_file, "--patches", registry.path]
    after = cli("status", "p", *common, "-v")
    before = cli("-v", "status", "p", *common)
    assert after.out == before.out and "hunk 1 @@" in after.out
    assert cli("apply", "p", *common, "-q").out == ""
    assert cli("-q", "status", "p", *common).out == ""
    assert cli("status", "p", *common, "-q", "-v").code == 2
    strict = cli("status", "p", *common, "-q", "--strict-base")
    assert strict.code == 9 and "--strict-base (exit 9)" in strict.out  # -q keeps what went wrong
    write_tree(two_file, {"eng/b.py": b"drifted\n"})
    refused = cli("apply", "p", *common, "-q")
    assert refused.code == 1 and refused.out.startswith("p: refused: the tree conflicts with the patch")


def test_revert_help_is_aligned_and_status_help_is_true() -> None:
    revert = cli("revert", "--help").out
    start = revert.rindex("\n", 0, revert.index("Applied: restores")) + 1
    paragraph = revert[start:revert.index("With --all")].splitlines()
    assert {len(line) - len(line.lstrip()) for line in paragraph if line.strip()} == {2}
    status = cli("status", "--help").out
    assert "written as one transaction" not in " ".join(status.split())
    assert "written as one transaction" in " ".join(cli("apply", "--help").out.split())


def test_the_docs_explain_how_to_pick_a_pre_commit_rev() -> None:
    for path in (REPO / "README.md", REPO / "docs" / "lint.md"):
        text = path.read_text(encoding="utf-8")
        assert "rev: v0.1.0" not in text, path
    lint = (REPO / "docs" / "lint.md").read_text(encoding="utf-8")
    assert "pre-commit autoupdate" in lint and "git ls-remote" in lint


# ---------------------------------------------------------------------------------------------- completion


def _complete(words: str, env: dict[str, str]) -> list[str]:
    env = {**env, "_PATCHKIT_COMPLETE": "bash_complete", "COMP_WORDS": words,
           "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1))}
    done = run_plain(command(), env)
    assert done.code == 0, done.err
    return done.out.splitlines()


def test_completion_offers_registry_ids_and_paths(tmp_path: Path, registry: Registry) -> None:
    registry.add("atom-pr2106", git_diff(tmp_path, {"a": b"1\n"}, {"a": b"2\n"}))
    registry.add("atom-pr2200", git_diff(tmp_path, {"a": b"1\n"}, {"a": b"3\n"}))
    registry.add("vllm-pr1", git_diff(tmp_path, {"a": b"1\n"}, {"a": b"4\n"}))
    env = cli_env(PATCHKIT_PATCHES=str(registry.path))
    assert _complete("patchkit status atom", env) == ["plain,atom-pr2106", "plain,atom-pr2200"]
    assert _complete(f"patchkit apply --patches {registry.path} v", cli_env()) == ["plain,vllm-pr1"]
    for option in ("--root", "--patches"):
        assert _complete(f"patchkit status {option} x", env) == ["dir,x"]
    assert _complete("patchkit lint --waivers x", env) == ["dir,x"]
    docs = (REPO / "docs" / "output.md").read_text(encoding="utf-8")
    assert "_PATCHKIT_COMPLETE=bash_source patchkit" in docs and "zsh_source" in docs
