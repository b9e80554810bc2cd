"""The click group: options in, one call, a report out, an exit code. No logic beyond wiring.

This is the error boundary (`_Group.invoke` and `_Group.main`; its words and codes are cli/boundary.py's, which
the first-status entry, cli/patch_run.py, ends with too): a PatchkitError becomes `patchkit: error: ...` on
stderr and its exit code, a usage error exit 2, any other exception (a bug) one "internal error, please report"
line and exit 10, never the code for "refused"; under --json each is also a JSON object on stdout. A closed
stdout pipe does not change the exit code. Nothing below here prints or exits.
"""

from __future__ import annotations

import importlib
import itertools
import os
import sys
from typing import Any

import click

from patchkit import __version__
from patchkit.cli.boundary import (
    collect_rarely,
    emit_internal,
    error_code,
    leave,
    tell,
)
from patchkit.cli.flags import VERBOSE_HELP, output_params
from patchkit.display import closest
from patchkit.errors import ExitCode
from patchkit.speak.console import Settings, reset_streams, settings, use_settings

# The command modules under patchkit.cli.commands, each exposing `command`; add a new command here. A module is
# imported only when its command runs (all of them for --help): `patchkit --version` then costs little more
# than click, and a command does not pay for the others' imports.
COMMAND_MODULES = (
    "status", "apply", "revert", "show", "list_", "demo", "lint", "vendor", "new", "doctor", "port", "compile",
)
TABLE_COMMANDS = ("status", "apply", "revert")  # the commands whose -v prints the per-hunk table


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

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Each command's first sentence in full, wrapped to the width (click cuts it with "..." at ~45)."""
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.short_help or first_sentence(command.help or "")))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            close = suggest(name, self.list_commands(ctx))
            raise click.UsageError(f"no command {name!r}" + (f"; did you mean {close!r}?" if close else ""), ctx)
        return super().resolve_command(ctx, args)

    def _load(self, module: str) -> None:
        command = importlib.import_module(f"patchkit.cli.commands.{module}").command
        if command.name not in self.commands:  # one added by hand (add_command) wins
            self.add_command(command)

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        """Every command, however it is added, takes -q, -v and --color (unless it defines them itself)."""
        taken = {opt for p in cmd.params for opt in p.opts}
        verbose = VERBOSE_HELP["table" if cmd.name in TABLE_COMMANDS else "other"]
        cmd.params.extend(p for p in output_params(verbose) if not taken & set(p.opts))
        super().add_command(cmd, name)

    def invoke(self, ctx: click.Context) -> Any:
        """The error boundary for a running command (its settings known): errors become messages and codes."""
        from patchkit.workspace.interrupts import sigterm_as_interrupt  # lazy: the CLI (--version loads no more)

        try:
            with sigterm_as_interrupt():  # docker stop / Kubernetes: roll back like Ctrl-C, not die mid-write
                return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
            raise
        except (Exception, KeyboardInterrupt) as exc:  # a PatchkitError, an interrupt, a closed pipe, a bug
            ctx.exit(error_code(exc))

    def main(  # type: ignore[override]
        self, args: list[str] | None = None, prog_name: str | None = None, complete_var: str | None = None,
        standalone_mode: bool = True, **extra: Any,
    ) -> Any:
        """click's main, with usage errors and bugs before a command runs also turned into codes (and JSON)."""
        argv = list(sys.argv[1:] if args is None else args)
        reset_streams()
        outer = use_settings(Settings())  # this run's, filled by the options' callbacks (cli/flags.py)
        try:
            code = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
            code = code if isinstance(code, int) else 0
        except click.exceptions.Abort:
            code = int(ExitCode.INTERRUPTED)
        except click.ClickException as exc:
            code = emit_usage_error(exc, wants_json(argv), argv)
        except Exception as exc:  # the one place a bug becomes exit 10, not "refused" (see invoke)
            code = emit_internal(exc, wants_json(argv))
        finally:
            use_settings(outer)  # a run inside a run (demo's) leaves the outer run's settings as they were
        if standalone_mode:
            sys.exit(code)
        return code


def first_sentence(text: str) -> str:
    """A help text's first sentence, on one line: what `patchkit --help` lists for a command."""
    paragraph = " ".join(text.strip().split("\n\n")[0].split())
    head, dot, _ = paragraph.partition(". ")
    return head + "." if dot else paragraph


def wants_json(argv: list[str]) -> bool:
    """--json given, judged from the raw arguments (for errors raised before the options are parsed)."""
    if settings().json:
        return True
    args = argv[: argv.index("--")] if "--" in argv else argv
    return "--json" in args or "--format=json" in args or ("--format", "json") in itertools.pairwise(args)


def suggest(word: str, choices: list[str]) -> str | None:

    return closest(word, choices)


def emit_usage_error(exc: click.ClickException, as_json: bool, argv: list[str] | None = None) -> int:
    from patchkit.speak.report import error_json, render_json  # lazy: the CLI (with a command or an error only)

    code = int(ExitCode.BAD_INPUT)
    ctx = getattr(exc, "ctx", None)
    ctx = ctx if isinstance(ctx, click.Context) else None
    words = ctx.command_path.split()[1:] if ctx is not None else []
    message = usage_message(exc, ctx, argv or [])
    hint = f"see `{' '.join(['patchkit', *words, '--help'])}`"
    if as_json:
        tell(render_json(error_json(message, code, None, hint)))
    usage = ctx.get_usage().replace("Usage: ", "usage: ", 1) if ctx is not None else None
    tell("\n".join([f"patchkit: error: {message}", *([f"  {usage}"] if usage else []), f"  hint: {hint}"]), err=True)
    return code


