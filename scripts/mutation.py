#!/usr/bin/env python3
"""Mutation testing of patchkit's riskiest code with cosmic-ray, module by module (issue #35 item 1).

cosmic-ray (the `dev` extra) makes the mutants: its operators find every place a mutation applies in a module,
and its `mutate_and_test` writes one mutant to disk, runs a test command in a subprocess with a timeout and puts
the original back. This script adds what patchkit needs around it:

- it never mutates the worktree: the tracked and untracked (not ignored) files are copied into a scratch folder
  and the mutants are written there, with that folder first on PYTHONPATH, so the tests (and the CLI they start
  in subprocesses) import the mutated copy;
- a test selection per module (MODULES below): only the test files that exercise it run, stopping at the first
  failure (`-x`);
- within it, coverage-guided selection (`--selection lines`, the default): one coverage run of the module's
  selection, with each test's node id as the context (in the pytest process, and in the CLI subprocesses its tests
  start, through COVERAGE_PROCESS_START and a sitecustomize written into the scratch copy for that run only),
  maps each line to the tests that execute it (a forked child's lines too, and a process that ends with os._exit
  saves first); a mutant then runs only the tests of its statement, fastest first, a module-level name's mutant
  the tests of the functions that read it, and the whole file selection when the map cannot say (a decorator, a
  class body, a name other files use, a line no test reached).
  The map is cached in .mutation-cache/, keyed by the digest of patchkit/, tests/ and the selection. `--compare`
  runs every mutant with the file selection as well, to check that no kill is lost;
- `--sample N --seed S` runs a reproducible random subset of each module's mutants (what CI would run);
- the equivalent mutants are listed in scripts/mutation_equivalent.toml, one line each with its reason, and
  left out of the score: score = killed / (mutants - equivalent), where a timeout counts as killed;
- a kill-first order (`--order kill-first`, the default): a mutant's selected tests start with those that killed
  earlier mutants of the same function (the first test pytest's summary names as failed), then the rest fastest
  first; the same tests, another order (`--order fastest`: fastest first only);
- `--jobs N`: N worker processes, each in its own scratch copy (cosmic-ray writes the mutant at its path relative
  to the cwd), fed the mutants in order once the module's baseline and map are built; the results are listed in
  the mutants' order whatever order they came back in;
- progress with partial counts as it goes, a final table per module, and `--out FILE` for the result as JSON
  (every mutant's id, outcome and diff, so a survivor can be read without rerunning).
- a listed equivalent that survived a run is not run again while nothing it rests on has changed (its id, its
  place on the line, the source of the function around it: `.mutation-cache/equivalents.json`); it is counted as
  equivalent, as before (`--recheck-equivalents`, or `--mutant ID`, runs it);
- `--record FILE`: each result appended to FILE as it comes (a JSON line); a run given the same FILE takes the
  results it holds for the same module source and runs the others, so a run of hours stopped midway (a session
  that ends, a Ctrl-C, a reboot) picks up where it was.

A mutant's id is `path:line:operator#occurrence` (the occurrence counts that operator's places in the module),
stable while the module's code does not change; when it changes, an equivalent entry whose line no longer holds
the same mutant shows up as a survivor again and is triaged anew (the safe direction).

    python scripts/mutation.py                              # every module, every mutant (hours)
    python scripts/mutation.py --module patchkit/judge/treestate.py
    python scripts/mutation.py --module patchkit/judge/treestate.py --jobs 2   # two workers (two cores)
    python scripts/mutation.py --sample 8 --seed 1 --out mutation.json   # the CI sample
    python scripts/mutation.py --list                       # the modules and their test selections
    python scripts/mutation.py --stale                      # equivalents whose ids moved (after a merge)
    python scripts/mutation.py --module M --sample 16 --seed 35 --compare   # lines vs file selection
    python scripts/mutation.py --module M --record M.jsonl   # stopped? the same command goes on from there

Exit status: 0 when no mutant survived that is not listed as equivalent, 1 when some did, 2 on a bad argument
or when the unmutated tests already fail (the baseline).
"""

from __future__ import annotations

import argparse
import ast
import difflib
import hashlib
import json
import multiprocessing
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from types import TracebackType

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
EQUIVALENTS = REPO / "scripts" / "mutation_equivalent.toml"

_JUDGE = ("tests/test_state.py", "tests/test_matching.py", "tests/test_placement.py", "tests/test_plan.py",
          "tests/test_regressions.py",
          # the judgement against real git and the construction's truth, 40 examples and the replayed cases (14 s)
          "tests/test_differential.py")
_WORKSPACE = ("tests/test_workspace.py", "tests/test_recovery_checks.py", "tests/test_crash.py",
              "tests/test_untrusted_state.py", "tests/test_state_trust.py", "tests/test_races.py",
              # a folder moved out of the root mid-write: restored through the held descriptors (2.5 s)
              "tests/test_moved_folders.py")
# diff/filtering.py: the excludes (test_diffs, test_manifest, test_globs, test_rule_edges), a commit chain's layers
# (test_mbox_chain), the [paths] placement (test_placement), hunk excludes kept in a compiled set (test_compiled),
# stacked patches (test_series)
_DIFF = ("tests/test_diffs.py", "tests/test_manifest.py", "tests/test_globs.py", "tests/test_rule_edges.py",
         "tests/test_mbox_chain.py", "tests/test_placement.py", "tests/test_compiled.py", "tests/test_series.py",
         # a file touched two or three times with hunk excludes in a lower section, against real `git apply`
         *(f"tests/test_differential.py::{name}" for name in (
             "test_hunk_excludes_in_a_file_touched_twice_move_the_later_section",
             "test_hunk_excludes_in_a_file_touched_three_times",
             "test_seed_20261201_chain_13187_a_later_section_reads_context_inside_a_dropped_hunk")),
         # a symbolic link or submodule change left in the set (refused by _check_supported)
         *(f"tests/test_hostile.py::test_hostile_input_is_refused_cleanly[{case}]"
           for case in ("make-symlink", "symlink-to-file", "gitlink")))

