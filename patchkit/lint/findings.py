"""What lint reports: a Finding names a rule, a severity, a place and a message that says how to fix it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path


class Severity(Enum):
    ERROR = "error"  # fails the run (exit 1)
    WARNING = "warning"  # reported, fails only under --strict


class Rule(Enum):
    """Every check lint makes. Codes are stable: CI configs, docs and people refer to them."""

    MANIFEST_INVALID = (
        "PK101",
        Severity.ERROR,
        "manifest does not load (schema, id = folder name, exclude reasons)",
    )
    PATCH_PENDING = ("PK102", Severity.WARNING, "diff not vendored yet (pending entry)")
    DIFF_HASH = ("PK103", Severity.ERROR, "vendored diff has no sha256 or does not match it")
    DIFF_EXCLUDES = ("PK104", Severity.ERROR, "diff cannot be parsed or an exclude matches no file of it")
    COMPILED_STALE = ("PK105", Severity.ERROR, "compiled hunk set that is not what compile makes of its diff")
    WAIVER_UNDECLARED = ("PK201", Severity.ERROR, "manifest has no [waiver] introduced_by")
    WAIVER_MISSING = ("PK202", Severity.ERROR, "waiver <waivers>/<introduced_by>.md does not exist")
    WAIVER_BAD_NAME = ("PK203", Severity.ERROR, "waiver file not named <digits>.md")
    WAIVER_NAMED_UPSTREAM = (
        "PK204",
        Severity.ERROR,
        "waiver named after a patch's upstream PR instead of the PR introducing it",
    )
    WAIVER_SECTIONS = ("PK205", Severity.ERROR, "required waiver section missing or empty")
    WAIVER_UPSTREAM_UNCITED = ("PK206", Severity.ERROR, "waiver does not cite a patch's upstream PR")
    WAIVER_ID_UNNAMED = ("PK207", Severity.ERROR, "waiver does not name a patch's id")
    WAIVER_EXCLUDE_UNNAMED = ("PK208", Severity.ERROR, "waiver does not name an excluded path (partial port)")
    WAIVER_ORPHAN = ("PK209", Severity.ERROR, "waiver that no manifest points at and that covers no patch site")
    WAIVER_PENDING = ("PK210", Severity.WARNING, "pending waiver PENDING-<topic>.md: rename it once the PR is open")
    WAIVER_NUMBER_IS_UPSTREAM = ("PK211", Severity.WARNING, "introduced_by equals the patch's upstream PR number")
    HISTORY_WAIVER_UNCHANGED = ("PK301", Severity.ERROR, "patch changed in the range, its waiver did not")
    HISTORY_WRONG_PR = ("PK302", Severity.ERROR, "new patch's introduced_by is not this pull request")
    HISTORY_PR_UNKNOWN = ("PK303", Severity.WARNING, "pull request number unknown; introduced_by not checked")
    HISTORY_MOVED_UNWAIVED = (
        "PK304",
        Severity.ERROR,
        "patch moved into the registry (moved_in) whose original waiver is not on the base",
    )
    SITE_UNCOVERED = ("PK401", Severity.ERROR, "patch site in the repository that no waiver covers")
    HISTORY_SITE_UNWAIVED = (
        "PK402",
        Severity.ERROR,
        "patch site added or changed in the range without a waiver of this PR, added in the range, naming it",
    )
    HISTORY_SITE_BASE_UNWAIVED = ("PK403", Severity.ERROR, "pre-existing patch site without a waiver on the base")
    BASELINE_STALE = ("PK404", Severity.WARNING, "baseline entry that matches no patch site any more")
    SCAN_UNREADABLE = ("PK405", Severity.WARNING, "scanned file that could not be read (its sites are unknown)")

    def __init__(self, code: str, severity: Severity, summary: str) -> None:
        self.code = code
        self.severity = severity
        self.summary = summary


@dataclass(frozen=True)
class Finding:
    rule: Rule
    severity: Severity
    path: Path
    line: int | None  # 1-based; None when the finding is about the file as a whole and has no better place
    message: str  # what was found
    fix: str | None = None  # what to do about it, where it is said apart (the concise format leaves it out)

    @classmethod
    def of(cls, rule: Rule, path: Path, line: int | None, message: str, fix: str | None = None) -> Finding:
        return cls(rule, rule.severity, path, line, message, fix)

    @property
    def text(self) -> str:
        """The whole message: what was found, then what to do."""
        return f"{self.message}; {self.fix}" if self.fix else self.message


_WHERE_LINE = re.compile(r"^(.*):(\d+)$")


def split_where(where: str | None, fallback: Path) -> tuple[Path, int | None]:
    """A PatchkitError's `where` ("path" or "path:line") as a place for a finding."""
    if not where:
        return fallback, None
    match = _WHERE_LINE.match(where)
    return (Path(match.group(1)), int(match.group(2))) if match else (Path(where), None)
