"""Drive `patchkit lint` through the real CLI group (its error boundary included) on fixture registries."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from patchkit.cli.commands import lint as lint_command
from patchkit.cli.main import main

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures" / "lint"

# Until cli/main.py lists `lint` in _register() (test_cli_registers_lint checks it), register it here so the
# scenarios still run through the real group and its PatchkitError -> exit code boundary.
if "lint" not in main.commands:
    main.add_command(lint_command.command)


@dataclass(frozen=True)
class Run:
    exit_code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)

    def codes(self) -> list[str]:
        return [f["rule"] for f in self.json()["findings"]]


def lint(*args: str, env: dict[str, str | None] | None = None) -> Run:
    result = CliRunner().invoke(main, ["lint", *args], env=env, catch_exceptions=False)
    return Run(result.exit_code, result.stdout, result.stderr)


def lint_scenario(scenario: str | Path, *args: str, env: dict[str, str | None] | None = None) -> Run:
    """Lint a scenario folder from inside it, as CI runs in a repository's root: paths read `waivers/N.md`."""
    root = scenario if isinstance(scenario, Path) else FIXTURES / scenario
    with _chdir(root):
        return lint("--patches", "patches", "--waivers", "waivers", *args, env=env)


@contextlib.contextmanager
def _chdir(path: Path) -> Iterator[None]:
    """contextlib.chdir, which Python 3.10 lacks."""
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def copy_scenario(scenario: str, destination: Path) -> Path:
    target = destination / scenario
    shutil.copytree(FIXTURES / scenario, target)
    return target


def findings(run: Run, code: str) -> list[dict[str, Any]]:
    """The JSON findings of one rule (run must have used --format json)."""
    return [f for f in run.json()["findings"] if f["rule"] == code]


def isolate_env(monkeypatch: Any) -> None:
    """Tests must not see the registry settings or pull-request variables of the shell or CI running them."""
    from patchkit.lint.ci import ENV_VARIABLES

    for name in ("PATCHKIT_PATCHES", "PATCHKIT_WAIVERS", *ENV_VARIABLES):
        monkeypatch.delenv(name, raising=False)
