"""The CLI as a user meets it: the demo, help and docs for every command, usage errors, output shapes."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from patchkit.cli.main import COMMAND_MODULES, command_name, main
from tests.conftest import Registry, cli, git_diff, write_tree

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


def test_demo_runs_every_step_as_documented() -> None:
    res = cli("demo")
    assert res.code == 0, res.out + res.err
    assert "demo: 8 of 8 steps behaved as expected" in res.out
    assert "already applied, nothing written" in res.out
    assert "partial" in res.out


def test_demo_says_nothing_left_to_do_after_complete_and_its_commands_run_when_kept(tmp_path: Path) -> None:
    res = cli("demo", "--keep")
    assert res.code == 0, res.out + res.err
    steps = res.out.split("\n# ")
    complete = next(s for s in steps if s.startswith("apply --complete writes only the missing hunks"))
    assert "--complete` writes the missing hunks" not in complete, complete  # it just did
    kept = Path(res.out.split("the demo tree is kept in ")[1].split(":")[0])
    try:
        # every command a step printed runs as printed, from another folder, once the demo has ended
        first = next(line for line in res.out.splitlines() if line.startswith("$ patchkit status"))
        again = subprocess.run(
            [sys.executable, "-m", "patchkit", *shlex.split(first[len("$ patchkit "):])],
            cwd=tmp_path, capture_output=True, text=True, check=False,
        )
        assert again.returncode == 3 and "unapplied" in again.stdout, again.stdout + again.stderr
    finally:
        shutil.rmtree(kept)
    gone = cli("demo")
    assert "removed now; `patchkit demo --keep` keeps it" in gone.out


@pytest.mark.parametrize("module", COMMAND_MODULES)
def test_every_command_has_help_with_an_example_and_is_in_the_readme(module: str) -> None:
    name = command_name(module)
    res = cli(name, "--help")
    assert res.code == 0
    assert f"patchkit {name}" in res.out or name in ("demo",), res.out
    assert f"`{name}" in README or f"patchkit {name}" in README, f"README does not document `{name}`"


def test_usage_errors_exit_2_without_traceback(tmp_path: Path) -> None:
    for args in (["apply"], ["status", "x"], ["apply", "x", "--root", str(tmp_path), "--bogus"], ["nope"]):
        res = cli(*args)
        assert res.code == 2, (args, res.out, res.err)
        assert "Traceback" not in res.out + res.err


def test_missing_root_and_unknown_patch_are_clear(tmp_path: Path, registry: Registry) -> None:
    registry.add("p", git_diff(tmp_path, {"a": b"1\n"}, {"a": b"2\n"}))
    gone = cli("status", "p", "--root", tmp_path / "nowhere", "--patches", registry.path)
    assert gone.code == 2 and "does not exist" in gone.err and "--root" in gone.err
    unknown = cli("status", "q", "--root", tmp_path, "--patches", registry.path)
    assert unknown.code == 2 and "known patches: p" in unknown.err


def test_text_output_is_one_line_and_verbose_adds_the_table(tmp_path: Path, registry: Registry, engine: Path) -> None:
    registry.add("p", git_diff(tmp_path, {"a.py": b"1\n2\n3\n"}, {"a.py": b"1\nTWO\n3\n"}))
    write_tree(engine, {"a.py": b"1\n2\n3\n"})
    short = cli("status", "p", "--root", engine, "--patches", registry.path)
    assert short.code == 3
    assert short.out.splitlines()[0] == "p: unapplied (1 hunk in 1 file)"
    assert "\x1b[" not in short.out  # no colour when stdout is not a terminal
    table = cli("status", "p", "--root", engine, "--patches", registry.path, "-v").out
    assert "hunk 1 @@ -1,3 +1,3 @@: unapplied (expected line 1, found at 1)" in table


def test_list_json(tmp_path: Path, registry: Registry) -> None:
    registry.add("p", git_diff(tmp_path, {"a": b"1\n", "b": b"1\n"}, {"a": b"2\n", "b": b"2\n"}),
                 exclude={"b": "not ported"})
    res = cli("list", "--patches", registry.path, "--json")
    assert res.code == 0
    doc = res.json()
    assert doc["schema_version"] == 1
    (entry,) = doc["patches"]
    assert entry["patch"] == "p" and entry["upstream"]["pr"] == 2106
    assert entry["excluded"] == [{"path": "b", "reason": "not ported"}]
    assert entry["target"]["pinned_commit"] == "unknown"


def test_the_installed_entry_point_runs(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    done = subprocess.run([sys.executable, "-m", "patchkit", "--version"], capture_output=True, env=env, check=False)
    assert done.returncode == 0 and done.stdout.startswith(b"patchkit, version ")
    assert main.name == "main"


def test_verbose_apply_and_revert_show_the_states_after_the_write(tmp_path: Path, registry: Registry,
                                                                   engine: Path) -> None:
    registry.add("p", git_diff(tmp_path, {"a.py": b"1\n2\n3\n"}, {"a.py": b"1\nTWO\n3\n"}))
    write_tree(engine, {"a.py": b"1\n2\n3\n"})
    applied = cli("apply", "p", "--root", engine, "--patches", registry.path, "-v")
    assert applied.code == 0, applied.err
    assert "  applied    a.py (was unapplied)" in applied.out.splitlines()
    assert "hunk 1 @@ -1,3 +1,3 @@: applied (was unapplied, expected line 1, found at 1)" in applied.out
    assert applied.out.splitlines()[1].endswith("; this run applied it and wrote the record")
    reverted = cli("revert", "p", "--root", engine, "--patches", registry.path, "-v")
    assert reverted.code == 0, reverted.err
    assert "  unapplied  a.py (was applied)" in reverted.out.splitlines()
    assert "hunk 1 @@ -1,3 +1,3 @@: unapplied (was applied, expected line 1, found at 1)" in reverted.out
    assert reverted.out.splitlines()[1].endswith("; this run reverted it and removed the record")
    status = cli("status", "p", "--root", engine, "--patches", registry.path, "-v")  # what the table claimed
    assert "  unapplied  a.py" in status.out.splitlines() and status.code == 3


def test_a_long_verbose_table_ends_with_the_totals(tmp_path: Path, registry: Registry, engine: Path) -> None:
    before = {f"m{i:02}.py": b"a\nb\nc\n" for i in range(25)}
    after = {name: b"a\nB\nc\n" for name in before}
    registry.add("p", git_diff(tmp_path, before, after))
    write_tree(engine, {**before, **{name: after[name] for name in sorted(before)[:5]}})
    res = cli("status", "p", "--root", engine, "--patches", registry.path, "-v")
    assert res.code == 4, res.out + res.err
    lines = res.out.splitlines()
    assert lines[-1] == "p: partial (25 hunks in 25 files): 20 unapplied, 5 applied", lines[-3:]
    short = cli("status", "p", "--root", engine, "--patches", registry.path)
    assert short.out.splitlines() == ["p: partial (25 hunks in 25 files)"]
    small = tmp_path / "small"
    write_tree(small, dict(sorted(before.items())[:1]))
    registry.add("q", git_diff(tmp_path, dict(sorted(before.items())[:1]), dict(sorted(after.items())[:1])))
    table = cli("status", "q", "--root", small, "--patches", registry.path, "-v").out.splitlines()
    assert table[-1].startswith("      hunk 1 "), table  # a table that fits a screen ends with its last row
