"""Speak to the user: text lines, the per-hunk table, and the JSON document. Decides nothing.

The JSON documents are a stable interface, described by docs/schema/patchkit.schema.json and docs/output.md:
every top-level document carries `schema_version`; add keys, never rename them (a rename is a new version).
One spelling per key: `patch` names a patch, `hunk_set_sha256` a filtered hunk set's digest, and `excluded` is
always a list of `{path, reason}` objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from patchkit.display import escape_controls, show_path
from patchkit.outcome import (
    Action,
    BaseCheck,
    BaseState,
    HunkState,
    Origin,
    PatchState,
    RecordState,
    Relation,
    Result,
)
from patchkit.run.actions import Invocation, upstream_json
from patchkit.run.actions import excluded_json as _excluded_json
from patchkit.run.provenance import missing_files
from patchkit.run.recorded import FileEntry, HunkEntry, files_text, shown_files, verdict_entry
from patchkit.speak.console import style
from patchkit.speak.plain import ALREADY_APPLIED
from patchkit.speak.plain import SCHEMA_VERSION as SCHEMA_VERSION
from patchkit.speak.plain import RawJSON as RawJSON
from patchkit.speak.plain import render_json as render_json
from patchkit.speak.plain import versioned as versioned

if TYPE_CHECKING:
    from patchkit.diff.hunkset import HunkSet
    from patchkit.input.manifest import PatchSpec
    from patchkit.run.actions import Outcome
    from patchkit.run.provenance import Provenance
    from patchkit.run.series import SeriesOutcome  # the series loads with --all only (the CLI)

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
    "skipped": "yellow",
    "incomplete": "yellow",
    "pinned": "green",
    "drifted": "yellow",
    "stale": "yellow",
    "invalid": "red",
    "upstream-contains": "cyan",
    "applied outside patchkit": "cyan",
    "adopted": "cyan",
}




def error_json(message: str, exit_code: int, where: str | None, hint: str | None) -> dict[str, Any]:
    """What --json prints on stdout for any error (bad input, usage, lock, write, internal)."""
    return versioned({"error": message, "exit_code": exit_code, "where": where, "hint": hint})


def excluded_json(spec: PatchSpec, hunk_set: HunkSet) -> list[dict[str, str]]:
    """The files the manifest's excludes removed from the diff, each with the reason of the exclude it matched."""
    return _excluded_json(spec, hunk_set.excluded)


def _entries(outcome: Outcome) -> Sequence[FileEntry]:
    """Every file's verdict as the report shows it: as recorded (a restart's fast path) or as judged now."""
    if outcome.recorded is not None:
        return outcome.recorded.files
    return [verdict_entry(v) for v in outcome.tree.files]


def _files_json(outcome: Outcome) -> RawJSON:
    """The document's `files`: as a restart's records keep them rendered, else rendered from every file's entry."""
    if outcome.recorded is not None:
        return RawJSON(shown_files(outcome.recorded))
    return RawJSON(files_text(_entries(outcome)))


def _excluded(outcome: Outcome) -> Sequence[str]:
    return outcome.recorded.excluded if outcome.recorded is not None else outcome.tree.hunk_set.excluded


def outcome_json(outcome: Outcome) -> dict[str, Any]:
    tree = outcome.tree
    spec = outcome.spec
    return {
        "patch": spec.id,
        "action": outcome.action.value,
        "root": str(tree.root),
        "state": tree.state.value,
        "result": outcome.result.value if outcome.result else None,
        "reason": reason_text(outcome),
        "exit_code": int(outcome.exit_code),
        "upstream": upstream_json(spec),
        "hunk_set_sha256": outcome.recorded.hunk_set_sha256 if outcome.recorded is not None else tree.hunk_set.digest,
        "excluded": _excluded_json(spec, _excluded(outcome)),
        "files": _files_json(outcome),
        "changes": (
            [{"path": c.path, "op": _change_op(c.before.exists, c.after.exists)} for c in outcome.plan.changes]
            if outcome.plan
            else []
        ),
        **_provenance_json(outcome),
    }


