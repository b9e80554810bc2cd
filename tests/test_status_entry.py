"""The first-status entry (patchkit.cli.patch_run.answer_status): the program answers `status ID` / `status --all`
without importing click, byte for byte as the full CLI answers the same request, and falls through to the full
CLI for anything else.

Every run is the real program (`python -m patchkit`) in a fresh interpreter. The full CLI's answer to the same
request is forced with `--lock-timeout 300` (the default, so the same request; an option the entry does not
take); whether the entry answered is read from the modules the run loaded (`-X importtime`: the full CLI imports
click, the entry never does). The oracle for colour is click itself (click.style, click.echo), never patchkit's
own writer.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.conftest import FileSpec, Registry, cli, git_diff, write_tree
from tests.test_restart_entry import answered, program  # the program run as a container runs it

pytestmark = pytest.mark.version_sensitive  # the records' code fingerprint hashes sys.version


def lines(name: str, count: int) -> bytes:
    return b"".join(b"%s = compute_%s(%d)\n" % (name.encode(), name.encode(), i) for i in range(count))


BASE: dict[str, FileSpec] = {"eng/core.py": lines("core", 40), "eng/solo.py": lines("solo", 12)}
WITH_A: dict[str, FileSpec] = {**BASE, "eng/core.py": lines("core", 40).replace(b"(5)", b"(5, a=1)")}
WITH_AB: dict[str, FileSpec] = {
    **WITH_A, "eng/core.py": lines("core", 40).replace(b"(5)", b"(5, a=1)").replace(b"(30)", b"(30, b=2)"),
    "eng/solo.py": lines("solo", 12).replace(b"(3)", b"(3, b=2)"),
}
FULL = ("--lock-timeout", "300")  # the status command's default: the same request, which the entry declines
ANSI = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]")  # click's own pattern (click._compat._ansi_re), as bytes


def same_bytes(cwd: Path, *args: str | Path, env: Mapping[str, str] | None = None) -> tuple[int, bytes, bytes]:
    """The program's answer, which must be the full CLI's to the byte (exit code, stdout, stderr)."""
    fast = program(cwd, *args, env=env)
    full = program(cwd, *args, *FULL, env=env)
    assert fast == full, (fast, full)
    return fast


@pytest.fixture
def series(tmp_path: Path, registry: Registry, engine: Path) -> Path:
    """pa then pb (after = ["pa"]), nothing applied yet."""
    write_tree(engine, BASE)
    registry.add("pa", git_diff(tmp_path, BASE, WITH_A))
    registry.add("pb", git_diff(tmp_path, WITH_A, WITH_AB), extra='after = ["pa"]')
    return engine


MODES = [[], ["-q"], ["-v"], ["--json"], ["--quiet", "--json"], ["--verbose", "--json"]]
MODE_IDS = ["text", "-q", "-v", "--json", "--quiet --json", "--verbose --json"]


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
@pytest.mark.parametrize("which", [["pa"], ["pb"], ["--all"]], ids=["one patch", "the second patch", "--all"])
@pytest.mark.parametrize("state", ["unapplied", "applied", "partial"])
def test_a_status_is_answered_without_click_byte_for_byte(
    series: Path, registry: Registry, work: Path, mode: list[str], which: list[str], state: str
) -> None:
    """Every state's report (exit 3, 0, 4 and the series' worst), text, -q, -v and --json, as the full CLI's."""
    if state != "unapplied":
        assert cli("apply", "--all", "--root", series, "--patches", registry.path).code == 0
    if state == "partial":
        write_tree(series, {"eng/solo.py": lines("solo", 12)})  # pb's second file turned back
    args = ("status", *which, *mode, "--root", series, "--patches", registry.path)
    code, out, err = same_bytes(work, *args)
    partial = 0 if which == ["pa"] else 4  # pa is whole; pb, and so the series, is partial
    assert code == {"unapplied": 3, "applied": 0, "partial": partial}[state]
    assert b"\x1b" not in out + err  # a pipe gets no colour
    if "--json" in mode:
        assert json.loads(out)["exit_code"] == code
    assert answered(work, *args)


