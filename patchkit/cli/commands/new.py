"""`patchkit new`: scaffold a patch folder from the commented template, optionally vendoring in the same step."""

from __future__ import annotations

from pathlib import Path

import click

from patchkit.cli.commands.options import json_option, patches_option
from patchkit.cli.commands.vendor import fetch_source, result_json, result_lines, vendor_options
from patchkit.errors import PatchkitError
from patchkit.input.manifest import load_manifest
from patchkit.input.registry import find_locations
from patchkit.speak.console import echo, settings
from patchkit.speak.report import render_json, spec_json, spec_line, versioned
from patchkit.tooling.scaffold import NewPatch, create_patch, remove_new_patch
from patchkit.tooling.vendor import vendor_patch


@click.command("new")
@click.argument("patch_id", metavar="ID")
@patches_option
@click.option("--target", required=True, metavar="NAME", help="The engine the patch applies to ([target] name).")
@click.option("--title", metavar="TEXT", help="The upstream PR's title (default: the id).")
@click.option("--repo", metavar="OWNER/NAME", help="The upstream repository (a bare --pr number is a PR of it).")
@click.option("--pr", "prs", multiple=True, metavar="N|OWNER/REPO#N",
              help="An upstream pull request; repeat it for a diff that combines several.")
@click.option("--local", "local_reason", metavar="REASON",
              help="A fix of our own with no upstream PR: origin = \"local\", with this reason.")
@click.option("--introduced-by", type=click.IntRange(min=1), metavar="N",
              help="The pull request of this repository that introduces the patch (its waiver is waivers/N.md).")
@click.option("--diff", "diff_name", metavar="NAME", help="The diff's file name in the folder (default: ID.diff).")
@click.option("--prefix", metavar="FOLDER/", help="Place every diff path under this folder of the root.")
@click.option("--path", "paths", multiple=True, metavar="FROM/=TO/",
              help="Move diff paths under FROM/ to TO/ under the root ([paths]); repeatable.")
@click.option("--after", multiple=True, metavar="ID", help="A patch whose result this one is made on; repeatable.")
@vendor_options
@json_option
def command(
    patch_id: str, patches_dir: str | None, target: str, title: str | None, repo: str | None, prs: tuple[str, ...],
    local_reason: str | None, introduced_by: int | None, diff_name: str | None, prefix: str | None,
    paths: tuple[str, ...], after: tuple[str, ...], source: str | None,
    git_repo: Path | None, rev_range: str | None, base_tree: Path | None, timeout: float, as_json: bool,
) -> None:
    """Create patches/ID/manifest.toml from the commented template; with --from / --from-git, vendor it too.

    Refuses an id that exists. The manifest is checked like any other before it is put in place; if vendoring
    fails, the new folder is removed again. Exit 0 when created, 2 on bad input.

    \b
    Examples:
      patchkit new vllm-pr12345 --target vllm --repo vllm-project/vllm \\
          --pr 12345 --from ~/12345.diff
      patchkit new aiter-fixes --target aiter --repo ROCm/aiter \\
          --pr 101 --pr 102 --pr vllm-project/vllm#9
      patchkit new launcher-fix --target vllm \\
          --local "our launcher only; nothing to upstream"
      patchkit new aiter-pr55 --target aiter --repo ROCm/aiter --pr 55 \\
          --path csrc/=aiter_meta/csrc/ --from pr55.diff \\
          --base-tree /usr/local/lib/python3.12/dist-packages
    """
    fetch = source is not None or git_repo is not None
    if base_tree is not None and not fetch:
        raise click.UsageError("--base-tree goes with --from or --from-git")
    patches = find_locations(patches=patches_dir).patches
    fetched = fetch_source(source, git_repo, rev_range, timeout) if fetch else None  # before anything is written
    folders = []
    for item in paths:
        source_folder, sep, target_folder = item.partition("=")
        if not sep:
            raise click.UsageError(f"--path {item!r} must be FROM/=TO/, e.g. csrc/=aiter_meta/csrc/")
        folders.append((source_folder, target_folder))
    new = NewPatch(patch_id, target, title, repo, prs, local_reason, diff_name, introduced_by, prefix,
                   tuple(folders), after)
    spec = create_patch(patches, new)
    quiet = settings().quiet and not as_json  # -q: the exit code says it was created
    if fetched is None:
        if as_json:
            echo(render_json(versioned({"created": spec_json(spec), "vendored": None})))
        elif not quiet:
            echo(f"created {spec.manifest_path}")
            echo(f"  {spec_line(spec)}")
            echo(f"  next: {spec.vendor_command()}")
        return
    try:
        result = vendor_patch(spec, fetched, base_tree=base_tree)
    except PatchkitError:
        remove_new_patch(spec)
        raise
    if as_json:
        vendored = load_manifest(spec.folder)
        document = {"created": spec_json(vendored), "vendored": result_json(vendored, result, False)}
        echo(render_json(versioned(document)))
        return
    if quiet:
        return
    echo(f"created {spec.manifest_path}")
    for line in result_lines(result, False):
        echo(line)
