"""`patchkit port`: locate a patch's hunks on a newer tree and write the ported diff for review."""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from patchkit.cli.commands.options import FolderPath, patches_option
from patchkit.display import escape_controls, show_path
from patchkit.errors import ExitCode
from patchkit.input.registry import find_locations, resolve_patch
from patchkit.input.tree import open_root
from patchkit.speak.console import echo, settings
from patchkit.tooling.port import (
    DEFAULT_FUZZ,
    MAX_FUZZ,
    PortedHunk,
    PortFiles,
    PortResult,
    default_output,
    free_output,
    port_patch,
    write_port,
)


@click.command("port")
@click.argument("patch")
@click.option("--root", metavar="DIR", required=True, type=FolderPath(),
              help="The new engine tree to port the patch to (read only).")
@patches_option
@click.option("--output", metavar="FILE", type=click.Path(dir_okay=False, path_type=Path),
              help="Where to write the ported diff (a new file; default: the patch's diff + .ported).")
@click.option("--fuzz", type=click.IntRange(0, MAX_FUZZ), default=DEFAULT_FUZZ, show_default=True,
              help="How many context lines of a hunk may differ on the new tree.")
def command(patch: str, root: str, patches_dir: str | None, output: Path | None, fuzz: int) -> None:
    """Port PATCH to the tree at --root: write the ported diff for review.

    Each hunk of the filtered hunk set is located on the new tree with its
    context allowed to differ (offsets, whitespace, up to --fuzz context
    lines), and the diff is rebuilt on it: the filtered hunk set only
    (excluded files and hunks left out), beside it the manifest for it
    (FILE.manifest.toml: no excludes left, re-pinned). Nothing is applied and
    no existing file is written over. Each hunk's line, offset and changed
    context lines are listed; a hunk that fits nowhere is listed with its
    nearest candidates, not guessed, and written to a reject file
    (FILE.rej/PATH.rej, as `git apply --reject` writes it) while the placed
    hunks still make FILE.

    Then review them and put them in place of the old entry (two `mv`
    commands are printed).

    Exit 0 when every hunk was placed, 1 when some hunk could not be placed
    (rejects written, no manifest), 2 on bad input.

    \b
    Examples:
      patchkit port atom-pr2106 --root /opt/ATOM-next
      patchkit port atom-pr2106 --root /opt/ATOM-next \\
          --output /tmp/2106.ported --fuzz 3
    """
    spec = resolve_patch(patch, find_locations(patches=patches_dir).patches)
    with open_root(Path(root)) as handle:
        result = port_patch(spec, handle, fuzz=fuzz)
    files = PortFiles.beside(output if output is not None else default_output(spec))
    write_port(result, files, port_command(result, fuzz))
    quiet = settings().quiet
    for line in report_lines(result, files, fuzz, verbose=settings().verbose):
        if not quiet or not result.complete:
            echo(line)
    click.get_current_context().exit(int(ExitCode.OK if result.complete else ExitCode.REFUSED))


def port_command(result: PortResult, fuzz: int) -> list[str]:
    """This port's command line (absolute paths, no --output), for a hint to repeat it."""
    spec = result.spec
    return ["patchkit", "port", spec.id, "--patches", str(spec.folder.parent.absolute()), "--root",
            str(result.root), "--fuzz", str(fuzz)]


