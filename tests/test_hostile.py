"""Hostile or broken input through the real CLI: a clear error naming the file (and line), exit 2, no write.

Each case runs `apply` and `status` on a tree next to an `outside/` folder that a successful attack would
change; both trees are compared byte for byte afterwards. scripts/safety_report.py reuses HOSTILE.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from patchkit.errors import UnsafePathError
from tests.conftest import git_diff
from tests.rooted import read_snapshot
from tests.safety_helpers import PATCH_ID, add_patch, exec_bits, image, run_forked, warm_up, write_files

H = b"@@ -1 +1 @@\n-x = 1\n+x = 2\n"
TREE = {"engine/x.py": (b"x = 1\n", 0o644), "engine/y.py": (b"y = 1\n", 0o644)}


@dataclass(frozen=True)
class Hostile:
    name: str
    diff: bytes
    expect: str  # a fragment of the error message
    line: int | None = None  # the diff line the error must point at (None: a file, not a diff line, is named)
    strip: int = 1
    setup: Callable[[Path, Path, Path], None] | None = None  # (root, outside, patch folder) -> None
    names: str = "diff"  # what the error must name: "diff", "manifest" or "link"


def _link_dir(root: Path, outside: Path, folder: Path) -> None:
    (root / "engine" / "linkdir").symlink_to(outside)


def _link_file(root: Path, outside: Path, folder: Path) -> None:
    os.unlink(root / "engine" / "y.py")
    (root / "engine" / "y.py").symlink_to(outside / "y.py")


def _relative_link_dir(root: Path, outside: Path, folder: Path) -> None:
    (root / "engine" / "up").symlink_to(Path("..") / ".." / "outside")


def _manifest(edit: Callable[[str], str]) -> Callable[[Path, Path, Path], None]:
    def setup(root: Path, outside: Path, folder: Path) -> None:
        path = folder / "manifest.toml"
        path.write_text(edit(path.read_text(encoding="utf-8")), encoding="utf-8")

    return setup


def _diff_symlink_outside(root: Path, outside: Path, folder: Path) -> None:
    evil = b"--- a/engine/x.py\n+++ b/engine/x.py\n" + H
    (outside / "evil.diff").write_bytes(evil)
    (folder / "change.diff").unlink()
    (folder / "change.diff").symlink_to(outside / "evil.diff")
    _manifest(lambda t: _with_sha(t, hashlib.sha256(evil).hexdigest()))(root, outside, folder)


def _with_sha(text: str, digest: str) -> str:
    return re.sub(r'sha256 = "[0-9a-f]{64}"', f'sha256 = "{digest}"', text)


def _huge_diff(root: Path, outside: Path, folder: Path) -> None:
    os.truncate(folder / "change.diff", (64 << 20) + 1)  # sparse: refused by its size, before it is read


def _header(path: bytes) -> bytes:
    return b"--- " + path + b"\n+++ " + path + b"\n"


HOSTILE: list[Hostile] = [
    # paths that escape the root
    Hostile("dotdot", b"diff --git a/../x.py b/../x.py\n--- a/../x.py\n+++ b/../x.py\n" + H, "leaves the tree", 1),
    Hostile("dotdot-strip0", _header(b"../outside/target.txt") + H, "leaves the tree", 1, strip=0),
    Hostile("absolute-strip0", b"--- /dev/null\n+++ /tmp/evil.txt\n@@ -0,0 +1 @@\n+pwned\n", "absolute path", 1,
            strip=0),
    Hostile("absolute-strip1", b"--- /dev/null\n+++ /outside/evil.txt\n@@ -0,0 +1 @@\n+pwned\n", "absolute path",
            1),
    Hostile("inner-dotdot", _header(b"a/../../etc/passwd") + H, "leaves the tree", 1),
    Hostile("deep-dotdot", _header(b"a/engine/../../../outside/target.txt") + H, "leaves the tree", 1),
    Hostile("c-quoted-dotdot", b'diff --git "a/\\056\\056/x" "b/\\056\\056/x"\n--- "a/\\056\\056/x"\n'
            b'+++ "b/\\056\\056/x"\n' + H, "leaves the tree", 1),
    Hostile("c-quoted-slash", _header(b'"a/engine\\057..\\057..\\057outside/target.txt"') + H, "leaves the tree",
            1),
    Hostile("nul-raw", _header(b"a/engine/x\0.py") + H, "NUL byte", 1),
    Hostile("nul-quoted", _header(b'"a/engine/x\\000.py"') + H, "NUL byte in a path", 1),
    Hostile("rename-out", b"diff --git a/engine/x.py b/engine/x.py\nsimilarity index 100%\n"
            b"rename from engine/x.py\nrename to ../outside/x.py\n", "leaves the tree", 1),
    Hostile("non-utf8-name", _header(b"a/engine/\xff\xfe.py") + H, "not valid UTF-8", 1),
    Hostile("into-dotgit", _header(b"a/.git/hooks/pre-commit") + H, "inside .git or .patchkit", 1),
    Hostile("into-state", _header(b"a/.patchkit/lock") + H, "inside .git or .patchkit", 1),
    Hostile("backslash", _header(b"a/engine\\..\\..\\outside") + H, "backslash", 1),
    # links inside the tree, and diffs that would make links or devices
    Hostile("through-dir-link", _header(b"a/engine/linkdir/target.txt") + H, "symbolic link", None,
            setup=_link_dir, names="link"),
    Hostile("create-through-link", b"--- /dev/null\n+++ b/engine/up/new.txt\n@@ -0,0 +1 @@\n+pwned\n",
            "symbolic link", None, setup=_relative_link_dir, names="link"),
    Hostile("file-is-link", _header(b"a/engine/y.py") + b"@@ -1 +1 @@\n-y = 1\n+y = 2\n", "symbolic link",
            None, setup=_link_file, names="link"),
    Hostile("make-symlink", b"diff --git a/engine/l b/engine/l\nnew file mode 120000\nindex 0000000..1111111\n"
            b"--- /dev/null\n+++ b/engine/l\n@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\n",
            "symbolic link change", 1),
    Hostile("symlink-to-file", b"diff --git a/engine/x.py b/engine/x.py\nold mode 100644\nnew mode 120000\n",
            "symbolic link change", 1),
    Hostile("device", b"diff --git a/engine/d b/engine/d\nnew file mode 020644\n--- /dev/null\n+++ b/engine/d\n"
            b"@@ -0,0 +1 @@\n+x\n", "unsupported file mode", 1),
    Hostile("gitlink", b"diff --git a/engine/m b/engine/m\nnew file mode 160000\nindex 0000000..1111111\n"
            b"--- /dev/null\n+++ b/engine/m\n@@ -0,0 +1 @@\n+Subproject commit 1111111\n", "submodule", 1),
    # malformed diffs
    Hostile("garbage", b"hello world\nthis is not a diff\n", "no file changes found"),
    Hostile("random-bytes", bytes(range(1, 256)) * 4, "no file changes found"),
    Hostile("empty", b"", "the diff is empty"),
    Hostile("blank", b"\n \n\t\n", "the diff is empty"),
    Hostile("truncated-hunk", _header(b"a/engine/x.py") + b"@@ -1,3 +1,3 @@\n a\n-b\n", "ends early", 5),
    Hostile("truncated-header", b"diff --git a/engine/x.py b/engine/x.py\n", "changes nothing", 1),
    Hostile("truncated-after-files", _header(b"a/engine/x.py"), "changes nothing", 1),
    Hostile("count-too-many", _header(b"a/engine/x.py") + b"@@ -1,2 +1,2 @@\n a\n-b\n+c\n d\n e\n",
            "header counts are already used up", 7),
    Hostile("count-too-few", _header(b"a/engine/x.py") + b"@@ -1,5 +1,5 @@\n a\n-b\n+c\n"
            + _header(b"a/engine/y.py") + H, "ends early", 9),
    Hostile("hunk-first", H + _header(b"a/engine/x.py") + H, "hunk before any file header", 1),
    Hostile("conflicting-headers", b"diff --git a/engine/x.py b/engine/x.py\n" + _header(b"a/engine/y.py") + H,
            "conflicting headers", 2),
    Hostile("malformed-hunk-header", _header(b"a/engine/x.py") + b"@@ -1 +1\n-x = 1\n+x = 2\n",
            "malformed hunk header", 3),
    Hostile("crlf-headers", b"--- a/engine/x.py\r\n+++ b/engine/x.py\r\n" + H, "CRLF", 1),
    Hostile("binary", b"diff --git a/engine/x.py b/engine/x.py\nindex 1111111..2222222 100644\n"
            b"Binary files a/engine/x.py and b/engine/x.py differ\n", "binary patch", 1),
    Hostile("copy", b"diff --git a/engine/x.py b/engine/z.py\nsimilarity index 100%\ncopy from engine/x.py\n"
            b"copy to engine/z.py\n", "copied files are not supported", 1),
    # broken manifests
    Hostile("manifest-types", H, "strip must be an integer", names="manifest",
            setup=_manifest(lambda t: t.replace("strip = 1", 'strip = "1"'))),
    Hostile("manifest-unknown-key", H, "unknown key upstream.branch", names="manifest",
            setup=_manifest(lambda t: t.replace("pr = 1", 'pr = 1\nbranch = "main"'))),
    Hostile("manifest-pr-type", H, "upstream.pr must be an integer", names="manifest",
            setup=_manifest(lambda t: t.replace("pr = 1", 'pr = "1"'))),
    Hostile("manifest-diff-escapes", H, "inside the patch folder", names="manifest",
            setup=_manifest(lambda t: t.replace('diff = "change.diff"', 'diff = "../../outside/evil.diff"'))),
    Hostile("manifest-diff-absolute", H, "inside the patch folder", names="manifest",
            setup=_manifest(lambda t: t.replace('diff = "change.diff"', 'diff = "/etc/hostname"'))),
    Hostile("manifest-diff-symlink", H, "outside the patch folder", names="manifest",
            setup=_diff_symlink_outside),
    Hostile("manifest-not-toml", H, "not valid TOML", names="manifest", setup=_manifest(lambda t: t + "[[[\n")),
    Hostile("manifest-sha-mismatch", H, "the manifest records", names="manifest", setup=_manifest(
        lambda t: _with_sha(t, "0" * 64))),
    # issue 10: reserved names in any case, bounds on paths, numbers, sizes and manifests
    *[Hostile(f"reserved-{name.encode('unicode_escape').decode()}", _header(b'"a/' + quoted + b'"') + H,
              "inside .git or .patchkit", 1)
      for name, quoted in [(".GIT/config", b".GIT/config"), ("engine/.Git/hooks/x", b"engine/.Git/hooks/x"),
                           (".Patchkit/lock", b".Patchkit/lock"),
                           (".patch\u212ait/lock", b".patch\\342\\204\\252it/lock"),
                           (".g\u200cit/config", b".g\\342\\200\\214it/config")]],
    Hostile("too-deep", _header(b"a/" + b"d/" * 64 + b"x.py") + H, "folders deep, over the limit of 64", 1),
    Hostile("depth-5000-create", b"--- /dev/null\n+++ b/" + b"d/" * 5000 + b"x.py\n@@ -0,0 +1 @@\n+x\n",
            "over the limit", 1),
    Hostile("name-over-255", _header(b"a/engine/" + b"n" * 256) + H, "NAME_MAX", 1),
    Hostile("path-over-4096", _header(b"a/" + b"/".join([b"p" * 200] * 21)) + H, "PATH_MAX", 1),
    Hostile("huge-hunk-number", _header(b"a/engine/x.py") + b"@@ -" + b"9" * 5000 + b" +1 @@\n-x = 1\n+x = 2\n",
            "more than 9 digits", 3),
    Hostile("huge-hunk-count", _header(b"a/engine/x.py") + b"@@ -1," + b"1" * 40 + b" +1 @@\n-x = 1\n+x = 2\n",
            "more than 9 digits", 3),
    Hostile("c-quoted-octal-over-a-byte", _header(b'"a/engine/\\777x.py"') + H, "bad escape in quoted path", 1),
    Hostile("diff-over-64-mib", _header(b"a/engine/x.py") + H, "over the limit of 67108864", setup=_huge_diff),
    Hostile("diff-over-2m-lines", b"x\n" * 2_000_001, "lines, over the limit of 2000000", 2_000_001),
    Hostile("nul-in-hunk", _header(b"a/engine/x.py") + b"@@ -1 +1 @@\n-x = 1\n+x = \0\n", "NUL byte", 5),
    Hostile("manifest-deep-nesting", H, "nested more than 32 deep", names="manifest",
            setup=_manifest(lambda t: t + "deep = " + "[" * 5000 + "]" * 5000 + "\n")),
    Hostile("manifest-deep-inline-tables", H, "nested more than 32 deep", names="manifest",
            setup=_manifest(lambda t: t + "deep = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n")),
    Hostile("manifest-huge-int", H, "number too long", names="manifest",
            setup=_manifest(lambda t: t.replace("pr = 1", "pr = " + "1" * 5000))),
    Hostile("manifest-diff-name-too-long", H, "PATH_MAX", names="manifest",  # found by scripts/fuzz.py
            setup=_manifest(lambda t: t.replace('diff = "change.diff"', f'diff = "{"x" * 5000}"'))),
    Hostile("manifest-huge-hex-int", H, "strip is a number over 64 bits", names="manifest",  # scripts/fuzz.py
            setup=_manifest(lambda t: t.replace("strip = 1", "strip = 0x" + "f" * 5000))),
    Hostile("manifest-too-big", H, "over the limit of 1048576 bytes", names="manifest",
            setup=_manifest(lambda t: t + "# " + "x" * (1 << 20) + "\n")),
    Hostile("exclude-reversed-range", H, "the range z-a in the [...] class", names="manifest",
            setup=_manifest(lambda t: t + '[exclude]\n"engine/[z-a].py" = "why"\n')),
    Hostile("exclude-open-class", H, "is not closed", names="manifest",
            setup=_manifest(lambda t: t + '[exclude]\n"engine/[xy.py" = "why"\n')),
    Hostile("exclude-class-slash", H, "contains /", names="manifest",
            setup=_manifest(lambda t: t + '[exclude]\n"engine[/]x.py" = "why"\n')),
    Hostile("exclude-many-wildcards", H, "wildcards, over the limit of 64", names="manifest",
            setup=_manifest(lambda t: t + '[exclude]\n"' + "*a" * 500 + '" = "why"\n')),
    Hostile("exclude-1000-stars", _header(b"a/engine/x.py") + H, "matches no file of the diff", names="manifest",
            setup=_manifest(lambda t: t + '[exclude]\n"' + "*" * 1000 + 'nomatch" = "why"\n')),
    Hostile("exclude-reserved", H, "names .git", names="manifest",
            setup=_manifest(lambda t: t + '[exclude]\n".GIT/hooks" = "why"\n')),
    Hostile("base-key-escapes", H, "[base] key", names="manifest",
            setup=_manifest(lambda t: t + f'[base]\n"../outside/target.txt" = "{"0" * 64}"\n')),
    Hostile("base-key-reserved", H, "[base] key", names="manifest",
            setup=_manifest(lambda t: t + f'[base]\n".Git/config" = "{"0" * 64}"\n')),
]


@pytest.fixture(scope="module", autouse=True)
def _warm(tmp_path_factory: pytest.TempPathFactory) -> None:
    warm_up(tmp_path_factory.mktemp("warm"))


def check_hostile(workdir: Path, case: Hostile) -> list[str]:
    """Run one hostile case through apply and status; the problems found (empty: handled as it must be)."""
    root = workdir / case.name / "root"
    outside = workdir / case.name / "outside"
    patches = workdir / case.name / "patches"
    write_files(root, TREE)
    write_files(outside, {"target.txt": (b"precious\n", 0o644), "y.py": (b"y = 1\n", 0o644)})
    folder = add_patch(patches, PATCH_ID, case.diff, extra=f"strip = {case.strip}")
    if case.setup:
        case.setup(root, outside, folder)
    before = image(root), image(outside), image(patches)
    problems = []
    for action in ("apply", "status"):
        run = run_forked([action, PATCH_ID, "--root", str(root), "--patches", str(patches)])
        if run.code != 2:
            problems.append(f"{action}: exit {run.code}, expected 2: {run.err.strip()}{run.out.strip()}")
        if "Traceback" in run.err:
            problems.append(f"{action}: traceback")
        if case.expect not in run.err:
            problems.append(f"{action}: message lacks {case.expect!r}: {run.err.strip()}")
        named = {
            "diff": f"{folder / 'change.diff'}" + (f":{case.line}:" if case.line else ""),
            "manifest": str(folder / "manifest.toml"),
            "link": str(root / "engine"),
        }[case.names]
        if named not in run.err:
            problems.append(f"{action}: message does not name {named}: {run.err.strip()}")
    if (image(root), image(outside), image(patches)) != before:
        problems.append("something was written")
    if (root / ".patchkit" / "journal.json").exists():
        problems.append("a journal was left")
    return problems


@pytest.mark.parametrize("case", HOSTILE, ids=[h.name for h in HOSTILE])
def test_hostile_input_is_refused_cleanly(tmp_path: Path, case: Hostile) -> None:
    assert check_hostile(tmp_path, case) == []


def test_the_same_tree_and_diff_work_without_the_attack(tmp_path: Path) -> None:
    """The control: prove the harness would notice a write (so the cases above can fail)."""
    root = tmp_path / "root"
    write_files(root, TREE)
    patches = tmp_path / "patches"
    add_patch(patches, PATCH_ID, _header(b"a/engine/x.py") + H)
    before = image(root)
    assert run_forked(["apply", PATCH_ID, "--root", str(root), "--patches", str(patches)]).code == 0
    assert image(root) != before


def test_invalid_utf8_and_huge_lines_are_just_bytes(tmp_path: Path) -> None:
    huge = b"h" * (4 << 20) + b"\xff\n"
    before = {"engine/bin.py": (b"\xff\xfe?\n\xc3\x28\n" + huge, 0o644), "engine/lat.py": (b"caf\xe9\n", 0o600)}
    after = {"engine/bin.py": (b"\xff\xfe!\n\xc3\x28\n" + huge + b"tail\n", 0o644),
             "engine/lat.py": (b"caf\xe9 cr\xe8me\r\n", 0o600)}
    diff = git_diff(tmp_path, exec_bits(before), exec_bits(after))
    root = tmp_path / "root"
    write_files(root, before)
    patches = tmp_path / "patches"
    add_patch(patches, PATCH_ID, diff)
    args = ["--root", str(root), "--patches", str(patches)]
    assert b"Binary files" not in diff
    run = run_forked(["apply", PATCH_ID, *args])
    assert run.code == 0, run.err
    assert {k: v for k, v in image(root).items() if v[0] == "file"} == {
        k: ("file", *v) for k, v in after.items() if v is not None
    }
    assert run_forked(["revert", PATCH_ID, *args]).code == 0
    assert {k: v[1] for k, v in image(root).items() if v[0] == "file"} == {k: v[0] for k, v in before.items()}


# ------------------------------------------------------------------------------- tree reads, hardened

def _tree(tmp_path: Path) -> tuple[Path, Path]:
    root, outside = tmp_path / "root", tmp_path / "outside"
    write_files(root, TREE)
    write_files(outside, {"secret.txt": (b"secret\n", 0o600)})
    return root, outside


@pytest.mark.parametrize("rel", ["../outside/secret.txt", "/etc/passwd", "engine/../../outside/secret.txt",
                                 "engine//x.py", "engine/./x.py", "engine/x.py\0", ""])
def test_read_snapshot_refuses_paths_that_are_not_plain(tmp_path: Path, rel: str) -> None:
    root, _ = _tree(tmp_path)
    with pytest.raises(UnsafePathError, match="not a plain relative path"):
        read_snapshot(root, rel)


def test_read_snapshot_refuses_links_fifos_and_non_folders(tmp_path: Path) -> None:
    root, outside = _tree(tmp_path)
    (root / "engine" / "link.py").symlink_to(outside / "secret.txt")
    (root / "engine" / "dirlink").symlink_to(outside)
    os.mkfifo(root / "engine" / "fifo.py")
    with pytest.raises(UnsafePathError, match="symbolic link"):
        read_snapshot(root, "engine/link.py")
    with pytest.raises(UnsafePathError, match="symbolic link"):
        read_snapshot(root, "engine/dirlink/secret.txt")
    with pytest.raises(UnsafePathError, match="not a regular file"):
        read_snapshot(root, "engine/fifo.py")  # O_NONBLOCK and the lstat first: this must not hang
    with pytest.raises(UnsafePathError, match="not a directory"):
        read_snapshot(root, "engine/x.py/y.py")
    assert read_snapshot(root, "engine/missing/z.py").data is None


@pytest.mark.parametrize(("swap", "message"), [("link", "became a symbolic link"), ("file", "was replaced")])
def test_read_snapshot_catches_a_swap_between_check_and_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, swap: str, message: str
) -> None:
    """Another process swaps the file right after patchkit's lstat: the open must not follow it."""
    root, outside = _tree(tmp_path)
    real_stat = os.stat

    def stat_then_swap(name: str, *args: object, **kwargs: object) -> os.stat_result:
        result = real_stat(name, *args, **kwargs)  # type: ignore[arg-type]
        if name == "x.py":
            target = root / "engine" / "x.py"
            target.rename(tmp_path / "kept")  # kept alive, so the new file cannot reuse its inode number
            if swap == "link":
                target.symlink_to(outside / "secret.txt")
            else:
                target.write_bytes(b"x = 1\n")  # same content, another inode
        return result

    monkeypatch.setattr("patchkit.input.tree.os.stat", stat_then_swap)
    with pytest.raises(UnsafePathError, match=message):
        read_snapshot(root, "engine/x.py")


