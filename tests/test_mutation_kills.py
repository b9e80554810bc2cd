"""Tests written to kill the survivors of the mutation run (scripts/mutation.py, docs/testing.md).

Each test names the mutant it was written against (its id in the run's output); each was seen failing with that
mutant applied to a copy of the module, and passing without it.
"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Registry, cli, git_diff, write_tree

BEFORE = {
    "engine/a.py": b"".join(b"a line %d\n" % i for i in range(1, 9)),
    "engine/b.py": b"".join(b"b line %d\n" % i for i in range(1, 9)),
}
AFTER = {
    "engine/a.py": BEFORE["engine/a.py"].replace(b"a line 4\n", b"a line 4 patched\n"),
    "engine/b.py": BEFORE["engine/b.py"].replace(b"b line 4\n", b"b line 4 patched\n"),
}


def test_a_refusal_names_the_conflicting_file_not_the_clean_one_before_it(tmp_path: Path, registry: Registry) -> None:
    """The first file is clean (not yet applied), the second one drifted: the refusal names the second one's hunk.

    Kills patchkit/judge/treestate.py:43:core/AddNot#2 (`if not verdict.state in (AMBIGUOUS, CONFLICT)`), which
    blamed the first file that is *not* undecided, with its own detail."""
    registry.add("two-files", git_diff(tmp_path, BEFORE, AFTER))
    root = tmp_path / "engine-root"
    write_tree(root, BEFORE)
    write_tree(root, {"engine/b.py": BEFORE["engine/b.py"].replace(b"b line 4\n", b"someone else\n")})
    res = cli("apply", "two-files", "--root", root, "--patches", registry.path, "--json")
    assert res.code == 1
    reason = res.json()["reason"]
    assert reason.endswith(" (engine/b.py hunk 1 @@ -1,7 +1,7 @@: at line 4 the diff expects 'b line 4' (or its "
                           "post-image), the file has 'someone else')"), reason
    assert (root / "engine/a.py").read_bytes() == BEFORE["engine/a.py"]
