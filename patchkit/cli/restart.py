"""The restart entry: `patchkit apply` on a tree patchkit applied, answered with the standard library alone.

Why it exists: every container start runs `patchkit apply --all` (or `apply ID`) on a tree that patchkit patched
already, and the answer is nearly always "already applied". The full CLI imports click, the manifest parser and
the report (~70 ms) before it reads a byte of the tree; `git apply -R --check` needs far less. So the program
(the console script, `python -m patchkit`, patchkit.pyz: patchkit.cli.start) asks this module first about any
`apply`, and it answers the one case it can prove:

- the argument shape it knows (patchkit.cli.argv, which the first-status entry reads too): `apply ID` or `apply
  --all`, with --root and --patches (or $PATCHKIT_ROOT and $PATCHKIT_PATCHES), -q, --json; no pyproject.toml on
  the way up (it could name the registry), no colour (no terminal, no FORCE_COLOR), none of
  PATCHKIT_NO_FASTPATH, PATCHKIT_DEBUG_FASTPATH, $PATCHKIT_TARGET, $PATCHKIT_ROOT_FROM_PACKAGE, $PATCHKIT_PYTHON,
  $_PATCHKIT_COMPLETE (click's shell completion);
- the registry as --all reads it: the patches the records name, no other folder, no stray folder; every
  manifest and diff a plain file, hashed now;
- under the root's lock, shared and taken without waiting, with no journal pending (the full path recovers
  it first): every record vouched for by patchkit.run.fastpath.vouch_record, the one check the full CLI's fast
  path makes too (the trust rule on the state folder and the record, the seal, this code, the manifest and
  diff digests, every file's bytes and mode), and the diff the sealed record names hashes as the record says;
- then it prints what the full path prints, byte for byte (patchkit.speak.plain renders both), and exits 0;
  with --json, each patch's `files` as the apply rendered them (fastpath.recorded_report, the CLI's fast path's
  choice too: the file whose sha256 the vouched record seals), or rendered from the recorded verdicts when there
  is no such file (an older record).

Anything else returns None before anything is printed or written: the full CLI runs from the start, as if this
module did not exist. tests/test_restart_entry.py compares the bytes with the full judgement's in every mode.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import stat
from collections.abc import Sequence
from typing import Any

from patchkit.cli.argv import MANIFEST, Request, full_cli_decides, is_id, parse_request
from patchkit.errors import PatchkitError
from patchkit.input.reads import STATE_DIR, open_root_fd
from patchkit.input.trust import Refusal, open_trusted_child
from patchkit.run.fastpath import (
    BLOCK,
    RESTART,
    UNKNOWN_NO_GIT,
    UNKNOWN_UNPINNED,
    Vouched,
    read_record,
    read_regular,
    recorded_report,
    vouch_record,
)
from patchkit.run.recorded import RecordedReport, shown_files
from patchkit.run.records import record_names
from patchkit.speak.plain import ALREADY_APPLIED, RawJSON, json_bytes, versioned
from patchkit.workspace.names import JOURNAL_NAME, LOCK_NAME, TEMP_NAME

_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def answer(argv: Sequence[str]) -> list[bytes] | None:
    """What the full path prints for this restart (stdout), as pieces of bytes to write in order, or None: the
    full CLI must run."""
    request = parse_request(argv, "apply")
    if request is None or request.patches is None or request.verbose or full_cli_decides():
        return None
    try:
        return _answer(request, request.patches)
    except OSError:  # a working folder removed, a file system's surprise: the full path meets it and says so
        return None


def _answer(request: Request, patches: str) -> list[bytes] | None:
    if _project_config_above(os.getcwd()):
        return None
    ids = [request.patch] if request.patch is not None else _registry_ids(patches)
    if not ids:
        return None
    try:
        root_fd, root = open_root_fd(request.root)  # `root`: absolute and symlink-free, as the full path's Root
    except PatchkitError:
        return None
    try:
        vouched = _vouched_under_lock(root_fd, root, patches, ids, request.patch is None)
        if vouched is None:
            return None
        has_git = _has_git(root_fd)
        reports = [recorded_report(root_fd, root, v, rows=False) for v, _ in vouched] if request.as_json else []
    finally:
        os.close(root_fd)
    pieces = render(request, root, vouched, has_git, reports)
    if pieces is None or not all(piece.isascii() for piece in pieces):
        return None  # another encoding: click's echo decides
    return pieces


def _project_config_above(cwd: str) -> bool:
    """A pyproject.toml in the working folder or above (the full path reads its [tool.patchkit] table)."""
    folder = cwd
    while True:
        try:
            if not stat.S_ISDIR(os.stat(os.path.join(folder, "pyproject.toml")).st_mode):
                return True
        except (FileNotFoundError, NotADirectoryError):
            pass
        except OSError:
            return True
        parent = os.path.dirname(folder)
        if parent == folder:
            return False
        folder = parent


def _registry_ids(patches: str) -> list[str]:
    """The registry's patch ids, as --all lists them; [] when it holds a stray folder (the full path warns)."""
    try:
        names = sorted(os.listdir(patches))
    except OSError:
        return []
    ids = []
    for name in names:
        folder = os.path.join(patches, name)
        manifest = os.path.join(folder, MANIFEST)
        if os.path.isfile(manifest):
            ids.append(name)
        elif not name.startswith(".") and (os.path.isdir(folder) or os.path.exists(manifest)):
            return []
    return ids


