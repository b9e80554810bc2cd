"""The baseline: patch sites accepted when the check was adopted, by fingerprint, so only new sites fail.

A fingerprint is the sha256 of the file's path, the site kind, the normalised command and its occurrence
index (patchkit.scan.sites), never a line number: editing other lines of the file keeps a site accepted, while
changing the command itself makes it a new site. The file is JSON, sorted, one entry per site, meant to be
committed and reviewed:

    {"version": 1, "sites": [{"fingerprint": "...", "path": "benchmarks/x.sh", "kind": "git-apply",
                              "command": "git apply fix.diff"}]}
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from patchkit.errors import BadInputError
from patchkit.scan import PatchSite
from patchkit.scan.sources import read_capped

BASELINE_VERSION = 1
MAX_BASELINE_BYTES = 64 << 20  # ~300 000 accepted sites


@dataclass(frozen=True)
class BaselineEntry:
    fingerprint: str
    path: str
    kind: str
    command: str

    @property
    def shown(self) -> str:
        return f"{self.path}: {self.kind}: {self.command}"


def read_baseline(path: Path) -> tuple[BaselineEntry, ...]:
    """The entries of the baseline file; none when it does not exist. A malformed file is bad input."""
    try:
        data = read_capped(path.resolve(), MAX_BASELINE_BYTES)  # sized before it is read
        if data is None:
            raise BadInputError(f"the baseline is over the limit of {MAX_BASELINE_BYTES >> 20} MiB", where=str(path))
        text = data.decode("utf-8")
    except FileNotFoundError:
        return ()
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInputError(f"cannot read the baseline: {exc}", where=str(path)) from None
    hint = "regenerate it with `patchkit lint --write-baseline`"
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise BadInputError(f"the baseline is not JSON: {exc}", where=str(path), hint=hint) from None
    if not isinstance(data, dict) or data.get("version") != BASELINE_VERSION or not isinstance(data.get("sites"), list):
        raise BadInputError(
            f'the baseline must be {{"version": {BASELINE_VERSION}, "sites": [...]}}', where=str(path), hint=hint
        )
    entries = []
    for index, item in enumerate(data["sites"]):
        fields = [item.get(k) if isinstance(item, dict) else None for k in ("fingerprint", "path", "kind", "command")]
        if not all(isinstance(f, str) for f in fields):
            raise BadInputError(
                f"baseline entry {index} needs string fingerprint, path, kind and command", where=str(path), hint=hint
            )
        entries.append(BaselineEntry(*(str(f) for f in fields)))
    return tuple(entries)


def write_baseline(path: Path, sites: Iterable[PatchSite]) -> int:
    """Write the sites as the new baseline (atomically: a temporary file, then rename); returns their number."""
    entries = sorted(
        ({"fingerprint": s.fingerprint, "path": s.path, "kind": s.kind.label, "command": s.command} for s in sites),
        key=lambda e: (e["path"], e["kind"], e["command"], e["fingerprint"]),
    )
    text = json.dumps({"version": BASELINE_VERSION, "sites": entries}, indent=2, ensure_ascii=False) + "\n"
    folder = path.parent if str(path.parent) else Path(".")
    temporary: str | None = None
    try:
        kept = path.is_file() and not path.is_symlink()  # a link is replaced, never written through
        mode = path.lstat().st_mode & 0o777 if kept else 0o644  # a committed file: readable
        descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=folder)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except OSError as exc:
        if temporary is not None and os.path.exists(temporary):
            os.unlink(temporary)
        raise BadInputError(f"cannot write the baseline: {exc.strerror or exc}", where=str(path)) from None
    return len(entries)
