"""What patchkit may believe of its own state folder, `<root>/.patchkit`: only what nobody else could write.

The engine tree may belong to a less privileged user, and whoever owns the root can rename `.patchkit` away
and put a folder of their own there. So every read of a journal or an applied record, and every write into
the state folder, first checks each folder from `.patchkit` down and the file itself, on the descriptor or
link-free lstat it is about to use, by the one rule every reader follows (patchkit.input.trust): owned by the
running user or root (root's state is trusted by every user), and not writable by group or others.
The lock file too (workspace.lock). Anything else is refused (UntrustedStateError, exit 2) before a byte is
read or written. Inside a folder that passes, nobody else can swap an entry, so an lstat-then-open of a name
in it cannot be raced.

Modes are set explicitly (fchmod), never left to the umask: the state folder and its `applied/` folder
0755, records and the lock 0644 (they are no secret: a record names a diff that is in the registry), the
journal 0600 (it holds the original bytes of files that may be private).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

from patchkit.errors import UntrustedStateError
from patchkit.input.limits import MAX_JOURNAL_BYTES
from patchkit.input.tree import STATE_DIR, Root, Snapshot, open_child_dir, read_entry, split_relative
from patchkit.input.trust import refusal

STATE_DIR_MODE = 0o755
STATE_FILE_MODE = 0o644
JOURNAL_MODE = 0o600

_HINT = (
    "patchkit only trusts state that nobody but the running user or root could have written. If you know "
    "what is in it, `chown -R root: {root} && chmod -R go-w {root}`; otherwise remove {root} (patchkit then "
    "judges the tree by content alone; check the tree first if a journal is there)"
)


def trusted_fd(fd: int, shown: str, base: Path) -> int:
    """`fd` once `check_trusted` accepts what it refers to; closed (and the refusal raised) otherwise."""
    try:
        check_trusted(os.fstat(fd), shown, base)
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_trusted(st: os.stat_result, shown: str, state_root: Path) -> None:
    """Refuse a state file or folder the one trust rule refuses (patchkit.input.trust): another owner than
    root or the running user, group or other write (a sticky folder excepted), a link."""
    problem = refusal(st, shown)
    if problem is not None:
        what = "folder" if stat.S_ISDIR(st.st_mode) else "file"
        raise UntrustedStateError(
            f"the state {what} {problem.describe()}; refusing to read or write patchkit state another user "
            "could have written, nothing was changed",
            where=shown,
            hint=_HINT.format(root=state_root),
        )


def open_state_dir(root: Root, *, create: bool) -> int | None:
    """A checked descriptor of `<root>/.patchkit`; None if it is missing and create is False."""
    shown = root.state_path
    root_fd = root.fd
    fd = open_child_dir(root_fd, STATE_DIR, STATE_DIR, str(shown))
    if fd is None and create:
        try:
            os.mkdir(STATE_DIR, 0o700, dir_fd=root_fd)
            made = True
        except FileExistsError:  # a racing patchkit (or someone else: checked below)
            made = False
        fd = open_child_dir(root_fd, STATE_DIR, STATE_DIR, str(shown))
        if fd is not None and made:
            with contextlib.suppress(OSError):
                if os.fstat(fd).st_uid == os.geteuid():
                    os.fchmod(fd, STATE_DIR_MODE)
        if fd is None:
            raise FileNotFoundError(errno.ENOENT, "vanished while being created", str(shown))
    if fd is None:
        return None
    return trusted_fd(fd, str(shown), shown)


def open_state_folder(state_fd: int, state_path: Path, folders: tuple[str, ...], rel: str) -> int | None:
    """Descriptor of a folder under .patchkit, each step link-free and checked; None if one is missing."""
    fd = os.dup(state_fd)
    shown = state_path
    for part in folders:
        shown = shown / part
        try:
            child = open_child_dir(fd, part, rel, str(shown))
        finally:
            os.close(fd)
        if child is None:
            return None
        fd = trusted_fd(child, str(shown), state_path)
    return fd


def read_state_at(state_fd: int, state_path: Path, rel: str) -> Snapshot:
    """`rel` under the (checked) state folder, as found; refused unless it and its folders are trusted."""
    parts = split_relative(rel)
    folder = open_state_folder(state_fd, state_path, parts[:-1], rel)
    if folder is None:
        return Snapshot(rel, None, None)
    shown = str(state_path.joinpath(*parts))
    try:
        try:
            st = os.stat(parts[-1], dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            return Snapshot(rel, None, None)
        if stat.S_ISREG(st.st_mode):
            check_trusted(st, shown, state_path)
        # Refuses links and non-files. State files are trusted by now; the largest, the journal, holds originals
        # read under the tree's bounds (patchkit.input.limits).
        return read_entry(folder, parts[-1], rel, shown, limit=MAX_JOURNAL_BYTES)
    finally:
        os.close(folder)


def read_state(root: Root, rel: str) -> Snapshot:
    """`<root>/.patchkit/<rel>` if patchkit may trust it (see module doc); absent if there is none."""
    state_fd = open_state_dir(root, create=False)
    if state_fd is None:
        return Snapshot(rel, None, None)
    try:
        return read_state_at(state_fd, root.state_path, rel)
    finally:
        os.close(state_fd)
