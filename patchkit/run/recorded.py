"""Recorded verdicts: the per-hunk report of an applied tree, kept in the record's sealed fast_path block.

A rerun's -v table and --json document show each hunk's verdict on the tree as patchkit left it. At apply,
the write stage judges that tree in memory (the `after` snapshots, with the very judge_sections a rerun runs
on the same bytes) and stores the verdicts there as one JSON string (`report_text`); a restart the records
answer turns them back into verdicts (`report_tree`) for the report to print, without parsing the diff.

The rebuilt sections are hollow: paths, modes, the headers of the judged hunks and their verdicts, no line
images. They exist only for the report (which reads nothing else) and are never judged, planned or written
from. They are trusted exactly
as far as the rest of the block (patchkit.run.fastpath): sealed, owned by this user, bound to this code, this
manifest, this diff and the bytes of every file, so the full judgement could only find the same verdicts.
Anything malformed raises ValueError: the caller then runs the full judgement.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from patchkit.diff.hunks import FilePatch, Hunk
from patchkit.diff.hunkset import HunkSet
from patchkit.judge.matching import Located
from patchkit.judge.treestate import TreeState
from patchkit.judge.verdicts import FileVerdict, HunkVerdict
from patchkit.outcome import HunkState, PatchState


@dataclass(frozen=True)
class RecordedHunkSet(HunkSet):
    """A hunk set rebuilt from a record: hollow sections, and the digest the apply computed on the real ones."""

    recorded_digest: str = ""

    @property
    def digest(self) -> str:  # a stored value, not recomputed from hollow hunks
        return self.recorded_digest


def report_text(hunk_set: HunkSet, verdicts: Sequence[FileVerdict]) -> str:
    """What the report needs of a tree's verdicts, as compact JSON text: the hunk set's digest and excludes,
    each section. One string in the record, so a text restart's json.loads of the record skips over it (a
    large series' verdicts are ~0.7 MB of lists) and only -v or --json decodes it (report_tree)."""
    return json.dumps({
        "hunk_set_sha256": hunk_set.digest,
        "excluded": list(hunk_set.excluded),
        "files": [_verdict_json(v) for v in verdicts],
    }, separators=(",", ":"))


def _verdict_json(v: FileVerdict) -> list[Any]:
    s = v.section
    hunks = [
        [h.hunk.index, h.hunk.old_start, h.hunk.old_len, h.hunk.new_start, h.hunk.new_len, h.expected,
         h.located.state.value, h.located.pos, h.located.span, h.located.detail, list(h.located.candidates),
         h.located.candidate_span]
        for h in v.hunks
    ]
    return [
        s.old_path, s.new_path, s.old_mode, s.new_mode, s.binary, v.state.value, _state(v.presence), _state(v.mode),
        v.detail, hunks,
    ]


def report_tree(root: Path, source: str, report: Any) -> TreeState:
    """The tree as the recorded verdicts describe it (ValueError when it is not what report_text wrote)."""
    try:
        if not isinstance(report, str):
            raise TypeError("a recorded report is one JSON string")
        report = json.loads(report)
        if not isinstance(report, Mapping):
            raise TypeError(report)
        files = tuple(_verdict(entry) for entry in report["files"])
        excluded = tuple(str(path) for path in report["excluded"])
        hunk_set = RecordedHunkSet(source, tuple(v.section for v in files), excluded, str(report["hunk_set_sha256"]))
    except (KeyError, TypeError, ValueError, IndexError) as error:
        raise ValueError(f"a recorded report that patchkit did not write: {error}") from error
    return TreeState(root, hunk_set, files, {})


def _verdict(entry: Sequence[Any]) -> FileVerdict:
    old_path, new_path, old_mode, new_mode, binary, state, presence, mode, detail, hunks = entry
    verdicts = tuple(_hunk_verdict(h) for h in hunks)
    section = FilePatch(
        _opt_str(old_path), _opt_str(new_path), _opt_int(old_mode), _opt_int(new_mode),
        tuple(hv.hunk for hv in verdicts), 0, bool(binary),
    )
    if section.old_path is None and section.new_path is None:
        raise ValueError("a section without a path")
    return FileVerdict(
        section, PatchState(state), verdicts, _opt_state(presence), _opt_state(mode), _opt_str(detail), {}
    )


def _hunk_verdict(h: Sequence[Any]) -> HunkVerdict:
    index, old_start, old_len, new_start, new_len, expected, state, pos, span, detail, candidates, cspan = h
    hunk = Hunk(int(index), 0, int(old_start), int(old_len), int(new_start), int(new_len), (), (), 0, 0)
    located = Located(
        HunkState(state), _opt_int(pos), int(span), _opt_str(detail), tuple(int(c) for c in candidates), int(cspan)
    )
    return HunkVerdict(hunk, located, int(expected))


def _state(state: HunkState | None) -> str | None:
    return state.value if state is not None else None


def _opt_state(value: Any) -> HunkState | None:
    return None if value is None else HunkState(value)


def _opt_str(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise TypeError(value)
    return value


def _opt_int(value: Any) -> int | None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise TypeError(value)
    return value
