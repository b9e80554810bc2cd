"""The `[exclude]` entry's record, in a leaf module: the applied records (run.records) hold them too, and the
restart entry (patchkit.cli.restart) reads records without loading the manifest parser."""

from __future__ import annotations

from typing import NamedTuple


class Exclude(NamedTuple):  # a NamedTuple, as manifest.PullRef
    """One `[exclude]` entry: a file (or glob), or some hunks of one file, and why it is not ported."""

    pattern: str  # a path or a glob, after strip, as the diff names it (before prefix and [paths])
    reason: str
    hunks: tuple[int, ...] | None = None  # only these hunks of the file are dropped (1-based); None: the file