# ------------------------------------------------------------------------- issue 10: lines, bounds, odd names

@pytest.mark.parametrize(("tail", "line", "expect"), [
    ('deep = ' + "[" * 40 + "]" * 40 + "\n", 13, "nested more than 32 deep"),
    ("big = " + "7" * 4400 + "\n", 13, "number too long"),
    ('[exclude]\n"engine/x.py" = "why"\n"engine/[b-a]" = "why"\n', 15, "range b-a"),
    ("[exclude]\n'engine/[x' = \"why\"\n", 14, "is not closed"),
    ("x = 1\ny = [1, 2\n", 14, "not valid TOML"),
])
def test_manifest_errors_name_the_line(tmp_path: Path, tail: str, line: int, expect: str) -> None:
    root, patches = tmp_path / "root", tmp_path / "patches"
    write_files(root, TREE)
    folder = add_patch(patches, PATCH_ID, _header(b"a/engine/x.py") + H)
    manifest = folder / "manifest.toml"
    manifest.write_text(manifest.read_text(encoding="utf-8") + tail, encoding="utf-8")
    before = image(root)
    for args in (["apply", PATCH_ID, "--root", str(root)], ["list"]):
        run = run_forked([*args, "--patches", str(patches)])
        assert run.code == 2, run.err
        assert f"{manifest}:{line}: " in run.err and expect in run.err, run.err
        assert "Traceback" not in run.err
    assert image(root) == before


