"""A patch's life after the first vendor (issue 26): from a lint finding to a registry entry (`new --from-site`),
a patch made from an edited tree (`new --from-tree`), `new` in real use (a first registry, excludes, a kept entry
on failure), patches moved with their waivers (`moved_in`), and what `apply --adopt` says it wrote.

Everything runs through the real CLI on consumer repositories, scripts and engine trees made here; the oracle
for a made diff is real `git apply` on a copy of the pristine tree."""

from __future__ import annotations

import os
import shlex
import shutil
import stat
from pathlib import Path

import pytest

from tests.conftest import cli, git, git_diff, write_tree
from tests.lint_helpers import isolate_env, lint
from tests.schema_check import check


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_env(monkeypatch)


def lines(name: str, count: int) -> bytes:
    return b"".join(b"%s %d\n" % (name.encode(), i) for i in range(1, count + 1))


ENGINE = {"vllm/a.py": lines("a", 30), "vllm/b.py": lines("b", 30)}

WAIVER = """# Waiver {number}: {ids}

## What is patched

{ids} change vllm/a.py and vllm/b.py of the pinned engine; {names} only changed them before.

## Why the unmodified upstream image cannot run

The pinned engine crashes on our cards without it.

## Upstream PR / issue links

A local patch: there is no upstream PR, the fix is specific to our launcher.

## Removal plan

Delete the patches and this waiver when the launcher changes.
"""


def consumer(tmp_path: Path, script: str) -> Path:
    """A consuming repository: configured folders (registry/, docs/waivers/), a script, a pristine engine."""
    root = tmp_path / "consumer"
    write_tree(root, {
        "pyproject.toml": b'[tool.patchkit]\npatches = "registry"\nwaivers = "docs/waivers"\n',
        "docker/patch.sh": script.encode(),
    })
    (root / "docs/waivers").mkdir(parents=True)
    write_tree(tmp_path / "pristine", ENGINE)
    return root


def heredoc_script(*diffs: bytes, quote: str = "'") -> str:
    parts = ["#!/bin/sh", "set -e", 'SITE=$(python3 -c "import site; print(site.getsitepackages()[0])")',
             'cd "$SITE"']
    for diff in diffs:
        parts += [f"patch -p1 <<{quote}EOF{quote}", diff.decode().rstrip("\n"), "EOF"]
    return "\n".join(parts) + "\n"


def site_lines(root: Path, kind: str = "heredoc-diff") -> list[int]:
    """The lines lint reports heredoc diffs at (every site of the scan, covered or not)."""
    report = lint("--format", "json")
    assert report.exit_code in (0, 1), report.stderr
    return [s["line"] for s in report.json()["sites"] if s["kind"] == kind]


def fix_a(tmp_path: Path) -> bytes:
    return git_diff(tmp_path, ENGINE, {"vllm/a.py": ENGINE["vllm/a.py"].replace(b"a 12\n", b"a twelve\n")})


def fix_b(tmp_path: Path) -> bytes:
    return git_diff(tmp_path, ENGINE, {"vllm/b.py": ENGINE["vllm/b.py"].replace(b"b 3\n", b"b three\n")})


# ---------------------------------------------------------------------------------------------- --from-site


