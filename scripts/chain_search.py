"""Search random diffs for a judgement that a mutant of patchkit/judge/state.py changes.

The full mutation run's triage (docs/testing.md) asks of a surviving mutant whether any input tells it apart.
This generates inputs the way the world makes them: a small file of repeated lines, edited two or three times (a
line replaced, put in, taken out; now and then an edit taken back), each step diffed by difflib with 0 to 3
lines of context; the steps concatenated make a chain (one file touched two or three times in one diff), or
`--single` diffs the first version against the last (one section, its hunks near each other). Each version and
two drifted copies are the trees. Every tree is judged by patchkit.judge.state, and by a copy of it with one line
changed (`--replace LINE OLD NEW`, the mutant as the run's diff shows it); the script counts the judgements
that differ, and the round trips that fail by the section they name.

    .venv/bin/python scripts/chain_search.py --seed 7 --count 20000   # the way back cut (state.py:279)
    .venv/bin/python scripts/chain_search.py --single --replace 455 continue break   # progress every 500

A triage tool, not a test: it imports the code it searches (a test's oracle must not).
"""

from __future__ import annotations

import argparse
import difflib
import itertools
import random
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import patchkit.judge.state as state
from patchkit.diff.diffs import parse_diff
from patchkit.diff.hunks import FilePatch
from patchkit.errors import PatchkitError
from patchkit.input.reads import Snapshot
from patchkit.outcome import PatchState

# state._chain_round_trip's way back, cut: its loop over the ends reached, found by its text (LINE 0)
WAY_BACK = ("0", "for forward, (after, again) in ends.items():", "for forward, (after, again) in []:")


def mutant(line: int, old: str, new: str) -> ModuleType:
    """A copy of patchkit.judge.state with `old` replaced by `new` on `line` (which must hold it; 0: the one
    line that holds it)."""
    source = Path(state.__file__).read_text().splitlines(keepends=True)
    if line == 0:
        holding = [n for n, text in enumerate(source, 1) if old in text]
        if len(holding) != 1:
            raise SystemExit(f"{len(holding)} lines of state.py hold {old!r}: give the line")
        line = holding[0]
    if old not in source[line - 1]:
        raise SystemExit(f"state.py:{line} does not hold {old!r}: {source[line - 1]!r}")
    source[line - 1] = source[line - 1].replace(old, new, 1)
    module = ModuleType("patchkit.judge.state_mutant")
    module.__file__ = state.__file__
    exec(compile("".join(source), f"{state.__file__} (mutant)", "exec"), module.__dict__)
    return module


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


def judged(judge: ModuleType, files: Sequence[FilePatch], tree: str) -> list[tuple[PatchState, str | None]]:
    verdicts = judge.judge_sections(files, {"f.py": Snapshot("f.py", tree.encode(), 0o644)})
    return [(v.state, v.detail) for v in verdicts]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--longest", type=int, default=15, help="lines of the first version, at most")
    parser.add_argument("--edits", type=int, default=3, help="edit steps after the first version, at most (2 at least)")
    parser.add_argument("--single", action="store_true", help="one section: the first version to the last")
    parser.add_argument("--replace", nargs=3, metavar=("LINE", "OLD", "NEW"), default=WAY_BACK,
                        help="the mutant: OLD replaced by NEW on state.py's LINE, or on the one line that holds it "
                             "(LINE 0; default: the way back cut)")
    args = parser.parse_args()
    changed = mutant(int(args.replace[0]), args.replace[1], args.replace[2])
    rng = random.Random(args.seed)
    failures: Counter[str] = Counter()
    trees = differ = 0
    for n in range(1, args.count + 1):
        pool = ["a\n", "b\n", "c\n", "x\n"] + [f"u{rng.randrange(50)}\n" for _ in range(3)]
        versions = [[rng.choice(pool) for _ in range(rng.randrange(3, args.longest + 1))]]
        for _ in range(rng.randrange(2, max(args.edits, 2) + 1)):
            step = edited(versions[-1], rng, pool)
            if rng.random() < 0.3:
                step = edited(step, rng, pool)
            if rng.random() < 0.15 and len(versions) > 1:
                step = list(versions[-2])  # a change taken back
            versions.append(step)
        context = rng.choice([0, 1, 2, 3])
        pairs = [(versions[0], versions[-1])] if args.single else list(itertools.pairwise(versions))
        steps = [unified(a, b, context) for a, b in pairs]
        if not all(steps):
            continue
        try:
            files = parse_diff("".join(steps).encode(), 1, "search").files
        except PatchkitError:
            continue
        for lines in [*versions, edited(rng.choice(versions), rng, pool), edited(rng.choice(versions), rng, pool)]:
            tree = "".join(lines)
            whole = judged(state, files, tree)
            cut = judged(changed, files, tree)
            trees += 1
            details = " ".join(d for _, d in whole if d)
            failures.update(re.findall(r"after \w+ it in memory, section \d+|in memory stops|there and back", details))
            if whole != cut:
                differ += 1
                print(f"DIFFERS: {steps!r} on {tree!r}: {whole} / {cut}")
        if n % 500 == 0 or n == args.count:
            print(f"{n} chains, {trees} trees: {differ} judged otherwise by the mutant; "
                  f"round trips failed: {dict(failures)}", flush=True)


if __name__ == "__main__":
    main()
