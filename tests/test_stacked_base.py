"""A patch stacked on another's result: its [base] fingerprint and --strict-base judge the tree as the
patches before it leave it; a file missing under the root is called missing, not drifted."""

from __future__ import annotations

import hashlib
from pathlib import Path

from patchkit.input.manifest import load_manifest
from tests.conftest import Registry, cli, git_diff, read_tree, write_tree


def numbered(name: str, count: int) -> bytes:
    return b"".join(b"%s line %d\n" % (name.encode(), i) for i in range(1, count + 1))


BASE = {"eng/core.py": numbered("core", 30), "eng/side.py": numbered("side", 30)}
WITH_A = {**BASE, "eng/core.py": BASE["eng/core.py"].replace(b"core line 10\n", b"core line 10, by A\n")}
WITH_AB = {
    **WITH_A,
    "eng/core.py": WITH_A["eng/core.py"].replace(b"core line 10, by A\n", b"core line 10, by A then B\n"),
    "eng/side.py": BASE["eng/side.py"].replace(b"side line 4\n", b"side line 4, by B\n"),
}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _registry(tmp_path: Path, registry: Registry) -> None:
    registry.add("a", git_diff(tmp_path, BASE, WITH_A))
    registry.add("b", git_diff(tmp_path, WITH_A, WITH_AB), extra='after = ["a"]')


def test_vendor_base_tree_of_a_stacked_patch(tmp_path: Path, registry: Registry, engine: Path) -> None:
    _registry(tmp_path, registry)
    write_tree(engine, BASE)
    for pid in ("a", "b"):
        result = cli("vendor", pid, "--patches", registry.path, "--from", registry.path / pid / "change.diff",
                     "--base-tree", engine, "--json")
        assert result.code == 0, result.err
    # b reads core.py as a leaves it, and side.py as the pristine tree has it.
    assert dict(load_manifest(registry.path / "b").base_files) == {
        "eng/core.py": sha(WITH_A["eng/core.py"]), "eng/side.py": sha(BASE["eng/side.py"]),
    }
    pristine = read_tree(engine)
    assert read_tree(engine) == pristine  # vendor never writes to the base tree
    status = cli("status", "--all", "--strict-base", "--root", engine, "--patches", registry.path, "--json")
    assert status.code == 3, status.out  # unapplied, and not 9: the base is verifiably pinned
    assert [p["base"]["state"] for p in status.json()["patches"]] == ["pinned", "pinned"]
    assert cli("apply", "--all", "--strict-base", "--root", engine, "--patches", registry.path).code == 0
    assert read_tree(engine) == {p: (d, False) for p, d in WITH_AB.items()}
    status = cli("status", "--all", "--strict-base", "--root", engine, "--patches", registry.path, "--json")
    assert status.code == 0 and [p["base"]["state"] for p in status.json()["patches"]] == ["pinned", "pinned"]
    assert cli("revert", "--all", "--root", engine, "--patches", registry.path).code == 0
    assert read_tree(engine) == pristine


def test_a_drifted_base_under_a_stacked_patch_is_still_drifted(
    tmp_path: Path, registry: Registry, engine: Path
) -> None:
    _registry(tmp_path, registry)
    write_tree(engine, BASE)
    for pid in ("a", "b"):
        cli("vendor", pid, "--patches", registry.path, "--from", registry.path / pid / "change.diff",
            "--base-tree", engine)
    (engine / "eng/side.py").write_bytes(BASE["eng/side.py"].replace(b"side line 20\n", b"side line 20 new\n"))
    result = cli("apply", "--all", "--strict-base", "--root", engine, "--patches", registry.path, "--json")
    assert result.code == 9
    assert {p["patch"]: p["base"]["state"] for p in result.json()["patches"]} == {"a": "pinned", "b": "drifted"}
    assert (engine / "eng/core.py").read_bytes() == BASE["eng/core.py"]


def test_vendor_of_a_stacked_patch_refuses_a_base_tree_with_the_lower_patch_applied(
    tmp_path: Path, registry: Registry, engine: Path
) -> None:
    _registry(tmp_path, registry)
    write_tree(engine, WITH_A)
    result = cli("vendor", "b", "--patches", registry.path, "--from", registry.path / "b" / "change.diff",
                 "--base-tree", engine)
    assert result.code == 2 and "reads as applied for a" in result.err


def test_a_missing_file_says_not_found_under_the_root(tmp_path: Path, registry: Registry, engine: Path) -> None:
    registry.add("a", git_diff(tmp_path, BASE, WITH_A), extra='prefix = "site/"')
    write_tree(engine, {"eng/core.py": BASE["eng/core.py"]})  # the prefix is wrong for this tree
    for action in ("apply", "status"):
        result = cli(action, "a", "--root", engine, "--patches", registry.path)
        assert result.code in (1, 5), result.out
        assert "site/eng/core.py not found under the root" in result.out
        assert "check --root / the prefix" in result.out
        assert "drift" not in result.out and "retire" not in result.out
    result = cli("apply", "--all", "--root", engine, "--patches", registry.path)
    assert "not found under the root" in result.out and "retire" not in result.out