def test_from_site_vendors_the_heredoc_lint_found_and_lint_stops_reporting_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    diff = fix_a(tmp_path)
    root = consumer(tmp_path, heredoc_script(diff))
    monkeypatch.chdir(root)
    (root / "registry").mkdir()  # lint refuses a configured registry folder that is not there (a typo)
    (line,) = site_lines(root)  # the place lint reports: the `patch -p1 <<'EOF'` line
    made = cli("new", "vllm-fix", "--target", "vllm", "--local", "only our launcher", "--introduced-by", "31",
               "--from-site", f"docker/patch.sh:{line}", "--base-tree", tmp_path / "pristine")
    assert made.code == 0, made.err
    folder = root / "registry/vllm-fix"
    assert (folder / "vllm-fix.diff").read_bytes() == diff  # the heredoc body, byte for byte
    manifest = (folder / "manifest.toml").read_text()
    assert f'[source]\nkind = "site"\npath = "docker/patch.sh"\nline = {line}\n' in manifest
    assert str(tmp_path) not in manifest  # no machine path recorded
    assert "docs/waivers/<that number>.md" in manifest  # the configured folder, not waivers/
    # What is left to do: excludes, after, the script line, the waiver in the configured folder.
    assert "left to do:" in made.out and "[exclude]" in made.out and "after" in made.out
    assert "write docs/waivers/31.md naming vllm-fix" in made.out
    call = next(w for w in made.out.splitlines() if "replace the diff" in w).rsplit(": ", 1)[1]
    assert call.startswith("patchkit apply vllm-fix --patches ")
    again = made.out.split("(then vendor again: ", 1)[1].split(")\n", 1)[0]
    monkeypatch.chdir(tmp_path)  # printed commands run as printed, from anywhere
    rerun = cli(*shlex.split(again)[1:])
    assert rerun.code == 0 and "already vendored" in rerun.out, rerun.err
    monkeypatch.chdir(root)

    (root / "docs/waivers/31.md").write_text(WAIVER.format(number=31, ids="vllm-fix", names="docker/patch.sh"))
    script = heredoc_script().replace('cd "$SITE"\n', f'{call.replace(str(tmp_path / "pristine"), "$SITE")}\n')
    (root / "docker/patch.sh").write_text(script)
    after = lint("--format", "json")
    assert after.exit_code == 0, after.stdout
    assert [f for f in after.json()["findings"] if f["rule"] == "PK401"] == []
    # The call runs as printed, and applies the vendored diff.
    engine = tmp_path / "pristine"
    applied = cli(*shlex.split(call)[1:])
    assert applied.code == 0, applied.err
    assert b"a twelve\n" in (engine / "vllm/a.py").read_bytes()


def test_from_site_reads_the_file_a_git_apply_line_names_and_a_python_string(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    diff = fix_b(tmp_path)
    script = ("#!/bin/sh\ncd /usr/local/lib/python3.12/dist-packages\ngit apply -p1 patches/fix-b.diff\n"
              "patch -p0 < docker/patches/p0.diff\n")
    root = consumer(tmp_path, script)
    p0 = fix_a(tmp_path).replace(b"--- a/", b"--- ").replace(b"+++ b/", b"+++ ").replace(b" a/vllm", b" vllm").replace(
        b" b/vllm", b" vllm")
    write_tree(root, {"docker/patches/p0.diff": p0})
    write_tree(root, {"docker/patches/fix-b.diff": diff,
                      "tools/fix.py": b'import subprocess\nDIFF = """' + fix_a(tmp_path) + b'"""\n'
                      b'subprocess.run(["patch", "-p1"], input=DIFF.encode(), check=True)\n'})
    monkeypatch.chdir(root)
    made = cli("new", "fix-b", "--target", "vllm", "--local", "r", "--from-site", "docker/patch.sh:3",
               "--base-tree", tmp_path / "pristine")
    assert made.code == 0, made.err
    assert (root / "registry/fix-b/fix-b.diff").read_bytes() == diff
    assert "docker/patches/fix-b.diff (named by docker/patch.sh:3)" in made.out
    made = cli("new", "fix-p0", "--target", "vllm", "--local", "r", "--from-site", "docker/patch.sh:4",
               "--base-tree", tmp_path / "pristine")
    assert made.code == 0, made.err
    assert "strip = 0\n" in (root / "registry/fix-p0/manifest.toml").read_text()  # as the script applies it
    assert cli("status", "fix-p0", "--root", tmp_path / "pristine").code == 3  # unapplied, read with -p0
    made = cli("new", "fix-a", "--target", "vllm", "--local", "r", "--from-site", "tools/fix.py:2",
               "--base-tree", tmp_path / "pristine")
    assert made.code == 0, made.err
    assert (root / "registry/fix-a/fix-a.diff").read_bytes() == fix_a(tmp_path)


def test_from_site_refuses_what_it_cannot_take_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    expanded = fix_a(tmp_path).replace(b"a twelve", b"a $HOME")
    root = consumer(tmp_path, heredoc_script(expanded, quote=""))
    monkeypatch.chdir(root)
    bad = cli("new", "x", "--target", "vllm", "--local", "r", "--from-site", "docker/patch.sh:6")
    assert bad.code == 2 and "no heredoc diff" in bad.err and "5 (heredoc-diff)" in bad.err
    bad = cli("new", "x", "--target", "vllm", "--local", "r", "--from-site", "docker/patch.sh:5")
    assert bad.code == 2 and "unquoted" in bad.err
    bad = cli("new", "x", "--target", "vllm", "--local", "r", "--from-site", "docker/patch.sh")
    assert bad.code == 2 and "FILE:LINE" in bad.err
    assert not (root / "registry").exists()  # refused before anything was written


# ---------------------------------------------------------------------------------------------- --from-tree


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode) & 0o100


