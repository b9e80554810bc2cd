"""Which pull request a CI build is for, read from the environment the common CI services set.

Used by history mode to check that a newly added patch names the pull request that adds it. Values that do not
look like a PR number (e.g. "false" on a branch build) are ignored, not errors: the build is then simply not a
pull-request build.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PullRequest:
    number: int
    source: str  # where the number came from, for messages: "--pr", "GITHUB_REF", ...


def _plain(value: str) -> int | None:
    return int(value) if re.fullmatch(r"[1-9][0-9]*", value.strip()) else None


def _github_ref(value: str) -> int | None:
    match = re.fullmatch(r"refs/pull/([1-9][0-9]*)/(?:merge|head)", value.strip())
    return int(match.group(1)) if match else None


def _pull_url(value: str) -> int | None:
    match = re.search(r"/pull/([1-9][0-9]*)/?$", value.strip())
    return int(match.group(1)) if match else None


def _github_event(value: str) -> int | None:
    # pull_request and pull_request_target events; on pull_request_target GITHUB_REF is the base branch.
    try:
        event = json.loads(Path(value).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    pull = event.get("pull_request") if isinstance(event, dict) else None
    number = pull.get("number") if isinstance(pull, dict) else None
    return number if isinstance(number, int) and not isinstance(number, bool) and number > 0 else None


# Checked in order; the first variable that yields a number wins.
_SOURCES: tuple[tuple[str, Callable[[str], int | None]], ...] = (
    ("GITHUB_EVENT_PATH", _github_event),  # GitHub Actions
    ("GITHUB_REF", _github_ref),  # GitHub Actions, pull_request event
    ("CI_MERGE_REQUEST_IID", _plain),  # GitLab merge request pipelines
    ("BUILDKITE_PULL_REQUEST", _plain),  # Buildkite ("false" otherwise)
    ("SYSTEM_PULLREQUEST_PULLREQUESTNUMBER", _plain),  # Azure Pipelines, GitHub repositories
    ("SYSTEM_PULLREQUEST_PULLREQUESTID", _plain),  # Azure Pipelines, Azure Repos
    ("CIRCLE_PULL_REQUEST", _pull_url),  # CircleCI
    ("CIRCLE_PR_NUMBER", _plain),  # CircleCI, forked PRs
    ("TRAVIS_PULL_REQUEST", _plain),  # Travis CI ("false" otherwise)
    ("BITBUCKET_PR_ID", _plain),  # Bitbucket Pipelines
    ("CHANGE_ID", _plain),  # Jenkins multibranch pipelines
    ("DRONE_PULL_REQUEST", _plain),  # Drone
    ("APPVEYOR_PULL_REQUEST_NUMBER", _plain),  # AppVeyor
)

ENV_VARIABLES = tuple(name for name, _ in _SOURCES)


def find_pull_request(env: Mapping[str, str]) -> PullRequest | None:
    """The pull request this build runs for, or None on a branch build or outside CI."""
    for name, parse in _SOURCES:
        value = env.get(name)
        number = parse(value) if value else None
        if number is not None:
            return PullRequest(number, name)
    return None
