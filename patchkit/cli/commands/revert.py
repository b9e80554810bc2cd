from __future__ import annotations

import click

from patchkit.cli.commands.options import Selection, keep_going_option, patch_command_options, run_patch_command
from patchkit.outcome import Action
from patchkit.run.actions import Options


@click.command("revert")
@patch_command_options
@click.option("--dry-run", is_flag=True, help="Check and show what would be written; write nothing.")
@click.option("--complete", is_flag=True, help="On a partially patched tree, revert the applied hunks.")
@click.option("--force", is_flag=True, help="Revert a change patchkit did not apply (no applied record).")
@keep_going_option
def command(
    selection: Selection, root: str, patches_dir: str | None, as_json: bool, lock_timeout: float,
    dry_run: bool, complete: bool, force: bool, keep_going: bool,
) -> None:
    """Take PATCH's filtered hunk set back out of the tree at --root. The mirror image of apply.

    Applied: restores the pre-image, exit 0. Not applied: writes nothing, exit 0. Partial, conflict or
    ambiguous: writes nothing, exit 1. When the tree holds another version of the patch (its applied record
    names another hunk set), revert takes out that version, using the copy of the diff stored when it was
    applied; then the new version can be applied. A successful revert removes the record. A tree that had the
    change before patchkit applied anything (no record: upstream-contains or applied outside patchkit) is refused
    unless --force is given; for a change a script made, `apply --adopt` first records it.

    With --all: every patch of the registry (or of --target), in reverse `after` order, as one transaction.

    \b
    Examples:
      patchkit revert atom-pr2106 --root /opt/ATOM
      patchkit revert --all --root /opt/ATOM
    """
    options = Options(dry_run=dry_run, complete=complete, lock_timeout=lock_timeout, force=force)
    run_patch_command(Action.REVERT, selection, root, patches_dir, as_json, options, keep_going)