def report_lines(result: PortResult, files: PortFiles, fuzz: int, *, verbose: bool) -> list[str]:
    """What a port says: the lead line, each hunk, the notes, then the next steps (commands that run as
    printed, from any folder)."""
    placed = [h for h in result.hunks if h.placed]
    total = len(result.hunks)
    if result.complete:
        lead = (f"{result.spec.id}: ported to {result.root}: {len(placed)} of {total} hunks placed; wrote "
                f"{files.diff} and {files.manifest}")
    else:
        wrote = f"the {len(placed)} placed in {files.diff}, " if result.diff is not None else ""
        lead = (f"{result.spec.id}: cannot port to {result.root}: {total - len(placed)} of {total} hunks could not "
                f"be placed (fuzz {fuzz}); nothing applied, the manifest not re-pinned; wrote {wrote}the rejected "
                f"in {files.rejects}")
    lines = [lead]
    for hunk in result.hunks:
        lines += hunk_lines(hunk, verbose)
    lines += [f"  note: {escape_controls(n)}" for n in result.notes]
    check = git_check_command(result, files.diff)
    if result.complete:
        lines.append(f"  check it with git: `{check}`" if check else "  check it on the new tree")
        lines.append("  review both, then put them in place of the old entry (its version control keeps the "
                     "old one):")
        spec = result.spec
        lines.append(f"    `{shlex.join(['mv', str(files.diff.absolute()), str(spec.diff_path.absolute())])}`")
        lines.append(f"    `{shlex.join(['mv', str(files.manifest.absolute()), str(spec.manifest_path.absolute())])}`")
        return lines
    lines += [f"  rejected: {files.reject_path(r)} ({len(r.hunks)} hunk{'s' if len(r.hunks) != 1 else ''})"
              for r in result.rejects]
    if check:
        lines.append(f"  the placed hunks apply with git: `{check}`")
    if fuzz < MAX_FUZZ:
        again = shlex.join([*port_command(result, fuzz + 1), "--output", str(free_output(result.spec).absolute())])
        lines.append(f"  allow more changed context lines: `{again}`")
    lines.append("  or apply the placed hunks to a copy of the new tree, make the rejected ones there by hand, and "
                 "pin that copy with patchkit vendor --from-tree COPY --base-tree NEW_TREE (after removing the "
                 "manifest's excludes: the port left them out)")
    return lines


def git_check_command(result: PortResult, diff: Path) -> str | None:
    """`git apply --check` of the ported diff on the new tree, with the manifest's strip and prefix; None when
    no such command exists (no diff, or [paths] moving folders, which git cannot say). A tree without its own
    .git is kept from the repository around it: there git reads paths from that repository's top and skips
    those outside the folder, so the check would pass having checked nothing."""
    spec = result.spec
    if result.diff is None or spec.path_map.folders:
        return None
    words = ["git", "-C", str(result.root), "apply", "--check"]
    if not (result.root / ".git").exists():  # in a folder of another repository git would skip every path
        words = ["env", f"GIT_CEILING_DIRECTORIES={result.root.parent}", *words]
    if spec.strip != 1:
        words.append(f"-p{spec.strip}")
    if spec.path_map.prefix:
        words.append(f"--directory={spec.path_map.prefix}")
    return shlex.join([*words, str(diff.absolute())])


def hunk_lines(hunk: PortedHunk, verbose: bool) -> list[str]:
    name = f"{show_path(hunk.path)} hunk {hunk.index} {hunk.header}" if hunk.index else show_path(hunk.path)
    if not hunk.placed:
        lines = [f"  not placed  {name}: {escape_controls(hunk.reason or '')}"]
        if hunk.candidates:
            near = ", ".join(f"line {c.line} ({c.similarity:.0%} alike)" for c in hunk.candidates)
            lines.append(f"      nearest: {near}")
        return lines
    offset = hunk.offset or 0
    moved = f"moved {offset:+d} lines" if offset else "same line"
    changed = [c for c in hunk.changes if not c.whitespace_only]
    spaces = len(hunk.changes) - len(changed)
    facts = [moved]
    if changed:
        facts.append(f"{len(changed)} context line{'s' if len(changed) != 1 else ''} changed")
    if spaces:
        facts.append(f"{spaces} line{'s' if spaces != 1 else ''} differ in whitespace only")
    kind = "fuzzed" if changed else ("moved" if offset else "exact") if not spaces else "whitespace"
    lines = [f"  {kind:<10}  {name}: at line {hunk.found_line} ({', '.join(facts)})"]
    for change in hunk.changes if (verbose or changed) else ():
        if change.whitespace_only and not verbose:
            continue
        lines.append(f"      line {change.line}: {_show(change.old)} -> {_show(change.new)}")
    return lines


def _show(line: bytes) -> str:
    return escape_controls(repr(line.decode("utf-8", "replace").rstrip("\n")))
