"""Diff bytes -> frozen records: the only module that imports unidiff.

`parse_diff` turns diff bytes into `FilePatch`/`Hunk` records (patchkit.diff.hunks) whose lines are raw bytes, so
line endings and encodings survive untouched. unidiff is the parser of record; around it this module adds what
unidiff does not check: hunk counts that are too small (unidiff silently drops the extra lines), headers that
contradict each other, git-quoted paths, strip, and unsafe paths. Excludes are applied later, by
patchkit.diff.filtering.
"""

from __future__ import annotations

import gc
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from patchkit.diff.hunks import (
    DEV_NULL,
    MODE_EXEC,
    MODE_FILE,
    MODE_GITLINK,
    MODE_SYMLINK,
    Diff,
    FilePatch,
    Hunk,
    side_extent,
)
from patchkit.display import escape_controls
from patchkit.errors import DiffError, NotADiffError, UnsafePathError
from patchkit.input.limits import MAX_DIFF_LINES, MAX_HEADER_DIGITS, check_diff_size
from patchkit.input.paths import check_path

RE_HUNK_HEADER = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@( .*)?$")
RE_OLD_FILE = re.compile(rb"^--- (.*?)(?:\t.*)?$")
RE_NEW_FILE = re.compile(rb"^\+\+\+ (.*?)(?:\t.*)?$")
RE_MODE_LINE = re.compile(rb"^(old mode|new mode|new file mode|deleted file mode) ([0-7]{6})$")
RE_INDEX_MODE = re.compile(rb"^index [0-9a-f]+\.\.[0-9a-f]+ ([0-7]{6})$")
RE_INDEX = re.compile(rb"^index ([0-9a-f]{7,64})\.\.([0-9a-f]{7,64})(?: [0-7]{6})?$")
RE_RENAME = re.compile(rb"^(rename|copy) (from|to) (.+)$")
RE_BINARY_LINE = re.compile(rb"^Binary files (.+?) and (.+?) differ$")
NO_NEWLINE = b"\\"
# A web page where a diff was expected: its first tag, after a byte-order mark and blank space.
_HTML = re.compile(rb"(?:\xef\xbb\xbf)?\s*(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html)[\s>]", re.I | re.S)
SIGNATURE = b"-- "  # `git format-patch` mail signature: everything after it is not diff

_C_ESCAPES = {b"a": 7, b"b": 8, b"t": 9, b"n": 10, b"v": 11, b"f": 12, b"r": 13, b'"': 34, b"\\": 92}


def parse_diff(data: bytes, strip: int, source: str) -> Diff:
    """Parse unified/git diff bytes. Raises DiffError naming the diff line at fault."""
    if not data.strip():
        raise NotADiffError("the diff is empty", where=source, hint="vendor the real diff of the upstream change")
    check_diff_size(len(data), source)
    count = data.count(b"\n")  # before splitting: a diff of newlines only would cost ~40 bytes of memory each
    if count > MAX_DIFF_LINES:
        raise DiffError(
            f"the diff has {count} lines, over the limit of {MAX_DIFF_LINES}", where=f"{source}:{MAX_DIFF_LINES + 1}",
            hint="split the change into several patches (see patchkit.input.limits for why the bound is there)",
        )
    lines = _split_lines(data)
    sanitized, headers = _scan(lines, source)
    # The parse allocates objects by the diff line and frees none of them: garbage collection passes over
    # them are pure cost.
    collecting = gc.isenabled()
    gc.disable()
    try:
        patched = _unidiff_parse(sanitized, source)
        del sanitized
        files = tuple(_convert_file(pf, headers, lines, strip, source) for pf in patched)
    finally:
        if collecting:
            gc.enable()
    _check_context(files, source)
    _check_order(files, source)
    if not files:
        if _HTML.match(data[:1024]):
            raise NotADiffError(
                "this is an HTML page, not a diff (a saved or fetched web page)", where=source,
                hint="save the diff itself: a forge serves a pull request's net diff at its page's address plus "
                "`.diff` (`.../pull/N.diff`)",
            )
        raise NotADiffError(
            "no file changes found in the diff", where=source,
            hint="is this a unified diff (`git diff`, a pull request's .diff)?",
        )
    return Diff(source, files)


