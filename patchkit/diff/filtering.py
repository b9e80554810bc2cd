"""Diff minus the manifest's excludes -> the HunkSet that every check and every write uses.

`load_hunk_set` is the one road from a manifest to its filtered hunk set: verified bytes, then the compiled hunk
set beside the manifest if one is bound to them (patchkit.diff.compiled), else parsed and filtered. A dead
exclude, an empty result, or a binary / symlink / submodule change left in the set is refused here, before any
stage reads the tree.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from patchkit.diff.compiled import load_compiled
from patchkit.diff.hunks import MODE_GITLINK, MODE_SYMLINK, Diff, FileOp, FilePatch, Hunk, paths_of
from patchkit.diff.hunkset import HunkSet
from patchkit.diff.mbox import find_commit_chain
from patchkit.display import closest, show_path
from patchkit.errors import DiffError, ManifestError
from patchkit.input.globs import match_glob
from patchkit.input.manifest import line_of_key
from patchkit.input.paths import path_problem

if TYPE_CHECKING:
    from patchkit.input.excludes import Exclude
    from patchkit.input.manifest import PatchSpec, PathMap


class ExcludeError(ManifestError):
    """A manifest exclude that does not fit the diff; `pattern` lets the caller point at its manifest line."""

    def __init__(self, message: str, pattern: str, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.pattern = pattern


class PlacementError(ManifestError):
    """A placed path (prefix / [paths] + a diff path) that breaks a path bound; `key` and `table` let the caller
    point at the manifest line that placed it."""

    def __init__(self, message: str, key: str, table: str, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.key = key
        self.table = table


def filter_diff(diff: Diff, excludes: Sequence[Exclude], path_map: PathMap | None = None) -> HunkSet:
    """Drop excluded files and hunks, place the rest under the root; refuse dead excludes, binary patches,
    symlinks and gitlinks in what remains.

    Excludes name the diff's own paths (after strip); `path_map` (the manifest's prefix and [paths]) then moves
    every kept path to where it lives under the root, so the hunk set and its digest hold the placed paths.
    """
    kept: list[FilePatch] = []
    excluded: list[str] = []
    used: set[str] = set()
    file_excludes = [e for e in excludes if e.hunks is None]
    hunk_excludes = {e.pattern: e for e in excludes if e.hunks is not None}
    seen_hunks: dict[str, int] = {}  # path -> hunks numbered so far (a file touched twice counts on)
    layers: dict[str, tuple[_Layer, ...]] = {}  # path -> its sections so far, when hunks of them were dropped
    for f in diff.files:
        hits = [e.pattern for e in file_excludes if any(match_exclude(e.pattern, p) for p in f.paths)]
        if hits:
            used.update(hits)
            excluded.extend(p for p in f.paths if p not in excluded)
            continue
        drop = next((hunk_excludes[p] for p in f.paths if p in hunk_excludes), None)
        below = layers.get(f.old_path, ()) if f.old_path is not None else ()
        if drop is not None:
            used.add(drop.pattern)
        if drop is not None or below:
            f, layer = _drop_hunks(f, drop, seen_hunks, below)
            if f.new_path is not None and (below or any(dropped for _, dropped in layer)):
                layers[f.new_path] = (*below, layer)
        kept.append(f)
    dead = [e for e in excludes if e.pattern not in used]
    if dead:
        paths = paths_of(diff.files)
        close = closest(dead[0].pattern, paths)
        mean = f"did you mean {close!r}? " if close else ""
        raise ExcludeError(
            f"exclude {dead[0].pattern!r} matches no file of the diff {diff.source}", dead[0].pattern,
            hint=f"{mean}fix the path (a typo here would silently apply the file you meant to exclude) or remove it",
        )
    for pattern, exclude in hunk_excludes.items():
        total = seen_hunks.get(pattern, 0)
        missing = [n for n in exclude.hunks or () if n > total]
        if missing:
            raise ExcludeError(
                f"exclude {pattern!r} drops hunk {missing[0]}, but the diff has {total} hunks in that file",
                pattern, hint="hunks are numbered from 1 in diff order (`patchkit status PATCH -v` lists them)",
            )
    if not kept:
        raise ManifestError(
            "every file of the diff is excluded: the filtered hunk set is empty",
            hint="remove an exclude, or retire this patch",
        )
    for f in kept:
        _check_supported(f, diff.source)
    if path_map is not None and not path_map.identity:
        kept = _place(kept, path_map, diff.source)
    return HunkSet(diff.source, tuple(kept), tuple(excluded))


# One section of a path, as the filtered diff changes the lines of the file it makes: each of its hunks (as the
# diff has it) and whether an exclude dropped it.
_Layer = tuple[tuple[Hunk, bool], ...]


def _filtered_line(x: int, layers: Sequence[_Layer]) -> int:
    """0-based line `x` of the file the last of `layers` makes in the diff, as a line of the file the filtered
    diff makes there: each section moves a line by what its hunks above it added, minus what the dropped ones did;
    a line inside a dropped hunk (a context line between its changes) is where the hunk's old image has it, a
    line inside a kept one where its new image does.

    An added line of a dropped hunk has no place in the filtered file (git finds no match for a hunk that needs
    it); it is taken as the old image's line after the context before it."""
    if not layers:
        return x
    below = layers[:-1]
    grown = kept = 0
    for h, dropped in layers[-1]:
        growth = h.new_len - h.old_len
        if x >= h.new_index + h.new_len:  # past the hunk
            grown += growth
            kept += 0 if dropped else growth
            continue
        j = x - h.new_index
        if j < h.leading:  # before the hunk's first change (the hunks after it are further down)
            break
        if not dropped:
            return _filtered_line(h.old_index, below) + kept + j
        if j >= h.new_len - h.trailing:  # its trailing context
            i = h.old_len - (h.new_len - j)
        else:
            i = h.leading
            for new_at, old_at, size in h.gaps:
                if new_at <= j:
                    i = old_at + min(j - new_at, size)
        return _filtered_line(h.old_index + i, below) + kept
    return _filtered_line(x - grown, below) + kept


