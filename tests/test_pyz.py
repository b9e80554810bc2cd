"""patchkit.pyz, the single-file runner: reproducible, self-contained, and invisible to the engine it patches.

Each test builds the archive with scripts/build_pyz.py (from this checkout and this interpreter's installed
dependencies) and runs it as an image would: `python -I patchkit.pyz ...`, the interpreter alone.
"""

from __future__ import annotations

import importlib.util
import json
import marshal
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import patchkit
from tests.conftest import Registry, git_diff, read_tree, write_tree

# version_sensitive: the .pyz under -I -S on this interpreter, with tomli vendored for 3.10.
pytestmark = pytest.mark.version_sensitive

REPO = Path(__file__).resolve().parent.parent
BUILD = REPO / "scripts" / "build_pyz.py"
ENTRYPOINT = REPO / "examples" / "entrypoint.sh"

ENGINE = {
    "tinyengine/__init__.py": b"from tinyengine.ops import scale\n",
    "tinyengine/ops.py": b"".join(b"def op_%d(x):\n    return x * %d\n\n\n" % (i, i) for i in range(1, 12))
    + b"def scale(x):\n    return x * 2\n",
}
PATCHED = {**ENGINE, "tinyengine/ops.py": ENGINE["tinyengine/ops.py"].replace(b"x * 2\n", b"x * 3  # pr9\n")}


def build(out: Path, **env: str) -> Path:
    done = subprocess.run([sys.executable, str(BUILD), "-o", str(out)], capture_output=True, text=True,
                          env={**os.environ, **env}, check=False)
    assert done.returncode == 0, done.stderr
    return out


CHECKED = (3).to_bytes(4, "little")  # PEP 552 flags of a checked hash-based pyc


def pyc_name(source: str, tag: str) -> str:
    folder, _, module = source.rpartition("/")
    return f"{folder}/__pycache__/{module[:-3]}.{tag}.pyc".lstrip("/")


@pytest.fixture(scope="module")
def pyz(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("pyz") / "patchkit.pyz")


