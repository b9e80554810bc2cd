"""Pure: turn one judged file section into its new content, forward (apply) or in reverse (revert).

Only hunks in the state the direction starts from move: forward rewrites `unapplied` hunks to their
post-image and leaves `applied` ones alone (that is what makes `apply --complete` safe); reverse does the
mirror image. Lines are bytes, so endings and encodings are carried over exactly; a file's mode changes only
when the diff changes it.
"""

from __future__ import annotations

from collections.abc import Sequence

from patchkit.diff.hunks import FileOp, Hunk
from patchkit.input.tree import Snapshot
from patchkit.judge.matching import Located, split_lines
from patchkit.judge.verdicts import FileVerdict
from patchkit.outcome import HunkState


def rewrite_lines(
    lines: Sequence[bytes], hunks: Sequence[Hunk], located: Sequence[Located], *, forward: bool
) -> list[bytes]:
    """`lines` with every hunk in the state the direction starts from replaced by its other image."""
    moving = HunkState.UNAPPLIED if forward else HunkState.APPLIED
    out: list[bytes] = []
    at = 0
    # One pass over the lines in file order (the hunks of a reading do not overlap). The parser keeps a section's
    # hunks in the order of their lines, and a reading by position (read_file) finds each past the one before;
    # but the places `git apply` picks (matching.simulate_git: a fingerprinted image, state._fingerprinted and
    # git_applied) have no lower bound, and on a ported image git may put a hunk above the one before it
    # (tests/test_ported.py): so the hunks are taken in the order of their places, not in diff order.
    for hunk, loc in sorted(zip(hunks, located, strict=True), key=lambda hl: hl[1].pos or 0):
        if loc.state is not moving or loc.pos is None:
            continue
        out += lines[at:loc.pos]
        out += hunk.new_lines if forward else hunk.old_lines
        at = loc.pos + loc.span
    out += lines[at:]
    return out


def moved_positions(
    hunks: Sequence[Hunk], located: Sequence[Located], *, forward: bool
) -> tuple[int | None, ...]:
    """Where each hunk's image starts after rewrite_lines (the hunks above it may have grown or shrunk).

    The hunks of a complete reading are in file order, so one running shift does.
    """
    moving = HunkState.UNAPPLIED if forward else HunkState.APPLIED
    out: list[int | None] = []
    shift = 0
    for hunk, loc in zip(hunks, located, strict=True):
        out.append(None if loc.pos is None else loc.pos + shift)
        if loc.state is moving and loc.pos is not None:
            shift += len(hunk.new_lines if forward else hunk.old_lines) - loc.span
    return tuple(out)


def rewrite_section(verdict: FileVerdict, *, forward: bool) -> dict[str, Snapshot]:
    """New snapshots (absent = deleted) for every path of the section."""
    section = verdict.section
    moving = HunkState.UNAPPLIED if forward else HunkState.APPLIED
    op = section.op
    if op in (FileOp.CREATE, FileOp.DELETE):
        created = op is FileOp.CREATE
        if verdict.presence is not moving:
            return {}
        appears = created == forward
        if not appears:
            return {section.path: Snapshot(section.path, None, None)}
        data = section.whole(forward)
        mode = section.new_mode if forward else section.old_mode
        return {section.path: Snapshot(section.path, data, new_file_mode(bool(mode and mode & 0o100)))}

    if not (any(hv.state is moving for hv in verdict.hunks) or moving in (verdict.mode, verdict.presence)):
        # Nothing moves. Returning the judged content instead would be wrong for a section of a stack judged
        # on a peeled-back copy of the file rather than on the tree.
        return {}
    source = verdict.source_path
    assert source is not None
    before = verdict.judged_on[source]
    assert before.data is not None and before.mode is not None
    lines = rewrite_lines(
        split_lines(before.data), [hv.hunk for hv in verdict.hunks], [hv.located for hv in verdict.hunks],
        forward=forward,
    )
    mode = before.mode
    change = section.mode_change
    if change is not None and verdict.mode is moving:
        mode = with_exec(mode, bool((change[1] if forward else change[0]) & 0o100))
    data = b"".join(lines)

    if op is FileOp.RENAME and verdict.presence is moving:
        target = section.new_path if forward else section.old_path
        assert target is not None
        return {source: Snapshot(source, None, None), target: Snapshot(target, data, mode)}
    return {source: Snapshot(source, data, mode)}


def with_exec(mode: int, executable: bool) -> int:
    """Set or clear the exec bits, giving execute to exactly those who may read (as git does)."""
    if executable:
        return mode | ((mode & 0o444) >> 2)
    return mode & ~0o111


def new_file_mode(executable: bool) -> int:
    """Mode of a created file: exactly the diff's 100644/100755, whatever the umask (000 in some entrypoints)."""
    return 0o755 if executable else 0o644
