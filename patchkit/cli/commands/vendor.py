"""`patchkit vendor`: write a patch's diff into its folder and pin it in manifest.toml."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import click

from patchkit.cli.commands.options import json_option, patches_option
from patchkit.display import show_path
from patchkit.input.manifest import PatchSpec
from patchkit.input.registry import find_locations, find_project_config, resolve_patch
from patchkit.scan.config import read_scan_config
from patchkit.speak.console import echo, settings
from patchkit.speak.report import excluded_json, plural, render_json, size_text, versioned
from patchkit.tooling.vendor import (
    FETCH_TIMEOUT,
    Fetched,
    VendorResult,
    export_git_range,
    read_site,
    read_source,
    read_tree,
    vendor_patch,
)

F = TypeVar("F", bound=Callable[..., Any])


def vendor_options(func: F) -> F:
    """--from / --from-git + --range / --base-tree / --timeout: where a diff comes from (vendor and new)."""
    decorators = [
        click.option("--from", "source", metavar="SOURCE",
                     help="A local diff file, or an https:// URL such as a pull request's .diff."),
        click.option("--from-git", "git_repo", metavar="REPO", type=click.Path(file_okay=False, path_type=Path),
                     help="A local git clone to export the diff from; needs --range."),
        click.option("--range", "rev_range", metavar="BASE..HEAD",
                     help="With --from-git: the commits to diff (BASE...HEAD diffs from their merge base, as a PR "
                     "does)."),
        click.option("--from-site", "site", metavar="FILE:LINE",
                     help="A patch site `patchkit lint` reports: the heredoc diff there, or the diff file its "
                     "`git apply` / `patch` line names."),
        click.option("--from-tree", "edited_tree", metavar="EDITED", type=click.Path(file_okay=False, path_type=Path),
                     help="An edited copy of --base-tree: the diff is made (by git) of every file that differs."),
        click.option("--base-tree", metavar="DIR", type=click.Path(file_okay=False, path_type=Path),
                     help="The pristine pinned engine tree: record the sha256 of every file the diff reads in "
                     "[base] (for a patch with `after`, as the patches before it leave that tree)."),
        click.option("--timeout", type=click.FloatRange(min=0.1), default=FETCH_TIMEOUT, show_default=True,
                     metavar="SECONDS", help="Network timeout for a URL source."),
    ]
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


class Source(NamedTuple):
    """Where a diff comes from, as the options name it (exactly one of the four)."""

    source: str | None = None
    git_repo: Path | None = None
    rev_range: str | None = None
    site: str | None = None
    edited_tree: Path | None = None

    @property
    def given(self) -> bool:
        return any(v is not None for v in (self.source, self.git_repo, self.site, self.edited_tree))

    def words(self) -> list[str]:
        """The options again, for a command a message suggests (paths made absolute)."""
        if self.source is not None:
            return ["--from", self.source if "://" in self.source else os.path.abspath(self.source)]
        if self.git_repo is not None:
            return ["--from-git", os.path.abspath(self.git_repo), "--range", self.rev_range or ""]
        if self.site is not None:
            script, _, line = self.site.rpartition(":")
            return ["--from-site", f"{os.path.abspath(script)}:{line}"]
        return ["--from-tree", os.path.abspath(self.edited_tree or ".")]


def check_source(given: Source, base_tree: Path | None) -> None:
    """The usage errors, before anything is read."""
    count = sum(v is not None for v in (given.source, given.git_repo, given.site, given.edited_tree))
    if count != 1:
        raise click.UsageError("give exactly one of --from SOURCE, --from-git REPO, --from-site FILE:LINE and "
                               "--from-tree EDITED")
    if (given.git_repo is None) != (given.rev_range is None):
        raise click.UsageError("--from-git and --range go together")
    if given.edited_tree is not None and base_tree is None:
        raise click.UsageError("--from-tree needs --base-tree PRISTINE, the tree EDITED is a copy of")


def registry_project(patches: Path) -> Path:
    """The project a registry belongs to, wherever the command runs: the nearest folder above it with a
    pyproject.toml, else the folder holding the registry. [source] records local paths relative to it, so
    PatchSpec.recorded_file finds them again from the manifest alone."""
    found = find_project_config(Path(os.path.abspath(patches)))
    return found.root if found.source is not None else Path(os.path.abspath(patches)).parent


def fetch_source(given: Source, base_tree: Path | None, timeout: float, patches: Path) -> Fetched:
    check_source(given, base_tree)
    project = registry_project(patches)
    if given.git_repo is not None and given.rev_range is not None:
        return export_git_range(given.git_repo, given.rev_range)
    if given.site is not None:

        # The project is the one holding the script (so the printed command, with an absolute path, runs from
        # anywhere), read with that project's scan settings, as lint reads it.
        script = Path(os.path.abspath(given.site.rpartition(":")[0] or "."))
        holder = find_project_config(script.parent)
        return read_site(given.site, holder.root, read_scan_config(holder))
    if given.edited_tree is not None and base_tree is not None:
        return read_tree(given.edited_tree, base_tree, project)
    assert given.source is not None
    return read_source(given.source, timeout=timeout, project=project)


@click.command("vendor")
@click.argument("patch")
@patches_option
@vendor_options
@click.option("--dry-run", is_flag=True, help="Check and report; write nothing.")
@json_option
def command(
    patch: str, patches_dir: str | None, source: str | None, git_repo: Path | None, rev_range: str | None,
    site: str | None, edited_tree: Path | None, base_tree: Path | None, timeout: float, dry_run: bool,
    as_json: bool,
) -> None:
    """Vendor PATCH's diff from SOURCE into its folder and pin it in manifest.toml.

    Records sha256 (the exact bytes), hunkset_sha256 (the filtered hunk set: the same for a re-export that
    differs only in index lines or hunk headings), [source] (the URL or file, or the git repository, range and
    resolved commits), and with --base-tree the [base] fingerprint. Refuses a diff that does not contain every
    excluded file, and a diff without context lines (-U0). Comments in the manifest are kept; an identical
    rerun writes nothing. Exit 0 when vendored or already vendored, 2 on bad input (nothing written).

    \b
    Examples:
      patchkit vendor atom-pr2106 \\
          --from https://github.com/ROCm/ATOM/pull/2106.diff
      patchkit vendor atom-pr2106 --from ~/2106.diff --base-tree /opt/ATOM
      patchkit vendor atom-pr2106 --from-git ~/src/ATOM \\
          --range main...fix-draft-kv
    """
    given = Source(source, git_repo, rev_range, site, edited_tree)
    check_source(given, base_tree)  # the usage error, before the registry is read
    patches = find_locations(patches=patches_dir).patches
    spec = resolve_patch(patch, patches)
    fetched = fetch_source(given, base_tree, timeout, spec.folder.parent)
    result = vendor_patch(spec, fetched, base_tree=base_tree, dry_run=dry_run)
    if as_json:
        echo(render_json(versioned(result_json(spec, result, dry_run))))
    elif not settings().quiet:  # -q: the exit code says it was vendored
        for line in result_lines(result, dry_run):
            echo(line)


def result_json(spec: PatchSpec, r: VendorResult, dry_run: bool) -> dict[str, Any]:
    return {
        "patch": r.patch,
        "source": {"kind": r.source.kind.value, "location": r.source.label, "bytes": len(r.source.data)},
        "diff": str(r.diff_path),
        "manifest": str(r.manifest_path),
        "sha256": r.sha256,
        "hunk_set_sha256": r.hunkset_sha256,
        "previous_sha256": r.previous_sha256,
        "previous_hunk_set_sha256": r.previous_hunkset_sha256,
        "hunk_set_changed": r.hunkset_changed,
        "hunks": r.hunk_set.hunk_count,
        "files": len(r.hunk_set.files),
        "excluded": excluded_json(spec, r.hunk_set),
        "base": dict(r.base),
        "recorded_source": r.source.source_table,
        "changed": r.changed,
        "dry_run": dry_run,
        "written": [str(p) for p in r.written],
    }


def result_lines(r: VendorResult, dry_run: bool) -> list[str]:
    name = r.diff_path.name
    if not r.changed:
        return [f"{r.patch}: already vendored ({name}, sha256 {r.sha256[:12]}); nothing written"]
    if r.previous_sha256 is None:
        verb = "vendored"
    elif r.previous_sha256 == r.sha256:  # the same bytes: only the manifest's record of them changes
        verb = "recorded anew (the same diff, the manifest changes):"
    else:
        verb = f"re-vendored (sha256 was {r.previous_sha256[:12]})"
    lead = f"{r.patch}: {'dry run: would be ' if dry_run else ''}{verb} {name} from {r.source.label}"
    lines = [
        f"{lead} ({len(r.source.data)} bytes)",
        f"  sha256          {r.sha256}",
        f"  hunkset_sha256  {r.hunkset_sha256} ({size_text(r.hunk_set)})",
    ]
    if r.hunkset_changed:
        lines.append("  the hunk set changed: review the diff; trees holding the old version will read as stale")
    elif r.previous_sha256 not in (None, r.sha256) and r.previous_hunkset_sha256 is not None:
        lines.append("  the hunk set is unchanged: only header noise (index lines, headings) differs")
    if r.kept is not None:
        lines.append(f"  the mbox it replaces is kept as {r.kept.name} ([source] names it)")
    if r.hunk_set.excluded:
        lines.append("  excluded by the manifest: " + ", ".join(show_path(p) for p in r.hunk_set.excluded))
    lines.append("  source recorded: " + ", ".join(f"{k} {v}" for k, v in r.source.source_table.items()))
    if r.base_tree is not None:
        lines.append(f"  base: {plural(len(r.base), 'file')} fingerprinted from {r.base_tree}")
    elif r.base:
        lines.append(f"  base: the [base] fingerprint of {len(r.base)} files is kept")
    return lines
