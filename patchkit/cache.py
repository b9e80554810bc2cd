"""A per-user cache of parsed diffs, so a rerun does not pay for unidiff again (the bulk of a large status).

An entry holds the parsed, validated Diff (before the manifest's excludes, which are cheap to apply) keyed
by the diff's sha256 (already checked against the manifest by `PatchSpec.read_diff`), the strip level, and a
fingerprint of the code that parses: diffs.py, hunks.py, this module, unidiff's sources and the Python version. Change
any of them and old entries are simply never found again.

The cache only ever saves time. Each entry carries a sha256 of its own payload, checked before it is read;
an entry that is missing, truncated, corrupt or unreadable is ignored and the diff is parsed again. Writes
are atomic (temp file + os.replace) and best effort: a read-only or full disk only costs the speed-up.

Location: $PATCHKIT_CACHE_DIR, else $XDG_CACHE_HOME/patchkit, else ~/.cache/patchkit; set
PATCHKIT_NO_CACHE=1 to turn it off. The engine tree's own .patchkit folder is never used for this.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import marshal
import os
import sys
from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from patchkit.diffs import parse_diff
from patchkit.hunks import Diff, FilePatch, Hunk

FORMAT = b"patchkit-parsed-diff-1\n"
FOLDER = "parsed-diffs"
KEEP = 16  # entries kept; a large engine series is ~10 MB each
_HUNK_FIELDS = tuple(f.name for f in dataclasses.fields(Hunk))
_FILE_FIELDS = tuple(f.name for f in dataclasses.fields(FilePatch))
_HUNKS_AT = _FILE_FIELDS.index("hunks")


def cache_dir() -> Path | None:
    """Where entries live, or None when the cache is turned off."""
    if os.environ.get("PATCHKIT_NO_CACHE"):
        return None
    if os.environ.get("PATCHKIT_CACHE_DIR"):
        return Path(os.environ["PATCHKIT_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base, "patchkit")


def parse_diff_cached(data: bytes, sha256: str, strip: int, source: str) -> Diff:
    """`parse_diff(data, strip, source)`, from the cache when an intact entry exists.

    `sha256` must be the verified hash of `data` (PatchSpec.read_diff guarantees it); errors are never cached,
    so a bad diff is reported exactly as parse_diff reports it, every time.
    """
    folder = cache_dir()
    if folder is None:
        return parse_diff(data, strip, source)
    key = entry_key(sha256, strip)
    path = folder / FOLDER / f"{key}.bin"
    files = _load(path, key)
    if files is not None:
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used entries survive pruning
        return Diff(source, files)
    diff = parse_diff(data, strip, source)
    _store(path, key, diff.files)
    return diff


def entry_key(sha256: str, strip: int) -> str:
    h = hashlib.sha256(FORMAT)
    h.update(f"{sys.version}\0{strip}\0{sha256}\0".encode())
    for source in _parser_sources():
        with contextlib.suppress(OSError):
            h.update(source.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def _parser_sources() -> Iterator[Path]:
    archive = next((parent for parent in Path(__file__).parents if parent.is_file()), None)
    if archive is not None:  # imported from a zip (patchkit.pyz): the archive holds every parser source
        yield archive
        return
    yield Path(__file__)
    yield Path(__file__).with_name("diffs.py")
    yield Path(__file__).with_name("hunks.py")
    spec = find_spec("unidiff")  # locates the package without importing it
    if spec is not None and spec.origin:
        folder = Path(spec.origin).parent
        yield from sorted(folder.glob("*.py"))


def _load(path: Path, key: str) -> tuple[FilePatch, ...] | None:
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    head, digest, payload = blob[:len(FORMAT)], blob[len(FORMAT):len(FORMAT) + 32], blob[len(FORMAT) + 32:]
    if head != FORMAT or hashlib.sha256(payload).digest() != digest:
        return None
    try:
        stored_key, rows = marshal.loads(payload)
        if stored_key != key:
            return None
        return tuple(_file(row) for row in rows)
    except (ValueError, TypeError, EOFError, IndexError):
        return None


def _file(row: Any) -> FilePatch:
    values = list(row)
    if len(values) != len(_FILE_FIELDS):
        raise ValueError("entry does not match the FilePatch fields")
    values[_HUNKS_AT] = tuple(Hunk(*h) for h in values[_HUNKS_AT])
    return FilePatch(*values)


def _store(path: Path, key: str, files: tuple[FilePatch, ...]) -> None:
    rows = tuple(
        tuple(
            tuple(tuple(getattr(h, n) for n in _HUNK_FIELDS) for h in f.hunks) if name == "hunks"
            else getattr(f, name)
            for name in _FILE_FIELDS
        )
        for f in files
    )
    try:
        payload = marshal.dumps((key, rows))
    except ValueError:  # a field type marshal cannot hold: skip caching rather than fail
        return
    try:
        import tempfile  # deferred: only a cache miss writes (and tempfile costs a status ~3 ms to import)

        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(FORMAT + hashlib.sha256(payload).digest() + payload)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        _prune(path.parent)
    except OSError:
        return


def _prune(folder: Path) -> None:
    entries = sorted(folder.glob("*.bin"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in entries[KEEP:]:
        with contextlib.suppress(OSError):
            old.unlink()