def tree_of(root: Path) -> dict[str, tuple[bytes, int]]:
    out = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in (".git", ".patchkit")]
        for name in files:
            path = Path(folder) / name
            out[path.relative_to(root).as_posix()] = (path.read_bytes(), mode_of(path))
    return out


PRISTINE = {
    "pkg/crlf.py": b"one\r\ntwo\r\nthree\r\nfour\r\n",
    "pkg/nonl.py": b"alpha\nbeta\ngamma",
    "pkg/gone.py": lines("gone", 5),
    "pkg/run.sh": (b"#!/bin/sh\necho hi\n", False),
    "pkg/name with space.py": lines("sp", 8),
    "pkg/caf\xc3\xa9 \"q\".py".encode().decode(): lines("odd", 8),
    "pkg/same.py": lines("same", 40),
    "pkg/exec-and-edit.py": (lines("ee", 10), True),
}


def edited_tree(root: Path) -> None:
    write_tree(root, {
        "pkg/crlf.py": b"one\r\nTWO\r\nthree\r\nfour\r\n",
        "pkg/nonl.py": b"alpha\nbeta\ngamma-changed",
        "pkg/gone.py": None,
        "pkg/new/dir/added.py": lines("added", 3),
        "pkg/name with space.py": lines("sp", 8).replace(b"sp 4\n", b"sp four\n"),
        "pkg/caf\xc3\xa9 \"q\".py".encode().decode(): lines("odd", 8) + b"odd tail\n",
        "pkg/exec-and-edit.py": (lines("ee", 10).replace(b"ee 2\n", b"ee two\n"), False),
    })
    (root / "pkg/run.sh").chmod(0o755)  # a mode change only


