"""Exclude globs: the same answers as a regex translation of the documented syntax, errors for invalid classes,
and no input that makes matching backtrack (the patterns that hung the regex matcher are answered here)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from patchkit.errors import ManifestError
from patchkit.input.globs import match_glob, parse_glob


def reference(pattern: str) -> re.Pattern[str]:
    """The documented syntax as a regex (exponential on hostile input; fine for the short patterns below)."""
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[":
            start = i + 1 + (pattern[i + 1:i + 2] in ("!", "^"))
            end = pattern.index("]", start + 1)  # a ] right after [ or [! is a member
            body = "".join("\\" + c if c in "\\]^[" else c for c in pattern[start:end])
            out.append("(?!/)[" + ("^" if start > i + 1 else "") + body + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out), re.DOTALL)


PIECES = ["a", "b", ".", "/", "*", "**", "**/", "?", "[ab]", "[!a]", "[a-c]", "[]a]", "[!]]", "]", "-"]


@settings(max_examples=400, derandomize=True, database=None, deadline=None)
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=7).map("".join),
       st.text(alphabet="ab/.c]-", max_size=10))
def test_the_matcher_agrees_with_the_documented_syntax(pattern: str, path: str) -> None:
    expected = reference(pattern).fullmatch(path) is not None
    if not any(c in pattern for c in "*?["):
        expected = path == pattern.rstrip("/") or path.startswith(pattern.rstrip("/") + "/")
    assert match_glob(pattern, path) == expected


@pytest.mark.parametrize(("pattern", "path", "expected"), [
    ("engine/**/x.py", "engine/x.py", True), ("engine/**/x.py", "engine/a/b/x.py", True),
    ("engine/**/x.py", "engine/ax.py", False), ("engine/*.py", "engine/a/b.py", False),
    ("engine/**", "engine/a/b.py", True), ("engine/?.py", "engine//.py", False),
    ("engine/[!a].py", "engine/b.py", True),
    ("engine/[!a]x", "engine//x", False), ("**/", "baa", False), ("[]]", "]", True), ("[a-]", "-", True),
])
def test_examples(pattern: str, path: str, expected: bool) -> None:
    assert match_glob(pattern, path) is expected


@pytest.mark.parametrize(("pattern", "message"), [
    ("engine/[z-a].py", "range z-a"), ("engine/[abc", "not closed"), ("[]", "not closed"), ("[!]", "not closed"),
    ("engine[/]x", "contains /"), ("*a" * 65, "over the limit of 64"), ("x" * 4097, "over the limit of 4096"),
])
def test_invalid_patterns_are_errors(pattern: str, message: str) -> None:
    with pytest.raises(ManifestError, match=re.escape(message)):
        parse_glob(pattern)


@pytest.mark.parametrize(("pattern", "path", "expected"), [
    ("*" * 1000 + "x", "a" * 4000, False), ("*" * 1000, "a/" * 2000, True),  # two or more stars: `**`
    ("**/" * 1000 + "x", "a/" * 2000 + "x", True), ("**/" * 1000 + "x", "a/" * 2000 + "y", False),
    ("a*" * 32 + "b", "a" * 4000, False), ("a*" * 32 + "b", "a" * 4000 + "b", True),
    ("*?" * 32 + "!", "a" * 4000, False), ("a*" * 32 + "b", "a" * 2000 + "/b", False),
])
def test_patterns_that_made_the_regex_backtrack_are_answered(pattern: str, path: str, expected: bool) -> None:
    """The regex matcher never finished most of these (17 s at 400 stars); here a run of stars is one state."""
    assert match_glob(pattern, path) is expected
