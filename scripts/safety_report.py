"""Run the full safety campaign and print the figures for docs/safety.md ("What patchkit guarantees").

    python scripts/safety_report.py            # everything (a few minutes on 2 cores)
    python scripts/safety_report.py --quick    # the same checks, sampled like the test suite
    python scripts/safety_report.py --only git # one row: git in the engine tree and lint's repository

It reuses the test helpers (tests/safety_helpers.py): a tree and diff made by git with every kind of change,
patchkit runs in forked children, and the test-only fault hook PATCHKIT_FAULT_AFTER / PATCHKIT_FAULT_ERRNO.

- kills: apply and revert SIGKILLed after every filesystem operation in turn; after each, the next run must
  leave the tree byte-identical to the whole original or the whole patched tree and `status` must agree.
  Every recovery is then killed in turn at each of its own operations too (--quick: a sample).
- I/O errors: ENOSPC, EACCES, EROFS and EIO injected at every write point: exit 7 and the tree restored.
- races: 8 processes released at once on one root (apply x8, apply/revert x4, and with a killed writer).
- untrusted state and hostile filesystems: every test of tests/test_untrusted_state.py and
  tests/test_hostile_fs.py once (as root, with an unprivileged user; mounts where allowed), then SIGTERM and
  SIGINT at every write point (PATCHKIT_FAULT_SIGNAL) and a disk that fills up at every write point
  (PATCHKIT_FAULT_PERSIST).
- moved folders, kept originals and the lock: every test of tests/test_moved_folders.py once (as root, the
  tree owned by an unprivileged user who moves a folder out between the plan and the replace, tampers with a
  kept `.patchkit-*.orig` original after a kill, or plants the lock file).
- hostile input: the catalogue of tests/test_hostile.py, then fuzzed diffs (random bytes and mutated git
  diffs) through the parser and the real CLI, with a sentinel folder next to the root.
- bounds: every test of tests/test_bounds.py once, in three rows: oversized tree files (4 GiB sparse at a
  patched path, just over the bound, the total of one command's reads), stale bytecode caches (a 512 MiB
  sparse cache killed at every operation and recovered, hard-linked caches applied and rolled back), and
  placed paths and patch ids over the path bounds (as root with an unprivileged owner of the tree).
- git in the tree: every test of tests/test_git_trust.py once (as root, real git, a hostile `.git/config` the
  unprivileged user wrote or a `.git` they own, and a fork's files in lint's repository; a marker file for
  every command a config could run).
- the engine environment and a hostile consuming repository: every test of tests/test_untrusted_env.py (as
  root, real venvs owned by an unprivileged user, a sentinel folder outside them) and of
  tests/test_lint_hostile.py (lint on a repository whose pyproject.toml, links, layout and waivers attack it).
- lint on hostile shell: a valid script hiding a site in a part too deep to follow (substitutions or embedded
  shells 1,000 deep, an ERROR tree): lint must fail with PK405 naming the line and still report the sites
  before and after; a site in `$(...)` behind an error tree must be found; and the scan's time and peak
  memory on shell nested n, 2n, 4n deep (benchmarks/lint_growth.py's shapes) must grow near-linearly.

- the one trust rule: every test of tests/test_trust_rule.py once (its edges on patchkit/input/trust.py and
  through the CLI; a 1777 record and interpreter; a non-root status and restart on a tree root patched, run
  as the unprivileged user) and the sticky interpreter of tests/test_untrusted_env.py.

Exit status 1 if any run ended in a mixed tree, a write outside the root, or an unexplained failure.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import (
    test_bounds,
    test_fuzz,
    test_git_trust,
    test_hostile,
    test_hostile_fs,
    test_lint_hostile,
    test_lint_scan,
    test_lock_others,
    test_moved_folders,
    test_new_races,
    test_read_only_root,
    test_trust_rule,
    test_untrusted_env,
    test_untrusted_state,
    test_write_mutations,
)
from tests.conftest import Registry, unprivileged_user
from tests.safety_helpers import (
    PATCH_ID,
    Case,
    add_patch,
    build_case,
    error_campaign,
    fault_env,
    image,
    kill_campaign,
    outside_images,
    race,
    run_forked,
    signals_as_in_a_terminal,
    warm_up,
    write_files,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="sample recovery kills and races like the tests")
    parser.add_argument("--race-rounds", type=int, default=None)
    parser.add_argument("--fuzz-examples", type=int, default=None)
    parser.add_argument("--only", choices=["git"], help="run one row only (git: git in the tree)")
    args = parser.parse_args(argv)
    rounds = args.race_rounds or (5 if args.quick else 25)
    fuzz_examples = args.fuzz_examples or (250 if args.quick else 2000)
    shm = Path("/dev/shm")
    workdir = Path(tempfile.mkdtemp(prefix="patchkit-report-", dir=shm if shm.is_dir() else None))
    os.chmod(workdir, 0o755)  # the unprivileged user of the untrusted-state checks must reach the trees
    started = time.monotonic()
    figures: list[tuple[str, int | str]] = []
    problems: list[str] = []
    try:
        case = build_case(workdir)
        if args.only == "git":
            _git_rows(case, workdir, figures, problems)
            return _print(figures, problems, started)

        # ------------------------------------------------------------------------------- kills
        def recovery_faults(n: int) -> range | list[int]:
            return ([] if n % 3 else [n % 11]) if args.quick else range(0, 1000)

        kills = [kill_campaign(case, action, recovery_faults) for action in ("apply", "revert")]
        for campaign in kills:
            problems += campaign.failures
        figures += [
            ("kill points tried (SIGKILL after each filesystem operation of apply and revert)",
             sum(c.kill_points for c in kills)),
            ("  of which apply / revert", " / ".join(str(c.kill_points) for c in kills)),
            ("recoveries killed in turn at their own operations", sum(c.recovery_kills for c in kills)),
            ("runs ending in the original / the patched tree after recovery",
             f"{sum(c.ended_before for c in kills)} / {sum(c.ended_after for c in kills)}"),
            ("runs ending in a mixed tree", sum(len(c.mixed) for c in kills)),
            ("status disagreeing with the tree", sum(len(c.status_wrong) for c in kills)),
            ("recoveries not reported on stderr", sum(len(c.unreported) for c in kills)),
            ("reruns that did not finish the job", sum(len(c.retry_failed) for c in kills)),
            ("journal or temp files left behind", sum(len(c.leftovers) for c in kills)),
            ("writes outside the root", sum(c.outside_writes for c in kills)),
        ]

        # -------------------------------------------------------------------------- I/O errors
        errors = [
            error_campaign(case, action, name)
            for name in ("ENOSPC", "EACCES", "EROFS", "EIO")
            for action in ("apply", "revert")
        ]
        for errored in errors:
            problems += errored.failures
        figures += [
            ("I/O errors injected (ENOSPC, EACCES, EROFS, EIO at every write point)",
             sum(c.failed_runs + c.finished_forward for c in errors)),
            ("  rolled back (exit 7) / in the clean-up after the last file, finished forward (exit 0)",
             f"{sum(c.failed_runs for c in errors)} / {sum(c.finished_forward for c in errors)}"),
            ("  writes outside the root", sum(c.outside_writes for c in errors)),
            ("  not exit 7 / tree not restored / unclear message", " / ".join(
                str(sum(len(getattr(c, f)) for c in errors)) for f in ("wrong_exit", "not_restored", "unclear")
            )),
        ]

        # ------------------------------------------------------------------------------- races
        race_runs = 0
        mixed_races = 0
        writers_wrong = 0
        outside = outside_images(case)
        for i in range(rounds):
            root = case.fresh(f"race-{i}")
            runs = race(case, root, [("apply", {})] * 8)
            race_runs += 1
            results = Counter(r.json()["result"] for r in runs if r.code == 0)
            writers_wrong += results != {"applied": 1, "already-applied": 7}
            mixed_races += image(root) != case.patched
            root = case.fresh(f"race-mixed-{i}", patched=bool(i % 2))
            race(case, root, [("apply", {}), ("revert", {})] * 4)
            race_runs += 1
            mixed_races += image(root) not in (case.original, case.patched, case.reverted)
            root = case.fresh(f"race-killed-{i}")
            runs = race(case, root, [("apply", fault_env(20 + i % 40))] + [("apply", {})] * 7)
            race_runs += 1
            mixed_races += image(root) != case.patched
            writers_wrong += any(r.code != 0 for r in runs if not r.killed)
        race_outside = outside != outside_images(case)
        if mixed_races or writers_wrong or race_outside:
            problems.append(f"races: {mixed_races} mixed trees, {writers_wrong} wrong writers, outside: {race_outside}")
        figures += [
            ("races run (8 processes each: apply x8, apply/revert x4, one racer set to die mid-write)", race_runs),
            ("  races ending in a mixed tree", mixed_races),
            ("  apply x8 rounds where other than exactly one process wrote", writers_wrong),
            ("  writes outside the roots", int(race_outside)),
        ]

        # ------------------------------------------------------------------------------ hostile
        catalogue_dir = workdir / "hostile"
        catalogue_dir.mkdir()
        warm_up(catalogue_dir)
        refused = 0
        for hostile in test_hostile.HOSTILE:
            found = test_hostile.check_hostile(catalogue_dir, hostile)
            problems += [f"hostile {hostile.name}: {p}" for p in found]
            refused += not found
        fuzz_counts = _fuzz(fuzz_examples)
        cli_runs, cli_bad, outside_bad = _fuzz_cli(workdir, fuzz_examples // 4)
        if cli_bad or outside_bad:
            problems.append(f"fuzzed CLI: {cli_bad} tracebacks or undefined exit codes, {outside_bad} outside writes")
        figures += [
            ("hostile inputs in the catalogue (each through apply and status)", len(test_hostile.HOSTILE)),
            ("  refused with exit 2, the file named, nothing written", refused),
            ("fuzzed diffs and manifests through the parser and loader", sum(fuzz_counts.values())),
            ("fuzzed diffs through the real CLI", cli_runs),
            ("  tracebacks or exit codes outside 0-2", cli_bad),
            ("  writes outside the root", outside_bad),
        ]

        # ----------------------------------------------------------------- untrusted state, hostile fs
        for title, module in (
            ("untrusted state", test_untrusted_state),
            ("hostile filesystem", test_hostile_fs),
            ("moved folders, kept originals, the lock file", test_moved_folders),
        ):
            tried, passed, skipped, failed = _run_checks(module, case, workdir / title.replace(" ", "-"))
            problems += [f"{title}: {f}" for f in failed]
            figures += [
                (f"{title}: attacks and faults tried (every test of tests/{module.__name__.split('.')[-1]}.py)",
                 tried),
                ("  ended as documented (refused with nothing written, or whole tree and the documented exit)",
                 passed),
                ("  skipped (not root, or mount not allowed)", skipped),
            ]
        bound_rows = (
            ("oversized tree files (4 GiB sparse at a patched path, just over the bound, the total read)",
             ("huge_file", "over_the_bound", "bounded_together")),
            ("stale bytecode caches (512 MiB sparse, killed at every operation; hard-linked, applied and rolled "
             "back)", ("stale_cache",)),
            ("placed paths and patch ids over the path bounds (prefix / [paths] depth, names, length; long ids)",
             ("placed_paths", "placement", "patch_id", "id_over")),
        )
        for title, words in bound_rows:
            tried, passed, skipped, failed = _run_checks(
                test_bounds, case, workdir / f"bounds-{words[0]}",
                select=lambda name, w=words: any(x in name for x in w),
            )
            problems += [f"bounds: {f}" for f in failed]
            figures += [
                (f"{title}: runs (tests/test_bounds.py)", tried),
                ("  refused with exit 2 naming the file (or manifest line), size and bound, nothing written; "
                 "or restored exactly", passed),
                ("  skipped (not root)", skipped),
            ]
        # ------------------------------------------ the engine's environment, a hostile consuming repository
        worlds: list[test_untrusted_env.World] = []

        def world(scratch: Path) -> test_untrusted_env.World:  # one venv template for every check
            if not worlds:
                worlds.append(test_untrusted_env.make_world(workdir / "engine-env", _user()))
            return worlds[0]

        (workdir / "engine-env").mkdir()
        for title, module, test_file, factories in (
            ("engine environment", test_untrusted_env, "test_untrusted_env",
             {"world": world}),
            ("hostile consuming repository (lint on a fork's pull request)", test_lint_hostile, "test_lint_hostile",
             {"repo": test_lint_hostile.make_repo}),
        ):
            tried, passed, skipped, failed = _run_checks(module, case, workdir / test_file, factories)
            problems += [f"{title}: {f}" for f in failed]
            figures += [
                (f"{title}: attacks tried (every test of tests/{test_file}.py)", tried),
                ("  refused or contained as documented, nothing read or written outside", passed),
                ("  skipped (not root)", skipped),
            ]
        _git_rows(case, workdir, figures, problems)
        trust_figures, trust_problems = _trust_rule_rows(case, workdir / "trust-rule", {"world": world})
        figures += trust_figures
        problems += trust_problems
        problems += _reads_and_lock_rows(case, workdir, figures)
        shell_figures, shell_problems = _hostile_shell_figures(workdir / "hostile-shell", args.quick)
        figures += shell_figures
        problems += shell_problems
        signal_runs, signal_bad = _signal_campaign(case)
        problems += signal_bad
        figures += [
            ("SIGTERM/SIGINT at every write point of apply and revert, repeated at every later operation",
             signal_runs),
            ("  not whole (rolled back, or complete if every file was written) with exit 143/130 and a message"
             " saying which", len(signal_bad)),
        ]
        full_runs, full_bad = _full_disk_campaign(case)
        problems += full_bad
        figures += [
            ("disk full from each write point on (no new inode or block), apply and revert: runs failing", full_runs),
            ("  not exit 7 with the tree restored (or, past the last file, finished forward)", len(full_bad)),
        ]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return _print(figures, problems, started)


def _print(figures: list[tuple[str, int | str]], problems: list[str], started: float) -> int:
    print("| What was tried | Count |")
    print("|---|---|")
    for label, value in figures:
        print(f"| {label} | {value} |")
    print(f"\n{time.monotonic() - started:.0f}s; {'no problems' if not problems else f'{len(problems)} PROBLEMS:'}")
    for problem in problems[:50]:
        print(f"  - {problem}")
    return 1 if problems else 0


def _git_rows(case: Case, workdir: Path, figures: list[tuple[str, int | str]], problems: list[str]) -> None:
    """git in the tree: every test of tests/test_git_trust.py once, each in its own scratch folder."""
    (workdir / "git-trust").mkdir()
    tried, passed, skipped, failed = _run_checks(
        test_git_trust, case, workdir / "git-trust", {"world": test_git_trust.make_world}
    )
    problems += [f"git in the tree: {f}" for f in failed]
    figures += [
        ("git in the tree: hostile `.git/config` (promisor sshCommand/uploadpack, fsmonitor, pager, diff.external, "
         "hooksPath), a `.git` the user owns or may write in part, packed/shallow/worktree HEADs, a fork's files "
         "for lint --base (every test of tests/test_git_trust.py)", tried),
        ("  no command run, the base answered or 'cannot tell' with the owner named, exit codes as documented",
         passed),
        ("  skipped (not root)", skipped),
    ]
def _reads_and_lock_rows(case: Case, workdir: Path, figures: list[tuple[str, int | str]]) -> list[str]:
    """Issue 32's rows: a link swapped in during `new --from-tree`, the lock against another user, and the tree
    changed by another process during the write (and a read-only root). Appends the figures; the problems."""
    problems: list[str] = []
    for title, module, factories in (
        ("link swaps during `new --from-tree` (a folder of the user's copy swapped for a link to a root-only "
         "folder between the walk and the read)", test_new_races,
         {"trees": lambda scratch: test_new_races.make_trees(scratch, _user())}),
        ("the lock and another user (0600 lock they cannot open, the root folder they flock, their status, an "
         "older 0644 lock, --lock-timeout as the whole wait, said once)", test_lock_others, {}),
        ("the tree changed during the write (an edit in place that puts the mtime back, one right before the "
         "replace, a deleted file created again while patchkit finishes)", test_write_mutations, {}),
        ("a root on a read-only filesystem (apply exit 2 with a hint, nothing written; doctor says so)",
         test_read_only_root, {}),
    ):
        name = module.__name__.split(".")[-1]
        tried, passed, skipped, failed = _run_checks(module, case, workdir / name, factories)
        problems += [f"{name}: {f}" for f in failed]
        figures += [
            (f"{title}: runs (every test of tests/{name}.py)", tried),
            ("  ended as documented (refused or failed with the documented exit, nothing of theirs lost, nothing "
             "read from outside)", passed),
            ("  skipped (not root, or mount not allowed)", skipped),
        ]
    return problems
def _hostile_shell_figures(scratch: Path, quick: bool) -> tuple[list[tuple[str, int | str]], list[str]]:
    """The rows of lint on hostile shell: sites hidden in a part too deep to follow, and the scan's growth."""
    figures: list[tuple[str, int | str]] = []
    problems: list[str] = []
    scratch.mkdir(parents=True)
    shapes = test_lint_hostile._HOSTILE_MIDDLES
    caught = 0
    for shape in sorted(shapes):
        try:
            test_lint_hostile.test_a_script_too_deep_to_follow_fails_lint_and_its_other_sites_are_reported(
                test_lint_hostile.make_repo(Path(tempfile.mkdtemp(dir=scratch))), shape
            )
            caught += 1
        except AssertionError as exc:
            problems.append(f"hostile shell, {shape}: {str(exc)[:200]}")
    figures += [
        ("lint on hostile shell: valid scripts hiding a site in a part too deep to follow", len(shapes)),
        ("  failed the check (PK405 error naming the line), the sites before and after reported", caught),
    ]
    broken = [(b, h) for b in ("x=$()\n", "cat > a <<A; cat > b <<B\nx\nA\ny\nB\n")
              for h in ("y=$(git apply /tmp/e.diff)", "y=$(echo $(cd /x && git apply /tmp/e.diff))")]
    found = 0
    for before, hidden in broken:
        try:
            test_lint_scan.test_an_error_tree_does_not_hide_the_commands_in_substitutions(before, hidden)
            found += 1
        except AssertionError as exc:
            problems.append(f"hostile shell, an error tree hiding {hidden!r}: {str(exc)[:200]}")
    figures += [
        ("lint on hostile shell: a site in `$(...)` behind an error tree (the fallback reader)", len(broken)),
        ("  found", found),
    ]
    growth = _shell_growth(quick)
    problems += [f"hostile shell growth: {line}" for ok, line in growth if not ok]
    figures += [
        ("lint on hostile shell: scan time and peak memory at n, 2n, 4n (benchmarks/lint_growth.py shapes)",
         len(growth)),
        ("  growing near-linearly (at most 2.5 x linear)", sum(ok for ok, _ in growth)),
    ]
    return figures, problems


