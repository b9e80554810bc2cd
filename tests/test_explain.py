"""`patchkit lint --explain RULE` (as `ruff rule`): every rule of docs/lint.md's table explained as the table
says it, an unknown one with a did-you-mean and exit 2, and nothing linted."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import cli

LINT_MD = Path(__file__).resolve().parent.parent / "docs" / "lint.md"
TABLE = {
    m.group(1): (m.group(2), m.group(3).strip())
    for m in re.finditer(r"^\| (PK\d{3}) \| (error|warning) \| (.+) \|$", LINT_MD.read_text(encoding="utf-8"), re.M)
}


def test_the_docs_table_lists_rules() -> None:
    assert len(TABLE) >= 20 and "PK204" in TABLE


@pytest.mark.parametrize("code", sorted(TABLE))
def test_every_rule_is_explained_as_the_docs_table_says(code: str, tmp_path: Path) -> None:
    severity, text = TABLE[code]
    res = cli("lint", "--explain", code.lower(), "--patches", tmp_path / "nowhere")  # lints nothing: no registry
    assert res.code == 0, res.err
    lines = res.out.splitlines()
    assert lines[0].startswith(f"{code}: ")
    at = next(i for i, line in enumerate(lines) if line.startswith("severity: "))  # after the wrapped summary
    assert lines[at].startswith(f"severity: {severity}: ")
    assert ("--strict" in lines[at]) == (severity == "warning")
    assert " ".join(" ".join(lines[at + 2:-2]).split()) == " ".join(text.split())
    assert lines[-1] == 'All rules, waivers and the baseline: docs/lint.md ("Rules").'
    assert max(len(line) for line in lines) <= 80


def test_an_unknown_rule_gets_did_you_mean_and_exit_2() -> None:
    res = cli("lint", "--explain", "PK2O4")
    assert res.code == 2 and res.out == ""
    assert res.err.splitlines()[0] == "patchkit: error: no lint rule 'PK2O4'; did you mean PK204?"
    assert "hint: `patchkit lint --explain PK204`; the rules are PK101..PK105, PK201..PK211" in res.err
    far = cli("lint", "--explain", "nonsense")
    assert far.code == 2 and "did you mean" not in far.err and "PK401..PK405" in far.err
    hinted = re.search(r"`(patchkit lint --explain \w+)`", res.err)
    assert hinted is not None and cli(*hinted.group(1).split()[1:]).code == 0


@pytest.mark.parametrize("code", ["PK999", "PK500", "PK601"])
def test_a_code_out_of_every_family_suggests_no_other_rule(code: str) -> None:
    res = cli("lint", "--explain", code)
    assert res.code == 2 and res.out == ""
    assert res.err.splitlines()[0] == f"patchkit: error: no lint rule {code!r}"  # PK999 is no typo of PK209
    assert "`patchkit lint --explain" not in res.err and "the rules are PK101..PK105" in res.err
