"""The container pre-launch hook, end to end: the real examples/entrypoint.sh run by `sh`, as container starts.

Each start is `sh examples/entrypoint.sh echo started` with the hook's environment, against a small engine tree
of our own (a git checkout, a plain copy, or a site-packages install); diffs are made by real git.

The entrypoint runs the `patchkit` command of this install, or, with PATCHKIT_HOOK_CMD set (CI does), that
command line as the entrypoint's PATCHKIT_CMD, e.g. the single-file runner under an isolated interpreter:

    PATCHKIT_HOOK_CMD="/root/.pyenv/versions/3.10.13/bin/python -I dist/patchkit.pyz" pytest -q tests/test_hook.py

Then this install's bin is left off PATH and a `patchkit` there that fails stands in its way, so a start that
ran anything but PATCHKIT_HOOK_CMD fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from tests.conftest import FileSpec, Registry, copy_tree, git, git_diff, read_tree, write_tree

# version_sensitive: the entrypoint hook runs `python -m patchkit` under this interpreter.
pytestmark = pytest.mark.version_sensitive

REPO = Path(__file__).resolve().parent.parent
ENTRYPOINT = REPO / "examples" / "entrypoint.sh"
BIN = Path(sys.executable).parent  # the interpreter's bin holds the `patchkit` script of this install
HOOK_CMD = os.environ.get("PATCHKIT_HOOK_CMD", "")  # e.g. "python -I dist/patchkit.pyz"
WRONG_PATCHKIT = "#!/bin/sh\necho 'a patchkit on PATH ran instead of PATCHKIT_CMD' >&2\nexit 99\n"


def lines(name: str, count: int) -> bytes:
    return b"".join(b"%s_%d = %d\n" % (name.encode(), i, i) for i in range(1, count + 1))


# The engine: one Python package laid out as it is installed, so the same diffs fit a checkout and site-packages.
PRISTINE: dict[str, FileSpec] = {
    "hookengine/__init__.py": b"",
    "hookengine/kv_cache.py": lines("kv", 30),
    "hookengine/sampler.py": lines("sampler", 20),
    "hookengine/ops.py": lines("op", 12),
}


def edit(files: Mapping[str, FileSpec], path: str, old: bytes, new: bytes) -> dict[str, FileSpec]:
    data = files[path]
    assert isinstance(data, bytes) and data.count(old) == 1
    return {**files, path: data.replace(old, new)}


# pr101 fixes kv_cache.py; pr102, made on top of it, changes pr101's line again and touches sampler.py.
WITH_101 = edit(PRISTINE, "hookengine/kv_cache.py", b"kv_10 = 10\n", b"kv_10 = 10  # pr101\n")
WITH_102 = edit(
    edit(WITH_101, "hookengine/kv_cache.py", b"kv_10 = 10  # pr101\n", b"kv_10 = 11  # pr101, pr102\n"),
    "hookengine/sampler.py", b"sampler_3 = 3\n", b"sampler_3 = 33\n",
)
# A patch for another target: PATCHKIT_TARGET=hookengine leaves it alone.
WITH_KERNEL = edit(PRISTINE, "hookengine/ops.py", b"op_4 = 4\n", b"op_4 = 44\n")


@dataclass(frozen=True)
class Setup:
    workdir: Path
    patches: Path
    pristine: Path  # a git checkout of PRISTINE, the pinned commit of every manifest
    patched: dict[str, tuple[bytes, bool]]  # what every start must leave (besides .git and .patchkit)

    def fresh(self, name: str, *, plain: bool = False) -> Path:
        root = self.workdir / name
        shutil.copytree(self.pristine, root, symlinks=True, ignore=shutil.ignore_patterns(".git") if plain else None)
        return root


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Setup:
    workdir = tmp_path_factory.mktemp("hook")
    decoy = workdir / "decoy-bin"
    decoy.mkdir()
    (decoy / "patchkit").write_text(WRONG_PATCHKIT)
    (decoy / "patchkit").chmod(0o755)
    pristine = workdir / "pristine"
    pristine.mkdir()
    git(pristine, "init", "-q")
    write_tree(pristine, PRISTINE)
    git(pristine, "add", "-A")
    git(pristine, "commit", "-q", "-m", "pinned engine")
    pinned = git(pristine, "rev-parse", "HEAD").stdout.decode().strip()
    registry = Registry(workdir / "patches")
    registry.add("hookengine-pr101", git_diff(workdir, PRISTINE, WITH_101))
    registry.add("hookengine-pr102", git_diff(workdir, WITH_101, WITH_102), extra='after = ["hookengine-pr101"]')
    registry.add("kernels-pr7", git_diff(workdir, PRISTINE, WITH_KERNEL))
    targets = {"hookengine-pr101": "hookengine", "hookengine-pr102": "hookengine", "kernels-pr7": "kernels"}
    for pid, name in targets.items():  # validated on the pristine checkout's commit
        manifest = registry.path / pid / "manifest.toml"
        text = manifest.read_text()
        assert text.count('[target]\nname = "engine"\n') == 1
        manifest.write_text(
            text.replace('[target]\nname = "engine"\n', f'[target]\nname = "{name}"\npinned_commit = "{pinned}"\n')
        )
    patched = {path: (data, False) for path, data in WITH_102.items() if isinstance(data, bytes)}
    return Setup(workdir, registry.path, pristine, patched)


@dataclass(frozen=True)
class Start:
    code: int
    out: str
    err: str

    @property
    def started(self) -> bool:
        """The container's command ran (it prints `started`)."""
        return self.out.splitlines()[-1:] == ["started"]


