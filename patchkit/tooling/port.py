"""Port a patch to a newer engine tree: `patchkit port`. Pure apart from reading the new tree; never writes it.

Each hunk of the filtered hunk set is located on the new tree with its context allowed to differ, as
`patch --fuzz` does, and more carefully:

- the hunk's pre-image is aligned line for line with the new file at every position; a line matches exactly,
  or up to whitespace (all blanks removed), or not at all;
- a removed ("-") line must match (exactly or up to whitespace): patchkit never guesses which line to delete;
- at most `fuzz` context lines may differ (a renamed identifier, an edited comment), and at least one line
  must match;
- the best position has the fewest differing lines, then the fewest whitespace-only ones, then is nearest to
  where the hunks before it (in its file) put it: moved code (a large offset) is found anywhere in the file.
  Two equally good positions, neither of them where the hunk is expected, are not guessed between: the hunk
  is listed with them as candidates, as is a hunk that fits nowhere (the nearest alignments, by similarity).

The ported diff is rebuilt from the new tree: context and removed lines are the new file's own bytes, added
lines are the patch's, with up to max(3, the hunk's own) lines of context taken fresh from the new file, and
hunks whose context would meet merged (as git does). Header lines (names, modes, renames) are the diff's own,
so the manifest's `strip`, prefix and [paths] still fit; `index` lines get the new blobs' ids. The ported diff
is the filtered hunk set only: files and hunks the manifest excludes are left out (so plain `git apply` takes
it on the new tree), and the ported manifest beside it has no excludes left (each one kept as a comment) and is
re-pinned: sha256, hunkset_sha256 and the [base] fingerprint of the new tree. Before it is returned, the ported
diff is parsed, filtered and judged on the new tree by patchkit's own rules: it must read `unapplied` there
(else InternalError: a bug, nothing is written).

A hunk that fits nowhere is rejected: the hunks that were placed still make the ported diff (a starting point),
the rejected ones go to one reject file per file, in `git apply --reject`'s format, and no manifest is made.
Everything port writes is a new file beside the ported diff (by default in the patch's folder); an earlier
port's output is never written over, and the engine tree is only read.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from patchkit.diff.diffs import parse_diff
from patchkit.diff.filtering import filter_diff, load_hunk_set
from patchkit.diff.hunks import Diff, FileOp, FilePatch, Hunk
from patchkit.diff.mbox import repeated_paths
from patchkit.display import show_path
from patchkit.errors import BadInputError, InternalError
from patchkit.input.manifest import PatchSpec
from patchkit.input.tree import Root, read_snapshot
from patchkit.judge.state import scan_tree
from patchkit.judge.treestate import TreeState
from patchkit.outcome import PatchState
from patchkit.run.provenance import check_hunkset_pin, fingerprint_tree
from patchkit.tooling.files import write_file
from patchkit.tooling.vendor import update_manifest

DEFAULT_FUZZ = 2  # as GNU patch: at most this many context lines of a hunk may differ
MAX_FUZZ = 10
CANDIDATES = 3  # the nearest alignments listed for a hunk that cannot be placed
_INDEX = re.compile(rb"^index ([0-9a-f]+)\.\.([0-9a-f]+)((?: [0-7]{6})?)$")
_HEADER = re.compile(
    rb"^(diff --git |old mode |new mode |deleted file mode |new file mode |similarity index |dissimilarity index "
    rb"|rename from |rename to |index |--- |\+\+\+ )"
)


class Candidate(NamedTuple):
    line: int  # 1-based line of the new file where the pre-image would start
    similarity: float  # share of the pre-image's lines that match there (up to whitespace)


class ContextChange(NamedTuple):
    line: int  # 1-based line of the new file
    old: bytes  # the line as the diff has it
    new: bytes  # the line as the new file has it
    whitespace_only: bool


@dataclass(frozen=True)
class PortedHunk:
    """One hunk of the filtered hunk set, on the new tree."""

    path: str  # as placed under the root
    index: int  # the hunk's number in its file section
    header: str  # the hunk's header in the old diff
    old_line: int  # 1-based line its pre-image starts at in the old diff
    found_line: int | None  # 1-based line on the new tree; None: not placed
    changes: tuple[ContextChange, ...] = ()  # lines of the pre-image the new tree has otherwise
    candidates: tuple[Candidate, ...] = ()  # not placed: the nearest alignments
    reason: str | None = None  # not placed: why

    @property
    def placed(self) -> bool:
        return self.found_line is not None

    @property
    def offset(self) -> int | None:
        return None if self.found_line is None else self.found_line - self.old_line


@dataclass(frozen=True)
class Reject:
    """The hunks of one file that fit nowhere on the new tree, as `git apply --reject` writes them."""

    path: str  # as placed under the root: the reject file is `<path>.rej` in the port's reject folder
    hunks: tuple[PortedHunk, ...]
    data: bytes  # `diff a/PATH b/PATH\t(rejected hunks)`, then each hunk as the old diff has it


@dataclass(frozen=True)
class PortResult:
    spec: PatchSpec
    root: Path
    hunks: tuple[PortedHunk, ...]
    notes: tuple[str, ...]  # whole-file facts (created, deleted, excluded files left out)
    diff: bytes | None  # the ported diff: every placed hunk; None when no hunk was placed
    rejects: tuple[Reject, ...] = ()  # per file, the hunks that could not be placed
    manifest: bytes | None = None  # the manifest for the ported diff, re-pinned; None unless complete

    @property
    def complete(self) -> bool:
        return not self.rejects


class PortFiles(NamedTuple):
    """Where one port writes: every name derived from the ported diff's, each a new file (or folder)."""

    diff: Path  # the ported diff
    manifest: Path  # the ported manifest: `<diff>.manifest.toml`
    rejects: Path  # the folder of reject files: `<diff>.rej/<path>.rej`

    @classmethod
    def beside(cls, diff: Path) -> PortFiles:
        return cls(diff, diff.with_name(diff.name + ".manifest.toml"), diff.with_name(diff.name + ".rej"))

    def reject_path(self, reject: Reject) -> Path:
        return self.rejects / (reject.path + ".rej")


