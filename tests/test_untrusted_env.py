"""Issue 21, the engine's Python environment: `--root-from-package` run as root on an environment a service
user owns. The user's metadata must not move a root-run write outside the environment, and neither `--python`
nor the `.pyz` under the engine's interpreter may run the environment's code (`.pth` files, a replaced
interpreter).

Each test builds a real venv (`python -m venv`), writes a fake engine distribution into its site-packages,
gives it to a real unprivileged user where the attack is that user's, and drives the real CLI: forked
(patchkit's own interpreter, the environment on its sys.path), with `--python`, or as the `.pyz` run by the
environment's interpreter. A root-owned sentinel folder outside the environment stands for `/root` or `/etc`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import needs_root
from tests.safety_helpers import Run, add_patch, chown_tree, image, run_forked, shared_workdir

# version_sensitive: the engine's interpreter, its site-packages, .pth files and metadata; -I vs -S.
pytestmark = [needs_root, pytest.mark.version_sensitive]

REPO = Path(__file__).resolve().parent.parent
DIST = "tinyeng"
CORE = b"".join(b"value_%d = %d\n" % (i, i) for i in range(1, 11))
# A creation: it applies at whatever root patchkit picks, which is the point of the attack.
DIFF = b"--- /dev/null\n+++ b/newpkg/new.py\n@@ -0,0 +1 @@\n+planted = True\n"
PID = "env-pr1"


class World:
    """A work folder with a template venv, a registry, a sentinel folder and a marker path for `.pth` runs."""

    def __init__(self, workdir: Path, user: tuple[int, int]) -> None:
        self.workdir = workdir
        self.user = user
        self.patches = workdir / "patches"
        add_patch(self.patches, PID, DIFF)
        self.sentinel = workdir / "sentinel"  # root's, outside every environment: /root or /etc in the report
        (self.sentinel / "pkg").mkdir(parents=True)
        (self.sentinel / "secret.txt").write_bytes(b"root only\n")
        self.template = workdir / "template-venv"
        base = getattr(sys, "_base_executable", sys.executable)
        subprocess.run([base, "-m", "venv", "--without-pip", str(self.template)], check=True, capture_output=True)
        self.pyz = workdir / "patchkit.pyz"
        subprocess.run([sys.executable, str(REPO / "scripts" / "build_pyz.py"), "-o", str(self.pyz)], check=True,
                       capture_output=True)
        self.count = 0

    def env(self, owner: str = "user", copies: bool = False) -> tuple[Path, Path]:
        """A fresh venv with the engine distribution installed, owned by the user (or root): (venv, site).
        With `copies`, made by `venv --copies`: its bin/python is a file of its own, not a link."""
        self.count += 1
        venv = self.workdir / f"venv-{self.count}"
        if copies:
            base = getattr(sys, "_base_executable", sys.executable)
            subprocess.run([base, "-m", "venv", "--without-pip", "--copies", str(venv)], check=True,
                           capture_output=True)
        else:
            shutil.copytree(self.template, venv, symlinks=True)
        site = next(venv.glob("lib/python3.*/site-packages"))
        (site / DIST).mkdir()
        (site / DIST / "__init__.py").write_bytes(b"")
        (site / DIST / "core.py").write_bytes(CORE)
        info = site / f"{DIST}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {DIST}\nVersion: 1.0\n")
        (info / "top_level.txt").write_text(f"{DIST}\n")
        (info / "RECORD").write_text(f"{DIST}/__init__.py,,\n{DIST}/core.py,,\n{DIST}-1.0.dist-info/RECORD,,\n")
        (info / "INSTALLER").write_text("pip\n")
        if owner == "user":
            chown_tree(venv, *self.user)
        return venv, site

    def outside(self) -> dict[str, object]:
        """Everything a hijacked root would have written to: the sentinel, the work folder's own entries."""
        return {"sentinel": image(self.sentinel), "top": sorted(p.name for p in self.workdir.iterdir()),
                "root-state": (Path("/") / ".patchkit").exists(), "root-newpkg": (Path("/") / "newpkg").exists()}


