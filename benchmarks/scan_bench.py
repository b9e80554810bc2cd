"""Time the repository scan on a generated 2,000-file repository (the figure in docs/lint.md).

    .venv/bin/python benchmarks/scan_bench.py              # 2,000 files, 5 runs
    .venv/bin/python benchmarks/scan_bench.py --files 10000 --runs 3

The repository is built in a temporary folder from the scan corpus (fixtures/scan-corpus) and plain files of
the kinds a benchmark repository holds: shell scripts with functions and loops, Python helpers, Dockerfiles,
workflows, requirement files, markdown and JSON results (read by no rule, but walked). Each run is a fresh
`scan_tree` (the walk, the reading, both parsers and every rule), timed end to end; the median and the best
are printed with the sites found, so a change in what is found shows beside a change in time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from patchkit.scan import ScanConfig, scan_tree

CORPUS = Path(__file__).resolve().parent.parent / "fixtures" / "scan-corpus"

SHELL = """#!/usr/bin/env bash
set -euo pipefail
MODEL=${{MODEL:-model-{n}}}
log() {{ local f="/tmp/run-{n}.log"; echo "$*" >> "$f"; }}
for i in $(seq 1 {n}); do
  case "$i" in
    1) log "first";;
    *) [[ -n "$MODEL" ]] && log "run $i";;
  esac
done
python3 bench.py --model "$MODEL" --out "results/{n}.json" 2>&1 | tee "logs/{n}.log"
"""
PYTHON = '''"""Client {n}."""
import json
import os
import subprocess


def run(args):
    return subprocess.run(args, check=True, capture_output=True, text=True)


def main():
    out = os.environ.get("OUT", "results")
    result = run(["python3", "-m", "client", "--id", "{n}"])
    with open(os.path.join(out, "{n}.json"), "w") as fh:
        json.dump({{"stdout": result.stdout}}, fh)


if __name__ == "__main__":
    main()
'''


def build(root: Path, count: int) -> None:
    sources = [p for p in sorted(CORPUS.rglob("*")) if p.is_file() and p.name != "labels.toml"]
    made = 0
    copy = 0
    while made < count:
        folder = root / "benchmarks" / f"suite{made // 100:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        kind = made % 10
        if kind < 2:  # a corpus file, so the scan has real sites to find
            source = sources[copy % len(sources)]
            copy += 1
            target = root / f"copy{copy:04d}" / source.relative_to(CORPUS)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
        elif kind < 5:
            (folder / f"run_{made}.sh").write_text(SHELL.format(n=made))
        elif kind < 8:
            (folder / f"client_{made}.py").write_text(PYTHON.format(n=made))
        elif kind == 8:
            (folder / f"notes_{made}.md").write_text(f"# Run {made}\n\nsed -i is mentioned here, not run.\n" * 5)
        else:
            (folder / f"result_{made}.json").write_text(f'{{"tokens_per_s": {made}}}\n')
        made += 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="scan-bench-") as folder:
        root = Path(folder)
        build(root, args.files)
        files = sum(1 for p in root.rglob("*") if p.is_file())
        times, cpu = [], []
        result = None
        for run in range(args.runs):
            start, start_cpu = time.perf_counter(), time.process_time()
            result = scan_tree(root, ScanConfig())
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
            print(f"run {run + 1}/{args.runs}: {times[-1]:.2f} s ({cpu[-1]:.2f} s CPU)", flush=True)
        assert result is not None
        print(f"{files} files in the tree, {len(result.files)} read, {len(result.sites)} sites: "
              f"median {statistics.median(times):.2f} s, best {min(times):.2f} s; "
              f"CPU median {statistics.median(cpu):.2f} s, best {min(cpu):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
