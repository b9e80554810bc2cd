"""The compiled hunk set: a patch's filtered hunk set written beside its manifest (`patches/<id>/<id>.compiled`)
by `patchkit compile`, so that a start (a fresh container) loads it in milliseconds instead of parsing the diff.

It stands for exactly one thing: what `load_hunk_set` gives for this manifest entry, this diff and this patchkit.
A *binding* (sha256 over the format, patchkit's version and the fingerprint of the code that makes a hunk set
(`code_fingerprint`: the diff and input stages and unidiff, or the whole patchkit.pyz), the patch id, the
diff's name and pinned sha256, the strip level, the excludes and the placement: everything the filtered set
depends on) is stored in the file and compared with the binding of the entry in hand; the diff's bytes are
still read and checked against the pin first (PatchSpec.read_diff), so an edited diff is reported exactly as
without a compiled file. Anything doubtful and the diff is parsed as before, silently (`load_compiled` returns
None):
- the file is not a regular file with one link, is owned by another user than the running one or root, or is
  writable by group or others (the one rule of patchkit.input.trust), or is larger than MAX_COMPILED_BYTES;
- a binding, format or checksum mismatch (stale: the diff, the manifest or patchkit changed; or damaged);
- any structural fault: a type, a bound (patchkit.input.limits), a count that does not fit the lines, a path the
  parser would refuse, a file's hunks out of line order (diffs._check_order's rule, on the diff's own headers:
  the judgement reads hunk after hunk down the file). These checks keep a hostile file from crashing or
  misleading patchkit; the parser's other checks are not made again (the compile made those): a file that is
  well formed and correctly bound is believed, as the registry folder it sits in is. `patchkit lint` compares
  every committed compiled file with a fresh compile (PK105), so a lying one does not pass review.

Format (no pickle, no marshal: nothing in it can run): MAGIC, the sha256 of the rest, a 4-byte big-endian
length, a JSON header of that length, then the body: every hunk's old and new image lines, one after the other,
each ending with a newline (a last line that has none gets one, and its hunk row a flag saying so). The body is
split into lines in one pass and handed out by the header's counts; an image line that lacks its newline before
its end cannot be held (only a hostile diff makes one): the compile checks that decoding gives back exactly what
it encoded, and writes nothing otherwise.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import json
import os
import re
import stat
import sys
from importlib.util import find_spec
from itertools import pairwise
from operator import add, ge, le
from pathlib import Path
from typing import TYPE_CHECKING, Any

from patchkit import __version__, source_archive
from patchkit.diff.hunks import MODE_EXEC, MODE_FILE, FilePatch, Hunk, side_extent
from patchkit.diff.hunkset import HunkSet
from patchkit.errors import UnsafePathError
from patchkit.input.limits import MAX_COMPILED_BYTES, MAX_DIFF_LINES, MAX_HEADER_DIGITS
from patchkit.input.paths import check_path
from patchkit.input.trust import refusal

if TYPE_CHECKING:
    from patchkit.input.manifest import PatchSpec

MAGIC = b"patchkit-compiled-hunk-set-3\n"
SUFFIX = ".compiled"
_MAX_NUMBER = 10 ** MAX_HEADER_DIGITS  # no header line number or count reaches it (limits.MAX_HEADER_DIGITS)
_MODES = (None, MODE_FILE, MODE_EXEC)  # what filtering leaves in a hunk set (no links, no submodules)
_BLOB = re.compile(r"[0-9a-f]{4,64}")
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
# A hunk's row: index, diff_line, old_start, old_len, new_start, new_len, leading, trailing, then flags: 1 if the
# old image's last line has no newline, 2 the same for the new image; then dropped_old, dropped_growth (how far
# hunk excludes moved it; either may be negative). All ints; a file's rows are one flat list, row after row.
_HUNK_ROW = 11
_UNSIGNED = 9  # the row's fields before the two moves
_INT = {int}
_NO_NEWLINE_OLD, _NO_NEWLINE_NEW = 1, 2


def compiled_path(spec: PatchSpec) -> Path:
    return spec.folder / f"{spec.id}{SUFFIX}"


def binding_of(spec: PatchSpec) -> str:
    """sha256 of everything the filtered hunk set of `spec` depends on (see the module doc)."""
    parts = [
        MAGIC.decode(), __version__, code_fingerprint(), spec.id, spec.diff_name, spec.sha256, spec.strip,
        [[e.pattern, list(e.hunks) if e.hunks is not None else None] for e in spec.excludes],
        [spec.path_map.prefix, [list(pair) for pair in spec.path_map.folders]],
    ]
    return hashlib.sha256(json.dumps(parts, ensure_ascii=True).encode()).hexdigest()


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """sha256 of the code a hunk set comes from: from patchkit.pyz the archive's bytes, else the sources of the
    diff and input stages (the parse, the filter, the bounds) and unidiff's, and the Python version. A new build
    of the same version whose parser changed never reads an older build's compiled files (~1 ms)."""
    h = hashlib.sha256(f"{sys.version}\0".encode())
    archive = source_archive()
    folders = []
    if archive is None:
        here = os.path.dirname(os.path.abspath(__file__))
        folders = [here, os.path.join(os.path.dirname(here), "input")]
        spec = find_spec("unidiff")  # locates the package without importing it
        if spec is not None and spec.origin:
            folders.append(os.path.dirname(spec.origin))
    for path in [archive] if archive is not None else [
        os.path.join(folder, name) for folder in folders for name in sorted(os.listdir(folder))
        if name.endswith(".py")
    ]:
        h.update(os.path.basename(path).encode() + b"\0")
        try:
            with open(path, "rb") as handle:
                h.update(handle.read())
        except OSError:
            h.update(b"unreadable")
    return h.hexdigest()