def test_the_depth_bound_is_exact_and_the_deepest_legal_file_round_trips(tmp_path: Path) -> None:
    """64 components are accepted (created, then removed by revert with every folder); 65 are refused."""
    root, patches = tmp_path / "root", tmp_path / "patches"
    write_files(root, TREE)
    before = image(root)
    deepest = b"d/" * 63 + b"x.py"
    add_patch(patches, PATCH_ID, b"--- /dev/null\n+++ b/" + deepest + b"\n@@ -0,0 +1 @@\n+x\n")
    args = ["--root", str(root), "--patches", str(patches)]
    assert run_forked(["apply", PATCH_ID, *args]).code == 0
    assert (root / deepest.decode()).read_bytes() == b"x\n"
    assert run_forked(["revert", PATCH_ID, *args]).code == 0
    assert image(root) == before
    add_patch(patches, PATCH_ID, b"--- /dev/null\n+++ b/d/" + deepest + b"\n@@ -0,0 +1 @@\n+x\n")
    run = run_forked(["apply", PATCH_ID, *args])
    assert run.code == 2 and "65 folders deep, over the limit of 64" in run.err, run.err
    assert image(root) == before


def test_the_longest_legal_name_and_path_are_accepted(tmp_path: Path) -> None:
    """Bounds refuse only what Linux itself cannot hold: a 255-byte name and a 4096-byte path parse."""
    from patchkit.diff.diffs import parse_diff

    name = "n" * 255
    path = "/".join(["p" * 254] * 16) + "/" + "q" * (4096 - 255 * 16)
    assert len(path.encode()) == 4096
    for rel in (f"engine/{name}", path):
        diff = parse_diff(("--- /dev/null\n+++ b/" + rel + "\n@@ -0,0 +1 @@\n+x\n").encode(), 1, "d.diff")
        assert diff.files[0].path == rel


