"""-q / -v / --color and --json as click options: their callbacks fill this run's output settings
(speak.console.settings), shared by the group and its subcommand, so `-v` works before or after the command name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from patchkit.speak.console import settings, use_colour, use_settings

F = TypeVar("F", bound=Callable[..., Any])


def _update(ctx: click.Context, **changes: Any) -> None:
    use_settings(replace(settings(), **changes))
    ctx.color = use_colour(settings().color)  # what click's own echo (demo's, help) takes


def _given(ctx: click.Context, param: click.Parameter) -> bool:
    return param.name is not None and ctx.get_parameter_source(param.name) is not ParameterSource.DEFAULT


def _on_quiet(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if _given(ctx, param) and value:
        if settings().verbose:
            raise click.UsageError("-q/--quiet and -v/--verbose exclude each other")
        _update(ctx, quiet=True)


def _on_verbose(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if _given(ctx, param) and value:
        if settings().quiet:
            raise click.UsageError("-q/--quiet and -v/--verbose exclude each other")
        _update(ctx, verbose=True)


def _on_color(ctx: click.Context, param: click.Parameter, value: str) -> None:
    if _given(ctx, param) or ctx.parent is None:  # the group's default too: NO_COLOR etc. apply to every echo
        _update(ctx, color=value)


def _on_json(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    json_when(ctx, value)
    return value


def json_when(ctx: click.Context, wanted: bool) -> None:
    """The command prints JSON (--json, lint --format json): its errors are JSON objects on stdout too."""
    if wanted:
        _update(ctx, json=True)


def json_format(json_value: str) -> Callable[[click.Context, click.Parameter, str], str]:
    """The callback of a --format option: choosing `json_value` makes the command's errors JSON too."""
    def callback(ctx: click.Context, param: click.Parameter, value: str) -> str:
        json_when(ctx, value == json_value)
        return value

    return callback


VERBOSE_HELP = {  # what -v adds, by where it is given
    "group": "More detail: status, apply and revert print the per-file, per-hunk table; tracebacks of internal "
    "errors.",
    "table": "More detail: the per-file, per-hunk table and provenance; tracebacks of internal errors.",
    "other": "More detail: the traceback of an internal error.",
}


def output_params(verbose_help: str = VERBOSE_HELP["group"]) -> list[click.Option]:
    """-q, -v and --color: on the group and on every command, so either place works."""
    return [
        click.Option(["-q", "--quiet"], is_flag=True, expose_value=False, callback=_on_quiet,
                     help="Only errors and refusals; no progress. The exit code says the rest."),
        click.Option(["-v", "--verbose"], is_flag=True, expose_value=False, callback=_on_verbose,
                     help=verbose_help),
        click.Option(["--color"], type=click.Choice(["auto", "always", "never"]), default="auto",
                     show_default=True, expose_value=False, callback=_on_color,
                     help="Colour: auto (a terminal, unless NO_COLOR or TERM=dumb; FORCE_COLOR forces), "
                     "always, never."),
    ]


def json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, callback=_on_json,
                        help="Print one JSON object on stdout (errors too).")(func)