@pytest.fixture(scope="module")
def world(user: tuple[int, int]) -> Iterator[World]:
    with shared_workdir() as workdir:
        yield make_world(workdir, user)


def make_world(workdir: Path, user: tuple[int, int]) -> World:
    os.chmod(workdir, 0o755)  # the unprivileged user must reach its environment
    return World(workdir, user)


def args(world: World, action: str, *extra: str) -> list[str]:
    return [action, PID, "--root-from-package", DIST, "--patches", str(world.patches), *extra]


def run_in_process(world: World, site: Path, action: str, monkeypatch: pytest.MonkeyPatch, *extra: str) -> Run:
    """The CLI in a forked copy of this process, the environment's site-packages on its sys.path."""
    monkeypatch.syspath_prepend(str(site))
    return run_forked(args(world, action, *extra))


def run_pyz(
    world: World, venv: Path, *argv: str, flags: tuple[str, ...] = ("-I", "-S")
) -> subprocess.CompletedProcess[str]:
    """The `.pyz` run by the environment's own interpreter, as examples/Dockerfile runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PATCHKIT_", "PYTHON"))}
    return subprocess.run([str(venv / "bin" / "python"), *flags, str(world.pyz), *argv], capture_output=True,
                          text=True, env=env, cwd=world.workdir, check=False)


def plant_pth(site: Path, marker: Path) -> None:
    """A `.pth` line that runs code at interpreter start (site.py execs lines starting with `import`)."""
    (site / "zz-planted.pth").write_text(f"import os; open({str(marker)!r}, 'w').write(str(os.geteuid()))\n")


# --------------------------------------------------------------------------- metadata moving the root


def _hostile_metadata(world: World, site: Path, variant: str) -> None:
    info = site / f"{DIST}-1.0.dist-info"
    if variant == "direct-url":
        (info / "direct_url.json").write_text(json.dumps({"url": world.sentinel.as_uri(),
                                                         "dir_info": {"editable": True}}))
    elif variant == "top-level":
        (info / "top_level.txt").write_text(f"{world.sentinel / 'pkg'}\n")
        shutil.rmtree(site / DIST)  # only the planted name can be found
    elif variant == "record":
        (info / "RECORD").write_text(f"{world.sentinel / 'pkg' / 'x.py'},,\n")
        (info / "top_level.txt").unlink()
        shutil.rmtree(site / DIST)
    for path in (info, *info.iterdir()):
        os.chown(path, *world.user)


VARIANTS = ["direct-url", "top-level", "record"]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("how", ["in-process", "python"])
def test_metadata_the_service_user_wrote_never_moves_a_root_run_write(
    world: World, monkeypatch: pytest.MonkeyPatch, variant: str, how: str
) -> None:
    venv, site = world.env("user")
    _hostile_metadata(world, site, variant)
    before = world.outside()
    if how == "python":
        run = run_forked(args(world, "apply", "--python", str(venv / "bin" / "python")))
    else:
        run = run_in_process(world, site, "apply", monkeypatch)
    assert world.outside() == before, f"written outside the environment: exit {run.code} {run.err}"
    assert run.code == 2, (run.code, run.out, run.err)
    assert f"is owned by uid {world.user[0]}" in run.err and "Traceback" not in run.err, run.err
    assert "nothing was read or written" in run.err and "chown -R root:" in run.err
    assert not (site / "newpkg").exists()  # refused, not applied to the environment either


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_pyz_under_the_engines_interpreter_follows_the_same_rule(world: World, variant: str) -> None:
    venv, site = world.env("user")
    _hostile_metadata(world, site, variant)
    before = world.outside()
    for flags in (("-I",), ("-I", "-S")):
        done = run_pyz(world, venv, *args(world, "apply"), flags=flags)
        assert world.outside() == before, f"{flags}: written outside: {done.returncode} {done.stderr}"
        assert done.returncode == 2, (flags, done.stdout, done.stderr)
        assert f"is owned by uid {world.user[0]}" in done.stderr, done.stderr
        assert ("started without -S" in done.stderr) == (flags == ("-I",)), done.stderr


def test_a_root_owned_environment_keeps_the_root_inside_site_packages(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Metadata nobody else could write is used, but an absolute name in top_level.txt or RECORD still never
    names a root: the root is the site-packages folder, whatever the files say."""
    venv, site = world.env("root")
    info = site / f"{DIST}-1.0.dist-info"
    (info / "top_level.txt").write_text(f"{world.sentinel / 'pkg'}\n{DIST}\n")
    (info / "RECORD").write_text(f"/{world.sentinel.relative_to('/')}/pkg/x.py,,\n{DIST}/core.py,,\n")
    before = world.outside()
    for run in (run_forked(args(world, "status", "--json", "--python", str(venv / "bin" / "python"))),
                run_in_process(world, site, "status", monkeypatch, "--json")):
        assert run.code == 3, (run.code, run.err)
        assert run.json()["root"] == str(site.resolve())
    (info / "top_level.txt").write_text(f"{world.sentinel / 'pkg'}\n")
    (info / "RECORD").write_text(f"{world.sentinel / 'pkg' / 'x.py'},,\n../../../{world.sentinel.name}/pkg/y.py,,\n")
    shutil.rmtree(site / DIST)
    for run in (run_forked(args(world, "apply", "--python", str(venv / "bin" / "python"))),
                run_in_process(world, site, "apply", monkeypatch)):
        assert world.outside() == before, f"written outside the environment: exit {run.code} {run.err}"
        assert run.code == 2 and "has no top-level package folder" in run.err, run.err


