from __future__ import annotations

import click

from patchkit.commands.options import json_option, patches_option
from patchkit.console import echo
from patchkit.registry import find_locations, load_registry
from patchkit.report import render_json, spec_json, spec_line, versioned


@click.command("list")
@patches_option
@json_option
def command(patches_dir: str | None, as_json: bool) -> None:
    """List the registry's patches with their upstream PR and excluded files.

    --json prints {"schema_version": 1, "patches": [...]}, one object per patch with the keys patch, title,
    folder, pending, upstream, target, excluded ({path, reason}: the manifest's path or glob), introduced_by,
    after, sha256, hunk_set_sha256 and base (docs/output.md).

    \b
    Example:
      patchkit list --json
    """
    specs = load_registry(find_locations(patches=patches_dir).patches)
    if as_json:
        echo(render_json(versioned({"patches": [spec_json(s) for s in specs]})))
        return
    for spec in specs:
        echo(spec_line(spec))