def hook_env(setup: Setup, root: Path | None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHKIT_")}
    if HOOK_CMD:
        rest = [d for d in env.get("PATH", "").split(os.pathsep) if d and Path(d).resolve() != BIN.resolve()]
        env.update(PATH=os.pathsep.join([str(setup.workdir / "decoy-bin"), *rest]), PATCHKIT_CMD=HOOK_CMD)
    else:
        env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(PATCHKIT_PATCHES=str(setup.patches), PATCHKIT_TARGET="hookengine", **extra)
    if root is not None:
        env["PATCHKIT_ROOT"] = str(root)
    return env


def start(env: Mapping[str, str]) -> Start:
    done = subprocess.run(["sh", str(ENTRYPOINT), "echo", "started"], env=env, capture_output=True, check=False,
                          cwd=REPO)
    return Start(done.returncode, done.stdout.decode(), done.stderr.decode())


def engine_files(root: Path) -> dict[str, tuple[bytes, bool]]:
    """The engine package's files (site-packages holds its metadata beside them)."""
    return {path: data for path, data in read_tree(root).items() if path.startswith("hookengine/")}


def stamps(root: Path) -> dict[str, tuple[int, int]]:
    return {p: (os.stat(root / p).st_ino, os.stat(root / p).st_mtime_ns) for p in PRISTINE}


def assert_first_then_no_op(setup: Setup, env: Mapping[str, str], root: Path) -> None:
    first = start(env)
    assert (first.code, first.started) == (0, True), first.out + first.err
    assert "hookengine-pr101: applied" in first.out and "hookengine-pr102: applied" in first.out
    assert "kernels-pr7" not in first.out  # PATCHKIT_TARGET
    assert engine_files(root) == setup.patched
    before = stamps(root)

    second = start(env)
    assert (second.code, second.started) == (0, True), second.out + second.err
    assert second.out.splitlines()[:2] == [
        "hookengine-pr101: already applied, nothing written",
        "hookengine-pr102: already applied, nothing written",
    ]
    assert stamps(root) == before  # not one file rewritten


def test_first_start_applies_and_the_second_is_a_no_op(setup: Setup) -> None:
    assert HOOK_CMD or BIN.joinpath("patchkit").exists(), "install patchkit into this interpreter (pip install -e .)"
    root = setup.fresh("checkout")
    assert_first_then_no_op(setup, hook_env(setup, root), root)


def test_a_plain_copy_of_the_tree_behaves_the_same(setup: Setup) -> None:
    root = setup.fresh("plain", plain=True)
    assert_first_then_no_op(setup, hook_env(setup, root), root)


@pytest.mark.skipif(" -I " in f" {HOOK_CMD} ", reason="an isolated interpreter ignores PYTHONPATH, which this test "
                    "uses to show patchkit the engine's site-packages; the .pyz reaches an engine's environment "
                    "run by the engine's interpreter, or through --python / PATCHKIT_PYTHON (tests/test_pyz.py)")
def test_a_site_packages_install_found_by_distribution_name(setup: Setup) -> None:
    site = setup.workdir / "site-packages"
    copy_tree(setup.fresh("for-site", plain=True), site)
    info = site / "hookengine-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: hookengine\nVersion: 1.0\n")
    (info / "top_level.txt").write_text("hookengine\n")
    (info / "RECORD").write_text("".join(f"{p},,\n" for p in PRISTINE) + "hookengine-1.0.dist-info/METADATA,,\n")
    env = hook_env(setup, None, PATCHKIT_ROOT_FROM_PACKAGE="hookengine", PYTHONPATH=str(site))
    assert_first_then_no_op(setup, env, site)


