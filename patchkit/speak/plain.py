"""What the report writes with the standard library alone: JSON text as json.dumps(indent=2, ensure_ascii=False)
writes it, with pre-rendered values spliced in (a document's `files` list, rendered by
patchkit.run.recorded.files_text), and the words of an already applied patch.

The report (patchkit.speak.report) and the restart entry (patchkit.cli.restart, which prints a restart's answer
before click or the manifest parser loads) both write with these very functions and words.
"""

from __future__ import annotations

import json
import os
import re
from json.encoder import encode_basestring  # what json.dumps(ensure_ascii=False) writes a string with
from typing import Any

SCHEMA_VERSION = 1
ALREADY_APPLIED = "already applied, nothing written"  # a rerun's result, after "<id>: "


def versioned(document: dict[str, Any]) -> dict[str, Any]:
    """A top-level JSON document: `schema_version` first."""
    return {"schema_version": SCHEMA_VERSION, **document}


class RawJSON:
    """A value render_json writes as this text: JSON rendered as json.dumps(indent=2) renders it at the top
    level, which render_json indents to where the value stands (JSON text holds no raw newline but these).
    As bytes (UTF-8), json_bytes splices it in without decoding it (a restart's `files`: megabytes).

    A plain class, not a dataclass (the restart entry loads no dataclasses), and never a tuple: json.dumps
    must hand it to `default` rather than write it as a list."""

    __slots__ = ("text",)

    def __init__(self, text: str | bytes) -> None:
        self.text = text

    def __eq__(self, other: object) -> bool:
        return type(other) is RawJSON and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return f"RawJSON(text={self.text!r})"


def render_json(data: Any) -> str:
    """The document as json.dumps(indent=2, ensure_ascii=False) writes it, RawJSON values spliced in."""
    text, raw, mark = _marked(data)
    if not raw:
        return text
    marked = _mark_pattern(mark)
    values = [value if isinstance(value, str) else value.decode() for value in raw]
    return marked.sub(lambda m: m[1] + m[2] + values[int(m[3])].replace("\n", "\n" + m[1]), text)


def json_bytes(data: Any) -> list[bytes]:
    """render_json's text of the document as UTF-8, in pieces to be written one after the other: each RawJSON
    value indented and spliced in as bytes, never decoded nor copied into one string with the rest."""
    text, raw, mark = _marked(data)
    pieces, done = [], 0
    for m in (_mark_pattern(mark).finditer(text) if raw else ()):
        value = raw[int(m[3])]
        value = value if isinstance(value, bytes) else value.encode()
        pieces += [(text[done:m.start()] + m[1] + m[2]).encode(), value.replace(b"\n", b"\n" + m[1].encode())]
        done = m.end()
    return [*pieces, text[done:].encode()]


def _marked(data: Any) -> tuple[str, list[str | bytes], str]:
    """json.dumps' text of the document with each RawJSON value as a string of the mark and its place in the
    values, the values in order, and the mark."""
    raw: list[str | bytes] = []
    mark = f"\0{os.urandom(8).hex()}:"  # unguessable: no string of the document can hold it

    def placeholder(value: Any) -> str:
        if not isinstance(value, RawJSON):
            raise TypeError(f"{type(value).__name__} is not JSON")
        raw.append(value.text)
        return f"{mark}{len(raw) - 1}"

    return json.dumps(data, indent=2, ensure_ascii=False, default=placeholder), raw, mark


def _mark_pattern(mark: str) -> re.Pattern[str]:
    """Each marked string of _marked's text: the indentation of its line (group 1), the text before it on that
    line (group 2) and its place in the values (group 3)."""
    return re.compile(rf'^( *)(.*?){re.escape(encode_basestring(mark)[:-1])}(\d+)"', re.MULTILINE)
