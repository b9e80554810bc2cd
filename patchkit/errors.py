"""Exit codes and the one error hierarchy.

Every failure patchkit raises is a PatchkitError; each subclass owns its exit code. Core code raises, only the
CLI turns an error into a message and an exit code (see cli/main.py), so a bad input never prints a traceback. Any
other exception that reaches the CLI is a bug: exit INTERNAL (10), never the code for "refused".
"""

from __future__ import annotations

from enum import IntEnum

from patchkit.display import escape_controls


class ExitCode(IntEnum):
    """Process exit codes. Stable: scripts and entrypoints branch on them."""

    OK = 0  # success; for `status`: the patch is applied
    REFUSED = 1  # apply/revert refused (partial, conflict, ambiguous tree); lint: findings
    BAD_INPUT = 2  # manifest, diff, path, option or registry problem; nothing was written
    UNAPPLIED = 3  # status: the patch is not applied
    PARTIAL = 4  # status: some hunks applied, the others cleanly applicable
    CONFLICT = 5  # status: at least one hunk is neither applied nor applicable (or undecidable)
    LOCK_TIMEOUT = 6  # another patchkit process holds the root's lock
    WRITE_FAILED = 7  # an I/O error during the write phase; the tree was restored
    RECOVERY_FAILED = 8  # an interrupted transaction could not be rolled back; manual action needed
    BASE_MISMATCH = 9  # --strict-base: the tree is not verifiably the pinned base; nothing was written
    INTERNAL = 10  # a bug in patchkit (an unexpected exception); never "refused": please report it
    OUTPUT_FAILED = 11  # stdout or stderr could not be written (a full disk, EIO); not a bug, nothing half written
    UNAVAILABLE = 12  # lint: the repository scan's parser is not installed here (the single-file runner)
    INTERRUPTED = 130  # SIGINT; a write in progress was rolled back first
    TERMINATED = 143  # SIGTERM (docker stop, Kubernetes); a write in progress was rolled back first


class PatchkitError(Exception):
    """Root of every error patchkit raises on purpose.

    `where` names the file (and line or hunk) at fault; `hint` says what to do next.
    """

    exit_code: ExitCode = ExitCode.BAD_INPUT

    def __init__(self, message: str, *, where: str | None = None, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.where = where
        self.hint = hint

    def __str__(self) -> str:
        # Messages quote file names and diff lines: escape control characters so none can forge a line.

        text = f"{self.where}: {self.message}" if self.where else self.message
        text = escape_controls(text)
        if self.hint:
            text += f"\n  hint: {escape_controls(self.hint)}"
        return text


class BadInputError(PatchkitError):
    """Input that patchkit refuses to act on; nothing was written."""


class ManifestError(BadInputError):
    """manifest.toml is missing, malformed or inconsistent."""


class RegistryError(BadInputError):
    """A patch id or folder cannot be found, or a registry setting is wrong."""


class DiffError(BadInputError):
    """The diff is malformed, unsupported, or contradicts itself."""


class NotADiffError(DiffError):
    """The file is no usable diff whatever the manifest says (empty, an HTML page, CRLF headers, no file changes):
    only another file mends it, so `new` keeps no pending entry for it."""


class UnsafePathError(BadInputError):
    """A path would leave the root, cross a symlink out of it, or is otherwise unsafe to touch."""


class UntrustedStateError(BadInputError):
    """Something under <root>/.patchkit could have been written by another user; nothing was read or written."""


class UntrustedEnvironmentError(BadInputError):
    """The engine's Python environment (its interpreter, metadata or the folders they name) could have been
    written by another user; nothing was run, read or written."""


class RootNotWritableError(BadInputError):
    """apply or revert on a root this run cannot write at all (a read-only filesystem, a `.patchkit` this user
    may not write): found before the write phase, so nothing was written (exit 2, not 7's "restored")."""


class PendingPatchError(BadInputError):
    """The patch entry has no vendored diff yet."""


class LockTimeoutError(PatchkitError):
    """Another process held the root's lock for longer than --lock-timeout."""

    exit_code = ExitCode.LOCK_TIMEOUT


class LockUnsupportedError(LockTimeoutError):
    """The filesystem under the root refuses flock (some NFSv3 mounts without lockd, FUSE, 9p): no lock, no write."""


class LockFailedError(LockTimeoutError):
    """flock failed on the root's lock file or folder with an error of the filesystem's own (EIO, ...): no lock,
    no write."""


class WriteFailedError(PatchkitError):
    """Writing the engine tree failed; the transaction was rolled back."""

    exit_code = ExitCode.WRITE_FAILED


class RecoveryFailedError(PatchkitError):
    """An interrupted transaction could not be rolled back automatically."""

    exit_code = ExitCode.RECOVERY_FAILED


class RefusedError(PatchkitError):
    """The tree is not in a state the requested action may change; nothing was written."""

    exit_code = ExitCode.REFUSED


class OutputError(PatchkitError):
    """stdout or stderr could not be written (`> /dev/full`, EIO): the report is lost, not the work. A write
    to the tree is a transaction that finished or was rolled back before the report was printed."""

    exit_code = ExitCode.OUTPUT_FAILED
class ScanUnavailableError(PatchkitError):
    """The repository scan needs a package this installation lacks (the shell parser, absent from the .pyz)."""

    exit_code = ExitCode.UNAVAILABLE


class InternalError(PatchkitError):
    """patchkit contradicted itself (a bug, not the input); nothing was written."""

    exit_code = ExitCode.INTERNAL