def _shell_growth(quick: bool) -> list[tuple[bool, str]]:
    """benchmarks/lint_growth.py's hostile shell shapes, measured (smaller with --quick)."""
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "lint_growth.py"
    spec = importlib.util.spec_from_file_location("lint_growth", path)
    assert spec is not None and spec.loader is not None
    growth = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(growth)
    base = growth.SHELL_BASE // (5 if quick else 1)
    return [growth.measure_shell(name, shape, base, 1) for name, shape in growth._shell_shapes().items()]


def _user() -> tuple[int, int]:
    return unprivileged_user() if os.geteuid() == 0 else (65534, 65534)


def _run_checks(
    module: object, case: Case, scratch: Path, factories: dict[str, Callable[[Path], object]] | None = None,
    select: Callable[[str], bool] = lambda name: True,
) -> tuple[int, int, int, list[str]]:
    """Run every (selected) test function of a test module (with its parameters) once: (tried, passed, skipped,
    failed). The fixtures offered: case, user, tmp_path, monkeypatch, a fresh workdir, registry and engine, and
    what `factories` make of the run's scratch folder (the module's own fixtures)."""
    import inspect

    import pytest

    scratch.mkdir(parents=True, exist_ok=True)
    user = _user()
    tried = passed = skipped = 0
    failed: list[str] = []
    for name, func in sorted(vars(module).items()):
        if not name.startswith("test_") or not callable(func) or not select(name):
            continue
        module_marks = getattr(module, "pytestmark", [])
        module_marks = module_marks if isinstance(module_marks, list) else [module_marks]
        marks = [getattr(m, "mark", m) for m in [*getattr(func, "pytestmark", []), *module_marks]]
        if any(m.name == "skipif" and m.args and m.args[0] for m in marks):
            skipped += 1
            continue
        combos: list[dict[str, object]] = [{}]
        for mark in marks:
            if mark.name == "parametrize":
                names = [n.strip() for n in mark.args[0].split(",")] if isinstance(mark.args[0], str) else mark.args[0]
                values = [v.values if type(v).__name__ == "ParameterSet" else v if len(names) > 1 else (v,)
                          for v in mark.args[1]]  # pytest.param(...) or plain values
                combos = [{**c, **dict(zip(names, v, strict=True))} for c in combos for v in values]
        for params in combos:
            tried += 1
            run_dir = Path(tempfile.mkdtemp(dir=scratch))
            os.chmod(run_dir, 0o755)  # the unprivileged user must reach the trees made in it
            wanted = inspect.signature(func).parameters
            if "registry" in wanted:
                (run_dir / "patches").mkdir()
            if "engine" in wanted:
                (run_dir / "engine").mkdir()
            with pytest.MonkeyPatch.context() as monkeypatch:
                given = {"case": case, "user": user, "tmp_path": run_dir, "monkeypatch": monkeypatch,
                         "workdir": run_dir, "registry": Registry(run_dir / "patches"), "engine": run_dir / "engine",
                         **params}
                try:
                    for fixture, make in (factories or {}).items():
                        if fixture in wanted:
                            given[fixture] = make(run_dir)
                    func(**{k: given[k] for k in wanted})
                    passed += 1
                except pytest.skip.Exception:
                    skipped += 1
                    tried -= 1
                except BaseException as exc:
                    failed.append(f"{name}{params or ''}: {type(exc).__name__}: {str(exc)[:200]}")
    return tried, passed, skipped, failed