def test_from_tree_makes_a_diff_git_apply_turns_into_the_edited_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pristine, edited = tmp_path / "pristine", tmp_path / "edited"
    write_tree(pristine, PRISTINE)
    shutil.copytree(pristine, edited)
    edited_tree(edited)
    (pristine / "pkg/__pycache__").mkdir()  # bytecode caches are not compared
    (pristine / "pkg/__pycache__/x.pyc").write_bytes(b"\0\1")
    monkeypatch.chdir(tmp_path)
    made = cli("new", "kv-fix", "--patches", tmp_path / "patches", "--target", "pkg", "--local", "r",
               "--from-tree", edited, "--base-tree", pristine)
    assert made.code == 0, made.err
    diff = tmp_path / "patches/kv-fix/kv-fix.diff"
    # The oracle: real git apply on a copy of the pristine tree gives the edited tree, bytes and modes.
    copy = tmp_path / "copy"
    shutil.copytree(pristine, copy, ignore=shutil.ignore_patterns("__pycache__"))
    git(copy, "init", "-q")
    applied = git(copy, "apply", str(diff), check=False)
    assert applied.returncode == 0, applied.stderr
    shutil.rmtree(copy / ".git")
    assert tree_of(copy) == tree_of(edited)
    # patchkit itself applies it to the same result, and reverts it to the pristine bytes.
    mine = tmp_path / "mine"
    shutil.copytree(pristine, mine, ignore=shutil.ignore_patterns("__pycache__"))
    before = tree_of(mine)
    assert cli("apply", "kv-fix", "--patches", tmp_path / "patches", "--root", mine).code == 0
    assert tree_of(mine) == tree_of(edited)
    assert cli("revert", "kv-fix", "--patches", tmp_path / "patches", "--root", mine).code == 0
    assert tree_of(mine) == before
    text = (tmp_path / "patches/kv-fix/manifest.toml").read_text()
    assert '[source]\nkind = "tree"\npath = "edited"\nbase_tree = "pristine"' in text
    as_json = cli("new", "kv-json", "--patches", tmp_path / "patches", "--target", "pkg", "--local", "r",
                  "--from-tree", edited, "--base-tree", pristine, "--json")
    assert as_json.code == 0, as_json.err
    check(as_json.json(), "new")  # the documented schema, with the new source kinds
    assert as_json.json()["vendored"]["recorded_source"]["kind"] == "tree"


def test_from_tree_refuses_a_binary_file_until_it_is_excluded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pristine, edited = tmp_path / "pristine", tmp_path / "edited"
    write_tree(pristine, {"pkg/a.py": lines("a", 10), "pkg/k.so": b"\x7fELF\0\0\1"})
    shutil.copytree(pristine, edited)
    write_tree(edited, {"pkg/a.py": lines("a", 10).replace(b"a 5\n", b"a five\n"), "pkg/k.so": b"\x7fELF\0\0\2"})
    monkeypatch.chdir(tmp_path)
    args = ["new", "kv", "--patches", tmp_path / "patches", "--target", "pkg", "--local", "r",
            "--from-tree", edited, "--base-tree", pristine]
    refused = cli(*args)
    assert refused.code == 2 and "binary files differ" in refused.err and "pkg/k.so" in refused.err
    assert "--exclude 'pkg/k.so=binary: fetched and checked by our image build'" in refused.err
    assert not (tmp_path / "patches").exists()
    made = cli(*args, "--exclude", "pkg/k.so=binary: fetched and checked by our image build")
    assert made.code == 0, made.err
    assert "excluded by the manifest: pkg/k.so" in made.out
    assert '"pkg/k.so" = "binary: fetched and checked by our image build"' in (
        tmp_path / "patches/kv/manifest.toml").read_text()


# ---------------------------------------------------------------------------------------------- new in use


def test_a_failed_vendor_keeps_the_entry_names_the_hunk_and_the_printed_command_vendors_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    both = git_diff(tmp_path, ENGINE, {"vllm/a.py": ENGINE["vllm/a.py"].replace(b"a 12\n", b"a twelve\n"),
                                       "vllm/b.py": ENGINE["vllm/b.py"].replace(b"b 3\n", b"b three\n")})
    (tmp_path / "both.diff").write_bytes(both)
    engine = tmp_path / "engine"
    write_tree(engine, {**ENGINE, "vllm/b.py": ENGINE["vllm/b.py"].replace(b"b 3\n", b"b three\n")})
    monkeypatch.chdir(tmp_path)
    failed = cli("new", "p", "--patches", tmp_path / "patches", "--target", "vllm", "--local", "r",
                 "--from", "both.diff", "--base-tree", engine)
    assert failed.code == 2
    assert "vllm/b.py hunk 1 @@ -1,6 +1,6 @@: applied (expected line 1" in failed.err  # file and hunk named
    assert (tmp_path / "patches/p/manifest.toml").is_file()  # kept, pending
    command = failed.err.split("vendor it with `", 1)[1].split("`", 1)[0]
    assert command.startswith("patchkit vendor p --patches ")
    manifest = tmp_path / "patches/p/manifest.toml"
    manifest.write_text(manifest.read_text().replace(
        "[exclude]\n", '[exclude]\n"vllm/b.py" = "the image ships it already"\n'))
    monkeypatch.chdir(tmp_path / "patches")  # the command runs as printed from anywhere
    again = cli(*shlex.split(command)[1:])
    assert again.code == 0, again.err
    assert '[source]\nkind = "file"\npath = ' in manifest.read_text()


