"""Build dist/patchkit.pyz: one file that runs patchkit with any Python 3.10+ and installs nothing.

    .venv/bin/python scripts/build_pyz.py                 # -> dist/patchkit.pyz
    .venv/bin/python scripts/build_pyz.py -o /tmp/pk.pyz  # elsewhere

    python3 -I -S dist/patchkit.pyz apply --all           # in the engine image, with the image's interpreter

The archive is a stdlib zipapp (a `#!/usr/bin/env python3` line, then a zip whose `__main__.py` starts the
CLI), holding this checkout's `patchkit/` package (with its demo data) and the pure-Python dependencies as they
are installed in the interpreter running this script (the venv the tests ran in): click, unidiff, tomlkit,
tomli (used on 3.10 only) and gitpython with gitdb and smmap (imported lazily: only for a git checkout with a
pinned commit, `vendor` and `lint --base`). Each one's license and METADATA go in beside it; VENDORED.txt lists
the versions.

Reproducible: entries are sorted, every timestamp is 1980-01-01 (or SOURCE_DATE_EPOCH), modes are fixed and no
bytecode goes in, so two builds from the same sources and dependency versions are byte-identical
(tests/test_pyz.py checks it). Python compiles the modules in memory on each start (zipimport never writes
`__pycache__`, so the archive's folder and HOME may be read-only).
"""

from __future__ import annotations

import argparse
import io
import os
import re
import sys
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
SKIPPED = re.compile(r"(^|/)__pycache__(/|$)|\.py[cod]$")

MAIN = '''\
"""patchkit.pyz: run the patchkit CLI from this archive (see scripts/build_pyz.py in patchkit's repository)."""
import sys

if sys.version_info < (3, 10):
    sys.exit(f"patchkit.pyz needs Python 3.10 or newer; this is {sys.version.split()[0]} ({sys.executable})")
# Nothing to write: zipimport never caches bytecode, and this keeps any other import from trying either.
sys.dont_write_bytecode = True

from patchkit.cli.main import entry  # noqa: E402

entry()
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
    args = parser.parse_args(argv)
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH") or 0)
    try:
        files = collect_files()
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