class _Section(NamedTuple):
    rows: list[bytes]  # the section in the ported diff (empty: left out)
    reports: list[PortedHunk]
    rejected: list[bytes]  # the rejected hunks' rows, as the old diff has them


class _Op(NamedTuple):
    kind: int  # 32 " ", 45 "-", 43 "+"
    line: bytes  # with its ending; without one when "\ No newline at end of file" follows


class _Placed(NamedTuple):
    pos: int  # 0-based start of the pre-image in the new file
    ops: tuple[_Op, ...]  # the hunk's body with context and removed lines from the new file


# ------------------------------------------------------------------------------------------------- the port


def port_patch(spec: PatchSpec, root: Root, *, fuzz: int = DEFAULT_FUZZ) -> PortResult:
    """Locate every hunk of `spec`'s filtered hunk set on the tree at `root` and build the ported diff (the
    placed hunks), the reject files (the others) and, when every hunk was placed, the ported manifest."""
    hunk_set = load_hunk_set(spec)  # the new tree is not the base a refused commit chain's net diff needs
    check_hunkset_pin(spec, hunk_set)  # as status: a stale pin means the excludes changed unreviewed
    data = spec.read_diff()
    diff = parse_diff(data, spec.strip, str(spec.diff_path))
    lines = io.BytesIO(data).readlines()
    placed_sections = {f.diff_line: f for f in hunk_set.files}
    twice = repeated_paths(Diff(hunk_set.source, hunk_set.files))
    if twice:
        raise BadInputError(
            f"{show_path(twice[0])}: several sections of the diff touch this file; port locates each file's hunks "
            "on the file as the new tree has it, once",
            where=str(spec.diff_path),
            hint="vendor the diff as one section per file (`git diff` of the whole change), then port it",
        )
    kept = {h.diff_line for f in hunk_set.files for h in f.hunks}
    starts = [f.diff_line for f in diff.files] + [len(lines) + 1]
    out: list[bytes] = []
    reports: list[PortedHunk] = []
    notes: list[str] = []
    rejects: list[Reject] = []
    for number, section in enumerate(diff.files):
        placed = placed_sections.get(section.diff_line)
        if placed is None:  # excluded by the manifest: not part of the filtered hunk set, nor of the port
            notes.append(f"{section.path}: excluded by the manifest, left out of the ported diff")
            continue
        end = section.hunks[0].diff_line if section.hunks else starts[number + 1]
        header = [row for row in lines[section.diff_line - 1:end - 1] if _HEADER.match(row)]
        ported = _port_section(root, placed, section, header, lines, kept, fuzz, notes)
        reports += ported.reports
        out += ported.rows
        if ported.rejected:
            shown = [h for h in ported.reports if not h.placed]
            head = b"diff a/%s b/%s\t(rejected hunks)\n" % (placed.path.encode(), placed.path.encode())
            rejects.append(Reject(placed.path, tuple(shown), head + b"".join(ported.rejected)))
    result = b"".join(out) if out else None
    tree = _check_ported(spec, root, result) if result is not None else None
    manifest = None
    if not rejects and result is not None and tree is not None:
        manifest = ported_manifest(spec, result, tree)
    return PortResult(spec, root.path, tuple(reports), tuple(notes), result, tuple(rejects), manifest)