EVIL_NAME = "engine/evil\n  applied    engine/x.py\x1b[2J\u202e.py"
EVIL_QUOTED = b'"b/engine/evil\\n  applied    engine/x.py\\033[2J\\342\\200\\256.py"'
EVIL_SHOWN = '"engine/evil\\n  applied    engine/x.py\\033[2J\\342\\200\\256.py"'


def test_names_with_control_characters_are_escaped_for_people_and_kept_in_json(tmp_path: Path) -> None:
    root, patches = tmp_path / "root", tmp_path / "patches"
    write_files(root, TREE)
    diff = (b"diff --git " + EVIL_QUOTED.replace(b'"b/', b'"a/') + b" " + EVIL_QUOTED + b"\nnew file mode 100644\n"
            b"--- /dev/null\n+++ " + EVIL_QUOTED + b"\n@@ -0,0 +1 @@\n+x\n")
    add_patch(patches, PATCH_ID, diff)
    args = ["--root", str(root), "--patches", str(patches)]
    assert run_forked(["apply", PATCH_ID, *args]).code == 0
    assert (root / EVIL_NAME).read_bytes() == b"x\n"  # the name itself is legal and kept
    shown = run_forked(["status", PATCH_ID, "-v", *args])
    assert shown.code == 0, shown.err
    assert EVIL_SHOWN in shown.out
    assert "\x1b" not in shown.out and "\u202e" not in shown.out
    assert [line for line in shown.out.splitlines() if line.startswith("  applied    engine/x.py")] == []
    document = run_forked(["status", PATCH_ID, "--json", *args]).json()
    assert [f["path"] for f in document["files"]] == [EVIL_NAME]


