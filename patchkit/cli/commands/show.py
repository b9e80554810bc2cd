"""`patchkit show`: the filtered hunk set as a git-style diff (as `quilt diff` shows a patch), or its --stat.

The diff is rendered from the hunk set itself (the records every check and write uses), so what it shows is
exactly what `apply` writes: excluded files and dropped hunks are absent, paths are placed as the manifest's
`[paths]`/`prefix` place them, line bytes (CRLF, other encodings) are the diff's own. The order of context,
removed and added lines inside a hunk and each hunk's heading are read back from the vendored diff's bytes
(the hunk's header line is recorded); a hunk whose rows do not read back to its images is written with its
changed lines grouped (removed, then added), which applies the same. `index` lines are left out (git apply
does not need them; patchkit does not hash blobs); a new start line is recomputed from the kept hunks, so a
file with dropped hunks still reads as one consistent diff.
"""

from __future__ import annotations

import base64
import io
import re
import sys
from collections.abc import Iterator, Sequence
from typing import Any, BinaryIO, NamedTuple

import click

from patchkit.cli.commands.options import json_option, patches_option
from patchkit.diff.filtering import load_hunk_set
from patchkit.diff.hunks import FileOp, FilePatch, Hunk
from patchkit.diff.hunkset import HunkSet
from patchkit.input.registry import find_locations, resolve_patch
from patchkit.speak.console import echo, output_error, silence
from patchkit.speak.report import excluded_json, render_json, versioned

NO_NEWLINE_MARK = b"\\ No newline at end of file\n"
RE_HEADING = re.compile(rb"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@( [^\r\n]*)?\r?\n?$")
_ESCAPES = {7: b"\\a", 8: b"\\b", 9: b"\\t", 10: b"\\n", 11: b"\\v", 12: b"\\f", 13: b"\\r", 34: b'\\"', 92: b"\\\\"}


class FileStat(NamedTuple):
    """One file of the hunk set as `--stat` counts it."""

    path: str
    old_path: str | None
    op: FileOp
    hunks: int
    insertions: int
    deletions: int


def quote_path(prefix: str, path: str) -> bytes:
    """`prefix + path` as git writes it in a diff header (core.quotePath): C-quoted when it holds a control
    character, `"`, `\\` or a byte outside ASCII, else as is."""
    raw = (prefix + path).encode("utf-8")
    if not any(b < 0x20 or b >= 0x7F or b in (34, 92) for b in raw):
        return raw
    out = bytearray(b'"')
    for b in raw:
        if b in _ESCAPES:
            out += _ESCAPES[b]
        elif b < 0x20 or b >= 0x7F:
            out += b"\\%03o" % b
        else:
            out.append(b)
    return bytes(out + b'"')


def _range(start: int, length: int) -> bytes:
    return b"%d" % start if length == 1 else b"%d,%d" % (start, length)


def _kinds_from_diff(hunk: Hunk, lines: Sequence[bytes]) -> tuple[list[int], bytes] | None:
    """The hunk's row kinds (b" ", b"-", b"+" as ints) and heading as the vendored diff has them, or None when
    its rows there do not read back to the hunk's images."""
    at = hunk.diff_line - 1
    if hunk.diff_line < 1 or at >= len(lines):
        return None
    heading = RE_HEADING.match(lines[at])
    if heading is None:
        return None
    kinds: list[int] = []
    old = new = 0
    for row in lines[at + 1:]:
        if old == len(hunk.old_lines) and new == len(hunk.new_lines):
            break
        kind = 32 if row in (b"\n", b"\r\n") else row[0] if row else 0
        if kind == 92:  # "\ No newline at end of file": belongs to the row before
            continue
        if kind not in (32, 45, 43):
            return None
        kinds.append(kind)
        old += kind != 43
        new += kind != 45
    images = _images(hunk, kinds)
    if images != (hunk.old_lines, hunk.new_lines):
        return None
    return kinds, heading.group(1) or b""


def _images(hunk: Hunk, kinds: Sequence[int]) -> tuple[tuple[bytes, ...], tuple[bytes, ...]] | None:
    """The images `kinds` would give, walking the hunk's own lines (None when the counts do not fit)."""
    old: list[bytes] = []
    new: list[bytes] = []
    i = j = 0
    try:
        for kind in kinds:
            if kind == 32:
                if hunk.old_lines[i] != hunk.new_lines[j]:
                    return None
                old.append(hunk.old_lines[i])
                new.append(hunk.new_lines[j])
                i, j = i + 1, j + 1
            elif kind == 45:
                old.append(hunk.old_lines[i])
                i += 1
            else:
                new.append(hunk.new_lines[j])
                j += 1
    except IndexError:
        return None
    return tuple(old), tuple(new)


