"""Fuzz the diff parser, the pipeline behind it, and the manifest loader: only PatchkitError may escape.

Inputs are random bytes and mutations of real diffs made by git (dropped, repeated, swapped and truncated
lines, hostile header lines spliced in, hunk counts changed). Whatever parses must also be safe: every path it
names is a plain relative path outside .git and .patchkit, and judging and planning it on a real tree raise
nothing but PatchkitError. Bounded and derandomized for CI; scripts/fuzz.py runs the same targets for longer.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from patchkit.diff.diffs import parse_diff
from patchkit.diff.filtering import filter_diff
from patchkit.errors import ExitCode, PatchkitError
from patchkit.input.excludes import Exclude
from patchkit.input.limits import MAX_PATH_BYTES, MAX_PATH_DEPTH
from patchkit.input.manifest import load_manifest
from patchkit.input.paths import reserved_name
from patchkit.input.tree import split_relative
from patchkit.plan.plan import plan_changes
from tests.conftest import git_diff
from tests.rooted import scan_tree
from tests.safety_helpers import AFTER, BEFORE, exec_bits, run_forked, warm_up, write_files

CI = settings(max_examples=250, derandomize=True, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Second corpus tree: CRLF, no newline at the end, names git must quote, a file edited in two places.
QUOTED_BEFORE: dict[str, tuple[bytes, int] | None] = {
    "dir with space/caf\xe9.txt": (b"a\r\nb\r\nc\r\n", 0o644),
    "src/no_eol.py": (b"one\ntwo\nthree", 0o644),
    "src/long.py": (b"".join(b"row %d\n" % i for i in range(60)), 0o755),
}
QUOTED_AFTER: dict[str, tuple[bytes, int] | None] = {
    "dir with space/caf\xe9.txt": (b"a\r\nB\r\nc\r\n", 0o644),
    "src/no_eol.py": (b"one\ntwo\nthree!", 0o644),
    "src/long.py": (b"".join(b"row %d\n" % i for i in range(60) if i not in (5, 50)) + b"end\n", 0o755),
    "dir with space/\"quoted\"\tname.txt": (b"new\n", 0o644),
}

SPLICES = [
    b"@@ -1,2 +1,3 @@", b"@@ -0,0 +1 @@", b"@@ -99999999999999999999 +1 @@", b"--- /dev/null", b"+++ /dev/null",
    b"--- a/../escape", b"+++ b/../escape", b'+++ "b/\\056\\056/x"', b"+++ /etc/passwd", b"diff --git a/x b/x",
    b'diff --git "a/x y" "b/x y"', b"\\ No newline at end of file", b"new file mode 100644",
    b"deleted file mode 100755", b"old mode 100644", b"new mode 120000", b"new file mode 160000",
    b"similarity index 100%", b"rename from ../x", b"rename to .git/config", b"copy from x", b"copy to y",
    b"Binary files a/x and b/x differ", b"GIT binary patch", b"literal 0", b"-- ", b"From 0 Mon Sep 17 00:00:00 2001",
    b"index 0000000..1111111 100644", b"+", b"-", b" ", b"", b"\r", b"+\xff\xfe", b"\x00",
    b"@@ -" + b"9" * 5000 + b" +1 @@", b"@@ -1," + b"1" * 4400 + b" +1 @@", b"+++ b/.GIT/config",
    b'+++ "b/.patch\\342\\204\\252it/lock"', b"+++ b/" + b"d/" * 70 + b"x", b"+++ b/" + b"n" * 300,
    b'+++ "b/x\\ny\\033[2J"', b'+++ "b/\\777"', b'--- "a/\\400\\1"',
]


PATH_TARGETS = [b"engine/core.py", b"engine/old_name.py", b"engine/moved/new_name.py", b"engine/run.sh",
                b"engine/legacy/gone.py", b"engine/plugins/extra/added.py", b"src/long.py", b"src/no_eol.py", b"engine"]
HOSTILE_PATHS = [b".git/config", b"..", b"../x", b"x/.patchkit/lock", b"/abs/x", b"engine/../../x", b"a\\b",
                 b"engine/./x", b"engine//x", b"x\x00y", b"\xff\xfe", b"engine/x ", b" x", b"x\ty", b"-x", b"+x",
                 b".GIT/config", b"engine/.Patchkit/x", b".patch\xe2\x84\xaait/x", b"d/" * 70 + b"x", b"n" * 300]


@functools.cache
def corpus() -> tuple[tuple[bytes, Path], ...]:
    """Real diffs made by git, each with a tree holding its pre-image (kept for the whole session)."""
    workdir = Path(tempfile.mkdtemp(prefix="patchkit-fuzz-"))
    atexit.register(shutil.rmtree, workdir, True)
    out = []
    for name, before, after in (("all-ops", BEFORE, AFTER), ("quoted", QUOTED_BEFORE, QUOTED_AFTER)):
        root = workdir / name
        write_files(root, before)
        out.append((git_diff(workdir, exec_bits(before), exec_bits(after)), root))
    return tuple(out)


@st.composite
def mutated_diffs(draw: st.DrawFn) -> tuple[bytes, Path]:
    data, root = draw(st.sampled_from(corpus()))
    if draw(st.booleans()):  # rename a file everywhere it is named, so the headers still agree
        data = data.replace(draw(st.sampled_from(PATH_TARGETS)), draw(st.sampled_from(HOSTILE_PATHS)))
    lines = data.split(b"\n")
    for _ in range(draw(st.integers(0, 3))):
        i = draw(st.integers(0, max(len(lines) - 1, 0)))
        op = draw(st.sampled_from(["drop", "dup", "swap", "bytes", "splice", "prefix", "number", "truncate"]))
        if not lines:
            lines = [b""]
        if op == "drop":
            del lines[i]
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "bytes":
            lines[i] = draw(st.binary(max_size=40))
        elif op == "splice":
            lines.insert(i, draw(st.sampled_from(SPLICES)))
        elif op == "prefix":
            lines[i] = draw(st.sampled_from([b"+", b"-", b" ", b"\\", b"@@ ", b"--- ", b"+++ "])) + lines[i]
        elif op == "number":
            lines[i] = re.sub(rb"\d+", lambda _: str(draw(st.integers(0, 70))).encode(), lines[i], count=1)
        else:
            lines = [*lines[:i], lines[i][: draw(st.integers(0, len(lines[i])))]]
    return b"\n".join(lines), root


def check_diff(data: bytes, root: Path | None = None) -> bool:
    """Parse, filter (with and without an exclude), judge and plan: only PatchkitError may escape.

    True if some strip parsed it (so the rest of the pipeline ran on it).
    """
    parsed = False
    for strip in (1, 0):
        try:
            diff = parse_diff(data, strip, "fuzz.diff")
        except PatchkitError:
            continue
        parsed = True
        for f in diff.files:
            for path in f.paths:  # whatever parses never names a place outside the root
                parts = split_relative(path)
                assert not any(reserved_name(p) for p in parts), path
                assert len(parts) <= MAX_PATH_DEPTH and len(path.encode()) <= MAX_PATH_BYTES, path
        excludes = [(), (Exclude(diff.files[0].path, "fuzz"),)]
        for exclude in excludes:
            try:
                hunk_set = filter_diff(diff, exclude)
            except PatchkitError:
                continue
            assert len(hunk_set.digest) == 64  # hashed (and printed) as text: must not choke on any name
            if root is None:
                continue
            try:
                tree = scan_tree(root, hunk_set)
            except PatchkitError:
                continue
            for forward in (True, False):
                with contextlib.suppress(PatchkitError):
                    plan_changes(tree, forward=forward)
    return parsed


@CI
@given(st.binary(max_size=2000))
def test_random_bytes_raise_only_patchkit_errors(data: bytes) -> None:
    check_diff(data)


@CI
@given(st.lists(st.sampled_from([*SPLICES, b"@@ -1 +1 @@", b"+x", b"-x", b" x"]), max_size=30))
def test_diff_shaped_noise_raises_only_patchkit_errors(lines: list[bytes]) -> None:
    check_diff(b"\n".join(lines) + b"\n")


@CI
@given(mutated_diffs())
def test_mutated_real_diffs_raise_only_patchkit_errors(sample: tuple[bytes, Path]) -> None:
    check_diff(*sample)


def test_the_unmutated_corpus_applies() -> None:
    """The control: the seeds themselves parse and plan, so the mutations start from working diffs."""
    for data, root in corpus():
        hunk_set = filter_diff(parse_diff(data, 1, "seed.diff"), ())
        assert plan_changes(scan_tree(root, hunk_set), forward=True).changes


# ------------------------------------------------------------------------------------------------ manifests

VALID_MANIFEST = """\
id = "fuzz-id"
title = "fuzz"
diff = "change.diff"
sha256 = "{sha}"
strip = 1
after = ["other-id"]

