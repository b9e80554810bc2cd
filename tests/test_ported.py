"""Issue #37: an upstream diff ported to an older or newer image of the engine, where the diff's blob ids prove
nothing (regression tests, through the real CLI on real temporary trees, `git apply` as the oracle).

Item 1: a hunk git anchors to an end of the file (no trailing context: the end; starting at line 1: the start)
has one place for each image, the pin, in the rival search as in the placement: after applying an appended
hunk, its context lines are the first lines of its own post-image, and that occurrence is not at the end of the
file, so it is no rival (the round trip read `ambiguous (expected line 291, matches at 276)`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Registry, cli, git, git_diff, read_tree, write_tree

PATH = "engine/mod.py"


def _lines(start: int, count: int, word: str = "line") -> list[bytes]:
    return [b"%s_%d = compute(%d)\n" % (word.encode(), i, i) for i in range(start, start + count)]


def _without_index(diff: bytes) -> bytes:
    return b"".join(line for line in diff.splitlines(keepends=True) if not line.startswith(b"index "))


def _git_apply(tmp_path: Path, tree: bytes, diff: bytes, *args: str) -> bytes | None:
    """What real `git apply` makes of the file (None: it refuses)."""
    root = tmp_path / f"git-{len(list(tmp_path.glob('git-*')))}"
    root.mkdir()
    write_tree(root, {PATH: tree})
    (root.parent / "oracle.diff").write_bytes(diff)
    done = git(root, "apply", *args, str(root.parent / "oracle.diff"), check=False)
    return None if done.returncode else read_tree(root)[PATH][0]


def _run(root: Path, registry: Registry, *args: str) -> int:
    return cli(*args[:1], "p", "--root", root, "--patches", registry.path, *args[1:]).code


def _round_trip(tmp_path: Path, registry: Registry, diff: bytes, tree: bytes) -> None:
    """The ported pristine tree reads unapplied; apply writes what git writes, which reads applied; revert gives
    the tree back; and the patched tree as git makes it reads applied on its own."""
    registry.add("p", diff)
    patched = _git_apply(tmp_path, tree, diff)
    assert patched is not None and patched != tree  # git applies it cleanly: the oracle
    root = tmp_path / "engine-root"
    root.mkdir()
    write_tree(root, {PATH: tree})
    status = cli("status", "p", "--root", root, "--patches", registry.path, "-v")
    assert status.code == 3, status.out + status.err
    assert _run(root, registry, "apply") == 0
    assert read_tree(root)[PATH][0] == patched
    assert _run(root, registry, "status") == 0
    assert _run(root, registry, "revert", "--force") == 0
    assert read_tree(root)[PATH][0] == tree
    write_tree(root, {PATH: patched})
    status = cli("status", "p", "--root", root, "--patches", registry.path, "-v")
    assert status.code == 0, status.out + status.err


@pytest.mark.parametrize("index", [True, False], ids=["index lines", "no index lines"])
def test_an_appended_hunk_on_an_older_shorter_image(tmp_path: Path, registry: Registry, index: bool) -> None:
    # `@@ -291,3 +291,122 @@` made on C (293 lines); the older image lacks 15 of C's lines above it.
    base = _lines(0, 293)
    after = base + _lines(0, 119, "added")
    diff = git_diff(tmp_path, {PATH: b"".join(base)}, {PATH: b"".join(after)})
    assert b"@@ -291,3 +291,122 @@" in diff
    older = base[:40] + base[55:]
    _round_trip(tmp_path, registry, diff if index else _without_index(diff), b"".join(older))


@pytest.mark.parametrize("index", [True, False], ids=["index lines", "no index lines"])
def test_a_prepended_hunk_on_a_newer_longer_image(tmp_path: Path, registry: Registry, index: bool) -> None:
    # `@@ -1,3 +1,8 @@` made on C; the newer image has 30 more lines below it. Once applied, the hunk's context
    # is at line 6, inside its own post-image: not at the start of the file, where git anchors the pre-image.
    base = _lines(0, 60)
    after = _lines(0, 5, "header") + base
    diff = git_diff(tmp_path, {PATH: b"".join(base)}, {PATH: b"".join(after)})
    assert b"@@ -1,3 +1,8 @@" in diff
    newer = base[:20] + _lines(0, 30, "newer") + base[20:]
    _round_trip(tmp_path, registry, diff if index else _without_index(diff), b"".join(newer))


def test_an_appended_hunk_on_the_diff_s_own_base_without_index_lines(tmp_path: Path, registry: Registry) -> None:
    # No offset at all, but nothing proves the file: the gap to the end of the file is exactly 0, as git says.
    base = _lines(0, 30)
    after = base + _lines(0, 4, "added")
    diff = _without_index(git_diff(tmp_path, {PATH: b"".join(base)}, {PATH: b"".join(after)}))
    _round_trip(tmp_path, registry, diff, b"".join(base))


# Item 2: a hunk whose added block repeats its own context, in a repeated block (a JSON list of near-identical
# objects). Content alone cannot tell the pristine ported file from a patched one with lines removed; the
# manifest's fingerprint of the image the patch targets ([base], and [base_applied] for the same file patched)
# proves it, as the blob ids prove it on the diff's own base.

ELEMENT = b'    {"name": "gemm", "dtype": "fp16", "tile": 128},\n'


def _json_list() -> list[bytes]:
    out = [b"[\n"]
    for i in range(30):
        out += [ELEMENT] * 3 + [b'    {"name": "attn_%d", "dtype": "bf16", "tile": 64},\n' % i]
    return [*out, b"]\n"]


def _fingerprint(tree: bytes, patched: bytes | None) -> str:
    import hashlib  # the oracle's own hashes: sha256 of the files, as `vendor --base-tree` records them

    table = f'[base]\n"{PATH}" = "{hashlib.sha256(tree).hexdigest()}"\n'
    if patched is not None:
        table += f'[base_applied]\n"{PATH}" = "{hashlib.sha256(patched).hexdigest()}"\n'
    return table


def _ported_json(tmp_path: Path) -> tuple[bytes, bytes, bytes]:
    """(the diff without index lines, the ported pristine file, git's patched one): one more gemm element next
    to three of them, made on C; the older image lacks eight of C's lines above it."""
    base = _json_list()
    after = [*base[:42], ELEMENT, *base[42:]]
    diff = _without_index(git_diff(tmp_path, {PATH: b"".join(base)}, {PATH: b"".join(after)}))
    older = b"".join(base[:5] + base[13:])
    patched = _git_apply(tmp_path, older, diff)
    assert patched is not None
    return diff, older, patched


def test_a_block_that_repeats_its_context_is_ambiguous_without_a_fingerprint(tmp_path: Path,
                                                                             registry: Registry) -> None:
    diff, older, _ = _ported_json(tmp_path)
    registry.add("p", diff)
    root = tmp_path / "engine-root"
    root.mkdir()
    write_tree(root, {PATH: older})
    assert _run(root, registry, "status") == 5
    assert _run(root, registry, "apply") == 1
    assert read_tree(root)[PATH][0] == older


def test_the_fingerprint_of_the_ported_image_proves_a_block_that_repeats_its_context(tmp_path: Path,
                                                                                     registry: Registry) -> None:
    diff, older, patched = _ported_json(tmp_path)
    registry.add("p", diff, extra=_fingerprint(older, patched))
    _round_trip_registered(tmp_path, registry, older, patched)


def test_a_file_that_differs_from_the_fingerprint_is_not_proved_by_it(tmp_path: Path, registry: Registry) -> None:
    # One line added at the top: neither digest is the file's, so content decides, and it cannot.
    diff, older, patched = _ported_json(tmp_path)
    registry.add("p", diff, extra=_fingerprint(older, patched))
    root = tmp_path / "engine-root"
    root.mkdir()
    for tree in (b"// drifted\n" + older, b"// drifted\n" + patched):
        write_tree(root, {PATH: tree})
        assert _run(root, registry, "status") == 5
        assert _run(root, registry, "apply", "--complete") == 1
        assert read_tree(root)[PATH][0] == tree


def test_base_applied_must_name_a_fingerprinted_file(tmp_path: Path, registry: Registry) -> None:
    diff, older, patched = _ported_json(tmp_path)
    registry.add("p", diff, extra=_fingerprint(older, patched).replace(f'"{PATH}"', '"engine/other.py"', 1))
    root = tmp_path / "engine-root"
    root.mkdir()
    write_tree(root, {PATH: older})
    result = cli("status", "p", "--root", root, "--patches", registry.path)
    assert result.code == 2, result.out + result.err
    assert "[base_applied]" in result.err and "engine/mod.py" in result.err


def _round_trip_registered(tmp_path: Path, registry: Registry, tree: bytes, patched: bytes) -> None:
    root = tmp_path / "engine-root"
    root.mkdir()
    write_tree(root, {PATH: tree})
    status = cli("status", "p", "--root", root, "--patches", registry.path, "-v")
    assert status.code == 3, status.out + status.err
    assert _run(root, registry, "apply") == 0
    assert read_tree(root)[PATH][0] == patched
    assert _run(root, registry, "status") == 0
    assert _run(root, registry, "revert", "--force") == 0
    assert read_tree(root)[PATH][0] == tree


def test_vendor_fingerprints_the_ported_image_so_that_status_can_read_it(tmp_path: Path) -> None:
    """`vendor --base-tree` on the ported image: content alone reads it `ambiguous`, so the fingerprint is taken
    with the tree named as the pristine image, [base] and [base_applied] both, and then the tree reads unapplied
    with them, the patched tree git makes reads applied, and apply writes git's tree."""
    import hashlib

    from tests.provenance_helpers import PID, add_entry

    diff, older, patched = _ported_json(tmp_path)
    patches = tmp_path / "patches"
    patches.mkdir()
    add_entry(patches, None)
    (tmp_path / "pr.diff").write_bytes(diff)
    base_tree = tmp_path / "base-tree"
    base_tree.mkdir()
    write_tree(base_tree, {PATH: older})
    done = cli("vendor", PID, "--patches", patches, "--from", tmp_path / "pr.diff", "--base-tree", base_tree)
    assert done.code == 0, done.out + done.err
    manifest = (patches / PID / "manifest.toml").read_text()
    assert f'"{PATH}" = "{hashlib.sha256(older).hexdigest()}"' in manifest
    assert "[base_applied]" in manifest and hashlib.sha256(patched).hexdigest() in manifest
    root = tmp_path / "engine-root"
    root.mkdir()
    write_tree(root, {PATH: older})
    assert cli("status", PID, "--root", root, "--patches", patches).code == 3
    assert cli("apply", PID, "--root", root, "--patches", patches).code == 0
    assert read_tree(root)[PATH][0] == patched
    assert cli("status", PID, "--root", root, "--patches", patches).code == 0
    write_tree(root, {PATH: b"// drifted\n" + older})  # not the fingerprinted image: nothing proves it
    assert cli("status", PID, "--root", root, "--patches", patches).code == 5


def test_vendor_drops_base_applied_when_a_new_diff_changes_the_hunk_set(tmp_path: Path) -> None:
    # [base_applied] is the image with *these* hunks applied: a new diff without --base-tree keeps [base] (the
    # same files are read) and drops the digest the new hunks would not give.
    from tests.provenance_helpers import PID, add_entry

    diff, older, _ = _ported_json(tmp_path)
    patches = tmp_path / "patches"
    patches.mkdir()
    add_entry(patches, None)
    (tmp_path / "pr.diff").write_bytes(diff)
    base_tree = tmp_path / "base-tree"
    base_tree.mkdir()
    write_tree(base_tree, {PATH: older})
    assert cli("vendor", PID, "--patches", patches, "--from", tmp_path / "pr.diff", "--base-tree", base_tree).code == 0
    other = diff.replace(b'+    {"name": "gemm"', b'+    {"name": "norm"')
    assert other != diff
    (tmp_path / "other.diff").write_bytes(other)
    done = cli("vendor", PID, "--patches", patches, "--from", tmp_path / "other.diff")
    assert done.code == 0, done.out + done.err
    manifest = (patches / PID / "manifest.toml").read_text()
    assert "[base]" in manifest and "[base_applied]" not in manifest


def test_a_hunk_git_places_above_the_one_before_it_on_a_fingerprinted_image(tmp_path: Path,
                                                                            registry: Registry) -> None:
    # The diff's hunks are in line order (the parser refuses any other), but on the ported image the block hunk 2
    # reads was moved to the top of the file: git searches each hunk outward from its own line with no lower
    # bound, and puts hunk 2 above hunk 1. The fingerprint proves that image, and patchkit writes what git writes:
    # the rewrite takes the hunks in the order of their places in the file, not in diff order.
    base = _lines(0, 100)
    after = [*base[:50], b"changed_50 = 50\n", *base[51:80], b"changed_80 = 80\n", *base[81:]]
    diff = git_diff(tmp_path, {PATH: b"".join(base)}, {PATH: b"".join(after)})
    assert diff.count(b"\n@@ ") == 2
    ported = b"".join(base[77:84] + base[:77] + base[84:])
    patched = _git_apply(tmp_path, ported, diff)
    assert patched is not None and patched.startswith(b"".join(base[77:80]) + b"changed_80 = 80\n")
    registry.add("p", diff, extra=_fingerprint(ported, patched))
    _round_trip_registered(tmp_path, registry, ported, patched)