@pytest.mark.parametrize("mode", [[], ["--json"]], ids=["text", "--json"])
@pytest.mark.parametrize("case", ["unknown patch", "no registry", "stray folder", "not a root"])
def test_errors_and_warnings_read_alike(series: Path, registry: Registry, work: Path, mode: list[str],
                                        case: str) -> None:
    """The error boundary's words and codes (exit 2, JSON errors on stdout) and a warning on stderr, as the full
    CLI says them."""
    patches, root, which = registry.path, series, ["--all"]
    if case == "unknown patch":
        which = ["nosuch"]
    elif case == "no registry":
        patches = work / "missing"
    elif case == "stray folder":
        (registry.path / "notes").mkdir()
    else:
        root = work / "missing-root"
    args = ("status", *which, *mode, "--root", root, "--patches", patches)
    code, _, err = same_bytes(work, *args)
    assert err, "the case says something on stderr"
    assert (code == 3) == (case == "stray folder")
    assert answered(work, *args)


def test_the_tree_and_registry_may_come_from_the_environment_or_the_defaults(
    series: Path, registry: Registry, work: Path, tmp_path: Path
) -> None:
    """$PATCHKIT_ROOT / $PATCHKIT_PATCHES, relative paths, `--root=`, and no --patches at all (./patches, or the
    pyproject.toml's [tool.patchkit] patches): the same pipeline reads them as the full CLI does."""
    env = {"PATCHKIT_ROOT": str(series), "PATCHKIT_PATCHES": str(registry.path)}
    assert same_bytes(work, "status", "--all", env=env)[0] == 3
    assert answered(work, "status", "--all", env=env)
    relative = (f"--root={os.path.relpath(series, work)}/", f"--patches={os.path.relpath(registry.path, work)}")
    assert same_bytes(work, "status", "pa", *relative)[0] == 3
    assert answered(work, "status", "pa", *relative)
    assert same_bytes(tmp_path, "status", "--all", "--root", series)[0] == 3  # ./patches
    assert answered(tmp_path, "status", "--all", "--root", series)
    (tmp_path / "pyproject.toml").write_text('[tool.patchkit]\npatches = "patches"\n', encoding="utf-8")
    assert same_bytes(work, "status", "--all", "--root", series)[0] == 3  # the project's registry, from below it
    assert answered(work, "status", "--all", "--root", series)


@pytest.mark.parametrize("env", [{"NO_COLOR": "1"}, {"TERM": "dumb"}, {"LANG": "C", "LC_ALL": "C"},
                                 {"PYTHONIOENCODING": "ascii"}],
                         ids=["NO_COLOR", "TERM=dumb", "C locale", "an ASCII stdout (click's writer)"])
def test_colourless_environments_read_alike(series: Path, registry: Registry, work: Path,
                                            env: dict[str, str]) -> None:
    args = ("status", "--all", "-v", "--root", series, "--patches", registry.path)
    assert same_bytes(work, *args, env=env)[0] == 3


def test_the_report_is_the_coloured_one_with_clicks_escapes_stripped(series: Path, registry: Registry,
                                                                    work: Path) -> None:
    """What the entry prints is the full CLI's `--color always` report (click.style's escapes, click.echo's
    writer) with the escapes click.echo strips for a pipe taken out: the same words, in colour only there."""
    args = ("status", "--all", "-v", "--root", series, "--patches", registry.path)
    code, plain, _ = program(work, *args)
    coloured = program(work, *args, "--color", "always")
    assert not answered(work, *args, "--color", "always")
    assert coloured[0] == code == 3
    assert b"\x1b[" in coloured[1] and ANSI.sub(b"", coloured[1]) == plain


