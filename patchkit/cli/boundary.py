"""The error boundary's words and codes, without click: a PatchkitError becomes `patchkit: error: ...` on stderr
and its exit code, an interrupt 130/143, a closed stdout 141, any other exception (a bug) one "internal error,
please report" line and exit 10; under --json each is also a JSON object on stdout. The click group
(cli/main.py, `_Group.invoke` and `_Group.main`) and the first-status entry (cli/patch_run.py) both end a
command through `error_code` and `leave`, so an error reads the same on either route.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from typing import NoReturn

from patchkit.errors import ExitCode, OutputError, PatchkitError
from patchkit.speak.console import echo, settings, silence

PIPE_CLOSED = 141  # as a shell reports a process that SIGPIPE ended
GC_FIRST_GENERATION = 200_000  # see collect_rarely()
REPORT_HINT = "this is a bug in patchkit: please report it with the traceback (rerun with PATCHKIT_TRACEBACK=1)"


def error_code(exc: Exception | KeyboardInterrupt) -> int:
    """What the boundary says for an exception a running command raised, and the exit code it ends with."""
    if isinstance(exc, PatchkitError):
        # one raised on purpose where patchkit caught itself contradicting itself is still a bug
        return emit_internal(exc) if exc.exit_code is ExitCode.INTERNAL else emit_error(exc)
    if isinstance(exc, KeyboardInterrupt):  # Terminated is one: SIGTERM
        return emit_interrupt(exc)
    if isinstance(exc, BrokenPipeError):  # output that bypassed console.echo: the outcome's code is lost
        silence("stdout")
        return PIPE_CLOSED
    return emit_internal(exc)  # the one place a bug becomes exit 10, not "refused"


def emit_error(exc: PatchkitError) -> int:
    from patchkit.speak.report import error_json, render_json  # lazy: the CLI (with a command or an error only)

    code = int(exc.exit_code)
    if settings().json:
        tell(render_json(error_json(exc.message, code, exc.where, exc.hint)))
    tell(f"patchkit: error: {exc}", err=True)
    return code


def tell(message: str, *, err: bool = False) -> None:
    """echo for the error boundary: a report that cannot be written is lost, and the exit code still says
    what happened (the error's own code, not the output's)."""
    with contextlib.suppress(OutputError):
        echo(message, err=err)


def emit_interrupt(exc: KeyboardInterrupt) -> int:
    """SIGINT (130) or SIGTERM (143): a write in progress was rolled back first."""
    from patchkit.speak.report import error_json, render_json  # lazy: the CLI (with a command or an error only)
    from patchkit.workspace.interrupts import Terminated  # lazy: the CLI (with a command or an error only)

    terminated = isinstance(exc, Terminated)
    what = "terminated (SIGTERM)" if terminated else "interrupted"
    code = int(ExitCode.TERMINATED if terminated else ExitCode.INTERRUPTED)
    # The write stage says what became of a write it was in (workspace.commit); before it, nothing was written.
    happened = str(exc) or "stopped before the write phase: nothing was written"
    if settings().json:
        tell(render_json(error_json(f"{what}; {happened}", code, None, "rerun the command; it is safe to repeat")))
    tell(f"patchkit: {what}; {happened}", err=True)
    return code


def emit_internal(exc: BaseException, as_json: bool | None = None) -> int:
    """One line (the traceback only with -v or PATCHKIT_TRACEBACK=1) and exit 10."""
    from patchkit.speak.report import error_json, render_json  # lazy: the CLI (with a command or an error only)

    code = int(ExitCode.INTERNAL)
    summary = f"{type(exc).__name__}: {exc}"
    if settings().json if as_json is None else as_json:
        tell(render_json(error_json(f"internal error: {summary}", code, None, REPORT_HINT)))
    if settings().verbose or os.environ.get("PATCHKIT_TRACEBACK", "") not in ("", "0"):
        import traceback  # lazy: the CLI (only a bug's report shows one)

        tell("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip(), err=True)
    tell(f"patchkit: internal error, please report: {summary} "
         "(rerun with -v or PATCHKIT_TRACEBACK=1 for the traceback)", err=True)
    return code


def collect_rarely() -> None:
    """The program's collector runs every 200,000 allocations, not 700 (see cli.main.entry)."""
    gc.set_threshold(GC_FIRST_GENERATION, *gc.get_threshold()[1:])


def leave(code: int) -> NoReturn:
    """End the program with `code` once the output is flushed, skipping the interpreter's teardown (see
    cli.main.entry); a flush that fails takes the normal exit, which reports it."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # a closed pipe: the normal exit path reports it
        sys.exit(code)
    except OSError as exc:  # a full disk, EIO, on the last of the output: an output error, not a bug
        with contextlib.suppress(OSError):
            os.write(2, f"patchkit: error: cannot write the output: {exc.strerror or exc}\n".encode())
        os._exit(int(ExitCode.OUTPUT_FAILED))
    except BaseException:  # anything else: the normal exit path reports it
        sys.exit(code)
    os._exit(code)
