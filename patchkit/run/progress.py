"""The one way core code tells the CLI which phase a long run is in, never printing.

The CLI passes an object with this method into `actions.run` / `series.run_series` (None: no progress, and
then each call site costs one `is None` test). Drawing, timing and TTY checks live in `console.py`. Waiting
for the lock is told through `Options.on_lock_wait` (workspace's WaitHook).
"""

from __future__ import annotations

from enum import Enum
from typing import Protocol


class Phase(Enum):
    PARSE = "parse"  # read, verify and parse the diff, then filter it
    JUDGE = "judge"  # under the lock: read the tree and decide every hunk's state
    WRITE = "write"  # the transaction


class Progress(Protocol):
    def phase(self, phase: Phase, subject: str) -> None:
        """A phase starts (and the one before it ends); `subject` says what it works on (a patch id)."""