def test_four_starts_at_once_end_with_one_writer(setup: Setup) -> None:
    root = setup.fresh("shared-volume")
    env = hook_env(setup, root)
    procs = [
        subprocess.Popen(["sh", str(ENTRYPOINT), "echo", "started"], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd=REPO)
        for _ in range(4)
    ]
    starts = []
    for proc in procs:
        out, err = proc.communicate()
        starts.append(Start(proc.returncode, out.decode(), err.decode()))
    assert [(s.code, s.started) for s in starts] == [(0, True)] * 4, [s.err for s in starts]
    writers = [s for s in starts if "hookengine-pr101: applied" in s.out]
    no_ops = [s for s in starts if "hookengine-pr101: already applied" in s.out]
    assert (len(writers), len(no_ops)) == (1, 3)
    assert read_tree(root) == setup.patched


def test_a_start_after_a_killed_start_recovers(setup: Setup) -> None:
    # Kill points spread over the transaction: writing the journal, the engine files, the applied records.
    pristine = engine_files(setup.pristine)
    mixed = 0
    for kill_after in (2, 8, 12, 25, 40):
        root = setup.fresh(f"killed-{kill_after}")
        killed = start(hook_env(setup, root, PATCHKIT_FAULT_AFTER=str(kill_after)))
        assert killed.code == 128 + 9 and not killed.started, killed.out + killed.err
        assert "entrypoint: patchkit apply --all exited 137" in killed.err and "does not start" in killed.err
        journal = (root / ".patchkit" / "journal.json").exists()
        mixed += engine_files(root) not in (pristine, setup.patched)

        again = start(hook_env(setup, root))
        assert (again.code, again.started) == (0, True), again.out + again.err
        recovered = "recovered an interrupted apply --all of hookengine-pr101, hookengine-pr102" in again.err
        assert recovered == journal, (kill_after, again.err)
        assert engine_files(root) == setup.patched
        assert not (root / ".patchkit" / "journal.json").exists()
    assert mixed, "no kill point left a half-patched tree to recover; move them into the tree writes"


def test_a_start_that_cannot_patch_stops_with_the_patch_the_file_and_what_to_do(setup: Setup) -> None:
    root = setup.fresh("bumped-image")
    write_tree(root, edit(PRISTINE, "hookengine/sampler.py", b"sampler_3 = 3\n", b"sampler_3 = 300\n"))
    before = read_tree(root)
    refused = start(hook_env(setup, root))
    assert refused.code == 1 and not refused.started
    assert "hookengine-pr101: skipped" in refused.out
    assert "hookengine-pr102: refused: the tree conflicts with the patch; nothing written" in refused.out
    assert "stopped at hookengine-pr102: hookengine/sampler.py conflicts with the patch" in refused.out
    assert "what to do: see the hunks with `patchkit status hookengine-pr102" in refused.out
    assert "entrypoint: patchkit apply --all exited 1" in refused.err
    assert read_tree(root) == before