# Module (a file under patchkit/) -> the test files that exercise it. Each line is a choice of speed over reach:
# a mutant that only a test outside its selection would kill shows up as a survivor, and the fix is to add that
# test file here (or a test to one of these files).
MODULES: dict[str, tuple[str, ...]] = {
    "patchkit/judge/treestate.py": (*_JUDGE, "tests/test_untrusted_state.py", "tests/test_startup.py",
                                    "tests/test_judge_kills.py"),
    "patchkit/judge/verdicts.py": (*_JUDGE, "tests/test_judge_kills.py"),
    # git's places for a ported image's hunks, out of their line order, rewritten in file order (1 s)
    "patchkit/judge/rewrite.py": (*_JUDGE, "tests/test_judge_kills.py",
                                  "tests/test_ported.py::test_a_hunk_git_places_above_the_one_before_it_on_a_"
                                  "fingerprinted_image"),
    "patchkit/judge/matching.py": (*_JUDGE, "tests/test_matching_reference.py", "tests/test_judge_kills.py"),
    # [base] / [base_applied] of a ported image: vendor --base-tree writes them, status reads them (10 s)
    "patchkit/judge/state.py": (*_JUDGE, "tests/test_stacked_base.py", "tests/test_ported.py",
                                "tests/test_lookalikes.py", "tests/test_matching_reference.py",
                                "tests/test_judge_kills.py",
                                # the chains' union-find when a rename joins a lower group to a higher one (3 s)
                                "tests/test_series.py::test_a_rename_over_a_file_deleted_earlier_in_the_chain_"
                                "matches_git_am"),
    "patchkit/workspace/trust.py": ("tests/test_state_trust.py", "tests/test_untrusted_state.py",
                                    "tests/test_workspace.py", "tests/test_mutation_kills.py"),
    # the one trust rule: pinned edge by edge (test_trust_rule), and through the state folder and the environment
    "patchkit/input/trust.py": ("tests/test_trust_rule.py", "tests/test_state_trust.py",
                                "tests/test_untrusted_state.py", "tests/test_untrusted_env.py",
                                "tests/test_mutation_kills.py",
                                # the restart entry loads it, and must not load pathlib (its import type-only)
                                "tests/test_startup.py::test_the_program_answers_a_restart_without_click"),
    "patchkit/workspace/names.py": _WORKSPACE,
    "patchkit/workspace/interrupts.py": (*_WORKSPACE,  # SIGTERM / SIGINT mid-write: rolled back, said so (2 s)
                                         "tests/test_hostile_fs.py::test_sigterm_and_sigint_mid_write_roll_back_"
                                         "and_say_so",
                                         # a signal the run was started ignoring stays ignored; SIGINT at its
                                         # default action, a caller's handlers (4 s)
                                         "tests/test_hostile_fs.py::test_a_signal_the_run_was_started_ignoring_"
                                         "does_not_stop_the_write",
                                         "tests/test_hostile_fs.py::test_a_sigint_left_at_its_default_action_ends_"
                                         "the_run_only_after_the_rollback",
                                         "tests/test_hostile_fs.py::test_a_sigterm_handler_of_the_callers_is_"
                                         "replaced_for_the_run",
                                         "tests/test_hostile_fs.py::test_a_sigint_handler_of_the_callers_that_"
                                         "does_not_raise_still_stops_the_write"),
    "patchkit/workspace/folders.py": (*_WORKSPACE, "tests/test_mutation_kills.py"),
    "patchkit/workspace/disk.py": (*_WORKSPACE, "tests/test_hostile_fs.py"),
    "patchkit/workspace/journal.py": _WORKSPACE,
    "patchkit/workspace/recovery.py": (*_WORKSPACE,  # what a rollback says it did, over the kill points (8 s)
                                       "tests/test_bytecode.py::test_a_rollback_counts_only_the_files_it_put_back",
                                       "tests/test_mutation_kills.py"),
    "patchkit/workspace/lock.py": (*_WORKSPACE, "tests/test_lock_others.py",  # the lock against other users (6 s)
                                   "tests/test_mutation_kills.py",
                                   # a status loads none of the write stage, which lock.py imports only to type it
                                   "tests/test_startup.py::test_status_loads_only_what_it_uses",
                                   # a patchkit holder's own line, read back by the waiter (2 s)
                                   "tests/test_hostile_fs.py::test_a_waiter_is_told_who_holds_the_lock"),
    # a file edited in place right before its replace, three folders deep: renamed back at its own name (1 s)
    "patchkit/workspace/commit.py": (*_WORKSPACE, "tests/test_write_mutations.py", "tests/test_mutation_kills.py",
                                     # a hard-linked file refused before anything is written (1 s)
                                     "tests/test_hostile_fs.py::test_a_hard_linked_target_is_refused",
                                     # SIGTERM / SIGINT mid-write: what commit_changes says of the write (2 s)
                                     "tests/test_hostile_fs.py::test_sigterm_and_sigint_mid_write_roll_back_and_"
                                     "say_so",
                                     # ensure_gitignore's failure, before the transaction (1 s)
                                     "tests/test_hostile_fs.py::test_a_state_gitignore_that_cannot_be_written_is_"
                                     "a_clear_error_before_any_change",
                                     # stale bytecode caches removed unread, and put back (2 s)
                                     "tests/test_bytecode.py"),
    "patchkit/diff/filtering.py": (*_DIFF, "tests/test_mutation_kills.py"),
    # --root-from-package in process (test_provenance) and through --python given as a relative path (test_messages)
    "patchkit/input/environment.py": ("tests/test_python_env.py", "tests/test_untrusted_env.py",
                                      "tests/test_provenance.py::test_root_from_package",
                                      "tests/test_messages.py::test_a_root_from_package_run_hints_with_the_same_"
                                      "options", "tests/test_mutation_kills.py"),
    "patchkit/run/fastpath.py": ("tests/test_fastpath.py", "tests/test_startup.py", "tests/test_mutation_kills.py",
                                 # the code fingerprint of patchkit.pyz (one test: it builds the archive)
                                 "tests/test_pyz.py::test_the_restart_fast_path_from_the_archive_trusts_records_of"
                                 "_this_build_only"),
    # and `patchkit lint` through the CLI on the fixture registries and the consumer repository
    "patchkit/scan/rules.py": ("tests/test_lint_scan.py", "tests/test_scan_corpus.py", "tests/test_lint_scenarios.py",
                               "tests/test_lint_consumer.py", "tests/test_mutation_kills.py"),
}

# Outcomes of one mutant, as this script names them.
KILLED, SURVIVED, TIMEOUT, EQUIVALENT, ERROR = "killed", "survived", "timeout", "equivalent", "error"


@dataclass
class Mutant:
    """One mutant: where, what, and (after its run) how it ended."""

    id: str
    module: str
    line: int
    operator: str
    occurrence: int
    outcome: str = ""
    seconds: float = 0.0
    diff: str = ""
    reason: str = ""  # the equivalents file's reason, for an equivalent
    selection: int = 0  # how many tests its line's map chose; 0: the module's file selection ran
    file_outcome: str = ""  # with --compare: the outcome and seconds with the file selection
    file_seconds: float = 0.0


@dataclass
class ModuleResult:
    """The counts of one module's run, and its mutants."""

    module: str
    tests: list[str]
    total: int  # mutants cosmic-ray found in the module
    run: int = 0  # of those, run (all, or the sample)
    baseline_seconds: float = 0.0
    map_seconds: float = 0.0  # building the line map (0: it came from the cache, or none was used)
    counts: dict[str, int] = field(default_factory=dict)
    mutants: list[Mutant] = field(default_factory=list)

    def score(self) -> float | None:
        """killed (timeouts included) / (run - equivalent); None when nothing counted."""
        killed = self.counts.get(KILLED, 0) + self.counts.get(TIMEOUT, 0)
        counted = self.run - self.counts.get(EQUIVALENT, 0) - self.counts.get(ERROR, 0)
        return killed / counted if counted else None


def load_equivalents(path: Path = EQUIVALENTS) -> dict[str, str]:
    """The checked-in equivalent mutants: id -> one-line reason (a `[equivalent]` table, one line each)."""
    if not path.exists():
        return {}
    with path.open("rb") as handle:
        table = tomllib.load(handle).get("equivalent", {})
    bad = [key for key, reason in table.items() if not isinstance(reason, str) or not reason.strip()]
    if bad:
        raise SystemExit(f"{path}: every equivalent mutant needs a reason; missing for: {', '.join(bad)}")
    return dict(table)


def stale_equivalents(equivalents: dict[str, str]) -> list[str]:
    """The listed ids that name no mutant of today's code (a module's lines moved since they were triaged): each
    such mutant runs again as a survivor, and its line here should follow it (found by its diff)."""
    stale: list[str] = []
    for module in sorted({ident.split(":")[0] for ident in equivalents}):
        found = {m.id for m in find_mutants(module)[0]} if Path(module).exists() else set()
        stale += [ident for ident in equivalents if ident.split(":")[0] == module and ident not in found]
    return stale


def _places(module: str, text: str | None = None) -> dict[str, tuple[str, tuple[int, int], tuple[int, int]]]:
    """id -> (operator, start, end) of `module`'s mutants, as in the worktree or (`text`) as in another version."""
    if text is None:
        mutants, items = find_mutants(module)
    else:
        home = Path.cwd()
        with tempfile.TemporaryDirectory(prefix="patchkit-follow-") as scratch:
            (Path(scratch) / module).parent.mkdir(parents=True)
            (Path(scratch) / module).write_text(text, encoding="utf-8")
            os.chdir(scratch)
            try:
                mutants, items = find_mutants(module)
            finally:
                os.chdir(home)
    places = {}
    for mutant in mutants:
        (spec,) = items[mutant.id].mutations  # type: ignore[attr-defined]
        places[mutant.id] = (mutant.operator, tuple(spec.start_pos), tuple(spec.end_pos))
    return places  # type: ignore[return-value]


def _occurrence(ident: str) -> int:
    return int(ident.rpartition("#")[2])


