"""Forge formats through `patchkit vendor`: a real multi-commit `git format-patch` mbox (one file changed and
changed back, one changed twice) becomes the net diff of the range; a -U0 diff is refused."""

from __future__ import annotations

from pathlib import Path

from patchkit.diff.mbox import count_mbox_commits
from patchkit.input.manifest import load_manifest
from tests.conftest import Registry, cli, git, read_tree, write_tree


def lines(name: str, count: int) -> bytes:
    return b"".join(b"%s %d\n" % (name.encode(), i) for i in range(1, count + 1))


BASE = {"pkg/a.py": lines("a", 30), "pkg/b.py": lines("b", 30), "pkg/c.py": lines("c", 30)}


def _commit(repo: Path, files: dict[str, bytes], message: str) -> None:
    write_tree(repo, files)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)


def upstream(tmp_path: Path) -> tuple[Path, bytes]:
    """An upstream clone with four commits on top of BASE, and `git format-patch --stdout` of them."""
    repo = tmp_path / "upstream"
    repo.mkdir()
    git(repo, "init", "-q")
    _commit(repo, BASE, "base")
    a, b = BASE["pkg/a.py"], BASE["pkg/b.py"]
    _commit(repo, {"pkg/a.py": a.replace(b"a 10\n", b"a ten\n")}, "a: try ten")
    _commit(repo, {"pkg/b.py": b.replace(b"b 5\n", b"b five\n")}, "b: five")
    _commit(repo, {"pkg/a.py": a}, "a: back to 10")  # changed and changed back
    _commit(repo, {"pkg/b.py": b.replace(b"b 5\n", b"b five\n").replace(b"b 6\n", b"b six\n")}, "b: six")
    return repo, git(repo, "format-patch", "--stdout", "HEAD~4..HEAD").stdout


def test_a_multi_commit_mbox_is_detected_and_refused_without_a_base(
    tmp_path: Path, registry: Registry, engine: Path
) -> None:
    _, mbox = upstream(tmp_path)
    assert count_mbox_commits(mbox) == 4
    (tmp_path / "range.patch").write_bytes(mbox)
    registry.add("p", b"placeholder\n")
    (registry.path / "p" / "change.diff").unlink()
    result = cli("vendor", "p", "--patches", registry.path, "--from", tmp_path / "range.patch")
    assert result.code == 2
    assert "mbox of 4 commits" in result.err and "pkg/a.py" in result.err
    assert "--base-tree" in result.err and "--from-git" in result.err
    assert not (registry.path / "p" / "change.diff").exists()


def test_the_net_diff_of_an_mbox_round_trips(tmp_path: Path, registry: Registry, engine: Path) -> None:
    repo, mbox = upstream(tmp_path)
    (tmp_path / "range.patch").write_bytes(mbox)
    registry.add("p", b"placeholder\n")
    (registry.path / "p" / "change.diff").unlink()
    write_tree(engine, BASE)
    pristine = read_tree(engine)
    result = cli("vendor", "p", "--patches", registry.path, "--from", tmp_path / "range.patch",
                 "--base-tree", engine, "--json")
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["files"] == 1  # a.py cancelled out; b.py's two commits are one section
    assert doc["recorded_source"] == {"kind": "mbox", "path": "range.patch", "net_of_commits": 4}  # beside the registry
    spec = load_manifest(registry.path / "p")
    assert spec.source is not None and spec.source.kind == "mbox"
    assert read_tree(engine) == pristine

    assert cli("status", "p", "--root", engine, "--patches", registry.path).code == 3  # unapplied
    assert cli("apply", "p", "--root", engine, "--patches", registry.path).code == 0
    want = {p: git(repo, "show", f"HEAD:{p}").stdout for p in BASE}
    assert {p: d for p, (d, _) in read_tree(engine).items()} == want
    assert cli("status", "p", "--root", engine, "--patches", registry.path).code == 0
    assert cli("revert", "p", "--root", engine, "--patches", registry.path).code == 0
    assert read_tree(engine) == pristine

    # The same range exported by git itself gives the same filtered hunk set.
    registry.add("q", b"placeholder\n")
    (registry.path / "q" / "change.diff").unlink()
    from_git = cli("vendor", "q", "--patches", registry.path, "--from-git", repo, "--range", "HEAD~4..HEAD",
                   "--json")
    assert from_git.code == 0, from_git.err
    assert from_git.json()["hunk_set_sha256"] == doc["hunk_set_sha256"]


