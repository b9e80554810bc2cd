"""Parse a waiver (markdown) into headed sections with line numbers, and name the topics they cover.

A waiver must say what is patched, why the unmodified upstream image cannot run, where the upstream PR or
issue is, and how the patch will be removed. Headings are matched leniently (case, punctuation, numbering and
common synonyms such as "Why", "Rationale", "Removal", "Exit plan") because people write waivers, not tools.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

# Every pattern here is linear in the line it reads (a fork's pull request writes the waivers): anchored, no
# nested or adjacent quantifiers over the same characters; what a backtracking regex would make quadratic (an
# ATX heading's closing hashes, placeholder lines, unclosed comments) is done with string methods instead.
# benchmarks/waiver_growth.py measures the growth.
_ATX_OPEN = re.compile(r" {0,3}(#{1,6})[ \t]+")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_NOT_PARAGRAPH = re.compile(r"^ {0,3}(?:[-*+>|]|\d+[.)]\s|#)")
_WORD = re.compile(r"\w+")
# Template leftovers that mean "not written yet": a section holding only these (between non-word characters)
# is empty. `n/a` is the two words n and a with at most a slash and spaces between them.
_PLACEHOLDER_WORDS = frozenset({"todo", "tbd", "tba", "fixme", "xxx", "none", "na"})
_N_A_GAP = re.compile(r"\s*/?\s*")


class Topic(Enum):
    """A section every waiver needs, with the heading words that count as naming it."""

    WHAT = (
        "what is patched",
        r"\bwhat\b|\b(?:patched|scope|changes?|summary|description|contents?|patch|patches|modifications?"
        r"|affected|details|overview)\b",
    )
    WHY = (
        "why the unmodified upstream image cannot run",
        r"\bwhy\b|\b(?:rationale|reasons?|justification|motivation|problem|necessity|needed)\b"
        r"|\bcan\s*not run\b|\bcan t run\b",
    )
    LINK = (
        "upstream PR/issue link",
        r"\b(?:links?|references?|urls?|tracking)\b"
        r"|\bupstream\s+(?:prs?|pull\s+requests?|issues?|fix|change|status|state|tracking)\b"
        r"|\b(?:status|upstreaming)\b"
        r"|^(?:upstream|prs?|pull\s+requests?|issues?)$",
    )
    REMOVAL = (
        "removal plan",
        r"\b(?:remov\w*|exit|sunset\w*|drop\w*|retir\w*|expir\w*|revert\w*|unpatch\w*|deprecat\w*)\b",
    )

    def __init__(self, label: str, pattern: str) -> None:
        self.label = label
        self.pattern = re.compile(pattern)


@dataclass(frozen=True)
class Heading:
    text: str
    level: int
    line: int  # 1-based


@dataclass(frozen=True)
class Section:
    """A heading and everything under it up to the next heading of the same or a higher level."""

    heading: Heading
    content: tuple[str, ...]  # the body's meaningful lines: no sub-headings, comments or placeholders

    @property
    def topics(self) -> frozenset[Topic]:
        return topics_of(self.heading.text)

    @property
    def is_empty(self) -> bool:
        return not self.content


@dataclass(frozen=True)
class WaiverDoc:
    text: str
    title: Heading | None  # the document's single top heading, which names no topic
    sections: tuple[Section, ...]

    def section_for(self, topic: Topic) -> Section | None:
        """The section covering `topic`, preferring one with content; None when no heading names it."""
        matching = [s for s in self.sections if topic in s.topics]
        return next((s for s in matching if not s.is_empty), matching[0] if matching else None)


def topics_of(heading: str) -> frozenset[Topic]:
    """Topics a heading names. A removal heading names only removal ("What is the removal plan?"); the
    others combine ("What is patched and why")."""
    words = _normalise(heading)
    if Topic.REMOVAL.pattern.search(words):
        return frozenset({Topic.REMOVAL})
    return frozenset(t for t in (Topic.WHAT, Topic.WHY, Topic.LINK) if t.pattern.search(words))


def parse_waiver(text: str) -> WaiverDoc:
    lines = text.splitlines()
    headings, heading_lines = _find_headings(lines)
    title = None
    if headings and headings[0].level == 1 and sum(h.level == 1 for h in headings) == 1 and len(headings) > 1:
        title = headings[0]
    ends = _section_ends(headings, len(lines) + 1)
    sections = []
    for heading, end in zip(headings, ends, strict=True):
        if heading is title:
            continue
        body_numbers = [n for n in range(heading.line + 1, end) if n not in heading_lines]
        sections.append(Section(heading, _content([lines[n - 1] for n in body_numbers])))
    return WaiverDoc(text, title, tuple(sections))


def _section_ends(headings: list[Heading], last: int) -> list[int]:
    """For each heading, the line of the next heading of the same or a higher level (`last` if none): one pass
    with a stack of open headings, each closed once."""
    ends = [last] * len(headings)
    open_headings: list[int] = []
    for index, heading in enumerate(headings):
        while open_headings and headings[open_headings[-1]].level >= heading.level:
            ends[open_headings.pop()] = heading.line
        open_headings.append(index)
    return ends


def _find_headings(lines: list[str]) -> tuple[list[Heading], set[int]]:
    """Headings outside fenced code, and every line that belongs to one (a setext underline too)."""
    headings: list[Heading] = []
    taken: set[int] = set()
    fence: str | None = None
    for number, line in enumerate(lines, 1):
        opening = _FENCE.match(line)
        if fence is not None:
            if opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence):
                fence = None
            continue
        if opening:
            fence = opening.group(1)
            continue
        atx = _atx_heading(line)
        if atx is not None:
            headings.append(Heading(atx[1], atx[0], number))
            taken.add(number)
            continue
        underline = _SETEXT.match(line)
        previous = lines[number - 2] if number > 1 else ""
        if (
            underline
            and previous.strip()
            and number - 1 not in taken
            and not _NOT_PARAGRAPH.match(previous)
            and not (number > 2 and lines[number - 3].strip() and number - 2 not in taken)
        ):
            headings.append(Heading(previous.strip(), 1 if underline.group(1)[0] == "=" else 2, number - 1))
            taken.update((number - 1, number))
    return headings, taken


def _atx_heading(line: str) -> tuple[int, str] | None:
    """(level, text) of an ATX heading (`## Why`, closing hashes dropped), None for any other line."""
    opening = _ATX_OPEN.match(line)
    if opening is None:
        return None
    rest = line[opening.end() :].rstrip(" \t")
    unclosed = rest.rstrip("#")
    if unclosed != rest and unclosed.endswith((" ", "\t")):
        rest = unclosed  # the closing sequence: hashes after a space
    return len(opening.group(1)), rest.strip()


def _content(body: list[str]) -> tuple[str, ...]:
    text = _strip_comments("\n".join(body))
    return tuple(line.strip() for line in text.splitlines() if not is_placeholder(line))


def _strip_comments(text: str) -> str:
    """`text` without its `<!-- ... -->` comments (an unclosed one stays, as a regex would leave it)."""
    out = []
    start = 0
    while (opening := text.find("<!--", start)) != -1:
        closing = text.find("-->", opening + 4)
        if closing == -1:
            break  # no comment closes after this one, nor after any later opening
        out.append(text[start:opening])
        start = closing + 3
    out.append(text[start:])
    return "".join(out)


def is_placeholder(line: str) -> bool:
    """A template leftover: only non-word characters around at most one placeholder word (todo, tbd, tba,
    fixme, xxx, none, n/a), case-insensitive."""
    words = list(_WORD.finditer(line))
    if not words:
        return True
    if len(words) == 1:
        return words[0].group().lower() in _PLACEHOLDER_WORDS
    if len(words) == 2 and (words[0].group().lower(), words[1].group().lower()) == ("n", "a"):
        return _N_A_GAP.fullmatch(line, words[0].end(), words[1].start()) is not None
    return False


def _normalise(heading: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9]+", " ", heading.lower()).split())
