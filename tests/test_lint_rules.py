"""Rule helpers with sharp edges: what counts as citing an upstream PR or naming a patch."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchkit.input.manifest import Upstream
from patchkit.lint.rules import cites_upstream
from tests.lint_helpers import copy_scenario, findings, isolate_env, lint_scenario

ATOM = Upstream("ROCm/ATOM", 2106, "https://github.com/ROCm/ATOM/pull/2106", None)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_env(monkeypatch)


@pytest.mark.parametrize(
    ("text", "cited"),
    [
        ("see https://github.com/ROCm/ATOM/pull/2106", True),
        ("see https://github.com/rocm/atom/pull/2106/files", True),
        ("see ROCm/ATOM#2106.", True),
        ("tracked in https://github.com/ROCm/ATOM/issues/2106", True),
        ("see https://github.com/ROCm/ATOM/pull/21060", False),
        ("see ROCm/ATOM#21", False),
        ("see PR 2106", False),  # which repository?
        ("see Other/ATOM#2106", False),
        ("see NotROCm/ATOM#2106", False),
    ],
)
def test_cites_upstream(text: str, cited: bool) -> None:
    assert cites_upstream(text, ATOM) is cited


def test_custom_upstream_url_counts() -> None:
    gitlab = Upstream("group/engine", 12, "https://gitlab.example.com/group/engine/-/merge_requests/12", None)
    assert cites_upstream("see https://gitlab.example.com/group/engine/-/merge_requests/12.", gitlab)
    assert not cites_upstream("see https://gitlab.example.com/group/engine/-/merge_requests/123", gitlab)


def test_a_longer_id_does_not_name_the_patch(tmp_path: Path) -> None:
    root = copy_scenario("clean", tmp_path)
    waiver = root / "waivers" / "7001.md"
    waiver.write_text(waiver.read_text().replace("enginex-pr512", "enginex-pr512-v2"))
    (unnamed,) = findings(lint_scenario(root, "--format", "json"), "PK207")
    assert "enginex-pr512;" in unnamed["message"]


def test_an_exclude_named_only_as_a_longer_path_is_not_named(tmp_path: Path) -> None:
    root = copy_scenario("clean", tmp_path)
    waiver = root / "waivers" / "7001.md"
    waiver.write_text(waiver.read_text().replace("enginex/attn/registry.py", "enginex/attn/registry.pyc"))
    assert [f["rule"] for f in lint_scenario(root, "--format", "json").json()["findings"]] == ["PK208"]