def test_new_records_excludes_and_hunk_excludes_and_a_project_relative_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    three = {"vllm/a.py": ENGINE["vllm/a.py"].replace(b"a 2\n", b"a two\n").replace(b"a 25\n", b"a 25!\n"),
             "vllm/b.py": ENGINE["vllm/b.py"].replace(b"b 3\n", b"b three\n"), "docs/logo.png": b"PNG\0\1"}
    diff = git_diff(tmp_path, {**ENGINE, "docs/logo.png": b"PNG\0\0"}, three)
    assert b"Binary files" in diff
    root = consumer(tmp_path, "#!/bin/sh\n")
    (root / "patches-in").mkdir()
    (root / "patches-in/x.diff").write_bytes(diff)
    monkeypatch.chdir(root / "docker")
    made = cli("new", "x", "--target", "vllm", "--local", "r", "--from", root / "patches-in/x.diff",
               "--exclude", "docs/logo.png=binary, shipped by the image build",
               "--hunks", "vllm/a.py:2=the pinned image has no line 25", "--base-tree", tmp_path / "pristine")
    assert made.code == 0, made.err
    assert f"created the patches folder {root / 'registry'}" in made.out  # the first entry makes it
    text = (root / "registry/x/manifest.toml").read_text()
    assert '"docs/logo.png" = "binary, shipped by the image build"' in text
    assert '"vllm/a.py" = { hunks = [2], reason = "the pinned image has no line 25" }' in text
    assert 'path = "patches-in/x.diff"' in text  # relative to the project, not /tmp/...
    status = cli("status", "x", "--root", tmp_path / "pristine", "-v")
    assert status.code == 3 and "excluded" in status.out
    bad = cli("new", "y", "--target", "vllm", "--local", "r", "--hunks", "vllm/a.py=why")
    assert bad.code == 2 and "PATH:N,M=REASON" in bad.err
    bad = cli("new", "../y", "--patches", root / "other-registry", "--target", "vllm", "--local", "r")
    assert bad.code == 2 and not (root / "other-registry").exists()  # a bad value makes no registry folder


# ---------------------------------------------------------------------------------------------- moved_in


def moved_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """main: a script with two heredoc diffs and waiver 1200 naming it; branch `move`: both diffs in the
    registry, the script calling patchkit, waiver 1200 naming the new ids."""
    root = consumer(tmp_path, heredoc_script(fix_a(tmp_path), fix_b(tmp_path)))
    (root / "docs/waivers/1200.md").write_text(WAIVER.format(number=1200, ids="the heredocs",
                                                             names="docker/patch.sh"))
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "script")
    git(root, "checkout", "-qb", "move")
    monkeypatch.chdir(root)
    (root / "registry").mkdir()
    for patch_id, line in zip(("fix-a", "fix-b"), site_lines(root), strict=True):
        made = cli("new", patch_id, "--target", "vllm", "--local", "r", "--introduced-by", "1200",
                   "--from-site", f"docker/patch.sh:{line}", "--base-tree", tmp_path / "pristine")
        assert made.code == 0, made.err
    (root / "docker/patch.sh").write_text('#!/bin/sh\npatchkit apply --all --target vllm --root "$SITE"\n')
    (root / "docs/waivers/1200.md").write_text(WAIVER.format(number=1200, ids="fix-a and fix-b",
                                                             names="docker/patch.sh"))
    git(root, "add", "-A")
    git(root, "commit", "-qm", "move")
    return root