def _check_context(files: tuple[FilePatch, ...], source: str) -> None:
    """Refuse a hunk without leading context past line 1 (`git diff -U0`, or a hand edit): the one rule, for
    every diff that is loaded, pinned or not, vendored or compiled.

    Only a diff made without context (or a hunk cut by hand) starts past line 1 with a change: with context,
    git writes as many lines above the first change as the file has, up to the context size. Nothing above
    such a hunk says where it belongs; a -U0 hunk is worse: git pins a hunk without trailing context to the end
    of the file, so in the middle of a file it never applies with `git apply` (only with `--unidiff-zero`,
    which gives up exactly the check patchkit exists for), and where the file's end happens to match, it
    lands there. A hunk at line 0 or 1 is pinned to the start of the file (and, without trailing context, to
    its end: the whole file), and is judged as such.
    """
    for f in files:
        for h in f.hunks:
            if h.leading == 0 and h.old_start > 1:
                raise DiffError(
                    f"{f.path}: hunk {h.index} {h.header} has no context lines before its first change; a hunk "
                    "without leading context cannot be located safely",
                    where=f"{source}:{h.diff_line}",
                    hint="regenerate the diff with context: `git diff` / `git format-patch` without -U0 "
                    "(the default is 3 lines, -U3)",
                )


def _check_order(files: tuple[FilePatch, ...], source: str) -> None:
    """Refuse a file section whose hunks are not in the order of their lines: each hunk must start past the end
    of the one before it, on the old side and on the new one (a revert reads the new side).

    git writes them so, and the judgement rests on it (matching.read_file reads hunk after hunk down the file,
    each past the one before); `git apply` takes hunks in diff order and searches each around its own line, so
    a diff with its hunks swapped is one it applies, and patchkit would judge it by a wrong order (a pristine
    tree read as drifted). Each section on its own: a file touched twice has two sections, the second reading
    the file the first makes.
    """
    for f in files:
        for earlier, later in zip(f.hunks, f.hunks[1:], strict=False):  # each hunk with the next
            if (earlier.old_len and later.old_len and later.old_start >= earlier.old_start + earlier.old_len
                    and earlier.new_len and later.new_len and later.new_start >= earlier.new_start + earlier.new_len):
                continue  # the common case, both sides with lines (side_extent's rule for them, without the calls)
            _check_pair(f, earlier, later, source)


def _check_pair(f: FilePatch, earlier: Hunk, later: Hunk, source: str) -> None:
    for side, start, count, was, was_count in (
        ("old", later.old_start, later.old_len, earlier.old_start, earlier.old_len),
        ("new", later.new_start, later.new_len, earlier.new_start, earlier.new_len),
    ):
        first, _ = side_extent(start, count)
        was_first, was_last = side_extent(was, was_count)
        if first > was_last:
            continue
        before = first < was_first
        raise DiffError(
            f"{f.path}: hunk {later.index} {later.header} {'comes before' if before else 'overlaps'} "
            f"hunk {earlier.index} {earlier.header} ({side} side: {_span(start, count)}, hunk "
            f"{earlier.index} {_span(was, was_count)}); patchkit needs the hunks of a file section in the "
            "order of their lines, each past the end of the one before",
            where=f"{source}:{later.diff_line or f.diff_line}",
            hint="put the file's hunks in the order of their lines, or regenerate the diff with `git diff`"
            if before else "regenerate the diff with `git diff` (a file's hunks never overlap in a diff "
            "git makes)",
        )


def _span(start: int, count: int) -> str:
    if count == 0:
        return f"after line {start}" if start else "before line 1"
    return f"line {start}" if count == 1 else f"lines {start}-{start + count - 1}"


def _split_lines(data: bytes) -> list[bytes]:
    """Lines that keep their LF, the last one given one if it lacks it. Only LF ends a line (CR is content)."""
    lines = io.BytesIO(data).readlines()  # splits on LF alone, in C
    if lines and not lines[-1].endswith(b"\n"):
        lines[-1] += b"\n"
    return lines


