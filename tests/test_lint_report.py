"""Formatting findings: text, JSON and GitHub workflow commands, escaping included."""

from __future__ import annotations

import json
from pathlib import Path

from patchkit.lint.findings import Finding, Rule, Severity
from patchkit.lint.report import OutputFormat, format_findings, summarise

AWKWARD = Finding(Rule.WAIVER_ORPHAN, Severity.ERROR, Path("docs/a,b:c.md"), 3, "50% done\nsecond line")
NO_LINE = Finding.of(Rule.WAIVER_BAD_NAME, Path("waivers/notes"), None, "move it")


def test_text() -> None:
    assert format_findings([AWKWARD, NO_LINE], OutputFormat.TEXT).splitlines() == [
        "docs/a,b:c.md:3: PK209 error: 50% done\\nsecond line",  # one finding, one line (issue 10, item 13)
        "waivers/notes: PK203 error: move it",
    ]


def test_github_escapes_properties_and_data() -> None:
    assert format_findings([AWKWARD, NO_LINE], OutputFormat.GITHUB).splitlines() == [
        "::error file=docs/a%2Cb%3Ac.md,line=3,title=PK209::50%25 done%0Asecond line",
        "::error file=waivers/notes,title=PK203::move it",
    ]


def test_github_warning() -> None:
    finding = Finding.of(Rule.PATCH_PENDING, Path("m.toml"), 1, "pending")
    assert format_findings([finding], OutputFormat.GITHUB) == "::warning file=m.toml,line=1,title=PK102::pending"


def test_json_round_trips() -> None:
    data = json.loads(format_findings([AWKWARD, NO_LINE], OutputFormat.JSON))
    assert data["findings"][1] == {
        "rule": "PK203", "severity": "error", "path": "waivers/notes", "line": None, "message": "move it"
    }
    assert (data["errors"], data["warnings"]) == (2, 0)


def test_empty() -> None:
    assert format_findings([], OutputFormat.TEXT) == ""
    assert json.loads(format_findings([], OutputFormat.JSON)) == {
        "schema_version": 1, "findings": [], "errors": 0, "warnings": 0}


def test_summary() -> None:
    assert summarise([], 1, 1) == "patchkit lint: clean (1 patch, 1 waiver checked)"
    assert summarise([AWKWARD, NO_LINE], 2, 3) == "patchkit lint: 2 errors, 0 warnings (2 patches, 3 waivers checked)"
