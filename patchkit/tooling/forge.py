"""Forge formats: a multi-commit mbox (`git format-patch --stdout A..B`, a forge's `.patch`) and its net diff.

An mbox of several commits holds one diff per commit; a file several commits touch appears in several
sections, and commits that cancel out leave sections whose combined effect is nothing. `vendor` does not pin
such a chain: it replays the sections in order on the pristine base tree, in memory, and asks git for the
net diff of the result, which is what gets vendored. Pure apart from a scratch git repository in a temporary
folder; never reads or writes the engine tree itself (the caller hands in a reader).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from patchkit.diff.hunks import Diff
from patchkit.errors import BadInputError
from patchkit.input.tree import Snapshot
from patchkit.judge.rewrite import rewrite_section
from patchkit.judge.state import judge_section
from patchkit.outcome import PatchState

# The net diff is made with these, whatever the user's git config says (vendor.py pins the same for ranges).
GIT_DIFF_OPTIONS = (
    "--no-color", "--no-ext-diff", "--no-textconv", "--no-relative", "--src-prefix=a/", "--dst-prefix=b/",
    "--find-renames", "--diff-algorithm=myers", "--indent-heuristic", "--unified=3", "--inter-hunk-context=0",
)


def net_diff(diff: Diff, read: Callable[[str], Snapshot]) -> bytes:
    """Replay every section in order on the base (`read(path)` gives a file as the base has it) and return
    git's diff of the base against the result. Each section must read as unapplied where it lands."""
    overlay: dict[str, Snapshot] = {}

    def current(path: str) -> Snapshot:
        return overlay[path] if path in overlay else read(path)

    for section in diff.files:
        snaps = {path: current(path) for path in section.paths}
        verdict = judge_section(section, snaps)
        if verdict.state is not PatchState.UNAPPLIED:
            raise BadInputError(
                f"{section.path}: this commit's section reads as {verdict.state.value} on the base tree as the "
                "commits before it leave it, so the commits do not replay cleanly",
                where=f"{diff.source}:{section.diff_line}",
                hint="pass the pristine pinned tree as --base-tree, or vendor the net diff with "
                "--from-git CLONE --range BASE..HEAD",
            )
        overlay.update(rewrite_section(verdict, forward=True))
    before = {path: read(path) for path in overlay}
    return diff_snapshots(before, overlay)


def diff_snapshots(before: dict[str, Snapshot], after: dict[str, Snapshot]) -> bytes:
    """git's diff from one set of files to another (paths relative; absent = not there), with pinned options."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
        "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
    }
    with tempfile.TemporaryDirectory(prefix="patchkit-net-") as scratch:
        work = Path(scratch)

        def git(*args: str) -> bytes:
            try:
                done = subprocess.run(
                    ["git", "-c", "core.autocrlf=false", "-c", "core.filemode=true", *args],
                    cwd=work, env=env, capture_output=True, check=True,
                )
            except (OSError, subprocess.CalledProcessError) as exc:
                detail = exc.stderr.decode(errors="replace").strip() if isinstance(
                    exc, subprocess.CalledProcessError) else str(exc)
                raise BadInputError(f"git cannot compute the net diff: {detail}") from None
            return done.stdout

        git("init", "-q")
        # The files are the diff's, so a .gitattributes among them could turn on line-ending conversion,
        # filters or "binary" for the scratch repo; info/attributes outranks it and puts git back to bytes.
        (work / ".git/info").mkdir(parents=True, exist_ok=True)
        (work / ".git/info/attributes").write_text(_NEUTRAL_ATTRIBUTES)
        _write(work, before)
        git("add", "-A")
        base = git("write-tree").decode().strip()
        _write(work, after)
        git("add", "-A")
        return git("diff", "--cached", *GIT_DIFF_OPTIONS, base, "--")


_NEUTRAL_ATTRIBUTES = "* -text -filter -ident -export-subst !diff !eol !working-tree-encoding\n"


def _write(work: Path, files: dict[str, Snapshot]) -> None:
    for path, snap in files.items():
        target = work / path
        try:
            if snap.data is None:
                target.unlink(missing_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(snap.data)
            target.chmod(0o755 if snap.executable else 0o644)
        except OSError as exc:  # e.g. the diff names both `a` and `a/b`
            raise BadInputError(f"cannot lay out {path} to compute the net diff: {exc.strerror}") from None
