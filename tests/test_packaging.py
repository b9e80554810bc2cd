"""The distribution as the package index would serve it: patchkit-engine's wheel and sdist, built by pypa/build.

`python -m build` makes the sdist first and the wheel from it, so a wheel here also proves the sdist builds.
(CI installs that wheel into a clean venv and runs `patchkit demo` from it: .ci/run.)
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

import patchkit

# version_sensitive: the wheel and sdist built by this interpreter's build backend.
pytestmark = pytest.mark.version_sensitive

REPO = Path(__file__).resolve().parent.parent
NAME = "patchkit-engine"
STEM = f"patchkit_engine-{patchkit.__version__}"


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    # Built from a copy of the checkout: setuptools writes its egg-info and the sdist's staging folder into the
    # source folder, and two builds at once there (.ci/run's version runs, side by side) removed each other's
    # files ("No such file or directory: 'patchkit_engine-0.1.0/fixtures/...'", CI of 2026-12-06).
    source = tmp_path_factory.mktemp("source") / "patchkit"
    shutil.copytree(REPO, source, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv*", "venv*", ".mutation-cache", "__pycache__", "*.egg-info", "build", "dist", ".pytest_cache",
        ".hypothesis", ".ruff_cache", ".mypy_cache", "patchkit_engine-*"))
    done = subprocess.run([sys.executable, "-m", "build", "-o", str(out), str(source)], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "would be ignored" not in done.stdout + done.stderr  # setuptools' package-data warning
    return out


def test_the_wheel_holds_the_package_its_data_and_complete_metadata(dist: Path) -> None:
    with zipfile.ZipFile(dist / f"{STEM}-py3-none-any.whl") as wheel:
        names = set(wheel.namelist())
        meta = Parser().parsestr(wheel.read(f"{STEM}.dist-info/METADATA").decode())
        entry_points = wheel.read(f"{STEM}.dist-info/entry_points.txt").decode()
        license_text = wheel.read(f"{STEM}.dist-info/licenses/LICENSE")
    assert meta["Name"] == NAME and meta["Version"] == patchkit.__version__
    assert meta["License-Expression"] == "Apache-2.0"
    assert license_text == (REPO / "LICENSE").read_bytes() and b"Apache License" in license_text
    assert meta["Requires-Python"] == ">=3.10"
    classifiers = meta.get_all("Classifier") or []
    for version in ("3.10", "3.11", "3.12", "3.13"):
        assert f"Programming Language :: Python :: {version}" in classifiers
    assert "Typing :: Typed" in classifiers and "patchkit/py.typed" in names
    # No placeholder host in the metadata (there were `OWNER` URLs): none until patchkit has a public home.
    assert not [u for u in meta.get_all("Project-URL") or [] if "OWNER" in u or "example" in u]
    requires = meta.get_all("Requires-Dist") or []
    assert "unidiff<1.1,>=1.0.1" in requires, requires  # not exact: the range tests/test_unidiff_agreement.py holds
    dev = {re.split(r"[<>=;! ]", r, maxsplit=1)[0] for r in requires if 'extra == "dev"' in r}
    assert dev == {"ruff", "mypy", "cosmic-ray", "coverage"}  # static checks; the mutation run, its line map
    assert not [r for r in requires if 'extra == "test"' in r and r.startswith(("ruff", "mypy"))]
    assert "patchkit = patchkit.cli.start:entry" in entry_points
    shipped = {p.relative_to(REPO).as_posix() for p in (REPO / "patchkit").rglob("*")
               if p.is_file() and "__pycache__" not in p.parts}
    assert {n for n in names if n.startswith("patchkit/")} == shipped  # every module and every demo file
    assert not [n for n in names if n.startswith(("tests/", "fixtures/", "data/"))]


def test_the_sdist_carries_what_its_tests_need(dist: Path) -> None:
    try:
        tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout (an unpacked sdist): nothing to compare against")
    wanted = {p for p in tracked.stdout.split("\0") if p and not p.startswith(".ci/") and p != ".gitignore"}
    with tarfile.open(dist / f"{STEM}.tar.gz") as sdist:
        names = {m.name.split("/", 1)[1] for m in sdist.getmembers() if m.isfile() and "/" in m.name}
    assert wanted - names == set()
    assert {"tests/conftest.py", "LICENSE", "patchkit/data/demo/manifest.toml", "MANIFEST.in"} <= names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_every_install_line_names_this_distribution() -> None:
    """`pip install patchkit` installs an unrelated project: no README, doc or example may say it."""
    texts = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "examples").iterdir())]
    found = []
    for path in texts:
        for match in re.finditer(r"\bpip3?\s+install\b([^\n&;|#]*)", path.read_text(encoding="utf-8")):
            found.append(match.group(0))
            for token in match.group(1).split():
                name = re.match(r"[A-Za-z0-9._-]*", token.strip("'\""))
                assert name is None or name.group(0).lower() != "patchkit", f"{path.name}: {match.group(0)}"
    assert any("patchkit-engine" in line for line in found), found


def test_every_pinned_example_names_this_version() -> None:
    """One version string: patchkit/__init__.py. Examples that pin a release must follow it."""
    texts = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "examples").iterdir())]
    pins = [(path.name, v) for path in texts
            for v in re.findall(r"patchkit-engine==([\w.]+)", path.read_text(encoding="utf-8"))]
    assert pins and {v for _, v in pins} == {patchkit.__version__}, pins