def _vouched_under_lock(
    root_fd: int, root: str, patches: str, ids: Sequence[str], every: bool
) -> list[tuple[Vouched, dict[str, Any]]] | None:
    """Each patch's vouched record and its `restart` facts, checked under the root's shared lock; None: the
    full path must run (a busy lock, a journal pending, any record that does not vouch)."""
    state = open_trusted_child(root_fd, STATE_DIR, f"{root}/{STATE_DIR}", folder=True, flags=os.O_RDONLY)
    if isinstance(state, Refusal):
        return None
    try:
        lock = open_trusted_child(state, LOCK_NAME, f"{root}/{STATE_DIR}/{LOCK_NAME}", folder=False,
                                  flags=os.O_RDONLY | os.O_NONBLOCK)
        if isinstance(lock, Refusal):
            return None
        try:
            fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)  # a writer holds it: the full path waits, and says so
        except OSError:
            os.close(lock)
            return None
        try:
            if _journal_pending(state):
                return None  # the full path rolls it back first
            return _vouched(root_fd, root, patches, ids, every)
        finally:
            os.close(lock)  # releases the lock
    finally:
        os.close(state)


def _journal_pending(state_fd: int) -> bool:
    """A journal, or a temp name of ours, in the state folder: a transaction to recover (workspace.lock)."""
    names = os.listdir(state_fd)
    return any(name == JOURNAL_NAME or TEMP_NAME.fullmatch(name) for name in names)


def _vouched(
    root_fd: int, root: str, patches: str, ids: Sequence[str], every: bool
) -> list[tuple[Vouched, dict[str, Any]]] | None:
    """The series the first record names must be the registry's (`every`: --all, in any order; else `ids` as
    they are), each manifest and diff hashed now; then every record must vouch for that series."""
    datas = {pid: read_record(root_fd, root, pid) for pid in ids}
    peeked = {pid: _peek(data) for pid, data in datas.items()}
    first = peeked[ids[0]]
    if first is None:
        return None
    claimed = {str(entry[0]): entry for entry in first[0]}  # what the first record says it was judged with
    order = list(claimed)
    if sorted(order) != sorted(ids) or len(order) != len(first[0]) or (not every and order != list(ids)):
        return None  # another series than the registry's (a patch added, removed or renamed)
    series = []
    for pid in order:
        found = peeked[pid]
        if found is None:
            return None
        digests = _digests(os.path.join(patches, pid), found[1])
        if digests is None:
            return None
        series.append([pid, *digests])
    answers = []
    for entry in series:
        data = datas[entry[0]]
        vouched = None if data is None else vouch_record(root_fd, root, data, entry, series)
        if vouched is None or not isinstance(vouched.restart, dict):
            return None
        answers.append((vouched, vouched.restart))
    return answers


def _peek(data: bytes | None) -> tuple[list[Any], dict[str, Any]] | None:
    """The series and the `restart` facts a record claims, unchecked (vouch_record checks them)."""
    try:
        block = json.loads(data or b"")[BLOCK]
        series, facts = block["series"], block[RESTART]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(series, list) or not all(isinstance(e, list) and e for e in series):
        return None
    return (series, facts) if isinstance(facts, dict) else None


