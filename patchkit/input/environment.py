"""The engine's Python environment: which tree `--root-from-package NAME` names, and what patchkit believes of it.

The environment may belong to a less privileged user (an image whose serving user owns `/opt/venv`), so its
metadata is input like any other: whoever can write a dist-info folder can make `direct_url.json`,
`top_level.txt` or `RECORD` name any folder, and whoever can replace the interpreter or a `.pth` file runs
code as whoever starts it. The rule is the one every reader follows (patchkit.input.trust):

- The distribution's dist-info folder, the metadata files read from it, the site-packages folder holding it
  and every folder above them up to `/` are owned by root or the running user and not writable by group or
  others (a sticky folder such as `/tmp` may be: nobody else can rename what is in it; a sticky file may not),
  walked from `/` link-free on descriptors. Anything else is refused (UntrustedEnvironmentError, exit 2)
  naming the file and its owner, before the metadata is used.
- The root is the site-packages folder itself, whatever the metadata says; top-level names only tell whether
  the package is there, and only plain names count (an absolute path or `..` in `top_level.txt` or `RECORD`
  is no package). A root outside site-packages comes only from an editable install's `direct_url.json`, and
  its source folder (and every folder above it) must pass the same check.
- `--python PATH` runs the interpreter only if it, once symbolic links are resolved, and every folder above it
  pass the check: running a file another user can replace would run their code with patchkit's privileges.
  It runs the resolved file with `-I -S`, so no `.pth` file and no `sitecustomize` runs, and asks it only for
  its site-packages folders (sysconfig's paths for the venv named by a `pyvenv.cfg` next to PATH, computed
  under -S). patchkit reads the metadata itself; the environment's code never runs.
- In-process (patchkit's own interpreter: the `.pyz` run by the engine's), the same checks apply to the
  running interpreter and to the metadata. Started without `-S`, that interpreter has already run the `.pth`
  files of its site-packages before patchkit could look: run the `.pyz` with `-I -S` (examples/Dockerfile).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple
from urllib.parse import unquote, urlparse

from patchkit.errors import BadInputError, UntrustedEnvironmentError
from patchkit.input.trust import Flaw, Refusal, check_trusted_path, open_trusted_path

PYTHON_TIMEOUT = 60.0
METADATA_MAX_BYTES = 64 * 1024 * 1024  # RECORD of the largest wheels (torch) is a few MiB
_METADATA_FILES = ("direct_url.json", "top_level.txt", "RECORD")

# Run by the engine's interpreter with -I -S (and exec'd in-process to compute the same folders): the
# site-packages folders `site` would add for the installation or venv, without running `site`. Only the
# standard library's sysconfig and site (imported, never started under -S) are used; no metadata is read.
_SITE_PROBE = r"""
import json, os, site, sys, sysconfig

def site_dirs(venv, system):
    found = []
    if venv:
        scheme = "venv" if "venv" in sysconfig.get_scheme_names() else (
            "posix_prefix" if os.name == "posix" else "nt")
        names = {"base": venv, "platbase": venv, "installed_base": venv, "installed_platbase": venv}
        paths = sysconfig.get_paths(scheme, vars=names)
        found += [paths["purelib"], paths["platlib"]]
    if system or not venv:
        paths = sysconfig.get_paths()
        found += [paths["purelib"], paths["platlib"]]
        found += site.getsitepackages()
    return [p for p in dict.fromkeys(found) if p]

if __name__ == "__main__":
    venv, system = sys.argv[1], sys.argv[2] == "1"
    print(json.dumps({"executable": sys.executable, "version": sys.version.split()[0],
                      "site": site_dirs(venv, system)}))
"""


class Venv(NamedTuple):
    """A venv found from its `pyvenv.cfg` next to an interpreter, as `site` finds it."""

    prefix: Path | None  # None: the interpreter is not in a venv
    system_site: bool  # include-system-site-packages = true


class Found(NamedTuple):
    """A distribution's dist-info folder and the site-packages folder holding it (both resolved)."""

    site: Path
    info: Path


# ------------------------------------------------------------------------------------------------ entry


