from __future__ import annotations

import shlex

import click

from patchkit.cli.commands.options import json_option, patches_option, warn_stray_folders
from patchkit.errors import RegistryError
from patchkit.input.registry import find_locations, load_registry
from patchkit.run.series import split_targets
from patchkit.speak.console import echo, note
from patchkit.speak.report import render_json, spec_json, spec_line, versioned


@click.command("list")
@patches_option
@click.option("--target", metavar="NAME[,NAME]", multiple=True,
              help="Only the patches whose manifest has [target] name = NAME; repeatable or a comma list.")
@click.option("--pending", is_flag=True, help="Only the entries not vendored yet (no diff, no sha256).")
@json_option
def command(patches_dir: str | None, target: tuple[str, ...], pending: bool, as_json: bool) -> None:
    """List the registry's patches with their upstream PR and excluded files.

    --target keeps the patches of those engines (a name no patch has is an error, exit 2, as for
    `apply --all --target`); --pending keeps the entries still to vendor. Exit 0, 2 on bad input.

    --json prints {"schema_version": 1, "patches": [...]}, one object per patch with the keys patch, title,
    folder, pending, upstream, target, excluded ({path, reason}: the manifest's path or glob), introduced_by,
    after, sha256, hunk_set_sha256 and base (docs/output.md).

    \b
    Examples:
      patchkit list --json
      patchkit list --target vllm --pending
    """
    folder = find_locations(patches=patches_dir).patches
    specs = load_registry(folder)
    warn_stray_folders(folder)
    everything = bool(specs)
    wanted = split_targets(target)
    if wanted and specs:
        names = sorted({s.target.name for s in specs})
        unknown = [t for t in wanted if t not in names]
        if unknown:
            raise RegistryError(
                f"no patch in the registry has [target] name = {unknown[0]!r}", where=str(folder.absolute()),
                hint=f"targets in this registry: {', '.join(names)}",
            )
        specs = [s for s in specs if s.target.name in wanted]
    if pending:
        specs = [s for s in specs if s.pending]
    if everything and not specs:
        scope = f" for target {' or '.join(wanted)}" if wanted else ""
        note(f"no pending patch{scope} in the registry {folder.absolute()}: every entry is vendored")
    if not everything:
        note(f"the registry {folder.absolute()} holds no patches; "
             f"`{shlex.join(['patchkit', 'new', 'ID', '--patches', str(folder.absolute()), '--target', 'NAME'])}` "
             "creates one")
    if as_json:
        echo(render_json(versioned({"patches": [spec_json(s) for s in specs]})))
        return
    for spec in specs:
        echo(spec_line(spec))

