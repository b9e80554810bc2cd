from __future__ import annotations

import click

from patchkit.cli.commands.options import patches_option, warn_stray_folders
from patchkit.diff.compiled import compile_bytes, write_compiled
from patchkit.diff.filtering import load_hunk_set
from patchkit.errors import ManifestError
from patchkit.input.registry import find_locations, resolve_patch
from patchkit.run.provenance import check_hunkset_pin
from patchkit.run.series import load_series
from patchkit.speak.console import echo, note, warn


@click.command("compile")
@click.argument("patch_ids", metavar="[PATCH]...", nargs=-1)
@patches_option
def command(patch_ids: tuple[str, ...], patches_dir: str | None) -> None:
    """Write each patch's filtered hunk set beside its manifest (`<id>/<id>.compiled`), for fast starts.

    Every patch of the registry, or the PATCHes named. Each diff is read, checked against its pin, parsed and
    filtered exactly as `status` does (a bad diff or manifest is the same error, exit 2, and nothing more is
    written); the result is stored bound to the diff's sha256, the manifest entry and this patchkit's version.
    Later commands load it instead of parsing the diff; a stale or damaged file is ignored (the diff is parsed).
    Run it where the registry is installed, as the user that runs the starts (root in an image build): a file
    owned by another user is ignored. A build artefact: do not commit it (`patchkit lint` reports one that does
    not match its diff, PK105). Exit 0, 2 on bad input.

    \b
    Examples:
      patchkit compile --patches /opt/patchkit/patches
      patchkit compile atom-pr2106
    """
    folder = find_locations(patches=patches_dir).patches
    if patch_ids:
        specs = tuple(resolve_patch(arg, folder) for arg in patch_ids)
    else:
        specs = load_series(folder)
        warn_stray_folders(folder)
    for spec in specs:
        if spec.pending:
            note(f"patch {spec.id} is pending (no diff vendored): nothing to compile")
            continue
        hunk_set = load_hunk_set(spec, compiled=False)
        check_hunkset_pin(spec, hunk_set)
        data = compile_bytes(spec, hunk_set)
        if data is None:
            warn(f"patch {spec.id}: its hunk set has an image line without a newline before the image's end, "
                 "which the compiled form cannot hold; it is parsed at every start")
            continue
        try:
            path = write_compiled(spec, data)
        except OSError as exc:
            raise ManifestError(f"cannot write the compiled hunk set: {exc.strerror}",
                                where=str(spec.folder / f"{spec.id}.compiled"),
                                hint="run compile where the registry folder is writable (the image build)") from None
        echo(f"compiled {spec.id}: {len(hunk_set.files)} files, {hunk_set.hunk_count} hunks -> {path}")
