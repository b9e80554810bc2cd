"""Findings as text, JSON or GitHub workflow commands. Formats only; decides nothing."""

from __future__ import annotations

import json
from collections.abc import Iterable
from enum import Enum

from patchkit.display import escape_controls
from patchkit.lint import LintReport
from patchkit.lint.coverage import Cover
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
                "schema_version": 1,  # docs/schema/patchkit.schema.json, $defs/lint
                "findings": [_as_json(f) for f in items],
                "errors": sum(f.severity is Severity.ERROR for f in items),
                "warnings": sum(f.severity is Severity.WARNING for f in items),
            },
            indent=2,
        )
    line_of = _github_line if output_format is OutputFormat.GITHUB else _text_line
    return "\n".join(line_of(f) for f in items)


def format_report(report: LintReport, output_format: OutputFormat) -> str:
    """The report: findings in line formats; in JSON also the verdict a CI scheduler reads directly:
    `patches_engine` (the repository changes the engine or serving stack: a registry patch or a patch site),
    `change_patches_engine` (history mode: this change adds or changes a patch site or touches the registry;
    null without --base),
    and `sites`, where each site is and what covers it."""
    if output_format is not OutputFormat.JSON:
        return format_findings(report.findings, output_format)
    items = list(report.findings)
    errors = sum(f.severity is Severity.ERROR for f in items)
    new = report.new_sites
    document = {
        "schema_version": 1,  # docs/schema/patchkit.schema.json, $defs/lint
        "passed": errors == 0,
        "patches_engine": bool(report.sites) or report.patch_count > 0,
        "change_patches_engine": None if report.registry_changed is None else bool(new) or report.registry_changed,
        "registry_patches": report.patch_count,
        "files_scanned": report.files_scanned,
        "sites": [
            {
                "path": (report.site_root / c.site.path).as_posix(),
                "line": c.site.line,
                "kind": c.site.kind.label,
                "rule": c.site.kind.code,
                "engine_path": c.site.engine_path,
                "reason": c.site.reason,
                "command": c.site.command,
                "fingerprint": c.site.fingerprint,
                "covered_by": None if c.cover is Cover.NONE else {"kind": c.cover.value, "by": c.by},
                "new": None if new is None else c.site.fingerprint in new,
            }
            for c in report.sites
        ],
        "findings": [_as_json(f) for f in items],
        "errors": errors,
        "warnings": len(items) - errors,
    }
    return json.dumps(document, indent=2, ensure_ascii=False)


def summarise(
    findings: Iterable[Finding], patches: int, waivers: int, sites: int | None = None, files: int = 0,
    uncovered: int = 0,
) -> str:
    items = list(findings)
    errors = sum(f.severity is Severity.ERROR for f in items)
    warnings = len(items) - errors
    checked = f"{_count(patches, 'patch', 'patches')}, {_count(waivers, 'waiver', 'waivers')} checked"
    if sites is not None:
        checked += (
            f"; {_count(files, 'file', 'files')} scanned, {_count(sites, 'patch site', 'patch sites')}, "
            f"{uncovered} uncovered"
        )
    if not items:
        return f"patchkit lint: clean ({checked})"
    counts = f"{_count(errors, 'error', 'errors')}, {_count(warnings, 'warning', 'warnings')}"
    return f"patchkit lint: {counts} ({checked})"


def _text_line(finding: Finding) -> str:
    # One finding, one line: a name with a newline or an escape sequence must not forge another (issue 10).
    return escape_controls(f"{_place(finding)}: {finding.rule.code} {finding.severity.value}: {finding.message}")


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