@dataclass
class _Header:
    """File names of one section as written in the diff (raw, possibly quoted), found by _scan."""

    line: int
    git: bytes | None = None  # the rest of a `diff --git` line
    old: bytes | None = None  # name on the --- line
    new: bytes | None = None  # name on the +++ line
    old_line: int = 0  # line number of the --- line
    flags: set[bytes] = field(default_factory=set)  # new file mode / deleted file mode seen
    # each hunk of the section: [line number of its @@ header, index of its first and one past its last
    # body line in the diff's lines ("\\ No newline" markers included), 1 if all are " ", "-" or "+" lines]
    hunks: list[list[int]] = field(default_factory=list)


def _placeholder(index: int) -> bytes:
    return b"pk%d" % index


def _scan(lines: Sequence[bytes], source: str) -> tuple[list[bytes], list[_Header]]:
    """Walk the diff once, independently of unidiff, to catch what unidiff would silently accept.

    Returns the lines to give unidiff, with every file name replaced by a placeholder `pkN` (N indexes the
    returned headers): unidiff then never has to split names with spaces, and names come from one place.
    """
    out: list[bytes] = []
    headers: list[_Header] = []
    old_left = new_left = 0
    hunk_line = 0
    hunk_header = b""
    just_closed = False
    in_signature = False
    git: _Header | None = None  # the open `diff --git` section, until its ---/+++ pair or next section
    body: list[int] = [0, 0, 0, 1]  # the open hunk's row of _Header.hunks
    nul = b"\0" in b"".join(lines)  # only then is every line checked, so the first fault is still reported
    rows = enumerate(lines, 1)
    for number, raw in rows:
        line = raw[:-1]
        if nul and b"\0" in line:
            raise _nul_error(source, number)
        where = f"{source}:{number}"
        if just_closed and line[:1] == NO_NEWLINE:
            body[2], body[3] = number, 0
            out.append(raw)
            continue
        if line == SIGNATURE:  # a mail signature runs to the next patch of a series
            in_signature, just_closed = True, False
            out.append(b"\n")
            continue
        if in_signature and not line.startswith((b"From ", b"diff --git ")):
            out.append(b"\n")
            continue
        in_signature = False
        if line.startswith(b"@@"):
            match = RE_HUNK_HEADER.match(line)
            if not match:
                raise DiffError(f"malformed hunk header {_show(line)}", where=where)
            if not headers:
                raise DiffError("hunk before any file header", where=where, hint="the diff lost its ---/+++ lines")
            if any(len(n) > MAX_HEADER_DIGITS for n in match.groups()[:4] if n is not None):
                raise DiffError(
                    f"hunk header {_show(line)} has a number of more than {MAX_HEADER_DIGITS} digits", where=where,
                    hint="no file has that many lines: the header is corrupt; regenerate the diff",
                )
            old_left = 1 if match.group(2) is None else int(match.group(2))
            new_left = 1 if match.group(4) is None else int(match.group(4))
            hunk_line, hunk_header = number, line
            git = None
            out.append(raw)
            plain = 1  # only " ", "-" and "+" lines so far
            start = number
            if old_left or new_left:
                # The hunk's body, in a loop of its own (the bulk of every diff): count each side down.
                for number, raw in rows:  # the outer loop's iterator: it goes on after the body
                    if nul and b"\0" in raw:
                        raise _nul_error(source, number)
                    kind = raw[0]
                    if kind == 32:  # " "
                        old_left -= 1
                        new_left -= 1
                    elif kind == 45:  # "-"
                        old_left -= 1
                    elif kind == 43:  # "+"
                        new_left -= 1
                    elif raw == b"\n" or raw == b"\r\n":  # a blank context line that lost its space
                        old_left -= 1
                        new_left -= 1
                        plain = 0
                    elif kind == 92:  # "\\ No newline at end of file"
                        plain = 0
                    else:
                        raise DiffError(
                            f"hunk {_show(hunk_header)} (line {hunk_line}) ends early: its header promises "
                            f"{max(old_left, 0)} more old and {max(new_left, 0)} more new lines",
                            where=f"{source}:{number}",
                            hint="the diff is truncated or its hunk header counts are wrong",
                        )
                    if old_left < 0 or new_left < 0:
                        raise DiffError(
                            f"hunk {_show(hunk_header)} (line {hunk_line}) has more lines than its header counts",
                            where=f"{source}:{number}", hint="the hunk header counts are wrong; regenerate the diff",
                        )
                    if not (old_left or new_left):
                        break
                out.extend(lines[start:number])
            body = [hunk_line, start, number, plain]
            headers[-1].hunks.append(body)
            just_closed = not (old_left or new_left)
            continue
        is_pair = _is_file_header(lines, number - 1)
        if just_closed and line[:1] in (b"+", b"-", b" ") and not is_pair:
            raise DiffError(
                f"line after hunk {_show(hunk_header)} (line {hunk_line}) looks like hunk content, "
                "but the hunk's header counts are already used up",
                where=where, hint="the hunk header counts are too small; regenerate the diff",
            )
        just_closed = False
        if (line.startswith(b"diff --git ") or is_pair) and line.endswith(b"\r"):
            raise NotADiffError(
                "the diff's own header lines end in CRLF", where=where,
                hint="the diff file was converted to CRLF (an editor or core.autocrlf); restore the original",
            )
        if line.startswith(b"diff --git "):
            git = _Header(number, git=line[len(b"diff --git "):])
            headers.append(git)
            name = _placeholder(len(headers) - 1)
            out.append(b"diff --git a/" + name + b" b/" + name + b"\n")
        elif git is not None and (m := RE_MODE_LINE.match(line)):
            git.flags.add(m.group(1))
            out.append(raw)
        elif is_pair or (line.startswith(b"+++ ") and number >= 2 and _is_file_header(lines, number - 2)):
            if line.startswith(b"--- "):
                if git is None:
                    headers.append(_Header(number))
                header = git or headers[-1]
                matched = RE_OLD_FILE.match(line)
                assert matched is not None
                header.old, header.old_line = matched.group(1), number
                prefix, named = b"--- ", header.old
            else:
                header = git or headers[-1]
                matched = RE_NEW_FILE.match(line)
                assert matched is not None
                header.new = matched.group(1)
                prefix, named = b"+++ ", header.new
                if git is not None:
                    _check_git_names(git, source)
                git = None
            keep = named == DEV_NULL.encode()
            side = b"a/" if prefix == b"--- " else b"b/"
            # `header` is always the last one appended; headers.index() made the scan quadratic in files
            out.append(prefix + (named if keep else side + _placeholder(len(headers) - 1)) + b"\n")
        elif (m := RE_BINARY_LINE.match(line)) and git is None:
            headers.append(_Header(number, old=m.group(1), new=m.group(2)))
            name = _placeholder(len(headers) - 1)
            out.append(b"Binary files a/" + name + b" and b/" + name + b" differ\n")
        else:
            out.append(raw)
    if old_left > 0 or new_left > 0:
        raise DiffError(
            f"hunk {_show(hunk_header)} (line {hunk_line}) ends early: the diff stops with "
            f"{old_left} old and {new_left} new lines still to come",
            where=f"{source}:{len(lines)}", hint="the diff is truncated; download or export it again",
        )
    return out, headers


