"""Measure the repository scan on the labelled corpus: recall, precision, and every miss and false positive.

    .venv/bin/python scripts/scan_eval.py                     # fixtures/scan-corpus, a readable report
    .venv/bin/python scripts/scan_eval.py --json              # the figures and lists as JSON
    .venv/bin/python scripts/scan_eval.py --min 0.95          # exit 1 when recall or precision is below 95%

The labels (fixtures/scan-corpus/labels.toml) were written by reading each script by hand: `[[site]]` is a
place that changes the engine or serving stack (file, line, kind, and the engine path a reviewer expects the
site to name), `[[not-site]]` a look-alike that must not be reported. A labelled site counts as found when the
scan reports a site of that kind on that line naming that engine path (as its path, or, for a helper called
with several, among the "also called with" targets of its message); one of the right kind on the right line
naming another path is a miss too ("wrong engine path"). Every reported site that is no labelled site (by file,
line and kind) is a false positive, and so is a reported labelled look-alike.

recall = found labelled sites / labelled sites; precision = reported sites that are labelled sites / reported.

A folder of the corpus with a labels.toml of its own (a held-out batch, e.g. heldout-2026-12/) is a corpus of its
own: it is scanned from its own root (so its `.github/workflows/` is a workflow folder), left out of the parent's
scan, and its figures are added to the whole; `--corpus THAT_FOLDER` measures it alone.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from patchkit.input.tomlcompat import tomllib  # noqa: E402
from patchkit.scan import ScanConfig, scan_tree  # noqa: E402

CORPUS = REPO / "fixtures" / "scan-corpus"


@dataclass
class Evaluation:
    labelled: int = 0
    look_alikes: int = 0
    reported: int = 0
    found: int = 0
    true_reports: int = 0
    misses: list[str] = field(default_factory=list)
    false_positives: list[str] = field(default_factory=list)
    files: int = 0

    @property
    def recall(self) -> float:
        return self.found / self.labelled if self.labelled else 1.0

    @property
    def precision(self) -> float:
        return self.true_reports / self.reported if self.reported else 1.0

    def add(self, part: Evaluation, prefix: str) -> None:
        """Count a sub-corpus's figures into this one, its places named from this corpus's root."""
        self.labelled += part.labelled
        self.look_alikes += part.look_alikes
        self.reported += part.reported
        self.found += part.found
        self.true_reports += part.true_reports
        self.files += part.files
        self.misses += [f"{prefix}/{m}" for m in part.misses]
        self.false_positives += [f"{prefix}/{f}" for f in part.false_positives]


class LabelError(Exception):
    pass


def read_labels(corpus: Path) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    data = tomllib.loads((corpus / "labels.toml").read_text(encoding="utf-8"))
    sites, others = data.get("site", []), data.get("not-site", [])
    for label in [*sites, *others]:
        path = corpus / str(label["file"])
        if not path.is_file():
            raise LabelError(f"labels.toml: {label['file']} does not exist")
        lines = path.read_text(encoding="utf-8").splitlines()
        line = int(str(label["line"]))
        if not 1 <= line <= len(lines) or str(label["text"]) not in lines[line - 1]:
            raise LabelError(f"labels.toml: {label['file']}:{line} does not hold {label['text']!r}: fix the label")
    return sites, others


def sub_corpora(corpus: Path) -> list[Path]:
    """The folders directly below `corpus` that hold a labels.toml of their own."""
    return sorted(p.parent for p in corpus.glob("*/labels.toml") if p.is_file())


def evaluate(corpus: Path = CORPUS) -> Evaluation:
    subs = sub_corpora(corpus)
    report = evaluate_one(corpus, tuple(f"{sub.name}/**" for sub in subs))
    for sub in subs:
        report.add(evaluate(sub), sub.name)
    return report


def evaluate_one(corpus: Path, skip: tuple[str, ...] = ()) -> Evaluation:
    """The figures of one corpus folder, leaving out the sub-corpora `skip` names."""
    sites, others = read_labels(corpus)
    config = ScanConfig()
    result = scan_tree(corpus, replace(config, exclude=config.exclude + skip))
    report = Evaluation(labelled=len(sites), look_alikes=len(others), reported=len(result.sites),
                        files=len(result.files))
    reported = Counter((s.path, s.line, s.kind.label) for s in result.sites)
    by_place: dict[tuple[str, int, str], list[str | None]] = {}
    also: dict[tuple[str, int, str], str] = {}  # "also called with ...": the other targets a message names
    for site in result.sites:
        key = (site.path, site.line, site.kind.label)
        by_place.setdefault(key, []).append(site.engine_path)
        if "also called with " in site.reason:
            also[key] = also.get(key, "") + site.reason.split("also called with ", 1)[1]
    wanted = Counter((str(s["file"]), int(str(s["line"])), str(s["kind"])) for s in sites)
    for label in sites:
        key = (str(label["file"]), int(str(label["line"])), str(label["kind"]))
        engine = label.get("engine")
        shown = by_place.get(key, [])
        place = f"{key[0]}:{key[1]} {key[2]}"
        if engine is None and shown:
            report.found += 1
        elif engine in shown:
            report.found += 1
            shown.remove(engine)
        elif shown and f"{engine} (line " in also.get(key, ""):
            report.found += 1  # the message names it among the other calls' targets
            shown.pop(0)
        elif shown:
            report.misses.append(f"{place}: wrong engine path {shown[0]!r}, expected {engine!r} ({label['text']})")
        else:
            report.misses.append(f"{place}: not reported, expected {engine or 'an unresolved write'} "
                                 f"({label['text']})")
    look_alike = {(str(o["file"]), int(str(o["line"]))): str(o["why"]) for o in others}
    for key, count in sorted(reported.items()):
        true = min(count, wanted.get(key, 0))
        report.true_reports += true
        for _ in range(count - true):
            why = look_alike.get(key[:2])
            engines = ", ".join(str(e) for e in by_place.get(key, [])) or "-"
            note = f"labelled not a site: {why}" if why else "not labelled"
            report.false_positives.append(f"{key[0]}:{key[1]} {key[2]} ({engines}): {note}")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--min", type=float, default=None, help="fail when recall or precision is below this")
    args = parser.parse_args(argv)
    try:
        report = evaluate(args.corpus)
    except LabelError as exc:
        print(f"scan_eval: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({
            "files": report.files, "labelled_sites": report.labelled, "look_alikes": report.look_alikes,
            "reported": report.reported, "found": report.found, "recall": report.recall,
            "precision": report.precision, "misses": report.misses, "false_positives": report.false_positives,
        }, indent=2))
    else:
        print(f"corpus: {report.files} files, {report.labelled} labelled sites, {report.look_alikes} look-alikes")
        print(f"recall:    {report.found}/{report.labelled} = {report.recall:.1%}")
        print(f"precision: {report.true_reports}/{report.reported} = {report.precision:.1%}")
        for miss in report.misses:
            print(f"miss: {miss}")
        for false in report.false_positives:
            print(f"false positive: {false}")
    if args.min is not None and min(report.recall, report.precision) < args.min:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
