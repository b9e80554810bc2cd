"""Options shared by several commands, as decorators, and the one way a patch command runs and reports."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from patchkit.actions import Action, Options, Outcome, run
from patchkit.registry import find_locations, resolve_patch
from patchkit.report import hunk_table, outcome_json, render_json, summary_line
from patchkit.workspace import DEFAULT_LOCK_TIMEOUT

F = TypeVar("F", bound=Callable[..., Any])


def patches_option(func: F) -> F:
    return click.option(
        "--patches", "patches_dir", metavar="DIR",
        help="Registry folder of patches (default: $PATCHKIT_PATCHES, [tool.patchkit] patches, ./patches).",
    )(func)


def json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")(func)


def patch_command_options(func: F) -> F:
    """PATCH, --root, --patches, --json, -v, --lock-timeout: what status, apply and revert share."""
    decorators = [
        click.argument("patch"),
        click.option(
            "--root", required=True, metavar="DIR", envvar="PATCHKIT_ROOT", show_envvar=True,
            help="The engine source tree the diff's paths are relative to.",
        ),
        patches_option,
        json_option,
        click.option("-v", "--verbose", is_flag=True, help="Show the per-file, per-hunk table."),
        click.option(
            "--lock-timeout", type=click.FloatRange(min=0), default=DEFAULT_LOCK_TIMEOUT, show_default=True,
            metavar="SECONDS", help="How long to wait for another patchkit process on the same root.",
        ),
    ]
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


def run_patch_command(
    action: Action,
    patch: str,
    root: str,
    patches_dir: str | None,
    as_json: bool,
    verbose: bool,
    options: Options,
) -> None:
    """Resolve PATCH, run the action, print the report and exit with the outcome's code."""
    spec = resolve_patch(patch, find_locations(patches=patches_dir).patches)
    outcome = run(spec, Path(root), action, options)
    emit_outcome(outcome, as_json, verbose)
    click.get_current_context().exit(int(outcome.exit_code))


def emit_outcome(outcome: Outcome, as_json: bool, verbose: bool) -> None:
    if as_json:
        click.echo(render_json(outcome_json(outcome)))
        return
    click.echo(summary_line(outcome))
    if verbose or outcome.reason:
        for row in hunk_table(outcome):
            click.echo(row)