def history(*args: str) -> list[dict[str, object]]:
    run = lint("--base", "main", "--format", "json", *args)
    assert run.exit_code in (0, 1), run.stderr
    return [f for f in run.json()["findings"] if str(f["rule"]).startswith("PK3")]


def test_moved_in_keeps_the_original_waiver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = moved_repo(tmp_path, monkeypatch)
    found = history("--pr", "2801")
    assert [f["rule"] for f in found] == ["PK302", "PK302"]
    assert "add moved_in = 2801 under [waiver]" in str(found[0]["message"])
    for patch_id in ("fix-a", "fix-b"):
        manifest = root / f"registry/{patch_id}/manifest.toml"
        manifest.write_text(manifest.read_text().replace("introduced_by = 1200\n",
                                                         "introduced_by = 1200\nmoved_in = 2801\n"))
    git(root, "commit", "-qam", "moved_in")
    assert history("--pr", "2801") == []
    assert lint().exit_code == 0
    wrong = history("--pr", "2802")
    assert [f["rule"] for f in wrong] == ["PK302", "PK302"] and "set moved_in = 2802" in str(wrong[0]["message"])
    # A "move" whose waiver is not on the base is an introduction in disguise.
    manifest = root / "registry/fix-a/manifest.toml"
    manifest.write_text(manifest.read_text().replace("introduced_by = 1200", "introduced_by = 1300"))
    (root / "docs/waivers/1300.md").write_text(WAIVER.format(number=1300, ids="fix-a", names="fix-a"))
    git(root, "add", "-A")
    git(root, "commit", "-qm", "fake move")
    (moved,) = [f for f in history("--pr", "2801") if f["rule"] == "PK304"]
    assert "docs/waivers/1300.md is added by this range" in str(moved["message"])


# ---------------------------------------------------------------------------------------------- adopt


def test_adopt_says_it_wrote_the_records(tmp_path: Path) -> None:
    registry = tmp_path / "patches"
    write_tree(tmp_path / "pristine", ENGINE)
    (tmp_path / "a.diff").write_bytes(fix_a(tmp_path))
    (tmp_path / "b.diff").write_bytes(fix_b(tmp_path))
    for patch_id in ("fix-a", "fix-b"):
        made = cli("new", patch_id, "--patches", registry, "--target", "vllm", "--local", "r",
                   "--from", tmp_path / f"{patch_id[-1]}.diff", "--base-tree", tmp_path / "pristine")
        assert made.code == 0, made.err
    engine = tmp_path / "engine"
    shutil.copytree(tmp_path / "pristine", engine)
    for name in ("a.diff", "b.diff"):  # the old script's way
        git(engine, "init", "-q")
        git(engine, "apply", str(tmp_path / name))
        shutil.rmtree(engine / ".git")
    adopted = cli("apply", "--all", "--adopt", "--patches", registry, "--root", engine)
    assert adopted.code == 0, adopted.err
    assert "no record" not in adopted.out and "records it" not in adopted.out
    assert adopted.out.count("adopted: the tree has it") == 2
    assert "series: adopted 2 patches (2 records written, engine untouched)" in adopted.out
    again = cli("apply", "--all", "--adopt", "--patches", registry, "--root", engine)
    assert "all 2 patches are already applied (nothing written)" in again.out


# ---------------------------------------------------------------------------------------------- the README walk


README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


