"""The scan measured on the labelled corpus (fixtures/scan-corpus): recall of at least 98%, precision of 95%.

The labels were written by reading each script by hand; scripts/scan_eval.py compares them with what the scan
reports. The figures are in docs/lint.md ("Measured on a labelled corpus").
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from patchkit.input.tomlcompat import tomllib
from patchkit.scan.sites import SiteKind

# version_sensitive: the scan's ast (Python) and tree-sitter (shell) readings, per version.
pytestmark = pytest.mark.version_sensitive

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "fixtures" / "scan-corpus"
EVAL = REPO / "scripts" / "scan_eval.py"


def evaluate(corpus: Path = CORPUS) -> dict[str, object]:
    done = subprocess.run([sys.executable, str(EVAL), "--json", "--corpus", str(corpus)], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_recall_is_at_least_98_and_precision_95_percent_on_the_whole_corpus() -> None:
    result = evaluate()
    report = "\n".join(map(str, [*result["misses"], *result["false_positives"]]))  # type: ignore[misc]
    assert result["recall"] >= 0.98, report  # type: ignore[operator]
    assert result["precision"] >= 0.95, report  # type: ignore[operator]


def test_the_held_out_batches_count_in_the_whole_corpus() -> None:
    """A folder with its own labels.toml (heldout-2026-12/, ...) is measured from its own root and added."""
    whole = evaluate()
    counted = 0
    for labels in [CORPUS / "labels.toml", *sorted(CORPUS.glob("*/labels.toml"))]:
        counted += len(tomllib.loads(labels.read_text(encoding="utf-8")).get("site", []))
    assert len(list(CORPUS.glob("*/labels.toml"))) >= 2
    assert whole["labelled_sites"] == counted
    held_out = evaluate(CORPUS / "heldout-2026-12")
    assert held_out["labelled_sites"] == 51 and held_out["found"] == 51  # its workflow and Makefile are read


def test_the_corpus_is_large_enough_and_has_every_site_kind() -> None:
    labels = tomllib.loads((CORPUS / "labels.toml").read_text(encoding="utf-8"))
    assert len(labels["site"]) >= 150 and len(labels["not-site"]) >= 50
    kinds = {label["kind"] for label in labels["site"]}
    assert kinds == {kind.label for kind in SiteKind}


def test_the_measure_sees_a_miss_and_a_false_positive(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(CORPUS, corpus)
    script = corpus / "benchmarks" / "vllm" / "extra.sh"
    script.write_text("#!/bin/sh\nsed -i s/a/b/ /opt/vllm/vllm/config.py\necho nothing to see\n")
    labels = corpus / "labels.toml"
    labels.write_text(labels.read_text() + '\n[[site]]\nfile = "benchmarks/vllm/extra.sh"\nline = 3\n'
                      'kind = "file-write"\nengine = "/opt/vllm/vllm/x.py"\ntext = "echo nothing"\n')
    result = evaluate(corpus)
    assert any("extra.sh:3 file-write: not reported" in m for m in result["misses"])  # type: ignore[union-attr]
    assert any("extra.sh:2 in-place-edit" in f for f in result["false_positives"])  # type: ignore[union-attr]
    assert result["recall"] < 1 and result["precision"] < 1  # type: ignore[operator]
    # A label whose line no longer holds its text is bad input, not a silent miss.
    labels.write_text(labels.read_text().replace('text = "echo nothing"', 'text = "moved away"'))
    done = subprocess.run([sys.executable, str(EVAL), "--corpus", str(corpus)], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 2 and "extra.sh:3 does not hold 'moved away'" in done.stderr


def test_the_corpus_stays_out_of_this_repositorys_own_scan() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["patchkit"]
    assert "fixtures/**" in project["scan-exclude"]