def reason_text(outcome: Outcome, *, name_undecided: bool = True) -> str | None:
    """Why the action was refused, as the report says it: the decision's reason, then the first hunk or file
    at fault (left out with `name_undecided=False`, below lines that name the hunks), then the patches a series
    judged it without."""
    if outcome.reason is None:
        return None
    text = outcome.reason
    if name_undecided and outcome.undecided is not None:
        text += f" ({outcome.undecided})"
    if outcome.judged_without:
        text += f" (judged without {', '.join(outcome.judged_without)}, left earlier in the series)"
    return text


def _change_op(before: bool, after: bool) -> str:
    return "modify" if before and after else ("create" if after else "delete")


# How a person says what the tree holds, after "refused: " or "dry run: ".
_STATE_TEXT = {
    PatchState.APPLIED: "the patch is applied",
    PatchState.UNAPPLIED: "the patch is not applied",
    PatchState.PARTIAL: "the tree is partially patched",
    PatchState.CONFLICT: "the tree conflicts with the patch",
    PatchState.AMBIGUOUS: "the tree is ambiguous (content alone cannot tell whether some hunks are applied)",
}

# A file's state, after its path.
_FILE_TEXT = {
    PatchState.APPLIED: "is patched",
    PatchState.UNAPPLIED: "is not patched",
    PatchState.PARTIAL: "is partially patched",
    PatchState.CONFLICT: "conflicts with the patch",
    PatchState.AMBIGUOUS: "is ambiguous",
}


def distinct_files(hunk_set: HunkSet) -> int:
    """Files as a person counts them: one diff touching a file twice, or renaming it, is still one file."""
    return len({f.path for f in hunk_set.files})


def size_text(hunk_set: HunkSet) -> str:
    size = f"{plural(hunk_set.hunk_count, 'hunk')} in {plural(distinct_files(hunk_set), 'file')}"
    if hunk_set.excluded:
        size += f", {plural(len(hunk_set.excluded), 'file')} excluded"
    return size


def summary_line(outcome: Outcome) -> str:
    tree = outcome.tree
    size = size_text(tree.hunk_set)
    pid = outcome.spec.id
    state = _paint(tree.state.value)
    if outcome.action is Action.STATUS:
        return f"{pid}: {state} ({size})"
    result = outcome.result
    assert result is not None
    written = _written(outcome)
    where = _STATE_TEXT[tree.state]
    texts = {
        Result.APPLIED: f"applied ({size}; {plural(written, 'file')} written)",
        Result.REVERTED: f"reverted ({size}; {plural(written, 'file')} written)",
        Result.ALREADY_APPLIED: ALREADY_APPLIED,
        Result.NOT_APPLIED: "not applied, nothing to revert",
        Result.DRY_RUN: f"dry run: {where}; would write {plural(written, 'file')}",
        Result.REFUSED: f"refused: {where}; nothing written",
        Result.SKIPPED: f"skipped: {where}; nothing written",
        Result.ADOPTED: "adopted: the tree has it (applied outside patchkit); recorded it, engine untouched",
    }
    text = texts[result]
    if result is Result.REFUSED and refused_by_strict_base(outcome):
        text = "refused by --strict-base: the tree is not verifiably the pinned base; nothing written"
    return f"{pid}: {_paint(result.value, text)}"


def _written(outcome: Outcome) -> int:
    return len({c.path for c in outcome.plan.changes}) if outcome.plan else 0


def change_lines(outcome: Outcome) -> list[str]:
    """--dry-run: the files it would write, one a line, as `patch --dry-run` lists them."""
    if outcome.plan is None:
        return []
    return [f"  would {_change_op(c.before.exists, c.after.exists)} {show_path(c.path)}" for c in outcome.plan.changes]


def refused_by_strict_base(outcome: Outcome) -> bool:
    facts = outcome.provenance
    return bool(outcome.strict_base and facts is not None and facts.base.state is not BaseState.PINNED)


