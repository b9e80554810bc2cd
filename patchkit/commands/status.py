from __future__ import annotations

import click

from patchkit.actions import Action, Options
from patchkit.commands.options import patch_command_options, run_patch_command


@click.command("status")
@patch_command_options
def command(patch: str, root: str, patches_dir: str | None, as_json: bool, verbose: bool, lock_timeout: float) -> None:
    """Report whether PATCH is applied to the tree at --root. Writes nothing.

    Exit codes: 0 applied, 3 unapplied, 4 partial, 5 conflict (or ambiguous), 2 bad input.

    \b
    Example:
      patchkit status atom-pr2106 --root /opt/ATOM -v
    """
    run_patch_command(Action.STATUS, patch, root, patches_dir, as_json, verbose, Options(lock_timeout=lock_timeout))