def _trust_rule_rows(
    case: Case, scratch: Path, factories: dict[str, Callable[[Path], object]]
) -> tuple[list[tuple[str, int | str]], list[str]]:
    """The one trust rule (patchkit/input/trust.py, issue 32): its edges, and the two findings mutants showed
    unpinned (a sticky file taken for a sticky folder; root's state refused to a non-root user), a row each."""
    rows: list[tuple[str, int | str]] = []
    problems: list[str] = []
    scratch.mkdir(parents=True, exist_ok=True)
    offered = {"scratch": lambda folder: folder, **factories}
    edges = ("another_user", "others_may_write", "sticky_folder", "sticky_state", "link", "walk", "rule_refuses")
    for title, checks in (
        ("trust rule edges, on the module and through status, apply, revert and the restart fast path (another "
         "owner, group/other write, a sticky folder of root's, a link)", ((test_trust_rule, edges),)),
        ("a world-writable file with the sticky bit (1777): a record, and an interpreter given by --python / "
         "PATCHKIT_PYTHON (a marker shows it did not run)",
         ((test_trust_rule, ("sticky_world_writable_record",)), (test_untrusted_env, ("sticky_interpreter",)))),
        ("a non-root user on a tree root patched: `status` (text, --json) and a restart answered from root's "
         "records, exit 0, nothing written", ((test_trust_rule, ("non_root", "roots_entries")),)),
    ):
        tried = passed = skipped = 0
        for module, words in checks:
            counts = _run_checks(module, case, scratch / words[0], offered,
                                 select=lambda name, w=words: any(x in name for x in w))
            tried, passed, skipped = tried + counts[0], passed + counts[1], skipped + counts[2]
            problems += [f"trust rule: {f}" for f in counts[3]]
        if not tried and not skipped:
            problems.append(f"trust rule: no test selected for {title}")
        rows += [(f"{title}: runs", tried), ("  as documented / skipped (not root)", f"{passed} / {skipped}")]
    return rows, problems