def _nul_error(source: str, number: int) -> DiffError:
    return DiffError(
        "NUL byte in the diff", where=f"{source}:{number}", hint="binary content cannot be patched as text"
    )


def _check_git_names(header: _Header, source: str) -> None:
    """The ---/+++ lines of a git section must agree with its `diff --git` line and mode lines."""
    assert header.git is not None
    where = f"{source}:{header.line}"
    split = _split_git_header(header.git, where)
    if split is None:
        return  # names with spaces that only the rename lines can tell apart
    null = DEV_NULL.encode()
    for side, named, git_name, flag, line in (
        ("old (---)", header.old, split[0], b"new file mode", header.old_line),
        ("new (+++)", header.new, split[1], b"deleted file mode", header.old_line + 1),
    ):
        expected = null if flag in header.flags else git_name
        if named is None or _unquote(named, where) != _unquote(expected, where):
            raise DiffError(
                f"conflicting headers: the {side} line names {_show(named or b'')}, "
                f"`diff --git` (line {header.line}) and its mode lines say {_show(expected)}",
                where=f"{source}:{line}", hint="the diff was edited by hand or spliced; regenerate it",
            )


def _is_file_header(lines: Sequence[bytes], i: int) -> bool:
    return lines[i].startswith(b"--- ") and i + 1 < len(lines) and lines[i + 1].startswith(b"+++ ")


