"""Build dist/patchkit.pyz: one file that runs patchkit with any Python 3.10+ and installs nothing.

    .venv/bin/python scripts/build_pyz.py                 # -> dist/patchkit.pyz
    .venv/bin/python scripts/build_pyz.py -o /tmp/pk.pyz  # elsewhere
    .venv/bin/python scripts/build_pyz.py --bytecode /opt/venv/bin/python   # also bytecode for that Python

    python3 -I -S dist/patchkit.pyz apply --all           # in the engine image, with the image's interpreter

The archive is a stdlib zipapp (a `#!/usr/bin/env python3` line, then a zip whose `__main__.py` starts the
CLI), holding this checkout's `patchkit/` package (with its demo data) and the pure-Python dependencies as they
are installed in the interpreter running this script (the venv the tests ran in): click, unidiff, tomlkit,
tomli (used on 3.10 only) and gitpython with gitdb and smmap (imported lazily: only for a git checkout with a
pinned commit, `vendor` and `lint --base`). Each one's license and METADATA go in beside it; VENDORED.txt lists
the versions.

Bytecode: zipimport never writes `__pycache__` (the archive's folder and HOME may be read-only), so without
bytecode every start compiles each module it imports, in memory: about as much CPU as the rest of a restart.
The archive therefore carries, for the interpreter running this script and every `--bytecode PYTHON`, each
module compiled by that interpreter, as `<folder>/__pycache__/<module>.<cache tag>.pyc`: a checked hash-based
pyc (PEP 552: the source's hash, no timestamp), which `__main__.py`'s loader uses only for its own Python's cache
tag and magic number and only while the hash equals the source's beside it in the archive; anything else is
compiled from the source as before. `--no-bytecode` leaves it out.

Reproducible: entries are sorted, every timestamp is 1980-01-01 (or SOURCE_DATE_EPOCH), modes are fixed and
the bytecode holds no timestamp, so two builds from the same sources, dependency versions and bytecode
interpreters are byte-identical (tests/test_pyz.py checks it).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import zipfile
from importlib import metadata
from pathlib import Path, PurePosixPath

REPO = Path(__file__).resolve().parent.parent
SHEBANG = b"#!/usr/bin/env python3\n"
# Distribution names as installed, in the order a reader meets them; build_pyz checks that they cover
# patchkit's own dependencies (pyproject.toml), their dependencies in turn, and nothing compiled.
VENDORED = ("click", "unidiff", "tomlkit", "tomli", "gitpython", "gitdb", "smmap")
# From a dependency's dist-info, only what describes it (RECORD, INSTALLER and direct_url.json describe the
# install on this machine, not the package, and would make the archive differ between machines).
KEPT_METADATA = re.compile(r"(METADATA|top_level\.txt|AUTHORS.*|LICEN[CS]E.*|COPYING.*|NOTICE.*|licenses/.+)")
DATA = "patchkit/data/"  # package data: files the code reads, never imports
SKIPPED = re.compile(r"(^|/)__pycache__(/|$)|\.py[cod]$")

MAIN = '''\
"""patchkit.pyz: run the patchkit CLI from this archive (see scripts/build_pyz.py in patchkit's repository)."""
import sys

if sys.version_info < (3, 10):
    sys.exit(f"patchkit.pyz needs Python 3.10 or newer; this is {sys.version.split()[0]} ({sys.executable})")
# Nothing to write: zipimport never caches bytecode, and this keeps any other import from trying either.
sys.dont_write_bytecode = True

import _imp  # noqa: E402
import importlib.util  # noqa: E402
import marshal  # noqa: E402
import zipimport  # noqa: E402

ARCHIVE = sys.path[0]
TAG = sys.implementation.cache_tag
CHECKED_HASH = (3).to_bytes(4, "little")  # PEP 552 flags: hash-based, checked


class Compiled(zipimport.zipimporter):
    """zipimport, taking a module's code from the archive's pyc for this Python when it is the source's.

    Also answers get_filename from the name: zipimport's compiles the module to find its path, and every
    import asks for it (importlib's spec_from_loader), so without this each module was compiled twice."""

    def _source(self, fullname):
        folder = self.prefix + fullname.rpartition(".")[2]
        if self.is_package(fullname):
            return f"{folder}/__init__"
        return folder

    def get_filename(self, fullname):
        return f"{self.archive}/{self._source(fullname)}.py"

    def get_code(self, fullname):
        if TAG is None:  # this interpreter keeps no bytecode
            return super().get_code(fullname)
        try:
            source = self._source(fullname)
            folder, name = source.rpartition("/")[::2]
            pyc = self.get_data(f"{folder}/__pycache__/{name}.{TAG}.pyc".lstrip("/"))
            if pyc[:8] == importlib.util.MAGIC_NUMBER + CHECKED_HASH and pyc[8:16] == (
                importlib.util.source_hash(self.get_data(f"{source}.py"))
            ):
                code = marshal.loads(memoryview(pyc)[16:])
                _imp._fix_co_filename(code, self.get_filename(fullname))
                return code
        except (OSError, ImportError, ValueError, EOFError, TypeError):
            pass
        return super().get_code(fullname)


def archive_paths(path):
    if path == ARCHIVE or path.startswith(ARCHIVE + "/"):
        return Compiled(path)
    raise ImportError("not in patchkit.pyz")


sys.path_hooks.insert(0, archive_paths)
sys.path_importer_cache.pop(ARCHIVE, None)

from patchkit.cli.start import entry  # noqa: E402

entry()
'''
# Run by each bytecode interpreter (stdlib only, see bytecode()): reads {name: source} as JSON on stdin, writes
# {"tag": its cache tag, "pyc": {name: pyc as hex}}: checked hash-based pycs, as py_compile writes them.
COMPILE = '''\
import importlib.util, json, marshal, sys
sources = json.load(sys.stdin)
out = {"tag": sys.implementation.cache_tag, "pyc": {}}
for name in sorted(sources):
    source = sources[name].encode("latin-1")
    code = compile(source, name, "exec", dont_inherit=True)
    out["pyc"][name] = (importlib.util.MAGIC_NUMBER + (3).to_bytes(4, "little") + importlib.util.source_hash(source)
                        + marshal.dumps(code)).hex()
json.dump(out, sys.stdout)
'''


class BuildError(Exception):
    pass


def collect_files() -> dict[str, bytes]:
    """Archive name -> content: __main__.py, the patchkit package, each vendored distribution."""
    files: dict[str, bytes] = {"__main__.py": MAIN.encode()}
    package = REPO / "patchkit"
    for path in sorted(package.rglob("*")):
        rel = path.relative_to(REPO).as_posix()
        if path.is_file() and not SKIPPED.search(rel):
            files[rel] = path.read_bytes()
    lines = []
    for name in VENDORED:
        dist = _distribution(name)
        lines.append(f"{dist.metadata['Name']}=={dist.version}  (Requires-Python: "
                     f"{dist.metadata.get('Requires-Python') or 'any'})")
        for rel, data in _distribution_files(dist):
            if rel in files:
                raise BuildError(f"{name} would overwrite {rel} in the archive")
            files[rel] = data
    files["VENDORED.txt"] = ("Vendored into patchkit.pyz, as installed where it was built:\n"
                             + "".join(f"{line}\n" for line in lines)).encode()
    _check_requirements()
    return files


def _distribution(name: str) -> metadata.Distribution:
    try:
        return metadata.distribution(name)
    except metadata.PackageNotFoundError:
        raise BuildError(
            f"{name} is not installed in {sys.executable}; run this script with the project's venv "
            "(python3 -m venv .venv && .venv/bin/pip install -e '.[test]')"
        ) from None


def _distribution_files(dist: metadata.Distribution) -> list[tuple[str, bytes]]:
    listed = {str(entry) for entry in dist.files or ()}
    out = []
    for entry in dist.files or ():
        parts = PurePosixPath(entry).parts
        if not parts or parts[0] == ".." or SKIPPED.search(str(entry)):
            continue  # console scripts live outside site-packages; bytecode is never shipped
        if parts[0].endswith(".dist-info"):
            if not KEPT_METADATA.fullmatch("/".join(parts[1:])):
                continue
        elif entry.suffix in (".so", ".pyd", ".dylib"):
            # A zip cannot hold an importable extension. An accelerated build (tomli's mypyc wheel) keeps
            # each module's source beside it, which is what zipimport then runs.
            source = f"{str(entry).split('.', 1)[0]}.py"
            if source in listed or "__mypyc" in entry.name:
                continue
            raise BuildError(f"{dist.metadata['Name']} ships a compiled module ({entry}) with no Python "
                             "source beside it, which cannot be imported from a zip; vendor a pure-Python build")
        out.append((str(entry), Path(str(entry.locate())).read_bytes()))
    if not out:
        raise BuildError(f"{dist.metadata['Name']} lists no files (no RECORD?); reinstall it with pip")
    return out


def _check_requirements() -> None:
    """Every distribution patchkit needs, transitively, is vendored (markers aside: 3.10 needs tomli)."""
    from patchkit.input.tomlcompat import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = {_requirement_name(r) for r in project["dependencies"]}
    for name in VENDORED:
        for req in _distribution(name).requires or ():
            if "extra ==" not in req and "python_version < \"3.10\"" not in req:
                wanted.add(_requirement_name(req))
    missing = wanted - {_normalise(n) for n in VENDORED}
    if missing:
        raise BuildError(f"not vendored but required: {', '.join(sorted(missing))}; add them to VENDORED")


def _requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if match is None:
        raise BuildError(f"cannot read the requirement {requirement!r}")
    return _normalise(match.group(1))


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def bytecode(files: dict[str, bytes], python: str) -> dict[str, bytes]:
    """`<folder>/__pycache__/<module>.<tag>.pyc` for every module of the archive, compiled by `python`."""
    # Modules only: runpy compiles __main__ itself, and the demo's engine tree is data (its .py files are copied).
    sources = {name: data.decode("latin-1") for name, data in files.items()
               if name.endswith(".py") and name != "__main__.py" and not name.startswith(DATA)}
    # A fixed hash seed: a frozenset constant (`x in {"a", "b"}`) is marshalled in its iteration order, and
    # marshal marks objects by their reference counts. An environment of its own, no site, an empty folder to
    # start in: what -I would give, but -I (like -E) also ignores PYTHONHASHSEED.
    try:
        with tempfile.TemporaryDirectory() as empty:
            done = subprocess.run([python, "-s", "-S", "-c", COMPILE], input=json.dumps(sources),
                                  capture_output=True, text=True, check=False, cwd=empty,
                                  env={"PYTHONHASHSEED": "0", "PATH": os.defpath})
    except OSError as exc:
        raise BuildError(f"cannot run {python} for --bytecode: {exc.strerror}") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise BuildError(f"{python} could not compile the archive's modules: {last}")
    result = json.loads(done.stdout)
    tag = result["tag"]
    if not isinstance(tag, str) or not re.fullmatch(r"[a-z]+-[0-9]+", tag):
        raise BuildError(f"{python} has no usable bytecode cache tag ({tag!r})")
    out = {}
    for name, pyc in result["pyc"].items():
        folder, _, module = name.rpartition("/")
        out[f"{folder}/__pycache__/{module[:-3]}.{tag}.pyc".lstrip("/")] = bytes.fromhex(pyc)
    return out


def write_archive(files: dict[str, bytes], out: Path, epoch: int) -> None:
    """Shebang + zip, entries sorted, fixed timestamps and modes; written to a temp name, then renamed."""
    stamp = time.gmtime(max(epoch, 315532800))[:6]  # zip cannot hold times before 1980
    buffer = io.BytesIO(SHEBANG)
    buffer.seek(len(SHEBANG))  # the zip's offsets then count from the file's start, as zipapp writes them
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, date_time=stamp)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o100644 << 16
            info.create_system = 3  # unix, whatever the build host
            archive.writestr(info, files[name], compresslevel=9)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_bytes(buffer.getvalue())
    tmp.chmod(0o755)
    os.replace(tmp, out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-o", "--output", type=Path, default=REPO / "dist" / "patchkit.pyz")
    parser.add_argument("--bytecode", action="append", default=[], metavar="PYTHON",
                        help="also carry bytecode for this interpreter (repeatable; the one running this script "
                        "is always included)")
    parser.add_argument("--no-bytecode", action="store_true", help="carry no bytecode at all")
    args = parser.parse_args(argv)
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH") or 0)
    try:
        files = collect_files()
        compiled: dict[str, bytes] = {}
        for python in [] if args.no_bytecode else [sys.executable, *args.bytecode]:
            compiled.update(bytecode(files, python))
        files.update(compiled)
        write_archive(files, args.output, epoch)
    except BuildError as exc:
        print(f"build_pyz: {exc}", file=sys.stderr)
        return 2
    size = args.output.stat().st_size
    print(f"built {args.output} ({len(files)} files, {size / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))  # patchkit.input.tomlcompat, from this checkout
    sys.exit(main())
