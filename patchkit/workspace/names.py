"""The names patchkit gives its own files: in `<root>/.patchkit`, and the temp names next to any file it writes.

A leaf module (no imports of ours), so the lock and the pending-journal check that every command makes
need none of the writing code (commit, recovery, journal, disk) until a transaction really runs.
"""

from __future__ import annotations

import re

JOURNAL_NAME = "journal.json"
LOCK_NAME = "lock"
GITIGNORE_NAME = ".gitignore"

TEMP_PREFIX = ".patchkit-"
TEMP_NAME = re.compile(r"\.patchkit-[0-9a-f]{16}\.(tmp|orig)")