def _unidiff_parse(lines: Sequence[bytes], source: str) -> Any:
    from unidiff.errors import UnidiffParseError  # lazy: the parser (unidiff: ~3.5 ms, on a parse only)
    from unidiff.patch import PatchSet

    try:
        # latin-1 maps every byte to one code point, so `.encode("latin-1")` gives back the exact bytes.
        # metadata_only: unidiff parses and checks the structure (sections, headers, hunk headers, line
        # kinds and counts) without building an object per line; the bytes come from the diff's own lines.
        # Decoded line by line as unidiff reads them: no second copy of the whole diff in memory.
        return PatchSet((line.decode("latin-1") for line in lines), metadata_only=True)
    except UnidiffParseError as exc:
        raise DiffError(f"cannot parse the diff: {exc}", where=source) from None


def _header_of(pf: Any, headers: Sequence[_Header], source: str) -> _Header:
    for name in (pf.source_file, pf.target_file):
        if name and str(name)[2:4] == "pk":
            return headers[int(str(name)[4:])]
    raise DiffError("a file section names no file", where=source)


def _convert_file(pf: Any, headers: Sequence[_Header], lines: Sequence[bytes], strip: int, source: str) -> FilePatch:
    header = _header_of(pf, headers, source)
    where = f"{source}:{header.line}"
    info = [str(line).encode("latin-1").rstrip(b"\n") for line in (pf.patch_info or [])]

    modes: dict[bytes, int] = {}
    renames: dict[tuple[bytes, bytes], bytes] = {}
    index_mode: int | None = None
    blobs: tuple[str | None, str | None] = (None, None)
    for line in info:
        if m := RE_MODE_LINE.match(line):
            modes[m.group(1)] = int(m.group(2), 8)
        elif m := RE_INDEX_MODE.match(line):
            index_mode = int(m.group(1), 8)
        elif m := RE_RENAME.match(line):
            renames[(m.group(1), m.group(2))] = m.group(3)
        if m := RE_INDEX.match(line):  # the blob ids, evidence for the judgement (state.py)
            blobs = (m.group(1).decode(), m.group(2).decode())
    if renames.keys() & {(b"copy", b"from"), (b"copy", b"to")}:
        raise DiffError(
            "copied files are not supported", where=where,
            hint="regenerate the diff with `git diff --no-renames` so the copy becomes a plain new file",
        )

    if header.git is not None:
        if (b"rename", b"from") in renames and (b"rename", b"to") in renames:
            # rename lines carry repository paths without the a/ b/ prefix
            old_path = _clean_path(renames[(b"rename", b"from")], max(strip - 1, 0), where)
            new_path = _clean_path(renames[(b"rename", b"to")], max(strip - 1, 0), where)
        else:
            split = _split_git_header(header.git, where)
            if split is None:
                raise DiffError(f"cannot tell the file names apart in `diff --git {_show(header.git)}`", where=where)
            old_path = _clean_path(split[0], strip, where)
            new_path = _clean_path(split[1], strip, where)
        if b"new file mode" in modes:
            old_path = None
        if b"deleted file mode" in modes:
            new_path = None
    else:
        old_path = _clean_path(header.old, strip, where)
        new_path = _clean_path(header.new, strip, where)
    if old_path is None and new_path is None:
        raise DiffError("a file section names no file", where=where)

    old_mode = modes.get(b"old mode", modes.get(b"deleted file mode", index_mode))
    new_mode = modes.get(b"new mode", modes.get(b"new file mode", index_mode))
    if old_path is None:
        old_mode = None
    if new_path is None:
        new_mode = None
    for mode in (old_mode, new_mode):
        if mode is not None and mode not in (MODE_FILE, MODE_EXEC, MODE_SYMLINK, MODE_GITLINK):
            raise DiffError(f"unsupported file mode {mode:o}", where=where)

    if len(pf) != len(header.hunks):
        raise DiffError(
            f"unidiff reads {len(pf)} hunks in this file section, patchkit's own scan {len(header.hunks)}",
            where=where, hint="the diff's structure is ambiguous; regenerate it with git",
        )
    pairs = enumerate(zip(pf, header.hunks, strict=True), 1)
    hunks = tuple(_convert_hunk(h, i, body, lines, source) for i, (h, body) in pairs)
    return FilePatch(
        old_path=old_path,
        new_path=new_path,
        old_mode=old_mode,
        new_mode=new_mode,
        hunks=hunks,
        diff_line=header.line,
        binary=bool(pf.is_binary_file),
        old_blob=blobs[0],
        new_blob=blobs[1],
    )


