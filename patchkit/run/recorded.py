"""Recorded verdicts: the per-hunk report of an applied tree, kept in the record's sealed fast_path block.

A rerun's -v table and --json document show each hunk's verdict on the tree as patchkit left it. At apply,
the write stage judges that tree in memory (the `after` snapshots, with the very judge_sections a rerun runs
on the same bytes) and stores the verdicts there as one JSON string (`report_text`); a restart the records
answer decodes them (`load_report`) and the report prints them as they are, without parsing the diff and
without rebuilding a single verdict.

Both paths print the same rows: the report (patchkit.speak.report) renders every file from its `FileEntry`,
the verdict as the report shows it: made here from a judgement's FileVerdict (`verdict_entry`), or decoded from
the record. Entries are trusted exactly as far as the rest of the block (patchkit.run.fastpath): sealed, owned
by this user, bound to this code, this manifest, this diff and the bytes of every file, so the full judgement
could only find the same verdicts. Anything malformed raises ValueError: the caller then runs the full
judgement.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from itertools import repeat
from json.encoder import encode_basestring  # what json.dumps(ensure_ascii=False) writes a string with
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from patchkit.diff.hunkset import HunkSet
    from patchkit.judge.verdicts import FileVerdict

class HunkEntry(NamedTuple):
    """One hunk as the report shows it (stored as a JSON list of these fields, in this order)."""

    number: int  # Hunk.index: its place in its section, from 1 (the JSON document's `index`)
    header: str
    state: str  # a HunkState value
    expected: int  # 0-based
    found: int | None  # 0-based; None: not located
    candidates: Sequence[int]  # 0-based: each match of an ambiguous hunk
    detail: str | None


class FileEntry(NamedTuple):
    """One file as the report shows it (stored as a JSON list of these fields, in this order)."""

    path: str
    old_path: str | None
    op: str  # a FileOp value
    state: str  # a PatchState value
    detail: str | None
    mode: str | None  # the state of its mode change (a HunkState value), None without one
    old_mode: int | None
    new_mode: int | None
    hunks: Sequence[HunkEntry]


class RecordedReport(NamedTuple):
    """What the report prints of an applied tree: the hunk set's digest and excluded paths, each file's entry,
    and those entries as the JSON document's `files` (files_text) when they were kept rendered (None: render)."""

    hunk_set_sha256: str
    excluded: tuple[str, ...]
    files: Sequence[FileEntry]
    shown: bytes | None = None  # UTF-8


def verdict_entry(v: FileVerdict) -> FileEntry:
    """One file's verdict as the report shows it (and the record stores it)."""
    s = v.section
    hunks = [
        HunkEntry(h.hunk.index, h.hunk.header, h.located.state.value, h.expected, h.located.pos,
                  list(h.located.candidates), h.located.detail)
        for h in v.hunks
    ]
    return FileEntry(
        s.path, s.old_path, s.op.value, v.state.value, v.detail, v.mode.value if v.mode is not None else None,
        s.old_mode, s.new_mode, hunks,
    )


def report_text(hunk_set: HunkSet, entries: Sequence[FileEntry]) -> str:
    """The report of a tree's verdicts (`entries`, verdict_entry of each), as compact JSON text: one string in
    the record, so a text restart's json.loads of the record skips over it (a large series' verdicts are
    ~0.6 MB) and only -v or --json decodes it (load_report)."""
    return json.dumps({
        "hunk_set_sha256": hunk_set.digest,
        "excluded": list(hunk_set.excluded),
        "files": entries,
    }, separators=(",", ":"))


def load_report(report: Any) -> RecordedReport:
    """The recorded report, checked to be what report_text wrote of an applied tree (else ValueError)."""
    try:
        if not isinstance(report, str):
            raise TypeError("a recorded report is one JSON string")
        raw = json.loads(report)
        files, excluded, digest = raw["files"], raw["excluded"], raw["hunk_set_sha256"]
        if not (isinstance(files, list) and isinstance(excluded, list) and isinstance(digest, str)):
            raise TypeError("files, excluded, hunk_set_sha256")
        if not all(isinstance(path, str) for path in excluded):
            raise TypeError("excluded")
        entries = [_file_entry(entry) for entry in files]
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"a recorded report that patchkit did not write: {error}") from error
    return RecordedReport(digest, tuple(excluded), entries)