def test_the_readme_walk_moves_a_script_onto_the_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """README, "Moving off a hand-written script", step by step on a consumer repository made here."""
    section = README.split("### Moving off a hand-written script", 1)[1].split("\n## ", 1)[0]
    for words in ("--from-site docker/patch.sh:5", "--from-site docker/patch.sh:20", "--moved-in 2801",
                  "--from-tree /tmp/edited --base-tree /pristine/dist-packages", "lint --base origin/main --pr 2801",
                  "apply --all --adopt"):
        assert words in section, words
    kv, launcher = fix_a(tmp_path), fix_b(tmp_path)
    root = consumer(tmp_path, heredoc_script(kv, launcher))
    pristine = tmp_path / "pristine"
    write_tree(pristine, {"vllm/c.py": lines("c", 12)})
    waiver = WAIVER.format(number=1200, ids="the heredocs of docker/patch.sh", names="docker/patch.sh")
    (root / "docs/waivers/1200.md").write_text(waiver)
    (root / "registry").mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "the old script")
    git(root, "checkout", "-qb", "pr-2801")
    monkeypatch.chdir(root)
    # 1. the sites lint reports
    assert site_lines(root) == [5, 20]
    # 2. one entry per site
    for args in (("vllm-kv", "--repo", "vllm-project/vllm", "--pr", "101", "--from-site", "docker/patch.sh:5"),
                 ("launcher-fix", "--local", "only our launcher needs it", "--from-site", "docker/patch.sh:20")):
        made = cli("new", args[0], "--target", "vllm", *args[1:], "--introduced-by", "1200", "--moved-in", "2801",
                   "--base-tree", pristine)
        assert made.code == 0, made.err
        assert "docs/waivers/1200.md stays the waiver (moved_in = 2801)" in made.out
    assert (root / "registry/vllm-kv/vllm-kv.diff").read_bytes() == kv
    assert (root / "registry/launcher-fix/launcher-fix.diff").read_bytes() == launcher
    # 3. a fix made by hand on a copy of the pristine tree
    edited = tmp_path / "edited"
    shutil.copytree(pristine, edited)
    write_tree(edited, {"vllm/c.py": lines("c", 12).replace(b"c 6\n", b"c six\n")})
    made = cli("new", "launcher-tune", "--target", "vllm", "--local", "tuned for our cards", "--introduced-by",
               "2801", "--from-tree", edited, "--base-tree", pristine)
    assert made.code == 0, made.err
    # 4. the script calls patchkit; the waivers name the ids
    (root / "docker/patch.sh").write_text('#!/bin/sh\npatchkit apply --all --target vllm --root "$SITE"\n')
    (root / "docs/waivers/1200.md").write_text(
        waiver.replace("## Upstream PR / issue links\n", "## Upstream PR / issue links\n\nvllm-kv is "
                       "vllm-project/vllm#101; launcher-fix is local.\n").replace("the heredocs of", "vllm-kv "
                       "and launcher-fix, moved from"))
    (root / "docs/waivers/2801.md").write_text(WAIVER.format(number=2801, ids="launcher-tune", names="vllm/c.py"))
    git(root, "add", "-A")
    git(root, "commit", "-qm", "move the heredocs into the registry")
    checked = lint("--base", "main", "--pr", "2801", "--format", "json")
    assert checked.exit_code == 0, checked.stdout
    assert [f["rule"] for f in checked.json()["findings"]] == []
    # 5. an image the old script patched: adopt records it, the engine is not written
    engine = tmp_path / "image"
    shutil.copytree(pristine, engine)
    for diff in (kv, launcher):
        git(engine, "init", "-q")
        git(engine, "apply", "-", input=diff)
        shutil.rmtree(engine / ".git")
    write_tree(engine, {"vllm/c.py": (edited / "vllm/c.py").read_bytes()})
    before = tree_of(engine)
    adopted = cli("apply", "--all", "--adopt", "--target", "vllm", "--root", engine)
    assert adopted.code == 0, adopted.err
    assert "series: adopted 3 patches (3 records written, engine untouched)" in adopted.out
    assert tree_of(engine) == before
    assert cli("revert", "--all", "--target", "vllm", "--root", engine).code == 0
    assert tree_of(engine) == tree_of(pristine)