[upstream]
repo = "example/engine"
pr = 1
url = "https://example.invalid/pr/1"

[target]
name = "engine"
pinned_commit = "unknown"

[exclude]
"engine/x.py" = "why"

[base]
"engine/y.py" = "{sha}"

[waiver]
introduced_by = 2
"""

KNOWN_KEYS = ["id", "title", "diff", "sha256", "hunkset_sha256", "strip", "after", "upstream", "target",
              "exclude", "waiver", "base", "repo", "pr", "url", "diff_url", "name", "pinned_commit",
              "introduced_by"]
SCALARS = st.one_of(
    st.integers(-(2**65), 2**65), st.booleans(), st.text(max_size=12), st.floats(),
    st.sampled_from(["", ".", "..", "../x", "/etc/passwd", "a/../../b", "change.diff", "x" * 300, "fuzz-id"]),
)
# One level of nesting is all the schema has; deeper values only cost generation time.
VALUES = SCALARS | st.lists(SCALARS, max_size=3) | st.dictionaries(
    st.sampled_from(KNOWN_KEYS) | st.text(max_size=6), SCALARS | st.lists(SCALARS, max_size=2), max_size=4)


@functools.cache
def manifest_folder() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="patchkit-fuzz-manifest-")) / "fuzz-id"
    atexit.register(shutil.rmtree, folder.parent, True)
    folder.mkdir()
    (folder / "change.diff").write_bytes(b"--- a/engine/x.py\n+++ b/engine/x.py\n@@ -1 +1 @@\n-x\n+y\n")
    return folder


def check_manifest(text: bytes) -> bool:
    """Load the manifest and read its diff: only PatchkitError may escape. True if it loaded."""
    folder = manifest_folder()
    (folder / "manifest.toml").write_bytes(text)
    try:
        spec = load_manifest(folder)
    except PatchkitError:
        return False
    with contextlib.suppress(PatchkitError):
        spec.read_diff()
    return True


def toml_value(value: Any) -> str:
    """A TOML rendering of a generated value (JSON string quoting is close enough: odd escapes just fail)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value).replace("inf", "inf").replace("nan", "nan")
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"


