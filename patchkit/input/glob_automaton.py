"""The automaton of an exclude glob (syntax: patchkit.input.globs): its tokens, the parser that builds them from a
pattern, and the simulation that matches a path without backtracking.

Matching simulates the pattern's automaton over the path one character at a time (the set of pattern positions
still alive), so no input can make it backtrack: a run of stars is one token, the states alive at once are at
most twice the wildcards plus one, and wildcards are bounded (patchkit.input.limits), so the worst pattern against a
PATH_MAX path costs a small fraction of a second. Loaded by globs.parse_glob for the first real glob only.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from patchkit.display import show_path
from patchkit.errors import ManifestError
from patchkit.input.limits import MAX_GLOB_CHARS, MAX_GLOB_WILDCARDS


class _Kind(Enum):
    LITERAL = "literal"  # one given character
    ONE = "one"  # `?`: any character but /
    CLASS = "class"  # `[...]`: a character of the set (or not of it), never /
    STAR = "star"  # `*`: any run without /
    ANY = "any"  # `**`: any run
    FOLDERS = "folders"  # `**/`: nothing, or any run ending in /


_SKIPPABLE = (_Kind.STAR, _Kind.ANY, _Kind.FOLDERS)  # tokens that may match nothing


@dataclass(frozen=True)
class _Class:
    """A `[...]` class: its characters and ranges, or (negated) everything but them."""

    negated: bool
    chars: frozenset[str]
    ranges: tuple[tuple[str, str], ...]

    def matches(self, c: str) -> bool:
        inside = c in self.chars or any(lo <= c <= hi for lo, hi in self.ranges)
        return inside != self.negated


@dataclass(frozen=True)
class _Token:
    """One element of a parsed pattern: a literal character, a wildcard, or a class."""

    kind: _Kind
    char: str = ""
    members: _Class | None = None


@dataclass(frozen=True)
class Glob:
    """A parsed exclude pattern, matched by simulating its automaton (see the module doc)."""

    pattern: str
    tokens: tuple[_Token, ...]

    def matches(self, path: str) -> bool:
        """Whether the whole of `path` matches."""
        tokens = self.tokens
        end = len(tokens)
        # A state is a token position i: "before token i". Inside a `**/` (some of its run consumed, so it can
        # no longer match nothing) the state is ~i.
        alive = self._close({0})
        for c in path:
            nxt: set[int] = set()
            for i in alive:
                if i < 0:  # inside the `**/` at ~i
                    nxt.add(i)
                    if c == "/":
                        nxt.add(~i + 1)
                    continue
                if i == end:
                    continue
                token = tokens[i]
                kind = token.kind
                if kind is _Kind.LITERAL:
                    if c == token.char:
                        nxt.add(i + 1)
                elif kind is _Kind.STAR:
                    if c != "/":
                        nxt.add(i)
                elif kind is _Kind.ANY:
                    nxt.add(i)
                elif kind is _Kind.FOLDERS:
                    nxt.add(~i)
                    if c == "/":
                        nxt.add(i + 1)
                elif c != "/" and (kind is _Kind.ONE or (token.members is not None and token.members.matches(c))):
                    nxt.add(i + 1)
            if not nxt:
                return False
            alive = self._close(nxt)
        return end in alive

    def _close(self, states: set[int]) -> set[int]:
        """`states` plus every position reachable by letting tokens that may match nothing match nothing."""
        out: set[int] = set()
        end = len(self.tokens)
        for i in states:
            while i not in out:  # each position is added once: linear in the pattern
                out.add(i)
                if i < 0 or i == end or self.tokens[i].kind not in _SKIPPABLE:
                    break
                i += 1
        return out


def compile_glob(pattern: str) -> Glob:
    """The compiled pattern, or ManifestError saying what is wrong with it (the caller adds the line)."""
    if len(pattern) > MAX_GLOB_CHARS:
        raise ManifestError(f"exclude pattern of {len(pattern)} characters, over the limit of {MAX_GLOB_CHARS}")
    tokens: list[_Token] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            _push(tokens, _Token(_Kind.FOLDERS))
            i += 3
        elif pattern.startswith("**", i):
            _push(tokens, _Token(_Kind.ANY))
            i += 2
        elif pattern[i] == "*":
            _push(tokens, _Token(_Kind.STAR))
            i += 1
        elif pattern[i] == "?":
            tokens.append(_Token(_Kind.ONE))
            i += 1
        elif pattern[i] == "[":
            members, i = _parse_class(pattern, i)
            tokens.append(_Token(_Kind.CLASS, members=members))
        else:
            tokens.append(_Token(_Kind.LITERAL, char=pattern[i]))
            i += 1
    wildcards = sum(t.kind is not _Kind.LITERAL for t in tokens)
    if wildcards > MAX_GLOB_WILDCARDS:
        raise ManifestError(
            f"exclude {show_path(pattern[:80])}... has {wildcards} wildcards, over the limit of {MAX_GLOB_WILDCARDS}",
            hint="list the files, or exclude their folder",
        )
    return Glob(pattern, tuple(tokens))


def _push(tokens: list[_Token], token: _Token) -> None:
    """Append a wildcard, merging it with a wildcard before it when the pair means the same as one of them."""
    if tokens and tokens[-1].kind in _SKIPPABLE:
        pair = (tokens[-1].kind, token.kind)
        merged = {
            (_Kind.STAR, _Kind.STAR): _Kind.STAR,
            (_Kind.ANY, _Kind.STAR): _Kind.ANY,
            (_Kind.STAR, _Kind.ANY): _Kind.ANY,
            (_Kind.ANY, _Kind.ANY): _Kind.ANY,
            (_Kind.ANY, _Kind.FOLDERS): _Kind.ANY,
            (_Kind.FOLDERS, _Kind.ANY): _Kind.ANY,
            (_Kind.FOLDERS, _Kind.FOLDERS): _Kind.FOLDERS,
        }.get(pair)
        if merged is not None:
            tokens[-1] = _Token(merged)
            return
    tokens.append(token)


def _parse_class(pattern: str, start: int) -> tuple[_Class, int]:
    """Parse the class opening at `start`; (the class, index after its `]`)."""
    i = start + 1
    negated = pattern[i:i + 1] in ("!", "^")
    i += negated
    chars: set[str] = set()
    ranges: list[tuple[str, str]] = []
    first = True
    while i < len(pattern):
        c = pattern[i]
        if c == "]" and not first:
            return _Class(negated, frozenset(chars), tuple(ranges)), i + 1
        if c == "/":
            raise ManifestError(
                f"exclude {show_path(pattern)}: the [...] class at character {start + 1} contains /, "
                "which it never matches",
                hint="a class matches one character of a name; split the pattern at the / instead",
            )
        if pattern[i + 1:i + 2] == "-" and i + 2 < len(pattern) and pattern[i + 2] != "]":
            low, high = c, pattern[i + 2]
            if low > high:
                raise ManifestError(
                    f"exclude {show_path(pattern)}: the range {low}-{high} in the [...] class at character {start + 1} "
                    "is reversed",
                    hint=f"write it as {high}-{low}",
                )
            ranges.append((low, high))
            i += 3
        else:
            chars.add(c)
            i += 1
        first = False
    raise ManifestError(
        f"exclude {show_path(pattern)}: the [...] class at character {start + 1} is not closed",
        hint="close it with ], or write [[] to match a literal [",
    )
