"""Finishing or undoing a transaction: in-process after an error or a signal, or by the next run after a kill.

A rollback puts every path back to exactly what it was: a replaced or deleted file by renaming its kept hard
link (the original inode, so bytes, owner, mode, xattrs and ACLs come back as they were, and no new inode or
block is needed on a full disk; a stale bytecode cache, deleted by renaming it to that name, has no other way
back and needs none); only when that link is gone does it write the journal's copy (then
setuid/setgid/sticky are not restored, the owner is). It removes only names the journal lists (its own temp
files and links, files it created, folders it created), looks before it unlinks (a read-only folder refuses
even a missing name), and skips what is already as it was, so a rollback that is itself killed is finished by
the next run. Signals are held while it runs (interrupts.signals_held).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from patchkit.display import shown_label
from patchkit.errors import PatchkitError, RecoveryFailedError, UntrustedStateError
from patchkit.input.tree import Root, Snapshot, open_folder, read_entry, split_relative
from patchkit.workspace.disk import PERMISSION_BITS, Disk, lstat_at, put_file, unlink_present
from patchkit.workspace.folders import (
    Roots,
    describe,
    drop_journal,
    open_parent,
    open_roots,
    read,
    rmdir_if_empty,
)
from patchkit.workspace.interrupts import signals_held
from patchkit.workspace.journal import Area, Entry, Original, matches, parse_journal
from patchkit.workspace.names import JOURNAL_NAME, TEMP_NAME
from patchkit.workspace.trust import read_state_at

# A folder a transaction wrote through, by (area, folder parts): its descriptor as the writer held it.
HeldFolders = Mapping[tuple[Area, tuple[str, ...]], int]


class Direction(Enum):
    BACK = "rolled back"
    FORWARD = "rolled forward"


@dataclass(frozen=True)
class Recovery:
    """What `recover` did about an interrupted transaction."""

    root: Path
    label: str  # e.g. "apply of demo-pr2106"
    direction: Direction
    files: int  # files rewritten (back) or found already complete (forward)

    @property
    def message(self) -> str:
        if self.direction is Direction.FORWARD:
            detail = f"completed it (all {self.files} files were already written)"
        elif self.files == 0:
            detail = "rolled back (no file had been changed yet)"
        else:
            detail = f"rolled back {self.files} file{'' if self.files == 1 else 's'}"
        return f"recovered an interrupted {shown_label(self.label)} on {self.root}: {detail}"


def recover(root: Root) -> Recovery | None:
    """Finish or undo the transaction an interrupted process left on root; None if there is none.

    Rolls forward (only cleans up) when every file already has its new content, else restores every file and
    folder. The caller holds the exclusive lock. A journal another user could have written is refused
    (UntrustedStateError, exit 2) before anything is done.
    """
    with signals_held():
        try:
            with open_roots(root, create=False) as roots:
                return None if roots is None else _recover(roots, Disk())
        except UntrustedStateError:
            raise
        except (OSError, PatchkitError) as exc:
            if isinstance(exc, RecoveryFailedError):
                raise
            raise RecoveryFailedError(
                f"cannot recover the interrupted transaction: {describe(exc)}; the journal is kept",
                where=str(root.state_path / JOURNAL_NAME),
                hint="fix the cause and rerun any patchkit command on this root, or restore the tree from the "
                "image and delete the journal",
            ) from None


def _recover(roots: Roots, disk: Disk) -> Recovery | None:
    state_path = roots.path(Area.STATE)
    if lstat_at(roots.state_fd, JOURNAL_NAME) is None:
        # Killed while writing the journal (or the .gitignore): the tree was never touched.
        _sweep_state_temps(roots, disk)
        return None
    raw = read_state_at(roots.state_fd, state_path, JOURNAL_NAME)  # refused unless trusted: its owner, its mode
    assert raw.data is not None
    label, entries = parse_journal(raw.data, state_path / JOURNAL_NAME, roots.root, os.fstat(roots.tree_fd).st_ino)
    if all(_written(roots, e) for e in entries):
        finish(roots, disk, entries)
        direction, count = Direction.FORWARD, len(entries)
    else:
        direction, count = Direction.BACK, roll_back(roots, disk, entries)
    drop_journal(roots, disk)
    _sweep_state_temps(roots, disk)
    return Recovery(roots.root, label, direction, count)


def _written(roots: Roots, entry: Entry) -> bool:
    """Whether the entry's path already holds what the transaction writes there. A deletion is looked at, not
    read: a file still there may be a huge stale cache, and any file there means it is not done."""
    if entry.after is not None:
        return matches(read(roots, entry.area, entry.path), entry.after)
    parent = open_parent(roots, entry.area, entry.parts[:-1], entry.path, Disk(faults=False), create=None)
    if parent is None:
        return True
    try:
        return lstat_at(parent, entry.parts[-1]) is None
    finally:
        os.close(parent)


def _sweep_state_temps(roots: Roots, disk: Disk) -> None:
    # Only the top of the (trusted, locked) state folder: nobody else can have put a name there.
    for name in os.listdir(roots.state_fd):
        if TEMP_NAME.fullmatch(name):
            unlink_present(disk, roots.state_fd, name)


def finish(roots: Roots, disk: Disk, entries: Sequence[Entry], held: HeldFolders | None = None) -> None:
    """The tail of a transaction whose files are all written: drop temps and kept links (through the folders
    the writer held, when given: see roll_back), then the folders its deletions emptied (like git apply)."""
    for entry in entries:
        parts = entry.parts
        fd = None if held is None else held.get((entry.area, parts[:-1]))
        if fd is not None:
            parent: int | None = os.dup(fd)
        else:
            parent = open_parent(roots, entry.area, parts[:-1], entry.path, disk, create=None)
        if parent is None:
            continue
        try:
            unlink_present(disk, parent, entry.temp)
            unlink_present(disk, parent, entry.keep)
        finally:
            os.close(parent)
    for entry in entries:
        if entry.after is None:
            for folder, _ in reversed(entry.folders):
                if rmdir_if_empty(roots, entry.area, folder, disk) is False:
                    break


def roll_back(roots: Roots, disk: Disk, entries: Sequence[Entry], held: HeldFolders | None = None) -> int:
    """Put every entry back as it was; returns how many paths needed changing.

    `held`: the folders the transaction wrote through, as it held them. An entry whose folder is there is
    restored through that descriptor, wherever the folder is now (moved out of the root, its files are put
    back where they went, and no temp file or kept link of ours is left in it); the others are walked to
    from the root by name."""
    rewritten = sum(
        _restore(roots, disk, entry, None if held is None else held.get((entry.area, entry.parts[:-1])))
        for entry in reversed(entries)
    )
    created = {(e.area, folder) for e in entries for folder, mode in e.folders if mode is None}
    for area, folder in sorted(created, key=lambda item: item[1].count("/"), reverse=True):
        parts = split_relative(folder)
        parent = None if held is None else _below_held(held, area, parts)
        if parent is None:
            rmdir_if_empty(roots, area, folder, disk)
            continue
        try:  # walked to from the nearest folder the writer held, wherever that is now
            if lstat_at(parent, parts[-1]) is not None:
                disk.rmdir(parent, parts[-1])
                disk.fsync(parent, parts[-1])
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT):
                raise
        finally:
            os.close(parent)
    return rewritten


def _below_held(held: HeldFolders, area: Area, parts: tuple[str, ...]) -> int | None:
    """A descriptor of the folder holding `parts`, walked by name from the deepest held folder above it."""
    for depth in range(len(parts) - 1, -1, -1):
        fd = held.get((area, parts[:depth]))
        if fd is not None:
            return open_folder(fd, Path("."), parts[depth:-1], "/".join(parts))
    return None


def _restore(roots: Roots, disk: Disk, entry: Entry, held: int | None = None) -> bool:
    """Put one entry back as the journal recorded it; whether its path needed changing.

    Through its folder (`held`, the descriptor the writer held, or walked to by name): _restore_in_folder puts a
    kept original back or compares the path with the journal's copy. Where that does not settle it (the folder is
    gone, or the kept link is and the file is not as it was), the journal's copy is written back (_write_back)."""
    parent = _entry_folder(roots, disk, entry, held, create=None)
    if parent is not None:
        try:
            settled = _restore_in_folder(roots, disk, entry, parent)
        finally:
            os.close(parent)
        if settled is not None:
            return settled
    if entry.before.data is None:  # absent before, or an unread cache (never copied: nothing to write back)
        return False
    return _write_back(roots, disk, entry, held)