def _convert_hunk(h: Any, index: int, body: Sequence[int], lines: Sequence[bytes], source: str) -> Hunk:
    """One hunk as unidiff parsed it (its header and counts), with its lines taken from the diff's bytes."""
    header_line, start, end, plain = body
    rows = lines[start:end]
    if plain:  # only " ", "-" and "+" lines (nearly every hunk): one pass, no marker or blank-line cases
        old: list[bytes] = []
        new: list[bytes] = []
        first = last = -1  # the first and the last changed row
        runs: list[tuple[int, int, int]] = []  # context runs after a change: (new offset, old offset, length)
        for i, row in enumerate(rows):
            value = row[1:]  # one object per line: a context line is shared by both sides
            if row[0] == 32:  # " "
                if first >= 0:
                    if last == i - 1:
                        runs.append((len(new), len(old), 0))
                    runs[-1] = (runs[-1][0], runs[-1][1], runs[-1][2] + 1)
                old.append(value)
                new.append(value)
                continue
            if first < 0:
                first = i
            last = i
            (old if row[0] == 45 else new).append(value)  # "-" or "+"
        leading = first if first >= 0 else len(rows)
        trailing = len(rows) - 1 - last if last >= 0 else len(rows)
        gaps = tuple(runs[:-1]) if trailing else tuple(runs)
    else:
        old, new, leading, trailing, gaps = _convert_lines(rows)
    if (len(old), len(new)) != (h.source_length, h.target_length) or len(new) - len(old) != h.added - h.removed:
        raise DiffError(
            f"hunk {index} has {len(old)} old and {len(new)} new lines, its header says "
            f"{h.source_length} and {h.target_length}",
            where=f"{source}:{header_line}",
        )
    return Hunk(
        index=index,
        diff_line=header_line if rows else 0,
        old_start=int(h.source_start),
        old_len=int(h.source_length),
        new_start=int(h.target_start),
        new_len=int(h.target_length),
        old_lines=tuple(old),
        new_lines=tuple(new),
        leading=leading,
        trailing=trailing,
        gaps=gaps,
    )


def _convert_lines(rows: Sequence[bytes]
                   ) -> tuple[list[bytes], list[bytes], int, int, tuple[tuple[int, int, int], ...]]:
    """(old image, new image, leading, trailing context, the context runs between changes: Hunk.gaps) of hunk
    lines with blank or "\\ No newline" lines."""
    old: list[bytes] = []
    new: list[bytes] = []
    kinds: list[bytes] = []
    for row in rows:
        kind = row[:1]
        if kind == NO_NEWLINE:
            # The marker belongs to the line before it: that line has no newline on its side(s).
            prev = kinds[-1] if kinds else None
            if prev in (b" ", b"-") and old:
                old[-1] = old[-1][:-1] if old[-1].endswith(b"\n") else old[-1]
            if prev in (b" ", b"+") and new:
                new[-1] = new[-1][:-1] if new[-1].endswith(b"\n") else new[-1]
            continue
        if row in (b"\n", b"\r\n"):  # a blank context line that lost its leading space
            kind, value = b" ", row
        else:
            value = row[1:]
        kinds.append(kind)
        if kind in (b" ", b"-"):
            old.append(value)
        if kind in (b" ", b"+"):
            new.append(value)
    changes = [i for i, k in enumerate(kinds) if k != b" "]
    leading = changes[0] if changes else len(kinds)
    trailing = len(kinds) - 1 - changes[-1] if changes else len(kinds)
    gaps: list[tuple[int, int, int]] = []
    at_old = at_new = 0
    for i, kind in enumerate(kinds):
        if kind == b" " and changes and changes[0] < i < changes[-1]:
            if kinds[i - 1] != b" ":
                gaps.append((at_new, at_old, 0))
            gaps[-1] = (gaps[-1][0], gaps[-1][1], gaps[-1][2] + 1)
        at_old += kind in (b" ", b"-")
        at_new += kind in (b" ", b"+")
    return old, new, leading, trailing, tuple(gaps)