def _drop_hunks(f: FilePatch, exclude: Exclude | None, seen: dict[str, int], below: Sequence[_Layer]
                ) -> tuple[FilePatch, _Layer]:
    """The section without the hunks the exclude drops (numbered across the file's sections in diff order), its
    headers those git sees in the filtered diff; and the section's layer, for the sections after it.

    `below` are the earlier sections of the same file: the lines their dropped hunks added are not in the
    file this section reads, so its hunks move on both sides."""
    dropped: set[int] = set()
    first = 0
    if exclude is not None:
        first = seen.get(exclude.pattern, 0)
        seen[exclude.pattern] = first + len(f.hunks)
        dropped = set(exclude.hunks or ())
    # The headers git would see in the filtered diff: each kept hunk's old-side line moves as the earlier
    # sections' dropped hunks move it, its new-side line by that and by what the dropped hunks above it in this
    # section added, so the model of git's search (matching.simulate_git) is git's on that diff.
    hunks: list[Hunk] = []
    layer: list[tuple[Hunk, bool]] = []
    growth = 0
    for n, h in enumerate(f.hunks, first + 1):
        layer.append((h, n in dropped))
        if n in dropped:
            growth += h.new_len - h.old_len
            continue
        old_moved = h.old_index - _filtered_line(h.old_index, below)
        if old_moved or growth:
            hunks.append(replace(
                h, old_start=h.old_start - old_moved, new_start=h.new_start - old_moved - growth,
                dropped_old=h.dropped_old + old_moved, dropped_growth=h.dropped_growth + old_moved + growth,
            ))
        else:
            hunks.append(h)
    if exclude is not None and not hunks and f.hunks and f.op is FileOp.MODIFY and f.mode_change is None:
        raise ExcludeError(
            f"exclude {exclude.pattern!r} drops every hunk of the file", exclude.pattern,
            hint=f'exclude the whole file instead: "{exclude.pattern}" = "{exclude.reason}"',
        )
    # The file the filtered section makes is not the diff's new file: its blob id proves nothing any more; nor,
    # after an earlier section lost hunks, is the file it reads the diff's old one.
    new_blob = f.new_blob if len(hunks) == len(f.hunks) and not below else None
    old_blob = None if below else f.old_blob
    return replace(f, hunks=tuple(hunks), old_blob=old_blob, new_blob=new_blob), tuple(layer)


