#!/usr/bin/env python3
"""Mutation testing of patchkit's riskiest code with cosmic-ray, module by module (issue #35 item 1).

cosmic-ray (the `dev` extra) makes the mutants: its operators find every place a mutation applies in a module,
and its `mutate_and_test` writes one mutant to disk, runs a test command in a subprocess with a timeout and puts
the original back. This script adds what patchkit needs around it:

- it never mutates the worktree: the tracked and untracked (not ignored) files are copied into a scratch folder
  and the mutants are written there, with that folder first on PYTHONPATH, so the tests (and the CLI they start
  in subprocesses) import the mutated copy;
- a test selection per module (MODULES below): only the test files that exercise it run, stopping at the first
  failure (`-x`), so a whole module fits in minutes to hours on 2 cores, not days;
- `--sample N --seed S` runs a reproducible random subset of each module's mutants (what CI would run);
- the equivalent mutants are listed in scripts/mutation_equivalent.toml, one line each with its reason, and
  left out of the score: score = killed / (mutants - equivalent), where a timeout counts as killed;
- progress with partial counts as it goes, a final table per module, and `--out FILE` for the result as JSON
  (every mutant's id, outcome and diff, so a survivor can be read without rerunning).

A mutant's id is `path:line:operator#occurrence` (the occurrence counts that operator's places in the module),
stable while the module's code does not change; when it changes, an equivalent entry whose line no longer holds
the same mutant shows up as a survivor again and is triaged anew (the safe direction).

    python scripts/mutation.py                              # every module, every mutant (hours)
    python scripts/mutation.py --module patchkit/judge/treestate.py
    python scripts/mutation.py --sample 8 --seed 1 --out mutation.json   # the CI sample
    python scripts/mutation.py --list                       # the modules and their test selections

Exit status: 0 when no mutant survived that is not listed as equivalent, 1 when some did, 2 on a bad argument
or when the unmutated tests already fail (the baseline).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

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
                                    "tests/test_mutation_kills.py"),
    "patchkit/judge/verdicts.py": (*_JUDGE, "tests/test_mutation_kills.py"),
    "patchkit/judge/rewrite.py": (*_JUDGE, "tests/test_mutation_kills.py"),
    "patchkit/judge/matching.py": (*_JUDGE, "tests/test_matching_reference.py"),
    # [base] / [base_applied] of a ported image: vendor --base-tree writes them, status reads them (10 s)
    "patchkit/judge/state.py": (*_JUDGE, "tests/test_stacked_base.py", "tests/test_ported.py",
                                "tests/test_lookalikes.py", "tests/test_matching_reference.py",
                                "tests/test_mutation_kills.py"),
    "patchkit/workspace/trust.py": ("tests/test_state_trust.py", "tests/test_untrusted_state.py",
                                    "tests/test_workspace.py", "tests/test_mutation_kills.py"),
    # the one trust rule: pinned edge by edge (test_trust_rule), and through the state folder and the environment
    "patchkit/input/trust.py": ("tests/test_trust_rule.py", "tests/test_state_trust.py",
                                "tests/test_untrusted_state.py", "tests/test_untrusted_env.py",
                                "tests/test_mutation_kills.py"),
    "patchkit/workspace/names.py": _WORKSPACE,
    "patchkit/workspace/interrupts.py": (*_WORKSPACE,  # SIGTERM / SIGINT mid-write: rolled back, said so (2 s)
                                         "tests/test_hostile_fs.py::test_sigterm_and_sigint_mid_write_roll_back_"
                                         "and_say_so"),
    "patchkit/workspace/folders.py": _WORKSPACE,
    "patchkit/workspace/disk.py": (*_WORKSPACE, "tests/test_hostile_fs.py"),
    "patchkit/workspace/journal.py": _WORKSPACE,
    "patchkit/workspace/recovery.py": (*_WORKSPACE,  # what a rollback says it did, over the kill points (8 s)
                                       "tests/test_bytecode.py::test_a_rollback_counts_only_the_files_it_put_back"),
    "patchkit/workspace/lock.py": (*_WORKSPACE, "tests/test_lock_others.py"),  # the lock against other users (6 s)
    "patchkit/workspace/commit.py": _WORKSPACE,
    "patchkit/diff/filtering.py": (*_DIFF, "tests/test_mutation_kills.py"),
    "patchkit/input/environment.py": ("tests/test_python_env.py", "tests/test_untrusted_env.py"),
    "patchkit/run/fastpath.py": ("tests/test_fastpath.py", "tests/test_startup.py", "tests/test_mutation_kills.py",
                                 # the code fingerprint of patchkit.pyz (one test: it builds the archive)
                                 "tests/test_pyz.py::test_the_restart_fast_path_from_the_archive_trusts_records_of"
                                 "_this_build_only"),
    "patchkit/scan/rules.py": ("tests/test_lint_scan.py", "tests/test_scan_corpus.py"),
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


@dataclass
class ModuleResult:
    """The counts of one module's run, and its mutants."""

    module: str
    tests: list[str]
    total: int  # mutants cosmic-ray found in the module
    run: int = 0  # of those, run (all, or the sample)
    baseline_seconds: float = 0.0
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


