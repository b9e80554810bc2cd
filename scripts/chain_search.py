"""Search random chains (one file touched two or three times in one diff) for judgements a state.py mutant changes.

The full mutation run's triage (docs/testing.md) asks of a surviving mutant of the chains' code whether any input
tells it apart. This generates them the way the world makes them: a small file of repeated lines, edited two or
three times (a line replaced, put in, taken out; now and then an edit taken back), each step diffed by difflib
with 0 to 3 lines of context and the steps concatenated; each version and two drifted copies are the trees. Every
tree is judged by patchkit.judge.state as it is and with the chain's round trip cut short (no way back), and
the script counts the judgements that differ, and the round-trip failures by the section they name.

    .venv/bin/python scripts/chain_search.py --seed 7 --count 20000   # progress every 500 chains

A triage tool, not a test: it imports the code it searches (a test's oracle must not).
"""

from __future__ import annotations

import argparse
import difflib
import itertools
import random
import re
from collections import Counter
from collections.abc import Mapping, Sequence

import patchkit.judge.state as state
from patchkit.diff.diffs import parse_diff
from patchkit.diff.hunks import FilePatch
from patchkit.errors import PatchkitError
from patchkit.input.reads import Snapshot
from patchkit.judge.verdicts import FileVerdict
from patchkit.outcome import PatchState


def no_way_back(chain: Sequence[FilePatch], snapshots: Mapping[str, Snapshot], verdicts: Sequence[FileVerdict],
                st: PatchState) -> str | None:
    """state._chain_round_trip without its way back (state.py:279's ZeroIterationForLoop)."""
    directions = {PatchState.UNAPPLIED: [True], PatchState.APPLIED: [False], PatchState.PARTIAL: [True, False]}[st]
    for forward in directions:
        moved = state._move_chain(chain, verdicts, snapshots, forward=forward)
        if isinstance(moved, str):
            return moved
    return None


def unified(old: list[str], new: list[str], context: int) -> str:
    lines = difflib.unified_diff(old, new, "a/f.py", "b/f.py", n=context)
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def edited(lines: list[str], rng: random.Random, pool: list[str]) -> list[str]:
    out, kind = list(lines), rng.randrange(3)
    at = rng.randrange(len(out) + (kind == 1))
    if kind == 0 and out:
        out[at % len(out)] = rng.choice(pool)
    elif kind == 1:
        out.insert(at, rng.choice(pool))
    elif len(out) > 2:
        del out[at % len(out)]
    return out


def judged(files: Sequence[FilePatch], tree: str) -> list[tuple[PatchState, str | None]]:
    verdicts = state.judge_sections(files, {"f.py": Snapshot("f.py", tree.encode(), 0o644)})
    return [(v.state, v.detail) for v in verdicts]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--longest", type=int, default=15, help="lines of the first version, at most")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    failures: Counter[str] = Counter()
    trees = differ = 0
    for n in range(1, args.count + 1):
        pool = ["a\n", "b\n", "c\n", "x\n"] + [f"u{rng.randrange(50)}\n" for _ in range(3)]
        versions = [[rng.choice(pool) for _ in range(rng.randrange(3, args.longest + 1))]]
        for _ in range(rng.randrange(2, 4)):
            step = edited(versions[-1], rng, pool)
            if rng.random() < 0.3:
                step = edited(step, rng, pool)
            if rng.random() < 0.15 and len(versions) > 1:
                step = list(versions[-2])  # a change taken back
            versions.append(step)
        context = rng.choice([0, 1, 2, 3])
        steps = [unified(a, b, context) for a, b in itertools.pairwise(versions)]
        if not all(steps):
            continue
        try:
            files = parse_diff("".join(steps).encode(), 1, "search").files
        except PatchkitError:
            continue
        for lines in [*versions, edited(rng.choice(versions), rng, pool), edited(rng.choice(versions), rng, pool)]:
            tree = "".join(lines)
            whole = judged(files, tree)
            full_round_trip = state._chain_round_trip
            state._chain_round_trip = no_way_back  # type: ignore[assignment]
            try:
                cut = judged(files, tree)
            finally:
                state._chain_round_trip = full_round_trip
            trees += 1
            details = " ".join(d for _, d in whole if d)
            failures.update(re.findall(r"after \w+ it in memory, section \d+|in memory stops|there and back", details))
            if whole != cut:
                differ += 1
                print(f"DIFFERS without the way back: {steps!r} on {tree!r}: {whole} / {cut}")
        if n % 500 == 0 or n == args.count:
            print(f"{n} chains, {trees} trees: {differ} judged otherwise without the way back; "
                  f"round trips failed: {dict(failures)}", flush=True)


if __name__ == "__main__":
    main()
