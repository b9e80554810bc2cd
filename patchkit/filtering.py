"""Diff minus the manifest's excludes -> the HunkSet that every check and every write uses.

`load_hunk_set` is the one road from a manifest to its filtered hunk set: verified bytes, parsed (through the
parse cache), then filtered. A dead exclude, an empty result, or a binary / symlink / submodule change left in
the set is refused here, before any stage reads the tree.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from patchkit.cache import parse_diff_cached
from patchkit.diffs import parse_diff
from patchkit.display import show_path
from patchkit.errors import DiffError, ManifestError
from patchkit.globs import match_glob
from patchkit.hunks import MODE_GITLINK, MODE_SYMLINK, Diff, FileOp, FilePatch, HunkSet

if TYPE_CHECKING:
    from patchkit.manifest import Exclude, PatchSpec


def filter_diff(diff: Diff, excludes: Sequence[Exclude]) -> HunkSet:
    """Drop excluded files; refuse dead excludes, binary patches, symlinks and gitlinks in what remains."""
    kept: list[FilePatch] = []
    excluded: list[str] = []
    used: set[str] = set()
    for f in diff.files:
        hits = [e.pattern for e in excludes if any(match_exclude(e.pattern, p) for p in f.paths)]
        if hits:
            used.update(hits)
            excluded.extend(p for p in f.paths if p not in excluded)
            continue
        kept.append(f)
    dead = [e.pattern for e in excludes if e.pattern not in used]
    if dead:
        raise ManifestError(
            f"exclude {dead[0]!r} matches no file of the diff {diff.source}",
            hint="fix the path (a typo here would silently apply the file you meant to exclude) or remove it",
        )
    if not kept:
        raise ManifestError(
            "every file of the diff is excluded: the filtered hunk set is empty",
            hint="remove an exclude, or retire this patch",
        )
    for f in kept:
        _check_supported(f, diff.source)
    return HunkSet(diff.source, tuple(kept), tuple(excluded))


def _check_supported(f: FilePatch, source: str) -> None:
    where = f"{source}:{f.diff_line}"
    hint = f'exclude it in the manifest: [exclude] {json.dumps(f.path)} = "why", and ship that file another way'
    if f.binary:
        raise DiffError(f"{show_path(f.path)}: binary patch; patchkit only applies text hunks", where=where, hint=hint)
    if f.op is FileOp.MODIFY and not f.hunks and f.mode_change is None:  # git never writes such a section
        raise DiffError(
            f"{show_path(f.path)}: the file section changes nothing", where=where,
            hint="the diff looks truncated after this file's header; vendor the complete diff",
        )
    for mode in (f.old_mode, f.new_mode):
        if mode == MODE_SYMLINK:
            raise DiffError(f"{show_path(f.path)}: symbolic link change; patchkit does not create or edit links",
                            where=where, hint=hint)
        if mode == MODE_GITLINK:
            raise DiffError(f"{show_path(f.path)}: submodule change; patchkit does not move submodules",
                            where=where, hint=hint)


def match_exclude(pattern: str, path: str) -> bool:
    """A pattern matches a path exactly, as a folder prefix, or as a glob (see patchkit.globs: linear time)."""
    return match_glob(pattern, path)


def load_hunk_set(spec: PatchSpec) -> HunkSet:
    """manifest -> verified diff bytes -> parsed diff -> filtered hunk set."""
    data = spec.read_diff()
    if spec.sha256 is None:  # read_diff refuses this; no verified hash, no cache
        diff = parse_diff(data, spec.strip, str(spec.diff_path))
    else:
        diff = parse_diff_cached(data, spec.sha256, spec.strip, str(spec.diff_path))
    try:
        return filter_diff(diff, spec.excludes)
    except ManifestError as exc:
        raise ManifestError(exc.message, where=str(spec.manifest_path), hint=exc.hint) from None
