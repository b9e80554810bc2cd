"""How one run speaks on the terminal: -q / -v / --color, colour conventions, pipe-safe output, TTY progress.

This module does not import click: a first `status` answered by the first-status entry (cli/patch_run.py,
offered by cli/start.py before click loads; docs/performance.md, issue #36 item 2) speaks through it too. The
settings are this run's (`settings()`), filled by the CLI's option callbacks (cli/flags.py: -v before or after
the command name alike) or by that entry; `echo` writes what click.echo writes, and hands any stream it cannot
vouch for to click.echo itself. Everything here is CLI side: core code only sees the `Progress` protocol.
"""

from __future__ import annotations

import codecs
import io
import os
import re
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING

from patchkit.display import escape_controls
from patchkit.errors import OutputError

if TYPE_CHECKING:
    from pathlib import Path

    from patchkit.run.progress import Phase
    from patchkit.workspace.lock import LockHolder

PHASE_WORDS = {"parse": "parsing the diff", "judge": "judging the tree", "write": "writing"}
PROGRESS_DELAY = 1.0  # seconds a phase runs before progress is drawn ($PATCHKIT_PROGRESS_DELAY overrides)


@dataclass(frozen=True)
class Settings:
    """The output options of this run (-q, -v, --color, --json)."""

    color: str = "auto"  # auto | always | never
    quiet: bool = False
    verbose: bool = False
    json: bool = False


_current = [Settings()]  # this run's settings: set by the CLI's callbacks (cli/flags.py) or the first-status entry


def settings() -> Settings:
    """This run's settings (the defaults outside a command)."""
    return _current[0]


def use_settings(chosen: Settings) -> Settings:
    """Make `chosen` this run's settings; returns the ones it replaces (cli.main restores them after a run, so
    a run inside a run, as `demo` makes, leaves the outer one's as they were)."""
    previous, _current[0] = _current[0], chosen
    return previous


def use_colour(choice: str) -> bool | None:
    """True: always colour; False: never; None: only on a terminal (decided per stream, as click.echo does).

    --color always/never wins; then NO_COLOR (any non-empty value), then FORCE_COLOR / CLICOLOR_FORCE
    (non-empty and not 0), then TERM=dumb.
    """
    if choice == "always":
        return True
    if choice == "never":
        return False
    if os.environ.get("NO_COLOR"):
        return False
    if any(os.environ.get(name, "") not in ("", "0", "false") for name in ("FORCE_COLOR", "CLICOLOR_FORCE")):
        return True
    if os.environ.get("TERM") == "dumb":
        return False
    return None


# -------------------------------------------------------------------------------------------------- output

_active: list[TerminalProgress] = []  # the progress line being drawn, if any
_closed: set[str] = set()  # streams found closed in this run (cleared by reset_streams at the start of a run)


def reset_streams() -> None:
    _closed.clear()


def echo(message: str = "", *, err: bool = False) -> None:
    """click.echo with the run's colour choice; a closed pipe silences the stream instead of failing the run
    (the exit code stays the outcome's, as `status -v | head -2` needs)."""
    name = "stderr" if err else "stdout"
    if name in _closed:
        return
    # A progress line is erased first (and not redrawn while the line is written); the next tick draws it below.
    with _active[-1].paused() if _active else nullcontext():
        try:
            _write(message, err, use_colour(settings().color))
        except BrokenPipeError:
            silence(name)
        except OSError as exc:  # a full disk, EIO: the report cannot be written; not a bug
            silence(name)
            raise output_error(name, exc) from None


# click.echo's own (click._compat._ansi_re): what it strips from text for a stream that gets no colour.
_ANSI = re.compile(r"\033\[[0-?]*[ -/]*[@-~]")


def _write(message: str, err: bool, colour: bool | None) -> None:
    """What click.echo(message, err=err, color=colour) writes, without click for the streams a process has:
    an io.TextIOWrapper (not a test's capture, not a notebook's) whose encoding is not ASCII (click rewraps an
    ASCII stream), off Windows (click's console writer). Any other stream is click's to write."""
    stream = sys.stderr if err else sys.stdout
    if stream is None:
        return
    if type(stream) is not io.TextIOWrapper or _ascii(stream.encoding) or sys.platform.startswith("win"):
        import click  # lazy: the CLI (a stream click.echo writes its own way; the CLI has loaded click anyway)

        click.echo(message, err=err, color=colour)
        return
    if not colour if colour is not None else not _terminal(stream):
        message = _ANSI.sub("", message)
    stream.write(message + "\n")
    stream.flush()


def _terminal(stream: IO[str]) -> bool:
    """click.echo's test (click._compat.isatty): a stream that cannot say is no terminal."""
    try:
        return stream.isatty()
    except Exception:
        return False


def _ascii(encoding: str | None) -> bool:
    """click's test (click._compat._stream_is_misconfigured): an ASCII stream, or one without an encoding."""
    try:
        return codecs.lookup(encoding or "ascii").name == "ascii"
    except LookupError:
        return False


# click.style's codes for the colours the report uses (click.termui._ansi_colors), as fg: `\x1b[<n>m`.
_FG = {"red": 31, "green": 32, "yellow": 33, "cyan": 36}