def _digests(folder: str, facts: dict[str, Any]) -> tuple[str, str] | None:
    """sha256 of the manifest and of the diff (named by the sealed facts), read now; None if not plain files."""
    diff = facts.get("diff")
    if not isinstance(diff, str) or not is_id(diff):
        return None  # a diff in a subfolder (or behind a name that is not plain): the full path reads it
    try:
        if not stat.S_ISDIR(os.lstat(folder).st_mode):
            return None  # a linked patch folder: its manifest is checked against the folder it resolves to
        manifest, data = _read_plain(os.path.join(folder, MANIFEST)), _read_plain(os.path.join(folder, diff))
    except OSError:
        return None
    if manifest is None or data is None:
        return None
    return hashlib.sha256(manifest).hexdigest(), hashlib.sha256(data).hexdigest()


def _read_plain(path: str) -> bytes | None:
    return read_regular(os.open(path, _READ))


def _has_git(root_fd: int) -> bool:
    """Whether the root holds a `.git` entry (a pinned commit is then compared by the full path)."""
    try:
        os.stat(".git", dir_fd=root_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return True


# ---------------------------------------------------------------------------------------------------- output


def render(
    request: Request, root: str, answers: Sequence[tuple[Vouched, dict[str, Any]]], has_git: bool,
    reports: Sequence[RecordedReport | None],
) -> list[bytes] | None:
    """What the full path prints on stdout for this restart; None when it would say more (a pinned checkout).
    `reports`: with --json, each patch's recorded verdicts (fastpath.recorded_report), in order."""
    if any(facts.get("pinned_commit") is not None and has_git for _, facts in answers):
        return None  # HEAD against the pinned commit: git answers, on the full path
    if request.as_json:
        documents = []
        for (vouched, facts), report in zip(answers, reports, strict=True):
            document = _document(root, vouched, facts, report)
            if document is None:
                return None
            documents.append(document)
        if request.patch is not None:
            return [*json_bytes(versioned(documents[0])), b"\n"]
        series = {"action": "apply", "root": root, "state": "applied", "result": "already-applied", "exit_code": 0,
                  "left": [], "patches": documents, "changes": []}
        return [*json_bytes(versioned(series)), b"\n"]
    if request.quiet:
        return []
    lines = [f"{vouched.record.patch}: {ALREADY_APPLIED}" for vouched, _ in answers]
    if request.patch is None:
        count = len(answers)
        every = "the only patch is" if count == 1 else f"all {count} patches are"
        lines.append(f"series: {every} already applied (nothing written)")
    return [("\n".join(lines) + "\n").encode()]


def _document(
    root: str, vouched: Vouched, facts: dict[str, Any], report: RecordedReport | None
) -> dict[str, Any] | None:
    """One patch's JSON document, as speak.report.outcome_json writes a restart's, from its recorded verdicts
    (`report`: fastpath.recorded_report's); None without them (verdicts patchkit did not write)."""
    if report is None:
        return None
    record, pinned = vouched.record, facts.get("pinned_commit")
    return {
        "patch": record.patch, "action": "apply", "root": root, "state": "applied", "result": "already-applied",
        "reason": None, "exit_code": 0, "upstream": facts.get("upstream"),
        "hunk_set_sha256": report.hunk_set_sha256, "excluded": facts.get("excluded"),
        "files": RawJSON(shown_files(report)), "changes": [],
        "base": {
            "state": "unknown", "pinned_commit": pinned, "head": None, "relation": None, "fingerprint": [],
            "drifted": [], "unchecked": [], "detail": UNKNOWN_UNPINNED if pinned is None else UNKNOWN_NO_GIT,
        },
        "record": {
            "state": "current", "path": f"{STATE_DIR}/{record_names(record.patch)[0]}",
            "hunk_set_sha256": record.hunkset_sha256, "manifest_sha256": record.manifest_sha256,
            "diff_sha256": record.diff_sha256, "tool_version": record.tool_version, "applied_at": record.applied_at,
            "stored_copy_usable": None, "detail": None,
        },
        "provenance": {
            "origin": "this-version", "can_retire": False, "used_stored_copy": False, "strict_base": False,
            "diff_sha256": facts.get("diff_sha256"), "hunk_set_sha256": facts.get("hunk_set_sha256"),
        },
    }
