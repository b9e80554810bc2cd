from __future__ import annotations

import shlex

import click

from patchkit.commands.options import json_option, patches_option, warn_stray_folders
from patchkit.console import echo, note
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
    folder = find_locations(patches=patches_dir).patches
    specs = load_registry(folder)
    warn_stray_folders(folder)
    if not specs:
        note(f"the registry {folder.absolute()} holds no patches; "
             f"`{shlex.join(['patchkit', 'new', 'ID', '--patches', str(folder.absolute()), '--target', 'NAME'])}` "
             "creates one")
    if as_json:
        echo(render_json(versioned({"patches": [spec_json(s) for s in specs]})))
        return
    for spec in specs:
        echo(spec_line(spec))

