#!/usr/bin/env python3
"""Growth check for `patchkit lint` on hostile inputs: the waiver parser and the scan's walk must stay linear.

A pull request from a fork writes the waivers and the folders lint reads. This times, for inputs of growing
size (n, 2n, 4n, 8n, each the best of --runs runs), the waiver parser on the shapes that made the old regexes
quadratic (`"> " * n` and other placeholder-like lines, an ATX heading with n spaces, n unclosed `<!--`, n
headings, n nested headings) and the scan's walk of a tree n folders deep, and asserts near-linear growth:
the time for 8n is at most SLACK x 8 times the time for n (a quadratic algorithm gives 64x). Sizes are chosen
so the smallest run takes at least FLOOR (20 ms; at most 64x the base size, else growth is judged against
the floor: clock and allocation noise).

The scan of hostile shell (issue #32, 4) is timed the same way at n, 2n, 4n, and its peak memory (tracemalloc,
a run of its own) too: `$(` nested n deep (20,000 took 17 s and 621 MB), `"$(echo "` n deep, `if` blocks n
deep (40,000 took 80 s), embedded shells n deep, and a chain the fallback reader reads (an ERROR tree). Each
run also checks the sites before and after the deep part are found: fast because it stopped reading is no pass.

Usage: python benchmarks/lint_growth.py [--runs 5] [--scale 1.0]     # exit 1 when a shape grows too fast

This is a benchmark, not a unit test: it is run by hand or in a benchmark job, never in the timed test suite.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from patchkit.lint.waivers import parse_waiver  # noqa: E402
from patchkit.scan import ScanConfig, scan_files, scan_tree  # noqa: E402

STEPS = (1, 2, 4, 8)
SLACK = 2.5  # allowed factor over linear growth across the 8x range (load, caches, GC)
DEEPEST = 1990  # folders `d/` below a temp folder: the path stays under PATH_MAX (4096)
WALK_BUDGET = 5.0  # seconds
GIVE_UP = 10.0  # seconds for one run: far past linear (the old parser took 31 s on 20 000 quote markers)
FLOOR = 0.02  # seconds: a smallest run faster than this is scaled up until it is not (clock and cache noise)


def _waiver_shapes() -> dict[str, Callable[[int], str]]:
    return {
        "quote markers ('> ' * n, then text)": lambda n: "# What\n" + "> " * n + "x\n",
        "placeholder-like line ('- ' * n)": lambda n: "## Removal\n" + "- " * n + "done\n",
        "ATX heading with n spaces": lambda n: "# What" + " " * n + "x #\n",
        "n unclosed comments": lambda n: "# What\n" + "<!--" * n + "\n",
        "n headings": lambda n: "".join(f"## Section {i}\ntext\n" for i in range(n // 8)),
        "n nested headings": lambda n: "".join("#" * (1 + i % 6) + " h\nx\n" for i in range(n // 8)),
        "n lines of '> '": lambda n: "# Why\n" + "> \n" * (n // 2),
    }


SHELL_STEPS = (1, 2, 4)
SHELL_BASE = 5_000  # nesting levels at n: 4n = 20,000 is the size


def _shell_shapes() -> dict[str, Callable[[int], str]]:
    """Scripts nesting n deep, each between two patch sites that the scan must still report."""
    return {
        "$( nested n deep": lambda n: "x=" + "$(" * n + "true" + ")" * n + "\n",
        '"$(echo " nested n deep': lambda n: 'x="' + '$(echo "' * n + "hi" + '")' * n + '"\n',
        "if blocks n deep": lambda n: "if true; then\n" * n + "fi\n" * n,
        "sh <<EOF in sh <<EOF, n deep": lambda n: "".join(f"sh <<E{i}\n" for i in range(n))
        + "".join(f"E{i}\n" for i in reversed(range(n))),
        "$(echo n deep, an ERROR tree (fallback reader)": lambda n: "x=" + "$(echo " * n + "$()" + ")" * n + "\n",
    }


def _scan_script(middle: str) -> Callable[[], object]:
    data = ("git apply /tmp/before.diff\n" + middle + "git apply /tmp/after.diff\n").encode()
    config = ScanConfig()

    def scan() -> object:
        result = scan_files([("run.sh", data)], config)
        assert len(result.sites) == 2, f"{len(result.sites)} sites found, not the two around the deep part"
        return result

    return scan


def _peak(action: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        action()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def measure_shell(name: str, shape: Callable[[int], str], base: int, runs: int) -> tuple[bool, str]:
    """Time and peak memory of the scan of `shape` at n, 2n, 4n: each may grow SLACK x linear at most."""
    times, peaks = [], []
    for step in SHELL_STEPS:
        scan = _scan_script(shape(base * step))
        try:
            times.append(_time(scan, runs))
        except (AssertionError, RecursionError) as exc:  # the old reader: the sites around the deep part lost
            return False, f"FAIL {name}: n={base * step}: {type(exc).__name__}: {exc}"
        peaks.append(_peak(scan))
        print(f"  {name}: n={base * step}: {times[-1] * 1000:.0f} ms, peak {peaks[-1] / 1e6:.1f} MB", flush=True)
        if times[-1] > GIVE_UP:
            return False, f"FAIL {name}: {times[-1]:.1f} s for n={base * step}, stopped (limit {GIVE_UP:.0f} s a run)"
    growth, memory = times[-1] / max(times[0], FLOOR), peaks[-1] / peaks[0]
    limit = SLACK * SHELL_STEPS[-1]
    ok = growth <= limit and memory <= limit
    return ok, (f"{'ok  ' if ok else 'FAIL'} scan of {name}: time x{growth:.1f}, peak memory x{memory:.1f} for "
                f"x{SHELL_STEPS[-1]} input (limit x{limit:.0f}); {times[-1]:.2f} s, {peaks[-1] / 1e6:.0f} MB at "
                f"n={base * SHELL_STEPS[-1]}")


def _parse(text: str) -> Callable[[], object]:
    return lambda: parse_waiver(text)  # the input is made before the clock starts


def _time(action: Callable[[], object], runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - start)
    return best


def _deep_tree(parent: Path, depth: int) -> Path:
    root = Path(tempfile.mkdtemp(prefix=f"deep-{depth}-", dir=parent))
    folder = root
    for _ in range(depth):
        folder = folder / "d"
        folder.mkdir()
    (folder / "run.sh").write_text("git apply /tmp/fix.diff\n")
    return root


def measure(
    name: str, make: Callable[[int], Callable[[], object]], base: int, runs: int, grow: bool = True
) -> tuple[bool, str]:
    size = base
    while grow and _time(make(size), 1) < FLOOR and size < base * 64:
        size *= 2
    times = []
    for step in STEPS:
        times.append(_time(make(size * step), runs))
        print(f"  {name}: n={size * step}: {times[-1] * 1000:.1f} ms", flush=True)
        if times[-1] > GIVE_UP:
            return False, f"FAIL {name}: {times[-1]:.1f} s for n={size * step}, stopped (limit {GIVE_UP:.0f} s a run)"
    # A shape still under the floor at 64x its base size is fast enough to be judged against the floor.
    growth = times[-1] / max(times[0], FLOOR)
    limit = SLACK * STEPS[-1]
    ok = growth <= limit
    return ok, f"{'ok  ' if ok else 'FAIL'} {name}: x{growth:.1f} for x{STEPS[-1]} input (limit x{limit:.0f})"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=5, help="runs per size; the best is kept")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the base sizes")
    args = parser.parse_args(argv)
    results = []
    for name, shape in _waiver_shapes().items():
        results.append(measure(name, lambda n, shape=shape: _parse(shape(n)), int(20_000 * args.scale), args.runs))
    for name, shape in _shell_shapes().items():
        # Best of three runs at most: the largest size takes seconds (5 shapes x 3 sizes).
        results.append(measure_shell(name, shape, max(1, int(SHELL_BASE * args.scale)), min(args.runs, 3)))
    workdir = Path(tempfile.mkdtemp(prefix="lint-growth-"))
    try:
        # The walk is iterative (no RecursionError) and path-based: each folder costs a lookup of its whole
        # path, so a tree n folders deep costs O(n^2) component lookups, bounded by PATH_MAX (a checkout
        # cannot hold a longer path): judged on the deepest tree there can be, against a fixed budget.
        root = _deep_tree(workdir, DEEPEST)
        config = ScanConfig()
        result = scan_tree(root, config)
        assert len(result.sites) == 1, "the script at the bottom of the deep tree was not scanned"
        took = _time(lambda: scan_tree(root, config), args.runs)
        ok = took <= WALK_BUDGET
        results.append((ok, f"{'ok  ' if ok else 'FAIL'} scan of a tree {DEEPEST} folders deep (PATH_MAX): "
                            f"{took * 1000:.0f} ms (budget {WALK_BUDGET:.0f} s), its one script found"))
    finally:
        subprocess.run(["rm", "-rf", str(workdir)], check=False)  # shutil.rmtree recurses: too deep for it
    print()
    for _, line in results:
        print(line)
    failed = [line for ok, line in results if not ok]
    print(f"\n{len(results) - len(failed)} of {len(results)} shapes grow near-linearly")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
