"""Cold start: `patchkit --version` loads no command module, every registered command module loads, and a small
status or a restart loads only the modules it uses."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
import unidiff

from patchkit.cli import boundary
from patchkit.cli import main as cli_module
from tests.conftest import Registry, cli, git_diff, write_tree

# version_sensitive: what an interpreter imports at start differs by version (click 8.5 pulls in uuid, and
# with it platform and subprocess, on 3.10); every command module is imported, so 3.11-only syntax fails here.
pytestmark = pytest.mark.version_sensitive

PROBE = """
import json, sys
from patchkit.cli.main import run
run(["--version"])
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("patchkit", "unidiff", "git"))))
"""


def with_packages(modules: tuple[str, ...]) -> list[str]:
    """The modules and every package above them (importing patchkit.a.b loads patchkit and patchkit.a first)."""
    return sorted({".".join(m.split(".")[:end]) for m in modules for end in range(1, m.count(".") + 2)})


def test_version_imports_only_the_cli() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout
    loaded = json.loads(out.splitlines()[-1])
    only = ("patchkit.cli.main", "patchkit.cli.boundary", "patchkit.cli.flags", "patchkit.speak.console",
            "patchkit.display", "patchkit.errors")
    assert loaded == with_packages(only)


def test_every_registered_module_gives_its_command() -> None:
    ctx = click.Context(cli_module.main)
    for module in cli_module.COMMAND_MODULES:
        name = cli_module.command_name(module)
        command = cli_module.main.get_command(ctx, name)
        assert command is not None and command.name == name, module
    assert set(cli_module.main.list_commands(ctx)) >= {cli_module.command_name(m) for m in cli_module.COMMAND_MODULES}


def test_unknown_command_is_still_a_usage_error() -> None:
    assert cli_module.main.get_command(click.Context(cli_module.main), "no-such-command") is None


# What a small status and a container restart may not load: what sits behind the lazy boundaries (the `# lazy:`
# comments; tests/test_imports.py checks that every lazy import names one): the write stage, the parser (the parse
# cache answers), gitpython, the series and a bug's traceback (the CLI), and what only --root-from-package or
# vendor needs. An eager import put back anywhere on their way (a module level import of one of these) fails these
# tests. Everything else loads at the top of its module (the fast path, json, difflib, shlex, the glob automaton).
NEVER_FOR_STATUS = (
    "patchkit.plan.bytecode",
    "patchkit.run.series",  # only --all (the CLI's boundary)
    "patchkit.diff.diffs",
    "patchkit.plan.plan",
    "patchkit.workspace.commit",
    "patchkit.workspace.disk",
    "patchkit.workspace.folders",
    "patchkit.workspace.journal",
    "patchkit.workspace.recovery",
    "unidiff",
    "git",
    "importlib.metadata",  # --root-from-package
    "subprocess",  # --root-from-package runs the engine's interpreter; status runs nothing
    "tomlkit",  # vendor
    "urllib.request",  # vendor
    "secrets",
    "traceback",  # only a bug's report (the CLI's boundary)
)
# A restart answered from the records (patchkit.run.fastpath) does not parse either: no filtering, no compiled
# hunk set; and it judges nothing: its Outcome and report are made of light records (patchkit.outcome,
# treestate, hunkset), so none of the judging modules loads (they do once the fast path declines).
NEVER_FOR_RESTART = (
    *NEVER_FOR_STATUS,
    "patchkit.diff.filtering",
    "patchkit.diff.compiled",
    "patchkit.judge.state",
    "patchkit.judge.matching",
    "patchkit.judge.verdicts",
    "patchkit.judge.rewrite",
    "patchkit.diff.hunks",  # its answer holds an empty patchkit.diff.hunkset.HunkSet, no hunk
)

RUN_PROBE = """
import sys
from patchkit.cli.main import run
code = run(sys.argv[1:])
loaded = sorted(sys.modules)  # before the probe's own json import
import json
print(json.dumps([code, loaded]))
"""

BEFORE = {f"eng/mod{i}.py": b"".join(b"value_%d = %d\n" % (n, n) for n in range(40)) for i in range(3)}
AFTER = {path: data.replace(b"value_7 = 7", b"value_7 = 8").replace(b"value_30 =", b"value_30: int =")
         for path, data in BEFORE.items()}


CLICK_PROBE = """
import sys
import click
loaded = sorted(sys.modules)
import json
print(json.dumps(loaded))
"""


@functools.cache
def loaded_by_click() -> frozenset[str]:
    """What `import click` loads by itself in this interpreter: not patchkit's doing, so not held against it
    (click 8.2+ imports uuid, which on Python 3.10 imports platform and with it subprocess)."""
    done = subprocess.run([sys.executable, "-c", CLICK_PROBE], capture_output=True, text=True, check=True)
    return frozenset(json.loads(done.stdout.splitlines()[-1]))


def loaded_by(*args: str | Path, env: dict[str, str] | None = None) -> tuple[int, set[str], str]:
    """Exit code, every module loaded beyond what click loads by itself, and stderr of one CLI run in a fresh
    interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", RUN_PROBE, *map(str, args)], capture_output=True, text=True, check=True,
        env={**os.environ, **(env or {})},
    )
    code, modules = json.loads(done.stdout.splitlines()[-1])
    return code, set(modules) - loaded_by_click(), done.stderr