def _port_section(
    root: Root, placed: FilePatch, section: FilePatch, header: list[bytes], lines: Sequence[bytes],
    kept: set[int], fuzz: int, notes: list[str],
) -> _Section:
    """One file section on the new tree: its ported rows, a report per hunk, and the rows of those rejected."""
    own = [h for h in section.hunks if h.diff_line in kept]
    old = read_snapshot(root, placed.old_path) if placed.old_path is not None else None
    new = read_snapshot(root, placed.new_path) if placed.new_path is not None else None
    if placed.op is FileOp.CREATE:
        if new is not None and new.exists:
            return _whole_file(placed, own, lines, "the new tree already has this file, which the patch creates")
        notes.append(f"{placed.path}: created by the patch, carried over")
        return _Section(header + [row for h in own for row in _body_rows(lines, h)], [], [])
    if old is None or old.data is None:
        return _whole_file(placed, own, lines, "the new tree does not have this file")
    if placed.op is FileOp.RENAME and new is not None and new.exists:
        return _whole_file(placed, own, lines, f"the new tree already has {placed.new_path}, the rename's target")
    content = tuple(io.BytesIO(old.data).readlines())
    if placed.op is FileOp.DELETE:
        if tuple(placed.hunks[0].old_lines if placed.hunks else ()) != content:
            return _whole_file(placed, own, lines, "the file the patch deletes has other content in the new tree")
        notes.append(f"{placed.path}: deleted by the patch, carried over")
        return _Section(header + [row for h in own for row in _body_rows(lines, h)], [], [])
    excluded = [h.index for h in section.hunks if h.diff_line not in kept]
    if excluded:
        notes.append(f"{placed.path}: hunk{'s' if len(excluded) > 1 else ''} {', '.join(map(str, excluded))} "
                     "excluded by the manifest, left out of the ported diff")
    located = _locate_hunks(placed.path, own, lines, content, fuzz)
    found = sorted((where for _, where, report in located if where is not None and report.placed),
                   key=lambda where: where.pos)  # in file order: moved functions may come in another one
    rejected = [row for hunk, _, report in located if not report.placed for row in _body_rows(lines, hunk)]
    reports = [report for _, _, report in located]
    if not found:
        return _Section([], reports, rejected)
    body, after = _rebuild(content, found)
    return _Section([_index_line(row, old.data, after) for row in header] + body, reports, rejected)


