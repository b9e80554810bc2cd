"""Speak to the user: text lines, the per-hunk table, and the JSON document. Decides nothing.

The JSON keys are a stable interface (documented in the README); add keys, never rename them.
"""

from __future__ import annotations

import json
from typing import Any

import click

from patchkit.actions import Action, Outcome, Result
from patchkit.diffs import FileOp
from patchkit.manifest import PatchSpec
from patchkit.matching import HunkState
from patchkit.state import FileVerdict

_COLOURS = {
    "applied": "green",
    "already-applied": "green",
    "reverted": "green",
    "not-applied": "green",
    "dry-run": "cyan",
    "unapplied": "yellow",
    "partial": "yellow",
    "conflict": "red",
    "ambiguous": "red",
    "refused": "red",
}


def outcome_json(outcome: Outcome) -> dict[str, Any]:
    tree = outcome.tree
    spec = outcome.spec
    return {
        "patch": spec.id,
        "action": outcome.action.value,
        "root": str(tree.root),
        "state": tree.state.value,
        "result": outcome.result.value if outcome.result else None,
        "reason": outcome.reason,
        "exit_code": int(outcome.exit_code),
        "upstream": {"repo": spec.upstream.repo, "pr": spec.upstream.pr, "url": spec.upstream.url},
        "hunk_set_sha256": tree.hunk_set.digest,
        "excluded": list(tree.hunk_set.excluded),
        "files": [_file_json(v) for v in tree.files],
        "changes": (
            [{"path": c.path, "op": _change_op(c.before.exists, c.after.exists)} for c in outcome.plan.changes]
            if outcome.plan
            else []
        ),
    }


def _change_op(before: bool, after: bool) -> str:
    return "modify" if before and after else ("create" if after else "delete")


def _file_json(v: FileVerdict) -> dict[str, Any]:
    s = v.section
    return {
        "path": s.path,
        "old_path": s.old_path,
        "op": s.op.value,
        "state": v.state.value,
        "detail": v.detail,
        "mode": v.mode.value if v.mode else None,
        "hunks": [
            {
                "index": hv.hunk.index,
                "header": hv.hunk.header,
                "state": hv.state.value,
                "expected_line": hv.expected + 1,
                "found_line": hv.located.pos + 1 if hv.located.pos is not None else None,
                "detail": hv.located.detail,
            }
            for hv in v.hunks
        ],
    }


def render_json(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False)


def summary_line(outcome: Outcome) -> str:
    tree = outcome.tree
    hs = tree.hunk_set
    size = f"{hs.hunk_count} hunks in {len(hs.files)} files"
    if hs.excluded:
        size += f", {len(hs.excluded)} excluded"
    pid = outcome.spec.id
    state = _paint(tree.state.value)
    if outcome.action is Action.STATUS:
        return f"{pid}: {state} ({size})"
    result = outcome.result
    assert result is not None
    written = len(outcome.plan.changes) if outcome.plan else 0
    texts = {
        Result.APPLIED: f"applied ({size}; {written} files written)",
        Result.REVERTED: f"reverted ({size}; {written} files written)",
        Result.ALREADY_APPLIED: "already applied, nothing written",
        Result.NOT_APPLIED: "not applied, nothing to revert",
        Result.DRY_RUN: f"dry run: the tree is {tree.state.value}; would write {written} files",
        Result.REFUSED: f"refused: the tree is {tree.state.value}; nothing written",
    }
    return f"{pid}: {_paint(result.value, texts[result])}"


def hunk_table(outcome: Outcome) -> list[str]:
    """The per-file, per-hunk report shown with -v and on refusal."""
    rows: list[str] = []
    for v in outcome.tree.files:
        s = v.section
        name = s.path if s.op is not FileOp.RENAME else f"{s.old_path} -> {s.new_path}"
        extra = f" ({s.op.value})" if s.op is not FileOp.MODIFY else ""
        rows.append(f"  {_paint(v.state.value, f'{v.state.value:<10}')} {name}{extra}")
        if v.mode is not None:
            rows.append(f"      mode {s.old_mode:o} -> {s.new_mode:o}: {_paint(v.mode.value)}")
        for hv in v.hunks:
            where = f"expected line {hv.expected + 1}"
            if hv.located.pos is not None:
                where += f", found at {hv.located.pos + 1}"
            rows.append(
                f"      hunk {hv.hunk.index} {hv.hunk.header}: {_paint(hv.state.value)} ({where})"
            )
            if hv.located.detail and hv.state in (HunkState.CONFLICT, HunkState.AMBIGUOUS):
                rows.append(f"        {hv.located.detail}")
        if v.detail and not v.hunks:
            rows.append(f"        {v.detail}")
    if outcome.tree.hunk_set.excluded:
        rows.append("  excluded (never read, never written): " + ", ".join(outcome.tree.hunk_set.excluded))
    if outcome.reason:
        rows.append(f"  {outcome.reason}")
    return rows


def spec_json(spec: PatchSpec) -> dict[str, Any]:
    return {
        "id": spec.id,
        "title": spec.title,
        "folder": str(spec.folder),
        "pending": spec.pending,
        "upstream": {"repo": spec.upstream.repo, "pr": spec.upstream.pr, "url": spec.upstream.url},
        "target": {"name": spec.target.name, "pinned_commit": spec.target.pinned_commit or "unknown"},
        "excluded": [{"pattern": e.pattern, "reason": e.reason} for e in spec.excludes],
        "introduced_by": spec.introduced_by,
        "after": list(spec.after),
    }


def spec_line(spec: PatchSpec) -> str:
    flag = " [pending: not vendored]" if spec.pending else ""
    excl = f"; excludes {', '.join(e.pattern for e in spec.excludes)}" if spec.excludes else ""
    return f"{spec.id}: {spec.upstream.repo}#{spec.upstream.pr} -> {spec.target.name}{flag}{excl}"


def _paint(key: str, text: str | None = None) -> str:
    # click.echo strips these styles when stdout is not a terminal.
    return click.style(text if text is not None else key, fg=_COLOURS.get(key))