@pytest.fixture
def small_patch(tmp_path: Path, registry: Registry, engine: Path) -> tuple[Path, Path]:
    """A three-file patch and its unapplied tree; the registry holds its compiled hunk set (an image's case:
    `patchkit compile` at build), so a status parses nothing."""
    write_tree(engine, BEFORE)
    registry.add("small-pr1", git_diff(tmp_path, BEFORE, AFTER))
    code, _, err = loaded_by("compile", "--patches", registry.path)
    assert code == 0, err
    return engine, registry.path


def test_status_loads_only_what_it_uses(small_patch: tuple[Path, Path]) -> None:
    engine, patches = small_patch
    code, loaded, err = loaded_by("status", "small-pr1", "--root", engine, "--patches", patches)
    assert code == 3, err
    assert not loaded & set(NEVER_FOR_STATUS), sorted(loaded & set(NEVER_FOR_STATUS))
    assert {"patchkit.judge.state", "patchkit.workspace.lock", "patchkit.speak.report"} <= loaded  # it judged and spoke
    assert cli("apply", "small-pr1", "--root", engine, "--patches", patches).code == 0
    code, loaded, err = loaded_by("status", "small-pr1", "--root", engine, "--patches", patches)
    assert code == 0, err  # applied, with its record read
    assert not loaded & set(NEVER_FOR_STATUS), sorted(loaded & set(NEVER_FOR_STATUS))