@st.composite
def manifest_documents(draw: st.DrawFn) -> bytes:
    keys = draw(st.lists(st.sampled_from(KNOWN_KEYS) | st.text(min_size=1, max_size=6), max_size=10, unique=True))
    text = "\n".join(f"{json.dumps(key)} = {toml_value(draw(VALUES))}" for key in keys)
    return text.encode("utf-8", "surrogatepass")


# Values and lines that made tomllib or the glob matcher crash or hang (issue 10), and odd path keys.
HOSTILE_VALUES = [b"[" * 2000 + b"]" * 2000, b"{a = " * 1200 + b"1" + b"}" * 1200, b"7" * 4400, b"0x" + b"f" * 5000,
                  b'"' + b"x" * 5000 + b'"', b"[" * 33 + b"]" * 33]
HOSTILE_LINES = [b"[exclude]", b'"engine/[z-a]" = "why"', b'"engine/[x" = "why"', b'"' + b"*" * 1000 + b'x" = "why"',
                 b'"' + b"*a" * 200 + b'" = "why"', b'".GIT/x" = "why"', b'"engine/x\\n.py" = "why"', b"[base]",
                 b'"../x" = "' + b"0" * 64 + b'"', b'".Patchkit/x" = "' + b"0" * 64 + b'"', b"x = " + b"[" * 5000]


@st.composite
def mutated_manifests(draw: st.DrawFn) -> bytes:
    lines = VALID_MANIFEST.format(sha="0" * 64).encode().split(b"\n")
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["drop", "dup", "value", "bytes", "key", "hostile"]))
        if op == "drop":
            del lines[i]
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "value" and b" = " in lines[i]:
            key = lines[i].split(b" = ")[0]
            lines[i] = key + b" = " + draw(st.sampled_from(
                [b"1", b"-1", b"true", b'""', b'"../x"', b"[]", b"{}", b"[1, 2]", b'{a = 1}', b"1.5", b"nan",
                 b"2020-01-01", b'"/abs"', b"99999999999999999999", b'"\\u0000"', *HOSTILE_VALUES]))
        elif op == "bytes":
            lines[i] = draw(st.binary(max_size=30))
        elif op == "key":
            lines.insert(i, draw(st.sampled_from(KNOWN_KEYS)).encode() + b" = 1")
        else:
            lines.insert(i, draw(st.sampled_from(HOSTILE_LINES)))
    return b"\n".join(lines)


@CI
@given(st.binary(max_size=600))
def test_random_manifest_bytes_raise_only_patchkit_errors(data: bytes) -> None:
    check_manifest(data)


@CI
@given(manifest_documents())
def test_random_manifest_documents_raise_only_patchkit_errors(data: bytes) -> None:
    check_manifest(data)