def isolated_env(**extra: str) -> dict[str, str]:
    """The environment of a container start: no PATCHKIT_ settings of the test run, a HOME of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PATCHKIT_", "PYTHON", "XDG_"))}
    env.update(extra)
    return env


def run_pyz(pyz: Path, *args: str, env: dict[str, str], cwd: Path, flags: tuple[str, ...] = ("-I",)
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *flags, str(pyz), *args], capture_output=True, text=True, env=env,
                          cwd=cwd, check=False)


def test_two_builds_are_byte_identical_and_hold_checked_bytecode_for_this_python(tmp_path: Path, pyz: Path) -> None:
    again = build(tmp_path / "again.pyz")
    assert again.read_bytes() == pyz.read_bytes()
    assert pyz.read_bytes().startswith(b"#!/usr/bin/env python3\n") and os.access(pyz, os.X_OK)
    with zipfile.ZipFile(pyz) as archive:
        infos = archive.infolist()
        assert archive.testzip() is None
    names = [i.filename for i in infos]
    assert names == sorted(names)
    assert {i.date_time for i in infos} == {(1980, 1, 1, 0, 0, 0)}
    assert not [n for n in names if n.endswith(".so")]
    # One pyc per module, for this interpreter only, each a checked hash-based pyc of the source beside it.
    tag = sys.implementation.cache_tag
    sources = [n for n in names if n.endswith(".py") and n != "__main__.py" and not n.startswith("patchkit/data/")]
    compiled = [n for n in names if "__pycache__" in n]
    assert sorted(pyc_name(n, tag) for n in sources) == compiled
    with zipfile.ZipFile(pyz) as archive:
        for name in sources:
            pyc = archive.read(pyc_name(name, tag))
            assert pyc[:16] == importlib.util.MAGIC_NUMBER + CHECKED + importlib.util.source_hash(archive.read(name))
    assert "__main__.py" in names and "patchkit/cli/main.py" in names and "patchkit/py.typed" in names
    for top in ("click/", "unidiff/", "tomlkit/", "tomli/", "git/", "gitdb/", "smmap/"):
        assert any(n.startswith(top) for n in names), top
    assert [n for n in names if n.startswith("patchkit/data/demo/")] == sorted(
        p.relative_to(REPO).as_posix() for p in (REPO / "patchkit" / "data" / "demo").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )
    # SOURCE_DATE_EPOCH moves the timestamps, and only them.
    dated = build(tmp_path / "dated.pyz", SOURCE_DATE_EPOCH="1700000000")
    with zipfile.ZipFile(dated) as archive:
        assert {i.date_time for i in archive.infolist()} == {(2023, 11, 14, 22, 13, 20)}
        assert [i.filename for i in archive.infolist()] == names


def test_the_demo_runs_from_the_archive_alone_without_site_packages(tmp_path: Path, pyz: Path) -> None:
    # -S: not even the interpreter's own site-packages (this venv's click, unidiff, ...) is there to lean on.
    work = tmp_path / "work"
    work.mkdir()
    done = run_pyz(pyz, "demo", env=isolated_env(HOME=str(tmp_path / "home")), cwd=work, flags=("-I", "-S"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "demo: 8 of 8 steps behaved as expected" in done.stdout
    assert list(work.iterdir()) == [], "the demo left something in the working folder"


def test_its_own_copies_win_over_site_packages_and_version_stays_lazy(tmp_path: Path, pyz: Path) -> None:
    # This interpreter's site-packages holds click, unidiff and gitpython too: -v shows where each came from.
    done = run_pyz(pyz, "--version", env=isolated_env(HOME=str(tmp_path)), cwd=tmp_path, flags=("-I", "-v"))
    assert done.returncode == 0 and done.stdout.splitlines()[0].endswith(patchkit.__version__), done.stderr[-2000:]
    assert done.stdout.splitlines()[2] == f"installed in {pyz}/patchkit"  # --version says which patchkit ran
    imported = dict(re.findall(r"^import '([\w.]+)' # (.*)$", done.stderr, re.MULTILINE))
    ours = {m: where for m, where in imported.items() if m.split(".")[0] in ("patchkit", "click")}
    assert "patchkit.cli.main" in ours and "click.core" in ours
    assert {m: w for m, w in ours.items() if f'"{pyz}' not in w} == {}  # every one from the archive
    assert not [m for m in imported if m.split(".")[0] in ("unidiff", "git", "gitdb", "tomlkit")]


def engine_registry(tmp_path: Path) -> Path:
    registry = Registry(tmp_path / "patches")
    registry.add("tinyengine-pr9", git_diff(tmp_path, ENGINE, PATCHED))
    return registry.path


def test_no_writable_home_or_archive_folder_is_needed(tmp_path: Path, pyz: Path) -> None:
    root = tmp_path / "engine"
    write_tree(root, ENGINE)
    patches = engine_registry(tmp_path)
    shipped = tmp_path / "opt"  # the archive's folder, as an image ships it
    shipped.mkdir()
    shutil.copy2(pyz, shipped / "patchkit.pyz")
    home = tmp_path / "home-is-a-file"  # nothing can be created below it, even by root
    home.write_bytes(b"")
    env = isolated_env(HOME=str(home))
    done = run_pyz(shipped / "patchkit.pyz", "apply", "--all", "--root", str(root), "--patches", str(patches),
                   env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "tinyengine-pr9: applied" in done.stdout
    assert done.stderr == ""  # the cache degrades silently: it only ever saves time
    assert {p: d for p, (d, _) in read_tree(root).items()} == PATCHED
    assert sorted(p.name for p in shipped.iterdir()) == ["patchkit.pyz"]  # no __pycache__ beside it
    assert home.read_bytes() == b""


def test_the_compiled_hunk_set_works_from_the_archive_and_a_new_archive_does_not_believe_it(
    tmp_path: Path, pyz: Path
) -> None:
    """`compile` run by the archive writes a file the same archive loads (observed with a lie: a compiled file
    whose hunk, resealed, writes `x * 4`) and another build of the same version ignores (it parses the diff)."""
    from tests.test_compiled import MAGIC, read_parts, seal

    root = tmp_path / "engine"
    write_tree(root, ENGINE)
    patches = engine_registry(tmp_path)
    env = isolated_env(HOME=str(tmp_path / "home"))
    assert run_pyz(pyz, "compile", "--patches", str(patches), env=env, cwd=tmp_path).returncode == 0
    compiled = patches / "tinyengine-pr9" / "tinyengine-pr9.compiled"
    assert compiled.read_bytes().startswith(MAGIC)
    header, body = read_parts(compiled)
    seal(compiled, header, body.replace(b"x * 3  # pr9\n", b"x * 4  # pr9\n"))
    args = ("apply", "--all", "--root", str(root), "--patches", str(patches))
    other = tmp_path / "other.pyz"  # another build: its code fingerprint is not the one the file is bound to
    shutil.copy2(pyz, other)
    with zipfile.ZipFile(other, "a") as archive:
        archive.writestr("EXTRA.txt", "another build")
    assert run_pyz(other, *args, env=env, cwd=tmp_path).returncode == 0
    assert {p: d for p, (d, _) in read_tree(root).items()} == PATCHED  # parsed: the diff's own hunk
    second = tmp_path / "engine2"
    write_tree(second, ENGINE)
    done = run_pyz(pyz, "apply", "--all", "--root", str(second), "--patches", str(patches), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert b"x * 4  # pr9" in (second / "tinyengine" / "ops.py").read_bytes()  # the compiled file was used
    assert not (tmp_path / "home").exists() or not any((tmp_path / "home").iterdir())


def test_the_restart_fast_path_from_the_archive_trusts_records_of_this_build_only(tmp_path: Path, pyz: Path) -> None:
    """The fast path's code fingerprint covers the archive: another build of patchkit.pyz (whose judgement may
    differ) runs the full judgement on a tree the first build applied, and gives the same answer."""
    root = tmp_path / "engine"
    write_tree(root, ENGINE)
    patches = engine_registry(tmp_path)
    env = isolated_env(HOME=str(tmp_path / "home"), PATCHKIT_DEBUG_FASTPATH="1")
    args = ("apply", "--all", "--root", str(root), "--patches", str(patches))
    assert run_pyz(pyz, *args, env=env, cwd=tmp_path).returncode == 0
    again = run_pyz(pyz, *args, env=env, cwd=tmp_path)
    assert again.returncode == 0 and "fast path used" in again.stderr, again.stderr
    other = tmp_path / "other.pyz"
    shutil.copy2(pyz, other)
    with zipfile.ZipFile(other, "a") as archive:
        archive.writestr("EXTRA.txt", "another build")
    full = run_pyz(other, *args, env=env, cwd=tmp_path)
    assert full.returncode == 0 and "fast path not used" in full.stderr, full.stderr
    assert full.stdout == again.stdout
    assert {p: d for p, (d, _) in read_tree(root).items()} == PATCHED


PROBE = """
import json, os, subprocess, sys
import tinyengine
freeze = subprocess.run([sys.executable, "-m", "pip", "freeze", "--all"], capture_output=True, text=True,
                        check=True).stdout.splitlines()
