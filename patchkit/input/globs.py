"""Exclude globs: parsed once, matched without backtracking, in time proportional to pattern x path.

Syntax (documented in the README, "The manifest"): `*` is any run of characters within one component, `**` any
run across components, `**/` zero or more whole folders, `?` one character, `[abc]` / `[a-z]` / `[!abc]` one
character of (or not of) a set; `?` and classes never match `/`. A `]` right after `[` or `[!` is a member.
Everything else is literal. An invalid class is an error (`parse_glob` raises ManifestError), never a guess.

A pattern without a wildcard is a path, matched exactly or as a folder prefix by comparing strings; a real glob
is compiled (once per pattern) into the automaton of patchkit.input.glob_automaton, which matches it in linear time.
"""

from __future__ import annotations

import functools

from patchkit.input.glob_automaton import Glob, compile_glob

WILDCARDS = "*?["


def is_glob(pattern: str) -> bool:
    return any(c in pattern for c in WILDCARDS)


@functools.lru_cache(maxsize=512)
def parse_glob(pattern: str) -> Glob:
    """The compiled pattern, or ManifestError saying what is wrong with it (the caller adds the line)."""

    return compile_glob(pattern)


def match_glob(pattern: str, path: str) -> bool:
    """A pattern matches a path exactly, as a folder prefix, or as a glob."""
    if not is_glob(pattern):
        stem = pattern.rstrip("/")
        return path == stem or path.startswith(stem + "/")
    return parse_glob(pattern).matches(path)
