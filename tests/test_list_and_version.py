"""`list --target / --pending` and `--version` / `-V`, through the real CLI."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from tests.conftest import Registry, cli, git_diff
from tests.output_helpers import REPO, cli_env, command, run_plain
from tests.schema_check import SCHEMA

# version_sensitive: `patchkit version` names the interpreter and where patchkit is installed.
pytestmark = pytest.mark.version_sensitive


def _three(tmp_path: Path, registry: Registry) -> None:
    registry.add("a-one", git_diff(tmp_path, {"a": b"1\n"}, {"a": b"2\n"}))
    registry.add("b-two", git_diff(tmp_path, {"b": b"1\n"}, {"b": b"2\n"}))
    manifest = registry.path / "b-two" / "manifest.toml"
    manifest.write_text(manifest.read_text().replace('name = "engine"', 'name = "aiter"'))
    registry.add("c-three", git_diff(tmp_path, {"c": b"1\n"}, {"c": b"2\n"}))
    (registry.path / "c-three" / "change.diff").unlink()  # pending: no diff, no sha256
    manifest = registry.path / "c-three" / "manifest.toml"
    manifest.write_text("\n".join(x for x in manifest.read_text().splitlines() if not x.startswith("sha256")))


def _ids(res_out: str) -> list[str]:
    return [line.split(":")[0] for line in res_out.splitlines()]


def test_list_filters_by_target_and_pending(tmp_path: Path, registry: Registry) -> None:
    _three(tmp_path, registry)
    assert _ids(cli("list", "--patches", registry.path).out) == ["a-one", "b-two", "c-three"]
    assert _ids(cli("list", "--target", "engine", "--patches", registry.path).out) == ["a-one", "c-three"]
    assert _ids(cli("list", "--target", "aiter,engine", "--patches", registry.path).out) == ["a-one", "b-two",
                                                                                             "c-three"]
    assert _ids(cli("list", "--pending", "--patches", registry.path).out) == ["c-three"]
    both = cli("list", "--pending", "--target", "aiter", "--patches", registry.path)
    assert both.code == 0 and both.out == ""
    assert both.err.strip() == (f"patchkit: note: no pending patch for target aiter in the registry {registry.path}: "
                                "every entry is vendored")
    as_json = cli("list", "--pending", "--json", "--patches", registry.path).json()
    assert [p["patch"] for p in as_json["patches"]] == ["c-three"] and as_json["patches"][0]["pending"] is True


def test_list_of_an_unknown_target_is_bad_input(tmp_path: Path, registry: Registry) -> None:
    _three(tmp_path, registry)
    res = cli("list", "--target", "aitr", "--patches", registry.path)
    assert res.code == 2 and res.out == ""
    assert res.err.splitlines() == [
        f"patchkit: error: {registry.path}: no patch in the registry has [target] name = 'aitr'",
        "  hint: targets in this registry: aiter, engine",
    ]


def test_list_ignores_the_hooks_target_variable(tmp_path: Path, registry: Registry) -> None:
    _three(tmp_path, registry)
    res = run_plain(command("list", "--patches", registry.path), cli_env(PATCHKIT_TARGET="aiter"))
    assert _ids(res.out) == ["a-one", "b-two", "c-three"]


def test_version_says_the_python_and_where_patchkit_is_installed() -> None:
    for flag in ("--version", "-V"):
        res = run_plain(command(flag), cli_env())
        assert res.code == 0
        lines = res.out.splitlines()
        assert lines[0].startswith("patchkit, version ")
        assert lines[1].startswith(f"Python {platform.python_version()} (")
        assert lines[2] == f"installed in {REPO / 'patchkit'}"


@pytest.mark.parametrize("name", ["show", "doctor", "list", "lint"])
def test_the_new_commands_and_options_have_help_within_80_columns_with_examples(name: str) -> None:
    out = run_plain(command(name, "--help"), {**cli_env(), "COLUMNS": "80"}).out
    assert out and max(len(line) for line in out.splitlines()) <= 80, out
    assert "Examples:" in out and f"patchkit {name}" in out.split("Examples:")[1]


def test_output_md_names_the_keys_of_show_and_doctor() -> None:
    output = (REPO / "docs" / "output.md").read_text(encoding="utf-8")
    for definition in ("show", "doctor"):
        assert f"(`$defs/{definition}`)" in output
        for key in SCHEMA["$defs"][definition]["properties"]:
            assert f"`{key}`" in output, (definition, key)
