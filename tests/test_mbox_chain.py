"""Issue 26: a forge's `.patch` (a multi-commit mbox) saved as the registry's diff, sha256 pinned.

A chain of commits that changes a file more than once is refused at load (exit 2), before any tree is
judged, with the `patchkit vendor` command that turns it into its net diff; that command, pasted into a
shell in another folder, vendors it, after which `apply` gives exactly what `git am` gives (the oracle:
real git, never patchkit). The mbox is built in the test by real git: lines added then removed in one
file, a file created then modified, a file changed and changed back, a rename in a later commit.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import Registry, cli, git, read_tree, write_tree
from tests.output_helpers import Run


def lines(name: str, count: int) -> bytes:
    return b"".join(b"%s %d\n" % (name.encode(), i) for i in range(1, count + 1))


A, B, OLD = lines("a", 60), lines("b", 20), lines("o", 20)
BASE = {"pkg/a.py": A, "pkg/b.py": B, "pkg/old.py": OLD}
EXTRA = b"".join(b"    scratch %d\n" % i for i in range(30))


def commit(repo: Path, files: dict[str, bytes | None], message: str) -> None:
    write_tree(repo, files)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)


def make_mbox(tmp_path: Path) -> tuple[bytes, int]:
    """`git format-patch --stdout` of six commits on BASE, as a forge's pull/N.patch serves them."""
    repo = tmp_path / "upstream"
    repo.mkdir()
    git(repo, "init", "-q")
    commit(repo, BASE, "base")
    a1 = A.replace(b"a 5\n", b"a five\n").replace(b"a 30\n", b"a 30\n" + EXTRA)
    commit(repo, {"pkg/a.py": a1, "pkg/b.py": B.replace(b"b 3\n", b"b three\n")}, "1: a adds 30 lines, b 3")
    commit(repo, {"pkg/new.py": lines("n", 12)}, "2: create new.py")
    commit(repo, {"pkg/new.py": lines("n", 12).replace(b"n 4\n", b"n four\n")}, "3: modify new.py")
    git(repo, "mv", "pkg/old.py", "pkg/renamed.py")
    commit(repo, {"pkg/renamed.py": OLD.replace(b"o 9\n", b"o nine\n")}, "4: rename old.py")
    commit(repo, {"pkg/a.py": A.replace(b"a 5\n", b"a five\n"), "pkg/b.py": B}, "5: a drops the 30, b back")
    commit(repo, {"pkg/new.py": lines("n", 12).replace(b"n 4\n", b"n four\n") + b"n 13\n"}, "6: new.py grows")
    return git(repo, "format-patch", "--stdout", "HEAD~6..HEAD").stdout, 6


def git_am(tmp_path: Path, mbox: bytes) -> dict[str, tuple[bytes, bool]]:
    """The oracle: the tree `git am` makes of the mbox on the pristine base."""
    repo = tmp_path / "am"
    repo.mkdir()
    git(repo, "init", "-q")
    commit(repo, BASE, "base")
    git(repo, "am", "-q", input=mbox)
    return read_tree(repo)




def paste(hint: str, env: dict[str, str], cwd: Path) -> Run:
    done = subprocess.run(["/bin/sh", "-c", hint], env=env, cwd=cwd, capture_output=True, check=False,
                          timeout=120, stdin=subprocess.DEVNULL)
    return Run(done.returncode, done.stdout.decode(), done.stderr.decode())


def vendor_hint(text: str) -> str:
    found = re.findall(r"`(patchkit vendor [^`]+)`", text)
    assert len(found) == 1, text
    return found[0]