def _entry_folder(
    roots: Roots, disk: Disk, entry: Entry, held: int | None, *, create: dict[str, int | None] | None
) -> int | None:
    """A descriptor of the entry's folder (the caller closes it): the held one, duplicated, else walked to from
    the root by name (open_parent: None when it is gone and `create` is None)."""
    if held is not None:
        return os.dup(held)
    return open_parent(roots, entry.area, entry.parts[:-1], entry.path, disk, create=create)


def _restore_in_folder(roots: Roots, disk: Disk, entry: Entry, parent: int) -> bool | None:
    """The entry restored through its folder `parent`: the temp file goes, a kept original goes back
    (_put_back_kept), else the path is compared with the journal's copy. Whether the path needed changing, or
    None when the journal's copy must be written back."""
    name = entry.parts[-1]
    unlink_present(disk, parent, entry.temp)
    kept = lstat_at(parent, entry.keep)
    if kept is not None and entry.original is not None:
        return _put_back_kept(roots, disk, entry, parent, kept)
    unlink_present(disk, parent, entry.keep)  # no original to keep: not ours (cannot be, in a trusted journal)
    if entry.before.unread:
        # A stale cache whose kept name is gone (never renamed yet, or removed by the tree's owner): there is no
        # copy to write back, and none is needed (the interpreter rebuilds a cache).
        return False
    now_snap = read_entry(parent, name, entry.path, str(roots.path(entry.area) / entry.path))
    if _same(now_snap, entry.before):
        return False
    if entry.before.data is None:
        unlink_present(disk, parent, name)
        disk.fsync(parent, name)
        return True
    return None


