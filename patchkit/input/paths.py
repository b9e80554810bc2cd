"""The rules every path patchkit accepts must pass (how a path is shown to people: patchkit.display).

`check_path` is called by the diff parser (after unquoting and strip), by the parse cache on every entry it
loads, and by the manifest on its path keys, so no road into patchkit can carry a path another would refuse.
`reserved_name` is the case-insensitive `.git` / `.patchkit` test, also for other path-like keys.
"""

from __future__ import annotations

import unicodedata

from patchkit.display import show_path
from patchkit.errors import UnsafePathError
from patchkit.input.limits import MAX_NAME_BYTES, MAX_PATH_BYTES, MAX_PATH_DEPTH

RESERVED_NAMES = (".git", ".patchkit")
# Code points HFS+ ignores in names (git's is_hfs_dotgit skips the same ones): ".g\u200cit" is .git there.
_IGNORED = frozenset(
    [*range(0x200C, 0x2010), *range(0x202A, 0x202F), *range(0x206A, 0x2070), 0xFEFF]
)


def reserved_name(part: str) -> str | None:
    """The reserved name (`.git` or `.patchkit`) that one path component aliases on some filesystem, or None.

    Case-insensitive filesystems (macOS, Windows, case-folding ext4/f2fs folders) treat `.GIT` as `.git`;
    comparing Unicode full case folds also catches e.g. `.patchKit` spelled with U+212A KELVIN SIGN. Trailing dots and
    spaces are not stripped: Linux keeps them, and patchkit writes Linux trees.
    """
    if part.isascii():  # the common case, and the fast one: no ignorable code points, casefold() is lower()
        return part.lower() if part.lower() in RESERVED_NAMES else None
    if any(ord(c) in _IGNORED for c in part):
        part = "".join(c for c in part if ord(c) not in _IGNORED)
    if not part.startswith("."):
        return None  # every reserved name starts with a dot, and no fold makes one
    folded = unicodedata.normalize("NFC", part).casefold()
    return next((name for name in RESERVED_NAMES if folded == name), None)


def path_problem(path: str) -> str | None:
    """Why `path` is not a plain relative path patchkit may touch, or None if it is one."""
    if not path:
        return "the path is empty"
    if "\0" in path:
        return "NUL byte in a path"
    if path.startswith("/"):
        return f"absolute path {show_path(path)}"
    if "\\" in path:
        return f"path {show_path(path)} contains a backslash"
    try:
        size = len(path.encode("utf-8"))
    except UnicodeEncodeError:
        return f"path {show_path(path)} is not valid UTF-8"
    if size > MAX_PATH_BYTES:
        return f"path {show_path(path[:80])}... is {size} bytes long, over the limit of {MAX_PATH_BYTES} (PATH_MAX)"
    parts = path.split("/")
    if len(parts) > MAX_PATH_DEPTH:
        return f"path {show_path(path[:80])}... is {len(parts)} folders deep, over the limit of {MAX_PATH_DEPTH}"
    for part in parts:
        if part in ("", ".", ".."):
            what = "an empty" if not part else f"a `{part}`"
            return f"path {show_path(path)} leaves the tree ({what} component)"
        if len(part.encode("utf-8")) > MAX_NAME_BYTES:
            return (f"path {show_path(path[:80])}... has a name {len(part.encode())} bytes long; a file name may "
                    f"have at most {MAX_NAME_BYTES} (NAME_MAX)")
        reserved = reserved_name(part)
        if reserved is not None:
            alias = "" if part == reserved else f" (`{show_path(part)}` is {reserved} on a case-insensitive filesystem)"
            return f"path {show_path(path)} is inside .git or .patchkit{alias}; patchkit never writes there"
    return None


def check_path(path: str, where: str | None = None) -> str:
    """`path` itself if it passes every rule, else UnsafePathError (naming `where`)."""
    problem = path_problem(path)
    if problem is not None:
        raise UnsafePathError(problem, where=where, hint="paths must be plain relative paths inside --root")
    return path
