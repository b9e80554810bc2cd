"""`patchkit lint`: the waiver policy and manifest sanity, checked for CI.

A consuming repository may patch a pinned engine only under a waiver `<waivers>/<N>.md`, N being the pull
request of that repository which introduces the patch. run_lint reads the registry once (inputs.py), runs
every static rule (rules.py) and, given a base revision, the history rules (history.py); it returns findings
and never prints.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from patchkit.errors import BadInputError
from patchkit.lint.ci import PullRequest, find_pull_request
from patchkit.lint.findings import Finding, Rule, Severity
from patchkit.lint.inputs import read_lint_input
from patchkit.lint.rules import RULES
from patchkit.registry import find_locations

__all__ = ["Finding", "LintReport", "LintRequest", "Rule", "Severity", "run_lint"]


@dataclass(frozen=True)
class LintRequest:
    patches: str | None = None  # None: PATCHKIT_PATCHES, [tool.patchkit] patches, ./patches
    waivers: str | None = None  # None: PATCHKIT_WAIVERS, [tool.patchkit] waivers, ./waivers
    strict: bool = False  # warnings (pending entries, unknown PR) fail the run too
    base: str | None = None  # history mode: check what REV..HEAD changed
    pr: int | None = None  # the pull request being checked; default: read from the CI environment


@dataclass(frozen=True)
class LintReport:
    findings: tuple[Finding, ...]
    patch_count: int
    waiver_count: int

    @property
    def failed(self) -> bool:
        return any(f.severity is Severity.ERROR for f in self.findings)


def run_lint(request: LintRequest) -> LintReport:
    """Every finding for the registry, sorted by place; raises BadInputError for options it cannot act on."""
    here = Path.cwd()
    if request.pr is not None and request.pr <= 0:
        raise BadInputError(f"--pr must be a positive pull request number, got {request.pr}")
    if request.pr is not None and request.base is None:
        raise BadInputError(
            "--pr is only used by history mode", hint="pass --base REV too, e.g. --base origin/main --pr 2816"
        )
    locations = find_locations(request.patches, request.waivers, here)
    lint_input = read_lint_input(_near(locations.patches, here), _near(locations.waivers, here))
    findings = [finding for rule in RULES for finding in rule(lint_input)]
    if request.base is not None:
        from patchkit.lint.history import check_history, read_range_changes  # git is only needed here

        changes = read_range_changes(request.base, lint_input.patches_dir, lint_input.waivers_dir)
        findings += check_history(lint_input, changes, _pull_request(request.pr))
    if request.strict:
        findings = [replace(f, severity=Severity.ERROR) for f in findings]
    findings.sort(key=lambda f: (f.path.as_posix(), f.line or 0, f.rule.code, f.message))
    return LintReport(
        tuple(findings),
        patch_count=len(lint_input.specs) + len(lint_input.broken),
        waiver_count=sum(w.number is not None for w in lint_input.waivers),
    )


def _pull_request(option: int | None) -> PullRequest | None:
    if option is not None:
        return PullRequest(option, "--pr")
    return find_pull_request(os.environ)


def _near(path: Path, here: Path) -> Path:
    """The path relative to the working directory when below it, so findings read like `git status`."""
    try:
        return path.relative_to(here) if path.is_absolute() else path
    except ValueError:
        return path