def follow_equivalents(rev: str, equivalents: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """Where each listed equivalent of a module changed since git revision `rev` is now: (old id -> new id for
    those that moved, the ids whose own lines changed, or whose mutant is gone, to triage anew).

    A mutant follows its lines when they are unchanged between `rev` and the worktree (difflib's matching
    blocks): the same operator at the same columns of the lines they moved to. Its occurrence number is taken from
    today's code, so an operator's places added or removed above it are followed too."""
    moved: dict[str, str] = {}
    lost: list[str] = []
    for module in sorted({ident.split(":")[0] for ident in equivalents}):
        shown = subprocess.run(["git", "show", f"{rev}:{module}"], cwd=REPO, capture_output=True, text=True)
        if shown.returncode != 0 or not Path(module).exists():
            continue
        old_text, new_text = shown.stdout, Path(module).read_text(encoding="utf-8")
        if old_text == new_text:
            continue
        old_places, new_places = _places(module, old_text), _places(module)
        here: dict[tuple[str, tuple[int, int], tuple[int, int]], list[str]] = {}  # several a place: NumberReplacer
        for ident, place in new_places.items():  # +1 and -1 of one number
            here.setdefault(place, []).append(ident)
        before: dict[tuple[str, tuple[int, int], tuple[int, int]], list[str]] = {}
        for ident, place in old_places.items():
            before.setdefault(place, []).append(ident)
        lines: dict[int, int] = {}
        matcher = difflib.SequenceMatcher(None, old_text.splitlines(), new_text.splitlines(), autojunk=False)
        for block in matcher.get_matching_blocks():
            lines.update((block.a + k + 1, block.b + k + 1) for k in range(block.size))
        for ident in (i for i in equivalents if i.split(":")[0] == module and i in old_places):
            operator, start, end = old_places[ident]
            first, last = lines.get(start[0]), lines.get(end[0])
            found = None
            if first is not None and last is not None and last - first == end[0] - start[0]:
                siblings = here.get((operator, (first, start[1]), (last, end[1])), [])
                rank = sorted(before[operator, start, end], key=_occurrence).index(ident)
                found = sorted(siblings, key=_occurrence)[rank] if rank < len(siblings) else None
            if found is None:
                lost.append(ident)
            elif found != ident:
                moved[ident] = found
    return moved, lost


class Record:
    """A --record file: one JSON object a line, a mutant's result each, appended as the results come; a run given
    the same file takes from it the results of the same module at the same source (sha256), and runs the rest.

    A result stands for the module's code it ran on, not for the tests: a test added since may kill a recorded
    survivor, which `--mutant ID` then shows. An error is not recorded (it is run again), and a line cut short (the
    run killed while writing it) is passed over.
    """

    def __init__(self, path: Path, module: str) -> None:
        self.path, self.module = path, module
        self.code = hashlib.sha256(Path(module).read_bytes()).hexdigest()[:16]
        self.results: dict[str, dict[str, object]] = {}
        self.other = 0  # lines of another version of the module, passed over
        held = path.read_text(encoding="utf-8") if path.exists() else ""
        self.cut = held != "" and not held.endswith("\n")  # a last line cut short: the next result starts a new one
        for line in held.splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            if not isinstance(entry, dict) or entry.get("module") != module:
                continue
            if entry.get("code") == self.code:
                self.results[str(entry["id"])] = entry
            else:
                self.other += 1

    def take(self, mutant: Mutant) -> str | None:
        """Fill `mutant` from its recorded result and return the test that killed it ("" if none); None when the
        record has no result for it."""
        entry = self.results.get(mutant.id)
        if entry is None:
            return None
        mutant.outcome, mutant.diff = str(entry["outcome"]), str(entry.get("diff", ""))
        mutant.seconds, mutant.selection = float(str(entry["seconds"])), int(str(entry.get("selection", 0)))
        return str(entry.get("killer", ""))

    def add(self, mutant: Mutant, killer: str) -> None:
        """Append `mutant`'s result (before the equivalents file is applied: a survivor is recorded as one)."""
        if mutant.outcome == ERROR:
            return
        entry = {"module": self.module, "code": self.code, "id": mutant.id, "outcome": mutant.outcome,
                 "seconds": mutant.seconds, "selection": mutant.selection, "killer": killer, "diff": mutant.diff}
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write("\n" * self.cut + json.dumps(entry) + "\n")
        self.cut = False


class SurvivedBefore:
    """The listed equivalents that survived a run, each with the digest of what its equivalence rests on: its id,
    its place on the line, and the source of the function around it (the whole module's, for a mutant outside
    every function). A listed equivalent whose digest is unchanged is not run again (`--recheck-equivalents` runs
    it): nothing it is made of has changed since it last survived its whole selection, so it would survive it
    again, unless a test kills it now, which would mean its listing was wrong (--recheck-equivalents shows that).
    Kept in MAP_CACHE (not in git): a fresh checkout runs every equivalent once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.digests: dict[str, str] = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}

    @staticmethod
    def digest(mutant: Mutant, item: object, shape: CodeShape, lines: Sequence[str]) -> str:
        (spec,) = item.mutations  # type: ignore[attr-defined]
        body = shape.functions.get(mutant.line, range(1, len(lines) + 1))
        text = "\n".join(lines[line - 1] for line in body)
        where = f"{mutant.id}\0{tuple(spec.start_pos)}\0{tuple(spec.end_pos)}"
        return hashlib.sha256(f"{where}\0{text}".encode()).hexdigest()

    def add(self, ident: str, digest: str) -> None:
        self.digests[ident] = digest
        self.path.parent.mkdir(exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps(self.digests, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(temporary, self.path)


def scratch_copy(dest: Path) -> None:
    """Copy the worktree's tracked and untracked, not ignored, files into `dest` (the mutants are written there)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True).stdout
    for name in sorted({n for n in listed.decode().split("\0") if n}):
        source = REPO / name
        if not source.is_file() and not source.is_symlink():
            continue  # deleted in the worktree but still in the index (or a folder: a submodule)
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)


