"""Property tests against independent oracles: the diff is made by real `git diff --no-index`, the expected
results come from the target text itself and from real `git apply`.

Invariants (random text files, random edits):
- status(original) == unapplied; apply(original) == target, byte for byte, and == what `git apply` makes;
- status(target) == applied; apply twice == apply once; revert(apply(t)) == t;
- any proper non-empty subset of hunks applied (by `git apply` of a diff holding only those hunks) == partial;
- a changed line inside a hunk's context (with unique lines, so no look-alike elsewhere) == conflict.
Deterministic in CI (derandomize); PATCHKIT_PROPERTY_EXAMPLES raises the example count for a longer run.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import FileSpec, Registry, cli, git, git_diff, read_tree, write_tree

EXAMPLES = int(os.environ.get("PATCHKIT_PROPERTY_EXAMPLES", "200"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
NAME = "src/engine/module.py"

# Few distinct words make repeated lines (look-alike blocks) common, which is what stresses matching.
WORDS = st.sampled_from([b"a", b"b", b"c", b"def f():", b"    return x", b"", b"# note", b"x = 1"])
ENDINGS = st.sampled_from([b"\n", b"\n", b"\n", b"\r\n"])


@st.composite
def text_files(draw: st.DrawFn, unique: bool = False) -> bytes:
    n = draw(st.integers(min_value=0, max_value=40))
    if unique:
        lines = [b"line %d %d" % (i, draw(st.integers(0, 9))) for i in range(n)]
    else:
        lines = [draw(WORDS) for _ in range(n)]
    ending = draw(ENDINGS)
    data = ending.join(lines)
    if lines and draw(st.booleans()):
        data += ending  # most files end with a newline, some do not
    return data


@st.composite
def edits(draw: st.DrawFn, unique: bool = False) -> tuple[bytes, bytes]:
    original = draw(text_files(unique=unique))
    lines = original.split(b"\n")
    for _ in range(draw(st.integers(min_value=1, max_value=5))):
        op = draw(st.sampled_from(["insert", "delete", "replace"]))
        at = draw(st.integers(min_value=0, max_value=len(lines)))
        new = b"new %d" % draw(st.integers(0, 99)) if unique else draw(WORDS)
        if op == "insert" or not lines:
            lines.insert(at, new)
        elif op == "delete":
            del lines[min(at, len(lines) - 1)]
        else:
            lines[min(at, len(lines) - 1)] = new
    return original, b"\n".join(lines)


@contextmanager
def workspace() -> Iterator[Path]:
    # hypothesis runs many examples per test; a fresh folder each time (tmp_path is per test, not per example)
    with tempfile.TemporaryDirectory(prefix="pk-prop-") as tmp:
        yield Path(tmp)


def no_index_diff(work: Path, old: bytes, new: bytes) -> bytes:
    """`git diff --no-index a/<NAME> b/<NAME>`, rewritten to the usual a/ b/ prefixes (strip 1)."""
    for side, data in (("a", old), ("b", new)):
        path = work / side / NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    out = git(work, "diff", "--no-index", "--no-color", f"a/{NAME}", f"b/{NAME}", check=False).stdout
    # --no-index prints a/a/<NAME> and b/b/<NAME>; drop the doubled folder
    return out.replace(f"a/a/{NAME}".encode(), f"a/{NAME}".encode()).replace(
        f"b/b/{NAME}".encode(), f"b/{NAME}".encode()
    )


def setup(work: Path, old: bytes, new: bytes) -> tuple[Registry, Path, bytes]:
    diff = no_index_diff(work, old, new)
    registry = Registry(work / "patches")
    registry.add("p", diff)
    root = work / "engine"
    (root / NAME).parent.mkdir(parents=True)
    (root / NAME).write_bytes(old)
    return registry, root, diff


def run(registry: Registry, root: Path, *args: str) -> tuple[int, str]:
    res = cli(args[0], "p", "--root", root, "--patches", registry.path, *args[1:], "--json")
    state = res.json()["state"] if res.out.startswith("{") else res.err
    return res.code, state


def git_apply(work: Path, tree: Path, diff: bytes) -> None:
    (work / "oracle.diff").write_bytes(diff)
    git(tree, "apply", "--whitespace=nowarn", str(work / "oracle.diff"))


def hunks_of(diff: bytes) -> tuple[bytes, list[bytes]]:
    """(file header, [hunk texts]) of a one-file diff."""
    parts = re.split(rb"(?m)^(?=@@ )", diff)
    return parts[0], parts[1:]


@SETTINGS
@given(edits())
def test_apply_matches_target_and_git_apply(change: tuple[bytes, bytes]) -> None:
    old, new = change
    if old == new:
        return
    with workspace() as work:
        registry, root, diff = setup(work, old, new)
        assert run(registry, root, "status") == (3, "unapplied")

        oracle = work / "oracle"
        (oracle / NAME).parent.mkdir(parents=True)
        (oracle / NAME).write_bytes(old)
        git_apply(work, oracle, diff)

        assert run(registry, root, "apply")[0] == 0
        assert (root / NAME).read_bytes() == new
        assert read_tree(root) == read_tree(oracle)
        assert run(registry, root, "status") == (0, "applied")
        assert run(registry, root, "apply") == (0, "applied")  # twice == once
        assert (root / NAME).read_bytes() == new
        assert run(registry, root, "revert")[0] == 0
        assert (root / NAME).read_bytes() == old
        assert run(registry, root, "status") == (3, "unapplied")


@SETTINGS
@given(edits(), st.data())
def test_any_proper_subset_of_hunks_is_partial(change: tuple[bytes, bytes], data: st.DataObject) -> None:
    old, new = change
    with workspace() as work:
        registry, root, diff = setup(work, old, new)
        header, hunks = hunks_of(diff)
        if len(hunks) < 2:
            return
        chosen = data.draw(st.sets(st.integers(0, len(hunks) - 1), min_size=1, max_size=len(hunks) - 1))
        subset = header + b"".join(h for i, h in enumerate(hunks) if i in chosen)
        git_apply(work, root, subset)  # the oracle applies exactly the chosen hunks
        before = (root / NAME).read_bytes()
        assert run(registry, root, "status") == (4, "partial")
        assert run(registry, root, "apply")[0] == 1  # refused, nothing written
        assert (root / NAME).read_bytes() == before
        assert run(registry, root, "apply", "--complete")[0] == 0
        assert (root / NAME).read_bytes() == new


@SETTINGS
@given(edits(unique=True), st.data())
def test_changed_context_line_is_conflict(change: tuple[bytes, bytes], data: st.DataObject) -> None:
    old, new = change
    with workspace() as work:
        registry, root, diff = setup(work, old, new)
        _, hunks = hunks_of(diff)
        if not hunks:
            return
        hunk = hunks[data.draw(st.integers(0, len(hunks) - 1))]
        context = [line[1:] for line in hunk.split(b"\n")[1:] if line.startswith(b" ")]
        if not context:
            return
        victim = data.draw(st.sampled_from(context))
        text = old.split(b"\n")
        text[text.index(victim)] = b"edited by hand"
        drifted = b"\n".join(text)
        (root / NAME).write_bytes(drifted)
        assert run(registry, root, "status") == (5, "conflict")
        assert run(registry, root, "apply")[0] == 1
        assert run(registry, root, "revert")[0] == 1
        assert (root / NAME).read_bytes() == drifted


@SETTINGS
@given(edits())
def test_plain_copy_and_git_checkout_agree(change: tuple[bytes, bytes]) -> None:
    old, new = change
    if old == new:
        return
    with workspace() as work:
        registry, root, _ = setup(work, old, new)
        checkout = work / "checkout"
        shutil.copytree(root, checkout)
        git(checkout, "init", "-q")
        for tree in (root, checkout):
            assert run(registry, tree, "apply")[0] == 0
            assert run(registry, tree, "apply") == (0, "applied")
        assert read_tree(root) == read_tree(checkout)


@st.composite
def tree_changes(draw: st.DrawFn) -> tuple[dict[str, FileSpec], dict[str, FileSpec]]:
    """A small tree and a change to it with every whole-file operation git can express."""
    names = [f"pkg/mod{i}.py" for i in range(draw(st.integers(1, 4)))]
    before: dict[str, FileSpec] = {
        name: (draw(text_files(unique=True)) + b"\n" + name.encode() + b"\n", draw(st.booleans())) for name in names
    }
    after: dict[str, FileSpec] = {}
    for name in names:
        data, executable = before[name]  # type: ignore[misc]
        op = draw(st.sampled_from(["keep", "edit", "delete", "rename", "chmod"]))
        if op == "edit":
            after[name] = (data.replace(b"line 1 ", b"LINE one ") + b"appended\n", executable)
        elif op == "delete":
            after[name] = None
        elif op == "rename":
            after[name] = None
            after[name.replace("pkg/", "pkg/moved/")] = (data + b"renamed\n" * draw(st.integers(0, 1)), executable)
        elif op == "chmod":
            after[name] = (data, not executable)
    if draw(st.booleans()):
        after["pkg/new/created.py"] = (b"created\n" * draw(st.integers(0, 3)), draw(st.booleans()))
    return before, after


@settings(SETTINGS, max_examples=max(EXAMPLES // 4, 20))
@given(tree_changes())
def test_whole_file_operations_match_git_apply(change: tuple[dict[str, FileSpec], dict[str, FileSpec]]) -> None:
    before, after = change
    with workspace() as work:
        diff = git_diff(work, before, after)
        if not diff:
            return
        registry = Registry(work / "patches")
        registry.add("p", diff)
        root, oracle = work / "engine", work / "oracle"
        for tree in (root, oracle):
            tree.mkdir()
            write_tree(tree, before)
        start = read_tree(root)
        git_apply(work, oracle, diff)
        assert run(registry, root, "status") == (3, "unapplied")
        assert run(registry, root, "apply")[0] == 0
        assert read_tree(root) == read_tree(oracle)
        assert run(registry, root, "status") == (0, "applied")
        assert run(registry, root, "revert")[0] == 0
        assert read_tree(root) == start