def _place(files: Sequence[FilePatch], path_map: PathMap, source: str) -> list[FilePatch]:
    """Every section with its paths moved by the manifest's prefix / [paths]; two diff paths may not meet."""
    origin: dict[str, str] = {}
    placed = []
    for f in files:
        old = place_path(path_map, f.old_path) if f.old_path is not None else None
        new = place_path(path_map, f.new_path) if f.new_path is not None else None
        for before, after in ((f.old_path, old), (f.new_path, new)):
            if before is None or after is None:
                continue
            if origin.setdefault(after, before) != before:
                raise ManifestError(
                    f"{origin[after]!r} and {before!r} of the diff {source} both land at {after!r} under the root",
                    hint="fix prefix / [paths] so that every file of the diff has a place of its own",
                )
        placed.append(replace(f, old_path=old, new_path=new))
    return placed


def place_path(path_map: PathMap, path: str) -> str:
    """Where the manifest's prefix / [paths] put a diff path under the root, checked by every rule a diff path
    obeys (patchkit.input.paths: depth, length of each name and of the whole, .git / .patchkit in any case)."""
    placed = path_map.place(path)
    problem = path_problem(placed)
    if problem is not None:
        source = next((folder for folder, _ in path_map.folders if path.startswith(folder)), None)
        key, table, rule = ("prefix", "", "prefix") if source is None else (source, "paths", f"[paths] {source!r}")
        raise PlacementError(
            f"the diff's {show_path(path[:200])} placed under the root by {rule}: {problem}", key, table,
            hint="shorten prefix / [paths] so that every placed path is a plain relative path within the bounds "
            "of patchkit.input.limits",
        )
    return placed


def _exclude_hint(f: FilePatch) -> str:

    return f'exclude it in the manifest: [exclude] {json.dumps(f.path)} = "why", and ship that file another way'


def _check_supported(f: FilePatch, source: str) -> None:
    where = f"{source}:{f.diff_line}"
    if f.binary:
        raise DiffError(f"{show_path(f.path)}: binary patch; patchkit only applies text hunks", where=where,
                        hint=_exclude_hint(f))
    if f.op is FileOp.MODIFY and not f.hunks and f.mode_change is None:  # git never writes such a section
        raise DiffError(
            f"{show_path(f.path)}: the file section changes nothing", where=where,
            hint="the diff looks truncated after this file's header; vendor the complete diff",
        )
    for mode in (f.old_mode, f.new_mode):
        if mode == MODE_SYMLINK:
            raise DiffError(f"{show_path(f.path)}: symbolic link change; patchkit does not create or edit links",
                            where=where, hint=_exclude_hint(f))
        if mode == MODE_GITLINK:
            raise DiffError(f"{show_path(f.path)}: submodule change; patchkit does not move submodules",
                            where=where, hint=_exclude_hint(f))


def match_exclude(pattern: str, path: str) -> bool:
    """A pattern matches a path exactly, as a folder prefix, or as a glob (see patchkit.input.globs: linear time)."""
    return match_glob(pattern, path)