def _signal_campaign(case: Case) -> tuple[int, list[str]]:
    runs, bad = 0, []
    for action in ("apply", "revert"):
        for sig, code in (("TERM", 143), ("INT", 130)):
            for n in range(0, 1000):
                root = case.fresh("signals", patched=action == "revert")
                start = image(root)
                run = run_forked(case.args(action, root), {**fault_env(n), "PATCHKIT_FAULT_SIGNAL": sig},
                                 before=signals_as_in_a_terminal)
                if run.code == 0:
                    break
                runs += 1
                forward = action == "apply"
                end = image(root)
                said = ("the write in progress was rolled back" if end == start
                        else "the write had already completed" if end in (case.patched if forward else case.reverted,)
                        else None)
                left = (root / ".patchkit/journal.json").exists()
                if run.code != code or said is None or said not in run.err or left:
                    bad.append(f"SIG{sig} at op {n} of {action}: exit {run.code}: {run.err.strip()[:200]}")
    return runs, bad


def _full_disk_campaign(case: Case) -> tuple[int, list[str]]:
    runs, bad = 0, []
    for action in ("apply", "revert"):
        successes = 0
        for n in range(0, 1000):
            root = case.fresh("full-disk", patched=action == "revert")
            start = image(root)
            env = {**fault_env(n, "ENOSPC"), "PATCHKIT_FAULT_PERSIST": "1"}
            run = run_forked(case.args(action, root), env)
            end = image(root) == (case.patched if action == "apply" else case.reverted)
            successes = successes + 1 if run.code == 0 else 0
            if successes == 30:  # well past the last operation: nothing fails any more
                break
            if run.code == 0:  # the fault hit the clean-up after every file was written: finished forward
                if not end:
                    bad.append(f"disk full from op {n} of {action}: exit 0 but the tree is not the finished one")
                continue
            runs += 1
            if run.code != 7 or image(root) != start or (root / ".patchkit" / "journal.json").exists():
                bad.append(f"disk full from op {n} of {action}: exit {run.code}: {run.err.strip()[:200]}")
    return runs, bad


