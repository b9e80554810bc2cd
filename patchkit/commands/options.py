"""Options shared by several commands, as decorators, and the one way a patch command runs and reports."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import click
from click.core import ParameterSource

from patchkit.actions import Action, Options, Outcome, run
from patchkit.provenance import locate_distribution_root
from patchkit.registry import find_locations, resolve_patch
from patchkit.report import hunk_table, outcome_json, provenance_line, render_json, summary_line
from patchkit.workspace import DEFAULT_LOCK_TIMEOUT, Recovery, recover_pending

F = TypeVar("F", bound=Callable[..., Any])


def patches_option(func: F) -> F:
    return click.option(
        "--patches", "patches_dir", metavar="DIR",
        help="Registry folder of patches (default: $PATCHKIT_PATCHES, [tool.patchkit] patches, ./patches).",
    )(func)


def json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")(func)


def patch_command_options(func: F) -> F:
    """PATCH, --root or --root-from-package, --patches, --json, -v, --lock-timeout: what status, apply and revert
    share. The command receives the chosen tree as `root`."""
    decorators = [
        click.argument("patch"),
        click.option(
            "--root", metavar="DIR", envvar="PATCHKIT_ROOT", show_envvar=True,
            help="The engine source tree the diff's paths are relative to.",
        ),
        click.option(
            "--root-from-package", metavar="NAME",
            help="Instead of --root: the install folder of Python distribution NAME (its source checkout if "
            "installed editable, else the site-packages folder holding its package), found without importing it.",
        ),
        patches_option,
        json_option,
        click.option("-v", "--verbose", is_flag=True, help="Show the per-file, per-hunk table."),
        click.option(
            "--lock-timeout", type=click.FloatRange(min=0), default=DEFAULT_LOCK_TIMEOUT, show_default=True,
            metavar="SECONDS", help="How long to wait for another patchkit process on the same root.",
        ),
    ]
    func = _one_root(func)
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


def _one_root(func: F) -> F:
    """Fold --root / --root-from-package into the one `root` argument the command takes."""

    @functools.wraps(func)
    def wrapper(*args: Any, root: str | None, root_from_package: str | None, **kwargs: Any) -> Any:
        return func(*args, root=choose_root(root, root_from_package), **kwargs)

    return cast(F, wrapper)


def choose_root(root: str | None, package: str | None) -> str:
    """Exactly one of --root and --root-from-package; $PATCHKIT_ROOT counts only when neither is given."""
    if package is not None:
        from_env = click.get_current_context().get_parameter_source("root") is ParameterSource.ENVIRONMENT
        if root is not None and not from_env:
            raise click.UsageError("--root and --root-from-package exclude each other; give one of them")
        return str(locate_distribution_root(package))
    if root is None:
        raise click.UsageError(
            "which engine tree? give --root DIR (or set PATCHKIT_ROOT) or --root-from-package NAME"
        )
    return root


def strict_base_option(func: F) -> F:
    return click.option(
        "--strict-base", is_flag=True,
        help="Exit 9 (apply: and write nothing) unless the tree is verifiably the pinned base: HEAD is "
        "target.pinned_commit, or the files the diff reads match the manifest's [base] fingerprint.",
    )(func)


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
    # An interrupted transaction is undone before anything else, even if the manifest turns out broken.
    emit_recovery(recover_pending(Path(root), options.lock_timeout))
    spec = resolve_patch(patch, find_locations(patches=patches_dir).patches)
    outcome = run(spec, Path(root), action, options)
    emit_outcome(outcome, as_json, verbose)
    click.get_current_context().exit(int(outcome.exit_code))


def emit_recovery(recovery: Recovery | None) -> None:
    if recovery is not None:
        click.echo(f"patchkit: {recovery.message}", err=True)


def emit_outcome(outcome: Outcome, as_json: bool, verbose: bool) -> None:
    emit_recovery(outcome.recovered)
    if as_json:
        click.echo(render_json(outcome_json(outcome)))
        return
    click.echo(summary_line(outcome))
    line = provenance_line(outcome, verbose)
    if line is not None:
        click.echo(line)
    if verbose or outcome.reason:
        for row in hunk_table(outcome):
            click.echo(row)
