"""Moving off a hand-written script: a tree the script already patched reads "applied outside patchkit" (not
"the image ships it, retire"), `apply --adopt` records it without writing the engine, and after the last
revert no patch record is left in the engine tree."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Registry, cli, git, git_diff, read_tree, write_tree


def lines(name: str, count: int) -> bytes:
    return b"".join(b"%s %d\n" % (name.encode(), i) for i in range(1, count + 1))


BASE = {"vllm/a.py": lines("a", 30), "aiter/b.py": lines("b", 30)}
FIXED = {"vllm/a.py": BASE["vllm/a.py"].replace(b"a 12\n", b"a twelve\n"),
         "aiter/b.py": BASE["aiter/b.py"].replace(b"b 3\n", b"b three\n")}


def test_a_script_patched_tree_reads_applied_outside_patchkit(
    tmp_path: Path, registry: Registry, engine: Path
) -> None:
    diff = git_diff(tmp_path, BASE, FIXED)
    registry.add("p", diff)
    write_tree(engine, BASE)
    git(engine, "init", "-q")  # git apply needs a work tree to apply at its root
    git(engine, "apply", "-", input=diff)
    (engine / ".git").rename(tmp_path / "moved-git")  # the engine image is a plain tree
    patched = read_tree(engine)

    status = cli("status", "p", "--root", engine, "--patches", registry.path, "--json")
    assert status.code == 0
    assert status.json()["provenance"]["origin"] == "applied-outside-patchkit"
    assert status.json()["provenance"]["can_retire"] is False
    text = cli("status", "p", "--root", engine, "--patches", registry.path).out
    assert "applied outside patchkit" in text and "--adopt" in text
    assert "retire" not in text and "upstream-contains" not in text

    refused = cli("revert", "p", "--root", engine, "--patches", registry.path)
    assert refused.code == 1 and f"`patchkit apply p --patches {registry.path} --root {engine} --adopt`" in refused.out
    assert read_tree(engine) == patched

    dry = cli("apply", "p", "--root", engine, "--patches", registry.path, "--adopt", "--dry-run")
    assert dry.code == 0 and not (engine / ".patchkit/applied/p.json").exists()
    adopted = cli("apply", "p", "--root", engine, "--patches", registry.path, "--adopt", "--json")
    assert (adopted.code, adopted.json()["result"]) == (0, "adopted")
    assert read_tree(engine) == patched  # the engine is not written
    assert sorted(p.name for p in (engine / ".patchkit/applied").iterdir()) == ["p.diff", "p.files", "p.json"]
    status = cli("status", "p", "--root", engine, "--patches", registry.path, "--json")
    assert status.json()["provenance"]["origin"] == "this-version"
    again = cli("apply", "p", "--root", engine, "--patches", registry.path, "--adopt", "--json")
    assert again.json()["result"] == "already-applied"

    assert cli("revert", "p", "--root", engine, "--patches", registry.path).code == 0
    assert read_tree(engine) == {p: (d, False) for p, d in BASE.items()}
    # No state is left: the lock file stays (unlinking a lock others may be waiting on would let two
    # processes hold "the" lock at once), with the .gitignore that keeps .patchkit out of a checkout.
    left = sorted(str(p.relative_to(engine)) for p in (engine / ".patchkit").rglob("*"))
    assert set(left) <= {".patchkit/lock", ".patchkit/.gitignore"}, left


def test_adopt_all_records_every_script_patch_in_one_transaction(
    tmp_path: Path, registry: Registry, engine: Path
) -> None:
    one = git_diff(tmp_path, BASE, {"vllm/a.py": FIXED["vllm/a.py"]})
    two = git_diff(tmp_path, BASE, {"aiter/b.py": FIXED["aiter/b.py"]})
    registry.add("one", one)
    registry.add("two", two)
    write_tree(engine, {**BASE, "vllm/a.py": FIXED["vllm/a.py"]})  # the script got only one of them in
    result = cli("apply", "--all", "--adopt", "--root", engine, "--patches", registry.path, "--json")
    assert result.code == 0, result.out
    assert {p["patch"]: p["result"] for p in result.json()["patches"]} == {"one": "adopted", "two": "applied"}
    assert read_tree(engine) == {p: (d, False) for p, d in FIXED.items()}
    assert cli("status", "--all", "--root", engine, "--patches", registry.path).code == 0
    assert cli("revert", "--all", "--root", engine, "--patches", registry.path).code == 0
    assert read_tree(engine) == {p: (d, False) for p, d in BASE.items()}
    assert not list((engine / ".patchkit").glob("applied/*"))