def strict_base_lines(outcome: Outcome) -> list[str]:
    """Why --strict-base exits 9: what was checked, what differed, what to do."""
    facts = outcome.provenance
    if facts is None or not refused_by_strict_base(outcome):
        return []
    base, pid = facts.base, outcome.spec.id
    checked = []
    if base.pinned_commit:
        checked.append(f"HEAD against target.pinned_commit {base.pinned_commit[:12]}"
                       + ("" if base.head or base.relation else " (the tree is not a git checkout)"))
    if base.fingerprinted:
        checked.append(f"the [base] fingerprint of {plural(len(base.fingerprinted), 'file')}")
    if not checked:
        lines = ["  --strict-base (exit 9): nothing to check: the manifest has no target.pinned_commit and no "
                 "[base] fingerprint"]
    else:
        lines = [f"  --strict-base (exit 9): checked {' and '.join(checked)}"]
    found = []
    if base.relation in _RELATION_TEXT and base.head and base.pinned_commit:
        found.append(f"HEAD {base.head[:12]} {_RELATION_TEXT[base.relation]} the pinned commit")
    elif base.relation is Relation.UNKNOWN_OBJECT:
        found.append("the pinned commit is not in this repository")
    if base.drifted:
        found.append(f"{', '.join(base.drifted)} {'differs' if len(base.drifted) == 1 else 'differ'} from [base]")
    if base.unchecked:
        found.append(f"{', '.join(base.unchecked)} cannot be told from the tree")
    if checked and not found and base.detail:
        found.append(base.detail)
    if checked:
        lines.append(f"  found: {'; '.join(found) if found else 'no proof that this is the pinned base'}")
    vendor = f"{outcome.spec.vendor_command()} --base-tree DIR"  # DIR: the pristine tree, which only the user knows
    if base.state is BaseState.DRIFTED:
        todo = f"use the engine image {pid} was validated on, or re-vendor {pid} for this one (`{vendor}`)"
    else:
        todo = (f"record the base: `{vendor}` (DIR: the pristine tree) or set target.pinned_commit; or run "
                "without --strict-base")
    lines.append(f"  what to do: {todo}")
    return lines


def cause_lines(outcome: Outcome, limit: int = 5) -> list[str]:
    """On a refusal: the failing files and hunks with the reason, first and short; -v shows the whole table."""
    tree, lines = outcome.tree, []
    if tree.state in (PatchState.CONFLICT, PatchState.AMBIGUOUS):
        bad = [(v, hv) for v in tree.files for hv in v.hunks if hv.state in (HunkState.CONFLICT, HunkState.AMBIGUOUS)]
        for v, hv in bad[:limit]:
            where = f"expected at line {hv.expected + 1}"
            if hv.located.pos is not None:
                where += f", found at {hv.located.pos + 1}"
            verb = "conflicts" if hv.state is HunkState.CONFLICT else "is ambiguous"
            lines.append(
                f"  {show_path(v.section.path)}: hunk {hv.hunk.index} {hv.hunk.header} {_paint(hv.state.value, verb)}"
                f" ({where})"
            )
            if hv.located.detail:
                lines.append(f"    {escape_controls(hv.located.detail)}")
        files = [v for v in tree.files if v.state in (PatchState.CONFLICT, PatchState.AMBIGUOUS) and not v.hunks]
        for v in files[: max(0, limit - len(bad))]:
            detail = f": {escape_controls(v.detail)}" if v.detail else ""
            lines.append(f"  {show_path(v.section.path)} {_FILE_TEXT[v.state]}{detail}")
        more = len(bad) + len(files) - limit
        if more > 0:
            lines.append(f"  ... and {more} more")
    elif tree.state is PatchState.PARTIAL:
        for v in [v for v in tree.files if v.state is PatchState.PARTIAL][:limit]:
            done = sum(hv.state is HunkState.APPLIED for hv in v.hunks)
            lines.append(f"  {show_path(v.section.path)}: {done} of {plural(len(v.hunks), 'hunk')} applied")
        applied = [v.section.path for v in tree.files if v.state is PatchState.APPLIED]
        missing = [v.section.path for v in tree.files if v.state is PatchState.UNAPPLIED]
        if applied and missing:
            lines.append(f"  patched: {_few(applied)}; not patched: {_few(missing)}")
    if outcome.reason and not refused_by_strict_base(outcome):
        lines.append(f"  {reason_text(outcome, name_undecided=not lines)}")  # the hunk lines above name it
    return lines


