"""Restart fast path: answer "already applied, nothing to do" from the applied records, without parsing a diff.

Every container restart runs `patchkit apply` on a tree that patchkit itself patched moments (or days) ago.
The full judgement parses the diff and matches every hunk; when nothing changed since the apply, its answer
is known in advance. At apply, the record (`.patchkit/applied/<id>.json`, written in the same transaction as
the tree) therefore also holds a `fast_path` block:

- `code`: sha256 of the code that judges (every patchkit module, unidiff's sources, the Python version),
- `series`: the patches that were judged together, in order, each as [id, manifest sha256, diff sha256],
- `files`: every path of the patch's filtered hunk set as the transaction left it: sha256, mode and size of
  its bytes, or null for an absent file,
- `seal`: sha256 of the record's own bytes without the seal, so any edit of the record is seen.

A rerun may answer "already applied" from this block only if all of these hold, for every patch of the run:
the record and its folders pass the one trust rule (patchkit.input.trust: owned by this user or root,
writable by no one else, no link); the record's bytes are exactly
the ones patchkit writes, with an intact seal; `code` is this code, `series` is this run's patches with the
manifest and diff hashes computed now; and every listed file has exactly the recorded bytes and mode, read
link-free like every other read. Then the full judgement would see the very bytes it judged applied when it
wrote them, with the same code, manifest and diff, so it could only answer the same. Anything else (no record,
an old record, one changed byte anywhere, a manifest with a [base] fingerprint) means `None`: the caller runs
the full judgement.

The block also holds `report`: the per-hunk verdicts the write stage found when it judged, in memory, the very
bytes `files` lists (patchkit.run.recorded). A -v or --json rerun prints those: the full judgement of the same
bytes with the same code could only find the same verdicts, so they are trusted exactly as far as the rest.
And `shown`: the sha256 of `<id>.files` (records.shown_name), those verdicts rendered once at apply as the
--json document's `files` list (patchkit.run.recorded.files_text). A --json restart prints that file when it
has exactly this sha256 (read_shown), instead of decoding and rendering the verdicts again: the same text, as
the code that rendered it is this code (`code`). A text restart never reads it. recorded_report makes that
choice, for the CLI's fast path and the restart entry alike.

This module never writes and never decides anything but "applied"; a record is only ever a reason to skip
work, never a reason to write.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import stat
import sys
from collections.abc import Iterable, Mapping, Sequence
from importlib.util import find_spec
from typing import TYPE_CHECKING, Any, NamedTuple

import patchkit
from patchkit import source_archive
from patchkit.errors import PatchkitError
from patchkit.input.reads import STATE_DIR, iter_all_at
from patchkit.input.trust import Refusal, open_trusted_child
from patchkit.run.recorded import RecordedReport, load_report
from patchkit.run.records import AppliedRecord, record_fields, record_names, shown_name

if TYPE_CHECKING:
    from pathlib import Path

    from patchkit.input.manifest import PatchSpec
    from patchkit.input.reads import Snapshot
    from patchkit.input.tree import Root

BLOCK = "fast_path"
SHOWN = "shown"  # the block's key for the sha256 of the shown verdicts (records.shown_name), when written
REPORT = "report"  # the block's key for the verdicts of the applied tree (patchkit.run.recorded), as one string
RESTART = "restart"  # the block's key for what the restart entry prints of the manifest (run.actions.restart_facts)
_SEAL_KEY = b'"seal": "'
_ZERO_SEAL = "0" * 64
DISABLE_ENV = "PATCHKIT_NO_FASTPATH"  # set (non-empty): always run the full judgement
# Why the base is unknown without a [base] fingerprint (run.provenance says it; the restart entry too).
UNKNOWN_UNPINNED = "target.pinned_commit is unknown and the manifest has no [base] fingerprint"
UNKNOWN_NO_GIT = "not a git checkout, and the manifest has no [base] fingerprint"
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK  # a FIFO swapped in must not hang the read


# -------------------------------------------------------------------------------------------------- writing


def series_entry(spec: PatchSpec) -> list[str]:
    """[id, sha256 of the manifest's bytes, sha256 of the diff]: one patch of the `series` list."""
    return [spec.id, _sha256(spec.manifest_path.read_bytes()), spec.sha256 or ""]


def fast_block(
    series: Sequence[Sequence[str]], paths: Iterable[str], after: Mapping[str, Snapshot], report: str,
    restart: Mapping[str, Any] | None = None, shown: bytes | None = None,
) -> dict[str, Any]:
    """The `fast_path` block of a record (without its seal): the state `paths` are left in by the transaction,
    `report`, the verdicts a judgement of that state finds (patchkit.run.recorded.report_text), `restart`,
    what a restart's document says of the manifest (run.actions.restart_facts), and the sha256 of `shown`, those
    verdicts as the document shows them (records.shown_name; each left out when None)."""
    files: dict[str, dict[str, Any] | None] = {}
    for path in paths:
        snap = after[path]
        if snap.data is None:
            files[path] = None
        else:
            files[path] = {"sha256": _sha256(snap.data), "mode": snap.mode, "size": len(snap.data)}
    block: dict[str, Any] = {"code": code_fingerprint(), "series": [list(e) for e in series], "files": files}
    if restart is not None:
        block[RESTART] = dict(restart)
    if shown is not None:
        block[SHOWN] = _sha256(shown)
    block[REPORT] = report
    return block


def add_block(record: bytes, block: Mapping[str, Any]) -> bytes:
    """The record's bytes (records.record_files) with a fast_path block added and sealed.

    The seal is the last key of the last block: sha256 of the record's bytes with the seal's value zeroed.
    """
    raw = json.loads(record)
    raw[BLOCK] = {**block, "seal": _ZERO_SEAL}
    data = (json.dumps(raw, indent=2) + "\n").encode()
    start = data.rindex(_SEAL_KEY) + len(_SEAL_KEY)
    return data[:start] + _sha256(data).encode() + data[start + len(_ZERO_SEAL):]


def _sealed(data: bytes) -> bool:
    """The record's bytes are exactly the ones add_block sealed (any other byte changed: False)."""
    start = data.rfind(_SEAL_KEY) + len(_SEAL_KEY)
    if start < len(_SEAL_KEY):
        return False
    seal = data[start:start + len(_ZERO_SEAL)]
    return _sha256(data[:start] + _ZERO_SEAL.encode() + data[start + len(_ZERO_SEAL):]).encode() == seal


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """sha256 of every source that can change a verdict: patchkit's modules, unidiff's, the Python version."""
    h = hashlib.sha256(f"{sys.version}\0".encode())
    archive = source_archive()
    if archive is not None:  # patchkit.pyz: its modules (and its unidiff) are members of the one archive
        try:
            with open(archive, "rb") as handle:
                h.update(b"archive\0" + handle.read())
        except OSError:
            h.update(b"unreadable archive")
        return h.hexdigest()
    folders = [os.path.dirname(os.path.abspath(patchkit.__file__))]  # the whole package, every stage folder
    spec = find_spec("unidiff")  # locates the package without importing it
    if spec is not None and spec.origin:
        folders.append(os.path.dirname(spec.origin))
    for folder in folders:
        for rel in _python_sources(folder):
            h.update(rel.encode() + b"\0")
            try:
                with open(os.path.join(folder, rel), "rb") as handle:
                    h.update(handle.read())
            except OSError:
                h.update(b"unreadable")
            h.update(b"\0")
    return h.hexdigest()


def _python_sources(folder: str) -> list[str]:
    """Every `*.py` under `folder` (not into linked folders), as sorted relative POSIX paths.

    What Path.rglob("*.py") finds, without pathlib's glob machinery (its pattern compiler runs at every start)."""
    found = []
    for top, dirs, files in os.walk(folder):
        rel = os.path.relpath(top, folder)
        prefix = "" if rel == "." else rel.replace(os.sep, "/") + "/"
        found += [prefix + name for name in (*files, *dirs) if name.endswith(".py")]
    return sorted(found, key=lambda rel: rel.split("/"))


# -------------------------------------------------------------------------------------------------- reading


class Vouched(NamedTuple):
    """One patch's answer: its record, and the verdicts of the tree it left (`report`, as recorded)."""

    record: AppliedRecord
    report: Any
    restart: Any  # the block's `restart` facts (fast_block), for the restart entry's document; None if absent
    shown: Any  # the block's sha256 of the shown verdicts (read_shown); None if absent (an older record)


def check_restart(specs: Sequence[PatchSpec], root: Root) -> tuple[Vouched, ...] | None:
    """The records proving every patch of `specs` (judged together, in this order) is applied as written: the
    fast path's answer, one record (and its recorded verdicts) per patch, in order.

    None: the full judgement must run. Call under the root's lock (shared is enough: this writes nothing;
    run.actions.restart_outcomes) on `root`, the command's tree.Root. Never raises for what it finds in the
    tree: an odd tree is the full path's to report.
    """
    if os.environ.get(DISABLE_ENV):
        return None
    if any(spec.base_files or spec.sha256 is None for spec in specs):
        return None  # a [base] fingerprint is checked against per-hunk verdicts: only the full path has them
    try:
        series = [series_entry(spec) for spec in specs]
    except (OSError, PatchkitError):
        return None
    vouched = vouch(root.fd, root.path, series)
    if vouched is None or any(v.record.strip != spec.strip for v, spec in zip(vouched, specs, strict=True)):
        return None
    return vouched


def vouch(root_fd: int, root: str | Path, series: Sequence[Sequence[str]]) -> tuple[Vouched, ...] | None:
    """The records proving every patch of `series` ([id, manifest sha256, diff sha256] each, hashed now, in the
    order they are judged together) is applied as written; None: the full judgement must run. Call under the
    root's lock, shared."""
    wanted = [list(entry) for entry in series]
    records = []
    for entry in wanted:
        data = read_record(root_fd, root, entry[0])
        record = None if data is None else vouch_record(root_fd, root, data, entry, wanted)
        if record is None:
            return None
        records.append(record)
    return tuple(records)


def read_record(root_fd: int, root: str | Path, patch_id: str) -> bytes | None:
    """The bytes of the applied record of `patch_id`, read under the one trust rule (None: absent or refused)."""
    try:
        return read_trusted(root_fd, root, f"{STATE_DIR}/{record_names(patch_id)[0]}")
    except (OSError, PatchkitError):
        return None


def vouch_record(
    root_fd: int, root: str | Path, data: bytes, entry: Sequence[str], series: Sequence[Sequence[str]]
) -> Vouched | None:
    """One patch's answer from its record's bytes `data` (read_record): the one check of a record, by ids and
    digests alone, that check_restart (the CLI's run) and the restart entry (patchkit.cli.restart, which loads no
    manifest parser) both make. `entry` is this patch's [id, manifest sha256, diff sha256] as hashed now and
    `series` all of them; None: the full judgement must run."""
    try:
        if not _sealed(data):
            return None  # not byte for byte the record patchkit wrote
        raw = json.loads(data)  # once: a large series' record is ~0.8 MB
        block = raw[BLOCK]
        if not isinstance(block, dict) or not _sealed_by(block, data):
            return None
        record = record_fields(raw)
        files = block["files"]
        if not isinstance(files, dict):
            return None
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    if [record.patch, record.manifest_sha256, record.diff_sha256] != list(entry):
        return None
    if block.get("code") != code_fingerprint() or block.get("series") != [list(e) for e in series]:
        return None
    if not all(isinstance(path, str) for path in files):
        return None
    try:
        # One file in memory at a time: each is read, hashed and dropped (a restart's peak stays below the tree's
        # size).
        with contextlib.closing(iter_all_at(root_fd, root, files)) as found:
            if not all(_file_is(snap, files[path]) for path, snap in found):
                return None
    except (OSError, PatchkitError):
        return None
    return Vouched(record, block.get(REPORT), block.get(RESTART), block.get(SHOWN))


def read_shown(root_fd: int, root: str | Path, vouched: Vouched) -> bytes | None:
    """The verdicts as a --json restart shows them (the document's `files` as UTF-8, records.shown_name) if the
    state folder holds them with the sha256 the vouched record seals, read under the one trust rule; None
    otherwise (an older record, the file gone, changed or refused): the caller renders the recorded verdicts."""
    if not isinstance(vouched.shown, str):
        return None
    try:
        data = read_trusted(root_fd, root, f"{STATE_DIR}/{shown_name(vouched.record.patch)}")
    except (OSError, PatchkitError):
        return None
    if data is None or _sha256(data) != vouched.shown:
        return None
    if not data.isascii():  # ASCII is UTF-8; anything else is decoded once, to be sure (never a crash later)
        try:
            data.decode()
        except UnicodeDecodeError:
            return None
    return data


def recorded_report(root_fd: int, root: str | Path, vouched: Vouched, *, rows: bool) -> RecordedReport | None:
    """What a restart prints of one vouched patch's verdicts (-v, --json): the one choice between the kept
    `files` text and the recorded verdicts, for the CLI's fast path (run.actions) and the restart entry
    (patchkit.cli.restart) alike. Call under the root's lock.

    The kept text (read_shown) with the digest the record seals and the excluded paths of its `restart` facts,
    nothing decoded, when the text is there and no row is printed from the verdicts (not `rows`: --json without
    -v); else the recorded verdicts decoded (recorded.load_report), with the kept text if there is one.
    recorded.shown_files renders the document's `files` of either. None: verdicts patchkit did not write (the
    full judgement runs)."""
    shown = read_shown(root_fd, root, vouched)
    excluded = _excluded_paths(vouched.restart)
    if shown is not None and not rows and excluded is not None:
        # The report's hunk_set_sha256 is the record's (records.record_files and recorded.report_text both write
        # the digest of the one hunk set the apply judged): the report need not be decoded for it.
        return RecordedReport(vouched.record.hunkset_sha256, excluded, (), shown)
    try:
        return load_report(vouched.report)._replace(shown=shown)  # printed as recorded (patchkit.run.recorded)
    except ValueError:
        return None


def _excluded_paths(facts: Any) -> tuple[str, ...] | None:
    """The excluded paths of a record's `restart` facts (run.actions.restart_facts: excluded_json's, in order),
    or None."""
    excluded = facts.get("excluded") if isinstance(facts, dict) else None
    if not isinstance(excluded, list) or not all(isinstance(e, dict) and type(e.get("path")) is str for e in excluded):
        return None
    return tuple(e["path"] for e in excluded)


def _sealed_by(block: Mapping[str, Any], data: bytes) -> bool:
    """The seal _sealed checked is the block's own `seal` key (its last one), not text elsewhere."""
    keys = list(block)
    return bool(keys) and keys[-1] == "seal" and data.endswith(f'{block["seal"]}"\n  }}\n}}\n'.encode())


def _file_is(snap: Snapshot, want: Any) -> bool:
    """The file as read is byte for byte (and mode for mode) what the record says the transaction left."""
    if want is None:
        return snap.data is None
    if not isinstance(want, dict) or snap.data is None:
        return False
    return (
        snap.mode == want.get("mode")
        and len(snap.data) == want.get("size")
        and _sha256(snap.data) == want.get("sha256")
    )


def read_trusted(root_fd: int, root: str | Path, rel: str) -> bytes | None:
    """The bytes of `rel` if it and the folders under the root leading to it pass the one trust rule
    (patchkit.input.trust: root's or this user's, writable by nobody else, no link), each checked on the
    descriptor it is opened as and the next name opened from it; None otherwise (or when it is absent)."""
    parts = rel.split("/")
    fd = os.dup(root_fd)
    shown = str(root).rstrip("/")
    for depth, name in enumerate(parts, start=1):
        shown = f"{shown}/{name}"
        last = depth == len(parts)
        try:
            child = open_trusted_child(fd, name, shown, folder=not last, flags=_READ_FLAGS if last else None)
        finally:
            os.close(fd)
        if isinstance(child, Refusal):
            return None
        fd = child
    return read_regular(fd)


def read_regular(fd: int) -> bytes | None:
    """The whole content of the file open at `fd` if it is a regular file (None: it is not); closes `fd`."""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
