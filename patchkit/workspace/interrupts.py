"""SIGTERM handled like Ctrl-C, and signals held back while the tree must not be left half written.

`docker stop` and Kubernetes send SIGTERM; by default it kills the process wherever it is. The CLI installs
`sigterm_as_interrupt`, so SIGTERM raises `Terminated` (a KeyboardInterrupt) in the main thread and every
`finally` and rollback runs. A transaction and a recovery run inside `signals_held`: SIGINT and SIGTERM are
blocked, the write loop asks `interrupt_pending()` between files and rolls back when one is; the signal is
delivered when the block ends, after the rollback and the journal's removal, so a second Ctrl-C cannot
stop a rollback half way. SIGKILL cannot be held: that is what the journal is for.

A signal the process was started with ignored (`nohup`-style, or SIGINT in a background job of a
non-interactive shell, which Python then leaves ignored) stays ignored: `sigterm_as_interrupt` keeps an ignored
SIGTERM, and `interrupt_pending` does not count an ignored signal that is pending only because it was blocked
(Linux keeps a blocked signal pending even when its action is to ignore it; it is discarded when the block
ends, so counting it would roll a write back for a signal that was never to stop anything).
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
    if signal.getsignal(signal.SIGTERM) is signal.SIG_IGN:
        yield  # started with SIGTERM ignored: whoever started us asked for that
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
    """Whether SIGINT or SIGTERM is waiting behind `signals_held` and not ignored (it will stop the run)."""
    return any(signal.getsignal(sig) is not signal.SIG_IGN for sig in signal.sigpending() & HELD)
