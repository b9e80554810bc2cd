"""A patch command's answer as printed: the text report or the JSON document of one patch or a series.

All of it goes through the console's error-safe writer (console.echo); the words and the JSON come from
speak.report. Decides nothing: run.command.run_command decided, and the exit code is the answer's.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from patchkit.errors import ExitCode
from patchkit.outcome import Action, PatchState, Result
from patchkit.run.actions import Outcome
from patchkit.speak.console import echo, settings
from patchkit.speak.report import (
    cause_lines,
    change_lines,
    hunk_table,
    outcome_json,
    provenance_line,
    render_json,
    series_json,
    series_lines,
    series_status_table,
    strict_base_lines,
    summary_line,
    table_hint,
    table_totals,
    versioned,
)

if TYPE_CHECKING:
    from patchkit.run.actions import Invocation
    from patchkit.run.command import Answer
    from patchkit.run.series import SeriesOutcome
    from patchkit.workspace.recovery import Recovery


def emit_answer(answer: Answer, as_json: bool, verbose: bool) -> None:
    """The report of one patch's outcome or of a series' (run.command.Answer)."""
    if isinstance(answer.result, Outcome):
        emit_outcome(answer.result, as_json, verbose, answer.commands)
    else:
        emit_series(answer.result, as_json, verbose, answer.commands)


def emit_recovery(recovery: Recovery | None) -> None:
    """The interrupted transaction a run rolled back, on stderr."""
    if recovery is not None:
        echo(f"patchkit: {recovery.message}", err=True)


def emit_fast_path(used: bool) -> None:
    """With PATCHKIT_DEBUG_FASTPATH set: say on stderr whether the restart fast path answered (for tests)."""
    if os.environ.get("PATCHKIT_DEBUG_FASTPATH"):
        echo(f"patchkit: debug: fast path {'used' if used else 'not used'}", err=True)


def emit_outcome(outcome: Outcome, as_json: bool, verbose: bool, commands: Invocation | None = None) -> None:
    """One line; on a refusal the cause first (the whole table with -v); with --dry-run the files it would
    write. -q prints only a refusal's lines."""
    emit_recovery(outcome.recovered)
    emit_fast_path(outcome.fast_path)
    if as_json:
        echo(render_json(versioned(outcome_json(outcome))))
        return
    refused = outcome.result is Result.REFUSED
    if settings().quiet and not (refused or outcome.exit_code is ExitCode.BASE_MISMATCH):
        return
    echo(summary_line(outcome))
    line = provenance_line(outcome, verbose, commands)
    if line is not None:
        echo(line)
    lines = strict_base_lines(outcome)
    if verbose:
        table = hunk_table(outcome)
        lines += table + table_totals(outcome, table)
    elif refused or outcome.reason:  # a status can have a reason too (a file not under the root)
        lines += cause_lines(outcome)
        if outcome.tree.state is not PatchState.UNAPPLIED:  # a provenance refusal: the hunks are not the cause
            lines.append(table_hint(outcome, commands))
    if outcome.result is Result.DRY_RUN:
        lines += change_lines(outcome)
    if lines:  # one write: -v prints a row per hunk (ten thousand on a large patch)
        echo("\n".join(lines))


def emit_series(series: SeriesOutcome, as_json: bool, verbose: bool, commands: Invocation | None = None) -> None:
    """The series' lines (status: its table); -q prints only what was left or a base mismatch."""
    emit_recovery(series.recovered)
    emit_fast_path(bool(series.outcomes) and all(o.fast_path for o in series.outcomes))
    if as_json:
        echo(render_json(versioned(series_json(series))))
        return
    if settings().quiet and not (series.left or series.exit_code is ExitCode.BASE_MISMATCH):
        return
    table = series_status_table if series.action is Action.STATUS else series_lines
    echo("\n".join(table(series, verbose, commands)))  # one write: -v prints a row per hunk