def annotation_spans(module: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """The (start, end) positions of the type annotations in `module`, when it never evaluates them.

    Under `from __future__ import annotations` an annotation is a string nobody runs, so cosmic-ray's mutants
    of `str | None` (into `str & None`, ...) change no behaviour: they are left out, not counted as equivalents.
    A module without that import evaluates its annotations, and keeps those mutants.
    """
    tree = ast.parse(Path(module).read_text(encoding="utf-8"))
    lazy = any(isinstance(node, ast.ImportFrom) and node.module == "__future__"
               and any(alias.name == "annotations" for alias in node.names) for node in tree.body)
    if not lazy:
        return []
    spans = []
    for node in ast.walk(tree):
        found: list[ast.expr | None] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.append(node.returns)
        elif isinstance(node, (ast.arg, ast.AnnAssign)):
            found.append(node.annotation)
        for expr in found:
            if expr is not None and expr.end_lineno is not None and expr.end_col_offset is not None:
                spans.append(((expr.lineno, expr.col_offset), (expr.end_lineno, expr.end_col_offset)))
    return spans


def find_mutants(module: str) -> tuple[list[Mutant], dict[str, object]]:
    """Every mutant cosmic-ray's operators make in `module` (a path relative to the cwd), with its work items.

    Mutants inside unevaluated annotations (annotation_spans) are left out.
    """
    # lazy: cosmic-ray is a dev tool, imported only when mutants are made (so --list and --help work without it)
    from cosmic_ray.commands.init import init
    from cosmic_ray.work_db import WorkDB, use_db

    found: list[Mutant] = []
    items: dict[str, object] = {}
    spans = annotation_spans(module)
    with tempfile.TemporaryDirectory() as scratch, use_db(Path(scratch) / "s.sqlite", WorkDB.Mode.create) as db:
        init([Path(module)], db, {})
        for item in db.work_items:
            (spec,) = item.mutations
            if any(start <= tuple(spec.start_pos) < end for start, end in spans):
                continue
            ident = f"{module}:{spec.start_pos[0]}:{spec.operator_name}#{spec.occurrence}"
            found.append(Mutant(ident, module, spec.start_pos[0], spec.operator_name, spec.occurrence))
            items[ident] = item
    found.sort(key=lambda m: (m.line, m.operator, m.occurrence))
    return found, items


def test_command(tests: Sequence[str], plugin: str = "", stop: bool = True) -> str:
    """The pytest command one mutant is tested with: only `tests` (in that order), stop at the first failure
    (unless not `stop`), no cache; `plugin`, a pytest plugin to load."""
    return shlex.join([sys.executable, "-m", "pytest", "-q", *(["-x"] if stop else []), "-p", "no:cacheprovider",
                       *(["-p", plugin] if plugin else []), "-o", "addopts=", "--no-header", *tests])

# --- coverage-guided test selection -------------------------------------------------------------------------------
# A mutant is run against the tests that execute its line, not the module's whole selection: one coverage run of the
# selection records, per test, the module's lines it runs, in-process and in the CLI subprocesses it starts. That map
# is cached per module, keyed by the digest of the code and tests it was measured on (MAP_CACHE).

MAP_CACHE = REPO / ".mutation-cache"
# Test files whose CLI runs in `python -I` (no PYTHONPATH, no sitecustomize): coverage cannot follow them into those
# subprocesses, so their tests in a module's selection are added to every line the map knows.
BLIND_FILES = ("tests/test_untrusted_env.py", "tests/test_pyz.py")
_CONTEXT_VAR = "MUTATION_TEST_CONTEXT"  # not PATCHKIT_*: tests.output_helpers.cli_env drops those

# Written into the scratch copy for the map's run only: every Python process started with COVERAGE_PROCESS_START
# (the pytest run and the CLI its tests start, through PYTHONPATH) measures itself, labelled with the running test.
_SITECUSTOMIZE = f'''\
import os
import signal
if os.environ.get("COVERAGE_PROCESS_START"):
    import coverage
    _context = os.environ.get("{_CONTEXT_VAR}")
    if _context:
        # a subprocess: its start is noted, so a process killed before coverage could save is known (see lost_tests)
        with open(os.path.join(os.environ["MUTATION_COVERAGE_DIR"], "started." + str(os.getpid())), "w") as _f:
            _f.write(_context)
    # coverage's own .pth (a1_coverage.pth, coverage 7.7 on) may have started it already: then that instance
    _cov = coverage.process_startup() or coverage.Coverage.current()
    if _cov is not None and _context:
        _cov.switch_context("sub:" + _context)
    if _cov is not None:
        def _save():
            """Save what this process measured, then note its pid as saved (so measure_coverage counts none of its
            tests as lost); in a forked child, coverage writes a data file of the child's own pid."""
            try:
                current = coverage.Coverage.current()
                if current is not None:
                    current.stop()
                    current.save()
                with open(os.path.join(os.environ["MUTATION_COVERAGE_DIR"], "saved." + str(os.getpid())), "w"):
                    pass
            except BaseException:  # nothing saved: the process stays lost (the conservative fallback)
                pass

        def _save_then_exit(code, _exit=os._exit):
            """os._exit skips coverage's save at exit, and the CLI (cli.main.entry) and every forked child of a
            test end with it."""
            _save()
            _exit(code)

        def _save_then_kill(pid, signum, _kill=os.kill):
            """A SIGKILL a process sends itself (the fault points of workspace/disk.py, PATCHKIT_FAULT_AFTER) leaves
            no time to save: save first, then the kill as it was asked."""
            if pid == os.getpid() and signum == signal.SIGKILL:
                _save()
            _kill(pid, signum)

        os._exit = _save_then_exit
        os.kill = _save_then_kill
'''
_PLUGIN = f'''\
import json, os, time
import coverage
import pytest

_durations = {{}}


def _note_fork():
    """A test that forks (tests.safety_helpers.as_user) runs code in the child: coverage goes on measuring there
    under the test's context and saves when the child ends with os._exit (the sitecustomize's wrapper). The child's
    pid is noted with the test: a child that saves nothing (killed) makes the test lost, added to every line."""
    context = os.environ.get("{_CONTEXT_VAR}")
    if context:
        with open(os.path.join(os.environ["MUTATION_COVERAGE_DIR"], "forked." + str(os.getpid())), "w") as f:
            f.write(context)


os.register_at_fork(after_in_child=_note_fork)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    cov = coverage.Coverage.current()
    os.environ["{_CONTEXT_VAR}"] = item.nodeid
    if cov is not None:
        cov.switch_context(item.nodeid)
    began = time.monotonic()
    yield
    _durations[item.nodeid] = time.monotonic() - began
    if cov is not None:
        cov.switch_context("")
    os.environ.pop("{_CONTEXT_VAR}", None)


def pytest_sessionfinish(session):
    with open(os.path.join(os.environ["MUTATION_COVERAGE_DIR"], "durations.json"), "w") as f:
        json.dump(_durations, f)
'''


@dataclass
class LineMap:
    """Which tests run each line of a module: line -> node ids (fastest first), and every test's duration."""

    lines: dict[int, list[str]]
    durations: dict[str, float]
    imported: list[int]  # lines run at import (outside any test): every test depends on them


def code_digest(module: str, tests: Sequence[str]) -> str:
    """The digest a module's map is cached under: patchkit's and the tests' files, the module's selection, and
    this script (how the map is built)."""
    digest = hashlib.sha256("\0".join((module, *tests)).encode() + Path(__file__).read_bytes())
    for folder in ("patchkit", "tests"):
        for path in sorted(Path(folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(path.as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:20]


def measure_coverage(module: str, tests: Sequence[str], where: Path) -> tuple[dict[int, set[str]], dict[str, float],
                                                                            set[str]]:
    """Run `tests` once under coverage (cwd: the scratch copy); return line -> contexts, durations, lost tests.

    A context is a test's node id (in the pytest process) or `sub:` + node id (in a CLI subprocess it started);
    "" is the import, outside any test. A forked child goes on under its test's context. A lost test started a
    subprocess, or forked a child, that never saved its data (killed before it could: see _SITECUSTOMIZE).
    """
    # lazy: coverage is a dev tool, needed only to build a map
    import coverage

    where.mkdir(parents=True, exist_ok=True)
    # sticky and open to all: the CLI started by a test's child that dropped to another user (as_user) saves here too
    where.chmod(0o1777)
    rc = where / "coveragerc"
    rc.write_text(f"[run]\nparallel = True\ndata_file = {where / 'data'}\ninclude = {Path(module).resolve()}\n"
                  "sigterm = True\n", encoding="utf-8")
    Path("sitecustomize.py").write_text(_SITECUSTOMIZE, encoding="utf-8")
    Path("_mutation_contexts.py").write_text(_PLUGIN, encoding="utf-8")
    env = {**os.environ, "COVERAGE_PROCESS_START": str(rc), "MUTATION_COVERAGE_DIR": str(where)}
    try:
        subprocess.run(shlex.split(test_command(tests, plugin="_mutation_contexts", stop=False)), env=env,
                       capture_output=True, check=False)
    finally:
        Path("sitecustomize.py").unlink()
        Path("_mutation_contexts.py").unlink()
    names = os.listdir(where)
    saved = {int(name.rsplit(".pid", 1)[1].split(".")[0]) for name in names if ".pid" in name}
    saved |= {int(name.split(".")[1]) for name in names if name.startswith("saved.")}
    lost = {(where / name).read_text(encoding="utf-8") for name in names
            if name.startswith(("started.", "forked.")) and int(name.split(".")[1]) not in saved}
    combined = coverage.Coverage(config_file=str(rc))
    combined.combine(data_paths=[str(where)])
    data = combined.get_data()
    by_line = {line: set(contexts) for line, contexts in
               data.contexts_by_lineno(str(Path(module).resolve())).items()}
    durations = json.loads((where / "durations.json").read_text(encoding="utf-8"))
    return by_line, durations, lost


def build_map(module: str, tests: Sequence[str], where: Path) -> LineMap:
    """Measure `module`'s line map over `tests` and widen it where coverage cannot see (conservative).

    - a line only CLI subprocesses reached gets every test of those tests' files (a sibling may start the CLI
      in a way coverage loses);
    - the selection's tests in BLIND_FILES, and the lost tests (a subprocess killed before it saved, or a test
      that forked), are added to every line the map has;
    - a line run at import (context "") is listed in `imported`: its mutants run the whole file selection.
    """
    by_line, durations, lost = measure_coverage(module, tests, where)
    by_file: dict[str, set[str]] = {}
    for node in durations:
        by_file.setdefault(node.split("::")[0], set()).add(node)
    always = {node for node in durations if node.split("::")[0] in BLIND_FILES} | lost
    lines: dict[int, list[str]] = {}
    imported: list[int] = []
    for line, contexts in sorted(by_line.items()):
        direct = {c for c in contexts if c and not c.startswith("sub:")}
        spawned = {c[len("sub:"):] for c in contexts if c.startswith("sub:")}
        chosen = direct | spawned | always
        if spawned and not direct:
            chosen |= {node for name in {s.split("::")[0] for s in spawned} for node in by_file.get(name, ())}
        if "" in contexts:
            imported.append(line)
        lines[line] = sorted(chosen, key=lambda node: (durations.get(node, 0.0), node))
    return LineMap(lines, durations, imported)


def load_map(module: str, tests: Sequence[str]) -> tuple[LineMap, bool]:
    """`module`'s line map from the cache (MAP_CACHE, keyed by code_digest), or built and cached; True if built."""
    cached = MAP_CACHE / f"{module.replace('/', '_')}-{code_digest(module, tests)}.json"
    if cached.exists():
        raw = json.loads(cached.read_text(encoding="utf-8"))
        return LineMap({int(k): v for k, v in raw["lines"].items()}, raw["durations"], raw["imported"]), False
    with tempfile.TemporaryDirectory(prefix="patchkit-coverage-") as where:
        built = build_map(module, tests, Path(where))
    MAP_CACHE.mkdir(exist_ok=True)
    cached.write_text(json.dumps(asdict(built), indent=1) + "\n", encoding="utf-8")
    return built, True


@dataclass
class CodeShape:
    """Where a mutant's line sits: its statement's header lines, the body of the function around it, and for a line
    run at import that only some functions depend on, those functions' bodies."""

    headers: dict[int, range]  # line -> its innermost statement's header (simple statement: all of it)
    functions: dict[int, range]  # line -> the lines of the innermost function containing it
    # the lines outside every function's body (module level, class bodies, signatures, decorators): run at import,
    # whichever test (if any) imported the module first: coverage's context for them says nothing
    import_time: set[int] = field(default_factory=set)
    # line run at import -> the bodies of the functions whose tests stand in for it (import_readers); a line not
    # listed runs the file selection
    readers: dict[int, list[range]] = field(default_factory=dict)


def code_shape(module: str, elsewhere: Sequence[Path] | None = None) -> CodeShape:
    """`module`'s statement headers (where coverage may have recorded the statement a mutant on a line belongs to:
    a simple statement's lines, a compound one's up to its body), its functions' bodies, and the readers of its
    import-time lines (import_readers; `elsewhere`: the files searched for other users of its names)."""
    text = Path(module).read_text(encoding="utf-8")
    tree = ast.parse(text)
    shape = CodeShape({}, {})
    for node in ast.walk(tree):  # outer nodes first, so an inner one overwrites their lines
        if not isinstance(node, ast.stmt) or node.end_lineno is None:
            continue
        bodies = [getattr(node, name) for name in ("body", "orelse", "finalbody", "handlers")
                  if getattr(node, name, None)]
        end = min(body[0].lineno for body in bodies) - 1 if bodies else node.end_lineno
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.decorator_list:
            start = node.decorator_list[0].lineno
        else:
            start = node.lineno
        header = range(start, max(end, start) + 1)
        shape.headers.update(dict.fromkeys(header, header))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = range(node.body[0].lineno, node.end_lineno + 1)
            shape.functions.update(dict.fromkeys(body, body))
    shape.import_time = set(range(1, len(text.splitlines()) + 1)) - set(shape.functions)
    shape.readers = import_readers(module, tree, _other_sources(module) if elsewhere is None else elsewhere)
    return shape


def _body(function: ast.FunctionDef | ast.AsyncFunctionDef) -> range:
    return range(function.body[0].lineno, (function.end_lineno or function.body[-1].lineno) + 1)


def _module_uses(tree: ast.Module, lazy: bool) -> tuple[dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]],
                                                         dict[str, list[ast.stmt | None]]]:
    """Where each name is read: name -> the functions whose body (or whose default, evaluated at import for them)
    reads it; name -> the module-level statements that read it otherwise (None: in a place no rule reads, such as
    a decorator, a class body or an evaluated annotation)."""
    in_functions: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
    at_import: dict[str, list[ast.stmt | None]] = {}

    def loads(node: ast.AST | None) -> set[str]:
        found = set()
        for inner in ast.walk(node) if node is not None else ():
            if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Load):
                found.add(inner.id)
        return found

    def function_parts(function: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[list[ast.AST], list[ast.AST]]:
        """(its defaults, what else of its header runs where it is defined: decorators, evaluated annotations)"""
        args = function.args
        defaults: list[ast.AST] = [*args.defaults, *(d for d in args.kw_defaults if d is not None)]
        header: list[ast.AST] = list(function.decorator_list)
        if not lazy:
            header += [a.annotation for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg,
                                              args.kwarg) if a is not None and a.annotation is not None]
            header += [function.returns] if function.returns is not None else []
        return defaults, header

    def visit_function(function: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        defaults, header = function_parts(function)
        for part in defaults:
            for name in loads(part):
                in_functions.setdefault(name, []).append(function)
        for part in header:
            for name in loads(part):
                at_import.setdefault(name, []).append(None)
        for name in loads(ast.Module(body=function.body, type_ignores=[])):
            in_functions.setdefault(name, []).append(function)  # nested functions' reads: the outer one's too

    for statement in tree.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            visit_function(statement)
        elif isinstance(statement, ast.ClassDef):
            for inner in statement.body:
                if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    visit_function(inner)
                else:
                    for name in loads(inner):
                        at_import.setdefault(name, []).append(None)
            for part in (*statement.decorator_list, *statement.bases, *(k.value for k in statement.keywords)):
                for name in loads(part):
                    at_import.setdefault(name, []).append(None)
        elif _assigned_names(statement) is not None:  # NAME = value: read into NAME's readers (import_readers)
            value = getattr(statement, "value", None)
            for name in loads(value):
                at_import.setdefault(name, []).append(statement)
            if isinstance(statement, ast.AnnAssign) and not lazy:
                for name in loads(statement.annotation):
                    at_import.setdefault(name, []).append(None)
        else:  # anything else run at import (a condition, a call, a subscript's target): no rule follows it
            for name in loads(statement):
                at_import.setdefault(name, []).append(None)
    return in_functions, at_import


def _assigned_names(statement: ast.stmt) -> list[str] | None:
    """The names a module-level assignment binds, when it binds only plain names (else None)."""
    if isinstance(statement, ast.Assign):
        targets = statement.targets
    elif isinstance(statement, (ast.AnnAssign, ast.AugAssign)):
        targets = [statement.target]
    else:
        return None
    names: list[str] = []
    for target in targets:
        for element in target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]:
            if not isinstance(element, ast.Name):
                return None
            names.append(element.id)
    return names


