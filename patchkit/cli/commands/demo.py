from __future__ import annotations

import contextlib
import io
import shlex
import tempfile
from pathlib import Path

import click

from patchkit.cli.main import run
from patchkit.speak.console import settings
from patchkit.tooling.demo import DEMO_ID, build_demo, default_fixtures

TARGET = "atom/model_engine/model_runner.py"


@click.command("demo")
@click.option("--fixtures", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The demo fixture folder (default: the demo data shipped in the package).")
@click.option("--keep", is_flag=True, help="Keep the throwaway tree and print where it is.")
def command(fixtures: Path | None, keep: bool) -> None:
    """Walk through apply -> rerun -> partial tree -> status -> revert on a throwaway engine tree.

    Builds a toy engine laid out like ATOM from the package's demo data, makes the pull request's diff with git, and
    runs the real commands on it. Exits 0 only if every step gives the exit code it should.
    """

    quiet = settings().quiet  # -q: only the steps that misbehaved (and the exit code)
    # --keep builds in a folder that stays, so the commands each step printed run there as printed afterwards.
    folder: contextlib.AbstractContextManager[str] = (
        contextlib.nullcontext(tempfile.mkdtemp(prefix="patchkit-demo-kept-")) if keep
        else tempfile.TemporaryDirectory(prefix="patchkit-demo-")
    )
    with folder as tmp:
        workdir = Path(tmp)
        demo = build_demo(fixtures or default_fixtures(), workdir)
        base = ["--patches", str(demo.patches)]
        root = ["--root", str(demo.root)]
        pristine = (demo.root / TARGET).read_bytes()

        def step(title: str, args: list[str], expect: int) -> bool:
            shown = "$ patchkit " + shlex.join(args)
            if not quiet:
                click.echo(click.style(f"\n# {title}", bold=True))
                click.echo(shown)
            if quiet:  # the step's own output is shown only if it misbehaved
                said = io.StringIO()
                with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
                    code = run(args)
            else:
                code = run(args)
            ok = code == expect
            if quiet and not ok:
                click.echo(f"# {title}\n{shown}\n{said.getvalue().rstrip()}", err=True)
            if not (quiet and ok):
                click.echo(click.style(f"[exit {code}{'' if ok else f', expected {expect}'}]",
                                       fg="green" if ok else "red"), err=quiet)
            return ok

        results = [
            step("What state is the pinned tree in?", ["status", DEMO_ID, *root, *base], 3),
            step("Apply (the excluded files are never read or written)", ["apply", DEMO_ID, *root, *base, "-v"], 0),
            step("Rerun, as every container start does: a no-op", ["apply", DEMO_ID, *root, *base], 0),
        ]
        (demo.root / TARGET).write_bytes(pristine)
        if not quiet:
            click.echo(click.style(f"\n# A crash left {TARGET} unpatched: the tree is now partial", bold=True))
        results += [
            step("status tells partial from drifted", ["status", DEMO_ID, *root, *base, "-v"], 4),
            step("apply refuses to guess", ["apply", DEMO_ID, *root, *base], 1),
            step("apply --complete writes only the missing hunks", ["apply", DEMO_ID, *root, *base, "--complete"], 0),
            step("Revert takes it back out", ["revert", DEMO_ID, *root, *base], 0),
            step("And the tree is as the image shipped it", ["status", DEMO_ID, *root, *base], 3),
        ]
        if keep:
            click.echo(f"\nthe demo tree is kept in {workdir}: the commands above run there as printed")
        elif not quiet:
            click.echo(f"\nthe commands above name {workdir}, removed now; `patchkit demo --keep` keeps it")
    passed = sum(results)
    if not quiet or passed != len(results):
        click.echo(f"\ndemo: {passed} of {len(results)} steps behaved as expected", err=quiet)
    click.get_current_context().exit(0 if passed == len(results) else 1)
