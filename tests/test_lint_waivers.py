"""Waiver parsing: headings with line numbers, sections, topics matched leniently, emptiness."""

from __future__ import annotations

import pytest

from patchkit.lint.waivers import Topic, parse_waiver, topics_of

FULL = """\
# Waiver 2816: engine-pr2106

Filed by the pull request that introduces the patch.

## What is patched
The draft KV pool layout.

### Files left out
`engine/spec/proposer.py`

## Why the unmodified upstream image cannot run
It crashes at start-up.

## Upstream PR
example-org/engine#2106

## Removal plan
Delete it when the image is bumped.
"""


def test_sections_keep_their_heading_lines() -> None:
    doc = parse_waiver(FULL)
    assert doc.title is not None and (doc.title.text, doc.title.line) == ("Waiver 2816: engine-pr2106", 1)
    assert [(s.heading.text, s.heading.level, s.heading.line) for s in doc.sections] == [
        ("What is patched", 2, 5),
        ("Files left out", 3, 8),
        ("Why the unmodified upstream image cannot run", 2, 11),
        ("Upstream PR", 2, 14),
        ("Removal plan", 2, 17),
    ]
    for topic, line in ((Topic.WHAT, 5), (Topic.WHY, 11), (Topic.LINK, 14), (Topic.REMOVAL, 17)):
        section = doc.section_for(topic)
        assert section is not None and section.heading.line == line and not section.is_empty


def test_a_section_includes_its_subsections() -> None:
    doc = parse_waiver("# T\n\n## What is patched\n### Details\nthe pool\n## Why\nbecause\n")
    what = doc.section_for(Topic.WHAT)
    assert what is not None and what.content == ("the pool",)


@pytest.mark.parametrize(
    ("heading", "topics"),
    [
        ("What is patched", {Topic.WHAT}),
        ("1. Scope:", {Topic.WHAT}),
        ("WHY", {Topic.WHY}),
        ("Rationale", {Topic.WHY}),
        ("Why the unmodified upstream image cannot run", {Topic.WHY}),
        ("What is patched, and why?", {Topic.WHAT, Topic.WHY}),
        ("Upstream PR/issue link", {Topic.LINK}),
        ("Upstream", {Topic.LINK}),
        ("References", {Topic.LINK}),
        ("Removal plan", {Topic.REMOVAL}),
        ("Exit plan", {Topic.REMOVAL}),
        ("What is the removal plan?", {Topic.REMOVAL}),
        ("When to remove it", {Topic.REMOVAL}),
        ("Testing", set()),
    ],
)
def test_heading_topics(heading: str, topics: set[Topic]) -> None:
    assert topics_of(heading) == topics


def test_setext_headings() -> None:
    doc = parse_waiver("Title\n=====\n\nWhy\n---\nbecause\n\nRemoval\n-------\nlater\n")
    assert doc.title is not None and doc.title.text == "Title"
    assert [(s.heading.text, s.heading.line) for s in doc.sections] == [("Why", 4), ("Removal", 8)]


def test_a_thematic_break_after_a_blank_line_is_not_a_heading() -> None:
    doc = parse_waiver("# Why\nbecause\n\n---\n\nmore\n")
    assert [s.heading.text for s in doc.sections] == ["Why"]


def test_headings_in_code_fences_are_ignored() -> None:
    doc = parse_waiver("# Why\n```md\n## Removal plan\n```\n~~~\n# Upstream\n~~~\n")
    assert [s.heading.text for s in doc.sections] == ["Why"]
    assert doc.section_for(Topic.REMOVAL) is None


@pytest.mark.parametrize("body", ["", "<!-- say why -->", "TODO", "- TBD", "N/A", "...", "<!--\nmulti\n-->\n"])
def test_placeholders_and_comments_leave_a_section_empty(body: str) -> None:
    section = parse_waiver(f"## Why\n{body}\n").section_for(Topic.WHY)
    assert section is not None and section.is_empty


def test_a_filled_section_is_preferred_over_an_empty_duplicate() -> None:
    doc = parse_waiver("## Why\n\n## Why (details)\nthe kernel rejects it\n")
    section = doc.section_for(Topic.WHY)
    assert section is not None and section.heading.line == 3


def test_several_top_headings_are_all_sections() -> None:
    doc = parse_waiver("# What\nx\n# Why\ny\n")
    assert doc.title is None
    assert [s.heading.text for s in doc.sections] == ["What", "Why"]
