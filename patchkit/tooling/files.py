"""The registry tooling's one way to write a file of its own (a vendored diff, a kept mbox, a ported diff).

Through an exclusive, unpredictable temp name beside the file (never a name someone planted there), written
and fsynced, then either linked to its name (never over a file that is there) or renamed over the old one:
the file is complete or not there at all. The engine tree is never written here (that is workspace/).
"""

from __future__ import annotations

import os
from pathlib import Path

from patchkit.errors import BadInputError


def write_file(path: Path, data: bytes, *, replace: bool, what: str | None = None) -> None:
    """Write `data` to `path`: over the old file with `replace`, else only where there is none (FileExistsError
    when one is there, nothing written). Any other failure is a BadInputError naming `what` (default: the name)."""
    shown = what or path.name
    tmp = path.with_name(f".patchkit-{os.urandom(8).hex()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise BadInputError(f"cannot write {shown}: {exc.strerror}", where=str(path)) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if replace:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)  # fails if a file is there, or appeared meanwhile: nothing is overwritten
    except FileExistsError:
        raise
    except OSError as exc:
        raise BadInputError(f"cannot write {shown}: {exc.strerror}", where=str(path)) from None
    finally:
        tmp.unlink(missing_ok=True)  # ours, created exclusively above (already gone after a replace)