@pytest.mark.parametrize("extra, env", [
    (["--color", "always"], {}), (["--color=never"], {}), (["--target", "eng"], {}), (["--strict-base"], {}),
    (["-q", "-v"], {}), (["--root", "."], {}), (["--json", "--json"], {}), (["--", "x"], {}), (["-qv"], {}),
    ([], {"FORCE_COLOR": "1"}), ([], {"PATCHKIT_TARGET": "eng"}), ([], {"PATCHKIT_NO_FASTPATH": "1"}),
    ([], {"_PATCHKIT_COMPLETE": "bash_source"}),
], ids=["--color always", "--color=never", "--target", "--strict-base", "-q -v", "--root twice", "--json twice",
        "--", "-qv", "FORCE_COLOR", "PATCHKIT_TARGET", "PATCHKIT_NO_FASTPATH", "completion"])
def test_any_other_shape_falls_through_to_the_full_cli(series: Path, registry: Registry, work: Path,
                                                       extra: list[str], env: dict[str, str]) -> None:
    args = ("status", "--all", "--root", series, "--patches", registry.path, *extra)
    assert not answered(work, *args, env=env)
    assert not answered(work, "-q", "status", "--all", "--root", series, "--patches", registry.path)
    assert not answered(work, "status", "../pa", "--root", series, "--patches", registry.path)


def test_the_oracle_is_the_full_cli(series: Path, registry: Registry, work: Path) -> None:
    """The request with FULL added is answered by the full CLI (click loads), the same request without it is not."""
    args = ("status", "--all", "--root", series, "--patches", registry.path)
    assert not answered(work, *args, *FULL)
    assert answered(work, *args)


def test_no_root_falls_through(series: Path, registry: Registry, work: Path) -> None:
    """Without --root or $PATCHKIT_ROOT the full CLI says which tree is missing (a usage error)."""
    assert not answered(work, "status", "--all", "--patches", registry.path)
    assert program(work, "status", "--all", "--patches", registry.path)[0] == 2


# The writer the entry speaks through (speak.console.echo) against click.echo itself, on a real pipe: the oracle
# is click's, in a process of its own.
ECHO_PROBE = """
import sys
mode, message = sys.argv[1], sys.argv[2]
if mode == "click":
    import click
    click.echo(message, err=sys.argv[3] == "err", color={"None": None, "True": True, "False": False}[sys.argv[4]])
else:
    from patchkit.speak import console
    choice = {"None": "auto", "True": "always", "False": "never"}[sys.argv[4]]
    console.use_settings(console.Settings(color=choice))
    console.echo(message, err=sys.argv[3] == "err")
"""


@pytest.mark.parametrize("colour", ["None", "True", "False"])
@pytest.mark.parametrize("stream", ["out", "err"])
@pytest.mark.parametrize("env", [{}, {"PYTHONIOENCODING": "ascii"}, {"PYTHONIOENCODING": "latin-1"}],
                         ids=["utf-8", "ascii", "latin-1"])
def test_the_writer_writes_what_click_echo_writes(colour: str, stream: str, env: dict[str, str]) -> None:
    import click  # the oracle

    message = click.style("unapplied", fg="yellow") + " caf\u00e9 " + click.style("ok", fg="green")
    runs = []
    for mode in ("click", "patchkit"):
        clean = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "CLICOLOR_FORCE")}
        done = subprocess.run([sys.executable, "-c", ECHO_PROBE, mode, message, stream, colour],
                              capture_output=True, check=False, env={**clean, **env, "TERM": "xterm"})
        runs.append((done.returncode, done.stdout, done.stderr))
    assert runs[0] == runs[1]
    assert runs[0][0] == 0


def test_the_report_colours_are_clicks() -> None:
    import click  # the oracle

    from patchkit.speak.console import style
    from patchkit.speak.report import _COLOURS

    for word, colour in _COLOURS.items():
        assert style(word, colour) == click.style(word, fg=colour), word
