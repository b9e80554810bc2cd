"""`patchkit lint`: check the registry against the waiver policy; exit 1 on findings (errors)."""

from __future__ import annotations

import click

from patchkit.commands.options import patches_option
from patchkit.errors import ExitCode
from patchkit.lint import LintRequest, run_lint
from patchkit.lint.report import OutputFormat, format_findings, summarise


@click.command("lint")
@patches_option
@click.option(
    "--waivers",
    "waivers_dir",
    metavar="DIR",
    help="Waivers folder (default: $PATCHKIT_WAIVERS, [tool.patchkit] waivers, ./waivers).",
)
@click.option("--strict", is_flag=True, help="Fail on warnings too, e.g. pending (not yet vendored) entries.")
@click.option(
    "--base", metavar="REV", help="History mode: every patch changed in REV..HEAD must change its waiver too."
)
@click.option(
    "--pr",
    type=click.IntRange(min=1),
    metavar="N",
    help="With --base: the pull request being checked; new patches must have introduced_by = N "
    "(default: read from the CI environment, e.g. GITHUB_REF).",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice([f.value for f in OutputFormat]),
    default=OutputFormat.TEXT.value,
    show_default=True,
    help="text: file:line: RULE severity: message; json; github: workflow annotations.",
)
@click.pass_context
def command(
    ctx: click.Context,
    patches_dir: str | None,
    waivers_dir: str | None,
    strict: bool,
    base: str | None,
    pr: int | None,
    output_format: str,
) -> None:
    """Check manifests and waivers: every patch needs a waiver named after the PR that introduces it.

    Exit status: 0 clean (warnings allowed), 1 findings, 2 bad input.

    \b
    Examples:
      patchkit lint
      patchkit lint --strict                        # pending entries fail too
      patchkit lint --base origin/main --format github
      patchkit lint --base origin/main --pr 2816
    """
    report = run_lint(LintRequest(patches=patches_dir, waivers=waivers_dir, strict=strict, base=base, pr=pr))
    chosen = OutputFormat(output_format)
    text = format_findings(report.findings, chosen)
    if text:
        click.echo(text)
    if chosen is OutputFormat.TEXT:
        click.echo(summarise(report.findings, report.patch_count, report.waiver_count), err=True)
    ctx.exit(int(ExitCode.REFUSED if report.failed else ExitCode.OK))
