"""Reading the pull request number from the CI environment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchkit.lint.ci import ENV_VARIABLES, PullRequest, find_pull_request


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"GITHUB_REF": "refs/pull/2816/merge"}, PullRequest(2816, "GITHUB_REF")),
        ({"GITHUB_REF": "refs/heads/main"}, None),
        ({"CI_MERGE_REQUEST_IID": "42"}, PullRequest(42, "CI_MERGE_REQUEST_IID")),
        ({"BUILDKITE_PULL_REQUEST": "false"}, None),
        ({"BUILDKITE_PULL_REQUEST": "77"}, PullRequest(77, "BUILDKITE_PULL_REQUEST")),
        ({"TRAVIS_PULL_REQUEST": "false"}, None),
        ({"CIRCLE_PULL_REQUEST": "https://github.com/o/r/pull/9"}, PullRequest(9, "CIRCLE_PULL_REQUEST")),
        ({"SYSTEM_PULLREQUEST_PULLREQUESTNUMBER": "12"}, PullRequest(12, "SYSTEM_PULLREQUEST_PULLREQUESTNUMBER")),
        ({"CHANGE_ID": "0"}, None),
        ({}, None),
    ],
)
def test_pull_request_from_environment(env: dict[str, str], expected: PullRequest | None) -> None:
    assert find_pull_request(env) == expected


def test_github_event_file_wins_and_covers_pull_request_target(tmp_path: Path) -> None:
    # On pull_request_target GITHUB_REF names the base branch; the event payload still has the number.
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 2816}}))
    env = {"GITHUB_EVENT_PATH": str(event), "GITHUB_REF": "refs/heads/main"}
    assert find_pull_request(env) == PullRequest(2816, "GITHUB_EVENT_PATH")


def test_push_event_file_falls_through(tmp_path: Path) -> None:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"ref": "refs/heads/main"}))
    assert find_pull_request({"GITHUB_EVENT_PATH": str(event), "CI_MERGE_REQUEST_IID": "5"}) == PullRequest(
        5, "CI_MERGE_REQUEST_IID"
    )


def test_unreadable_event_file_is_ignored(tmp_path: Path) -> None:
    assert find_pull_request({"GITHUB_EVENT_PATH": str(tmp_path / "missing.json")}) is None


def test_every_variable_is_documented() -> None:
    docs = (Path(__file__).resolve().parent.parent / "docs" / "lint.md").read_text()
    assert [name for name in ENV_VARIABLES if name not in docs] == []