def locate_distribution_root(name: str, python: str | None = None) -> Path:
    """The engine tree of installed Python distribution `name`, found from its metadata without running the
    environment's code (module doc): an editable install's source checkout, else the site-packages folder
    that holds its top-level package, since diffs name paths like `pkg/module.py`. With `python` (--python /
    PATCHKIT_PYTHON, e.g. the engine image's /opt/venv/bin/python), that interpreter's environment is searched.
    """
    if python is not None:
        return _locate_with(python, name)
    return _locate_in_process(name)


def _locate_in_process(name: str) -> Path:
    executable = Path(sys.executable)
    check_interpreter(executable, str(executable), in_process=True)
    search = [p for p in sys.path if p]
    if sys.flags.no_site:  # -S: the site-packages folders are not on sys.path; name them as `site` would
        venv = find_venv(executable)
        search += site_dirs(venv)
    found = find_distribution(name, search)
    if found is None:
        shown = ", ".join(dict.fromkeys(search))
        raise BadInputError(
            f"no installed Python distribution named {name!r} for patchkit's own interpreter {sys.executable}; "
            f"searched: {shown}",
            hint="name the engine's interpreter with --python PATH (or PATCHKIT_PYTHON), check the name with "
            "`PYTHON -m pip show NAME`, or pass --root DIR",
        )
    try:
        return root_of(name, found, f"patchkit's own interpreter {sys.executable}")
    except UntrustedEnvironmentError as exc:
        if not sys.flags.no_site:  # too late to stop them: say so, and how to start next time
            exc.message += (
                "; this interpreter was started without -S, so any .pth file there has already run: run "
                "patchkit as `python -I -S patchkit.pyz`"
            )
        raise


