"""Findings as text, JSON or GitHub workflow commands. Formats only; decides nothing."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import Any
from urllib.parse import quote

from patchkit import __version__
from patchkit.display import escape_controls
from patchkit.lint import LintReport
from patchkit.lint.coverage import Cover
from patchkit.lint.findings import Finding, Rule, Severity


class OutputFormat(Enum):
    TEXT = "text"  # file:line: RULE severity: message
    CONCISE = "concise"  # file:line: RULE message, what to do left to --explain; repeats grouped; counts per rule
    JSON = "json"
    GITHUB = "github"  # ::error file=...,line=...,title=RULE::message annotations
    SARIF = "sarif"  # SARIF 2.1.0, for code scanning (GitHub shows it on the pull request)


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
    if output_format is OutputFormat.SARIF:
        return json.dumps(sarif_document(items), indent=2, ensure_ascii=False)
    if output_format is OutputFormat.CONCISE:
        return "\n".join(concise_lines(items))
    line_of = _github_line if output_format is OutputFormat.GITHUB else _text_line
    return "\n".join(line_of(f) for f in items)


def concise_lines(findings: Sequence[Finding]) -> list[str]:
    """`--format concise`, as ruff's: `file:line: RULE message` without the fix (`--explain RULE` has it); the
    same finding at several lines of one file is one line listing them; then a count per rule, most first.

    No column: a patch site is a command line, and lint has no better place to give."""
    groups: dict[tuple[str, str, str], list[int | None]] = {}
    for finding in findings:
        groups.setdefault((finding.path.as_posix(), finding.rule.code, finding.message), []).append(finding.line)
    lines = []
    for (path, code, message), at in groups.items():
        numbers = [str(n) for n in at if n is not None]
        place = f"{path}:{','.join(numbers)}" if numbers else path
        repeated = f" ({len(at)} times)" if len(at) > 1 else ""
        lines.append(escape_controls(f"{place}: {code} {message}{repeated}"))
    counts: dict[Rule, int] = {}
    for finding in findings:
        counts[finding.rule] = counts.get(finding.rule, 0) + 1
    if counts:
        width = len(str(max(counts.values())))
        lines.append("")
        lines += [f"{n:>{width}}  {rule.code}  {rule.summary}" for rule, n in
                  sorted(counts.items(), key=lambda item: (-item[1], item[0].code))]
    return lines


SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def sarif_document(findings: Sequence[Finding], help_text: Mapping[str, str] | None = None) -> dict[str, Any]:
    """SARIF 2.1.0: one run of patchkit, every rule it has (so a code-scanning view can explain each), and one
    result per finding with its whole message. Paths as lint found them, relative to the repository."""
    rules = list(Rule)
    index = {rule: i for i, rule in enumerate(rules)}
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "patchkit",
                "version": __version__,
                "informationUri": "https://pypi.org/project/patchkit-engine/",
                "rules": [
                    {
                        "id": rule.code,
                        "name": rule.name.title().replace("_", ""),
                        "shortDescription": {"text": rule.summary},
                        **({"fullDescription": {"text": help_text[rule.code]}}
                           if help_text and rule.code in help_text else {}),
                        "defaultConfiguration": {"level": _SARIF_LEVEL[rule.severity]},
                    }
                    for rule in rules
                ],
            }},
            "results": [
                {
                    "ruleId": f.rule.code,
                    "ruleIndex": index[f.rule],
                    "level": _SARIF_LEVEL[f.severity],
                    "message": {"text": f.text},
                    "locations": [{"physicalLocation": {
                        "artifactLocation": {"uri": _sarif_uri(f.path)},
                        **({"region": {"startLine": f.line}} if f.line is not None else {}),
                    }}],
                }
                for f in findings
            ],
        }],
    }


_SARIF_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning"}


def _sarif_uri(path: Path) -> str:
    """A relative path as a relative URI reference (what code scanning resolves against the checkout)."""
    return path.as_uri() if path.is_absolute() else quote(path.as_posix(), safe="/")


def format_report(report: LintReport, output_format: OutputFormat, help_text: Mapping[str, str] | None = None) -> str:
    """The report: findings in line formats; in JSON also the verdict a CI scheduler reads directly:
    `patches_engine` (the repository changes the engine or serving stack: a registry patch or a patch site),
    `change_patches_engine` (history mode: this change adds or changes a patch site or touches the registry;
    null without --base),
    and `sites`, where each site is and what covers it."""
    if output_format is OutputFormat.SARIF:
        return json.dumps(sarif_document(list(report.findings), help_text), indent=2, ensure_ascii=False)
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
    return escape_controls(f"{_place(finding)}: {finding.rule.code} {finding.severity.value}: {finding.text}")


def _github_line(finding: Finding) -> str:
    # https://docs.github.com/actions/reference/workflow-commands-for-github-actions
    properties = [f"file={_escape_property(finding.path.as_posix())}"]
    if finding.line is not None:
        properties.append(f"line={finding.line}")
    properties.append(f"title={_escape_property(finding.rule.code)}")
    return f"::{finding.severity.value} {','.join(properties)}::{_escape_data(finding.text)}"


def _as_json(finding: Finding) -> dict[str, object]:
    return {
        "rule": finding.rule.code,
        "severity": finding.severity.value,
        "path": finding.path.as_posix(),
        "line": finding.line,
        "message": finding.text,
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