def test_the_emergency_skip_starts_unpatched_and_says_so_on_every_start(setup: Setup) -> None:
    root = setup.fresh("emergency")
    before = read_tree(root)
    for _ in range(2):
        skipped = start(hook_env(setup, root, PATCHKIT_SKIP_REASON="INC-42 patchkit broken on this node"))
        assert (skipped.code, skipped.started) == (0, True), skipped.err
        assert "WARNING: PATCHKIT_SKIP_REASON is set ('INC-42 patchkit broken on this node')" in skipped.err
        assert "WITHOUT applying any patch" in skipped.err
        assert skipped.out == "started\n"  # patchkit did not run at all
    assert read_tree(root) == before and not (root / ".patchkit").exists()
    # An empty value is no reason: the start patches as usual.
    patched = start(hook_env(setup, root, PATCHKIT_SKIP_REASON=""))
    assert (patched.code, patched.started) == (0, True) and "WARNING" not in patched.err
    assert engine_files(root) == setup.patched


def test_the_command_gets_the_containers_environment_unchanged(setup: Setup) -> None:
    root = setup.fresh("environment")
    env = hook_env(setup, root)
    # Variables every shell keeps up to date itself (bash as sh adds SHLVL and _) are not the hook's doing.
    probe = [sys.executable, "-c", "import json, os; print(json.dumps({k: v for k, v in os.environ.items() "
             "if k not in ('PWD', 'OLDPWD', 'SHLVL', '_')}))"]
    done = subprocess.run(["sh", str(ENTRYPOINT), *probe], env=env, capture_output=True, check=True, cwd=REPO)
    assert json.loads(done.stdout.decode().splitlines()[-1]) == json.loads(
        subprocess.run(probe, env=env, capture_output=True, check=True, cwd=REPO).stdout
    )  # nothing the hook sets (a PYTHONPATH, an exported variable) reaches the engine
    assert engine_files(root) == setup.patched


# -------------------------------------------------------------------------------------- docs and the image


def test_the_hook_docs_name_every_environment_variable_and_exit_code() -> None:
    from patchkit.cli.commands.apply import command

    docs = (REPO / "docs" / "hook.md").read_text(encoding="utf-8")
    envvars = {p.envvar for p in command.params if isinstance(p, click.Option) and isinstance(p.envvar, str)}
    assert envvars == {
        "PATCHKIT_ROOT", "PATCHKIT_ROOT_FROM_PACKAGE", "PATCHKIT_PYTHON", "PATCHKIT_PATCHES", "PATCHKIT_TARGET",
    }
    for name in envvars:
        assert f"`{name}`" in docs, name
        assert name in ENTRYPOINT.read_text(encoding="utf-8"), name
    for code in (0, 1, 2, 6, 7, 8):
        assert f"| {code} |" in docs, code


def test_the_dockerfile_pins_the_engine_and_runs_the_entrypoint_it_copies() -> None:
    dockerfile = (REPO / "examples" / "Dockerfile").read_text(encoding="utf-8")
    assert "ARG ENGINE_IMAGE\nFROM ${ENGINE_IMAGE}\n" in dockerfile  # no default: the build must name the image
    assert "COPY examples/entrypoint.sh /usr/local/bin/patchkit-entrypoint\n" in dockerfile
    assert 'ENTRYPOINT ["/usr/local/bin/patchkit-entrypoint"]\n' in dockerfile
    assert "COPY patches/ /opt/patchkit/patches/\n" in dockerfile
    # The single-file runner, run isolated by the image's interpreter; nothing pip-installed into the image.
    assert "COPY dist/patchkit.pyz /opt/patchkit/patchkit.pyz\n" in dockerfile
    assert 'ENV PATCHKIT_CMD="${ENGINE_PYTHON} -I -S /opt/patchkit/patchkit.pyz"' in dockerfile
    # The build compiles every patch's hunk set into the image (a first start parses nothing), then dry-runs.
    assert "RUN ${PATCHKIT_CMD} --version && ${PATCHKIT_CMD} compile && ${PATCHKIT_CMD} apply --all --dry-run \\\n" \
        in dockerfile
    assert not [line for line in dockerfile.splitlines() if "pip install" in line and not line.startswith("#")]