@CI
@given(mutated_manifests())
def test_mutated_manifests_raise_only_patchkit_errors(data: bytes) -> None:
    check_manifest(data)


# ------------------------------------------------------------------------------------------------------ CLI


@pytest.fixture(scope="module")
def cli_workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    workdir = tmp_path_factory.mktemp("fuzz-cli")
    warm_up(workdir)
    return workdir


@settings(max_examples=40, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(sample=mutated_diffs())
def test_the_cli_never_prints_a_traceback(cli_workdir: Path, sample: tuple[bytes, Path]) -> None:
    """Mutated diffs through `patchkit apply`: an exit code patchkit defines, never a traceback."""
    from tests.safety_helpers import PATCH_ID, add_patch

    data, seed_root = sample
    root = cli_workdir / "root"
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(seed_root, root)
    patches = cli_workdir / "patches"
    shutil.rmtree(patches, ignore_errors=True)
    add_patch(patches, PATCH_ID, data)
    run = run_forked(["apply", PATCH_ID, "--root", str(root), "--patches", str(patches)])
    assert run.code in (0, 1, 2), (run.code, run.err)
    assert "Traceback" not in run.err and "Traceback" not in run.out


def test_fuzz_seeds_cover_every_kind_of_change() -> None:
    diff = corpus()[0][0]
    for marker in (b"new file mode", b"deleted file mode", b"rename from", b"old mode", b"@@ -"):
        assert marker in diff



CLI_TREE = {"engine/x.py": (b"x = 1\n", 0o644), "engine/y.py": (b"y = 1\n", 0o644)}
CLI_DIFF = (b"--- a/engine/x.py\n+++ b/engine/x.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
            b"--- a/engine/y.py\n+++ b/engine/y.py\n@@ -1 +1 @@\n-y = 1\n+y = 2\n")


def cli_manifest() -> bytes:
    """VALID_MANIFEST for CLI_DIFF, without the `after` entry (a lone patch with a dependency is not applied)."""
    text = VALID_MANIFEST.format(sha=hashlib.sha256(CLI_DIFF).hexdigest()).replace('after = ["other-id"]\n', "")
    return text.encode()


@st.composite
def hostile_cli_manifests(draw: st.DrawFn) -> bytes:
    lines = cli_manifest().split(b"\n")
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(lines)))
        if draw(st.booleans()) and i < len(lines) and b" = " in lines[i]:
            lines[i] = lines[i].split(b" = ")[0] + b" = " + draw(st.sampled_from(HOSTILE_VALUES))
        else:
            lines.insert(i, draw(st.sampled_from(HOSTILE_LINES)))
    return b"\n".join(lines)


@settings(max_examples=40, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(text=hostile_cli_manifests())
def test_hostile_manifests_through_the_cli(cli_workdir: Path, text: bytes) -> None:
    """Manifests that crashed or hung patchkit (issue 10): a documented exit code, no traceback, no write."""
    from tests.safety_helpers import image

    root, patches = cli_workdir / "manifest-root", cli_workdir / "manifest-patches"
    for folder in (root, patches):
        shutil.rmtree(folder, ignore_errors=True)
    write_files(root, CLI_TREE)
    (patches / "fuzz-id").mkdir(parents=True)
    (patches / "fuzz-id" / "change.diff").write_bytes(CLI_DIFF)
    (patches / "fuzz-id" / "manifest.toml").write_bytes(text)
    before = image(root)
    for args in (["apply", "fuzz-id", "--root", str(root)], ["list"], ["lint"]):
        run = run_forked([*args, "--patches", str(patches)])
        assert run.code in {int(c) for c in ExitCode}, (args, run.code, run.err)
        assert "Traceback" not in run.err + run.out
        if args[0] == "apply" and run.code != 0:
            assert image(root) == before, run.err


def test_the_cli_manifest_seed_applies(tmp_path: Path) -> None:
    """The control for the test above: unmutated, the manifest applies (so its refusals come from the mutations)."""
    from tests.safety_helpers import image

    root, patches = tmp_path / "root", tmp_path / "patches"
    write_files(root, CLI_TREE)
    (patches / "fuzz-id").mkdir(parents=True)
    (patches / "fuzz-id" / "change.diff").write_bytes(CLI_DIFF)
    (patches / "fuzz-id" / "manifest.toml").write_bytes(cli_manifest())
    run = run_forked(["apply", "fuzz-id", "--root", str(root), "--patches", str(patches)])
    assert run.code == 0, run.err
    assert image(root)["engine/y.py"][1] == b"y = 2\n" and image(root)["engine/x.py"][1] == b"x = 1\n"