def style(text: str, fg: str) -> str:
    """click.style(text, fg=fg): the colour's code, the text, a reset (echo strips both where no colour goes)."""
    return f"\x1b[{_FG[fg]}m{text}\x1b[0m"


def output_error(name: str, exc: OSError) -> OutputError:
    return OutputError(
        f"cannot write to {name}: {exc.strerror or exc}", where=None,
        hint="the command's work is not affected (a write to the tree is a transaction, finished or rolled back "
        f"before the report); send {name} somewhere with room and rerun to see the report: it is safe to repeat",
    )


def warn(message: str) -> None:
    """`patchkit: warning: ...` on stderr: something looks wrong but the run goes on (-q leaves it out)."""
    if not settings().quiet:
        echo(f"patchkit: warning: {message}", err=True)


def note(message: str) -> None:
    """`patchkit: note: ...` on stderr: a fact worth knowing, nothing wrong (-q leaves it out)."""
    if not settings().quiet:
        echo(f"patchkit: note: {message}", err=True)


def lock_wait_line(holder: LockHolder | None, path: Path) -> str:
    """The one line a command waiting for the root's lock prints (like git's and uv's "Blocking waiting for
    file lock"): the lock file and who holds it, as far as can be known."""
    user = f" (user {holder.user})" if holder is not None and holder.user is not None else ""
    if holder is None:
        who = "another process"
    elif holder.since is not None:
        who = f"pid {holder.pid}{user}, patchkit since {holder.since}"
    else:
        who = f"pid {holder.pid}{user}"
    return escape_controls(f"patchkit: waiting for the lock on {path} held by {who} ...") + "\n"


def print_lock_wait(holder: LockHolder | None, path: Path) -> None:
    """workspace's WaitHook without a terminal (a container's log): the line once, on stderr (-q leaves it out)."""
    if not settings().quiet:
        echo(lock_wait_line(holder, path).rstrip("\n"), err=True)


def silence(name: str) -> None:
    """Point a closed stdout/stderr at /dev/null, so later writes and the flush at exit cannot fail."""
    _closed.add(name)
    stream = getattr(sys, name)
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (tests' captured streams)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


# ------------------------------------------------------------------------------------------------ progress


class TerminalProgress:
    """A one-line spinner on stderr for a phase running longer than `delay`; cleared before any other output."""

    _FRAMES = "|/-\\"

    def __init__(self, stream: IO[str], delay: float) -> None:
        self._stream = stream
        self._delay = delay
        self._lock = threading.Lock()
        self._label: str | None = None
        self._started = 0.0
        self._drawn = False
        self._tick = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._erase = "\x1b[K" if os.environ.get("TERM") != "dumb" else ""

    def phase(self, phase: Phase, subject: str) -> None:
        with self._lock:
            self._label = f"{PHASE_WORDS.get(phase.value, phase.value)} ({subject})"
            self._started = time.monotonic()
            if self._delay <= 0:
                self._draw()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="patchkit-progress", daemon=True)
            self._thread.start()

    def lock_wait(self, holder: LockHolder | None, path: Path) -> None:
        """workspace's WaitHook: a note of its own line; the spinner goes on below it."""
        with self._lock:
            self._clear()
            self._write(lock_wait_line(holder, path))
            self._label, self._started = "waiting for the lock", time.monotonic()

    @contextmanager
    def paused(self) -> Iterator[None]:
        with self._lock:
            self._clear()
            yield

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            self._clear()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            with self._lock:
                if self._label is not None and time.monotonic() - self._started >= self._delay:
                    self._draw()

    def _draw(self) -> None:
        elapsed = time.monotonic() - self._started
        frame = self._FRAMES[self._tick % len(self._FRAMES)]
        self._tick += 1
        text = f"patchkit: {frame} {self._label} {elapsed:.0f}s"[: self._columns() - 1]  # a wrapped line stays
        self._write("\r" + text + (self._erase or "   "))
        self._drawn = True

    def _clear(self) -> None:
        if self._drawn:
            self._write("\r" + (self._erase or " " * (self._columns() - 1)) + "\r")
            self._drawn = False

    def _columns(self) -> int:
        try:
            columns = os.get_terminal_size(self._stream.fileno()).columns
        except (AttributeError, OSError, ValueError):
            columns = 0
        return max(20, columns) if columns else 80  # 0: the terminal does not say

    def _write(self, text: str) -> None:
        try:
            self._stream.write(text)
            self._stream.flush()
        except (BrokenPipeError, ValueError, OSError):
            self._stop.set()


def _delay() -> float:
    try:
        return float(os.environ.get("PATCHKIT_PROGRESS_DELAY", PROGRESS_DELAY))
    except ValueError:
        return PROGRESS_DELAY


@contextmanager
def progress() -> Iterator[TerminalProgress | None]:
    """A TerminalProgress when stderr is a terminal and not -q; None (no cost) otherwise."""
    stream = sys.stderr
    if settings().quiet or not _isatty(stream):
        yield None
        return
    reporter = TerminalProgress(stream, _delay())
    _active.append(reporter)
    try:
        yield reporter
    finally:
        _active.remove(reporter)
        reporter.close()


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
