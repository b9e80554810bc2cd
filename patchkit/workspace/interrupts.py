"""SIGTERM handled like Ctrl-C, and signals held back while the tree must not be left half written.

`docker stop` and Kubernetes send SIGTERM; by default it kills the process wherever it is. The CLI installs
`sigterm_as_interrupt`, so SIGTERM raises `Terminated` (a KeyboardInterrupt) in the main thread and every
`finally` and rollback runs. A transaction and a recovery run inside `signals_held`: SIGINT and SIGTERM are
blocked, the write loop asks `interrupt_pending()` between files and rolls back when one is; the signal is
delivered when the block ends, after the rollback and the journal's removal, so a second Ctrl-C cannot
stop a rollback half way. SIGKILL cannot be held: that is what the journal is for.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

HELD = frozenset({signal.SIGINT, signal.SIGTERM})


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived; raised in the main thread like KeyboardInterrupt, so the same clean-up runs."""


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated()


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While inside, SIGTERM raises Terminated (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Block SIGINT and SIGTERM for this thread; whatever arrived is delivered on the way out."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, HELD)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def interrupt_pending() -> bool:
    """Whether SIGINT or SIGTERM is waiting behind `signals_held`."""
    return bool(signal.sigpending() & HELD)