def usage_message(exc: click.ClickException, ctx: click.Context | None, argv: list[str]) -> str:
    """A usage error in patchkit's words: an unknown option gets the did-you-mean that helps, among this
    command's options, else the commands that have it (`--json list`: give it after the command name)."""
    if not isinstance(exc, click.NoSuchOption) or ctx is None:
        return exc.format_message()
    name = exc.option_name
    command = ctx.command
    group_ctx = ctx if isinstance(command, click.Group) else ctx.parent
    group = group_ctx.command if group_ctx is not None else None
    owners: dict[str, list[str]] = {}  # option -> the other commands that take it
    if group_ctx is not None and isinstance(group, click.Group):
        for sub_name in group.list_commands(group_ctx):
            sub = group.get_command(group_ctx, sub_name)
            for opt in (o for p in (sub.params if sub is not None and sub is not command else []) for o in p.opts):
                owners.setdefault(opt, []).append(sub_name)
    mine = sorted({opt for p in command.params for opt in p.opts if opt.startswith("-")} | {"--help", "-h"})
    close = None if name in owners else suggest(name, mine)  # another command's own option beats a look-alike
    if close:
        return f"no such option {name}; did you mean {close}?"
    other = name if name in owners else suggest(name, sorted(owners))
    if other is None:
        return f"no such option {name}"
    where = ", ".join(owners[other])
    if isinstance(command, click.Group):
        typed = next((word for word in argv if word in owners[other]), owners[other][0])  # `--json list`: list
        return f"no such option {name} before the command name; {other} is an option of {where}: give it after " \
            f"the command, e.g. `patchkit {typed} {other}`"
    return f"no such option {name} for {ctx.info_name}; {other} is an option of {where}, not of {ctx.info_name}"


def install_folder() -> str:
    """The folder of the patchkit package that runs (a checkout, site-packages or inside patchkit.pyz), as
    `--version` and `doctor` name it: one answer for both."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the package, above cli/


def version_message() -> str:
    """What --version prints: the version (first line, as before), the interpreter, and the install folder
    (a checkout, site-packages or patchkit.pyz), so a bug report says which patchkit ran under which Python."""
    where = install_folder()
    python = f"Python {sys.version.split()[0]} ({sys.executable or 'unknown interpreter'})"
    return "%(prog)s, version %(version)s\n" + f"{python}\ninstalled in {where}".replace("%", "%%")



@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]}, params=output_params())
@click.version_option(__version__, "-V", "--version", prog_name="patchkit", message=version_message(),
                      help="Show patchkit's version, the Python running it and where it is installed, and exit.")
def main() -> None:
    """Idempotent engine-patch manager.

    A patch is a folder with manifest.toml and a diff. patchkit applies exactly the diff minus the manifest's
    excluded files (the filtered hunk set), recognises a tree that already has it, and refuses to touch a
    tree it cannot explain.

    \b
    Examples:
      patchkit status atom-pr2106 --root /opt/ATOM
      patchkit apply  atom-pr2106 --root /opt/ATOM    # a rerun: no-op, exit 0
      patchkit revert atom-pr2106 --root /opt/ATOM

    \b
    Exit codes: 0 ok (status: applied), 1 refused, 2 bad input, 3 unapplied,
    4 partial, 5 conflict, 6 lock timeout, 7 write failed (restored),
    8 recovery failed, 9 --strict-base, 10 internal error (a bug),
    11 output failed (stdout/stderr could not be written),
    12 lint: no shell parser (the lint extra).
    Shell completion (zsh_source, fish_source alike):
      eval "$(_PATCHKIT_COMPLETE=bash_source patchkit)"
    """


def entry() -> None:
    """The `patchkit` program (console script, `python -m patchkit`, patchkit.pyz): run, then leave at once.

    Once the command has returned, every file patchkit wrote is closed (and fsynced where it matters), the
    lock is released and the report printed: the interpreter's teardown (freeing every module and object,
    ~6 ms on a small status, more after a large one) changes nothing, so the output is flushed and the process
    ends with os._exit. If the flush fails (a closed pipe), the normal exit reports it as before. In-process
    callers (tests, click's CliRunner, embedders) use `main` or `run`, which never end the process this way.

    The cyclic garbage collector runs far less often (a first generation of 200,000 allocations, not 700):
    patchkit's data (hunks, images, records) is acyclic and freed by reference counting. A patch command
    already turns the collector off while it runs (run.command.cycles_uncollected); this covers the rest of the
    program, the imports and what follows the command, where collections still walked what a large diff
    becomes (~20 ms on a large fresh status, interleaved runs; ~2 ms on a small one; peak memory the same).
    Cycles are still collected, just later; in-process callers keep their own settings.
    """
    collect_rarely()
    leave(main.main(prog_name="patchkit", standalone_mode=False))


def run(argv: list[str] | None = None) -> int:
    """Entry point for tests and embedding: returns the exit code instead of exiting."""
    code = main.main(args=argv if argv is not None else sys.argv[1:], prog_name="patchkit", standalone_mode=False)
    return int(code)


if __name__ == "__main__":  # pragma: no cover
    entry()
