"""The click group: options in, one call, a report out, an exit code. No logic beyond wiring.

This is the one error boundary: a PatchkitError becomes `patchkit: error: ...` on stderr and its exit code;
nothing below here prints or exits.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from patchkit import __version__
from patchkit.errors import ExitCode, PatchkitError

# The command modules under patchkit.commands, each exposing `command`; add a new command here. A module is
# imported only when its command runs (all of them for --help): `patchkit --version` then costs little more
# than click, and a command does not pay for the others' imports.
COMMAND_MODULES = ("status", "apply", "revert", "list_", "demo", "lint", "vendor", "new")


def command_name(module: str) -> str:
    """The command a module is expected to define: `list_` -> `list`, `foo_bar` -> `foo-bar`."""
    return module.rstrip("_").replace("_", "-")


class _Group(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        for module in COMMAND_MODULES:
            self._load(module)
        return super().list_commands(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            for module in COMMAND_MODULES:
                if command_name(module) == cmd_name:
                    self._load(module)
        if cmd_name not in self.commands:  # a module whose command is named otherwise: load them all
            self.list_commands(ctx)
        return super().get_command(ctx, cmd_name)

    def _load(self, module: str) -> None:
        command = importlib.import_module(f"patchkit.commands.{module}").command
        if command.name not in self.commands:  # one added by hand (add_command) wins
            self.add_command(command)

    def invoke(self, ctx: click.Context) -> Any:
        from patchkit.interrupts import Terminated, sigterm_as_interrupt  # not needed for --version

        try:
            with sigterm_as_interrupt():  # docker stop / Kubernetes: roll back like Ctrl-C, not die mid-write
                return super().invoke(ctx)
        except PatchkitError as exc:
            click.echo(f"patchkit: error: {exc}", err=True)
            ctx.exit(int(exc.exit_code))
        except KeyboardInterrupt as exc:  # Terminated is one: SIGTERM
            what = "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"
            click.echo(f"patchkit: {what}; {exc or 'nothing was left half written'}", err=True)
            ctx.exit(int(ExitCode.TERMINATED if isinstance(exc, Terminated) else ExitCode.INTERRUPTED))


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="patchkit")
def main() -> None:
    """Idempotent engine-patch manager.

    A patch is a folder with manifest.toml and a diff. patchkit applies exactly the diff minus the manifest's
    excluded files (the filtered hunk set), recognises a tree that already has it, and refuses to touch a
    tree it cannot explain.

    \b
    Examples:
      patchkit status atom-pr2106 --root /opt/ATOM
      patchkit apply  atom-pr2106 --root /opt/ATOM      # a rerun is a no-op, exit 0
      patchkit revert atom-pr2106 --root /opt/ATOM
    """


def run(argv: list[str] | None = None) -> int:
    """Entry point for tests and embedding: returns the exit code instead of exiting."""
    try:
        code = main.main(args=argv, prog_name="patchkit", standalone_mode=False)
    except click.ClickException as exc:
        exc.show()
        return int(ExitCode.BAD_INPUT)
    except click.exceptions.Abort:
        return 130
    return code if isinstance(code, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run())
