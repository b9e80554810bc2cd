from __future__ import annotations

import click

from patchkit.cli.commands.options import (
    Selection,
    keep_going_option,
    patch_command_options,
    run_patch_command,
    strict_base_option,
)
from patchkit.outcome import Action
from patchkit.run.actions import Options
from patchkit.speak.console import settings


@click.command("apply")
@patch_command_options
@click.option("--dry-run", is_flag=True, help="Check and show what would be written; write nothing.")
@click.option("--complete", is_flag=True, help="On a partially patched tree, apply the missing hunks.")
@click.option("--adopt", is_flag=True,
              help="On a tree that already has the change with no record (patched by a script or by hand): "
              "write patchkit's record of it, never the engine. Unapplied patches are applied as usual.")
@strict_base_option
@keep_going_option
def command(
    selection: Selection, root: str, patches_dir: str | None, as_json: bool, lock_timeout: float,
    dry_run: bool, complete: bool, strict_base: bool, keep_going: bool, adopt: bool,
) -> None:
    """Apply PATCH's filtered hunk set to the tree at --root. A rerun is a no-op.

    Unapplied: writes every hunk (all checked before the first byte is written), exit 0. Already applied:
    writes nothing, exit 0. Partial, conflict or ambiguous: writes nothing, exit 1, with a per-hunk report.
    A tree holding another version of the patch (a stale record) is refused, exit 1: revert it first.
    With --strict-base, a tree that is not verifiably the pinned base is refused, exit 9. With --adopt, a tree
    that already has the change but no record (applied outside patchkit) gets its record, engine untouched.

    With --all (the container pre-launch hook): every patch of the registry (or of --target), in `after` order,
    stacked, checked together and written as one transaction; one line per patch. Exit 0 when every patch ends
    applied; 1 when one is refused, and then nothing is written unless --keep-going.

    \b
    Examples:
      patchkit apply atom-pr2106 --root /opt/ATOM
      PATCHKIT_ROOT=/opt/ATOM PATCHKIT_TARGET=ATOM patchkit apply --all
    """
    options = Options(
        dry_run=dry_run, complete=complete, lock_timeout=lock_timeout, strict_base=strict_base, adopt=adopt,
        fast_restart=True, show_verdicts=as_json or settings().verbose,  # a restart shows the records' verdicts
        verdict_rows=settings().verbose and not as_json,
    )
    run_patch_command(Action.APPLY, selection, root, patches_dir, as_json, options, keep_going)
