"""The only package that writes to the engine tree: a lock, a journal, then atomic per-file replaces.

A newcomer's map:

- `commit.py`   the transaction (`commit_changes`): checks, journal, exclusive temp files, replaces;
- `recovery.py` rollback in-process and recovery of an interrupted run (`recover`);
- `journal.py`  the journal's format, and the checks that make a planted one harmless;
- `lock.py`     the root's lock (`locked`), who holds it, recovery before anything else;
- `trust.py`    what patchkit believes of `<root>/.patchkit`: only what nobody else could write;
- `disk.py`     every operation that changes the disk, counted for fault injection;
- `folders.py`  link-free walks to a path's folder, creating folders with explicit modes.

See docs/safety.md for the guarantees and the threat model.
"""

from __future__ import annotations

from patchkit.workspace.commit import commit_changes
from patchkit.workspace.disk import (
    FAULT_AFTER_ENV,
    FAULT_ERRNO_ENV,
    FAULT_PERSIST_ENV,
    FAULT_SIGNAL_ENV,
    TEMP_NAME,
    Disk,
)
from patchkit.workspace.journal import GITIGNORE_NAME, JOURNAL_NAME, LOCK_NAME, Area
from patchkit.workspace.lock import (
    DEFAULT_LOCK_TIMEOUT,
    LockHolder,
    WaitHook,
    locked,
    pending_label,
    read_holder,
    recover_pending,
)
from patchkit.workspace.recovery import Direction, Recovery, recover
from patchkit.workspace.trust import read_state

__all__ = [
    "DEFAULT_LOCK_TIMEOUT",
    "FAULT_AFTER_ENV",
    "FAULT_ERRNO_ENV",
    "FAULT_PERSIST_ENV",
    "FAULT_SIGNAL_ENV",
    "GITIGNORE_NAME",
    "JOURNAL_NAME",
    "LOCK_NAME",
    "TEMP_NAME",
    "Area",
    "Direction",
    "Disk",
    "LockHolder",
    "Recovery",
    "WaitHook",
    "commit_changes",
    "locked",
    "pending_label",
    "read_holder",
    "read_state",
    "recover",
    "recover_pending",
]