def test_errors_naming_such_a_file_stay_on_their_lines(tmp_path: Path) -> None:
    root, patches = tmp_path / "root", tmp_path / "patches"
    write_files(root, TREE)
    diff = (b"diff --git " + EVIL_QUOTED.replace(b'"b/', b'"a/') + b" " + EVIL_QUOTED + b"\n"
            b"index 1111111..2222222 100644\nBinary files " + EVIL_QUOTED.replace(b'"b/', b'"a/') + b" and "
            + EVIL_QUOTED + b" differ\n")
    add_patch(patches, PATCH_ID, diff)
    run = run_forked(["apply", PATCH_ID, "--root", str(root), "--patches", str(patches)])
    assert run.code == 2
    lines = run.err.splitlines()
    assert len(lines) == 2 and lines[1].startswith("  hint: "), run.err
    assert f"{EVIL_SHOWN}: binary patch" in lines[0] and "\x1b" not in run.err


def test_lint_findings_stay_on_their_lines(tmp_path: Path) -> None:
    patches = tmp_path / "patches"
    folder = add_patch(patches, PATCH_ID, _header(b"a/engine/x.py") + H)
    manifest = folder / "manifest.toml"
    manifest.write_text(manifest.read_text(encoding="utf-8")
                        + '[exclude]\n"engine/gone\\npatchkit lint: clean\\u001b[2K" = "why"\n', encoding="utf-8")
    run = run_forked(["lint", "--patches", str(patches)])
    assert "\x1b" not in run.out
    assert not any(line.startswith("patchkit lint: clean") for line in run.out.splitlines()), run.out
    assert "engine/gone\\npatchkit lint: clean" in run.out, run.out
