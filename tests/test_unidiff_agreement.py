"""parse_diff asks unidiff for the structure only (metadata_only) and takes each hunk's lines from the diff's own
bytes: those lines must be exactly the ones unidiff's full parse reads, hunk by hunk, on nasty diffs made by git.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from unidiff import PatchSet

from patchkit.diff.diffs import parse_diff
from tests.conftest import FileSpec, git_diff


def _full_unidiff_hunks(diff: bytes) -> list[tuple[tuple[bytes, ...], tuple[bytes, ...]]]:
    """Every hunk's (old, new) lines by unidiff's full parse, with its "\\ No newline" markers applied."""
    out = []
    for pf in PatchSet([line + "\n" for line in diff.decode("latin-1").split("\n")[:-1]]):
        for h in pf:
            old: list[bytes] = []
            new: list[bytes] = []
            last = ""
            for line in h:
                value = str(line.value).encode("latin-1")
                if line.line_type == "\\":
                    if last in (" ", "-"):
                        old[-1] = old[-1].removesuffix(b"\n")
                    if last in (" ", "+"):
                        new[-1] = new[-1].removesuffix(b"\n")
                    continue
                if line.line_type == "":
                    continue
                last = line.line_type
                if last in (" ", "-"):
                    old.append(value)
                if last in (" ", "+"):
                    new.append(value)
            out.append((tuple(old), tuple(new)))
    return out


def _nasty_tree(rng: random.Random, files: int) -> dict[str, FileSpec]:
    pool = [b"\n", b"\r\n", b"    return x\n", b"-- \n", b"--- a\n", b"+++ b\n", b"@@ -1 +1 @@\n", b"\\ x\n",
            b"caf\xc3\xa9\n", b"\xff\xfe latin\n", b"  \t\n", b"same\n", b"same\n", b"x\rcr inside\n"]
    tree: dict[str, FileSpec] = {}
    for i in range(files):
        body = b"".join(rng.choice(pool) if rng.random() < 0.5 else b"line %d\n" % rng.randrange(40)
                        for _ in range(rng.randrange(1, 60)))
        if rng.random() < 0.3:
            body = body.rstrip(b"\n")  # no newline at end of file
        tree[f"d/f{i}.txt"] = body
    return tree


def _edit(rng: random.Random, tree: dict[str, FileSpec]) -> dict[str, FileSpec]:
    out = dict(tree)
    for path, data in tree.items():
        assert isinstance(data, bytes)
        lines = data.splitlines(keepends=True)
        for _ in range(rng.randrange(0, 4)):
            at = rng.randrange(len(lines) + 1)
            lines[at:at + rng.randrange(0, 3)] = [rng.choice([b"\n", b"new %d\n" % at, b"-- \n", b"tail"])]
        out[path] = b"".join(lines)
    return out


@pytest.mark.parametrize("seed", range(12))
def test_hunk_lines_are_the_ones_unidiff_reads(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    before = _nasty_tree(rng, 6)
    diff = git_diff(tmp_path, before, _edit(rng, before))
    if not diff:
        pytest.skip("the random edit changed nothing")
    if seed % 2:  # as an editor that strips trailing blanks leaves it: blank context lines lose their space
        diff = b"\n".join(b"" if line == b" " else b"\r" if line == b" \r" else line for line in diff.split(b"\n"))
    ours = [(h.old_lines, h.new_lines) for f in parse_diff(diff, 1, "t.diff").files for h in f.hunks]
    assert ours == _full_unidiff_hunks(diff)
