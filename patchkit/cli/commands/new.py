"""`patchkit new`: scaffold a patch folder from the commented template, optionally vendoring in the same step."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import click

from patchkit.cli.commands.options import json_option, patches_option
from patchkit.cli.commands.vendor import (
    Source,
    check_source,
    fetch_source,
    result_json,
    result_lines,
    vendor_options,
)
from patchkit.diff.filtering import load_hunk_set, match_exclude
from patchkit.errors import BadInputError, NotADiffError, PatchkitError
from patchkit.input.excludes import Exclude
from patchkit.input.manifest import PatchSpec, load_manifest
from patchkit.input.registry import find_locations, load_registry
from patchkit.speak.console import echo, settings
from patchkit.speak.report import render_json, spec_json, spec_line, versioned
from patchkit.tooling.scaffold import NewPatch, create_patch, parse_exclude_option
from patchkit.tooling.vendor import (
    Fetched,
    SourceKind,
    VendorResult,
    recorded_path,
    registry_project,
    vendor_patch,
)


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
              help="The pull request of this repository that introduces the patch (its waiver is N.md in the "
              "waivers folder).")
@click.option("--moved-in", type=click.IntRange(min=1), metavar="N",
              help="The pull request of this repository moving an already waived patch here (its waiver stays "
              "the one of --introduced-by).")
@click.option("--diff", "diff_name", metavar="NAME", help="The diff's file name in the folder (default: ID.diff).")
@click.option("--prefix", metavar="FOLDER/", help="Place every diff path under this folder of the root.")
@click.option("--path", "paths", multiple=True, metavar="FROM/=TO/",
              help="Move diff paths under FROM/ to TO/ under the root ([paths]); repeatable.")
@click.option("--after", multiple=True, metavar="ID", help="A patch whose result this one is made on; repeatable.")
@click.option("--exclude", "excludes", multiple=True, metavar="PATH=REASON",
              help="A file (or glob) of the diff not ported, with why ([exclude]); repeatable.")
@click.option("--hunks", "hunk_excludes", multiple=True, metavar="PATH:N,M=REASON",
              help="Drop only these hunks of one file (numbered from 1, as `status -v` lists them); repeatable.")
@vendor_options
@json_option
def command(
    patch_id: str, patches_dir: str | None, target: str, title: str | None, repo: str | None, prs: tuple[str, ...],
    local_reason: str | None, introduced_by: int | None, moved_in: int | None, diff_name: str | None,
    prefix: str | None, paths: tuple[str, ...], after: tuple[str, ...], excludes: tuple[str, ...],
    hunk_excludes: tuple[str, ...], source: str | None, git_repo: Path | None, rev_range: str | None, site: str | None,
    edited_tree: Path | None, base_tree: Path | None, timeout: float, as_json: bool,
) -> None:
    """Create patches/ID/manifest.toml from the commented template; with a source, vendor it too.

    The source is a diff (--from FILE|URL, --from-git REPO --range A..B), a patch site lint reports
    (--from-site FILE:LINE: its heredoc diff, the diff file its `git apply` / `patch` line names, or with
    --base-tree the edit of its `sed -i` or literal python-write done by patchkit on a copy), or an
    edited copy of the base tree (--from-tree EDITED --base-tree PRISTINE: the diff is made by git, byte-exact,
    of the files that differ). Refuses an id that exists; creates the patches folder if there is none. The
    manifest is checked like any other before it is put in place; if vendoring fails, the new (pending) entry
    is kept and the message says what to edit and the command that vendors it. Exit 0 when created, 2 on bad
    input.

    \b
    Examples:
      patchkit new vllm-pr12345 --target vllm --repo vllm-project/vllm \\
          --pr 12345 --from ~/12345.diff
      patchkit new launcher-fix --target vllm --local "our launcher only" \\
          --introduced-by 3001 --from-site docker/patch.sh:42 \\
          --base-tree /pristine/dist-packages
      patchkit new kv-fix --target vllm --local "tuned for our cards" \\
          --from-tree /tmp/edited --base-tree /pristine/dist-packages
      patchkit new aiter-pr55 --target aiter --repo ROCm/aiter --pr 55 \\
          --path csrc/=aiter_meta/csrc/ --from pr55.diff \\
          --exclude "docs/x.png=binary, not ported" \\
          --base-tree /usr/local/lib/python3.12/dist-packages
    """
    given = Source(source, git_repo, rev_range, site, edited_tree)
    fetch = given.given
    if base_tree is not None and not fetch:
        raise click.UsageError("--base-tree goes with --from, --from-git, --from-site or --from-tree")
    if fetch:
        check_source(given, base_tree)
    if edited_tree is not None and (prefix or paths):
        raise click.UsageError("--from-tree makes the diff's paths relative to --base-tree: --prefix and --path "
                               "do not apply")
    folders = []
    for item in paths:
        source_folder, sep, target_folder = item.partition("=")
        if not sep:
            raise click.UsageError(f"--path {item!r} must be FROM/=TO/, e.g. csrc/=aiter_meta/csrc/")
        folders.append((source_folder, target_folder))
    dropped = tuple(parse_exclude_option(e, False) for e in excludes) + tuple(
        parse_exclude_option(e, True) for e in hunk_excludes)
    locations = find_locations(patches=patches_dir)
    patches = locations.patches
    # The project the registry belongs to, wherever `new` runs: its [tool.patchkit] names the waivers folder,
    # and the manifest's paths are recorded relative to it.
    project = registry_project(patches)
    if patches_dir is not None:
        locations = find_locations(patches=patches_dir, cwd=project)
    if moved_in is not None and introduced_by is None:
        raise click.UsageError("--moved-in goes with --introduced-by N, the pull request whose waiver it keeps")
    fetched = fetch_source(given, base_tree, timeout, patches) if fetch else None  # before anything is written
    strip = 1 if fetched is None or fetched.strip is None else fetched.strip  # a site's `patch -p0` is strip 0
    if fetched is not None:
        _refuse_binary(fetched, dropped)
        _refuse_not_a_diff(fetched, strip)
    new = NewPatch(patch_id, target, title, repo, prs, local_reason, diff_name, introduced_by, prefix,
                   tuple(folders), after, strip=strip, excludes=dropped,
                   waivers=recorded_path(locations.waivers, project),
                   patches_shown=recorded_path(patches, project), moved_in=moved_in)
    made_registry = not patches.is_dir()
    spec = create_patch(patches, new, create_registry=True)
    quiet = settings().quiet and not as_json  # -q: the exit code says it was created
    created = ([f"created the patches folder {patches}"] if made_registry else []) + [f"created {spec.manifest_path}"]
    if fetched is None:
        if as_json:
            echo(render_json(versioned({"created": spec_json(spec), "vendored": None})))
        elif not quiet:
            for line in created:
                echo(line)
            echo(f"  {spec_line(spec)}")
            echo(f"  next: {spec.vendor_command()}")
        return
    try:
        result = vendor_patch(spec, fetched, base_tree=base_tree)
    except PatchkitError as exc:
        raise _kept(exc, spec, given, base_tree) from None
    if as_json:
        vendored = load_manifest(spec.folder)
        document = {"created": spec_json(vendored), "vendored": result_json(vendored, result, False)}
        echo(render_json(versioned(document)))
        return
    if quiet:
        return
    for line in created:
        echo(line)
    for line in result_lines(result, False):
        echo(line)
    again = vendor_again(spec, given, base_tree)
    for line in left_to_do(load_manifest(spec.folder), result, fetched, locations.waivers, again, base_tree):
        echo(line)


def _refuse_binary(fetched: Fetched, dropped: tuple[object, ...]) -> None:
    """A made diff cannot carry a binary file: refuse, before anything is written, unless it is excluded."""

    patterns = [e.pattern for e in dropped if isinstance(e, Exclude) and e.hunks is None]
    left = [p for p in fetched.binary if not any(match_exclude(pattern, p) for pattern in patterns)]
    if left:
        shown = ", ".join(left[:5]) + (f" (+{len(left) - 5} more)" if len(left) > 5 else "")
        example = shlex.join(["--exclude", f"{left[0]}=binary: fetched and checked by our image build"])
        raise BadInputError(
            f"binary files differ, which a text diff cannot carry: {shown}",
            hint=f"exclude each (e.g. {example}) and carry it another way (README: Binary parts the scripts fetch)",
        )


def _refuse_not_a_diff(fetched: Fetched, strip: int) -> None:
    """A file no manifest edit can mend (an HTML page, CRLF headers, no file changes) is refused before the entry
    is made: a pending entry would only turn the rerun of this same command into "exists already"."""
    from patchkit.diff.diffs import parse_diff  # lazy: the parser (imports unidiff: only now)

    try:
        parse_diff(fetched.data, strip, fetched.label)
    except NotADiffError as exc:
        hint = "nothing was created: this `patchkit new` command runs as it is once the file is the diff"
        raise NotADiffError(exc.message, where=exc.where, hint=f"{exc.hint}; {hint}" if exc.hint else hint) from None
    except PatchkitError:
        pass  # the rest is the manifest's to mend: vendoring below says so, and keeps the pending entry


def _kept(exc: PatchkitError, spec: PatchSpec, given: Source, base_tree: Path | None) -> PatchkitError:
    """The vendor error, saying that the pending entry is kept, what to edit, and the command that vendors it."""
    kept = (f"the new entry is kept, pending: edit {spec.manifest_path} ([exclude] a file or hunks, after, "
            f"prefix / [paths], strip) and vendor it with `{vendor_again(spec, given, base_tree)}`")
    hint = f"{exc.hint}; {kept}" if exc.hint else kept
    error = type(exc)(exc.message, where=exc.where, hint=hint)
    return error


def vendor_again(spec: PatchSpec, given: Source, base_tree: Path | None) -> str:
    """The `patchkit vendor` command that vendors the entry from the same source (absolute paths, quoted)."""
    words = ["patchkit", "vendor", spec.id, "--patches", os.path.abspath(spec.folder.parent), *given.words()]
    words += ["--base-tree", os.path.abspath(base_tree)] if base_tree is not None else []
    return shlex.join(words)


def left_to_do(
    spec: PatchSpec, result: VendorResult, fetched: Fetched, waivers: Path, again: str, base_tree: Path | None
) -> list[str]:
    """What the user still decides after `new` vendored a diff: excludes, `after`, the script line, the waiver."""
    lines = ["left to do:"]
    files = sorted({f.path for f in result.hunk_set.files})
    lines.append(f"  - the diff changes {len(files)} file(s): {', '.join(files[:6])}"
                 f"{' ...' if len(files) > 6 else ''}; a file or hunk not to port goes in [exclude] of "
                 f"{spec.manifest_path} (then vendor again: {again})")
    overlaps = _overlapping(spec, set(files))
    for other, shared in overlaps:
        after = ("already in after" if other in spec.after
                 else f'if it is made on top of {other}, set after = ["{other}"] and vendor again')
        lines.append(f"  - patch {other} also changes {', '.join(sorted(shared)[:3])}: {after}")
    if not overlaps:
        lines.append('  - after: no other patch of the registry changes these files (set after = ["ID"] if '
                     "this one is made on top of another)")
    if fetched.kind is SourceKind.SITE:
        where = ":".join(str(v) for _, v in fetched.details)
        root, which = _site_root(fetched, base_tree)
        call = shlex.join(["patchkit", "apply", spec.id, "--patches", str(spec.folder.parent)]) + f" --root {root}"
        lines.append(f"  - in {where}, replace the diff with a call of patchkit, its --root the folder the script "
                     f"patches ({which}); lint then stops reporting the site: {call}")
    folder = recorded_path(waivers, Path.cwd())  # as the user can open it from here
    if spec.introduced_by is None:
        lines.append(f"  - the waiver: set [waiver] introduced_by = N in {spec.manifest_path}, N the pull request "
                     f"of this repository that adds it, and write {folder}/N.md in it naming {spec.id}")
    elif spec.moved_in is not None:
        lines.append(f"  - the waiver: {folder}/{spec.introduced_by}.md stays the waiver (moved_in = "
                     f"{spec.moved_in}); edit it to name {spec.id}")
    elif (waivers / f"{spec.introduced_by}.md").is_file():
        lines.append(f"  - the waiver: {folder}/{spec.introduced_by}.md exists: name {spec.id} in it (what is "
                     "patched, why the image cannot run without it, the upstream link, the removal plan)")
    else:
        lines.append(f"  - the waiver: write {folder}/{spec.introduced_by}.md naming {spec.id} (what is "
                     "patched, why the image cannot run without it, the upstream link, the removal plan), or, "
                     f"for a patch moved here with its waiver, set moved_in = this pull request")
    return lines


def _site_root(fetched: Fetched, base_tree: Path | None) -> tuple[str, str]:
    """The --root of the call that replaces a site, and where it comes from: the folder its command patches as
    the script names it (`"$ROOT"` stays a variable the script expands), else the base tree given, else DIR."""
    root = fetched.patched_root
    if root is not None and root[:1] in ("/", "$"):  # not a shown form such as <site-packages>
        return (f'"{root}"' if "$" in root else shlex.quote(root)), "as the script names it"
    if base_tree is not None:
        return shlex.quote(os.path.abspath(base_tree)), "here the base tree"
    return "DIR", "DIR: the folder the script's command patches at that line"


def _overlapping(spec: PatchSpec, files: set[str]) -> list[tuple[str, set[str]]]:

    out = []
    try:
        others = [s for s in load_registry(spec.folder.parent) if s.id != spec.id and not s.pending]
    except PatchkitError:
        return []
    for other in others:
        try:
            shared = files & {f.path for f in load_hunk_set(other).files}
        except PatchkitError:
            continue
        if shared:
            out.append((other.id, shared))
    return out
