"""How names and messages are shown to people: the one place that escapes what could forge a line.

A file name may hold a newline, a carriage return, an ANSI escape sequence or a bidi override (git quotes such
names in a diff; patchkit accepts them, as git does). Printed raw, one could forge a line of a report, an error
or a lint finding. `show_path` is used wherever a path is printed for people, `escape_controls` on whole
messages (the CLI's error boundary, lint's text lines). JSON output keeps the real strings (JSON escapes them).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

_C_ESCAPES = {"\a": "\\a", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\v": "\\v", "\f": "\\f", "\r": "\\r"}


def show_path(path: str) -> str:
    """`path` as printed to people: as is when every character is printable, else C-quoted as git quotes it.

    Control characters become `\\n`, `\\t` or octal escapes of their UTF-8 bytes (as do other unprintable code
    points: bidi overrides, line separators, zero-width characters), so a name cannot start a new line, move
    the cursor or reorder what is shown. Non-ASCII letters stay readable.
    """
    if path.isprintable() and '"' not in path and "\\" not in path:
        return path
    return '"' + "".join(_escape(c, quoting=True) for c in path) + '"'


def escape_controls(text: str) -> str:
    """A message with every unprintable character escaped (newlines included): safe to print as one line.

    Idempotent, and printable text (backslashes included) is left alone, so already escaped parts survive.
    """
    if text.isprintable():
        return text
    return "".join(_escape(c, quoting=False) for c in text)


def shown_label(text: str, limit: int = 200) -> str:
    """A short name read back from patchkit's own state (a journal's label), as printed in one message line: its
    unprintable characters escaped, and cut to `limit` characters with "..." (a damaged file may hold megabytes)."""
    text = escape_controls(text)
    return text if len(text) <= limit else text[:limit] + "..."


def _escape(c: str, *, quoting: bool) -> str:
    if c.isprintable():
        return "\\" + c if quoting and c in '"\\' else c
    if c in _C_ESCAPES:
        return _C_ESCAPES[c]
    try:
        raw = c.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate that is not an escaped byte
        raw = c.encode("utf-8", "surrogatepass")
    return "".join(f"\\{b:03o}" for b in raw)


def closest(word: str, choices: Sequence[str]) -> str | None:
    """The choice `word` most likely misspells (difflib, cutoff 0.6), for a "did you mean" hint; None if none."""

    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return close[0] if close else None
