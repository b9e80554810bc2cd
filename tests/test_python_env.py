"""--root-from-package with --python / PATCHKIT_PYTHON: a real venv made from another Python (pyenv), with a
tiny distribution installed by its own pip, found from metadata without ever importing the package."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import Registry, cli, git_diff

# version_sensitive: --python / PATCHKIT_PYTHON: interpreters, venvs and their site-packages.
pytestmark = pytest.mark.version_sensitive

PYENV = Path("/root/.pyenv/versions")
OTHER = next((v / "bin/python" for v in sorted(PYENV.glob("3.1[03]*")) if (v / "bin/python").exists()), None)

MODULE = b"".join(b"value_%d = %d\n" % (i, i) for i in range(1, 21))


def _wheel(folder: Path, marker: Path) -> Path:
    """A minimal, valid wheel of distribution `tinyeng` (package `tinyeng`), whose import leaves a marker."""
    init = f"open({str(marker)!r}, 'w').write('imported')\n".encode()
    files = {
        "tinyeng/__init__.py": init,
        "tinyeng/core.py": MODULE,
        "tinyeng-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tinyeng\nVersion: 1.0\n",
        "tinyeng-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
        "tinyeng-1.0.dist-info/top_level.txt": b"tinyeng\n",
    }
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append("tinyeng-1.0.dist-info/RECORD,,")
    path = folder / "tinyeng-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, data in files.items():
            wheel.writestr(name, data)
        wheel.writestr("tinyeng-1.0.dist-info/RECORD", "\n".join(record) + "\n")
    return path


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    if OTHER is None:
        pytest.skip("no pyenv Python 3.10 / 3.13 on this machine")
    work = tmp_path_factory.mktemp("engine-venv")
    env_dir = work / "venv"
    subprocess.run([str(OTHER), "-m", "venv", "--without-pip", str(env_dir)], check=True, capture_output=True)
    marker = work / "imported.txt"
    wheel = _wheel(work, marker)
    python = env_dir / "bin/python"
    # Our pip installs into the other interpreter's environment (faster than bootstrapping pip in it).
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-index",
                    "--no-deps", str(wheel)], check=True, capture_output=True)
    site = next(env_dir.glob("lib/python3.*/site-packages"))
    assert (site / "tinyeng/core.py").read_bytes() == MODULE
    return python, site, marker


def test_the_package_is_found_in_the_other_environment(
    tmp_path: Path, registry: Registry, venv: tuple[Path, Path, Path]
) -> None:
    python, site, marker = venv
    diff = git_diff(tmp_path, {"tinyeng/core.py": MODULE},
                    {"tinyeng/core.py": MODULE.replace(b"value_7 = 7\n", b"value_7 = 70\n")})
    registry.add("p", diff)
    result = cli("status", "p", "--root-from-package", "tinyeng", "--python", python, "--patches", registry.path,
                 "--json")
    assert result.code == 3, result.out + result.err
    assert result.json()["root"] == str(site.resolve())
    # Our own interpreter does not have it: the environment variable selects the engine's.
    assert cli("status", "p", "--root-from-package", "tinyeng", "--patches", registry.path).code == 2
    os.environ["PATCHKIT_PYTHON"] = str(python)
    try:
        assert cli("status", "p", "--root-from-package", "tinyeng", "--patches", registry.path).code == 3
    finally:
        del os.environ["PATCHKIT_PYTHON"]
    assert not marker.exists()  # found from metadata; the package was never imported


def test_a_name_not_installed_says_which_interpreter_and_paths(
    registry: Registry, venv: tuple[Path, Path, Path]
) -> None:
    python, site, _ = venv
    registry.add("p", b"x\n")
    result = cli("status", "p", "--root-from-package", "no-such-dist", "--python", python, "--patches",
                 registry.path)
    assert result.code == 2
    assert f"no distribution named 'no-such-dist' is installed for {python}" in result.err
    assert str(site) in result.err  # the search path is listed
    own = cli("status", "p", "--root-from-package", "no-such-dist", "--patches", registry.path)
    assert own.code == 2 and "patchkit's own interpreter" in own.err and "--python" in own.err


def test_a_python_that_is_not_one_is_a_clear_error(tmp_path: Path, registry: Registry) -> None:
    registry.add("p", b"x\n")
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho not json\n")
    fake.chmod(0o755)
    result = cli("status", "p", "--root-from-package", "x", "--python", fake, "--patches", registry.path)
    assert result.code == 2 and "could not read its installed distributions" in result.err
    result = cli("status", "p", "--root-from-package", "x", "--python", tmp_path / "nope", "--patches",
                 registry.path)
    assert result.code == 2 and "cannot run the Python interpreter" in result.err


def test_a_force_reinstall_undoing_the_patch_reads_unapplied(
    tmp_path: Path, registry: Registry, venv: tuple[Path, Path, Path]
) -> None:
    python, site, marker = venv
    diff = git_diff(tmp_path, {"tinyeng/core.py": MODULE},
                    {"tinyeng/core.py": MODULE.replace(b"value_7 = 7\n", b"value_7 = 70\n")})
    registry.add("p", diff)
    args = ("--root-from-package", "tinyeng", "--python", python, "--patches", registry.path)
    assert cli("apply", "p", *args).code == 0
    assert b"value_7 = 70" in (site / "tinyeng/core.py").read_bytes()
    wheel = next(python.parent.parent.parent.glob("tinyeng-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-index",
                    "--no-deps", "--force-reinstall", str(wheel)], check=True, capture_output=True)
    assert (site / "tinyeng/core.py").read_bytes() == MODULE
    status = cli("status", "p", *args, "--json")
    assert status.code == 3 and status.json()["state"] == "unapplied"
    text = cli("status", "p", *args).out
    assert "the tree does not have it now" in text and "force-reinstall" in text and "retire" not in text
    assert cli("apply", "p", *args).code == 0  # back in, record rewritten
    assert cli("status", "p", *args, "--json").json()["provenance"]["origin"] == "this-version"
    assert cli("revert", "p", *args).code == 0
    assert (site / "tinyeng/core.py").read_bytes() == MODULE
    assert not marker.exists()


def test_a_python_named_without_a_folder_is_looked_up_in_path(
    registry: Registry, venv: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    python, site, _ = venv
    registry.add("p", b"--- /dev/null\n+++ b/newpkg/x.py\n@@ -0,0 +1 @@\n+x = 1\n")
    monkeypatch.setenv("PATH", f"{python.parent}{os.pathsep}{os.environ['PATH']}")
    result = cli("status", "p", "--root-from-package", "tinyeng", "--python", "python", "--patches", registry.path,
                 "--json")
    assert result.code == 3 and result.json()["root"] == str(site.resolve()), result.err


def _base_with_pip() -> tuple[Path, str]:
    """The other Python and its base installation's site-packages, which holds pip (skipped if it does not)."""
    if OTHER is None:
        pytest.skip("no pyenv Python 3.10 / 3.13 on this machine")
    base = subprocess.run([str(OTHER), "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    if not next(Path(base).glob("pip-*.dist-info"), None):
        pytest.skip(f"no pip in {base}")
    return OTHER, base


def test_a_venv_reads_the_base_site_packages_only_when_its_pyvenv_cfg_says_so(
    tmp_path: Path, registry: Registry
) -> None:
    # pip is installed in the base interpreter's site-packages, never in a venv made --without-pip: a venv
    # sees it only with include-system-site-packages = true, as `site` would.
    other, base = _base_with_pip()
    registry.add("p", b"--- /dev/null\n+++ b/newpkg/x.py\n@@ -0,0 +1 @@\n+x = 1\n")
    for flags, sees in (((), False), (("--system-site-packages",), True)):
        env_dir = tmp_path / ("system" if sees else "isolated")
        subprocess.run([str(other), "-m", "venv", "--without-pip", *flags, str(env_dir)], check=True,
                       capture_output=True)
        result = cli("status", "p", "--root-from-package", "pip", "--python", env_dir / "bin/python",
                     "--patches", registry.path, "--json")
        if sees:
            assert result.code == 3 and result.json()["root"] == str(Path(base).resolve()), result.err
        else:
            assert result.code == 2 and "no distribution named 'pip'" in result.err, result.err
            assert base not in result.err.split("searched:")[1]


def test_an_editable_install_whose_source_folder_is_gone_names_its_direct_url(
    tmp_path: Path, registry: Registry, venv: tuple[Path, Path, Path]
) -> None:
    python, site, _ = venv
    info = site / "goneeng-1.0.dist-info"
    info.mkdir()
    try:
        (info / "METADATA").write_bytes(b"Metadata-Version: 2.1\nName: goneeng\nVersion: 1.0\n")
        gone = tmp_path / "removed-checkout"
        (info / "direct_url.json").write_text(f'{{"url": "file://{gone}", "dir_info": {{"editable": true}}}}')
        registry.add("p", b"--- /dev/null\n+++ b/newpkg/x.py\n@@ -0,0 +1 @@\n+x = 1\n")
        result = cli("status", "p", "--root-from-package", "goneeng", "--python", python, "--patches",
                     registry.path)
        assert result.code == 2, result.out + result.err
        assert f"names the source folder {gone}, which is not a folder" in result.err
        assert str(info / "direct_url.json") in result.err
    finally:
        for child in info.iterdir():
            child.unlink()
        info.rmdir()


def test_a_record_line_names_a_package_by_its_path_only(
    tmp_path: Path, registry: Registry, venv: tuple[Path, Path, Path]
) -> None:
    # RECORD is `path,hash,size`: a hash with a `/` in it (no real one has: urlsafe base64) must not make the
    # path's file a folder name, and the dist-info folder's own files name no package. The one file here is
    # top-level, so there is no package folder to find, even with folders named like that file, and like it
    # and the start of that hash, beside it (another distribution's, or put there).
    python, site, _ = venv
    info, decoys = site / "fileeng-1.0.dist-info", (site / "fileeng_mod.py", site / "fileeng_mod.py,sha256=ab")
    info.mkdir()
    for decoy in decoys:
        decoy.mkdir()
    try:
        (info / "METADATA").write_bytes(b"Metadata-Version: 2.1\nName: fileeng\nVersion: 1.0\n")
        (info / "RECORD").write_bytes(b"fileeng_mod.py,sha256=ab/cd,5\nfileeng-1.0.dist-info/METADATA,sha256=ef,50\n"
                                     b"fileeng-1.0.dist-info/RECORD,,\n")
        registry.add("p", b"--- /dev/null\n+++ b/newpkg/x.py\n@@ -0,0 +1 @@\n+x = 1\n")
        result = cli("status", "p", "--root-from-package", "fileeng", "--python", python, "--patches",
                     registry.path)
        assert result.code == 2 and "has no top-level package folder" in result.err, result.out + result.err
    finally:
        for child in info.iterdir():
            child.unlink()
        info.rmdir()
        for decoy in decoys:
            decoy.rmdir()


def test_a_pyvenv_cfg_that_is_a_link_is_not_read(tmp_path: Path, registry: Registry) -> None:
    # The venv's pyvenv.cfg is read without following a final link (it could point anywhere): a venv whose
    # pyvenv.cfg is a link is no venv to patchkit, so the interpreter is its base installation, where pip is.
    other, base = _base_with_pip()
    env_dir = tmp_path / "linked"
    subprocess.run([str(other), "-m", "venv", "--without-pip", str(env_dir)], check=True, capture_output=True)
    config = env_dir / "pyvenv.cfg"
    config.rename(tmp_path / "elsewhere.cfg")
    config.symlink_to(tmp_path / "elsewhere.cfg")
    registry.add("p", b"--- /dev/null\n+++ b/newpkg/x.py\n@@ -0,0 +1 @@\n+x = 1\n")
    result = cli("status", "p", "--root-from-package", "pip", "--python", env_dir / "bin/python", "--patches",
                 registry.path, "--json")
    assert result.code == 3 and result.json()["root"] == str(Path(base).resolve()), result.err


def test_a_pyvenv_cfg_without_the_system_site_packages_key_keeps_the_venv_isolated(
    tmp_path: Path, registry: Registry
) -> None:
    # `site` reads a missing include-system-site-packages as false: pip, in the base site-packages only, is not
    # found through such a venv.
    other, base = _base_with_pip()
    env_dir = tmp_path / "keyless"
    subprocess.run([str(other), "-m", "venv", "--without-pip", str(env_dir)], check=True, capture_output=True)
    config = env_dir / "pyvenv.cfg"
    lines = config.read_text().splitlines(keepends=True)
    config.write_text("".join(x for x in lines if not x.startswith("include-system-site-packages")))
    registry.add("p", b"--- /dev/null\n+++ b/newpkg/x.py\n@@ -0,0 +1 @@\n+x = 1\n")
    result = cli("status", "p", "--root-from-package", "pip", "--python", env_dir / "bin/python", "--patches",
                 registry.path)
    assert result.code == 2 and "no distribution named 'pip'" in result.err, result.err
    assert base not in result.err.split("searched:")[1]


def test_a_record_of_a_few_mebibytes_is_read(tmp_path: Path, registry: Registry, venv: tuple[Path, Path, Path]) -> None:
    # The largest wheels' RECORD (torch) is a few MiB: it is read, not refused as too large.
    python, site, _ = venv
    info, package = site / "bigeng-1.0.dist-info", site / "bigeng"
    info.mkdir()
    package.mkdir()
    try:
        (info / "METADATA").write_bytes(b"Metadata-Version: 2.1\nName: bigeng\nVersion: 1.0\n")
        (info / "RECORD").write_bytes(b"".join(b"bigeng/m%06d.py,sha256=%s,10\n" % (i, b"a" * 43)
                                               for i in range(40000)))
        registry.add("p", b"--- /dev/null\n+++ b/newpkg/x.py\n@@ -0,0 +1 @@\n+x = 1\n")
        result = cli("status", "p", "--root-from-package", "bigeng", "--python", python, "--patches",
                     registry.path, "--json")
        assert result.code == 3 and result.json()["root"] == str(site.resolve()), result.out + result.err
    finally:
        for child in info.iterdir():
            child.unlink()
        info.rmdir()
        package.rmdir()
