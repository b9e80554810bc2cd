"""How a patch command runs and answers, without click: the status, apply and revert commands end here
(cli/commands/options.py `run_patch_command`), and so does the first-status entry below.

Why the entry exists (issue #36, item 2; docs/performance.md): a container's first `status ID` / `status --all`
computes its answer without click, yet the full CLI imports click (~20 ms of CPU of a ~300 ms first status on
the benchmark's history size) only to parse the arguments and print. So the program (cli/start.py) offers a
`status` here first: the command line the restart entry knows (cli/argv.py: ID or --all, --root, --patches, -q,
-v, --json; no terminal, no FORCE_COLOR, none of the environment the full CLI reads otherwise) runs the very
pipeline the status command runs (`answer_request`), speaks through the same speak/ layer (click-free:
speak/console.py writes what click.echo writes) and ends through the same error boundary (cli/boundary.py).
Anything else returns None before anything runs: the full CLI runs from the start. tests/test_status_entry.py
compares stdout, stderr and the exit code with the full CLI's in every mode this answers.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from patchkit.cli.argv import full_cli_decides, parse_request
from patchkit.cli.boundary import error_code
from patchkit.input.registry import stray_folders
from patchkit.outcome import Action
from patchkit.run.actions import Options
from patchkit.run.command import Hooks, Request, cycles_uncollected, run_command
from patchkit.speak.answer import emit_answer, emit_recovery
from patchkit.speak.console import Settings, print_lock_wait, progress, settings, use_settings, warn
from patchkit.workspace.interrupts import sigterm_as_interrupt
from patchkit.workspace.lock import DEFAULT_LOCK_TIMEOUT


def answer_status(argv: Sequence[str]) -> int | None:
    """The exit code of `status ...` answered here (its report printed), or None: the full CLI must run."""
    asked = parse_request(argv, "status")
    if asked is None or full_cli_decides():
        return None
    use_settings(Settings(quiet=asked.quiet, verbose=asked.verbose, json=asked.as_json))
    options = Options(lock_timeout=DEFAULT_LOCK_TIMEOUT, strict_base=False)  # the status command's defaults
    request = Request(Action.STATUS, asked.patch, None, Path(asked.root), root_words(asked.root), asked.patches,
                      options)
    try:
        with sigterm_as_interrupt():  # docker stop / Kubernetes: as the full CLI's boundary (cli.main) does
            return answer_request(request, asked.as_json)
    except (Exception, KeyboardInterrupt) as exc:  # the full CLI's boundary's words and codes
        return error_code(exc)


def answer_request(request: Request, as_json: bool) -> int:
    """Run the request with run.command.run_command, print its answer (speak.answer); its exit code."""
    with cycles_uncollected():
        with progress() as shown:
            # Who the command waits for is said on a terminal's progress line, or as a plain line (a container's log).
            on_wait = shown.lock_wait if shown is not None else print_lock_wait
            answer = run_command(request, Hooks(emit_recovery, warn_stray_folder, on_wait, shown))
        emit_answer(answer, as_json, settings().verbose)
    return int(answer.exit_code)


def root_words(root: str, package: str | None = None, python: str | None = None) -> tuple[str, ...]:
    """The options that name the tree again from any folder: --root as an absolute path, or the same
    --root-from-package (with --python, absolute when it is a path rather than a name looked up in PATH)."""
    if package is None:
        return ("--root", str(Path(root).absolute()))
    if python is None:
        return ("--root-from-package", package)
    return ("--root-from-package", package, "--python", str(Path(python).absolute()) if os.sep in python else python)


def warn_stray_folders(folder: Path) -> None:
    """A folder of the registry without manifest.toml is not a patch: say so rather than skip it silently."""
    for stray in stray_folders(folder):
        warn_stray_folder(stray)


def warn_stray_folder(stray: Path) -> None:
    warn(f"{stray.absolute()}: no manifest.toml, so it is not a patch; skipped")