def load_hunk_set(spec: PatchSpec, *, base_tree: Path | None = None, compiled: bool = True) -> HunkSet:
    """manifest -> verified diff bytes -> parsed diff -> filtered hunk set.

    `base_tree` is the tree the run was given, for the one command a refused commit chain suggests. With
    `compiled` (the default), a compiled hunk set bound to the verified bytes and this entry stands for the parse
    and the filter (`patchkit compile` made both, and every check they make, when it wrote it)."""
    if spec.sha256 is None:
        # No pin yet: check the file as vendor does (a diff, with context, every exclude in it) before read_diff
        # asks to pin its sha256: a saved HTML page, an empty or CRLF file is reported as what it is, first.
        data = spec.read_diff(pinned=False)
        diff = _parse(spec, data)
        refuse_commit_chain(spec, data, diff, base_tree)
        _filter(spec, diff)
        spec.read_diff()  # refuses: no sha256 recorded, with the sha256 to pin
    data = spec.read_diff()
    if compiled:
        hunk_set = load_compiled(spec)
        # A manifest that pins the hunk set's sha256 holds the compiled file to it too (the digest is computed
        # once: the run's pin check reads the same cached value). Unpinned, the digest is not computed here: a
        # text `status` never needs it (~30 ms of a large first status; docs/performance.md, issue #36 item 2).
        if hunk_set is not None and (spec.hunkset_sha256 is None or spec.hunkset_sha256 == hunk_set.digest):
            return hunk_set
    diff = _parse(spec, data)
    refuse_commit_chain(spec, data, diff, base_tree)
    return _filter(spec, diff)


def _parse(spec: PatchSpec, data: bytes) -> Diff:
    from patchkit.diff.diffs import parse_diff  # lazy: the parser (a compiled hunk set parses nothing)

    return parse_diff(data, spec.strip, str(spec.diff_path))


def refuse_commit_chain(spec: PatchSpec, data: bytes, diff: Diff, base_tree: Path | None) -> None:
    """Refuse, at load, a multi-commit mbox in which a file is changed by more than one commit (a forge's
    `pull/N.patch`, `git format-patch --stdout A..B`), with the `vendor` command that turns it into its net diff.

    Such a chain is not judged: commits that change a file and change it back leave it as it was, so content
    alone cannot tell the chain applied from unapplied, and every later verdict would rest on a guess. Its net
    diff says the same change once, which is what vendor pins (docs/provenance.md, "Forge formats").
    """
    chain = find_commit_chain(data, diff)
    if chain is None:
        return
    shown = ", ".join(show_path(p) for p in chain.paths[:3]) + (", ..." if len(chain.paths) > 3 else "")
    words = ["patchkit", "vendor", spec.id, "--patches", str(spec.folder.parent.absolute()),
             "--from", str(spec.diff_path.absolute()), "--base-tree"]
    if base_tree is not None:
        tree = "this run's tree, if it is still pristine; else name the pristine one"
        command = f"`{shlex.join([*words, str(base_tree.absolute())])}`"
    else:
        tree = "DIR"
        command = f"{shlex.join(words)} DIR"
    raise DiffError(
        f"{spec.diff_name} is an mbox of {chain.commits} commits (a forge's .patch, git format-patch --stdout) "
        f"and several of them change {shown}: patchkit applies the net diff of such a range, not the chain of "
        "commits (a commit that changes a file back leaves nothing to tell applied from unapplied)",
        where=f"{spec.diff_path}:{chain.line}",
        hint=f"vendor its net diff, computed on the pristine pinned tree ({tree}): {command}; "
        f"the mbox is kept next to it as {spec.diff_name}.mbox",
    )


def _filter(spec: PatchSpec, diff: Diff) -> HunkSet:
    try:
        return filter_diff(diff, spec.excludes, spec.path_map)
    except ManifestError as exc:
        raise ManifestError(exc.message, where=exclude_where(spec, exc), hint=exc.hint) from None


def exclude_where(spec: PatchSpec, exc: ManifestError) -> str:
    """The manifest (and, for an exclude that does not fit or a placement out of bounds, its line) a filtering
    error belongs to."""
    line = None
    if isinstance(exc, ExcludeError):
        line = line_of_key(spec.manifest_path, exc.pattern, "exclude")
    elif isinstance(exc, PlacementError):
        line = line_of_key(spec.manifest_path, exc.key, exc.table)
    return f"{spec.manifest_path}:{line}" if line else str(spec.manifest_path)
