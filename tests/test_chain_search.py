"""scripts/chain_search.py, the triage's search of random chains (docs/testing.md, the full runs of 2026-12-06).

It runs as printed in its docstring, reports its progress, and on today's code finds no chain whose judgement
changes without the round trip's way back (the claim state.py:279's listed equivalent rests on). It fails if the
way back comes to matter, or if the script stops cutting it (its count of round-trip failures must be seen)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "chain_search.py"


WAY_BACK = "for forward, (after, again) in ends.items():"


def test_the_search_runs_reports_and_finds_no_chain_that_needs_the_way_back() -> None:
    state = (Path(__file__).resolve().parent.parent / "patchkit" / "judge" / "state.py").read_text()
    if state.count(WAY_BACK) != 1:  # a mutant of that very line (listed equivalent on this search), or an edit
        pytest.skip(f"state.py holds {WAY_BACK!r} {state.count(WAY_BACK)} times: nothing to cut")
    run = subprocess.run([sys.executable, str(SCRIPT), "--seed", "2", "--count", "300"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    last = run.stdout.strip().splitlines()[-1]
    found = re.fullmatch(r"300 chains, (\d+) trees: (\d+) judged otherwise by the mutant; "
                         r"round trips failed: \{(.*)\}", last)
    assert found, run.stdout
    trees, differ, failed = int(found[1]), int(found[2]), found[3]
    assert trees > 900 and differ == 0, run.stdout
    assert "'after reverting it in memory, section 1': " in failed, run.stdout  # the chains do fail round trips