def _fuzz(examples: int) -> dict[str, int]:
    counts: Counter[str] = Counter()
    config = settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))

    @config
    @given(st.binary(max_size=4000))
    def random_diffs(data: bytes) -> None:
        counts["random"] += 1
        test_fuzz.check_diff(data)

    @config
    @given(test_fuzz.mutated_diffs())
    def mutated_diffs(sample: tuple[bytes, Path]) -> None:
        counts["mutated"] += 1
        test_fuzz.check_diff(*sample)

    @config
    @given(test_fuzz.mutated_manifests() | test_fuzz.manifest_documents() | st.binary(max_size=800))
    def manifests(data: bytes) -> None:
        counts["manifest"] += 1
        test_fuzz.check_manifest(data)

    random_diffs()
    mutated_diffs()
    manifests()
    return dict(counts)


def _fuzz_cli(workdir: Path, examples: int) -> tuple[int, int, int]:
    """Mutated diffs through `patchkit apply` next to a sentinel folder: (runs, bad runs, outside writes)."""
    base = workdir / "fuzz-cli"
    base.mkdir()
    sentinel = base / "outside"
    write_files(sentinel, {"target.txt": (b"precious\n", 0o644)})
    untouched = image(sentinel)
    counts = Counter[str]()

    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(test_fuzz.mutated_diffs())
    def run(sample: tuple[bytes, Path]) -> None:
        data, seed_root = sample
        root = base / "root"
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(seed_root, root)
        patches = base / "patches"
        shutil.rmtree(patches, ignore_errors=True)
        add_patch(patches, PATCH_ID, data)
        result = run_forked(["apply", PATCH_ID, "--root", str(root), "--patches", str(patches)])
        counts["runs"] += 1
        if result.code not in (0, 1, 2) or "Traceback" in result.err:
            counts["bad"] += 1
            # kept for the reader: the diff (outside the scratch folder, which is removed) and what the run said
            fd, kept = tempfile.mkstemp(prefix="patchkit-fuzz-bad-", suffix=".diff")
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            tail = result.err.strip().splitlines()[-3:]
            print(f"  fuzzed CLI: exit {result.code} on the diff kept in {kept}: {' / '.join(tail)}", flush=True)
        counts["outside"] += image(sentinel) != untouched

    run()
    return counts["runs"], counts["bad"], counts["outside"]


if __name__ == "__main__":
    sys.exit(main())