def test_command(tests: Sequence[str]) -> str:
    """The pytest command one mutant is tested with: only `tests`, stop at the first failure, no cache."""
    return " ".join([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-o", "addopts=",
                     "--no-header", *tests])


def run_module(module: str, sample: int | None, seed: int, equivalents: dict[str, str],
               only: Sequence[str] = ()) -> ModuleResult:
    """Run `module`'s mutants (all, `sample` of them chosen with `seed`, or the ids in `only`) against its tests."""
    # lazy: as in find_mutants
    from cosmic_ray.mutating import mutate_and_test
    from cosmic_ray.testing import run_tests
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome

    tests = [t for t in MODULES[module] if t.startswith("--") or Path(t.split("::")[0]).exists()]
    mutants, items = find_mutants(module)
    result = ModuleResult(module, tests, total=len(mutants))
    chosen = mutants if sample is None or sample >= len(mutants) else sorted(
        random.Random(f"{seed}:{module}").sample(mutants, sample), key=lambda m: (m.line, m.operator, m.occurrence))
    if only:
        chosen = [m for m in mutants if m.id in only]
    result.run = len(chosen)
    command = test_command(tests)

    started = time.monotonic()
    outcome, output = run_tests(command, None)
    result.baseline_seconds = round(time.monotonic() - started, 1)
    if outcome != TestOutcome.SURVIVED:
        print(output[-3000:], file=sys.stderr)
        raise SystemExit(f"{module}: the unmutated tests fail (baseline), so no mutant can be judged: {command}")
    timeout = max(30.0, 3 * result.baseline_seconds + 10)
    print(f"== {module}: {len(chosen)} of {len(mutants)} mutants, tests: {' '.join(tests)} "
          f"(baseline {result.baseline_seconds}s, timeout {timeout:.0f}s)", flush=True)

    for number, mutant in enumerate(chosen, 1):
        began = time.monotonic()
        work = items[mutant.id]
        done = mutate_and_test(work.mutations, command, timeout)  # type: ignore[attr-defined]
        mutant.seconds = round(time.monotonic() - began, 1)
        mutant.diff = done.diff or ""
        if done.worker_outcome != WorkerOutcome.NORMAL:
            mutant.outcome = ERROR
            mutant.diff = (done.output or "")[-2000:]
        elif done.test_outcome == TestOutcome.SURVIVED:
            mutant.outcome = EQUIVALENT if mutant.id in equivalents else SURVIVED
            mutant.reason = equivalents.get(mutant.id, "")
        elif done.output == "timeout":
            mutant.outcome = TIMEOUT
        else:
            mutant.outcome = KILLED
        result.counts[mutant.outcome] = result.counts.get(mutant.outcome, 0) + 1
        result.mutants.append(mutant)
        partial = " ".join(f"{k}={v}" for k, v in sorted(result.counts.items()))
        print(f"  [{number}/{len(chosen)}] {mutant.outcome:<10} {mutant.id} ({mutant.seconds}s)  {partial}",
              flush=True)
        if mutant.outcome == SURVIVED:
            print("    " + "\n    ".join(line for line in mutant.diff.splitlines() if line[:1] in "+-"), flush=True)
    return result


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
    parser.add_argument("--out", type=Path, metavar="FILE", help="write the result as JSON to FILE")
    parser.add_argument("--list", action="store_true", help="print the modules and their tests, and exit")
    args = parser.parse_args(argv)
    if args.sample is not None and args.sample < 1:
        parser.error("--sample must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the modules' mutants in a scratch copy of the worktree; print the table; exit 1 on a survivor."""
    args = parse(argv)
    if args.list:
        for module, tests in MODULES.items():
            print(f"{module}: {' '.join(tests)}")
        return 0
    equivalents = load_equivalents()
    modules = args.module or list(MODULES)
    if args.mutant:
        modules = sorted({ident.split(":")[0] for ident in args.mutant})
        unknown = [m for m in modules if m not in MODULES]
        if unknown:
            raise SystemExit(f"mutation.py: no such module in MODULES: {', '.join(unknown)} (from --mutant)")
    results: list[ModuleResult] = []
    home = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="patchkit-mutation-") as scratch:
        scratch_copy(Path(scratch))
        os.chdir(scratch)  # cosmic-ray writes the mutant at its path relative to the cwd, and runs pytest here
        os.environ["PYTHONPATH"] = scratch + os.pathsep + os.environ.get("PYTHONPATH", "")
        try:
            for module in modules:
                results.append(run_module(module, args.sample, args.seed, equivalents, args.mutant))
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