def encode_hunk_set(hunk_set: HunkSet, binding: str) -> bytes:
    """The file's bytes for `hunk_set` (deterministic: lint compares bytes)."""
    files = []
    body: list[bytes] = []
    for f in hunk_set.files:
        hunks: list[int] = []
        for h in f.hunks:
            flags = 0
            for image, flag in ((h.old_lines, _NO_NEWLINE_OLD), (h.new_lines, _NO_NEWLINE_NEW)):
                body += image
                if image and not image[-1].endswith(b"\n"):
                    body.append(b"\n")
                    flags |= flag
            hunks += [h.index, h.diff_line, h.old_start, h.old_len, h.new_start, h.new_len, h.leading, h.trailing,
                      flags, h.dropped_old, h.dropped_growth]
        files.append([f.old_path, f.new_path, f.old_mode, f.new_mode, f.diff_line, f.binary, f.old_blob,
                      f.new_blob, hunks])
    header = json.dumps({"binding": binding, "excluded": list(hunk_set.excluded), "files": files},
                        ensure_ascii=True, separators=(",", ":")).encode()
    payload = len(header).to_bytes(4, "big") + header + b"".join(body)
    return MAGIC + hashlib.sha256(payload).digest() + payload


def decode_hunk_set(blob: bytes, binding: str, source: str) -> HunkSet | None:
    """The hunk set `blob` holds if it is well formed and bound to `binding`, else None (never an exception)."""
    try:
        return _decode(blob, binding, source)
    except (ValueError, TypeError, KeyError, IndexError, RecursionError, UnsafePathError):
        return None


def _decode(blob: bytes, binding: str, source: str) -> HunkSet | None:
    start = len(MAGIC) + 32
    if blob[:len(MAGIC)] != MAGIC or hashlib.sha256(blob[start:]).digest() != blob[len(MAGIC):start]:
        return None
    size = int.from_bytes(blob[start:start + 4], "big")
    header = json.loads(blob[start + 4:start + 4 + size])
    body = blob[start + 4 + size:]
    if type(header) is not dict or header.get("binding") != binding or body[-1:] not in (b"", b"\n"):
        return None
    # Every line, in one pass: the hunks take theirs in order, as slices of one tuple. A binary BytesIO splits at
    # LF alone, in C, as the judgement splits files: a body with a CR in it (a CRLF file) takes it too, where a regex
    # took twice as long (history benchmark: 10 against 21 ms; docs/performance.md, issue #36).
    lines = tuple(io.BytesIO(body).readlines())
    if len(lines) > MAX_DIFF_LINES:
        return None
    excluded = header["excluded"]
    if type(excluded) is not list or not all(type(p) is str for p in excluded):
        return None
    for path in excluded:
        check_path(path)
    rows = header["files"]
    if type(rows) is not list or not rows:
        return None
    at = 0
    files = []
    for row in rows:
        if type(row) is not list or len(row) != 9:
            return None
        old_path, new_path, old_mode, new_mode, diff_line, binary, old_blob, new_blob, hunk_rows = row
        if binary is not False or type(hunk_rows) is not list or not _number(diff_line):
            return None
        if old_path is None and new_path is None:
            return None
        for path, mode, blob_id in ((old_path, old_mode, old_blob), (new_path, new_mode, new_blob)):
            if blob_id is not None and (type(blob_id) is not str or not _BLOB.fullmatch(blob_id)):
                return None
            if path is None:
                if mode is not None:
                    return None
                continue
            if type(path) is not str or mode not in _MODES or type(mode) is bool:
                return None
            check_path(path)
        # The file's hunk rows, one flat list (_HUNK_ROW ints a hunk): every field checked in C over the whole
        # list and its columns, not row by row (a large set has 10k rows; docs/performance.md, issue #36).
        count, extra = divmod(len(hunk_rows), _HUNK_ROW)
        if extra or (count and (set(map(type, hunk_rows)) != _INT or max(hunk_rows) >= _MAX_NUMBER
                                or min(hunk_rows) <= -_MAX_NUMBER)):
            return None
        columns = [hunk_rows[c::_HUNK_ROW] for c in range(_HUNK_ROW)]
        indexes, old_lens, new_lens, leadings, trailings, flag_column = (columns[c] for c in (0, 3, 5, 6, 7, 8))
        if count and (min(map(min, columns[:_UNSIGNED])) < 0 or min(indexes) < 1 or max(flag_column) > 3):
            return None
        if (old_path is None and any(old_lens)) or (new_path is None and any(new_lens)):
            return None
        if not (all(map(le, leadings, old_lens)) and all(map(le, leadings, new_lens))
                and all(map(le, trailings, old_lens)) and all(map(le, trailings, new_lens))):
            return None
        if count > 1 and not (_in_line_order(columns[2], columns[9], old_lens)
                              and _in_line_order(columns[4], columns[10], new_lens)):
            return None
        hunks = []
        for row in zip(*columns, strict=True):
            index, line, old_start, old_len, new_start, new_len, leading, trailing, flags, moved_old, moved = row
            old = lines[at:at + old_len]
            at += old_len
            new = lines[at:at + new_len]
            at += new_len
            if flags:
                if flags & _NO_NEWLINE_OLD:
                    old = _without_newline(old)
                if flags & _NO_NEWLINE_NEW:
                    new = _without_newline(new)
            hunks.append(Hunk(index, line, old_start, old_len, new_start, new_len, old, new, leading, trailing,
                              dropped_old=moved_old, dropped_growth=moved))
        files.append(FilePatch(old_path, new_path, old_mode, new_mode, tuple(hunks), diff_line, False, old_blob,
                               new_blob))
    if at != len(lines):  # every line taken, none missing (a count too large leaves `at` past the end)
        return None
    return HunkSet(source, tuple(files), tuple(excluded))


