"""CI smoke test of benchmarks/run.py: on the small size, patchkit, git apply and GNU patch leave identical trees.

Only the comparison's correctness is checked; the timings it prints are never asserted (they depend on the
machine). Runs by default; deselect with `-m "not benchmark"`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.script_loader import load_script

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "benchmarks" / "run.py"

pytestmark = [
    pytest.mark.benchmark,
    pytest.mark.skipif(shutil.which("git") is None, reason="the benchmark makes its diffs with git"),
]


def run_bench(*args: str) -> subprocess.CompletedProcess[str]:
    # Run this checkout's patchkit whatever is installed, through the interpreter running the tests.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(
        [sys.executable, str(BENCH), "--sizes", "small", "--runs", "1", "--check-only", *args],
        capture_output=True, text=True, env=env, timeout=300,
    )


def test_small_size_every_tool_leaves_the_same_tree() -> None:
    result = run_bench("--patchkit", f"{sys.executable} -m patchkit", "--pyz", sys.executable, "--pyz-no-bytecode")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all tools produced identical trees" in result.stdout
    assert "imports no GitPython module" in result.stdout
    # the issue #15 cases ran, and their trees were compared too
    for row in ("status, unapplied, fresh container", "apply, fresh container", "restart (applied by patchkit)"):
        assert f"| small | {row} |" in result.stdout, row
    # and issue #25's: the archive as an image runs it, with and without bytecode
    for kind in ("patchkit.pyz", "patchkit.pyz, no bytecode"):
        for row in ("apply, fresh container, compiled at the image build", "restart --all --json"):
            assert f"| small | {row}, {kind} |" in result.stdout, (row, kind)
    # issue #36: the archive with bytecode runs every row the installed package runs
    for row in ("status, drifted tree (a line added above the hunks)", "apply (fresh copy)", "restart --json",
                "status, unapplied, fresh container", "revert (fresh copy)"):
        assert f"| small | {row}, patchkit.pyz |" in result.stdout, row


def test_a_tool_that_leaves_the_tree_unpatched_fails_the_run() -> None:
    # `true` exits 0 and writes nothing: wrong exit code for a status, and a tree that differs after apply.
    result = run_bench("--patchkit", "true")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "has different content" in result.stderr
    assert "FAILED" in result.stderr


def load_bench() -> Any:
    return load_script(BENCH, "bench_run")


def test_scale_rows_give_the_user_time_and_git_scale_beside_the_verdict() -> None:
    bench = load_bench()
    op = "apply (fresh copy)"
    rows = [
        bench.Row("large", op, {"patchkit": bench.Cell("patchkit", 1.0, 10, 3, cpu=1.0, user=0.5),
                                "git apply": bench.Cell("git apply", 0.2, 5, 3, cpu=0.2, user=0.1)}),
        bench.Row("xlarge", op, {"patchkit": bench.Cell("patchkit", 5.0, 40, 3, cpu=5.0, user=2.0),
                                 "git apply": bench.Cell("git apply", 1.6, 20, 3, cpu=1.6, user=0.4)}),
    ]
    (name, measured, met), = [t for t in bench.judge_targets(rows, {}, judge="cpu") if t[0].startswith(op)]
    assert name == f"{op}: xlarge <= 4.5x large" and not met  # 5x: the verdict is on user + system time
    assert measured.startswith("5.00x") and "user 4.00x" in measured and "git apply 8.00x" in measured


def _cells(bench: Any, pk_cpu: float, git_cpu: float, pk_wall: float = 0.5, git_wall: float = 0.5) -> Any:
    return {"patchkit": bench.Cell("patchkit", pk_wall, 30, 3, cpu=pk_cpu, user=pk_cpu),
            "git apply": bench.Cell("git apply", git_wall, 20, 3, cpu=git_cpu, user=git_cpu)}


def test_issue36_table_judges_cpu_ratios_for_installed_and_pyz() -> None:
    bench = load_bench()
    rows = [
        # wall says 4x, CPU 0.9x: the verdict is on CPU
        bench.Row("history", "restart (applied by patchkit)", _cells(bench, 0.09, 0.10, pk_wall=0.4, git_wall=0.1)),
        bench.Row("history", "restart (applied by patchkit), patchkit.pyz", _cells(bench, 0.12, 0.10)),
        bench.Row("history", "status, unapplied, fresh container", _cells(bench, 0.29, 0.10)),
        bench.Row("history", "apply, fresh container, patchkit.pyz", _cells(bench, 0.41, 0.10)),
        bench.Row("large", "restart --json", _cells(bench, 0.01, 0.10)),  # another size: not issue #36's
    ]
    verdicts = {(v.target.split(" <=")[0], v.variant): v for v in bench.issue36_targets(rows)}
    restart = verdicts[("restart, text, one patch", "installed")]
    assert restart.met and f"{restart.ratio:.2f}" == "0.90" and restart.limit == 1.0
    assert "restart (applied by patchkit)" in restart.compares and "0.090 s" in restart.compares
    pyz = verdicts[("restart, text, one patch", "patchkit.pyz")]
    assert not pyz.met and f"{pyz.ratio:.2f}" == "1.20"
    assert verdicts[("first status (fresh HOME)", "installed")].met  # 2.9x of 3
    assert not verdicts[("first apply (fresh HOME; journal and fsyncs kept)", "patchkit.pyz")].met  # 4.1x of 4
    json_installed = verdicts[("restart, --json, one patch", "installed")]
    assert json_installed.ratio is None and not json_installed.met  # only measured on large: not judged
    table = "\n".join(bench.render_issue36(bench.issue36_targets(rows)))
    assert re.search(r"\| restart, text, one patch <= 1.0x `git apply -R --check` \| patchkit.pyz \| 1.20x \|.*"
                     r"\*\*missed\*\* \|", table)
    # every line of the table has the header's five columns (no "|" inside a cell)
    assert {line.count("|") for line in table.splitlines()} == {6}


def test_issue36_nothing_slower_is_judged_against_a_baseline_per_variant() -> None:
    bench = load_bench()
    then = [bench.Row("large", "status, applied tree", _cells(bench, 0.20, 0.1)),
            bench.Row("large", "apply (fresh copy), patchkit.pyz", _cells(bench, 0.50, 0.1)),
            bench.Row("history", "restart --all, patchkit.pyz, no bytecode", _cells(bench, 0.10, 0.1))]
    now = [bench.Row("large", "status, applied tree", _cells(bench, 0.21, 0.1)),  # 1.05x: noise
           bench.Row("large", "apply (fresh copy), patchkit.pyz", _cells(bench, 0.50, 0.1)),
           bench.Row("history", "restart --all, patchkit.pyz, no bytecode", _cells(bench, 0.13, 0.1))]  # 1.3x
    now[0].cells["patchkit"].rss_mb = 40  # 30 -> 40 MB: more memory
    verdicts = {(v.target.split(":")[0], v.variant): v for v in bench.issue36_targets(now, then, noise=0.15)}
    assert verdicts[("nothing slower elsewhere", "installed")].met
    slower = verdicts[("nothing slower elsewhere", "patchkit.pyz")]
    assert not slower.met and "no bytecode" in slower.compares and "1 over the limit" in slower.compares
    assert f"{slower.ratio:.2f}" == "1.30"
    assert not verdicts[("peak memory as today", "installed")].met
    assert verdicts[("peak memory as today", "patchkit.pyz")].met
    unjudged = [v for v in bench.issue36_targets(now) if v.target.startswith("nothing slower")]
    assert unjudged and all(v.ratio is None and "--baseline" in v.compares for v in unjudged)


def test_issue36_baseline_discounts_a_machine_that_got_slower_between_the_runs() -> None:
    bench = load_bench()

    def python(cpu: float) -> Any:
        return bench.Row("-", "cold start", {"patchkit": bench.Cell("patchkit", cpu, 15, 3, cpu=cpu),
                                             "python": bench.Cell("python", cpu, 11, 3, cpu=cpu / 2)})

    # between the runs the machine got 1.5x slower for every process, patchkit's code did not change
    then = [bench.Row("large", "status, unapplied tree", _cells(bench, 0.30, 0.10)),
            bench.Row("small", "restart --all", _cells(bench, 0.040, 0.001)), python(0.040)]
    now = [bench.Row("large", "status, unapplied tree", _cells(bench, 0.45, 0.15)),  # over git apply's cell
           bench.Row("small", "restart --all", _cells(bench, 0.060, 0.001)), python(0.060)]  # over python's
    slower = next(v for v in bench.issue36_targets(now, then) if v.target.startswith("nothing slower")
                  and v.variant == "installed")
    assert slower.met and f"{slower.ratio:.2f}" == "1.00", slower
    now[1].cells["patchkit"].cpu = 0.09  # and now patchkit's small restart is slower itself
    slower = next(v for v in bench.issue36_targets(now, then) if v.target.startswith("nothing slower")
                  and v.variant == "installed")
    assert not slower.met and "small `restart --all`" in slower.compares and f"{slower.ratio:.2f}" == "1.50"


def test_history_size_has_the_shape_its_docstring_claims(tmp_path: Path) -> None:
    bench = load_bench()
    corpus = bench.generate("history", tmp_path / "one")
    diff = corpus.diff.read_bytes()
    assert 400 <= corpus.files_in_diff <= 650 and 5 * 2**20 <= corpus.diff_bytes <= 10 * 2**20
    files = diff.split(b"\ndiff --git ")
    hunks = sorted(f.count(b"\n@@ -") for f in files)
    assert hunks[len(hunks) // 2] <= 2 and sum(h >= 24 for h in hunks) >= 3  # most one or two, a few dozens
    assert diff.count(b"\nnew file mode") >= 10 and diff.count(b"\ndeleted file mode") >= 5
    renames = [f for f in files if b"\nrename from " in f]
    assert sum(b"similarity index 100%" in f for f in renames) >= 3  # pure renames
    assert sum(b"\n@@ -" in f for f in renames) >= 3  # renames with edits
    assert b"\nold mode 100644\nnew mode 100755" in diff and b"\nold mode 100755\nnew mode 100644" in diff
    assert diff.count(b"\\ No newline at end of file") >= 3
    assert b"\r\n" in diff and any(ord(c) > 127 for c in diff.decode("utf-8"))
    assert diff.count(b"\n         return None\n") >= 50 and diff.count(b"\n     @staticmethod\n") >= 20  # context
    sizes = sorted(len(p.read_bytes().splitlines()) for p in corpus.base.rglob("*") if p.is_file())
    assert sizes[len(sizes) // 2] < 400 and sizes[-1] > 15000  # many small files, a few very large
    big_new = [f for f in files if b"new file mode" in f[:300] and f.count(b"\n+") > 3000]
    assert len(big_new) >= 3
    # deterministic: the same seed makes the same diff
    assert bench.generate("history", tmp_path / "two").diff.read_bytes() == diff