def import_readers(module: str, tree: ast.Module, elsewhere: Sequence[Path]) -> dict[int, list[range]]:
    """For the lines run at import whose effect only some functions see: line -> those functions' bodies.

    - a module-level assignment of plain names (a constant): the functions whose body reads one of those names,
      or has it in a default; where a name is read by another such assignment at module level, that one's readers
      too (transitively); read anywhere else at import (a decorator, a class body, a condition, a call) or named
      by another file (`module.NAME`, `from module import NAME`, monkeypatch: any file that imports the module
      or names it and holds the word), or in `__all__`: not listed;
    - a function's (or a module-level class's method's) signature, outside its decorators: its defaults are the
      only part of it run for the function alone (annotations are never evaluated under
      `from __future__ import annotations`; without it the module's signatures are not listed): its own body.

    Not listed (the file selection): anything else run at import, and every line of a module that uses
    `globals()` or `vars()`. select_tests also falls back to the file selection when a reader's body itself ran
    at import (its result may be kept by a constant) or when no test ran the readers.
    """
    lazy = any(isinstance(node, ast.ImportFrom) and node.module == "__future__"
               and any(alias.name == "annotations" for alias in node.names) for node in tree.body)
    names_read = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    if names_read & {"globals", "vars"}:
        return {}
    in_functions, at_import = _module_uses(tree, lazy)
    outside = _names_used_elsewhere(module, elsewhere)
    exported: set[str] = set()
    for statement in tree.body:
        if "__all__" in (_assigned_names(statement) or ()):
            exported |= {node.value for node in ast.walk(statement) if isinstance(node, ast.Constant)
                         and isinstance(node.value, str)}

    run_at_import = _run_at_import(tree, in_functions, at_import)

    def readers(name: str, seen: frozenset[str]) -> list[range] | None:
        if name in outside or name in exported or name in seen:
            return None
        functions = in_functions.get(name, [])
        if any(function in run_at_import for function in functions):
            return None  # what it reads may be kept at import (a table built by a call): any importer may see it
        found = [_body(function) for function in functions]
        for statement in at_import.get(name, ()):
            bound = _assigned_names(statement) if statement is not None else None
            if bound is None:
                return None
            for other in bound:
                more = readers(other, seen | {name})
                if more is None:
                    return None
                found += more
        return found

    listed: dict[int, list[range]] = {}
    for statement in tree.body:
        functions: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions = [statement]
        elif isinstance(statement, ast.ClassDef):
            functions = [n for n in statement.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for function in functions:
            if lazy:  # the signature: from the `def` to the line before the body (a one-line def: that line)
                lines = range(function.lineno, max(function.body[0].lineno, function.lineno + 1))
                listed.update({line: [_body(function)] for line in lines})
        bound = _assigned_names(statement)
        if bound and statement.end_lineno is not None:
            found: list[range] = []
            for name in bound:
                more = readers(name, frozenset())
                if more is None:
                    break
                found += more
            else:
                listed.update(dict.fromkeys(range(statement.lineno, statement.end_lineno + 1), found))
    return listed


def _run_at_import(tree: ast.Module, in_functions: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]],
                   at_import: dict[str, list[ast.stmt | None]]) -> set[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The module's functions that may run at import: those whose name (or whose class's name) is read at module
    level (a call, a decorator, a default), and those their bodies read, transitively."""
    by_name: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
    for statement in tree.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            by_name.setdefault(statement.name, []).append(statement)
        elif isinstance(statement, ast.ClassDef):
            by_name.setdefault(statement.name, []).extend(
                n for n in statement.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
    reads: dict[ast.FunctionDef | ast.AsyncFunctionDef, set[str]] = {}
    for name, functions in in_functions.items():
        for function in functions:
            reads.setdefault(function, set()).add(name)
    pending = [function for name in at_import for function in by_name.get(name, ())]
    found: set[ast.FunctionDef | ast.AsyncFunctionDef] = set()
    while pending:
        function = pending.pop()
        if function not in found:
            found.add(function)
            pending += [other for name in reads.get(function, ()) for other in by_name.get(name, ())]
    return found


def _other_sources(module: str) -> list[Path]:
    """The Python files (under the cwd: the scratch copy) that may use `module`'s names: patchkit, the tests,
    the scripts and the benchmarks."""
    found = [path for folder in ("patchkit", "tests", "scripts", "benchmarks") for path in Path(folder).rglob("*.py")]
    return sorted(path for path in found if path.resolve() != Path(module).resolve())


def _names_used_elsewhere(module: str, elsewhere: Sequence[Path]) -> set[str]:
    """The words of the files in `elsewhere` that import `module` (or name it in a string, as monkeypatch.setattr
    may), and the names they import from it; every name when one of them imports `*` from it."""
    dotted = Path(module).with_suffix("").as_posix().replace("/", ".").removesuffix(".__init__")
    package, _, short = dotted.rpartition(".")
    used: set[str] = set()
    for path in elsewhere:
        text = path.read_text(encoding="utf-8", errors="replace")
        if short not in text:
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        refers = dotted in text
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                refers |= any(alias.name == dotted or alias.name.startswith(dotted + ".") for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                source = node.module or ""
                if node.level:  # relative: against the importing file's package
                    parts = path.with_suffix("").as_posix().split("/")[:-node.level]
                    source = ".".join([*parts, *([source] if source else [])])
                if source == dotted:
                    names = {alias.name for alias in node.names}
                    if "*" in names:
                        return {"*"} | _words(Path(module).read_text(encoding="utf-8"))
                    used |= names
                refers |= source == package and any(alias.name == short for alias in node.names)
        if refers:
            used |= _words(text)
    return used


def _words(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", text))


def select_tests(mutant: Mutant, line_map: LineMap, shape: CodeShape) -> list[str] | None:
    """The tests that run `mutant`'s statement, fastest first; None when the map cannot say (the file selection).

    A statement inside a function that no test reached (an `except` clause whose error never happened, say) gets
    the tests that ran that function: a test that makes it run has to enter the function first. A line run at
    import (a constant, a signature, a decorator) gets the tests of the functions that read it (shape.readers:
    import_readers), unless one of those ran at import too; otherwise None: any importer may depend on it.
    """
    lines = {mutant.line, *shape.headers.get(mutant.line, ())}
    if any(line in line_map.imported or line in shape.import_time for line in lines):
        bodies = shape.readers.get(mutant.line)
        if bodies is None:
            return None
        read = {line for body in bodies for line in body}
        if read & set(line_map.imported):
            return None
        lines = read  # not the statement's own contexts: the test that happened to import the module first
    chosen = {node for line in lines for node in line_map.lines.get(line, ())}
    if not chosen:
        chosen = {node for line in shape.functions.get(mutant.line, ()) for node in line_map.lines.get(line, ())}
    if not chosen:
        return None
    return sorted(chosen, key=lambda node: (line_map.durations.get(node, 0.0), node))


def choose_mutants(mutants: list[Mutant], module: str, sample: int | None, seed: int,
                   only: Sequence[str]) -> list[Mutant]:
    """All of `mutants`, `sample` of them chosen with `seed` (per module), or those whose id is in `only`."""
    if only:
        return [m for m in mutants if m.id in only]
    if sample is None or sample >= len(mutants):
        return mutants
    return sorted(random.Random(f"{seed}:{module}").sample(mutants, sample),
                  key=lambda m: (m.line, m.operator, m.occurrence))


# What pytest says when it ran none of the tests it was given (exit 4 or 5): never a kill.
_NOT_RUN = ("ERROR: not found:", "ERROR: file or directory not found:", "no tests ran")


# A line of pytest's short summary: FAILED or ERROR, the node id (its parameters in brackets may hold spaces), and
# after " - " the message
_SUMMARY_LINE = re.compile(r"(?:FAILED|ERROR) (\S+?(?:\[.*?\])?)(?: - .*)?$")


def first_failure(output: str) -> str:
    """The node id of the first test pytest's short summary names as failed (FAILED or ERROR), "" if none: the
    test that killed a mutant (`-x`: the only one)."""
    _, marker, summary = output.rpartition("short test summary info")
    for line in summary.splitlines() if marker else ():
        found = _SUMMARY_LINE.match(line)
        if found:
            return found.group(1)
    return ""


def kill_first(selected: Sequence[str], killers: dict[str, int]) -> list[str]:
    """`selected` (fastest first) with the tests in `killers` (those that killed earlier mutants of the same
    function: node id -> kills) moved to the front, most kills first: the same tests, in another order."""
    chosen = set(selected)
    first = sorted((node for node in killers if node in chosen),
                   key=lambda node: (-killers[node], selected.index(node)))
    return [*first, *(node for node in selected if node not in set(first))]


def test_mutant(work: object, command: str, timeout: float) -> tuple[str, float, str, str]:
    """Write one mutant, run `command` on it, put the original back: (outcome, seconds, diff or error output,
    the node id of the test that killed it or "").

    An outcome is KILLED, TIMEOUT, SURVIVED (the caller tells an equivalent apart) or ERROR: cosmic-ray failed,
    or pytest found none of the tests it was given (a selection that names a test that no longer exists must
    not count as a kill).
    """
    # lazy: as in find_mutants
    from cosmic_ray.mutating import mutate_and_test
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome

    began = time.monotonic()
    done = mutate_and_test(work.mutations, command, timeout)  # type: ignore[attr-defined]
    seconds = round(time.monotonic() - began, 1)
    output = done.output or ""
    if done.worker_outcome != WorkerOutcome.NORMAL or any(said in output for said in _NOT_RUN):
        return ERROR, seconds, output[-2000:], ""
    if done.test_outcome == TestOutcome.SURVIVED:
        return SURVIVED, seconds, done.diff or "", ""
    if output == "timeout":
        return TIMEOUT, seconds, done.diff or "", ""
    return KILLED, seconds, done.diff or "", first_failure(output)


# One mutant's run, as handed to a worker: (its cosmic-ray work item, the test command, the file selection's command
# with --compare or "", the timeout); and what comes back: (outcome, seconds, diff, killer, with --compare the
# file selection's outcome and seconds). Both go through a pipe pickled: cosmic-ray's WorkItem (an attrs class of
# MutationSpecs with a relative module path) comes back equal from pickle, and names the file in the worker's copy.
Task = tuple[object, str, str, float]
Done = tuple[str, float, str, str, str, float]


def run_task(task: Task) -> Done:
    """Run one mutant (and with --compare, again against the file selection) in the scratch copy that is the cwd."""
    item, command, compare, timeout = task
    try:
        outcome, seconds, diff, killer = test_mutant(item, command, timeout)
        file_outcome, file_seconds = "", 0.0
        if compare:
            file_outcome, file_seconds, _, _ = test_mutant(item, compare, timeout)
    except BaseException:  # Ctrl-C, or the parent's SIGTERM to a worker: stop the pytest still running
        stop_test_processes()
        raise
    return outcome, seconds, diff, killer, file_outcome, file_seconds


def stop_test_processes() -> None:
    """SIGKILL the process group of each child of this process that leads its own session (cosmic-ray starts each
    test run so), and reap it: an interrupted mutant leaves no pytest running on a scratch copy being removed.
    Read from /proc (Linux); elsewhere nothing is stopped."""
    me = os.getpid()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text(encoding="utf-8", errors="replace").rpartition(")")[2].split()
        except OSError:
            continue  # gone meanwhile
        pid = int(stat.parent.name)
        if len(fields) > 3 and int(fields[1]) == me and int(fields[3]) == pid:  # ppid, session
            try:
                os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError, PermissionError):
                pass


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _worker(copy: str, pythonpath: str, link: Connection) -> None:
    """A worker process: in its own scratch copy `copy`, run each task it is sent and send back the result, until
    it is sent None, or stopped (SIGTERM from the parent)."""
    os.setpgrp()  # a Ctrl-C at the terminal reaches the parent alone, which stops the workers (Workers.__exit__)
    signal.signal(signal.SIGTERM, _interrupted)
    os.chdir(copy)  # cosmic-ray writes the mutant at its path relative to the cwd, and runs pytest here
    os.environ["PYTHONPATH"] = copy + os.pathsep + pythonpath
    try:
        while (task := link.recv()) is not None:
            try:
                result = run_task(task)
            except Exception:
                link.send(("error", traceback.format_exc()))
                return
            link.send(("done", result))
    except (KeyboardInterrupt, EOFError):  # stopped by the parent, or the parent is gone
        return


class Workers:
    """Where the mutants run: in this process (jobs 1: the scratch copy that is the cwd), or in `jobs` worker
    processes, each with its own scratch copy of the worktree, made when the first mutants are handed out.

    On leaving (normally, on Ctrl-C or on an error) the workers are stopped (SIGTERM: each stops its running
    pytest) and their copies removed; the worktree itself is never written.
    """

    def __init__(self, jobs: int, pythonpath: str) -> None:
        self.jobs, self.pythonpath = jobs, pythonpath
        self.processes: list[multiprocessing.process.BaseProcess] = []
        self.links: list[Connection] = []
        self.copies: list[str] = []

    def __enter__(self) -> Workers:
        return self

    def _start(self) -> None:
        context = multiprocessing.get_context("fork")  # the worker runs this module's code as loaded, not re-imported
        for _ in range(self.jobs):
            copy = tempfile.mkdtemp(prefix="patchkit-mutation-")
            self.copies.append(copy)
            scratch_copy(Path(copy))
            ours, theirs = context.Pipe()
            process = context.Process(target=_worker, args=(copy, self.pythonpath, theirs), daemon=True)
            process.start()
            theirs.close()
            self.processes.append(process)
            self.links.append(ours)

    def run(self, count: int, task: Callable[[int], Task], done: Callable[[int, Done], None]) -> None:
        """Run tasks 0 to count - 1, handed out in that order (`task(i)` is asked for when the i-th is handed out);
        `done(i, result)` as each comes back, in the order they come back."""
        if self.jobs == 1:
            for index in range(count):
                done(index, run_task(task(index)))
            return
        if not self.processes:
            self._start()
        waiting = iter(range(count))
        busy: dict[Connection, int] = {}

        def hand_out(link: Connection) -> None:
            index = next(waiting, None)
            if index is not None:
                link.send(task(index))
                busy[link] = index

        for link in self.links:
            hand_out(link)
        while busy:
            for ready in wait(list(busy)):
                link = next(link for link in busy if link is ready)
                index = busy.pop(link)
                try:
                    status, result = link.recv()
                except EOFError:
                    raise SystemExit("mutation.py: a worker process ended without its result") from None
                if status != "done":
                    raise SystemExit(f"mutation.py: a worker process failed:\n{result}")
                done(index, result)  # first, so that the next task handed out knows its kill
                hand_out(link)

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        try:
            if kind is None:
                for link in self.links:
                    link.send(None)
            for process in self.processes:
                if kind is not None and process.is_alive():
                    process.terminate()
                process.join(10)
                if process.is_alive():
                    process.kill()
                    process.join()
        finally:
            for copy in self.copies:
                shutil.rmtree(copy, ignore_errors=True)


def run_baseline(module: str, command: str) -> float:
    """Run the unmutated file selection; its seconds (exit 2 when it fails: no mutant could be judged)."""
    # lazy: as in find_mutants
    from cosmic_ray.testing import run_tests
    from cosmic_ray.work_item import TestOutcome

    started = time.monotonic()
    outcome, output = run_tests(command, None)
    if outcome != TestOutcome.SURVIVED:
        print(output[-3000:], file=sys.stderr)
        raise SystemExit(f"{module}: the unmutated tests fail (baseline), so no mutant can be judged: {command}")
    return round(time.monotonic() - started, 1)


def run_module(module: str, options: argparse.Namespace, equivalents: dict[str, str],
               workers: Workers) -> ModuleResult:
    """Run `module`'s chosen mutants, each against the tests of its line (or the file selection), those that
    killed earlier mutants of its function first (unless `options.order` is "fastest"); with `options.compare`,
    against the file selection too, to check that the line selection loses no kill."""
    tests = [t for t in MODULES[module] if t.startswith("--") or Path(t.split("::")[0]).exists()]
    mutants, items = find_mutants(module)
    result = ModuleResult(module, tests, total=len(mutants))
    chosen = choose_mutants(mutants, module, options.sample, options.seed, options.mutant)
    result.run = len(chosen)
    shape = code_shape(module)
    killers: dict[range | None, dict[str, int]] = {}  # function body -> the tests that killed its mutants: kills

    def count(mutant: Mutant, killer: str) -> None:
        if killer:
            found = killers.setdefault(shape.functions.get(mutant.line), {})
            found[killer] = found.get(killer, 0) + 1
        if mutant.outcome == SURVIVED and mutant.id in equivalents:
            mutant.outcome, mutant.reason = EQUIVALENT, mutant.reason or equivalents[mutant.id]
        result.counts[mutant.outcome] = result.counts.get(mutant.outcome, 0) + 1

    lines = Path(module).read_text(encoding="utf-8").splitlines()
    survived_before = SurvivedBefore(MAP_CACHE / "equivalents.json")
    digests = {m.id: SurvivedBefore.digest(m, items[m.id], shape, lines) for m in chosen if m.id in equivalents}
    to_run = chosen
    if not options.recheck_equivalents and not options.mutant:  # an id asked for by name always runs
        unchanged = [m for m in chosen if m.id in digests and survived_before.digests.get(m.id) == digests[m.id]]
        for mutant in unchanged:
            mutant.outcome, mutant.reason = SURVIVED, "not run: listed, and unchanged since it last survived"
            count(mutant, "")
        if unchanged:
            print(f"== {module}: {len(unchanged)} listed equivalents not run (unchanged since they last survived; "
                  f"--recheck-equivalents runs them)", flush=True)
        to_run = [m for m in chosen if m not in unchanged]
    record = Record(options.record, module) if options.record else None
    if record is not None:
        waiting, to_run = to_run, []
        for mutant in waiting:
            killer = record.take(mutant)
            if killer is None:
                to_run.append(mutant)
            else:
                count(mutant, killer)
        passed = f"; {record.other} of another version of the module passed over" if record.other else ""
        print(f"== {module}: {len(waiting) - len(to_run)} of its {len(chosen)} mutants taken from {record.path}, "
              f"{len(to_run)} to run{passed}", flush=True)
    if not to_run:
        result.mutants = list(chosen)
        return result
    command = test_command(tests)
    result.baseline_seconds = run_baseline(module, command)
    timeout = max(30.0, 3 * result.baseline_seconds + 10)
    line_map = None
    if options.selection == "lines":
        began = time.monotonic()
        line_map, built = load_map(module, tests)
        result.map_seconds = round(time.monotonic() - began, 1) if built else 0.0
    how = "file selection" if line_map is None else (
        f"line map built in {result.map_seconds}s" if result.map_seconds else "line map cached")
    jobs = f", {workers.jobs} workers" if workers.jobs > 1 else ""
    print(f"== {module}: {len(to_run)} of {len(mutants)} mutants, tests: {' '.join(tests)} "
          f"(baseline {result.baseline_seconds}s, timeout {timeout:.0f}s, {how}{jobs})", flush=True)

    def task(index: int) -> Task:
        mutant = to_run[index]
        selected = select_tests(mutant, line_map, shape) if line_map else None
        function = shape.functions.get(mutant.line)
        if selected is not None and function is not None and options.order == "kill-first":
            selected = kill_first(selected, killers.get(function, {}))
        mutant.selection = len(selected) if selected is not None else 0
        return (items[mutant.id], test_command(selected) if selected is not None else command,
                command if options.compare else "", timeout)

    def done(index: int, ran: Done) -> None:
        mutant = to_run[index]
        mutant.outcome, mutant.seconds, mutant.diff, killer, mutant.file_outcome, mutant.file_seconds = ran
        if record is not None:
            record.add(mutant, killer)
        if mutant.outcome == SURVIVED and mutant.id in digests:
            survived_before.add(mutant.id, digests[mutant.id])
        count(mutant, killer)
        report_mutant(mutant, sum(result.counts.values()), result)  # numbered as they come back

    workers.run(len(to_run), task, done)
    result.mutants = list(chosen)  # in the mutants' order, whatever order they came back in
    return result


def report_mutant(mutant: Mutant, number: int, result: ModuleResult) -> None:
    """One progress line: the mutant's outcome, its selection and time (and the file selection's, compared)."""
    partial = " ".join(f"{k}={v}" for k, v in sorted(result.counts.items()))
    chose = f"{mutant.selection} tests" if mutant.selection else "file selection"
    compared = f"; file selection: {mutant.file_outcome} ({mutant.file_seconds}s)" if mutant.file_outcome else ""
    print(f"  [{number}/{result.run}] {mutant.outcome:<10} {mutant.id} ({chose}, {mutant.seconds}s{compared})  "
          f"{partial}", flush=True)
    if mutant.outcome == SURVIVED:
        print("    " + "\n    ".join(line for line in mutant.diff.splitlines() if line[:1] in "+-"), flush=True)
    if mutant.outcome == ERROR:
        print("    " + mutant.diff[-600:].replace("\n", "\n    "), flush=True)


def table(results: Sequence[ModuleResult]) -> str:
    """The final table: one row per module."""
    head = ("module", "mutants", "run", "killed", "survived", "timeout", "equivalent", "error", "score")
    rows: list[tuple[str, ...]] = [head]
    for r in results:
        score = r.score()
        rows.append((r.module, str(r.total), str(r.run), *(str(r.counts.get(k, 0)) for k in
                     (KILLED, SURVIVED, TIMEOUT, EQUIVALENT, ERROR)), "-" if score is None else f"{score:.0%}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--module", action="append", choices=sorted(MODULES), metavar="PATH",
                        help="a module to mutate (repeatable); default: all of them")
    parser.add_argument("--sample", type=int, metavar="N", help="run N random mutants per module, not all")
    parser.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    parser.add_argument("--mutant", action="append", default=[], metavar="ID",
                        help="run only this mutant (repeatable; its module is taken from the id): to check a triage")
    parser.add_argument("--selection", choices=("lines", "file"), default="lines",
                        help="the tests a mutant runs: those that execute its line, from a coverage map (default), "
                             "or the module's whole file selection")
    parser.add_argument("--compare", action="store_true",
                        help="run each mutant with the file selection too, and report where the two disagree")
    parser.add_argument("--order", choices=("kill-first", "fastest"), default="kill-first",
                        help="the order of a mutant's selected tests: those that killed earlier mutants of its "
                             "function first, then fastest first (default); or fastest first only")
    parser.add_argument("--jobs", type=int, default=1, metavar="N",
                        help="run the mutants in N worker processes, each in its own scratch copy (default 1)")
    parser.add_argument("--recheck-equivalents", action="store_true",
                        help="run every listed equivalent, also those whose code has not changed since they last "
                             "survived (by default those are counted as equivalent without running)")
    parser.add_argument("--out", type=Path, metavar="FILE", help="write the result as JSON to FILE")
    parser.add_argument("--record", type=Path, metavar="FILE",
                        help="append each mutant's result to FILE as it comes (one JSON line), and take the mutants "
                             "FILE already holds for this version of a module from it instead of running them: a "
                             "stopped run picks up where it was")
    parser.add_argument("--list", action="store_true", help="print the modules and their tests, and exit")
    parser.add_argument("--follow", metavar="REV",
                        help="move the equivalents file's ids of the modules changed since git revision REV to "
                             "where their mutants are now (their lines unchanged), and list those whose lines changed")
    parser.add_argument("--stale", action="store_true",
                        help="print the equivalents file's ids that name no mutant of today's code (exit 1 if any)")
    args = parser.parse_args(argv)
    if args.sample is not None and args.sample < 1:
        parser.error("--sample must be at least 1")
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    if args.record is not None:
        args.record = args.record.resolve()  # the run works in its scratch copy
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the modules' mutants in a scratch copy of the worktree; print the table; exit 1 on a survivor."""
    args = parse(argv)
    if args.list:
        for module, tests in MODULES.items():
            print(f"{module}: {' '.join(tests)}")
        return 0
    equivalents = load_equivalents()
    if args.follow:
        moved, lost = follow_equivalents(args.follow, equivalents)
        text = EQUIVALENTS.read_text(encoding="utf-8")
        text = re.sub(r'^"([^"]+)"', lambda m: f'"{moved.get(m.group(1), m.group(1))}"', text, flags=re.MULTILINE)
        EQUIVALENTS.write_text(text, encoding="utf-8")
        for old, new in moved.items():
            print(f"moved: {old} -> {new}")
        for ident in lost:
            print(f"its lines changed (triage it anew): {ident}")
        print(f"{len(moved)} moved, {len(lost)} to triage anew")
        return 1 if lost else 0
    if args.stale:
        stale = stale_equivalents(equivalents)
        print("\n".join(stale) if stale else f"no stale id in {EQUIVALENTS.name}")
        return 1 if stale else 0
    modules = args.module or list(MODULES)
    if args.mutant:
        modules = sorted({ident.split(":")[0] for ident in args.mutant})
        unknown = [m for m in modules if m not in MODULES]
        if unknown:
            raise SystemExit(f"mutation.py: no such module in MODULES: {', '.join(unknown)} (from --mutant)")
    results: list[ModuleResult] = []
    home, pythonpath = Path.cwd(), os.environ.get("PYTHONPATH", "")
    with tempfile.TemporaryDirectory(prefix="patchkit-mutation-") as scratch, Workers(args.jobs, pythonpath) as workers:
        scratch_copy(Path(scratch))
        os.chdir(scratch)  # cosmic-ray writes the mutant at its path relative to the cwd, and runs pytest here
        os.environ["PYTHONPATH"] = scratch + os.pathsep + pythonpath
        try:
            for module in modules:
                results.append(run_module(module, args, equivalents, workers))
        finally:
            os.chdir(home)
    print()
    print(table(results))
    if args.out:
        data = {"sample": args.sample, "seed": args.seed, "modules": [asdict(r) | {"score": r.score()}
                                                                        for r in results]}
        args.out.write_text(json.dumps(data, indent=2) + "\n")
    return 1 if any(r.counts.get(SURVIVED) for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