def _locate_hunks(
    path: str, hunks: Sequence[Hunk], lines: Sequence[bytes], content: Sequence[bytes], fuzz: int
) -> list[tuple[Hunk, _Placed | None, PortedHunk]]:
    """Each hunk of one file located on `content` (in diff order), with its report; a hunk that would overlap
    one placed before it (in file order) is not placed."""
    located: list[tuple[Hunk, _Placed | None, PortedHunk]] = []
    offset = 0
    for hunk in hunks:
        ops = _ops(lines, hunk)
        where = _locate(content, ops, hunk.old_index + offset, hunk.old_index, fuzz)
        if isinstance(where, _Placed):
            offset = where.pos - hunk.old_index
            located.append((hunk, where, _report(path, hunk, ops, where, content)))
            continue
        reason = where[0]
        there = _find_exact(content, hunk.new_lines)
        if there is not None and hunk.new_lines != hunk.old_lines:
            reason = (f"the new tree already has this hunk's change (its post-image is at line {there + 1}): "
                      "the engine may ship it; drop the hunk, or retire the patch")
        located.append((hunk, None, PortedHunk(path, hunk.index, hunk.header, hunk.old_index + 1, None,
                                               candidates=where[1], reason=reason)))
    order = sorted((where.pos, i) for i, (_, where, _) in enumerate(located) if where is not None)
    for (_, first), (_, second) in itertools.pairwise(order):
        (one, a, _), (two, b, _) = located[first], located[second]
        if a is not None and b is not None and b.pos < a.pos + _old_count(a.ops):
            located[second] = (two, None, PortedHunk(
                path, two.index, two.header, two.old_index + 1, None,
                reason=f"it would overlap hunk {one.index} (found at line {a.pos + 1})",
                candidates=(Candidate(b.pos + 1, 1.0),),
            ))
    return located


def _whole_file(placed: FilePatch, hunks: Sequence[Hunk], lines: Sequence[bytes], reason: str) -> _Section:
    """A section none of whose hunks can be placed, for a reason of the whole file: each hunk rejected."""
    reports = [PortedHunk(placed.path, h.index, h.header, h.old_index + 1, None, reason=reason) for h in hunks]
    if not reports:  # a section without hunks (an empty file created or deleted, a mode change)
        reports = [PortedHunk(placed.path, 0, "(the whole file)", 0, None, reason=reason)]
    return _Section([], reports, [row for h in hunks for row in _body_rows(lines, h)])


def _report(path: str, hunk: Hunk, ops: Sequence[_Op], where: _Placed, content: Sequence[bytes]) -> PortedHunk:
    changes = []
    at = where.pos
    for op, mine in zip(ops, where.ops, strict=True):
        if op.kind == 43:
            continue
        if op.line != mine.line:
            changes.append(ContextChange(at + 1, op.line, mine.line, _norm(op.line) == _norm(mine.line)))
        at += 1
    return PortedHunk(path, hunk.index, hunk.header, hunk.old_index + 1, where.pos + 1, tuple(changes))


# ----------------------------------------------------------------------------------------------- locating


def _norm(line: bytes) -> bytes:
    """The line without its blanks, but with its line ending's kind: CRLF against LF is not whitespace (an
    added line would then bring the other ending into the file)."""
    return b"".join(line.split()) + (b"\r" if line.endswith(b"\r\n") else b"")


