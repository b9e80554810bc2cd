"""The command lines patchkit answers before click loads (cli/start.py offers them to cli/restart.py, an
`apply`, and cli/patch_run.py, a `status`): `COMMAND ID|--all [--root DIR] [--patches DIR] [-q] [-v] [--json]`,
each at most once. Anything else, and any environment click or the full CLI would read differently, is the full
CLI's: the entries return None and it runs from the start.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import NamedTuple

from patchkit.run.fastpath import DISABLE_ENV

MANIFEST = "manifest.toml"
# Any of these set: the full CLI decides (it reads them); the fast answer would not mean the same. Tests force the
# full CLI with PATCHKIT_NO_FASTPATH, which the full path honours too (its judgement, not the records, answers).
FULL_ENV = (DISABLE_ENV, "PATCHKIT_DEBUG_FASTPATH", "PATCHKIT_TARGET", "PATCHKIT_ROOT_FROM_PACKAGE",
            "PATCHKIT_PYTHON", "FORCE_COLOR", "CLICOLOR_FORCE", "_PATCHKIT_COMPLETE")
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", re.ASCII)  # a plain patch id, never a path


class Request(NamedTuple):
    """What the command line asks, in the one shape the entries answer."""

    patch: str | None  # None: --all
    root: str
    patches: str | None  # None: not given (the registry's defaults)
    quiet: bool
    as_json: bool
    verbose: bool = False


def parse_request(argv: Sequence[str], command: str) -> Request | None:
    """`COMMAND ID|--all [--root DIR] [--patches DIR] [-q|-v] [--json]`, each at most once; None for anything
    else (another command, an option it does not know, a value that looks like an option, -q with -v)."""
    if not argv or argv[0] != command:
        return None
    values: dict[str, str] = {}
    flags: set[str] = set()
    positional: list[str] = []
    words = list(argv[1:])
    while words:
        word = words.pop(0)
        name, eq, value = word.partition("=")
        if name in ("--root", "--patches"):
            if not eq:
                if not words:
                    return None
                value = words.pop(0)
            if name in values or not value or value.startswith("-"):
                return None
            values[name] = value
        elif word in ("--all", "-q", "--quiet", "-v", "--verbose", "--json"):
            key = {"--quiet": "-q", "--verbose": "-v"}.get(word, word)
            if key in flags:
                return None
            flags.add(key)
        elif word.startswith("-") or positional:
            return None
        else:
            positional.append(word)
    patch = positional[0] if positional else None
    if (patch is None) != ("--all" in flags) or (patch is not None and not is_id(patch)):
        return None
    if {"-q", "-v"} <= flags:
        return None  # a usage error: the full CLI says it
    root = values.get("--root") or os.environ.get("PATCHKIT_ROOT")
    if not root:
        return None
    patches = values.get("--patches") or os.environ.get("PATCHKIT_PATCHES") or None
    return Request(patch, root, patches, "-q" in flags, "--json" in flags, "-v" in flags)


def is_id(text: str) -> bool:
    return _ID.fullmatch(text) is not None and text != MANIFEST


def full_cli_decides() -> bool:
    """An environment of FULL_ENV, or a terminal on either stream (click may colour, a progress line may be
    drawn): the full CLI answers."""
    if any(name in os.environ for name in FULL_ENV):
        return True
    try:
        return os.isatty(1) or os.isatty(2)
    except OSError:
        return True
