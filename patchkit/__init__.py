"""patchkit: apply, check and revert a filtered upstream diff on a pinned engine tree, idempotently."""

from __future__ import annotations

import os

__version__ = "0.1.0"


def source_archive() -> str | None:
    """The zip archive patchkit was imported from (patchkit.pyz), or None for an ordinary install.

    Code fingerprints (the parse cache's keys, the restart fast path's seal) hash the whole archive then: its
    modules are not files of their own."""
    folder = os.path.dirname(os.path.abspath(__file__))
    while True:
        if os.path.isfile(folder):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent
