"""`patchkit lint`: check the registry and the repository's patch sites against the waiver policy; exit 1 on
findings (errors)."""

from __future__ import annotations

import textwrap

import click

from patchkit.cli.commands.lint_rules import RULE_TEXT
from patchkit.cli.commands.options import FolderPath, patches_option
from patchkit.cli.flags import json_format
from patchkit.display import closest
from patchkit.errors import BadInputError, ExitCode
from patchkit.lint import LintRequest, run_lint, write_lint_baseline
from patchkit.lint.coverage import Cover
from patchkit.lint.findings import Rule, Severity
from patchkit.lint.report import OutputFormat, format_report, summarise
from patchkit.speak.console import echo, settings


@click.command("lint")
@patches_option
@click.option(
    "--waivers",
    "waivers_dir",
    metavar="DIR",
    type=FolderPath(),
    help="Waivers folder (default: $PATCHKIT_WAIVERS, [tool.patchkit] waivers, ./waivers).",
)
@click.option("--strict", is_flag=True, help="Fail on warnings too, e.g. pending (not yet vendored) entries.")
@click.option(
    "--base",
    metavar="REV",
    help="History mode: every patch changed in REV..HEAD must change its waiver too, and every patch site added "
    "or changed needs the waiver of this pull request, added in the range.",
)
@click.option(
    "--pr",
    type=click.IntRange(min=1),
    metavar="N",
    help="With --base: the pull request being checked; new patches must have introduced_by = N and new sites "
    "need waiver N.md (default: read from the CI environment, e.g. GITHUB_REF).",
)
@click.option(
    "--scan/--no-scan",
    default=True,
    show_default=True,
    help="Scan the repository's scripts, Dockerfiles and workflows for patch sites (git apply, patch, heredoc "
    "diffs, sed -i on engine files, fork installs, ...); globs: [tool.patchkit] scan, scan-exclude.",
)
@click.option(
    "--baseline",
    metavar="FILE",
    help="Accepted pre-existing patch sites (default: [tool.patchkit] baseline, .patchkit-baseline.json).",
)
@click.option(
    "--write-baseline",
    is_flag=True,
    help="Write every patch site no waiver covers to the baseline file, accepting them, and exit 0.",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice([f.value for f in OutputFormat]),
    callback=json_format(OutputFormat.JSON.value),
    default=OutputFormat.TEXT.value,
    show_default=True,
    help="text: file:line: RULE severity: message; concise: file:line: RULE message (the fix: --explain), "
    "repeats grouped, a count per rule; json: findings, every site and the verdict (patches_engine, "
    "change_patches_engine); github: workflow annotations; sarif: SARIF 2.1.0 for code scanning.",
)
@click.option(
    "--explain",
    "rule",
    metavar="RULE",
    help="Print what rule RULE (e.g. PK204) checks, its severity and how to fix it, and exit; lints nothing.",
)
@click.pass_context
def command(
    ctx: click.Context,
    rule: str | None,
    patches_dir: str | None,
    waivers_dir: str | None,
    strict: bool,
    base: str | None,
    pr: int | None,
    scan: bool,
    baseline: str | None,
    write_baseline: bool,
    output_format: str,
) -> None:
    """Check manifests, waivers and the repository's patch sites: every change to the engine needs a waiver
    named after the PR that introduces it.

    Exit status: 0 clean (warnings allowed), 1 findings, 2 bad input.

    \b
    Examples:
      patchkit lint
      patchkit lint --strict            # pending entries fail too
      patchkit lint --base origin/main --format github
      patchkit lint --base origin/main --pr 2816
      patchkit lint --write-baseline    # accept today's uncovered sites
      patchkit lint --explain PK204     # what a rule checks
    """
    if rule is not None:
        for line in explain_rule(rule):
            echo(line)
        ctx.exit(int(ExitCode.OK))
    request = LintRequest(
        patches=patches_dir, waivers=waivers_dir, strict=strict, base=base, pr=pr, scan=scan, baseline=baseline
    )
    if write_baseline:
        path, count = write_lint_baseline(request)
        echo(f"patchkit lint: wrote {count} accepted patch site{'' if count == 1 else 's'} to {path}", err=True)
        ctx.exit(int(ExitCode.OK))
    report = run_lint(request)
    chosen = OutputFormat(output_format)
    text = format_report(report, chosen, RULE_TEXT)
    if text:
        echo(text)
    if chosen in (OutputFormat.TEXT, OutputFormat.CONCISE) and not settings().quiet:
        uncovered = sum(c.cover is Cover.NONE for c in report.sites)
        sites = len(report.sites) if scan else None
        echo(
            summarise(
                report.findings, report.patch_count, report.waiver_count, sites, report.files_scanned, uncovered
            ),
            err=True,
        )
    ctx.exit(int(ExitCode.REFUSED if report.failed else ExitCode.OK))


_SEVERITY_TEXT = {
    Severity.ERROR: "error: fails `patchkit lint` (exit 1)",
    Severity.WARNING: "warning: reported; fails only under `patchkit lint --strict`",
}


def explain_rule(code: str) -> list[str]:
    """`lint --explain`: the rule's code, summary, severity and the rules table's text (as `ruff rule`)."""
    rules = {r.code: r for r in Rule}
    found = rules.get(code.strip().upper())
    if found is None:
        wanted = code.strip().upper()
        # A well-formed code names its family (PK2 for PK2xx): only a rule of that family is a likely typo of it
        # (PK999 is no misspelling of PK209); anything else is matched against every code.
        family = [known for known in sorted(rules) if known[:3] == wanted[:3]]
        well_formed = len(wanted) == 5 and wanted.startswith("PK") and wanted[2:].isdigit()
        close = closest(wanted, family if well_formed else sorted(rules))
        families: dict[str, list[str]] = {}
        for known in sorted(rules):
            families.setdefault(known[:3], []).append(known)
        ranges = ", ".join(f"{f[0]}..{f[-1]}" if len(f) > 1 else f[0] for f in families.values())
        raise BadInputError(
            f"no lint rule {code!r}" + (f"; did you mean {close}?" if close else ""),
            hint=(f"`patchkit lint --explain {close}`; " if close else "") + f"the rules are {ranges}",
        )
    return [
        *textwrap.wrap(f"{found.code}: {found.summary}", 78, subsequent_indent="  "),
        f"severity: {_SEVERITY_TEXT[found.severity]}",
        "",
        *textwrap.wrap(RULE_TEXT[found.code], 78),
        "",
        "All rules, waivers and the baseline: docs/lint.md (\"Rules\").",
    ]
