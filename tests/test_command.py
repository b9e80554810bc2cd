"""run.command: a patch command from its request to its answer, printing nothing (what happens on the way goes to
the hooks), and the CLI's answer printed through the console's error-safe writer (speak.answer)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from patchkit.errors import ExitCode
from patchkit.outcome import Action, PatchState, Result
from patchkit.run.actions import Options, Outcome
from patchkit.run.command import Hooks, Request, run_command
from patchkit.workspace.recovery import Recovery
from tests.conftest import Registry, cli, git_diff, write_tree
from tests.test_workspace import _kill_after_journal, make_tree

BEFORE = {"eng/mod.py": b"a = 1\nb = 2\nc = 3\n"}
AFTER = {"eng/mod.py": b"a = 1\nb = 20\nc = 3\n"}


def request(action: Action, engine: Path, patches: Path, patch: str | None, **options: bool) -> Request:
    return Request(action, patch, None, engine, ("--root", str(engine)), str(patches), Options(**options))


class Told:
    """The hooks, recording what they are told."""

    def __init__(self) -> None:
        self.recoveries: list[Recovery] = []
        self.strays: list[Path] = []

    def hooks(self) -> Hooks:
        return Hooks(self.recoveries.append, self.strays.append, lambda holder, path: None)


@pytest.fixture
def applicable(tmp_path: Path, registry: Registry, engine: Path) -> tuple[Path, Path]:
    write_tree(engine, BEFORE)
    registry.add("one-pr1", git_diff(tmp_path, BEFORE, AFTER))
    return engine, registry.path


def test_a_command_recovers_first_tells_its_hooks_and_prints_nothing(
    applicable: tuple[Path, Path], capfd: pytest.CaptureFixture[str]
) -> None:
    engine, patches = applicable
    original = make_tree(engine)  # beside the patch's file: an interrupted transaction on other files
    _kill_after_journal(engine)
    (patches / "not-a-patch").mkdir()
    told = Told()
    capfd.readouterr()
    answer = run_command(request(Action.APPLY, engine, patches, None), told.hooks())
    assert capfd.readouterr() == ("", "")  # core code never prints
    assert len(told.recoveries) == 1 and told.recoveries[0].message
    assert told.strays == [patches / "not-a-patch"]
    assert answer.exit_code is ExitCode.OK
    assert answer.commands.root == ("--root", str(engine)) and answer.commands.patches == str(patches.absolute())
    assert (engine / "eng/mod.py").read_bytes() == AFTER["eng/mod.py"]
    assert (engine / "pkg/a.py").read_bytes() == original["pkg/a.py"][1]  # rolled back before the run


def test_one_patch_answers_with_its_outcome_and_exit_code(applicable: tuple[Path, Path]) -> None:
    engine, patches = applicable
    told = Told()
    status = run_command(request(Action.STATUS, engine, patches, "one-pr1"), told.hooks())
    assert isinstance(status.result, Outcome) and status.result.tree.state is PatchState.UNAPPLIED
    assert status.exit_code is ExitCode.UNAPPLIED
    applied = run_command(request(Action.APPLY, engine, patches, "one-pr1", fast_restart=True), told.hooks())
    assert isinstance(applied.result, Outcome) and applied.result.result is Result.APPLIED
    again = run_command(request(Action.APPLY, engine, patches, "one-pr1", fast_restart=True), told.hooks())
    assert isinstance(again.result, Outcome) and again.result.fast_path
    assert told.recoveries == [] and told.strays == []


def test_the_fast_path_debug_line_survives_a_closed_stderr(applicable: tuple[Path, Path]) -> None:
    """PATCHKIT_DEBUG_FASTPATH's line goes through the console's writer: a stderr whose reader went away is
    silenced, and the exit code stays the command's."""
    engine, patches = applicable
    assert cli("apply", "one-pr1", "--root", engine, "--patches", patches).code == 0
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the command writes a byte
    try:
        done = subprocess.run(
            [sys.executable, "-m", "patchkit", "apply", "one-pr1", "--root", str(engine), "--patches", str(patches)],
            stdout=subprocess.PIPE, stderr=write, check=False,
            env={**os.environ, "PATCHKIT_DEBUG_FASTPATH": "1", "PYTHONPATH": os.pathsep.join(sys.path)},
        )
    finally:
        os.close(write)
    assert done.returncode == 0
    assert b"already applied" in done.stdout
