"""Cold start: `patchkit --version` loads no command module, and every registered command module loads."""

from __future__ import annotations

import json
import subprocess
import sys

import click

from patchkit import cli

PROBE = """
import json, sys
from patchkit.cli import run
run(["--version"])
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("patchkit", "unidiff", "git"))))
"""


def test_version_imports_only_the_cli() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout
    loaded = json.loads(out.splitlines()[-1])
    assert loaded == ["patchkit", "patchkit.cli", "patchkit.console", "patchkit.errors"]


def test_every_registered_module_gives_its_command() -> None:
    ctx = click.Context(cli.main)
    for module in cli.COMMAND_MODULES:
        name = cli.command_name(module)
        command = cli.main.get_command(ctx, name)
        assert command is not None and command.name == name, module
    assert set(cli.main.list_commands(ctx)) >= {cli.command_name(m) for m in cli.COMMAND_MODULES}


def test_unknown_command_is_still_a_usage_error() -> None:
    assert cli.main.get_command(click.Context(cli.main), "no-such-command") is None