def test_a_pinned_mbox_chain_is_refused_at_load_with_the_vendor_command_that_makes_it_work(
    tmp_path: Path, registry: Registry, engine: Path, shim: dict[str, str]
) -> None:
    mbox, commits = make_mbox(tmp_path)
    registry.add("p", mbox)  # saved as it is, its sha256 pinned by hand
    write_tree(engine, BASE)
    pristine = read_tree(engine)
    want = git_am(tmp_path, mbox)
    assert want != pristine and "pkg/renamed.py" in want and "pkg/old.py" not in want

    for args in (("status", "p"), ("status", "p", "-v"), ("apply", "p"), ("apply", "p", "--complete"),
                 ("revert", "p"), ("apply", "p", "--dry-run"), ("status", "--all"), ("apply", "--all"), ("port", "p")):
        run = cli(*args, "--root", engine, "--patches", registry.path)
        assert run.code == 2, (args, run.out, run.err)
        assert "by hand" not in run.out + run.err and "ambiguous" not in run.out + run.err
        assert f"change.diff is an mbox of {commits} commits" in run.err, run.err
        assert "pkg/a.py" in run.err and "net diff" in run.err
        assert f"{registry.path / 'p' / 'change.diff'}:" in run.err  # the file and the line
        assert read_tree(engine) == pristine
    assert not (engine / ".patchkit" / "applied").exists()
    as_json = cli("status", "p", "--root", engine, "--patches", registry.path, "--json")
    assert as_json.code == 2 and as_json.json()["exit_code"] == 2
    assert "patchkit vendor p" in as_json.json()["hint"]

    # Run from the folder above with relative paths: the printed command is absolute and quoted.
    refused = subprocess.run(
        [sys.executable, "-m", "patchkit", "status", "p", "--root", "engine", "--patches", "patches"],
        cwd=tmp_path, env=shim, capture_output=True, text=True, check=False,
    )
    assert refused.returncode == 2, refused.stderr
    hint = vendor_hint(refused.stderr)
    assert hint == (f"patchkit vendor p --patches {registry.path} --from {registry.path / 'p' / 'change.diff'} "
                    f"--base-tree {engine}")
    elsewhere = tmp_path / "somewhere" / "else"
    elsewhere.mkdir(parents=True)
    done = paste(hint, shim, elsewhere)
    assert done.code == 0, done.err
    assert f"net diff of {commits} commits" in done.out and "kept as change.diff.mbox" in done.out
    assert (registry.path / "p" / "change.diff.mbox").read_bytes() == mbox  # nothing the user had is lost
    assert b"From " not in (registry.path / "p" / "change.diff").read_bytes()[:5]
    assert read_tree(engine) == pristine  # vendor never writes the tree

    assert cli("status", "p", "--root", engine, "--patches", registry.path).code == 3
    applied = cli("apply", "p", "--root", engine, "--patches", registry.path)
    assert applied.code == 0, applied.err
    assert read_tree(engine) == want  # exactly what git am gives
    assert cli("status", "p", "--root", engine, "--patches", registry.path).code == 0
    assert cli("apply", "p", "--root", engine, "--patches", registry.path).code == 0  # a rerun: no-op
    assert read_tree(engine) == want
    assert cli("revert", "p", "--root", engine, "--patches", registry.path).code == 0
    assert read_tree(engine) == pristine

    # The tree `git am` patched reads as applied (outside patchkit), never as something to fix by hand.
    am_tree = cli("status", "p", "--root", tmp_path / "am", "--patches", registry.path)
    assert am_tree.code == 0 and "applied outside patchkit" in am_tree.out, am_tree.out

    # [source] names the kept mbox: vendoring from it again changes nothing.
    kept = registry.path / "p" / "change.diff.mbox"
    again = paste(hint.replace("change.diff ", "change.diff.mbox "), shim, elsewhere)
    assert f"--from {kept} " in hint.replace("change.diff ", "change.diff.mbox ")
    assert again.code == 0 and "already vendored" in again.out, again.out + again.err


def test_the_kept_mbox_never_overwrites_another_file(tmp_path: Path, registry: Registry, engine: Path) -> None:
    mbox, _ = make_mbox(tmp_path)
    folder = registry.add("p", mbox)
    write_tree(engine, BASE)
    (folder / "change.diff.mbox").write_bytes(b"my notes\n")
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    run = cli("vendor", "p", "--patches", registry.path, "--from", folder / "change.diff", "--base-tree", engine)
    assert run.code == 2 and "change.diff.mbox is already there" in run.err, run.err
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before  # nothing written


def test_an_mbox_whose_commits_touch_distinct_files_still_loads(
    tmp_path: Path, registry: Registry, engine: Path
) -> None:
    repo = tmp_path / "upstream"
    repo.mkdir()
    git(repo, "init", "-q")
    commit(repo, BASE, "base")
    commit(repo, {"pkg/a.py": A.replace(b"a 5\n", b"a five\n")}, "one")
    commit(repo, {"pkg/b.py": B.replace(b"b 5\n", b"b five\n")}, "two")
    mbox = git(repo, "format-patch", "--stdout", "HEAD~2..HEAD").stdout
    registry.add("p", mbox)
    write_tree(engine, BASE)
    assert cli("status", "p", "--root", engine, "--patches", registry.path).code == 3
    assert cli("apply", "p", "--root", engine, "--patches", registry.path).code == 0
    assert read_tree(engine) == read_tree(repo)