def _grouped_kinds(hunk: Hunk) -> list[int]:
    """Leading context, every removed line, every added line, trailing context."""
    middle_old = len(hunk.old_lines) - hunk.leading - hunk.trailing
    middle_new = len(hunk.new_lines) - hunk.leading - hunk.trailing
    return [32] * hunk.leading + [45] * middle_old + [43] * middle_new + [32] * hunk.trailing


def hunk_rows(hunk: Hunk, lines: Sequence[bytes]) -> tuple[list[int], bytes]:
    """The hunk's row kinds and heading: the vendored diff's when they read back to its images, else grouped."""
    found = _kinds_from_diff(hunk, lines)
    return found if found is not None else (_grouped_kinds(hunk), b"")


def _hunk_bytes(hunk: Hunk, new_start: int, lines: Sequence[bytes]) -> Iterator[bytes]:
    kinds, heading = hunk_rows(hunk, lines)
    yield b"@@ -%s +%s @@%s\n" % (_range(hunk.old_start, hunk.old_len), _range(new_start, hunk.new_len), heading)
    i = j = 0
    for kind in kinds:
        if kind == 43:
            line = hunk.new_lines[j]
            j += 1
        else:
            line = hunk.old_lines[i]
            i, j = i + 1, j + (kind == 32)
        yield bytes((kind,)) + line
        if not line.endswith(b"\n"):
            yield b"\n" + NO_NEWLINE_MARK


def _file_bytes(f: FilePatch, lines: Sequence[bytes]) -> Iterator[bytes]:
    old_name = f.old_path if f.old_path is not None else f.path
    new_name = f.new_path if f.new_path is not None else f.path
    yield b"diff --git %s %s\n" % (quote_path("a/", old_name), quote_path("b/", new_name))
    if f.op is FileOp.CREATE:
        yield b"new file mode %o\n" % (f.new_mode or 0o100644)
    elif f.op is FileOp.DELETE:
        yield b"deleted file mode %o\n" % (f.old_mode or 0o100644)
    elif f.mode_change is not None:
        yield b"old mode %o\nnew mode %o\n" % f.mode_change
    if f.op is FileOp.RENAME:
        yield b"rename from %s\nrename to %s\n" % (quote_path("", old_name), quote_path("", new_name))
    if not f.hunks:
        return
    # git ends a name with a space with a tab on the ---/+++ lines, so that the name's end is unambiguous
    old_label = quote_path("a/", old_name) + (b"\t" if " " in old_name else b"") if f.old_path else b"/dev/null"
    new_label = quote_path("b/", new_name) + (b"\t" if " " in new_name else b"") if f.new_path else b"/dev/null"
    yield b"--- %s\n+++ %s\n" % (old_label, new_label)
    delta = 0
    for hunk in f.hunks:
        position = hunk.old_start - (1 if hunk.old_len else 0) + delta  # 0-based, before the hunk's new side
        yield from _hunk_bytes(hunk, position + (1 if hunk.new_len else 0), lines)
        delta += hunk.new_len - hunk.old_len


def diff_lines(diff: bytes) -> list[bytes]:
    """The vendored diff's lines as patchkit's parser numbers them (only LF ends a line)."""
    return io.BytesIO(diff).readlines()


def render_diff(hunk_set: HunkSet, lines: Sequence[bytes]) -> bytes:
    """The hunk set as a git-style diff that `git apply` accepts on the pristine tree (see the module)."""
    return b"".join(chunk for f in hunk_set.files for chunk in _file_bytes(f, lines))


def file_stats(hunk_set: HunkSet, lines: Sequence[bytes]) -> list[FileStat]:
    stats = []
    for f in hunk_set.files:
        kinds = [k for h in f.hunks for k in hunk_rows(h, lines)[0]]
        stats.append(FileStat(f.path, f.old_path if f.op is FileOp.RENAME else None, f.op, len(f.hunks),
                              kinds.count(43), kinds.count(45)))
    return stats


STAT_BAR = 50  # the widest +/- bar; wider changes are scaled down to it, as git does for a terminal's width


