"""Findings as text, JSON or GitHub workflow commands. Formats only; decides nothing."""

from __future__ import annotations

import json
from collections.abc import Iterable
from enum import Enum

from patchkit.lint.findings import Finding, Severity


class OutputFormat(Enum):
    TEXT = "text"  # file:line: RULE severity: message
    JSON = "json"
    GITHUB = "github"  # ::error file=...,line=...,title=RULE::message annotations


def format_findings(findings: Iterable[Finding], output_format: OutputFormat) -> str:
    """The findings in `output_format`, one per line (JSON: one document); '' for none in line formats."""
    items = list(findings)
    if output_format is OutputFormat.JSON:
        return json.dumps(
            {
                "findings": [_as_json(f) for f in items],
                "errors": sum(f.severity is Severity.ERROR for f in items),
                "warnings": sum(f.severity is Severity.WARNING for f in items),
            },
            indent=2,
        )
    line_of = _github_line if output_format is OutputFormat.GITHUB else _text_line
    return "\n".join(line_of(f) for f in items)


def summarise(findings: Iterable[Finding], patches: int, waivers: int) -> str:
    items = list(findings)
    errors = sum(f.severity is Severity.ERROR for f in items)
    warnings = len(items) - errors
    checked = f"{_count(patches, 'patch', 'patches')}, {_count(waivers, 'waiver', 'waivers')} checked"
    if not items:
        return f"patchkit lint: clean ({checked})"
    counts = f"{_count(errors, 'error', 'errors')}, {_count(warnings, 'warning', 'warnings')}"
    return f"patchkit lint: {counts} ({checked})"


def _text_line(finding: Finding) -> str:
    return f"{_place(finding)}: {finding.rule.code} {finding.severity.value}: {finding.message}"


def _github_line(finding: Finding) -> str:
    # https://docs.github.com/actions/reference/workflow-commands-for-github-actions
    properties = [f"file={_escape_property(finding.path.as_posix())}"]
    if finding.line is not None:
        properties.append(f"line={finding.line}")
    properties.append(f"title={_escape_property(finding.rule.code)}")
    return f"::{finding.severity.value} {','.join(properties)}::{_escape_data(finding.message)}"


def _as_json(finding: Finding) -> dict[str, object]:
    return {
        "rule": finding.rule.code,
        "severity": finding.severity.value,
        "path": finding.path.as_posix(),
        "line": finding.line,
        "message": finding.message,
    }


def _place(finding: Finding) -> str:
    path = finding.path.as_posix()
    return f"{path}:{finding.line}" if finding.line is not None else path


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _count(number: int, one: str, many: str) -> str:
    return f"{number} {one if number == 1 else many}"
