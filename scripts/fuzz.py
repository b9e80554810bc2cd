"""A longer, randomised run of the fuzz targets in tests/test_fuzz.py (CI runs them bounded and derandomized).

    python scripts/fuzz.py                    # 5000 examples per target, a fresh random seed
    python scripts/fuzz.py --examples 50000 --seed 7

Prints, per target, how many inputs were tried and how many were accepted (a diff that parsed, and so
was also judged and planned on a real tree; a manifest that loaded). On the first input that raises anything
but a PatchkitError it stops with hypothesis's report: that input, shrunk, and its traceback (exit 1).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from tests import test_fuzz


def _counting(check: Callable[..., bool], counts: dict[str, int]) -> Callable[[Any], None]:
    def run(sample: Any) -> None:
        counts["tried"] += 1
        counts["accepted"] += check(*sample) if isinstance(sample, tuple) else check(sample)

    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)
    targets: list[tuple[str, st.SearchStrategy[Any], Callable[..., bool]]] = [
        ("random bytes -> diff", st.binary(max_size=4000), test_fuzz.check_diff),
        ("mutated git diffs", test_fuzz.mutated_diffs(), test_fuzz.check_diff),
        ("random bytes -> manifest", st.binary(max_size=1000), test_fuzz.check_manifest),
        ("random manifest documents", test_fuzz.manifest_documents(), test_fuzz.check_manifest),
        ("mutated manifests", test_fuzz.mutated_manifests(), test_fuzz.check_manifest),
    ]
    for name, strategy, check in targets:
        counts = {"tried": 0, "accepted": 0}
        test: Callable[[], None] = settings(
            max_examples=args.examples, deadline=None, database=None,
            suppress_health_check=list(HealthCheck),
        )(given(strategy)(_counting(check, counts)))
        if args.seed is not None:
            test = seed(args.seed)(test)
        started = time.monotonic()
        test()
        print(f"{name}: {counts['tried']} inputs, {counts['accepted']} accepted (parsed or loaded), "
              f"no unexpected exception ({time.monotonic() - started:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