def _few(paths: list[str], limit: int = 3) -> str:
    shown = ", ".join(paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")


def table_hint(outcome: Outcome, commands: Invocation | None = None) -> str:
    """The command that prints every hunk, spelled as this run was (see Invocation)."""
    commands = commands or Invocation.at(outcome.tree.root)
    return f"  every hunk: `{commands.patch_command('status', outcome.spec, '-v')}`"


# The state every hunk is in after a run that wrote: the hunk table of `apply -v` and `revert -v`.
_GOAL = {Result.APPLIED: HunkState.APPLIED.value, Result.REVERTED: HunkState.UNAPPLIED.value}
_UNDECIDED = (HunkState.CONFLICT.value, HunkState.AMBIGUOUS.value)  # the hunk states whose rows say why


def hunk_table(outcome: Outcome) -> list[str]:
    """The per-file, per-hunk report shown with -v and on refusal."""
    rows: list[str] = []
    # After a write the tree is the goal (the plan was judged to read so before a byte was written): each row says
    # the state it is in now, and the one it was found in where that differs, not the state from before alone.
    goal = _GOAL.get(outcome.result) if outcome.result is not None else None
    for entry in _entries(outcome):
        rows += _file_rows(entry, goal)
        rows += [row for hunk in entry.hunks for row in _hunk_rows(hunk, goal)]
        if entry.detail and not entry.hunks:
            rows.append(f"        {escape_controls(entry.detail)}")
    excluded = _excluded(outcome)
    if excluded:
        rows.append("  excluded (never read, never written): " + ", ".join(show_path(p) for p in excluded))
    reason = reason_text(outcome)
    if reason:
        rows.append(f"  {escape_controls(reason)}")
    return rows


def _file_rows(entry: FileEntry, goal: str | None) -> list[str]:
    """A file's rows of the hunk table: its state (now, and as found where that differs), its mode change."""
    from patchkit.diff.hunks import FileOp  # lazy: the judgement (loaded by what made the verdicts)

    name = show_path(entry.path)
    if entry.op == FileOp.RENAME.value:
        name = f"{show_path(entry.old_path or '')} -> {name}"
    extra = f" ({entry.op})" if entry.op != FileOp.MODIFY.value else ""
    state = entry.state
    now, was = (goal, f" (was {state})" if state != goal else "") if goal else (state, "")
    rows = [f"  {_paint(now, f'{now:<10}')} {name}{extra}{was}"]
    mode = entry.mode
    if mode is not None:
        mode_now, mode_was = (goal, f" (was {mode})" if mode != goal else "") if goal else (mode, "")
        rows.append(f"      mode {entry.old_mode:o} -> {entry.new_mode:o}: {_paint(mode_now)}{mode_was}")
    return rows


def _hunk_rows(hunk: HunkEntry, goal: str | None) -> list[str]:
    """A hunk's rows of the hunk table: its state and lines, and why where it is undecided."""
    where = f"expected line {hunk.expected + 1}"
    if hunk.found is not None:
        where += f", found at {hunk.found + 1}"
    elif hunk.candidates:
        where += ", matches at " + " and ".join(str(pos + 1) for pos in hunk.candidates)
    if goal and hunk.state != goal:
        where = f"was {hunk.state}, {where}"
    rows = [f"      hunk {hunk.number} {hunk.header}: {_paint(goal or hunk.state)} ({where})"]
    if hunk.detail and hunk.state in _UNDECIDED:
        rows.append(f"        {escape_controls(hunk.detail)}")
    return rows


LONG_TABLE = 20  # rows: a table longer than a screen ends with its totals, where the reader's eye is


def table_totals(outcome: Outcome, table: Sequence[str]) -> list[str]:
    """The closing line of a long `-v` table: the patch's line again and its hunks counted by state."""
    if len(table) <= LONG_TABLE:
        return []
    goal = _GOAL.get(outcome.result) if outcome.result is not None else None
    counts: dict[str, int] = {}
    for entry in _entries(outcome):
        for hunk in entry.hunks:
            state = goal or hunk.state
            counts[state] = counts.get(state, 0) + 1
    tally = ", ".join(f"{n} {state}" for state, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    return [f"{summary_line(outcome)}: {tally}" if tally else summary_line(outcome)]


def spec_json(spec: PatchSpec) -> dict[str, Any]:
    """One entry of `list --json`; `excluded` holds the manifest's excludes (a path or a glob each)."""
    return {
        "patch": spec.id,
        "title": spec.title,
        "folder": str(spec.folder),
        "pending": spec.pending,
        "upstream": upstream_json(spec),
        "target": {"name": spec.target.name, "pinned_commit": spec.target.pinned_commit or "unknown"},
        "excluded": [
            {"path": e.pattern, "reason": e.reason, **({"hunks": list(e.hunks)} if e.hunks else {})}
            for e in spec.excludes
        ],
        "prefix": spec.path_map.prefix,
        "paths": dict(spec.path_map.folders),
        "source": dict((("kind", spec.source.kind), *spec.source.fields)) if spec.source else None,
        "introduced_by": spec.introduced_by,
        "after": list(spec.after),
        "sha256": spec.sha256,
        "hunk_set_sha256": spec.hunkset_sha256,
        "base": dict(spec.base_files),
    }


def spec_line(spec: PatchSpec) -> str:
    flag = " [pending: not vendored]" if spec.pending else ""
    excl = ", ".join(
        show_path(e.pattern) + (f" (hunks {', '.join(map(str, e.hunks))})" if e.hunks else "") for e in spec.excludes
    )
    placed = []
    if spec.path_map.prefix:
        placed.append(f"under {spec.path_map.prefix}")
    placed += [f"{a} -> {b}" for a, b in spec.path_map.folders]
    parts = [f"{spec.id}: {spec.upstream.describe()} -> {spec.target.name}{flag}"]
    parts += [f"excludes {excl}"] if excl else []
    parts += [f"paths {', '.join(placed)}"] if placed else []
    parts += [f"from {spec.source.describe()}"] if spec.source else []
    return "; ".join(parts)


def _paint(key: str, text: str | None = None) -> str:
    # console.echo strips these styles when stdout is not a terminal. A word without a colour is left plain:
    # click.style would still end it with a reset (`base unknown^[[0m`).
    shown = text if text is not None else key
    colour = _COLOURS.get(key)
    return style(shown, colour) if colour else shown



# ------------------------------------------------------------------------------------------------ provenance


def _provenance_json(outcome: Outcome) -> dict[str, Any]:
    """The `base`, `record` and `provenance` keys (documented in docs/provenance.md)."""
    facts = outcome.provenance
    if facts is None:
        return {}
    base, check, spec = facts.base, facts.record, outcome.spec
    record = check.record
    return {
        "base": {
            "state": base.state.value,
            "pinned_commit": base.pinned_commit,
            "head": base.head,
            "relation": base.relation.value if base.relation else None,
            "fingerprint": list(base.fingerprinted),
            "drifted": list(base.drifted),
            "unchecked": list(base.unchecked),
            "detail": base.detail,
        },
        "record": {
            "state": check.state.value,
            "path": check.path,
            "hunk_set_sha256": record.hunkset_sha256 if record else None,
            "manifest_sha256": record.manifest_sha256 if record else None,
            "diff_sha256": record.diff_sha256 if record else None,
            "tool_version": record.tool_version if record else None,
            "applied_at": record.applied_at if record else None,
            "stored_copy_usable": check.stored is not None if check.state is RecordState.STALE else None,
            "detail": check.detail,
        },
        "provenance": {
            "origin": facts.origin.value if facts.origin else None,
            "can_retire": facts.can_retire,
            "used_stored_copy": facts.used_stored_copy,
            "strict_base": outcome.strict_base,
            "diff_sha256": spec.sha256,
            "hunk_set_sha256": spec.hunkset_sha256,
        },
    }


def provenance_line(outcome: Outcome, verbose: bool, commands: Invocation | None = None) -> str | None:
    """One line on base and record: always with -v, otherwise only when it says something to act on."""
    facts = outcome.provenance
    if facts is None:
        return None
    notable = (
        facts.base.state is BaseState.DRIFTED
        or (outcome.strict_base and facts.base.state is not BaseState.PINNED)
        or facts.record.state in (RecordState.STALE, RecordState.INVALID)
        or facts.origin is Origin.UPSTREAM
        or (facts.origin is Origin.OUTSIDE and outcome.result is not Result.ADOPTED)  # adopted: its line says so
        or (facts.record.state is RecordState.CURRENT and outcome.tree.state is not PatchState.APPLIED
            and outcome.result not in _WROTE)  # this run mended what the record claimed: nothing left to act on
    )
    if not (verbose or notable):
        return None
    commands = commands or Invocation.at(outcome.tree.root)
    return f"  {_base_text(facts.base, verbose)}; {_record_text(facts, outcome, commands)}"


_RELATION_TEXT = {
    Relation.DESCENDANT: "descends from",
    Relation.ANCESTOR: "is older than",
    Relation.UNRELATED: "is not related to",
}


def _base_text(base: BaseCheck, verbose: bool) -> str:
    label = "base " + _paint(base.state.value)
    if base.state is BaseState.PINNED:
        if base.relation is Relation.SAME:
            return f"{label} (HEAD is the pinned commit)"
        matched = len(base.fingerprinted) - len(base.unchecked)
        if not base.unchecked:
            return f"{label} ({plural(matched, 'file')} {'matches' if matched == 1 else 'match'} [base])"
        # vendor fingerprinted every file the hunk set reads; say why fewer are compared now
        return (f"{label} ({matched} of {plural(len(base.fingerprinted), 'file')} in [base] match; "
                f"{len(base.unchecked)} cannot be compared: no longer read by this hunk set, absent, touched by "
                "several sections, or not restorable from the tree's state)")
    reasons = []
    if base.relation in _RELATION_TEXT and base.head and base.pinned_commit:
        reasons.append(f"HEAD {base.head[:12]} {_RELATION_TEXT[base.relation]} the pinned {base.pinned_commit[:12]}")
    if base.drifted:
        reasons.append(", ".join(show_path(p) for p in base.drifted) + " differ from [base]")
    if base.detail and (verbose or base.relation is Relation.UNKNOWN_OBJECT):
        reasons.append(base.detail)
    return f"{label} ({'; '.join(reasons)})" if reasons else label


# The results of a run that wrote the tree (and its record): what was found before is mended, not to act on.
_WROTE = {
    Result.APPLIED: "this run wrote what was missing and rewrote the record",
    Result.REVERTED: "this run took out what was left and removed the record",
}

# What the tree lacks, after "the tree": a record says patchkit applied the patch, the state says otherwise.
_MISSING_TEXT = {
    PatchState.UNAPPLIED: "does not have it now",
    PatchState.PARTIAL: "no longer has all of it",
    PatchState.CONFLICT: "no longer has it as the patch wrote it",
    PatchState.AMBIGUOUS: "cannot be told to have it",
    PatchState.APPLIED: "has it",
}


def _next_apply(outcome: Outcome, commands: Invocation) -> str:
    """What `apply` really does to a tree whose record claims more than the tree holds, and the command that works."""
    spec, state = outcome.spec, outcome.tree.state
    if state is PatchState.UNAPPLIED:
        return f"`{commands.patch_command('apply', spec)}` applies it again and rewrites the record"
    if state is PatchState.PARTIAL:
        return (
            "`apply` refuses a partially patched tree: "
            f"`{commands.patch_command('apply', spec, '--complete')}` writes the missing hunks and rewrites the "
            "record"
        )
    return (
        "`apply` refuses it: restore the files the hunks name (see them with "
        f"`{commands.patch_command('status', spec, '-v')}`), or re-vendor the patch for this image"
    )


def _record_text(facts: Provenance, outcome: Outcome, commands: Invocation) -> str:
    check, record = facts.record, facts.record.record
    outcome_state = outcome.tree.state
    if facts.origin is Origin.UPSTREAM:
        return (
            f"no record: the tree has this change but patchkit did not put it there ({_paint('upstream-contains')}); "
            "the base moved on from the pinned one, so the engine probably ships it: the patch can be retired"
        )
    if facts.origin is Origin.OUTSIDE and outcome.result is Result.ADOPTED:
        return "was applied outside patchkit: this run recorded it (adopted), engine untouched"
    if facts.origin is Origin.OUTSIDE:
        return (
            f"no record: {_paint('applied outside patchkit')} (by a script or by hand, on the pinned base or one "
            f"that cannot be told); `{commands.patch_command('apply', outcome.spec, '--adopt')}` records it "
            "without writing the engine"
        )
    if check.state is RecordState.CURRENT and record is not None and outcome_state is not PatchState.APPLIED:
        if outcome.result in _WROTE:
            return (
                f"the record said patchkit applied it ({record.applied_at}), but the tree "
                f"{_MISSING_TEXT[outcome_state]}: {_WROTE[outcome.result]}"
            )
        return (
            f"the record says patchkit applied it ({record.applied_at}), but the tree {_MISSING_TEXT[outcome_state]} "
            f"(reinstalled or restored, e.g. pip install --force-reinstall); {_next_apply(outcome, commands)}"
        )
    if outcome.result is Result.APPLIED:
        return "this run applied it and wrote the record"
    if outcome.result is Result.REVERTED and check.state is not RecordState.STALE:
        return "this run reverted it and removed the record"
    if check.state is RecordState.STALE and record is not None:
        text = (
            f"record {_paint('stale')}: the tree holds another version (hunk set {record.hunkset_sha256[:12]}, "
            f"applied {record.applied_at})"
        )
        return text + ("; this revert used its stored copy" if facts.used_stored_copy else "")
    if check.state is RecordState.CURRENT and record is not None:
        origin = "applied by this version" if facts.origin is Origin.THIS_VERSION else "record current"
        return f"{origin} (patchkit {record.tool_version}, {record.applied_at})"
    if check.state is RecordState.INVALID:
        return f"record {_paint('invalid')}: {check.detail}"
    return "no record"


# ---------------------------------------------------------------------------------------------------- series


def series_json(series: SeriesOutcome) -> dict[str, Any]:
    """`--all --json`: the series as one document; each patch with the keys of the single-patch document."""
    return {
        "action": series.action.value,
        "root": str(series.root),
        "state": series.state.value,
        "result": series.result.value if series.result else None,
        "exit_code": int(series.exit_code),
        "left": [o.spec.id for o in series.left],
        "patches": [outcome_json(o) for o in series.outcomes],
        "changes": [
            {"path": c.path, "op": _change_op(c.before.exists, c.after.exists)}
            for c in (series.plan.changes if series.plan else ())
        ],
    }


def series_status_table(series: SeriesOutcome, verbose: bool, commands: Invocation | None = None) -> list[str]:
    """`status --all`: one row per patch (patch, state, base, files), then what stands out."""
    rows = [(o.spec.id, o.tree.state.value, o.provenance.base.state.value if o.provenance else "-",
             ", ".join(dict.fromkeys(show_path(v.section.path) for v in o.tree.files))) for o in series.outcomes]
    width = max(len("patch"), *(len(r[0]) for r in rows))
    lines = [f"{'patch':<{width}}  {'state':<10} {'base':<8} files"]
    lines += [f"{pid:<{width}}  {_paint(state, f'{state:<10}')} {_paint(base, f'{base:<8}')} {files}"
              for pid, state, base, files in rows]
    for outcome in series.outcomes:
        details = _details(outcome, verbose, commands)
        if details:
            lines += [f"{outcome.spec.id}:", *details]
    count = len(series.outcomes)
    of = "1 patch" if count == 1 else f"the worst of {count} patches"
    lines.append(f"series: {_paint(series.state.value)} ({of})")
    return lines


def series_lines(series: SeriesOutcome, verbose: bool, commands: Invocation | None = None) -> list[str]:
    """`apply --all` / `revert --all`: one line per patch, then one line on the series and what to do."""
    from patchkit.run.series import SeriesResult  # lazy: the CLI (loaded already: --all made `series`)

    commands = commands or Invocation.at(series.root)
    lines: list[str] = []
    in_order = series.outcomes if series.action is Action.APPLY else series.outcomes[::-1]  # as they were acted on
    for outcome in in_order:
        lines.append(summary_line(outcome))
        # Held back by all or nothing, every patch has the same reason: the series line gives it once.
        lines += _details(outcome, verbose, commands, skip_reason=series.keep_going)
    result = series.result
    assert result is not None
    written = len({c.path for c in series.plan.changes}) if series.plan else 0
    count = len(series.outcomes)
    every = "the only patch" if count == 1 else f"all {count} patches"
    goal = "end applied" if series.action is Action.APPLY else "be taken out"
    texts = {
        SeriesResult.DRY_RUN: f"dry run, nothing written: {every} would {goal}; would write {plural(written, 'file')}",
        SeriesResult.REFUSED: f"refused, nothing written to {series.root}: the series is all or nothing",
        SeriesResult.INCOMPLETE: f"incomplete: {len(series.left)} of {plural(count, 'patch')} left, "
        f"{_tally(series)} ({plural(written, 'file')} written)",
    }
    adopted = sum(o.result is Result.ADOPTED for o in series.outcomes)
    done = [f"{plural(written, 'file')} written"] if written else []
    done += [f"{plural(adopted, 'record')} written, engine untouched"] if adopted else []
    text = texts.get(result, f"{_tally(series)} ({', '.join(done) or 'nothing written'})")
    if result is SeriesResult.REFUSED and not series.keep_going:  # spelled only when said (shlex loads then)
        text += f" (`{commands.series_command(series.action.value, '--keep-going')}` writes the patches that can be)"
    lines.append(f"series: {_paint(result.value, text)}")
    if result is SeriesResult.DRY_RUN and series.plan is not None:
        lines += [
            f"  would {_change_op(c.before.exists, c.after.exists)} {show_path(c.path)}" for c in series.plan.changes
        ]
    first = next((o for o in series.left if o.result is Result.REFUSED), None)
    if first is not None:
        lines += _refusal_advice(first, commands)
    return lines


def _tally(series: SeriesOutcome) -> str:
    """What the series did, as a person says it: "applied 2 patches, 1 already applied", "reverted 5 patches"."""
    results: list[Result | None] = [o.result for o in series.outcomes
                                    if o.result not in (Result.REFUSED, Result.SKIPPED)]
    count = len(series.outcomes)
    parts = [f"{verb} {plural(results.count(r), 'patch')}"
             for r, verb in ((Result.APPLIED, "applied"), (Result.ADOPTED, "adopted"), (Result.REVERTED, "reverted"))
             if r in results]
    for r, text in ((Result.ALREADY_APPLIED, "already applied"), (Result.NOT_APPLIED, "not applied")):
        n = results.count(r)
        if not n:
            continue
        if parts:
            parts.append(f"{n} {'was' if n == 1 else 'were'} {text}")
        elif n == count:
            parts.append(f"{'the only patch is' if n == 1 else f'all {n} patches are'} {text}")
        else:
            parts.append(f"{plural(n, 'patch')} {'is' if n == 1 else 'are'} {text}")
    return ", ".join(parts) or "nothing to do"


def _details(
    outcome: Outcome, verbose: bool, commands: Invocation | None, skip_reason: bool = True
) -> list[str]:
    """What a patch's line needs below it: provenance worth a look, the hunk table on refusal, a skip reason."""
    lines = []
    line = provenance_line(outcome, verbose, commands)
    if line is not None:
        lines.append(line)
    lines += strict_base_lines(outcome)
    if verbose:
        lines += hunk_table(outcome)
    elif outcome.result is Result.REFUSED:
        lines += cause_lines(outcome)
    elif (reason := reason_text(outcome)) and (skip_reason or outcome.result is not Result.SKIPPED):
        lines.append(f"  {escape_controls(reason)}")
    return lines


def _refusal_advice(outcome: Outcome, commands: Invocation) -> list[str]:
    """Which patch, which file, and what to do: the lines a stopped container start ends with."""

    pid, tree, facts = outcome.spec.id, outcome.tree, outcome.provenance
    stale = facts is not None and facts.record.state is RecordState.STALE
    bad = next((v for v in tree.files if v.state not in (PatchState.APPLIED, PatchState.UNAPPLIED)), None)
    if bad is not None:
        where = f"{show_path(bad.section.path)} {_FILE_TEXT[bad.state]}"
    elif stale and facts is not None:
        where = f"{facts.record.path} names another version of the patch"
    elif refused_by_strict_base(outcome):
        where = "the tree is not verifiably the pinned base (--strict-base)"
    else:
        where = _STATE_TEXT[tree.state]
    todo = reason_text(outcome)
    if missing_files(tree) and tree.state is PatchState.CONFLICT:
        where = f"{show_path(bad.section.path) if bad else 'a file'} is not under the root"
    elif tree.state in (PatchState.CONFLICT, PatchState.AMBIGUOUS) and not stale:
        todo = (
            f"see the hunks with `{commands.patch_command('status', outcome.spec, '-v')}`; if this engine image "
            "already ships "
            f"the fix, retire {pid} (remove its folder from the patches registry), else re-vendor it for this image"
        )
    return [f"  stopped at {pid}: {where}", f"  what to do: {todo}"]


def plural(count: int, word: str) -> str:
    """"1 hunk", "2 hunks", "1 patch", "3 patches"."""
    if count == 1:
        return f"{count} {word}"
    return f"{count} {word}{'es' if word.endswith(('ch', 'sh', 's', 'x')) else 's'}"