def _locate(
    content: Sequence[bytes], ops: Sequence[_Op], expected: int, header: int, fuzz: int
) -> _Placed | tuple[str, tuple[Candidate, ...]]:
    """The best position of the hunk's pre-image in `content`, or why there is none, with the candidates.

    `expected` is where the hunks before it put it, `header` the line its header names. Among equally good
    places, the one at `expected` is taken only if it is also the nearest to `header` (where git looks):
    otherwise a look-alike is near one of them, and the hunk is not guessed."""
    image = [op for op in ops if op.kind != 43]
    m, n = len(image), len(content)
    if m == 0:
        return "the hunk has no context to locate it by", ()
    normed = [_norm(line) for line in content]
    wanted = [_norm(op.line) for op in image]
    index: dict[bytes, list[int]] = {}
    for q, key in enumerate(normed):
        index.setdefault(key, []).append(q)
    votes: dict[int, int] = {}
    for i, key in enumerate(wanted):
        for q in index.get(key, ()):
            p = q - i
            if 0 <= p <= n - m:
                votes[p] = votes.get(p, 0) + 1
    scored: list[tuple[int, int, int, int]] = []  # (differing, whitespace-only, distance, position)
    for p, count in votes.items():
        if count < m - fuzz:
            continue
        differing = whitespace = 0
        ok = True
        for i, op in enumerate(image):
            have = content[p + i]
            if have == op.line:
                continue
            if normed[p + i] == wanted[i]:
                whitespace += 1
            elif op.kind == 45:
                ok = False
                break
            else:
                differing += 1
        if ok and differing <= fuzz:
            scored.append((differing, whitespace, abs(p - expected), p))
    if scored:
        scored.sort()
        best = scored[0]
        rivals = [s for s in scored if s[:2] == best[:2]]
        nearest_header = min(rivals, key=lambda s: (abs(s[3] - header), s[3] < header))
        if len(rivals) == 1 or (best[2] == 0 and nearest_header[3] == best[3]):
            return _Placed(best[3], _rebase(ops, content, best[3]))
        shown = tuple(Candidate(s[3] + 1, (m - s[0]) / m) for s in rivals[:CANDIDATES])
        return (f"{len(rivals)} places fit equally well, and none is both where the hunks before it put it "
                f"(line {expected + 1}) and nearest to the line its header names (line {header + 1}): "
                "not guessed"), shown
    near = sorted(votes.items(), key=lambda item: (-item[1], abs(item[0] - expected)))[:CANDIDATES]
    shown = tuple(Candidate(p + 1, count / m) for p, count in near)
    why = (f"no place in the file has its {sum(op.kind == 45 for op in image)} removed lines and all but at most "
           f"{fuzz} of its {m - sum(op.kind == 45 for op in image)} context lines")
    return why, shown


def _find_exact(content: Sequence[bytes], image: Sequence[bytes]) -> int | None:
    m = len(image)
    if m == 0:
        return None
    first = image[0]
    return next((p for p in range(len(content) - m + 1)
                 if content[p] == first and tuple(content[p:p + m]) == tuple(image)), None)


def _rebase(ops: Sequence[_Op], content: Sequence[bytes], pos: int) -> tuple[_Op, ...]:
    """The hunk's body with its context and removed lines as the new file has them at `pos`."""
    out = []
    at = pos
    for op in ops:
        if op.kind == 43:
            out.append(op)
        else:
            out.append(_Op(op.kind, content[at]))
            at += 1
    return tuple(out)


def _old_count(ops: Sequence[_Op]) -> int:
    return sum(op.kind != 43 for op in ops)


# ---------------------------------------------------------------------------------------------- rebuilding


class _Core(NamedTuple):
    start: int  # 0-based line of the new file where the first changed (or in-between) line is
    ops: list[_Op]  # from the first change to the last, context between them included
    context: int  # lines of context wanted on each side


def _rebuild(content: Sequence[bytes], placed: Sequence[_Placed]) -> tuple[list[bytes], bytes]:
    """The hunks of one file, rebuilt on `content` (in file order, merged where their context meets), and
    the file as they leave it."""
    cores: list[_Core] = []
    for where in placed:
        ops = list(where.ops)
        changed = [i for i, op in enumerate(ops) if op.kind != 32]
        lead = changed[0]
        trail = len(ops) - 1 - changed[-1]
        start = where.pos + lead
        cores.append(_Core(start, ops[lead:changed[-1] + 1], max(3, lead, trail)))
    merged: list[_Core] = []
    for core in cores:
        if merged:
            prev = merged[-1]
            prev_end = prev.start + _old_count(prev.ops)
            if core.start - core.context <= prev_end + prev.context:
                between = [_Op(32, line) for line in content[prev_end:core.start]]
                merged[-1] = _Core(prev.start, prev.ops + between + core.ops, max(prev.context, core.context))
                continue
        merged.append(core)
    rows: list[bytes] = []
    result: list[bytes] = []
    delta = 0
    at = 0
    for core in merged:
        end = core.start + _old_count(core.ops)
        first = max(0, core.start - core.context)
        last = min(len(content), end + core.context)
        body = [_Op(32, line) for line in content[first:core.start]] + core.ops + [
            _Op(32, line) for line in content[end:last]]
        old_count = _old_count(body)
        new_count = sum(op.kind != 45 for op in body)
        old_start = first + 1 if old_count else first
        new_first = first + delta
        new_start = new_first + 1 if new_count else new_first
        rows.append(b"@@ -%d,%d +%d,%d @@\n" % (old_start, old_count, new_start, new_count))
        for op in body:
            rows.append(bytes([op.kind]) + op.line)
            if not op.line.endswith(b"\n"):
                rows.append(b"\n\\ No newline at end of file\n")
        delta += new_count - old_count
        result += content[at:first]
        result += [op.line for op in body if op.kind != 45]
        at = last
    result += content[at:]
    return rows, b"".join(result)


