"""The only package that writes to the engine tree: a lock, a journal, then atomic per-file replaces.

A newcomer's map:

- `commit.py`   the transaction (`commit_changes`): checks, journal, exclusive temp files, replaces;
- `recovery.py` rollback in-process and recovery of an interrupted run (`recover`);
- `journal.py`  the journal's format, and the checks that make a planted one harmless;
- `lock.py`     the root's lock (`locked`), who holds it, recovery before anything else;
- `trust.py`    what patchkit believes of `<root>/.patchkit`: only what nobody else could write;
- `disk.py`     every operation that changes the disk, counted for fault injection;
- `folders.py`  link-free walks to a path's folder, creating folders with explicit modes;
- `names.py`    the names of patchkit's own files (journal, lock, temp names).

This file imports nothing: import from the module that defines a name (`patchkit.workspace.lock.locked`).
A reader such as status needs only `lock` (and through it `trust` and `names`); the writing modules load
when a transaction or a recovery runs.

See docs/safety.md for the guarantees and the threat model.
"""