def test_an_mbox_that_does_not_replay_on_the_base_is_refused(
    tmp_path: Path, registry: Registry, engine: Path
) -> None:
    _, mbox = upstream(tmp_path)
    (tmp_path / "range.patch").write_bytes(mbox)
    registry.add("p", b"placeholder\n")
    (registry.path / "p" / "change.diff").unlink()
    write_tree(engine, {**BASE, "pkg/b.py": BASE["pkg/b.py"].replace(b"b 5\n", b"b 5 local\n")})
    result = cli("vendor", "p", "--patches", registry.path, "--from", tmp_path / "range.patch",
                 "--base-tree", engine)
    assert result.code == 2 and "do not replay cleanly" in result.err and "range.patch:" in result.err


def test_a_single_commit_mbox_vendors_as_it_is(tmp_path: Path, registry: Registry, engine: Path) -> None:
    repo, _ = upstream(tmp_path)
    one = git(repo, "format-patch", "--stdout", "-1", "HEAD~2").stdout
    (tmp_path / "one.patch").write_bytes(one)
    registry.add("p", b"placeholder\n")
    (registry.path / "p" / "change.diff").unlink()
    result = cli("vendor", "p", "--patches", registry.path, "--from", tmp_path / "one.patch", "--json")
    assert result.code == 0, result.err
    assert (registry.path / "p" / "change.diff").read_bytes() == one


def test_a_zero_context_diff_is_refused_at_vendor_time(tmp_path: Path, registry: Registry) -> None:
    repo, _ = upstream(tmp_path)
    u0 = git(repo, "diff", "-U0", "HEAD~4", "HEAD").stdout
    assert b"@@ -5,2 +5,2 @@" in u0 or b"@@ -5" in u0
    (tmp_path / "u0.diff").write_bytes(u0)
    registry.add("p", b"placeholder\n")
    (registry.path / "p" / "change.diff").unlink()
    result = cli("vendor", "p", "--patches", registry.path, "--from", tmp_path / "u0.diff")
    assert result.code == 2
    assert "has no context lines" in result.err and "cannot be located safely" in result.err
    assert "without -U0" in result.err and "u0.diff:" in result.err
    assert not (registry.path / "p" / "change.diff").exists()
    # The same change with context vendors.
    (tmp_path / "u3.diff").write_bytes(git(repo, "diff", "HEAD~4", "HEAD").stdout)
    assert cli("vendor", "p", "--patches", registry.path, "--from", tmp_path / "u3.diff").code == 0


def test_the_diffs_own_gitattributes_cannot_steer_the_net_diff(
    tmp_path: Path, registry: Registry, engine: Path
) -> None:
    # The range adds a .gitattributes marking everything binary: it must not make the net diff a binary one.
    repo = tmp_path / "upstream"
    repo.mkdir()
    git(repo, "init", "-q")
    w = lines("w", 20)
    _commit(repo, {"pkg/w.py": w}, "base")
    _commit(repo, {"pkg/w.py": w.replace(b"w 5\n", b"w five\n"), ".gitattributes": b"* -diff\n"}, "one")
    final = w.replace(b"w 5\n", b"w five\n").replace(b"w 6\n", b"w six\n")
    _commit(repo, {"pkg/w.py": final}, "two")
    mbox = git(repo, "format-patch", "--stdout", "--text", "HEAD~2..HEAD").stdout
    (tmp_path / "w.patch").write_bytes(mbox)
    registry.add("p", b"placeholder\n")
    (registry.path / "p" / "change.diff").unlink()
    write_tree(engine, {"pkg/w.py": w})
    result = cli("vendor", "p", "--patches", registry.path, "--from", tmp_path / "w.patch", "--base-tree", engine)
    assert result.code == 0, result.err
    assert cli("apply", "p", "--root", engine, "--patches", registry.path).code == 0
    assert (engine / "pkg/w.py").read_bytes() == final
    assert (engine / ".gitattributes").read_bytes() == b"* -diff\n"
