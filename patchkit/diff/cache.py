"""A per-user cache of parsed diffs, so a rerun does not pay for unidiff again (the bulk of a large status).

An entry holds the parsed, validated Diff (before the manifest's excludes, which are cheap to apply) keyed
by the diff's sha256 (already checked against the manifest by `PatchSpec.read_diff`), the strip level, and a
fingerprint of the code that parses: diffs.py, hunks.py, paths.py, this module, unidiff's sources and the Python
version. Change any of them and old entries are simply never found again.

The cache only ever saves time, and it is untrusted input like everything else on disk: `HOME` may be a shared
folder (`HOME=/tmp/...` in CI and containers), where another user could plant entries for root to apply. So:
- the cache folder and its `parsed-diffs` folder are used only when owned by the running user and not writable
  by group or others (folders patchkit creates get 0700, whatever the umask); entries only when, in addition,
  they are regular files with one link. Anything else is ignored (the diff is parsed again, nothing is stored);
- every entry names the sha256 of the diff it was parsed from, compared with the hash of the bytes in hand;
- every loaded entry passes the checks the parser makes (patchkit.input.paths.check_path on every path, the modes
  the parser accepts, the field types), so no entry can carry what the parser would refuse.
A sha256 of the payload catches truncation and bit rot; an entry that is missing, damaged or refused is
ignored and rewritten. Writes are exclusive temp files + os.replace inside the checked folder, best effort: a
read-only or full disk only costs the speed-up.

Location: $PATCHKIT_CACHE_DIR, else $XDG_CACHE_HOME/patchkit, else ~/.cache/patchkit; set
PATCHKIT_NO_CACHE=1 to turn it off. The engine tree's own .patchkit folder is never used for this.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import marshal
import os
import stat
import sys
from collections.abc import Callable, Iterator, Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from patchkit import source_archive
from patchkit.diff.hunks import MODE_EXEC, MODE_FILE, MODE_GITLINK, MODE_SYMLINK, Diff, FilePatch, Hunk
from patchkit.errors import UnsafePathError
from patchkit.input.paths import check_path

FORMAT = b"patchkit-parsed-diff-3\n"  # 3: FilePatch.old_blob / new_blob
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
    """`parse_diff(data, strip, source)`, from the cache when a trusted, intact, valid entry exists.

    `sha256` is the verified hash of `data` (PatchSpec.read_diff guarantees it; it is checked again here, as the
    entry's binding). Errors are never cached, so a bad diff is reported exactly as parse_diff reports it.
    """
    if cache_dir() is None or hashlib.sha256(data).hexdigest() != sha256:
        return _parse(data, strip, source)
    files = load_entry(sha256, strip)
    if files is not None:
        return Diff(source, files)
    diff = _parse(data, strip, source)
    store_entry(sha256, strip, diff.files)
    return diff


def _parse(data: bytes, strip: int, source: str) -> Diff:
    from patchkit.diff.diffs import parse_diff  # lazy: the parser (a hit parses nothing)

    return parse_diff(data, strip, source)


def entry_key(sha256: str, strip: int) -> str:
    h = hashlib.sha256(FORMAT)
    h.update(f"{sys.version}\0{strip}\0{sha256}\0".encode())
    for source in _parser_sources():
        with contextlib.suppress(OSError):
            h.update(source.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def load_entry(sha256: str, strip: int) -> tuple[FilePatch, ...] | None:
    """The files of the entry for (diff sha256, strip), or None if there is none this user can trust."""
    key = entry_key(sha256, strip)
    with _entries_folder(create=False) as folder:
        if folder is None:
            return None
        try:
            fd = os.open(f"{key}.bin", _READ_FLAGS, dir_fd=folder)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if not (stat.S_ISREG(st.st_mode) and _private(st) and st.st_nlink == 1):
                return None  # planted, hard-linked or loosened: not ours to believe
            blob = _read_all(fd, st.st_size)
            files = _decode(blob, key, sha256)
            if files is not None:
                with contextlib.suppress(OSError):
                    os.utime(fd)  # recently used entries survive pruning
            return files
        except OSError:
            return None
        finally:
            os.close(fd)


def store_entry(sha256: str, strip: int, files: tuple[FilePatch, ...]) -> None:
    """Write the entry for (diff sha256, strip), best effort: any failure only costs the speed-up."""
    key = entry_key(sha256, strip)
    payload = _encode(files, key, sha256)
    if payload is None:
        return
    with _entries_folder(create=True) as folder:
        if folder is None:
            return
        tmp = f".tmp-{os.urandom(8).hex()}"  # unpredictable, as secrets.token_hex (see workspace.disk.random_name)
        try:
            fd = os.open(tmp, _WRITE_FLAGS, 0o600, dir_fd=folder)
        except OSError:
            return
        try:
            with os.fdopen(fd, "wb") as handle:
                os.fchmod(handle.fileno(), 0o600)  # the umask only ever narrows; be exact
                handle.write(FORMAT + hashlib.sha256(payload).digest() + payload)
            os.replace(tmp, f"{key}.bin", src_dir_fd=folder, dst_dir_fd=folder)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=folder)
            return
        _prune(folder)


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _private(st: os.stat_result) -> bool:
    """Owned by the running user and writable by nobody else."""
    return st.st_uid == os.geteuid() and not st.st_mode & 0o022


@contextlib.contextmanager
def _entries_folder(*, create: bool) -> Iterator[int | None]:
    """A descriptor of <cache dir>/parsed-diffs if both folders pass `_private`, else None.

    create=True makes missing folders (each 0700 exactly, and each checked). Descriptors, not paths, are used
    from here on, so a folder swapped after the check is never the one read or written.
    """
    base = cache_dir()
    fd = None
    try:
        if base is not None:
            fd = _open_private(base, create)
            if fd is not None:
                child = _open_private_child(fd, FOLDER, create)
                os.close(fd)
                fd = child
    except OSError:
        if fd is not None:
            os.close(fd)
        fd = None
    try:
        yield fd
    finally:
        if fd is not None:
            os.close(fd)


def _open_private(folder: Path, create: bool) -> int | None:
    """Descriptor of `folder` if private (see _private); missing folders up to it made 0700 when create."""
    folder = Path(os.path.abspath(folder))
    missing: list[str] = []
    existing = folder
    while not os.path.lexists(existing):
        if not create or existing.parent == existing:
            return None
        missing.append(existing.name)
        existing = existing.parent
    if not missing:  # the cache folder itself: the link check applies to it too
        return _open_private_child(os.open(existing.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC),
                                   existing.name, create, close_parent=True)
    fd = os.open(existing, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # an existing ancestor may be a link
    for name in reversed(missing):
        child = _open_private_child(fd, name, create, close_parent=True)
        if child is None:
            return None
        fd = child
    return fd


def _open_private_child(parent: int, name: str, create: bool, *, close_parent: bool = False) -> int | None:
    """Descriptor of folder `name` in `parent` (made 0700 if missing and create) if private, else None."""
    try:
        fd = _open_or_make(parent, name, create)
    finally:
        if close_parent:
            os.close(parent)
    if fd is None:
        return None
    try:
        if _private(os.fstat(fd)):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def _open_or_make(parent: int, name: str, create: bool) -> int | None:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except FileNotFoundError:
        if not create:
            return None
    except OSError:
        return None
    try:
        with contextlib.suppress(FileExistsError):  # a racing run made it: the checks after this judge it
            os.mkdir(name, 0o700, dir_fd=parent)
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) != 0o700:
            os.fchmod(fd, 0o700)  # made under some umask: set it exactly
    except OSError:
        os.close(fd)
        return None
    return fd


def _read_all(fd: int, size: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, max(size, 1 << 16)):
        chunks.append(chunk)
    return b"".join(chunks)


def _parser_sources() -> Iterator[Path]:
    archive = source_archive()
    if archive is not None:  # imported from a zip (patchkit.pyz): the archive holds every parser source
        yield Path(archive)
        return
    yield Path(__file__)
    # By module name, located without importing them (the parser loads on a miss only), wherever they live.
    for name in ("patchkit.diff.diffs", "patchkit.diff.hunks", "patchkit.input.paths", "patchkit.input.limits"):
        module = find_spec(name)
        if module is not None and module.origin:
            yield Path(module.origin)
    spec = find_spec("unidiff")  # locates the package without importing it
    if spec is not None and spec.origin:
        folder = Path(spec.origin).parent
        yield from sorted(folder.glob("*.py"))


def _decode(blob: bytes, key: str, sha256: str) -> tuple[FilePatch, ...] | None:
    head, digest, payload = blob[:len(FORMAT)], blob[len(FORMAT):len(FORMAT) + 32], blob[len(FORMAT) + 32:]
    if head != FORMAT or hashlib.sha256(payload).digest() != digest:
        return None
    try:
        stored_key, stored_sha256, rows = marshal.loads(payload)
        if stored_key != key or stored_sha256 != sha256:
            return None  # an entry renamed onto another key, or made from other bytes
        files = tuple(_file(row) for row in rows)
    except (ValueError, TypeError, EOFError, IndexError):
        return None
    return files if files and all(_valid(f) for f in files) else None


def _file(row: Any) -> FilePatch:
    values = list(row)
    if len(values) != len(_FILE_FIELDS):
        raise ValueError("entry does not match the FilePatch fields")
    hunks = values[_HUNKS_AT]
    if type(hunks) is not tuple:
        raise TypeError("hunks must be a tuple")
    line_types: set[type] = set()
    for h in hunks:
        if type(h) is not tuple or len(h) != len(_HUNK_FIELDS):
            raise ValueError("entry does not match the Hunk fields")
        if _HUNK_EXACT is None:
            _check_types(h, _HUNK_TYPES)
            continue
        # The fast form of _check_types (a large diff has tens of thousands of hunks): C-level type maps.
        if tuple(map(type, h)) != _HUNK_EXACT:
            raise TypeError("hunk field of the wrong type")
        for i in _HUNK_LINES:
            line_types.update(map(type, h[i]))
    if not line_types <= {bytes}:
        raise TypeError("hunk line of the wrong type")
    values[_HUNKS_AT] = ()
    _check_types(values, _FILE_TYPES)
    values[_HUNKS_AT] = tuple(Hunk(*h) for h in hunks)
    return FilePatch(*values)


def _valid(f: FilePatch) -> bool:
    """What the parser guarantees of every FilePatch, checked again on what the cache gives back."""
    if not f.paths:
        return False
    for path in f.paths:
        try:
            check_path(path)
        except UnsafePathError:
            return False
    return all(mode in _MODES for mode in (f.old_mode, f.new_mode))


_MODES = (None, MODE_FILE, MODE_EXEC, MODE_SYMLINK, MODE_GITLINK)


def _kind_check(annotation: str) -> Callable[[Any], bool]:
    """A check that a value has the exact type a field's annotation names (the field types of hunks.py)."""
    simple = {"int": int, "bool": bool, "str": str, "bytes": bytes}
    if annotation in simple:
        wanted = simple[annotation]
        return lambda v: type(v) is wanted
    if annotation.endswith(" | None") and annotation[:-7] in simple:
        inner = _kind_check(annotation[:-7])
        return lambda v: v is None or inner(v)
    if annotation == "tuple[bytes, ...]":
        return lambda v: type(v) is tuple and set(map(type, v)) <= {bytes}  # map(type): C speed on every line
    if annotation == "tuple[Hunk, ...]":
        return lambda v: v == ()  # checked field by field by _file
    return lambda v: False  # a field type this cache does not know: never trust an entry holding it


def _check_types(values: Sequence[Any], checks: Sequence[Callable[[Any], bool]]) -> None:
    if not all(check(v) for check, v in zip(checks, values, strict=True)):
        raise TypeError("entry field of the wrong type")


_HUNK_TYPES = tuple(_kind_check(str(f.type)) for f in dataclasses.fields(Hunk))
_EXACT = {"int": int, "bool": bool, "str": str, "bytes": bytes, "tuple[bytes, ...]": tuple}
_HUNK_EXACT = (tuple(_EXACT[str(f.type)] for f in dataclasses.fields(Hunk))
               if all(str(f.type) in _EXACT for f in dataclasses.fields(Hunk)) else None)
_HUNK_LINES = tuple(i for i, f in enumerate(dataclasses.fields(Hunk)) if str(f.type) == "tuple[bytes, ...]")
_FILE_TYPES = tuple(_kind_check(str(f.type)) for f in dataclasses.fields(FilePatch))


def _encode(files: tuple[FilePatch, ...], key: str, sha256: str) -> bytes | None:
    try:
        return marshal.dumps((key, sha256, _encode_rows(files)))
    except ValueError:  # a field type marshal cannot hold: skip caching rather than fail
        return None


def _encode_rows(files: tuple[FilePatch, ...]) -> tuple[Any, ...]:
    return tuple(
        tuple(
            tuple(tuple(getattr(h, n) for n in _HUNK_FIELDS) for h in f.hunks) if name == "hunks"
            else getattr(f, name)
            for name in _FILE_FIELDS
        )
        for f in files
    )


def _prune(folder: int) -> None:
    entries = []
    with contextlib.suppress(OSError):
        for name in os.listdir(folder):
            if name.endswith(".bin"):
                with contextlib.suppress(OSError):
                    entries.append((os.stat(name, dir_fd=folder, follow_symlinks=False).st_mtime, name))
    for _, old in sorted(entries, reverse=True)[KEEP:]:
        with contextlib.suppress(OSError):
            os.unlink(old, dir_fd=folder)
