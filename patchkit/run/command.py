"""A patch command (status, apply, revert) from its request to its answer, printing nothing.

The engine root is opened once for the whole command; an interrupted transaction is undone before anything
else; the registry is found; then PATCH runs alone (actions.run) or the --all series does (series.run_series).
What the CLI shows on the way (the recovery, a registry folder that is not a patch, the lock wait, the phases)
it is told through `Hooks`; what it prints at the end is the `Answer`'s (speak.answer).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from patchkit.input.registry import find_locations, resolve_patch, stray_folders
from patchkit.input.tree import Root, open_root
from patchkit.outcome import Action
from patchkit.run.actions import Invocation, Options, Outcome, run
from patchkit.run.progress import Progress
from patchkit.workspace.lock import LockWait, WaitHook, recover_pending

if TYPE_CHECKING:
    from patchkit.errors import ExitCode
    from patchkit.run.series import SeriesOutcome
    from patchkit.workspace.recovery import Recovery


@dataclass(frozen=True)
class Request:
    """What a patch command was asked: the action, PATCH or (patch None) --all narrowed by --target, the tree
    and how it was named, the registry option, and the action's options."""

    action: Action
    patch: str | None
    target: tuple[str, ...] | None  # --target values of an --all run; None: every target
    root: Path
    root_words: tuple[str, ...]  # the options that name the tree again from any folder (Invocation.root)
    patches_dir: str | None  # --patches as given; None: the registry's defaults (input.registry.find_locations)
    options: Options
    keep_going: bool = False


class Hooks(NamedTuple):  # immutable, as Invocation
    """How the command tells the CLI what happens while it runs (core code never prints)."""

    on_recovery: Callable[[Recovery], None]  # an interrupted transaction was rolled back before the run
    on_stray_folder: Callable[[Path], None]  # --all: a registry folder without manifest.toml, skipped
    on_lock_wait: WaitHook  # told once who holds the lock, after ~1 s of waiting
    progress: Progress | None = None  # the phases of a long run


@dataclass(frozen=True)
class Answer:
    """What the command found and did: one patch's Outcome or the series', and the invocation its messages
    spell suggested commands with."""

    result: Outcome | SeriesOutcome
    commands: Invocation

    @property
    def exit_code(self) -> ExitCode:
        return self.result.exit_code


def run_command(request: Request, hooks: Hooks) -> Answer:
    """Run the request's action on its tree: open the root, undo an interrupted transaction, find the registry,
    then run PATCH or the series. Errors propagate (PatchkitError, each with its exit code) to the CLI."""
    # One wait for the whole command: --lock-timeout is the time it waits in all, and who it waits for is said
    # once (hooks.on_lock_wait).
    options = replace(
        request.options, on_lock_wait=hooks.on_lock_wait,
        lock_wait=LockWait(request.options.lock_timeout, hooks.on_lock_wait),
    )
    # The root is opened here, once for the whole command: the lock, the state folder, recovery, every read and
    # the transaction work on this descriptor (tree.Root), and it is closed when the command ends.
    with open_root(request.root) as handle:
        # An interrupted transaction is undone before anything else, even if the manifest turns out broken.
        recovery = recover_pending(handle, options.lock_patience())
        if recovery is not None:
            hooks.on_recovery(recovery)
        patches = find_locations(patches=request.patches_dir).patches
        commands = Invocation.of(request.root_words, patches, request.target)
        options = replace(options, invocation=commands)
        if request.patch is None:
            return Answer(_run_series(request, handle, patches, options, hooks), commands)
        spec = resolve_patch(request.patch, patches)
        return Answer(run(spec, handle, request.action, options, progress=hooks.progress), commands)


def _run_series(request: Request, handle: Root, patches: Path, options: Options, hooks: Hooks) -> SeriesOutcome:
    """--all: every patch of the registry (or of --target), in `after` order, as one series."""
    from patchkit.run.series import load_series, run_series  # lazy: the CLI (only --all runs a series)

    for stray in stray_folders(patches):
        hooks.on_stray_folder(stray)
    specs = load_series(patches, request.target)
    return run_series(specs, handle, request.action, options, keep_going=request.keep_going, progress=hooks.progress)


@contextlib.contextmanager
def cycles_uncollected() -> Iterator[None]:
    """The cyclic garbage collector off for a patch command, and on again after it (for embedders and tests).

    A short-lived command whose data (the hunk set, the files) holds no reference cycles: the collector's passes
    over it are pure cost (about 5% of a large status; docs/performance.md)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