def _split_git_header(rest: bytes, where: str) -> tuple[bytes, bytes] | None:
    """Split `a/x b/x` (names may be quoted, or contain spaces when both names are equal, as git writes)."""
    if rest.startswith(b'"'):
        first, tail = _take_quoted(rest, where)
        return first, tail.lstrip(b" ")
    if rest.endswith(b'"'):
        start = rest.rfind(b' "')
        if start > 0:
            return rest[:start], rest[start + 1:]
    # Unquoted, both names equal up to their prefix: `<p>NAME <q>NAME`.
    if len(rest) % 2 == 1:
        mid = len(rest) // 2
        left, right = rest[:mid], rest[mid + 1:]
        if rest[mid:mid + 1] == b" " and left.partition(b"/")[2] == right.partition(b"/")[2]:
            return left, right
    parts = rest.split(b" ")
    if len(parts) == 2:
        return parts[0], parts[1]
    if rest.startswith(b"a/") and rest.count(b" b/") == 1:
        left, _, right = rest.partition(b" b/")
        return left, b"b/" + right
    return None  # ambiguous (a rename with spaces): the rename lines name the files


def _take_quoted(text: bytes, where: str) -> tuple[bytes, bytes]:
    """Read one C-quoted token from the start of text; return (quoted token, rest)."""
    i = 1
    while i < len(text):
        if text[i:i + 1] == b"\\":
            i += 2
            continue
        if text[i:i + 1] == b'"':
            return text[:i + 1], text[i + 1:]
        i += 1
    raise DiffError(f"unterminated quoted path {_show(text)}", where=where)


def _unquote(name: bytes, where: str) -> bytes:
    """Undo git's C-style quoting (octal escapes are raw bytes, e.g. UTF-8 of a non-ASCII name)."""
    if not (name.startswith(b'"') and name.endswith(b'"') and len(name) >= 2):
        return name
    body = name[1:-1]
    out = bytearray()
    i = 0
    while i < len(body):
        c = body[i:i + 1]
        if c != b"\\":
            out += c
            i += 1
            continue
        nxt = body[i + 1:i + 2]
        if nxt in _C_ESCAPES:
            out.append(_C_ESCAPES[nxt])
            i += 2
        elif re.fullmatch(rb"[0-3][0-7]{2}", body[i + 1:i + 4]):  # one byte: \377 at most (\777 is no byte)
            out.append(int(body[i + 1:i + 4], 8))
            i += 4
        else:
            raise DiffError(f"bad escape in quoted path {_show(name)}", where=where)
    return bytes(out)


def _clean_path(raw: bytes | None, strip: int, where: str) -> str | None:
    """Unquote, strip leading components and validate; None for /dev/null."""
    if raw is None:
        return None
    name = _unquote(raw, where)
    if name == DEV_NULL.encode():
        return None
    if b"\0" in name:
        raise UnsafePathError("NUL byte in a path", where=where)
    parts = [p for p in name.split(b"/") if p != b""]
    if name.startswith(b"/"):  # whatever strip would leave of it: no real diff of a tree names /anything
        raise UnsafePathError(f"absolute path {_show(name)}", where=where, hint="paths must be relative to --root")
    if len(parts) <= strip:
        raise DiffError(
            f"path {_show(name)} has too few components for strip = {strip}", where=where,
            hint="set `strip` in the manifest to match how the diff was made (git diffs use 1)",
        )
    kept = parts[strip:]
    try:  # names are reported, hashed and printed as text: one that is not UTF-8 would crash all three
        text = b"/".join(kept).decode("utf-8")
    except UnicodeDecodeError:
        raise UnsafePathError(
            f"path {_show(name)} is not valid UTF-8", where=where, hint="patchkit handles UTF-8 file names only"
        ) from None
    return check_path(text, where)  # the rules the parse cache re-checks on every entry it loads


def _show(raw: bytes) -> str:
    """A piece of the diff for a message: undecodable bytes and control characters escaped, cut to 120."""
    return escape_controls(raw[:120].decode("utf-8", "surrogateescape"))
