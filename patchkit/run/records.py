"""The applied record, `<root>/.patchkit/applied/<id>.json`: its names, the bytes apply writes, and their parsing.

Every successful apply writes the record next to a stored copy of the diff it applied (`<id>.diff`), in the
same transaction as the tree; an apply that leaves the patch applied also writes the verdicts as a restart's
JSON document shows them (`<id>.files`, see shown_name). This module knows the format and nothing else:
provenance.read_record judges a record against the manifest (current or stale), fastpath reads one to answer a
restart without parsing the diff. Kept apart from provenance so that the restart fast path needs neither the
parser nor the judgement.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, NamedTuple

from patchkit import __version__
from patchkit.input.excludes import Exclude

if TYPE_CHECKING:

    from patchkit.diff.hunkset import HunkSet
    from patchkit.input.manifest import PatchSpec

RECORD_DIR = "applied"  # under <root>/.patchkit
RECORD_FORMAT = 1


class AppliedRecord(NamedTuple):
    """What `.patchkit/applied/<id>.json` holds; `<id>.diff` holds the diff bytes it names."""

    patch: str
    hunkset_sha256: str
    manifest_sha256: str
    diff_sha256: str
    strip: int
    excludes: tuple[Exclude, ...]
    tool_version: str
    applied_at: str  # UTC, ISO 8601


def record_names(patch_id: str) -> tuple[str, str]:
    """Names of the record and its stored diff, relative to `<root>/.patchkit`."""
    return f"{RECORD_DIR}/{patch_id}.json", f"{RECORD_DIR}/{patch_id}.diff"


def record_files(spec: PatchSpec, hunk_set: HunkSet, now: datetime | None = None) -> dict[str, bytes | None]:
    """The state files a successful apply writes: the record and the exact diff bytes it applied."""

    diff = spec.read_diff()
    record = {
        "format": RECORD_FORMAT,
        "patch": spec.id,
        "hunkset_sha256": hunk_set.digest,
        "manifest_sha256": _sha256(spec.manifest_path.read_bytes()),
        "diff_sha256": _sha256(diff),
        "strip": spec.strip,
        "exclude": {e.pattern: e.reason for e in spec.excludes},
        "tool_version": __version__,
        "applied_at": (now or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    json_name, diff_name = record_names(spec.id)

    return {json_name: (json.dumps(record, indent=2) + "\n").encode(), diff_name: diff}


def shown_name(patch_id: str) -> str:
    """Name of the record's shown verdicts, relative to `<root>/.patchkit`: the `files` list of the patch's JSON
    document as a restart prints it (patchkit.run.recorded.files_text), bound by its sha256 in the record's sealed
    fast_path block. Never `.json` or `.diff`: no patch id's record or stored diff can have this name."""
    return f"{RECORD_DIR}/{patch_id}.files"


def record_removal(patch_id: str) -> dict[str, bytes | None]:
    return dict.fromkeys((*record_names(patch_id), shown_name(patch_id)))


def parse_record(data: bytes) -> AppliedRecord:
    """The fields of a record's bytes; ValueError, KeyError or TypeError when they are not a record."""
    return record_fields(json.loads(data))


def record_fields(raw: Any) -> AppliedRecord:
    """The fields of a record's JSON value (json.loads of its bytes); ValueError, KeyError or TypeError when it
    is not a record."""
    if not isinstance(raw, dict):  # an array or a string in the state folder: not a record (never a crash)
        raise TypeError(f"a record is a JSON object, not {type(raw).__name__}")
    if raw.get("format") != RECORD_FORMAT:
        raise ValueError(f"unknown record format {raw.get('format')!r}")
    strings = ("patch", "hunkset_sha256", "manifest_sha256", "diff_sha256", "tool_version", "applied_at")
    for key in strings:
        if not isinstance(raw[key], str):
            raise TypeError(f"{key} must be a string")
    excludes = raw["exclude"]
    if not isinstance(raw["strip"], int) or not isinstance(excludes, dict):
        raise TypeError("strip must be an integer and exclude a table")
    return AppliedRecord(
        patch=raw["patch"],
        hunkset_sha256=raw["hunkset_sha256"],
        manifest_sha256=raw["manifest_sha256"],
        diff_sha256=raw["diff_sha256"],
        strip=raw["strip"],
        excludes=tuple(Exclude(str(k), str(v)) for k, v in excludes.items()),
        tool_version=raw["tool_version"],
        applied_at=raw["applied_at"],
    )


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
