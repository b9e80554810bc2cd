"""CI smoke test of benchmarks/run.py: on the small size, patchkit, git apply and GNU patch leave identical trees.

Only the comparison's correctness is checked; the timings it prints are never asserted (they depend on the
machine). Runs by default; deselect with `-m "not benchmark"`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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
    result = run_bench("--patchkit", f"{sys.executable} -m patchkit", "--pyz", sys.executable)
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


def test_a_tool_that_leaves_the_tree_unpatched_fails_the_run() -> None:
    # `true` exits 0 and writes nothing: wrong exit code for a status, and a tree that differs after apply.
    result = run_bench("--patchkit", "true")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "has different content" in result.stderr
    assert "FAILED" in result.stderr


def test_scale_rows_give_the_user_time_and_git_scale_beside_the_verdict() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_run", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules["bench_run"] = bench
    spec.loader.exec_module(bench)
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