def _index_line(row: bytes, before: bytes, after: bytes) -> bytes:
    """An `index OLD..NEW` line with the ids of the new tree's blob and of the ported result."""
    match = _INDEX.match(row.rstrip(b"\n"))
    if match is None:
        return row
    width = len(match.group(1))
    return b"index %s..%s%s\n" % (_blob_id(before)[:width].encode(), _blob_id(after)[:width].encode(),
                                   match.group(3))


def _blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


# ------------------------------------------------------------------------------------------ the diff's lines


def _hunk_rows(lines: Sequence[bytes], hunk: Hunk) -> list[bytes]:
    """The hunk's body rows in the diff ("\\ No newline" markers included), after its @@ line."""
    old_left, new_left = hunk.old_len, hunk.new_len
    rows: list[bytes] = []
    at = hunk.diff_line  # 0-based index of the first body row
    while at < len(lines) and (old_left > 0 or new_left > 0):
        row = lines[at]
        kind = row[0]
        if kind == 45:
            old_left -= 1
        elif kind == 43:
            new_left -= 1
        elif kind != 92:
            old_left -= 1
            new_left -= 1
        rows.append(row)
        at += 1
    if at < len(lines) and lines[at][:1] == b"\\":
        rows.append(lines[at])
    return rows


def _body_rows(lines: Sequence[bytes], hunk: Hunk) -> list[bytes]:
    return [lines[hunk.diff_line - 1], *_hunk_rows(lines, hunk)]


def _ops(lines: Sequence[bytes], hunk: Hunk) -> tuple[_Op, ...]:
    """The hunk's body as operations, each line with the ending it has in the file."""
    ops: list[_Op] = []
    for row in _hunk_rows(lines, hunk):
        if row[:1] == b"\\":
            if ops:
                last = ops[-1]
                ops[-1] = _Op(last.kind, last.line[:-1] if last.line.endswith(b"\n") else last.line)
            continue
        if row in (b"\n", b"\r\n"):  # a blank context line that lost its space
            ops.append(_Op(32, row))
        else:
            ops.append(_Op(row[0], row[1:]))
    if tuple(op.line for op in ops if op.kind != 43) != hunk.old_lines:
        raise InternalError(f"port read hunk {hunk.index} {hunk.header} otherwise than the parser")
    return tuple(ops)


# ------------------------------------------------------------------------------------------------ checking


def _check_ported(spec: PatchSpec, root: Root, data: bytes) -> TreeState:
    """The ported diff (it has no excludes left) must read `unapplied` on the new tree by patchkit's rules."""
    diff = parse_diff(data, spec.strip, "the ported diff")
    hunk_set = filter_diff(diff, (), spec.path_map)
    tree = scan_tree(root, hunk_set)
    if tree.state is not PatchState.UNAPPLIED:
        raise InternalError(f"the ported diff reads {tree.state.value} on the new tree: {tree.first_undecided()}")
    return tree


