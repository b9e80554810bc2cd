from __future__ import annotations

import click

from patchkit.cli.commands.options import Selection, read_command_options, run_patch_command, strict_base_option
from patchkit.outcome import Action
from patchkit.run.actions import Options


@click.command("status")
@read_command_options
@strict_base_option
def command(
    selection: Selection, root: str, patches_dir: str | None, as_json: bool, lock_timeout: float,
    strict_base: bool,
) -> None:
    """Report whether PATCH is applied to the tree at --root. Writes nothing.

    Exit codes: 0 applied, 3 unapplied, 4 partial, 5 conflict (or ambiguous), 2 bad input; with --strict-base,
    9 when the tree is not verifiably the pinned base. An applied tree with no patchkit record reads as
    applied outside patchkit (exit 0; `apply --adopt` records it), or, when the base shows the engine moved
    on from the pinned one, as upstream-contains: the engine ships the change and the patch can be retired.

    With --all: one table of every patch (or those of --target), each judged on the tree as the patches before
    it leave it; the exit code is the worst patch state's.

    \b
    Examples:
      patchkit status atom-pr2106 --root /opt/ATOM -v
      patchkit status --all --root /opt/ATOM
    """
    options = Options(lock_timeout=lock_timeout, strict_base=strict_base)
    run_patch_command(Action.STATUS, selection, root, patches_dir, as_json, options)
