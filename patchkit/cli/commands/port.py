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
    PortResult,
    default_output,
    port_patch,
    write_new_file,
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
    lines), and the diff is rebuilt on it. Nothing is applied and no
    existing file is written over: the ported diff goes to a new file.
    Each hunk's line, offset and changed context lines are listed; a hunk
    that fits nowhere is listed with its nearest candidates, not guessed.

    Then review it, pin it and record the new base:
    `patchkit vendor PATCH --from FILE --base-tree DIR`.

    Exit 0 when every hunk was placed (the diff written), 1 when some hunk
    could not be placed (nothing written), 2 on bad input.

    \b
    Examples:
      patchkit port atom-pr2106 --root /opt/ATOM-next
      patchkit port atom-pr2106 --root /opt/ATOM-next \\
          --output /tmp/2106.ported --fuzz 3
    """
    spec = resolve_patch(patch, find_locations(patches=patches_dir).patches)
    with open_root(Path(root)) as handle:
        result = port_patch(spec, handle, fuzz=fuzz)
    target = output if output is not None else default_output(spec)
    if result.diff is not None:
        write_new_file(target, result.diff)
    quiet = settings().quiet
    for line in report_lines(result, target, fuzz, verbose=settings().verbose):
        if not quiet or not result.complete:
            echo(line)
    click.get_current_context().exit(int(ExitCode.OK if result.complete else ExitCode.REFUSED))


def report_lines(result: PortResult, target: Path, fuzz: int, *, verbose: bool) -> list[str]:
    placed = [h for h in result.hunks if h.placed]
    total = len(result.hunks)
    if result.complete:
        lead = f"{result.spec.id}: ported to {result.root}: {len(placed)} of {total} hunks placed; wrote {target}"
    else:
        lead = (f"{result.spec.id}: cannot port to {result.root}: {total - len(placed)} of {total} hunks could not "
                f"be placed (fuzz {fuzz}); nothing written")
    lines = [lead]
    for hunk in result.hunks:
        lines += hunk_lines(hunk, verbose)
    lines += [f"  note: {escape_controls(n)}" for n in result.notes]
    if result.complete:
        lines.append(f"  review it, then pin it and record the new base: "
                     f"`{vendor_command(result, target)}`")
    else:
        lines.append("  fix those hunks by hand on a copy of the new tree, or raise --fuzz to allow more "
                     "changed context lines")
    return lines


def vendor_command(result: PortResult, target: Path) -> str:
    spec = result.spec
    return shlex.join(["patchkit", "vendor", spec.id, "--patches", str(spec.folder.parent.absolute()),
                       "--from", str(target.absolute()), "--base-tree", str(result.root)])


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
