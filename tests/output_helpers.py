"""Running the real CLI as a process: on a pseudo-terminal (colour, progress), into a closed pipe, for completion."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str


def cli_env(**extra: str) -> dict[str, str]:
    """The environment of a user's shell minus anything that sets colour, plus the repository on the path."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("NO_COLOR", "FORCE_COLOR", "CLICOLOR_FORCE", "TERM") and not k.startswith("PATCHKIT_")}
    env.update({"PYTHONPATH": str(REPO), "TERM": "xterm-256color", **extra})
    return env


def command(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "patchkit", *(str(a) for a in args)]


def run_on_tty(args: list[str], env: Mapping[str, str], *, stdout_tty: bool = True, stderr_tty: bool = True,
               timeout: float = 60, columns: int = 0,
               on_err: Callable[[str, subprocess.Popen[bytes]], None] | None = None) -> Run:
    """Run with stdout and/or stderr on pseudo-terminals of their own (a pipe otherwise); read both to the end.
    `on_err` sees stderr so far (and the process) after every chunk, to act when a line appears; `columns`
    sets the terminals' width (0: the terminal does not say)."""
    masters: dict[str, int] = {}
    slaves: dict[str, int] = {}
    for name, wanted in (("out", stdout_tty), ("err", stderr_tty)):
        if wanted:
            masters[name], slaves[name] = pty.openpty()
            if columns:
                fcntl.ioctl(slaves[name], termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    proc = subprocess.Popen(
        args, env=dict(env), cwd=REPO, stdin=subprocess.DEVNULL,
        stdout=slaves.get("out", subprocess.PIPE), stderr=slaves.get("err", subprocess.PIPE),
    )
    for fd in slaves.values():
        os.close(fd)
    readers = dict(masters)
    if proc.stdout is not None:
        readers["out"] = proc.stdout.fileno()
    if proc.stderr is not None:
        readers["err"] = proc.stderr.fileno()
    chunks: dict[str, bytearray] = {"out": bytearray(), "err": bytearray()}
    open_fds = {fd: name for name, fd in readers.items()}
    while open_fds:
        ready, _, _ = select.select(list(open_fds), [], [], timeout)
        if not ready:
            proc.kill()
            raise AssertionError(f"{args} produced nothing for {timeout}s")
        for fd in ready:
            try:
                data = os.read(fd, 65536)
            except OSError:  # EIO: the pty's other side is closed
                data = b""
            if data:
                chunks[open_fds[fd]] += data
                if on_err is not None and open_fds[fd] == "err":
                    on_err(chunks["err"].decode(errors="replace"), proc)
            else:
                del open_fds[fd]
    code = proc.wait(timeout)
    for fd in masters.values():
        os.close(fd)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    # A terminal turns \n into \r\n: undo that, so texts compare as they were written.
    return Run(code, chunks["out"].decode().replace("\r\n", "\n"), chunks["err"].decode().replace("\r\n", "\n"))


def run_into_closed_pipe(args: list[str], env: Mapping[str, str]) -> Run:
    """stdout is a pipe whose reader is already gone (as after `| head -2`): every write hits EPIPE."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(args, env=dict(env), cwd=REPO, stdout=write_end, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, check=False, timeout=60)
    finally:
        os.close(write_end)
    return Run(done.returncode, "", done.stderr.decode())


def run_plain(args: list[str], env: Mapping[str, str]) -> Run:
    done = subprocess.run(args, env=dict(env), cwd=REPO, capture_output=True, check=False, timeout=60,
                          stdin=subprocess.DEVNULL)
    return Run(done.returncode, done.stdout.decode(), done.stderr.decode())
