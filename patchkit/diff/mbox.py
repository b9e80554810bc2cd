"""A multi-commit mbox recognised in a diff's bytes: the diff stage's part of the forge formats.

A forge's `pull/N.patch` (`git format-patch --stdout A..B`) is a chain of commits, one diff section per commit
and file; a file that several commits change appears in several sections. The registry pins net diffs only:
`filtering` refuses such a chain at load (with the `vendor` command that makes its net diff), `vendor` and
`port` ask the same questions. Reads bytes and parsed sections; no tree, no git (`forge` makes the net diff).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from patchkit.diff.hunks import Diff

# The first line of each message git format-patch writes (the date is fixed on purpose, for `file`/magic).
_MBOX_FROM = re.compile(rb"^From [0-9a-f]{40} Mon Sep 17 00:00:00 2001$", re.MULTILINE)


def count_mbox_commits(data: bytes) -> int:
    """How many format-patch messages the bytes hold (0: a plain diff)."""
    return len(_MBOX_FROM.findall(data))


def repeated_paths(diff: Diff) -> list[str]:
    """Paths that more than one section of the diff touches (a chain of commits on one file)."""
    seen: dict[str, int] = {}
    for f in diff.files:
        for path in f.paths:
            seen[path] = seen.get(path, 0) + 1
    return [path for path, count in seen.items() if count > 1]


class CommitChain(NamedTuple):
    """A multi-commit mbox in which some file is changed by more than one commit: not a diff patchkit pins."""

    commits: int
    paths: tuple[str, ...]  # the paths more than one commit changes, in diff order
    line: int  # the diff line of the second section that touches the first of them


def find_commit_chain(data: bytes, diff: Diff) -> CommitChain | None:
    """The chain `data` (parsed as `diff`) is, or None: a plain diff, one commit, or commits on distinct files.

    Cheap for the common case: the sections' paths are compared first, and only a diff that touches a path
    twice is searched for format-patch's `From <sha> Mon Sep 17 ...` lines (about 8 ms per MB)."""
    repeated = repeated_paths(diff)
    if not repeated:
        return None
    commits = count_mbox_commits(data)
    if commits < 2:
        return None
    first = repeated[0]
    line = [f.diff_line for f in diff.files if first in f.paths][1]
    return CommitChain(commits, tuple(repeated), line)