def _put_back_kept(roots: Roots, disk: Disk, entry: Entry, parent: int, kept: os.stat_result) -> bool:
    """The original's kept link `kept`: dropped when the original was never replaced (False); else checked
    against what the journal recorded of it (RecoveryFailedError, the journal kept, when it is another file)
    and renamed back over the path, the original inode exactly as it was (True)."""
    assert entry.original is not None
    name = entry.parts[-1]
    now = lstat_at(parent, name)
    if now is not None and (now.st_dev, now.st_ino) == (kept.st_dev, kept.st_ino):
        disk.unlink(parent, entry.keep)  # never replaced: the original is still in place
        return False
    differs = _differences(kept, entry.original)
    if differs:
        kept_path = roots.path(entry.area).joinpath(*entry.parts[:-1], entry.keep)
        raise RecoveryFailedError(
            f"the kept original of {entry.path} is not the file the journal recorded ({differs}): "
            "someone replaced or changed it after the transaction was interrupted; it was not put "
            "back, and the journal is kept",
            where=str(kept_path),
            hint=f"the tree may be half patched: restore {entry.path} (and every other file the journal "
            f"lists) from the engine image, then delete {kept_path} and "
            f"{roots.path(Area.STATE) / JOURNAL_NAME}",
        )
    disk.replace(parent, entry.keep, name)  # the original inode goes back, exactly as it was
    disk.fsync(parent, name)
    return True


def _write_back(roots: Roots, disk: Disk, entry: Entry, held: int | None) -> bool:
    """The kept link is gone: write the journal's copy back, with the folders it was in (setuid, setgid and
    sticky are not restored)."""
    assert entry.before.data is not None and entry.before.mode is not None
    parent = _entry_folder(roots, disk, entry, held, create=dict(entry.folders))
    assert parent is not None
    try:
        owner = None if entry.original is None else (entry.original.uid, entry.original.gid)
        put_file(disk, parent, entry.parts[-1], entry.before.data, entry.before.mode & PERMISSION_BITS, owner=owner)
    finally:
        os.close(parent)
    return True


def _differences(kept: os.stat_result, original: Original) -> str:
    """What tells the kept link from the original the journal recorded ("" when nothing does): everything the
    journal has of it, not the inode number alone (a freed inode number is soon handed out again)."""
    found = [] if stat.S_ISREG(kept.st_mode) else ["it is not a regular file"]
    for what, now, then in (
        ("inode", kept.st_ino, original.ino),
        ("size", kept.st_size, original.size),
        ("mtime_ns", kept.st_mtime_ns, original.mtime_ns),
        ("owner uid", kept.st_uid, original.uid),
        ("group gid", kept.st_gid, original.gid),
    ):
        if now != then:
            found.append(f"{what} {now}, journaled {then}")
    return "; ".join(found)


def _same(snap: Snapshot, other: Snapshot) -> bool:
    return (snap.data, snap.mode) == (other.data, other.mode)