def stat_lines(stats: Sequence[FileStat]) -> list[str]:
    """`git diff --stat` style: ` path | N +++--` per file and one summary line."""
    names = [f"{s.old_path} => {s.path}" if s.old_path else s.path for s in stats]
    width = max((len(n) for n in names), default=0)
    most = max((s.insertions + s.deletions for s in stats), default=0)
    digits = len(str(most))
    lines = []
    for name, s in zip(names, stats, strict=True):
        changed = s.insertions + s.deletions
        plus, minus = s.insertions, s.deletions
        if most > STAT_BAR:  # scaled, keeping at least one mark for a side that has any
            plus = max(1, plus * STAT_BAR // most) if plus else 0
            minus = max(1, minus * STAT_BAR // most) if minus else 0
        bar = "+" * plus + "-" * minus
        lines.append(f" {name.ljust(width)} | {str(changed).rjust(digits)}{' ' + bar if bar else ''}".rstrip())
    added = sum(s.insertions for s in stats)
    removed = sum(s.deletions for s in stats)
    summary = f" {len(stats)} file{'' if len(stats) == 1 else 's'} changed"
    if added or not removed:
        summary += f", {added} insertion{'' if added == 1 else 's'}(+)"
    if removed or not added:
        summary += f", {removed} deletion{'' if removed == 1 else 's'}(-)"
    return [*lines, summary]


def show_json(
    patch: str, hunk_set: HunkSet, stats: list[FileStat], excluded: list[dict[str, str]], diff: bytes | None
) -> dict[str, Any]:
    document: dict[str, Any] = {
        "patch": patch,
        "hunk_set_sha256": hunk_set.digest,
        "excluded": excluded,
        "files": [
            {"path": s.path, "old_path": s.old_path, "op": s.op.value, "hunks": s.hunks,
             "insertions": s.insertions, "deletions": s.deletions}
            for s in stats
        ],
    }
    if diff is not None:
        try:
            document |= {"diff": diff.decode("utf-8"), "diff_encoding": "utf-8"}
        except UnicodeDecodeError:  # JSON holds text: other bytes go as base64, still exact
            document |= {"diff": base64.b64encode(diff).decode("ascii"), "diff_encoding": "base64"}
    return document


def write_bytes(data: bytes) -> None:
    """The diff to stdout as bytes (never re-encoded); a closed pipe silences it, a failed write is exit 11."""
    try:
        sys.stdout.flush()  # anything written as text first stays first
        stream: BinaryIO | None = getattr(sys.stdout, "buffer", None)
        if stream is None:  # a text-only stdout (an embedder's): the bytes, decoded losslessly
            sys.stdout.write(data.decode("utf-8", "surrogateescape"))
            sys.stdout.flush()
            return
        stream.write(data)
        stream.flush()
    except BrokenPipeError:
        silence("stdout")
    except OSError as exc:
        silence("stdout")
        raise output_error("stdout", exc) from None


@click.command("show")
@click.argument("patch")
@patches_option
@click.option("--stat", "as_stat", is_flag=True, help="Per file: lines added and removed, then a summary.")
@json_option
def command(patch: str, patches_dir: str | None, as_stat: bool, as_json: bool) -> None:
    """Print PATCH's filtered hunk set as a git-style diff: what apply writes.

    The diff minus the manifest's excluded files and hunks, with its paths placed under the root as the
    manifest says; `git apply` accepts it on the pristine tree. Reads no tree. --stat prints the changed lines
    per file instead. --json prints {"schema_version": 1, "patch", "hunk_set_sha256", "excluded", "files",
    "diff", "diff_encoding"} (diff_encoding: utf-8, or base64 for other bytes; no diff with --stat).
    Exit 0, or 2 on bad input (an unknown patch, a pending entry, a diff that does not parse).

    \b
    Examples:
      patchkit show atom-pr2106
      patchkit show atom-pr2106 --stat
      patchkit show atom-pr2106 | git -C /opt/ATOM apply --check
    """
    spec = resolve_patch(patch, find_locations(patches=patches_dir).patches)
    hunk_set = load_hunk_set(spec)
    lines = diff_lines(spec.read_diff()) if hunk_set.files else []
    stats = file_stats(hunk_set, lines)
    diff = None if as_stat else render_diff(hunk_set, lines)
    if as_json:
        echo(render_json(versioned(show_json(spec.id, hunk_set, stats, excluded_json(spec, hunk_set), diff))))
    elif diff is not None:
        write_bytes(diff)
    else:
        for line in stat_lines(stats):
            echo(line)
