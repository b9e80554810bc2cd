"""What the report writes with the standard library alone: JSON text as json.dumps(indent=2, ensure_ascii=False)
writes it, with pre-rendered values spliced in, a document's `files` list written out by template, and the words
of an already applied patch.

The report (patchkit.speak.report) and the restart entry (patchkit.cli.restart, which prints a restart's answer
before click or the manifest parser loads) both write with these very functions and words.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring  # what json.dumps(ensure_ascii=False) writes a string with
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from patchkit.run.recorded import FileEntry, HunkEntry

SCHEMA_VERSION = 1
ALREADY_APPLIED = "already applied, nothing written"  # a rerun's result, after "<id>: "


def versioned(document: dict[str, Any]) -> dict[str, Any]:
    """A top-level JSON document: `schema_version` first."""
    return {"schema_version": SCHEMA_VERSION, **document}


@dataclass(frozen=True)
class RawJSON:
    """A value render_json writes as this text: JSON rendered as json.dumps(indent=2) renders it at the top
    level, which render_json indents to where the value stands (JSON text holds no raw newline but these)."""

    text: str


def render_json(data: Any) -> str:
    """The document as json.dumps(indent=2, ensure_ascii=False) writes it, RawJSON values spliced in."""
    raw: list[str] = []
    mark = f"\0{os.urandom(8).hex()}:"  # unguessable: no string of the document can hold it

    def placeholder(value: Any) -> str:
        if not isinstance(value, RawJSON):
            raise TypeError(f"{type(value).__name__} is not JSON")
        raw.append(value.text)
        return f"{mark}{len(raw) - 1}"

    text = json.dumps(data, indent=2, ensure_ascii=False, default=placeholder)
    if not raw:
        return text
    marked = re.compile(rf'^( *)(.*?){re.escape(encode_basestring(mark)[:-1])}(\d+)"', re.MULTILINE)
    return marked.sub(lambda m: m[1] + m[2] + raw[int(m[3])].replace("\n", "\n" + m[1]), text)


def files_text(entries: Sequence[FileEntry]) -> str:
    """The document's `files` (see docs/output.md), as json.dumps(indent=2) renders its list of objects
    {path, old_path, op, state, detail, mode, hunks: [{index, header, state, expected_line, found_line,
    candidate_lines, detail}]}: written out here because a restart prints ten thousand of them, and json's
    indenting encoder (pure Python) takes 5x the time of these templates."""
    return _json_list([_file_text(e) for e in entries], "")


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
