from __future__ import annotations

import click

from patchkit.commands.options import json_option, patches_option
from patchkit.registry import find_locations, load_registry
from patchkit.report import render_json, spec_json, spec_line


@click.command("list")
@patches_option
@json_option
def command(patches_dir: str | None, as_json: bool) -> None:
    """List the registry's patches with their upstream PR and excluded files.

    \b
    Example:
      patchkit list --json
    """
    specs = load_registry(find_locations(patches=patches_dir).patches)
    if as_json:
        click.echo(render_json([spec_json(s) for s in specs]))
        return
    for spec in specs:
        click.echo(spec_line(spec))
