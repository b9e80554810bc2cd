"""The click group: options in, one call, a report out, an exit code. No logic beyond wiring.

This is the one error boundary: a PatchkitError becomes `patchkit: error: ...` on stderr and its exit code;
nothing below here prints or exits.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from patchkit import __version__
from patchkit.errors import ExitCode, PatchkitError


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except PatchkitError as exc:
            click.echo(f"patchkit: error: {exc}", err=True)
            ctx.exit(int(exc.exit_code))
        except KeyboardInterrupt:
            click.echo("patchkit: interrupted", err=True)
            ctx.exit(130)


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


def _register() -> None:
    # Imported here so `patchkit --version` stays cheap; every command module is small and imports its heavy
    # dependencies lazily.
    from patchkit.commands import apply, demo, list_, revert, status

    for module in (status, apply, revert, list_, demo):
        main.add_command(module.command)


_register()


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
