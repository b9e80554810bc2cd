"""A small JSON Schema checker for the subset docs/schema/patchkit.schema.json uses (no dependency needed).

Supported: type (one or a list), enum, const, pattern, minimum, maximum, properties, required,
additionalProperties (false or a schema), items, oneOf, and local `$ref`s to `#/$defs/...`. A keyword it does
not know is an error, so the schema cannot silently outgrow the checker.

The published schema lets objects gain keys (a promise to consumers: new keys within a version). `strict`
(the default here) holds patchkit itself to more: every key it prints must be listed in the schema.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "docs" / "schema" / "patchkit.schema.json"
SCHEMA: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))

_KNOWN = {"type", "enum", "const", "pattern", "minimum", "maximum", "properties", "required",
          "additionalProperties", "items", "oneOf", "$ref", "description", "$schema", "$id", "title", "$defs"}
_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def errors_of(value: Any, schema: dict[str, Any], where: str = "$", *, strict: bool = True) -> list[str]:
    """Every way `value` breaks `schema`, as `path: problem` strings (empty: valid)."""
    unknown = set(schema) - _KNOWN
    if unknown:
        raise ValueError(f"schema keyword(s) {sorted(unknown)} at {where} are not supported by this checker")
    if "$ref" in schema:
        name = schema["$ref"].removeprefix("#/$defs/")
        return errors_of(value, SCHEMA["$defs"][name], where, strict=strict)
    if "oneOf" in schema:
        passing = [s for s in schema["oneOf"] if not errors_of(value, s, where, strict=strict)]
        return [] if len(passing) == 1 else [f"{where}: matches {len(passing)} of the oneOf branches, not 1"]
    problems: list[str] = []
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_TYPES[t](value) for t in types):
            return [f"{where}: {value!r} is not of type {types}"]
    if "const" in schema and value != schema["const"]:
        problems.append(f"{where}: {value!r} is not {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, str) and "pattern" in schema and re.search(schema["pattern"], value) is None:
        problems.append(f"{where}: {value!r} does not match {schema['pattern']}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            problems.append(f"{where}: {value} < {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            problems.append(f"{where}: {value} > {schema['maximum']}")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        problems += [f"{where}: missing key {k!r}" for k in schema.get("required", []) if k not in value]
        extra = schema.get("additionalProperties", not (strict and "properties" in schema))
        for key, item in value.items():
            if key in props:
                problems += errors_of(item, props[key], f"{where}.{key}", strict=strict)
            elif extra is False:
                problems.append(f"{where}: key {key!r} is not in the schema")
            elif isinstance(extra, dict):
                problems += errors_of(item, extra, f"{where}.{key}", strict=strict)
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            problems += errors_of(item, schema["items"], f"{where}[{i}]", strict=strict)
    return problems


def check(document: Any, definition: str) -> None:
    """Assert that `document` is a valid `definition` document and a valid document of the whole schema."""
    problems = errors_of(document, SCHEMA["$defs"][definition])
    assert not problems, "\n".join(problems[:20])
    assert not errors_of(document, SCHEMA), f"valid as {definition} but not as exactly one top-level document"
