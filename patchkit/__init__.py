"""patchkit: apply, check and revert a filtered upstream diff on a pinned engine tree, idempotently."""

__version__ = "0.1.0"
