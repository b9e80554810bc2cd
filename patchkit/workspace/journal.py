"""The journal, `<root>/.patchkit/journal.json`: what a transaction is about to do, written before it does it.

One JSON header line, then the original files' raw bytes back to back. For every path: its original bytes
(none for an unread stale bytecode cache, which only its kept link restores: "offset" is null), mode, owner and
inode (or "absent"), the sha256 and mode it will have, the mode of each folder on its way
(or "absent"), and the two random names the transaction uses next to it: the temp file of the replace and
the hard link that keeps the original inode until the transaction ends (`.patchkit-<hex>.tmp/.orig`).

A journal is input like any other: `parse_journal` refuses one that is not for this root, names a path
outside it, inside `.git` or `.patchkit` (whatever the case), a reserved state name, or a temp name that is
not one of ours, or holds a mode wider than permission bits where a new mode is stated.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from patchkit.errors import PatchkitError, RecoveryFailedError, UntrustedStateError
from patchkit.input.paths import reserved_name
from patchkit.input.tree import STATE_DIR, Snapshot, split_relative
from patchkit.workspace.disk import PERMISSION_BITS
from patchkit.workspace.names import GITIGNORE_NAME, JOURNAL_NAME, LOCK_NAME, TEMP_NAME, TEMP_PREFIX

JOURNAL_FORMAT = 3
RESERVED_STATE_NAMES = frozenset({LOCK_NAME, JOURNAL_NAME, GITIGNORE_NAME})


class Area(Enum):
    """Where a journaled path lives: the engine tree, or patchkit's own state folder inside it."""

    TREE = "tree"
    STATE = "state"


@dataclass(frozen=True)
class Target:
    """A path's content after the transaction."""

    sha256: str
    mode: int


@dataclass(frozen=True)
class Original:
    """The inode a path had before: restored by renaming its kept link back, so owner, mode and xattrs
    come back exactly and a restore needs no new inode or block."""

    uid: int
    gid: int
    ino: int
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class Entry:
    area: Area
    path: str  # relative to the area's folder
    before: Snapshot
    after: Target | None
    folders: tuple[tuple[str, int | None], ...]  # each ancestor folder, top-down, with its mode (None: absent)
    temp: str  # the temp file of the replace, in the path's folder
    keep: str  # the hard link to the original, in the path's folder
    original: Original | None  # None: the path was absent

    @property
    def parts(self) -> tuple[str, ...]:
        return split_relative(self.path)


def check_tree_path(path: str) -> tuple[str, ...]:
    """A tree path a transaction may write: plain, relative, never in .git or .patchkit (in any case)."""
    parts = split_relative(path)
    if any(reserved_name(p) is not None for p in parts):
        raise ValueError(f"{path!r} is inside .git or {STATE_DIR}")
    return parts


def check_state_name(name: str) -> tuple[str, ...]:
    """A state file name a transaction may write: under .patchkit, not reserved, not a temp name."""
    parts = split_relative(name)
    if parts[0] in RESERVED_STATE_NAMES or any(p.startswith(TEMP_PREFIX) for p in parts):
        raise ValueError(f"state file name {name!r} is reserved by patchkit")
    return parts


def journal_chunks(root: Path, root_ino: int, label: str, entries: Sequence[Entry]) -> list[bytes]:
    """The journal: one JSON header line, then every original's bytes back to back (no base64, no copy)."""
    blobs: list[bytes] = []
    offset = 0
    items = []
    for e in entries:
        before: dict[str, Any] | None = None
        if e.before.exists:
            assert e.original is not None
            o = e.original
            before = {"mode": e.before.mode, "uid": o.uid, "gid": o.gid, "ino": o.ino, "mtime_ns": o.mtime_ns}
            if e.before.data is not None:
                before.update(offset=offset, size=len(e.before.data))
                blobs.append(e.before.data)
                offset += len(e.before.data)
            else:  # unread (a stale bytecode cache): only its kept link brings it back, no copy is written
                before.update(offset=None, size=o.size)
        items.append({
            "area": e.area.value,
            "path": e.path,
            "before": before,
            "after": None if e.after is None else {"mode": e.after.mode, "sha256": e.after.sha256},
            "folders": [[folder, mode] for folder, mode in e.folders],
            "temp": e.temp,
            "keep": e.keep,
        })
    doc = {
        "format": JOURNAL_FORMAT, "label": label, "pid": os.getpid(), "root": os.fsdecode(root),
        "root_ino": root_ino, "entries": items,
    }
    # ensure_ascii: file names that are not valid UTF-8 survive as escaped surrogates, and no newline.
    return [json.dumps(doc, ensure_ascii=True, sort_keys=True).encode("ascii") + b"\n", *blobs]