shell_owned = ("PWD", "OLDPWD", "SHLVL", "_")  # kept up to date by any shell, not the hook's doing
env = {k: v for k, v in os.environ.items() if k not in shell_owned}
print(json.dumps({"freeze": freeze, "modules": sorted(sys.modules), "path": sys.path, "env": env,
                  "scale": tinyengine.scale(1)}))
"""


def test_the_engines_environment_is_untouched_by_a_pyz_start(tmp_path: Path, pyz: Path) -> None:
    """A stand-in engine venv: what its exec'd command sees after the hook is what it sees without it."""
    venv = tmp_path / "engine-venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    write_tree(site, ENGINE)  # installed as pip would leave it: the package and its dist-info
    info = site / "tinyengine-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tinyengine\nVersion: 1.0\n")
    (info / "RECORD").write_text("".join(f"{p},,\n" for p in ENGINE) + "tinyengine-1.0.dist-info/METADATA,,\n")
    (info / "INSTALLER").write_text("pip\n")
    (info / "top_level.txt").write_text("tinyengine\n")
    patches = engine_registry(tmp_path)
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    env = isolated_env(HOME=str(tmp_path / "home"), PATH=f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}")

    def seen(*command: str, **extra: str) -> dict[str, object]:
        done = subprocess.run([*command, str(python), str(probe)], capture_output=True, text=True,
                              env={**env, **extra}, cwd=tmp_path, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        return dict(json.loads(done.stdout.splitlines()[-1]))

    without = seen()
    # As examples/Dockerfile runs it for an engine in a venv: the engine's interpreter runs the archive, and
    # finds the engine's install folder by its distribution name.
    hook = {"PATCHKIT_CMD": f"{python} -I -S {pyz}", "PATCHKIT_ROOT_FROM_PACKAGE": "tinyengine",
            "PATCHKIT_PATCHES": str(patches)}
    started = seen("sh", str(ENTRYPOINT), **hook)
    baseline = seen(**hook)  # the same variables, no hook: the container's own environment
    assert (without["scale"], started["scale"]) == (2, 3)  # the hook did patch the engine
    assert "tinyengine==1.0" in without["freeze"]  # pip sees the stand-in engine
    assert started["freeze"] == without["freeze"]  # nothing installed, upgraded or replaced
    assert started["modules"] == without["modules"]
    assert not {m for m in started["modules"] if m.split(".")[0] in ("patchkit", "click", "unidiff", "git")}
    assert started["path"] == without["path"]
    assert started["env"] == baseline["env"]  # no PYTHONPATH, nothing exported by the hook
    assert not [p for p in site.iterdir() if p.name.split("-")[0].split(".")[0] in ("click", "unidiff", "git")]
    # Run by another interpreter (here: no site-packages at all), --python asks the engine's for the tree.
    other = run_pyz(pyz, "status", "--all", "--root-from-package", "tinyengine", "--python", str(python),
                    "--patches", str(patches), env=env, cwd=tmp_path, flags=("-I", "-S"))
    assert other.returncode == 0 and "tinyengine-pr9" in other.stdout, other.stdout + other.stderr


def _after_pyz(line: str) -> str:
    """The command word of a logged `python -I -S .../patchkit.pyz COMMAND ...` step."""
    words = line.split()
    return words[next(i for i, w in enumerate(words) if w.endswith("patchkit.pyz")) + 1]


FAKE_SRUN = """#!/bin/sh
# srun on one machine: drop srun's options, log the step, run it here.
while [ "$#" -gt 0 ]; do case "$1" in --*) shift ;; *) break ;; esac; done
echo "$*" >> "$SRUN_LOG"
exec "$@"
"""


@pytest.mark.parametrize("shared", [False, True], ids=["node-local", "shared-tree"])
def test_the_slurm_launcher_patches_then_starts_the_engine(tmp_path: Path, pyz: Path, shared: bool) -> None:
    root = tmp_path / "engine"
    write_tree(root, ENGINE)
    patches = engine_registry(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(FAKE_SRUN)
    (bin_dir / "srun").chmod(0o755)
    log = tmp_path / "srun.log"
    env = isolated_env(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", HOME=str(tmp_path / "home"),
                       SRUN_LOG=str(log), ENGINE_ROOT=str(root), PATCHKIT_PYZ=str(pyz),
                       PATCHKIT_PATCHES=str(patches), PATCHKIT_TARGET="engine", ENGINE_PYTHON=sys.executable,
                       PATCHKIT_SHARED_TREE="1" if shared else "0")
    done = subprocess.run(["bash", str(REPO / "examples" / "slurm-launch.sh"), "echo", "engine started"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "engine started"
    assert {p: d for p, (d, _) in read_tree(root).items()} == PATCHED
    steps = [_after_pyz(line) if "patchkit.pyz" in line else line for line in log.read_text().splitlines()]
    assert steps == (["apply", "status", "echo engine started"] if shared else ["apply", "echo engine started"])
    # A tree that cannot be patched stops the job before the engine starts.
    write_tree(root, {"tinyengine/ops.py": ENGINE["tinyengine/ops.py"].replace(b"x * 2\n", b"x * 5\n")})
    refused = subprocess.run(["bash", str(REPO / "examples" / "slurm-launch.sh"), "echo", "engine started"],
                             capture_output=True, text=True, env=env, cwd=tmp_path, check=False)
    assert refused.returncode == 1 and "engine started" not in refused.stdout


def test_lint_from_the_archive_says_the_scan_needs_the_installed_package(tmp_path: Path, pyz: Path) -> None:
    """The scan's shell parser (tree-sitter, compiled) is not in the archive: lint says what to install and
    exits 11 (its own code), before reading anything; --no-scan still checks the registry and waivers."""
    with zipfile.ZipFile(pyz) as archive:
        assert not [n for n in archive.namelist() if n.startswith("tree_sitter")]
    repo = tmp_path / "consumer"
    shutil.copytree(REPO / "fixtures" / "consumer-repo", repo)
    env = isolated_env(HOME=str(tmp_path / "home"))
    done = run_pyz(pyz, "lint", env=env, cwd=repo, flags=("-I", "-S"))
    assert done.returncode == 12, done.stdout + done.stderr
    assert "pip install 'patchkit-engine[lint]'" in done.stderr and "--no-scan" in done.stderr
    assert done.stdout == ""
    done = run_pyz(pyz, "lint", "--no-scan", env=env, cwd=repo, flags=("-I", "-S"))
    assert done.returncode == 1, done.stdout + done.stderr  # findings (without the scan, 2306.md is an orphan)
    assert "PK210" in done.stdout and "PK209" in done.stdout


# The archive's bytecode: used only when it is this Python's and its hash is the source's beside it. The tests
# rewrite one pyc of a built archive (patchkit/__init__.py: every start imports it) with the code of another
# source, and see which of the two runs.

PLANTED = b'__version__ = "planted"\n'


def rewritten(pyz: Path, out: Path, header: bytes) -> Path:
    """`pyz` with patchkit/__init__'s pyc holding PLANTED's code behind `header`, every other entry as built."""
    name = pyc_name("patchkit/__init__.py", sys.implementation.cache_tag)
    out.write_bytes(b"")
    with zipfile.ZipFile(pyz) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == name:
                data = header + marshal.dumps(compile(PLANTED, "patchkit/__init__.py", "exec"))
            target.writestr(info, data)
    return out


def version_line(pyz: Path, tmp_path: Path) -> str:
    done = run_pyz(pyz, "--version", env=isolated_env(HOME=str(tmp_path)), cwd=tmp_path, flags=("-I", "-S"))
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.splitlines()[0]


def test_a_start_takes_the_bytecode_whose_hash_is_the_sources(tmp_path: Path, pyz: Path) -> None:
    with zipfile.ZipFile(pyz) as archive:
        source = archive.read("patchkit/__init__.py")
    header = importlib.util.MAGIC_NUMBER + CHECKED + importlib.util.source_hash(source)
    assert version_line(pyz, tmp_path).endswith(patchkit.__version__)
    assert version_line(rewritten(pyz, tmp_path / "taken.pyz", header), tmp_path).endswith("planted")


@pytest.mark.parametrize("why", ["stale hash", "unchecked hash", "other magic"])
def test_bytecode_that_is_not_the_sources_is_never_run(tmp_path: Path, pyz: Path, why: str) -> None:
    with zipfile.ZipFile(pyz) as archive:
        source = archive.read("patchkit/__init__.py")
    magic, digest = importlib.util.MAGIC_NUMBER, importlib.util.source_hash(source)
    header = {
        "stale hash": magic + CHECKED + importlib.util.source_hash(source + b"# an older source\n"),
        "unchecked hash": magic + (1).to_bytes(4, "little") + digest,  # Python runs these after an edit
        "other magic": bytes([magic[0] ^ 1]) + magic[1:] + CHECKED + digest,
    }[why]
    assert version_line(rewritten(pyz, tmp_path / "ignored.pyz", header), tmp_path).endswith(patchkit.__version__)


def test_doctor_says_whether_the_archive_has_bytecode_for_this_python(tmp_path: Path, pyz: Path) -> None:
    plain = tmp_path / "plain.pyz"
    done = subprocess.run([sys.executable, str(BUILD), "-o", str(plain), "--no-bytecode"], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr
    with zipfile.ZipFile(plain) as archive:
        assert not [n for n in archive.namelist() if "__pycache__" in n]
    patches = engine_registry(tmp_path)
    rows = {}
    for archive in (pyz, plain):
        done = run_pyz(archive, "doctor", "--json", "--patches", str(patches), env=isolated_env(HOME=str(tmp_path)),
                       cwd=tmp_path, flags=("-I", "-S"))
        assert done.returncode == 0, done.stdout + done.stderr  # a warning is no problem
        rows[archive] = next(c for c in json.loads(done.stdout)["checks"] if c["check"] == "patchkit")
    tag = sys.implementation.cache_tag
    assert rows[pyz]["state"] == "ok" and rows[pyz]["detail"].endswith(f"with bytecode for {tag}")
    assert rows[plain]["state"] == "warning" and f"no bytecode for {tag}" in rows[plain]["detail"]
    assert sys.executable in rows[plain]["hint"] and "--bytecode" in rows[plain]["hint"]


@pytest.mark.parametrize("python", ["missing", "fails"])
def test_a_bytecode_interpreter_that_cannot_compile_stops_the_build_with_nothing_written(
    tmp_path: Path, python: str
) -> None:
    fails = tmp_path / "python-that-fails"
    fails.write_text("#!/bin/sh\necho 'SyntaxError: invalid syntax' >&2\nexit 1\n")
    fails.chmod(0o755)
    interpreter = str(tmp_path / "no-such-python") if python == "missing" else str(fails)
    out = tmp_path / "dist" / "patchkit.pyz"
    done = subprocess.run([sys.executable, str(BUILD), "-o", str(out), "--bytecode", interpreter],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("build_pyz: ") and interpreter in done.stderr
    assert ("cannot run" if python == "missing" else "SyntaxError: invalid syntax") in done.stderr
    assert not out.exists() and not out.parent.exists()
