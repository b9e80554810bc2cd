"""Where the program starts (the console script, `python -m patchkit`, patchkit.pyz): an `apply` is first offered
to the restart entry (patchkit.cli.restart), which answers a restart the records vouch for before click loads,
and a `status` to the first-status entry (patchkit.cli.patch_run), which runs the status pipeline and speaks
without click; anything else, and anything they decline, runs the full CLI (patchkit.cli.main). Nothing of
patchkit is imported here, so `--version` pays nothing for either shortcut, nor a `status` for the restart's.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence


def entry() -> None:
    """The `patchkit` program: the restart entry's answer or the first-status entry's if either has one, else
    the full CLI."""
    argv = sys.argv[1:]
    if argv[:1] == ["apply"]:
        from patchkit.cli.restart import answer  # lazy: the CLI (only an `apply` may be a restart the records answer)

        pieces = answer(argv)
        if pieces is not None:
            leave(pieces)
    elif argv[:1] == ["status"]:
        from patchkit.cli.boundary import collect_rarely  # lazy: the CLI (a first status answered without click)
        from patchkit.cli.boundary import leave as end

        collect_rarely()  # before the pipeline's imports, as cli.main.entry does before click's
        from patchkit.cli.patch_run import answer_status  # lazy: the CLI (a first status answered without click)

        code = answer_status(argv)
        if code is not None:
            end(code)
    from patchkit.cli.main import entry as full_entry  # lazy: the CLI (a restart the records answer skips it)

    full_entry()


def leave(pieces: Sequence[bytes]) -> None:
    """Print the restart's answer (its bytes, in pieces: a --json answer's `files` is written as it was read)
    and end the process at once with exit 0, as cli.main.entry ends a run."""
    try:
        out = sys.stdout.buffer
        for piece in pieces:
            out.write(piece)
        out.flush()
    except BrokenPipeError:  # a closed pipe: the outcome's code stands, as on the full path
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except OSError as exc:  # a full disk, EIO: an output error, as the full path reports it
        with contextlib.suppress(OSError):
            os.write(2, f"patchkit: error: cannot write the output: {exc.strerror or exc}\n".encode())
        os._exit(11)  # ExitCode.OUTPUT_FAILED (patchkit.errors is not imported on this path)
    os._exit(0)