def parse_journal(data: bytes, where: Path, root: Path, root_ino: int) -> tuple[str, list[Entry]]:
    """The journal's label and entries; RecoveryFailedError if it is not one patchkit wrote for root.

    The journal must name this root by its path or (a volume mounted elsewhere) its folder's inode.
    """
    try:
        header, _, body = data.partition(b"\n")
        doc = json.loads(header)
        if _count(doc["format"]) != JOURNAL_FORMAT:
            raise ValueError(f"format {doc['format']!r}")
        label = doc["label"]
        if not isinstance(label, str):
            raise TypeError("label")
        written_for = doc["root"]
        written_ino = doc["root_ino"]
        entries = [_parse_entry(item, body) for item in doc["entries"]]
        if len({(e.area, e.path) for e in entries}) != len(entries):
            raise ValueError("a path is journaled twice")
    except (ValueError, KeyError, TypeError, AttributeError, PatchkitError) as exc:
        raise RecoveryFailedError(
            f"the journal of an interrupted transaction is unreadable ({exc}); the tree may be half patched",
            where=str(where),
            hint="restore the tree from the image, then delete the journal",
        ) from None
    if written_for != os.fsdecode(root) and written_ino != root_ino:
        raise UntrustedStateError(
            f"the journal was written for another root ({written_for!r}); refusing to replay it here, "
            "nothing was changed",
            where=str(where),
            hint="restore this tree from the image if it may be half patched, then delete the journal",
        )
    return label, entries


def _parse_entry(item: Any, body: bytes) -> Entry:
    area = Area(item["area"])
    path = item["path"]
    if not isinstance(path, str):
        raise TypeError("path")
    parts = check_tree_path(path) if area is Area.TREE else check_state_name(path)
    temp, keep = item["temp"], item["keep"]
    for name, kind in ((temp, "tmp"), (keep, "orig")):
        if not isinstance(name, str) or not TEMP_NAME.fullmatch(name) or not name.endswith(kind):
            raise ValueError(f"temp name {name!r} of {path!r} is not one patchkit makes")
    before = item["before"]
    after = item["after"]
    folders = tuple((str(f), _opt_mode(m)) for f, m in item["folders"])
    if [f for f, _ in folders] != ["/".join(parts[:i]) for i in range(1, len(parts))]:
        raise ValueError(f"folders of {path!r} do not match its path")
    original = None
    snapshot = Snapshot(path, None, None)
    if before is not None:
        data = None if before["offset"] is None else _blob(body, before["offset"], before["size"])
        snapshot = Snapshot(path, data, _mode(before["mode"]))  # data None: unread, kept by its link only
        original = Original(*(_count(before[k]) for k in ("uid", "gid", "ino", "size", "mtime_ns")))
    target = None
    if after is not None:
        target = Target(str(after["sha256"]), _mode(after["mode"], PERMISSION_BITS))
    return Entry(area, path, snapshot, target, folders, temp, keep, original)


def _blob(body: bytes, offset: Any, size: Any) -> bytes:
    offset, size = _count(offset), _count(size)
    if offset + size > len(body):
        raise ValueError("an original lies outside the journal (truncated?)")
    return body[offset:offset + size]


def _count(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise TypeError(f"number {value!r}")
    return value


def _mode(value: Any, widest: int = 0o7777) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= widest or value & ~widest:
        raise TypeError(f"mode {value!r}")
    return value


def _opt_mode(value: Any) -> int | None:
    return None if value is None else _mode(value, PERMISSION_BITS | 0o7000)


def matches(snap: Snapshot, target: Target | None) -> bool:
    if target is None or snap.data is None:
        return target is None and snap.data is None
    return snap.mode == target.mode and hashlib.sha256(snap.data).hexdigest() == target.sha256
