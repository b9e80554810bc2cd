"""`tomllib` on Python 3.11+, its backport `tomli` (the same code, same API) on 3.10."""

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised by the 3.10 CI run
    import tomli as tomllib

__all__ = ["tomllib"]
