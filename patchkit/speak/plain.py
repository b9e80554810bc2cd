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
from dataclasses import dataclass
from json.encoder import encode_basestring  # what json.dumps(ensure_ascii=False) writes a string with
from typing import Any

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