def _file_entry(entry: Any) -> FileEntry:
    """A stored file entry of an applied file, every field of the type the report prints (TypeError, ValueError).

    Each hunk's list becomes its record through tuple.__new__ once its length is checked (by the unpacking):
    the NamedTuple's own __new__, Python code taking each field by name, doubled load_report's time on a
    restart's 10k hunks."""
    path, old_path, op, state, detail, mode, old_mode, new_mode, hunks = entry
    if not (type(path) is str and type(op) is str and type(hunks) is list and _opt(old_path, str)
            and _opt(detail, str) and _opt(mode, str) and _opt(old_mode, int) and _opt(new_mode, int)):
        raise TypeError(f"a file entry of {path!r}")
    if state != "applied" or mode not in (None, "applied"):
        raise ValueError(f"{path!r} is not applied")
    for hunk in hunks:
        index, header, hunk_state, expected, found, candidates, hunk_detail = hunk
        if not (type(index) is int and type(header) is str and type(expected) is int and _opt(found, int)
                and type(candidates) is list and _opt(hunk_detail, str)
                and all(type(c) is int for c in candidates)):
            raise TypeError(f"a hunk entry of {path!r}")
        if hunk_state != "applied":
            raise ValueError(f"a hunk of {path!r} is not applied")
    records = list(map(tuple.__new__, repeat(HunkEntry), hunks))  # each list as its record (see above)
    return FileEntry(path, old_path, op, state, detail, mode, old_mode, new_mode, records)


def _opt(value: Any, kind: type) -> bool:
    return value is None or type(value) is kind


def files_text(entries: Sequence[FileEntry]) -> str:
    """The document's `files` (see docs/output.md), as json.dumps(indent=2) renders its list of objects
    {path, old_path, op, state, detail, mode, hunks: [{index, header, state, expected_line, found_line,
    candidate_lines, detail}]}: written out here because a restart prints ten thousand of them, and json's
    indenting encoder (pure Python) takes 5x the time of these templates."""
    return _json_list([_file_text(e) for e in entries], "")


def shown_files(report: RecordedReport) -> str | bytes:
    """The document's `files` of a restart's recorded report (fastpath.recorded_report): the text the apply kept
    (`shown`, UTF-8) when there is one, else rendered from the recorded entries (files_text)."""
    return report.shown if report.shown is not None else files_text(report.files)


def _file_text(entry: FileEntry) -> str:
    return (
        f'  {{\n    "path": {_scalar(entry.path)},\n    "old_path": {_scalar(entry.old_path)},\n'
        f'    "op": {_scalar(entry.op)},\n    "state": {_scalar(entry.state)},\n'
        f'    "detail": {_scalar(entry.detail)},\n    "mode": {_scalar(entry.mode)},\n'
        f'    "hunks": {_json_list([_hunk_text(h) for h in entry.hunks], "    ")}\n  }}'
    )


def _hunk_text(hunk: HunkEntry) -> str:
    lines = _json_list([f"          {pos + 1}" for pos in hunk.candidates], "        ")  # ambiguous: each match
    found = hunk.found + 1 if hunk.found is not None else None
    return (
        f'      {{\n        "index": {hunk.number},\n        "header": {_scalar(hunk.header)},\n'
        f'        "state": {_scalar(hunk.state)},\n        "expected_line": {hunk.expected + 1},\n'
        f'        "found_line": {_scalar(found)},\n'
        f'        "candidate_lines": {lines},\n        "detail": {_scalar(hunk.detail)}\n      }}'
    )


def _json_list(items: Sequence[str], indent: str) -> str:
    return "[\n" + ",\n".join(items) + f"\n{indent}]" if items else "[]"


def _scalar(value: str | int | None) -> str:
    if value is None:
        return "null"
    return encode_basestring(value) if isinstance(value, str) else str(int(value))
