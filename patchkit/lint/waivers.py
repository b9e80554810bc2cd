"""Parse a waiver (markdown) into headed sections with line numbers, and name the topics they cover.

A waiver must say what is patched, why the unmodified upstream image cannot run, where the upstream PR or
issue is, and how the patch will be removed. Headings are matched leniently (case, punctuation, numbering and
common synonyms such as "Why", "Rationale", "Removal", "Exit plan") because people write waivers, not tools.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_NOT_PARAGRAPH = re.compile(r"^ {0,3}(?:[-*+>|]|\d+[.)]\s|#)")
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
# Template leftovers that mean "not written yet": a section holding only these is empty.
_PLACEHOLDER = re.compile(r"^\W*(?:todo|tbd|tba|fixme|xxx|n\s*/?\s*a|none|\.\.\.|…)?\W*$", re.IGNORECASE)


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
    sections = []
    for index, heading in enumerate(headings):
        if heading is title:
            continue
        end = next((h.line for h in headings[index + 1 :] if h.level <= heading.level), len(lines) + 1)
        body_numbers = [n for n in range(heading.line + 1, end) if n not in heading_lines]
        sections.append(Section(heading, _content([lines[n - 1] for n in body_numbers])))
    return WaiverDoc(text, title, tuple(sections))


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
        atx = _ATX.match(line)
        if atx:
            headings.append(Heading(atx.group(2).strip(), len(atx.group(1)), number))
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


def _content(body: list[str]) -> tuple[str, ...]:
    text = _HTML_COMMENT.sub("", "\n".join(body))
    return tuple(line.strip() for line in text.splitlines() if not _PLACEHOLDER.match(line))


def _normalise(heading: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9]+", " ", heading.lower()).split())