def test_a_first_apply_declines_the_fast_path_before_reading_any_diff(
    small_patch: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No record under .patchkit: the fast path declines at once, without reading (and hashing) the diff or
    taking the lock; with a record there, it reads the diff as before."""
    from patchkit.input.manifest import PatchSpec, load_manifest
    from patchkit.outcome import Action
    from patchkit.run.actions import Options
    from tests.rooted import restart_outcomes

    engine, patches = small_patch
    spec = load_manifest(patches / "small-pr1")
    reads: list[str] = []
    real = PatchSpec.read_diff
    monkeypatch.setattr(PatchSpec, "read_diff", lambda self: reads.append(self.id) or real(self))
    fast = Options(fast_restart=True)
    assert restart_outcomes((spec,), engine, Action.APPLY, fast) == (None, None, False)
    assert restart_outcomes((spec,), engine, Action.APPLY, fast, waited=True) == (None, None, False)
    assert reads == []
    assert cli("apply", "small-pr1", "--root", engine, "--patches", patches).code == 0
    assert reads  # the apply itself read it
    reads.clear()
    quick, _, looked = restart_outcomes((spec,), engine, Action.APPLY, fast)
    assert quick is not None and looked and reads == ["small-pr1"]  # a record: the diff is checked, the records answer


@pytest.mark.parametrize("which", [["small-pr1"], ["--all"]], ids=["one patch", "--all (the container hook)"])
def test_a_restart_loads_neither_the_parser_nor_the_write_stage(
    small_patch: tuple[Path, Path], which: list[str]
) -> None:
    engine, patches = small_patch
    assert cli("apply", *which, "--root", engine, "--patches", patches).code == 0
    code, loaded, err = loaded_by(
        "apply", *which, "--root", engine, "--patches", patches, env={"PATCHKIT_DEBUG_FASTPATH": "1"}
    )
    assert code == 0 and "fast path used" in err, err
    forbidden = loaded & set(NEVER_FOR_RESTART) - ({"patchkit.run.series"} if which == ["--all"] else set())
    assert not forbidden, sorted(forbidden)


# What a -v or --json restart loads on top of a text one: the recorded verdicts (patchkit.run.recorded), rebuilt as
# the report's records (hollow sections, no line images). Still no parser, no judgement, no write stage.
VERDICT_MODULES = {"patchkit.run.recorded", "patchkit.judge.verdicts", "patchkit.judge.matching", "patchkit.diff.hunks"}


@pytest.mark.parametrize("flag", ["--json", "-v"])
@pytest.mark.parametrize("which", [["small-pr1"], ["--all"]], ids=["one patch", "--all"])
def test_a_verbose_or_json_restart_loads_only_the_recorded_verdicts(
    small_patch: tuple[Path, Path], which: list[str], flag: str
) -> None:
    engine, patches = small_patch
    assert cli("apply", *which, "--root", engine, "--patches", patches).code == 0
    code, loaded, err = loaded_by(
        "apply", *which, "--root", engine, "--patches", patches, flag, env={"PATCHKIT_DEBUG_FASTPATH": "1"}
    )
    assert code == 0 and "fast path used" in err, err
    allowed = VERDICT_MODULES | ({"patchkit.run.series"} if which == ["--all"] else set())
    allowed |= {"difflib"} if flag == "-v" else set()  # click's parser imports it for -v, on any path
    forbidden = loaded & set(NEVER_FOR_RESTART) - allowed
    assert not forbidden, sorted(forbidden)
    assert "patchkit.run.recorded" in loaded


def test_the_program_flushes_everything_before_its_quick_exit(small_patch: tuple[Path, Path]) -> None:
    """`python -m patchkit` ends with os._exit after flushing (cli.entry): a long report through a pipe arrives
    whole, the exit code is the command's, and a pipe the reader closed early keeps the code, as before."""
    engine, patches = small_patch
    args = [sys.executable, "-m", "patchkit", "status", "small-pr1", "--root", str(engine), "--patches", str(patches)]
    done = subprocess.run([*args, "--json", "-v"], capture_output=True, check=False)
    assert done.returncode == 3, done.stderr
    report = json.loads(done.stdout)  # the whole document: nothing was left in a buffer
    assert report["patch"] == "small-pr1" and report["state"] == "unapplied"
    assert done.stdout.endswith(b"}\n")
    closed = subprocess.run(f"{' '.join(args)} -v | head -c 1 >/dev/null; exit ${{PIPESTATUS[0]}}", shell=True,
                            executable="/bin/bash", capture_output=True, check=False)
    assert closed.returncode == 3, closed.stderr
    bare = subprocess.run([sys.executable, "-c", "import patchkit.__main__"], capture_output=True, check=False,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert bare.returncode == 2 and b"Usage" in bare.stderr + bare.stdout  # no command: a usage error, exit 2


def test_the_program_collects_cycles_rarely_and_embedders_keep_their_settings() -> None:
    """cli.entry raises the collector's first threshold for the program's run only; `run` (in-process) leaves it."""
    probe = (
        "import gc, sys\n"
        "from patchkit.cli import main as cli\n"
        "default = gc.get_threshold()\n"
        "cli.run(['--version'])\n"
        "assert gc.get_threshold() == default, gc.get_threshold()\n"
        "cli.main.main = lambda **kw: print(gc.get_threshold(), default) or 0\n"
        "cli.entry()\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    now, default = done.stdout.strip().splitlines()[-1].split(") (")
    assert now.strip("()").split(", ")[0] == str(boundary.GC_FIRST_GENERATION)
    assert now.strip("()").split(", ")[1:] == default.strip("()").split(", ")[1:]


# What the program loads when the restart entry (patchkit.cli.restart) answers: the standard library and these
# stdlib-only modules of patchkit, no click, no manifest parser, no report, no judgement.
RESTART_ENTRY_MODULES = (
    "patchkit.cli.argv", "patchkit.cli.restart", "patchkit.cli.start", "patchkit.display", "patchkit.errors",
    "patchkit.input.excludes",
    "patchkit.input.limits", "patchkit.input.reads", "patchkit.input.trust", "patchkit.run.fastpath",
    "patchkit.run.recorded", "patchkit.run.records", "patchkit.speak.plain", "patchkit.workspace.names",
)
# What the restart entry must not load of the standard library either (issue #36: 20-35 ms of a ~75 ms restart on
# the history size, where git's `-R --check` costs ~65 ms): pathlib (and the urllib.parse, ipaddress it pulls in)
# and dataclasses (and inspect, ast, dis, tokenize). Run with -S, as patchkit.pyz runs (`python -I -S`): an
# editable install's finder (a .pth, run by site) loads pathlib before patchkit starts.
NEVER_FOR_RESTART_ENTRY = (
    "click", "pathlib", "urllib.parse", "ipaddress", "dataclasses", "inspect", "ast", "dis", "tokenize",
)
REPO = Path(__file__).resolve().parents[1]


def run_without_site(cwd: Path, *args: str | Path) -> tuple[int, set[str], str]:
    """`python -S -X importtime -m patchkit ARGS` from `cwd`: its exit code, the modules it loaded (read from
    -X importtime: the program ends with os._exit) and the end of its stderr. -S: site runs no .pth; the
    packages are found on PYTHONPATH (unidiff's folder: the code fingerprint's)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHKIT_")}
    env["PYTHONPATH"] = os.pathsep.join((str(REPO), str(Path(unidiff.__file__).parents[1])))
    done = subprocess.run([sys.executable, "-S", "-X", "importtime", "-m", "patchkit", *map(str, args)],
                          capture_output=True, text=True, check=False, cwd=cwd, env=env)
    loaded = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    return done.returncode, loaded, done.stderr[-2000:]


@pytest.mark.parametrize("flag", [[], ["--json"]], ids=["text", "--json"])
@pytest.mark.parametrize("which", [["small-pr1"], ["--all"]], ids=["one patch", "--all"])
def test_the_program_answers_a_restart_without_click(
    small_patch: tuple[Path, Path], which: list[str], flag: list[str], tmp_path: Path
) -> None:
    """`python -S -m patchkit apply` on a tree patchkit applied: exactly RESTART_ENTRY_MODULES of patchkit load
    (read from -X importtime: the program ends with os._exit), and nothing of NEVER_FOR_RESTART_ENTRY does."""
    engine, patches = small_patch
    assert cli("apply", *which, "--root", engine, "--patches", patches).code == 0
    code, loaded, err = run_without_site(tmp_path, "apply", *which, *flag, "--root", engine, "--patches", patches)
    assert code == 0, err
    assert not loaded & set(NEVER_FOR_RESTART_ENTRY)
    assert sorted(m for m in loaded if m.split(".")[0] in ("patchkit", "unidiff")) == with_packages(
        RESTART_ENTRY_MODULES
    )


def test_the_program_offers_only_an_apply_to_the_restart_entry(tmp_path: Path) -> None:
    """`python -m patchkit --version` (or any other command) never loads the restart entry's checks."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "patchkit", "--version"], capture_output=True,
                          text=True, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "patchkit.cli.start" in loaded and "click" in loaded
    assert not loaded & {"patchkit.cli.restart", "patchkit.run.fastpath", "patchkit.speak.plain"}


@pytest.mark.parametrize("flag", [[], ["--json"], ["-v"]], ids=["text", "--json", "-v"])
@pytest.mark.parametrize("which", [["small-pr1"], ["--all"]], ids=["one patch", "--all"])
def test_the_program_answers_a_first_status_without_click(
    small_patch: tuple[Path, Path], which: list[str], flag: list[str], tmp_path: Path
) -> None:
    """`python -S -m patchkit status` (the first-status entry, patchkit.cli.patch_run): the whole status runs and
    speaks without click (~20 ms of a first status, issue #36 item 2), and loads nothing of NEVER_FOR_STATUS."""
    engine, patches = small_patch
    code, loaded, err = run_without_site(tmp_path, "status", *which, *flag, "--root", engine, "--patches", patches)
    assert code == 3, err
    assert {"patchkit.cli.patch_run", "patchkit.judge.state", "patchkit.speak.report"} <= loaded  # judged, spoke
    assert not {m for m in loaded if m.split(".")[0] == "click"}
    allowed = {"patchkit.run.series"} if which == ["--all"] else set()
    assert not loaded & set(NEVER_FOR_STATUS) - allowed, sorted(loaded & set(NEVER_FOR_STATUS) - allowed)