def _in_line_order(starts: list[int], moves: list[int], counts: list[int]) -> bool:
    """The parser's rule (diffs._check_order) on one side of a file's hunks, on the diff's own headers (`starts`
    plus what excludes moved them by, `moves`): each hunk past the end of the one before. Excludes only drop
    hunks, so the hunks left keep the rule. Sides with lines (nearly all): a hunk starts at or past the line
    after the one before it ends, in C over the columns; else in hunks.side_extent's half lines, as the parser
    counts them."""
    if any(moves):
        starts = list(map(add, starts, moves))
    if 0 not in counts:
        return all(map(ge, starts[1:], map(add, starts, counts)))
    places = list(map(side_extent, starts, counts))
    return all(later[0] > earlier[1] for earlier, later in pairwise(places))


def _number(value: Any) -> bool:
    return type(value) is int and 0 <= value < _MAX_NUMBER


def _without_newline(image: tuple[bytes, ...]) -> tuple[bytes, ...]:
    if not image:
        raise ValueError("a no-newline flag on an empty image")
    return (*image[:-1], image[-1][:-1])


def load_compiled(spec: PatchSpec) -> HunkSet | None:
    """The compiled hunk set of `spec` if there is one patchkit may believe (see the module doc), else None.

    Call it only once `spec.read_diff()` has checked the diff against its pin."""
    try:
        fd = os.open(compiled_path(spec), _READ_FLAGS)
    except (OSError, ValueError):
        return None
    try:
        st = os.fstat(fd)
        if not (stat.S_ISREG(st.st_mode) and st.st_nlink == 1 and refusal(st, str(spec.diff_path)) is None
                and st.st_size <= MAX_COMPILED_BYTES):
            return None  # planted, hard-linked, loosened or oversized: not the registry's to believe
        blob = _read_bounded(fd, st.st_size)
    except OSError:
        return None
    finally:
        os.close(fd)
    if blob is None:
        return None
    return decode_hunk_set(blob, binding_of(spec), str(spec.diff_path))


def _read_bounded(fd: int, size: int) -> bytes | None:
    chunks = []
    total = 0
    while chunk := os.read(fd, max(size, 1 << 16)):
        chunks.append(chunk)
        total += len(chunk)
        if total > MAX_COMPILED_BYTES:  # grew after the fstat
            return None
    return b"".join(chunks)


def compile_bytes(spec: PatchSpec, hunk_set: HunkSet) -> bytes | None:
    """The compiled file of `hunk_set` (the filtered set of `spec`), or None if the format cannot hold it
    exactly (an image with a line that lacks its newline before its end: only a hostile diff makes one)."""
    binding = binding_of(spec)
    data = encode_hunk_set(hunk_set, binding)
    if len(data) > MAX_COMPILED_BYTES or decode_hunk_set(data, binding, hunk_set.source) != hunk_set:
        return None
    return data


def write_compiled(spec: PatchSpec, data: bytes) -> Path:
    """Write the compiled file beside the manifest: exclusive temp file, mode 0644, fsync, rename. Raises OSError."""
    path = compiled_path(spec)
    tmp = spec.folder / f".{spec.id}{SUFFIX}.{os.urandom(8).hex()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), 0o644)  # the umask only narrows; be exact (it is no secret)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path
