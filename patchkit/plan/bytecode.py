"""Cached bytecode that would outlive a source change: planned for removal with the change itself.

Python runs an unchecked-hash `.pyc` whatever its source now says, and a timestamp `.pyc` whose source keeps
its size and changes within the same second of mtime. So when a plan changes (or removes) `pkg/mod.py`,
every `pkg/__pycache__/mod.<tag>[.opt-N].pyc` (any interpreter tag, any invalidation mode: simpler and always
safe, the interpreter rebuilds what it needs) is added to the plan as a deletion. It is then written, journaled
and rolled back with the rest of the transaction by workspace.py; nothing here writes. A cache file is never
read (an unread Snapshot): the transaction renames it to its kept name, a rollback renames it back (the same
inode, whatever its size or number of hard links), and the journal records its identity, not its bytes.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Sequence
from dataclasses import replace

from patchkit.input.tree import STATE_DIR, Root, Snapshot, open_folder, split_relative
from patchkit.plan.plan import FileChange, Plan

CACHE_DIR = "__pycache__"


def with_bytecode_removals(root: Root, plan: Plan) -> Plan:
    """The plan plus the deletion of every cached bytecode file of each Python source it changes."""
    extra = stale_bytecode(root, plan.changes)
    return replace(plan, changes=(*plan.changes, *extra)) if extra else plan


def stale_bytecode(root: Root, changes: Sequence[FileChange]) -> tuple[FileChange, ...]:
    planned = {c.path for c in changes}
    modules: dict[tuple[str, ...], list[str]] = {}  # folder -> stems of its changed sources
    for change in changes:
        if not change.path.endswith(".py") or change.before.data == change.after.data:
            continue
        parts = split_relative(change.path)
        if parts[0] != STATE_DIR:
            modules.setdefault(parts[:-1], []).append(parts[-1][:-3])
    out: list[FileChange] = []
    for folder, stems in sorted(modules.items()):
        cache = (*folder, CACHE_DIR)
        cache_rel = "/".join(cache)
        fd = open_folder(root.fd, root.path, cache, cache_rel)  # link-free walk; a linked folder is refused
        if fd is None:
            continue
        try:
            alternatives = "|".join(re.escape(stem) for stem in sorted(set(stems)))
            pattern = re.compile(rf"(?:{alternatives})\.[A-Za-z0-9_-]+(?:\.opt-[0-9]+)?\.pyc")
            for name in sorted(os.listdir(fd)):
                rel = f"{cache_rel}/{name}"
                if not pattern.fullmatch(name) or rel in planned:
                    continue
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if not stat.S_ISREG(st.st_mode):
                    continue  # only regular cache files are ours to remove
                # Never read: the transaction renames it to its kept name and the journal keeps no copy, so
                # a planted huge cache costs nothing, and one with other hard links loses only this name.
                unread = Snapshot(rel, None, stat.S_IMODE(st.st_mode))
                out.append(FileChange(rel, unread, Snapshot(rel, None, None)))
                planned.add(rel)
        finally:
            os.close(fd)
    return tuple(out)