def ported_manifest(spec: PatchSpec, data: bytes, tree: TreeState) -> bytes:
    """The entry's manifest for the ported diff: no excludes left (the diff no longer holds what they named;
    each is kept as a comment in [exclude]), pinned to the ported bytes and hunk set, and with the [base]
    fingerprint of the new tree (left as it is for a patch with `after`: vendor --base-tree records that one,
    as the patches before it leave the tree). Comments and layout are the user's; reads the manifest, writes
    nothing."""
    import tomlkit  # lazy: vendor's manifest edit (tomlkit, here for the ported manifest)

    doc = tomlkit.parse(spec.manifest_path.read_text(encoding="utf-8"))
    if spec.excludes:
        table = tomlkit.table()
        for exclude in spec.excludes:
            entry = _exclude_text(exclude.pattern, exclude.reason, exclude.hunks)
            table.add(tomlkit.comment(f"left out of the ported diff by patchkit port: {entry}"))
        doc["exclude"] = table
    base = None if spec.after else fingerprint_tree(tree)
    text = update_manifest(tomlkit.dumps(doc), hashlib.sha256(data).hexdigest(), tree.hunk_set.digest, base)
    return text.encode("utf-8")


def _exclude_text(pattern: str, reason: str, hunks: tuple[int, ...] | None) -> str:
    """An exclude as the manifest spells it, on one line (JSON strings are TOML basic strings)."""
    if hunks is None:
        return f"{json.dumps(pattern)} = {json.dumps(reason)}"
    return f"{json.dumps(pattern)} = {{ hunks = {list(hunks)}, reason = {json.dumps(reason)} }}"


def default_output(spec: PatchSpec) -> Path:
    return spec.diff_path.with_name(spec.diff_path.name + ".ported")


def free_output(spec: PatchSpec) -> Path:
    """The first `<diff>.ported.N` (N from 2) none of whose files is there: for a message to suggest."""
    base = default_output(spec)
    for number in itertools.count(2):
        candidate = base.with_name(f"{base.name}.{number}")
        if not any(os.path.lexists(p) for p in PortFiles.beside(candidate)):
            return candidate
    raise AssertionError("unreachable")  # pragma: no cover


def write_port(result: PortResult, files: PortFiles, command: list[str]) -> tuple[Path, ...]:
    """Write what the port made, each as a new file; refuse (nothing written) while an earlier port's output is
    there or when it would land in the engine tree. `command` is the port's own command line without --output,
    for the hint. Returns the files written."""
    tree = result.root.resolve()
    for path in files:
        if Path(os.path.abspath(path)).resolve().is_relative_to(tree):
            raise BadInputError("port never writes into the engine tree it reads", where=str(path),
                                hint="name a file outside --root with --output FILE, or leave it out (the default "
                                "is beside the patch's diff)")
    there = next((p for p in files if os.path.lexists(p)), None)
    if there is not None:
        again = shlex.join([*command, "--output", str(free_output(result.spec).absolute())])
        raise BadInputError(
            "an earlier port's output is there: port never writes over a file (review it, move it away, or port "
            "to another name)", where=str(there), hint=f"port to new files: `{again}`",
        )
    written: list[Path] = []
    if result.diff is not None:
        _write_new(files.diff, result.diff, "the ported diff")
        written.append(files.diff)
    if result.manifest is not None:
        _write_new(files.manifest, result.manifest, "the ported manifest")
        written.append(files.manifest)
    if result.rejects:
        _make_folder(files.rejects)
        for reject in result.rejects:
            path = files.reject_path(reject)
            _make_parents(path.parent)
            _write_new(path, reject.data, "a reject file")
            written.append(path)
    return tuple(written)


def _make_folder(path: Path) -> None:
    try:
        os.mkdir(path)
    except FileExistsError:
        raise BadInputError("the folder appeared meanwhile: port never writes over a file", where=str(path)) from None
    except OSError as exc:
        raise BadInputError(f"cannot make the reject folder: {exc.strerror}", where=str(path)) from None


def _make_parents(path: Path) -> None:
    """The folders of a reject file, inside the reject folder made just now (its paths are checked diff paths)."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise BadInputError(f"cannot make a folder for the reject files: {exc.strerror}", where=str(path)) from None


def _write_new(path: Path, data: bytes, what: str) -> None:
    """Create `path` with `data`: never over an existing file (or link), complete or not at all."""
    try:
        write_file(path, data, replace=False, what=what)
    except FileExistsError:
        raise BadInputError("the file appeared meanwhile: port never writes over a file", where=str(path)) from None
