"""`patchkit lint`: the consuming repository's rule, checked for CI.

The pinned image runs as shipped: any change to the engine or serving stack at build or run time (a registry
patch, or a patch site anywhere in the repository's scripts: `git apply`, `patch`, a heredoc diff, `sed -i` on
an installed engine file, ...) needs a waiver `<waivers>/<N>.md`, N being the pull request of that repository
which introduces it. run_lint reads the registry and scans the repository once (inputs.py, patchkit.scan),
runs every static rule (rules.py) and, given a base revision, the history rules (history.py); it returns
findings and never prints.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from patchkit.errors import BadInputError
from patchkit.input.registry import find_locations, find_project_config
from patchkit.lint.baseline import read_baseline, write_baseline
from patchkit.lint.ci import PullRequest, find_pull_request
from patchkit.lint.coverage import Cover, SiteCover, cover_site
from patchkit.lint.findings import Finding, Rule, Severity
from patchkit.lint.history import check_history, check_site_history, read_base_snapshot, read_range_changes
from patchkit.lint.inputs import Confinement, LintInput, read_lint_input
from patchkit.lint.rules import RULES
from patchkit.scan import ScanConfig, scan_tree
from patchkit.scan.config import read_scan_config

__all__ = ["Finding", "LintReport", "LintRequest", "Rule", "Severity", "run_lint", "write_lint_baseline"]


@dataclass(frozen=True)
class LintRequest:
    patches: str | None = None  # None: PATCHKIT_PATCHES, [tool.patchkit] patches, ./patches
    waivers: str | None = None  # None: PATCHKIT_WAIVERS, [tool.patchkit] waivers, ./waivers
    strict: bool = False  # warnings (pending entries, unknown PR) fail the run too
    base: str | None = None  # history mode: check what REV..HEAD changed
    pr: int | None = None  # the pull request being checked; default: read from the CI environment
    scan: bool = True  # scan the repository's scripts for patch sites
    baseline: str | None = None  # None: [tool.patchkit] baseline, .patchkit-baseline.json in the project root


@dataclass(frozen=True)
class LintReport:
    findings: tuple[Finding, ...]
    patch_count: int
    waiver_count: int
    sites: tuple[SiteCover, ...] = ()  # every patch site of the repository and what covers it
    files_scanned: int = 0
    new_sites: frozenset[str] | None = None  # history mode: fingerprints of sites not on the base
    registry_changed: bool | None = None  # history mode: the range touches the patches folder
    site_root: Path = Path()  # site paths are relative to it

    @property
    def failed(self) -> bool:
        return any(f.severity is Severity.ERROR for f in self.findings)


def run_lint(request: LintRequest) -> LintReport:
    """Every finding for the registry and the repository, sorted by place; raises BadInputError for options
    it cannot act on."""
    here = Path.cwd()
    if request.pr is not None and request.pr <= 0:
        raise BadInputError(f"--pr must be a positive pull request number, got {request.pr}")
    if request.pr is not None and request.base is None:
        raise BadInputError(
            "--pr is only used by history mode", hint="pass --base REV too, e.g. --base origin/main --pr 2816"
        )
    lint_input, config = _read_input(request, here)
    findings = [finding for rule in RULES for finding in rule(lint_input)]
    new_sites = None
    registry_changed = None
    if request.base is not None:
        # git is only needed here

        changes = read_range_changes(request.base, lint_input.patches_dir, lint_input.waivers_dir)
        pull_request = _pull_request(request.pr)
        findings += check_history(lint_input, changes, pull_request)
        patches_folder = changes.relative(lint_input.patches_dir) + "/"
        registry_changed = any(path.startswith(patches_folder) for path in changes.changed)
        if request.scan:
            snapshot = read_base_snapshot(changes, lint_input, config)
            findings += check_site_history(lint_input, changes, snapshot, pull_request)
            new_sites = frozenset(s.fingerprint for s in lint_input.sites) - snapshot.fingerprints
    if request.strict:
        findings = [replace(f, severity=Severity.ERROR) for f in findings]
    findings.sort(key=lambda f: (f.path.as_posix(), f.line or 0, f.rule.code, f.message))
    return LintReport(
        tuple(findings),
        patch_count=len(lint_input.specs) + len(lint_input.broken),
        waiver_count=sum(w.is_waiver for w in lint_input.waivers),
        sites=tuple(cover_site(lint_input, site) for site in lint_input.sites),
        files_scanned=len(lint_input.scanned),
        new_sites=new_sites,
        registry_changed=registry_changed,
        site_root=lint_input.root,
    )


def write_lint_baseline(request: LintRequest) -> tuple[Path, int]:
    """Accept every patch site no waiver or registry patch covers: write them to the baseline file."""
    lint_input, _ = _read_input(request, Path.cwd())
    if lint_input.baseline_path is None:
        raise BadInputError("--write-baseline needs the scan", hint="drop --no-scan")
    accepted = [
        site
        for site in lint_input.sites
        if cover_site(lint_input, site).cover in (Cover.NONE, Cover.BASELINE)
    ]
    return lint_input.baseline_path, write_baseline(lint_input.baseline_path, accepted)


def _read_input(request: LintRequest, here: Path) -> tuple[LintInput, ScanConfig]:
    project = find_project_config(here)
    locations = find_locations(request.patches, request.waivers, here)
    # Asked for by name (option, environment or pyproject): then a missing folder is a typo, not "no patches".
    patches_required = bool(request.patches or os.environ.get("PATCHKIT_PATCHES") or "patches" in project.table)
    # The repository is input (lint runs on forks' pull requests): nothing outside it is read, except the
    # folders the person running lint named themselves.
    named_patches = request.patches or os.environ.get("PATCHKIT_PATCHES")
    named_waivers = request.waivers or os.environ.get("PATCHKIT_WAIVERS")
    confinement = Confinement.of(
        project.root, locations.patches if named_patches else None, locations.waivers if named_waivers else None
    )
    lint_input = read_lint_input(
        _near(locations.patches, here), _near(locations.waivers, here), patches_required=patches_required,
        confinement=confinement,
    )
    config = read_scan_config(project)
    root = _near(project.root, here)
    if not request.scan:
        return replace(lint_input, root=root), config
    result = scan_tree(project.root, config)
    baseline_path = _near(Path(request.baseline) if request.baseline else project.root / config.baseline, here)
    entries = read_baseline(baseline_path)
    current = {site.fingerprint for site in result.sites}
    lint_input = replace(
        lint_input,
        root=root,
        sites=result.sites,
        scanned=result.files,
        scan_problems=result.problems,
        baselined=frozenset(e.fingerprint for e in entries) & current,
        stale_baseline=tuple((e.fingerprint, e.shown) for e in entries if e.fingerprint not in current),
        baseline_path=baseline_path,
    )
    return lint_input, config


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