def _locate_with(python: str, name: str) -> Path:
    """Ask another interpreter (resolved, checked, run with -I -S and a timeout) for its site-packages."""
    on_path = shutil.which(python) if os.sep not in python else None  # `--python python3`: looked up in PATH
    given = Path(os.path.abspath(on_path or python))
    real = Path(os.path.realpath(given))
    if not real.is_file():
        raise BadInputError(
            f"cannot run the Python interpreter {python}: no such file", where=python,
            hint="--python / PATCHKIT_PYTHON names the engine's interpreter, e.g. /opt/venv/bin/python",
        )
    check_interpreter(real, python, in_process=False)
    venv = find_venv(given)
    try:
        done = subprocess.run(
            [str(real), "-I", "-S", "-c", _SITE_PROBE, str(venv.prefix or ""), "1" if venv.system_site else "0"],
            capture_output=True, timeout=PYTHON_TIMEOUT, check=False, stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BadInputError(
            f"cannot run the Python interpreter {python}: {exc}", where=python,
            hint="--python / PATCHKIT_PYTHON names the engine's interpreter, e.g. /opt/venv/bin/python",
        ) from None
    try:
        info = json.loads(done.stdout)
        if not isinstance(info, dict) or not isinstance(info.get("site"), list):
            raise ValueError("not a report")
    except ValueError:
        detail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise BadInputError(
            f"{python} could not read its installed distributions: it did not name its site-packages folders "
            f"(exit {done.returncode}: {detail[0]})",
            where=python, hint="check that it is a Python 3.8+ interpreter",
        ) from None
    search = [str(p) for p in info["site"] if isinstance(p, str)]
    where = f"{python} (Python {info.get('version')}, {real})"
    found = find_distribution(name, search)
    if found is None:
        shown = ", ".join(search) or "nothing"
        raise BadInputError(
            f"no distribution named {name!r} is installed for {where}; searched: {shown}",
            hint="check the name with `PYTHON -m pip show NAME`, pick the engine's interpreter with --python, "
            "or pass --root DIR",
        )
    return root_of(name, found, where)


# ------------------------------------------------------------------------------------------------ finding


def find_venv(executable: Path) -> Venv:
    """The venv of an interpreter path (not resolved: a venv's bin/python is a link to the base interpreter),
    from the `pyvenv.cfg` beside it or one folder up, as `site.venv` finds it."""
    folder = Path(os.path.abspath(executable)).parent
    for candidate in (folder / "pyvenv.cfg", folder.parent / "pyvenv.cfg"):
        try:
            text = _read_bounded(candidate, 1 << 16).decode("utf-8", errors="replace")
        except OSError:
            continue
        system = False
        for line in text.splitlines():
            key, _, value = line.partition("=")
            if key.strip().lower() == "include-system-site-packages":
                system = value.strip().lower() == "true"
        return Venv(candidate.parent, system)
    return Venv(None, False)


def site_dirs(venv: Venv) -> list[str]:
    """The running interpreter's site-packages folders for `venv`, computed by the same code the probe runs."""
    namespace: dict[str, object] = {"__name__": "patchkit_site_probe"}
    exec(compile(_SITE_PROBE, "<patchkit site probe>", "exec"), namespace)  # our constant, not the environment's
    compute = namespace["site_dirs"]
    assert callable(compute)
    return [str(p) for p in compute(str(venv.prefix or ""), venv.system_site)]


def find_distribution(name: str, search: Iterable[str]) -> Found | None:
    """The first `<name>-<version>.dist-info` (or `.egg-info` folder) in the search folders, as importlib
    finds it (names compared normalised), with its folder resolved; None if there is none."""
    wanted = _normalise(name)
    for entry in dict.fromkeys(search):
        folder = Path(entry)
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue  # a zip on sys.path, a folder that is not there
        for child in names:
            stem, dot, suffix = child.rpartition(".")
            if not dot or suffix not in ("dist-info", "egg-info"):
                continue
            if _normalise(stem.split("-", 1)[0]) != wanted or not (folder / child).is_dir():
                continue
            site = Path(os.path.realpath(folder))
            return Found(site, site / child)
    return None


def _normalise(name: str) -> str:
    """A distribution name as importlib.metadata compares it (PEP 503, with `_` for the separator)."""
    return re.sub(r"[-_.]+", "_", name).lower()


# ------------------------------------------------------------------------------------------------ judging


def root_of(name: str, found: Found, where: str) -> Path:
    """The tree a found distribution names, once its folders and metadata pass the trust rule."""
    check_folder_chain(found.info, "the metadata folder of distribution " + repr(name))
    metadata = {file: _read_metadata(found.info / file) for file in _METADATA_FILES}
    source = editable_source(metadata["direct_url.json"])
    if source is not None:
        real = Path(os.path.realpath(source))
        if not real.is_dir():
            raise BadInputError(
                f"the editable install of {name!r} names the source folder {source}, which is not a folder",
                where=str(found.info / "direct_url.json"),
                hint="reinstall it (`pip install -e DIR`) or pass --root DIR",
            )
        check_folder_chain(real, f"the source folder of the editable install of {name!r}")
        return real
    for top in top_level_names(metadata["top_level.txt"], metadata["RECORD"]):
        try:
            if stat.S_ISDIR(os.lstat(found.site / top).st_mode):
                return found.site
        except OSError:
            continue
    raise BadInputError(
        f"distribution {name!r} of {where} has no top-level package folder in {found.site}",
        hint="pass --root DIR with the folder the patch's paths are relative to",
    )


def editable_source(direct_url: bytes | None) -> Path | None:
    """The source folder of an editable install (PEP 610 direct_url.json), None for any other install."""
    if not direct_url:
        return None

    try:
        info = json.loads(direct_url)
    except ValueError:
        return None
    if not isinstance(info, dict):
        return None
    url = urlparse(str(info.get("url", "")))
    editable = isinstance(info.get("dir_info"), dict) and info["dir_info"].get("editable") is True
    if not editable or url.scheme != "file" or url.netloc not in ("", "localhost"):
        return None
    folder = unquote(url.path)
    return Path(folder) if folder.startswith("/") and "\0" not in folder else None


def top_level_names(top_level: bytes | None, record: bytes | None) -> list[str]:
    """Plain top-level names from top_level.txt, then the first component of each RECORD path. A name with
    a separator, `.`, `..` or nothing in it is no package here (an absolute path in RECORD is a file installed
    elsewhere; in top_level.txt it is an attempt to move the root)."""
    names = [line.strip() for line in (top_level or b"").decode("utf-8", "replace").splitlines()]
    for line in (record or b"").decode("utf-8", "replace").splitlines():
        path = line.rsplit(",", 2)[0] if line.count(",") >= 2 else line
        parts = path.replace("\\", "/").split("/")
        if len(parts) > 1 and not parts[0].endswith((".dist-info", ".egg-info", ".data")):
            names.append(parts[0])
    return [n for n in dict.fromkeys(names) if n and n not in (".", "..") and not set(n) & {"/", "\\", "\0"}]


# ------------------------------------------------------------------------------------------------ trust


def check_interpreter(real: Path, given: str, *, in_process: bool) -> None:
    """Refuse an interpreter (resolved) that another user could have replaced, it or a folder above it."""
    problem = check_trusted_path(Path(os.path.realpath(real)), folder=False)
    if problem is None:
        return
    if in_process:
        meaning = (
            "patchkit is running under it, so whatever that user put there already runs with patchkit's "
            "privileges; patchkit will not take an engine root from its environment"
        )
    else:
        meaning = (
            "running it would run whatever that user put there with patchkit's privileges (uid "
            f"{os.geteuid()}); it was not run"
        )
    raise UntrustedEnvironmentError(
        f"the Python interpreter {real}{'' if str(real) == given else f' (from {given})'} cannot be trusted: "
        f"{problem.shown} {problem.describe()}; {meaning}",
        where=given,
        hint=_hint(problem.shown),
    )


def check_folder_chain(path: Path, what: str) -> None:
    """Refuse `path` (resolved) unless it and every folder above it pass the trust rule (patchkit.input.trust)."""
    problem = check_trusted_path(Path(os.path.realpath(path)), folder=True)
    if problem is not None:
        raise UntrustedEnvironmentError(
            f"{what} is not trusted: {problem.shown} {problem.describe()}; patchkit does not take an engine root "
            "from metadata or folders another user could have written, nothing was read or written",
            where=str(path),
            hint=_hint(problem.shown),
        )


def _hint(path: str) -> str:
    return (
        "run patchkit as the user who owns the environment; or, if that folder holds only the environment, "
        f"give it to root first: `chown -R root: {path} && chmod -R go-w {path}`"
    )


def _read_metadata(path: Path) -> bytes | None:
    """A metadata file of a checked dist-info folder: absent, or a regular file passing the trust rule (on the
    descriptor it is read from, the folders above it walked again link-free)."""
    found = open_trusted_path(path, folder=False, flags=os.O_RDONLY | os.O_NONBLOCK)
    if isinstance(found, Refusal):
        if found.absent and found.shown == str(path):
            return None
        if found.flaw is Flaw.UNCHECKABLE:
            raise BadInputError(f"cannot read the metadata file: {found.detail}", where=str(path))
        wrong = found.describe() if found.shown == str(path) else f"is in {found.shown}, which {found.describe()}"
        raise UntrustedEnvironmentError(
            f"the metadata file {wrong}; patchkit does not take an engine root from metadata another user "
            "could have written, nothing was read or written",
            where=str(path), hint=_hint(str(path.parent)),
        )
    try:
        if not stat.S_ISREG(os.fstat(found).st_mode):
            raise UntrustedEnvironmentError(
                "the metadata file is not a regular file; patchkit does not take an engine root from it, "
                "nothing was read or written", where=str(path), hint=_hint(str(path.parent)),
            )
        return _read_fd(found, METADATA_MAX_BYTES, path)
    except OSError as exc:
        raise BadInputError(f"cannot read the metadata file: {exc.strerror or exc}", where=str(path)) from None
    finally:
        os.close(found)


def _read_bounded(path: Path, limit: int) -> bytes:
    """A regular file's bytes, refused (OSError EFBIG) above `limit`, without following a final link."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_NONBLOCK", 0))
    try:
        return _read_fd(fd, limit, path)
    finally:
        os.close(fd)


def _read_fd(fd: int, limit: int, path: Path) -> bytes:
    """The bytes of the regular file open as `fd`, refused (OSError) above `limit` or if it grows past it."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise OSError(f"{path} is not a regular file")
    if st.st_size > limit:
        raise OSError(f"{path} is larger than {limit} bytes")
    chunks = []
    left = limit + 1
    while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
        chunks.append(chunk)
        left -= len(chunk)
    data = b"".join(chunks)
    if len(data) > limit:
        raise OSError(f"{path} grew past {limit} bytes while being read")
    return data
