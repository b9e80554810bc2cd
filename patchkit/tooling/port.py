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
so the manifest's `strip`, prefix and [paths] still fit; `index` lines get the new blobs' ids. Files and
hunks the manifest excludes are carried over as they were, so every exclude still names a file of the diff.
Before it is returned, the ported diff is parsed, filtered and judged on the new tree by patchkit's own
rules: it must read `unapplied` there (else InternalError: a bug, nothing is written).
"""

from __future__ import annotations

import hashlib
import io
import itertools
import re
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
from patchkit.outcome import PatchState
from patchkit.tooling.files import write_file

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
class PortResult:
    spec: PatchSpec
    root: Path
    hunks: tuple[PortedHunk, ...]
    notes: tuple[str, ...]  # whole-file facts (created, deleted, excluded files carried over)
    diff: bytes | None  # the ported diff; None when some hunk could not be placed

    @property
    def complete(self) -> bool:
        return self.diff is not None


class _Op(NamedTuple):
    kind: int  # 32 " ", 45 "-", 43 "+"
    line: bytes  # with its ending; without one when "\ No newline at end of file" follows


class _Placed(NamedTuple):
    pos: int  # 0-based start of the pre-image in the new file
    ops: tuple[_Op, ...]  # the hunk's body with context and removed lines from the new file


# ------------------------------------------------------------------------------------------------- the port


def port_patch(spec: PatchSpec, root: Root, *, fuzz: int = DEFAULT_FUZZ) -> PortResult:
    """Locate every hunk of `spec`'s filtered hunk set on the tree at `root` and build the ported diff."""
    hunk_set = load_hunk_set(spec)  # the new tree is not the base a refused commit chain's net diff needs
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
    for number, section in enumerate(diff.files):
        placed = placed_sections.get(section.diff_line)
        end = section.hunks[0].diff_line if section.hunks else starts[number + 1]
        header = [row for row in lines[section.diff_line - 1:end - 1] if _HEADER.match(row)]
        if placed is None:  # excluded by the manifest: carried over as it is
            notes.append(f"{section.path}: excluded by the manifest, carried over unchanged")
            out += header
            for hunk in section.hunks:
                out += _body_rows(lines, hunk)
            continue
        text, hunks = _port_section(root, placed, section, header, lines, kept, fuzz, notes)
        reports += hunks
        out += text
    result = b"".join(out)
    if any(not h.placed for h in reports):
        return PortResult(spec, root.path, tuple(reports), tuple(notes), None)
    _check_ported(spec, root, result)
    return PortResult(spec, root.path, tuple(reports), tuple(notes), result)


def _port_section(
    root: Root, placed: FilePatch, section: FilePatch, header: list[bytes], lines: Sequence[bytes],
    kept: set[int], fuzz: int, notes: list[str],
) -> tuple[list[bytes], list[PortedHunk]]:
    old = read_snapshot(root, placed.old_path) if placed.old_path is not None else None
    new = read_snapshot(root, placed.new_path) if placed.new_path is not None else None
    if placed.op is FileOp.CREATE:
        if new is not None and new.exists:
            return header, [_whole_file(placed, "the new tree already has this file, which the patch creates")]
        notes.append(f"{placed.path}: created by the patch, carried over")
        return header + [row for h in section.hunks for row in _body_rows(lines, h)], []
    if old is None or old.data is None:
        return header, [_whole_file(placed, "the new tree does not have this file")]
    if placed.op is FileOp.RENAME and new is not None and new.exists:
        return header, [_whole_file(placed, f"the new tree already has {placed.new_path}, the rename's target")]
    content = tuple(io.BytesIO(old.data).readlines())
    if placed.op is FileOp.DELETE:
        if tuple(placed.hunks[0].old_lines if placed.hunks else ()) != content:
            return header, [_whole_file(placed, "the file the patch deletes has other content in the new tree")]
        notes.append(f"{placed.path}: deleted by the patch, carried over")
        return header + [row for h in section.hunks for row in _body_rows(lines, h)], []
    reports: list[PortedHunk] = []
    found: list[tuple[Hunk, _Placed]] = []
    offset = 0
    for hunk in section.hunks:
        if hunk.diff_line not in kept:
            continue
        ops = _ops(lines, hunk)
        where = _locate(content, ops, hunk.old_index + offset, hunk.old_index, fuzz)
        if isinstance(where, _Placed):
            offset = where.pos - hunk.old_index
            found.append((hunk, where))
            reports.append(_report(placed.path, hunk, ops, where, content))
        else:
            reason = where[0]
            there = _find_exact(content, hunk.new_lines)
            if there is not None and hunk.new_lines != hunk.old_lines:
                reason = (f"the new tree already has this hunk's change (its post-image is at line {there + 1}): "
                          "the engine may ship it; drop the hunk, or retire the patch")
            reports.append(PortedHunk(placed.path, hunk.index, hunk.header, hunk.old_index + 1, None,
                                      candidates=where[1], reason=reason))
    found.sort(key=lambda item: item[1].pos)
    for (first, a), (second, b) in itertools.pairwise(found):
        if b.pos < a.pos + _old_count(a.ops):
            i = next(i for i, r in enumerate(reports) if r.index == second.index)
            reports[i] = PortedHunk(
                placed.path, second.index, second.header, second.old_index + 1,
                None, reason=f"it would overlap hunk {first.index} (found at line {a.pos + 1})",
                candidates=(Candidate(b.pos + 1, 1.0),),
            )
    if any(not r.placed for r in reports):
        return header, reports
    excluded = [h for h in section.hunks if h.diff_line not in kept]
    body, after = _rebuild(content, [p for _, p in found])
    if excluded:
        notes.append(f"{placed.path}: hunks dropped by the manifest carried over unchanged, after the ported ones")
        body += [row for h in excluded for row in _body_rows(lines, h)]
    return [_index_line(row, old.data, after) for row in header] + body, reports


def _whole_file(placed: FilePatch, reason: str) -> PortedHunk:
    return PortedHunk(placed.path, 0, "(the whole file)", 0, None, reason=reason)


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


def _check_ported(spec: PatchSpec, root: Root, data: bytes) -> None:
    """The ported diff, filtered by the manifest, must read `unapplied` on the new tree by patchkit's rules."""
    diff = parse_diff(data, spec.strip, "the ported diff")
    hunk_set = filter_diff(diff, spec.excludes, spec.path_map)
    tree = scan_tree(root, hunk_set)
    if tree.state is not PatchState.UNAPPLIED:
        raise InternalError(f"the ported diff reads {tree.state.value} on the new tree: {tree.first_undecided()}")


def default_output(spec: PatchSpec) -> Path:
    return spec.diff_path.with_name(spec.diff_path.name + ".ported")


def write_new_file(path: Path, data: bytes) -> None:
    """Create `path` with `data`: never over an existing file (or link), complete or not at all."""
    try:
        write_file(path, data, replace=False, what="the ported diff")
    except FileExistsError:
        raise BadInputError(
            "the file is already there: port never writes over a file", where=str(path),
            hint="review and move the earlier one away, or name another with --output FILE",
        ) from None