def test_a_single_metadata_file_another_user_owns_is_refused(world: World) -> None:
    venv, site = world.env("root")
    direct = site / f"{DIST}-1.0.dist-info" / "direct_url.json"
    direct.write_text(json.dumps({"url": world.sentinel.as_uri(), "dir_info": {"editable": True}}))
    os.chown(direct, *world.user)
    before = world.outside()
    run = run_forked(args(world, "apply", "--python", str(venv / "bin" / "python")))
    assert run.code == 2 and str(direct) in run.err and f"is owned by uid {world.user[0]}" in run.err, run.err
    assert f"the metadata file is owned by uid {world.user[0]}" in run.err, run.err  # itself, not a folder above
    assert world.outside() == before
    os.chown(direct, 0, 0)
    direct.chmod(0o666)
    run = run_forked(args(world, "apply", "--python", str(venv / "bin" / "python")))
    assert run.code == 2 and "writable by group or others" in run.err, run.err
    assert world.outside() == before


def test_an_editable_install_is_its_source_folder_only_when_that_is_trusted(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv, site = world.env("root")
    source = world.workdir / f"checkout-{world.count}"
    (source / DIST).mkdir(parents=True)
    (source / DIST / "core.py").write_bytes(CORE)
    direct = site / f"{DIST}-1.0.dist-info" / "direct_url.json"
    direct.write_text(json.dumps({"url": source.as_uri(), "dir_info": {"editable": True}}))
    python = str(venv / "bin" / "python")
    run = run_forked(args(world, "status", "--json", "--python", python))
    assert (run.code, run.json()["root"]) == (3, str(source)), run.err
    chown_tree(source, *world.user)  # the service user's checkout: root would write where that user says
    before = world.outside()
    for run in (run_forked(args(world, "apply", "--python", python)),
                run_in_process(world, site, "apply", monkeypatch)):
        assert run.code == 2 and "the source folder of the editable install" in run.err, run.err
        assert f"is owned by uid {world.user[0]}" in run.err
    assert world.outside() == before and not (source / "newpkg").exists()


# --------------------------------------------------------------------------- the probe runs no code


@pytest.mark.parametrize("layout", ["symlinks", "copies"])
def test_python_runs_no_pth_file_of_the_environment(world: World, layout: str) -> None:
    """`-I` alone still runs `site`, and with it every `.pth` of site-packages: as root. With `--copies` the
    venv's own bin/python is what runs, and its `site` would read the venv's site-packages."""
    venv, site = world.env("root", copies=layout == "copies")
    assert (venv / "bin" / "python").is_symlink() == (layout == "symlinks")
    marker = world.workdir / f"pth-ran-{world.count}"
    plant_pth(site, marker)
    run = run_forked(args(world, "status", "--json", "--python", str(venv / "bin" / "python")))
    assert run.code == 3 and run.json()["root"] == str(site.resolve()), run.err
    assert not marker.exists(), "a .pth file of the engine's environment ran"
    # The same environment given to the user: still no .pth run, and refused.
    chown_tree(venv, *world.user)
    run = run_forked(args(world, "status", "--python", str(venv / "bin" / "python")))
    assert run.code == 2 and not marker.exists(), run.err


def test_an_interpreter_another_user_can_replace_is_never_run_as_root(world: World) -> None:
    venv, _ = world.env("user")
    marker = world.workdir / f"interpreter-ran-{world.count}"
    python = venv / "bin" / "python"
    python.unlink()  # the user's own "interpreter": records who ran it, then behaves like Python
    python.write_text(f"#!/bin/sh\nid -u > {marker}\nexec {sys.executable} \"$@\"\n")
    os.chown(python, *world.user)
    python.chmod(0o755)
    run = run_forked(args(world, "status", "--python", str(python)))
    assert run.code == 2 and not marker.exists(), (run.code, run.err)
    assert f"is owned by uid {world.user[0]}" in run.err and "running it would run" in run.err, run.err
    # Root's interpreter in a folder the user may write: replaceable too.
    own = world.workdir / f"bin-{world.count}"
    own.mkdir()
    shutil.copy2(python, own / "python")
    os.chown(own, *world.user)
    run = run_forked(args(world, "status", "--python", str(own / "python")))
    assert run.code == 2 and not marker.exists() and str(own) in run.err, run.err


def test_the_pyz_finds_a_root_owned_environment_under_minus_s(world: World) -> None:
    """examples/Dockerfile runs the .pyz with -I -S (no .pth runs): site-packages is named explicitly."""
    venv, site = world.env("root")
    marker = world.workdir / f"pyz-pth-{world.count}"
    plant_pth(site, marker)
    done = run_pyz(world, venv, *args(world, "status", "--json"))
    assert done.returncode == 3, done.stderr
    assert json.loads(done.stdout)["root"] == str(site.resolve())
    assert not marker.exists()


def test_a_world_writable_sticky_interpreter_file_is_never_run(world: World) -> None:
    """The sticky bit protects the entries of a folder (nobody else renames what is in /tmp); on a file it
    protects nothing: anyone may rewrite a 1777 interpreter, so it is refused like any world-writable file."""
    venv, _ = world.env("root")
    marker = world.workdir / f"sticky-ran-{world.count}"
    python = world.workdir / f"sticky-bin-{world.count}" / "python"
    python.parent.mkdir()
    python.write_text(f"#!/bin/sh\nid -u > {marker}\nexec {venv / 'bin' / 'python'} \"$@\"\n")
    python.chmod(0o1777)
    assert python.stat().st_uid == 0
    for given in (["--python", str(python)], []):
        env = {} if given else {"PATCHKIT_PYTHON": str(python)}
        run = run_forked(args(world, "status", *given), env)
        assert run.code == 2 and not marker.exists(), (run.code, run.err)
        assert "writable by group or others (mode 1777)" in run.err and "it was not run" in run.err, run.err
