"""Rewrite tests/slow_tests.txt from a timed run: every test function whose setup, call and teardown took
at least THRESHOLD seconds in all (its parametrizations together) is `slow`, and `pytest -m "not slow"` skips it.

    .venv/bin/pytest -q -p no:cacheprovider --durations=0 > durations.log
    .venv/bin/python scripts/slow_tests.py durations.log [--threshold 0.3]

The list is data, read by tests/conftest.py; a test missing from it is fast until the next rewrite.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

LIST = Path(__file__).resolve().parent.parent / "tests" / "slow_tests.txt"
_DURATION = re.compile(r"^([\d.]+)s (?:call|setup|teardown)\s+(tests/\S+?)(?:\[.*\])?$")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path, help="the output of pytest --durations=0")
    parser.add_argument("--threshold", type=float, default=0.3, help="seconds (default 0.3)")
    args = parser.parse_args(argv)
    spent: Counter[str] = Counter()
    for line in args.log.read_text(encoding="utf-8").splitlines():
        found = _DURATION.match(line.strip())
        if found:
            spent[found.group(2)] += float(found.group(1))
    if not spent:
        parser.error(f"{args.log} holds no durations: run pytest with --durations=0")
    slow = sorted(test for test, seconds in spent.items() if seconds >= args.threshold)
    total, kept = sum(spent.values()), sum(spent[t] for t in slow)
    LIST.write_text("".join(f"{test}\n" for test in slow), encoding="utf-8")
    print(f"{len(slow)} of {len(spent)} test functions are slow: {kept:.0f} s of {total:.0f} s; "
          f"the rest, {total - kept:.0f} s, is `pytest -m \"not slow\"` (written to {LIST})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
