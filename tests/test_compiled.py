"""The compiled hunk set (`patchkit compile`): the same answers as a parse, or it is ignored and the diff parsed.

Every run is the real CLI on a real temporary tree; whether the diff was parsed is observed by counting the
calls of the parser (wrapped, not replaced).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import patchkit.diff.compiled as compiled_module
from patchkit.diff import filtering
from patchkit.diff.hunkset import HunkSet
from tests.conftest import Registry, cli, copy_tree, git_diff, read_tree, write_tree

MAGIC = b"patchkit-compiled-hunk-set-3\n"  # the format's first line, written out: the oracle imports nothing

BEFORE: dict[str, bytes | tuple[bytes, bool] | None] = {
    "pkg/core.py": b"".join(b"x = %d\n" % (i % 5) for i in range(60)),  # repeated lines: look-alikes
    "pkg/crlf.py": b"a\r\nb\r\nc\r\n",
    "pkg/tail.py": b"no newline at the end",
    "pkg/old.py": b"".join(b"def f%d():\n    return %d\n" % (i, i) for i in range(10)),
    "pkg/gone.py": b"bye\n",
    "pkg/run.sh": b"#!/bin/sh\necho hi\n",
    "pkg/skip.py": b"left alone\n",
    "pkg/caf\xc3\xa9 name.py": b"odd name\n",
}
AFTER: dict[str, bytes | tuple[bytes, bool] | None] = {
    "pkg/core.py": b"".join(b"x = %d\n" % (i % 5) for i in range(60) if i not in (3, 40)) + b"tail = 1\n",
    "pkg/crlf.py": b"a\r\nB\rlone CR\r\nc\r\n",  # a lone CR inside a line: no line break to a diff
    "pkg/tail.py": b"no newline at the end, still",
    "pkg/old.py": None,
    "pkg/new_name.py": b"".join(b"def f%d():\n    return %d\n" % (i, i) for i in range(10)).replace(b"n 4", b"n 44"),
    "pkg/gone.py": None,
    "pkg/run.sh": (b"#!/bin/sh\necho hi\n", True),
    "pkg/skip.py": b"changed, but excluded\n",
    "pkg/fresh/made.py": b"made = True\n",
    "pkg/caf\xc3\xa9 name.py": b"odd name!\n",
}
EXCLUDE = {"pkg/skip.py": "not ported"}


@pytest.fixture
def case(tmp_path: Path, registry: Registry) -> Iterator[tuple[Path, Path, Path]]:
    """(registry, root, pristine copy of the root) for one patch `p` with an exclude."""
    diff = git_diff(tmp_path, BEFORE, AFTER)
    registry.add("p", diff, exclude=EXCLUDE)
    root = tmp_path / "root"
    root.mkdir()
    write_tree(root, BEFORE)
    pristine = tmp_path / "pristine"
    copy_tree(root, pristine)
    yield registry.path, root, pristine


def restore(root: Path, pristine: Path) -> None:
    shutil.rmtree(root)
    copy_tree(pristine, root)


_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")


def untimed(text: str) -> str:
    """Output without the record's timestamps (the only thing two runs seconds apart may differ in)."""
    return _TIME.sub("TIME", text)


def run_all(patches: Path, root: Path) -> list[tuple[int, str, str, dict[str, tuple[bytes, bool]]]]:
    """status (text, -v, --json), apply, status again, revert: every output and the tree after each."""
    seen = []
    for args in (["status", "p", "-v"], ["status", "p", "--json"], ["apply", "p", "-v"], ["status", "p", "-v"],
                 ["apply", "--all"], ["revert", "p"], ["status", "--all", "--json"]):
        result = cli(*args, "--root", root, "--patches", patches)
        seen.append((result.code, untimed(result.out), untimed(result.err), read_tree(root)))
    return seen


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The diffs parsed so far (the parser is wrapped, not replaced): none means the compiled file was used."""
    seen: list[str] = []
    real = filtering._parse

    def counted(spec: Any, data: bytes) -> Any:
        seen.append(spec.id)
        return real(spec, data)

    monkeypatch.setattr(filtering, "_parse", counted)
    return seen


def compiled_file(patches: Path) -> Path:
    return patches / "p" / "p.compiled"


def read_parts(path: Path) -> tuple[dict[str, Any], bytes]:
    data = path.read_bytes()
    assert data.startswith(MAGIC)
    rest = data[len(MAGIC) + 32:]
    size = int.from_bytes(rest[:4], "big")
    return json.loads(rest[4:4 + size]), rest[4 + size:]


def seal(path: Path, header: Any, body: bytes, raw_header: bytes | None = None) -> None:
    """Write a file with a correct checksum around any header and body (so only the structure checks judge it)."""
    head = raw_header if raw_header is not None else json.dumps(header).encode()
    payload = len(head).to_bytes(4, "big") + head + body
    path.write_bytes(MAGIC + hashlib.sha256(payload).digest() + payload)
    os.chmod(path, 0o644)


def test_compile_then_every_command_answers_as_without(case: tuple[Path, Path, Path], parses: list[str]) -> None:
    patches, root, pristine = case
    parsed = run_all(patches, root)
    restore(root, pristine)
    result = cli("compile", "--patches", patches)
    assert result.code == 0, result.err
    assert "compiled p: " in result.out
    assert compiled_file(patches).is_file()
    parses.clear()
    assert run_all(patches, root) == parsed
    assert parses == []  # every run loaded the compiled file
    assert parsed[2][0] == 0 and parsed[2][3] != read_tree(pristine)  # the apply did apply (the check has teeth)


def test_compile_names_patches_and_skips_pending(case: tuple[Path, Path, Path], registry: Registry) -> None:
    patches, _, _ = case
    pending = registry.add("q", b"")
    (pending / "change.diff").unlink()
    manifest = pending / "manifest.toml"
    manifest.write_text("\n".join(line for line in manifest.read_text().splitlines() if not line.startswith("sha256")))
    result = cli("compile", "--patches", patches)
    assert result.code == 0, result.err
    assert "patch q is pending" in result.err
    assert not (pending / "q.compiled").exists()
    compiled_file(patches).unlink()
    assert cli("compile", "p", "--patches", patches).code == 0
    assert compiled_file(patches).is_file()


def test_a_bad_diff_is_the_same_error_and_nothing_is_written(case: tuple[Path, Path, Path]) -> None:
    patches, root, _ = case
    (patches / "p" / "change.diff").write_bytes(b"not a diff\n")
    status = cli("status", "p", "--root", root, "--patches", patches)
    result = cli("compile", "--patches", patches)
    assert result.code == status.code == 2
    assert result.err == status.err
    assert not compiled_file(patches).exists()


def _edit_diff(patches: Path) -> None:
    diff = patches / "p" / "change.diff"
    data = diff.read_bytes().replace(b"+tail = 1\n", b"+tail = 2\n")
    diff.write_bytes(data)
    manifest = patches / "p" / "manifest.toml"
    text = manifest.read_text()
    old = next(line for line in text.splitlines() if line.startswith("sha256"))
    manifest.write_text(text.replace(old, f'sha256 = "{hashlib.sha256(data).hexdigest()}"'))


def _edit_exclude(patches: Path) -> None:
    manifest = patches / "p" / "manifest.toml"
    manifest.write_text(manifest.read_text() + '"pkg/tail.py" = "not wanted either"\n')


def _edit_placement(patches: Path) -> None:
    manifest = patches / "p" / "manifest.toml"
    manifest.write_text(manifest.read_text().replace("strip = 1\n", 'strip = 1\nprefix = "sub/"\n'))


@pytest.mark.parametrize("change", ["diff edited", "exclude added", "prefix added", "version changed"])
def test_a_stale_compiled_file_is_ignored(case: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch,
                                         tmp_path: Path, parses: list[str], change: str) -> None:
    patches, root, pristine = case
    assert cli("compile", "--patches", patches).code == 0
    if change == "diff edited":
        _edit_diff(patches)
    elif change == "exclude added":
        _edit_exclude(patches)
    elif change == "prefix added":
        _edit_placement(patches)
        (root / "sub").mkdir()
        for name in os.listdir(root):
            if name != "sub":
                shutil.move(str(root / name), str(root / "sub" / name))
    else:
        monkeypatch.setattr(compiled_module, "__version__", "999.0")
    # The oracle: the same registry without the compiled file.
    bare = tmp_path / "bare"
    shutil.copytree(patches, bare)
    (bare / "p" / "p.compiled").unlink()
    tree = tmp_path / "tree2"
    copy_tree(root, tree)
    for args in (["status", "p", "-v"], ["apply", "p"], ["status", "p", "--json"]):
        parses.clear()
        got = cli(*args, "--root", root, "--patches", patches)
        assert parses == ["p"], args  # the stale file was not used
        want = cli(*args, "--root", tree, "--patches", bare)
        assert (got.code, untimed(got.out.replace(str(patches), "R").replace(str(root), "T")),
                untimed(got.err.replace(str(patches), "R").replace(str(root), "T"))) == (
            want.code, untimed(want.out.replace(str(bare), "R").replace(str(tree), "T")),
            untimed(want.err.replace(str(bare), "R").replace(str(tree), "T")))
        assert read_tree(root) == read_tree(tree)
    assert read_tree(root) != read_tree(pristine)


def test_an_edited_diff_under_an_old_pin_is_still_refused(case: tuple[Path, Path, Path]) -> None:
    patches, root, _ = case
    before = cli("status", "p", "--root", root, "--patches", patches)
    assert cli("compile", "--patches", patches).code == 0
    diff = patches / "p" / "change.diff"
    diff.write_bytes(diff.read_bytes().replace(b"+tail = 1\n", b"+tail = 2\n"))
    result = cli("status", "p", "--root", root, "--patches", patches)
    assert before.code == 3
    assert result.code == 2 and "the manifest records" in result.err


def _hostile_variants(header: dict[str, Any], body: bytes) -> Iterator[tuple[str, Any, bytes]]:
    files = header["files"]
    first = files[0]
    row = 11  # a file's hunk rows are one flat list of ints, 11 a hunk
    hunk = first[8][:row]

    def with_file(i: int, value: Any) -> dict[str, Any]:
        f = list(first)
        f[i] = value
        return {**header, "files": [f, *files[1:]]}

    def with_hunk(i: int, value: Any) -> dict[str, Any]:
        h = list(hunk)
        h[i] = value
        f = list(first)
        f[8] = [*h, *first[8][row:]]
        return {**header, "files": [f, *files[1:]]}

    yield "header is a list", [header], body
    yield "no files", {**header, "files": []}, body
    yield "files not a list", {**header, "files": "x"}, body
    yield "excluded not strings", {**header, "excluded": [1]}, body
    yield "excluded path escapes", {**header, "excluded": ["../x"]}, body
    yield "path escapes the root", with_file(1, "../outside.py"), body
    yield "path into .git", with_file(1, ".git/config"), body
    yield "absolute path", with_file(0, "/etc/passwd"), body
    yield "path is a number", with_file(0, 7), body
    yield "no path at all", with_file(0, None) | {"files": [[None, None, *first[2:]], *files[1:]]}, body
    yield "symlink mode", with_file(3, 0o120000), body
    yield "bool mode", with_file(3, True), body
    yield "binary", with_file(5, True), body
    yield "blob not hex", with_file(6, "zz\n"), body
    yield "hunks not a list", with_file(8, {}), body
    yield "short file row", {**header, "files": [first[:8], *files[1:]]}, body
    yield "short hunk row", {**header, "files": [[*first[:8], hunk[:-1]], *files[1:]]}, body
    yield "long hunk row", {**header, "files": [[*first[:8], [*hunk, 0]], *files[1:]]}, body
    yield "hunk rows nested", {**header, "files": [[*first[:8], [hunk]], *files[1:]]}, body
    yield "huge count", with_hunk(3, 10 ** 12), body
    yield "unknown flag", with_hunk(8, 4), body
    yield "huge negative move", with_hunk(9, -10 ** 12), body
    empty_old = [None, "pkg/x.py", None, 0o100644, 1, False, None, None, [1, 2, 0, 0, 1, 0, 0, 0, 1, 0, 0]]
    yield "no-newline flag on an empty image", {**header, "files": [empty_old]}, b""
    yield "negative", with_hunk(2, -1), body
    yield "float", with_hunk(2, 1.5), body
    yield "bool count", with_hunk(0, True), body
    yield "index 0", with_hunk(0, 0), body
    yield "leading past the image", with_hunk(6, 10 ** 6), body
    yield "trailing past the image", with_hunk(7, 10 ** 6), body
    yield "old lines in a created file", {**header, "files": [[None, first[1], None, *first[3:]], *files[1:]]}, body
    many = next(i for i, f in enumerate(files) if len(f[8]) > row)  # a file of several hunks: the last one's flag
    later = [*files[:many], [*files[many][:8], [*files[many][8][:-3], 4, *files[many][8][-2:]]], *files[many + 1:]]
    yield "a later hunk's flag unknown", {**header, "files": later}, body
    yield "count does not fit the lines", with_hunk(3, hunk[3] + 1), body
    yield from _out_of_order_variants(header, body, many)
    yield "body truncated", header, body[:-3]
    yield "body too long", header, body + b"more\n"
    yield "a partial line after the body", header, body + b"junk"
    yield "empty body", header, b""
    yield "lines of another count", header, body.replace(b"\n", b"", 1)
    yield "deep nesting", None, body
    yield "not json", None, body


def _out_of_order_variants(header: dict[str, Any], body: bytes, many: int) -> Iterator[tuple[str, Any, bytes]]:
    """A file's first two hunks swapped (rows and image lines, numbers and diff lines left in place: a swapped
    diff as the compile would have written it), and its second hunk moved onto the first on one side."""
    row = 11
    files = header["files"]
    rows = files[many][8]
    first, second = rows[:row], rows[row:2 * row]
    lines = [line + b"\n" for line in body.split(b"\n")[:-1]]  # LF alone ends a line (a CR is content)
    at = sum(sum(f[8][3::row]) + sum(f[8][5::row]) for f in files[:many])  # the earlier files' image lines
    size = (first[3] + first[5], second[3] + second[5])
    swapped_body = b"".join(lines[:at] + lines[at + size[0]:at + sum(size)] + lines[at:at + size[0]]
                            + lines[at + sum(size):])
    swapped = [*first[:2], *second[2:], *second[:2], *first[2:], *rows[2 * row:]]

    def with_rows(new_rows: list[int]) -> dict[str, Any]:
        return {**header, "files": [*files[:many], [*files[many][:8], new_rows], *files[many + 1:]]}

    assert first[2] + first[3] <= second[2] and first[4] + first[5] <= second[4]  # in line order as compiled
    yield "a file's hunks out of line order", with_rows(swapped), swapped_body
    for side, column in (("old", 2), ("new", 4)):
        onto = [*first, *second[:column], first[column], *second[column + 1:], *rows[2 * row:]]
        yield f"a hunk overlapping the one before on the {side} side", with_rows(onto), body


@pytest.fixture
def compiled_case(case: tuple[Path, Path, Path]) -> tuple[Path, Path, Path, list[tuple[int, str, str]]]:
    patches, root, pristine = case
    want = [(r.code, r.out, r.err) for r in (cli("status", "p", "-v", "--root", root, "--patches", patches),)]
    assert cli("compile", "--patches", patches).code == 0
    return patches, root, pristine, want


def test_a_hostile_compiled_file_is_ignored(
    compiled_case: tuple[Path, Path, Path, list[tuple[int, str, str]]], tmp_path: Path, parses: list[str]
) -> None:
    patches, root, pristine, want = compiled_case
    path = compiled_file(patches)
    good = path.read_bytes()
    header, body = read_parts(path)
    outside = tmp_path / "outside.py"
    variants = list(_hostile_variants(header, body))
    for name, bad_header, bad_body in variants:
        raw = None
        if name == "deep nesting":
            raw = b"[" * 100_000 + b"]" * 100_000
        elif name == "not json":
            raw = b"{\"binding\": "
        seal(path, bad_header, bad_body, raw)
        parses.clear()
        status = cli("status", "p", "-v", "--root", root, "--patches", patches)
        assert [(status.code, status.out, status.err)] == want, name
        assert parses == ["p"], name  # refused, so parsed
        applied = cli("apply", "p", "--root", root, "--patches", patches)
        assert applied.code == 0, (name, applied.err)
        assert not outside.exists() and not (root / ".git").exists(), name
        restore(root, pristine)
    for name, damage in (("truncated", good[:len(good) // 2]), ("magic only", MAGIC), ("empty", b""),
                         ("checksum off", good[:-1] + bytes([good[-1] ^ 1]))):
        path.write_bytes(damage)
        parses.clear()
        status = cli("status", "p", "-v", "--root", root, "--patches", patches)
        assert [(status.code, status.out, status.err)] == want, name
        assert parses == ["p"], name
    path.write_bytes(good)
    parses.clear()
    assert cli("status", "p", "--root", root, "--patches", patches).code == 3
    assert parses == []  # the control: the good file is used
    print(f"{len(variants) + 4} hostile files, each ignored")


def test_random_damage_never_crashes(compiled_case: tuple[Path, Path, Path, list[tuple[int, str, str]]],
                                    tmp_path: Path) -> None:
    """Random values anywhere in the header (resealed, so the structure checks alone judge): exit 3 or 0, never
    an internal error, never a write outside the root."""
    patches, root, pristine, want = compiled_case
    path = compiled_file(patches)
    header, body = read_parts(path)
    rng = random.Random(2531)
    nasty: list[Any] = [None, True, False, 0, -1, 1, 2, 10 ** 9, 10 ** 30, 1.0, "", "../x", ".patchkit/x", [], {},
                        [[]], "a" * 5000, 0o120000, 0o160000, "deadbeef"]
    counts: dict[int, int] = {}
    around = outside_image(tmp_path, root, path)
    for n in range(150):
        mutated = json.loads(json.dumps(header))
        # a random leaf (or a random list) of the header gets a nasty value
        node: Any = mutated
        while True:
            keys = list(node) if isinstance(node, dict) else list(range(len(node)))
            if not keys:
                break
            key = rng.choice(keys)
            child = node[key]
            if isinstance(child, (dict, list)) and child and rng.random() < 0.8:
                node = child
                continue
            node[key] = rng.choice(nasty)
            break
        seal(path, mutated, body)
        result = cli("apply", "p", "--root", root, "--patches", patches)
        counts[result.code] = counts.get(result.code, 0) + 1
        assert result.code in (0, 1, 2), (n, result.err)
        assert outside_image(tmp_path, root, path) == around, n
        restore(root, pristine)
        if n % 50 == 49:
            print(f"{n + 1} damaged files, exit codes {counts}")
    assert want[0][0] == 3


def outside_image(top: Path, root: Path, compiled: Path) -> dict[str, bytes]:
    """Every file under `top` but the root and the compiled file: what a run must never change."""
    seen = {}
    for dirpath, _, names in os.walk(top):
        for name in names:
            path = Path(dirpath, name)
            if not path.is_relative_to(root) and path != compiled and not path.is_symlink():
                seen[str(path)] = path.read_bytes()
    return seen


def lie(patches: Path, new_line: bytes, path: str | None = None) -> None:
    """A compiled file correctly bound to the diff whose hunks are not the diff's: the first hunk's new image
    (and optionally the first file's paths) replaced."""
    target = compiled_file(patches)
    header, body = read_parts(target)
    first = header["files"][0]
    old_len = first[8][3]  # the body is every image's lines in order: the first hunk's old image first
    lines = body.split(b"\n")
    lines[old_len] = new_line.rstrip(b"\n")  # the first line of its new image
    if path is not None:
        first[0] = first[1] = path
    seal(target, header, b"\n".join(lines))


def test_a_lying_compiled_file_is_caught_by_lint_and_stays_in_the_root(
    compiled_case: tuple[Path, Path, Path, list[tuple[int, str, str]]], tmp_path: Path
) -> None:
    patches, root, _, _ = compiled_case
    lint_args = ("lint", "--patches", patches, "--waivers", tmp_path / "no-waivers", "--no-scan")
    clean = cli(*lint_args)
    assert "PK105" not in clean.out + clean.err
    lie(patches, b"import os; os.system('id')\n")
    applied = cli("apply", "p", "--root", root, "--patches", patches)
    assert applied.code == 0
    # Bound correctly, in the registry: believed as the registry is (what it wrote is its own hunk, in the root).
    assert any(b"os.system" in data for data, _ in read_tree(root).values())
    found = cli(*lint_args)
    assert "PK105" in found.out + found.err, found.out + found.err
    assert "p.compiled" in found.out + found.err


def test_a_lying_compiled_file_is_not_believed_against_a_pinned_hunk_set(
    compiled_case: tuple[Path, Path, Path, list[tuple[int, str, str]]]
) -> None:
    patches, root, _, _ = compiled_case
    result = cli("show", "p", "--patches", patches, "--json")
    digest = json.loads(result.out).get("hunk_set_sha256") if result.code == 0 else None
    if digest is None:
        pytest.skip("show --json gives no hunk_set_sha256 here")
    manifest = patches / "p" / "manifest.toml"
    manifest.write_text(manifest.read_text().replace("strip = 1\n", f'strip = 1\nhunkset_sha256 = "{digest}"\n'))
    assert cli("compile", "--patches", patches).code == 0
    honest = cli("apply", "p", "--root", root, "--patches", patches, "--dry-run")
    lie(patches, b"import os; os.system('id')\n")
    lying = cli("apply", "p", "--root", root, "--patches", patches, "--dry-run")
    assert (lying.code, lying.out) == (honest.code, honest.out)
    assert cli("apply", "p", "--root", root, "--patches", patches).code == 0
    assert not any(b"os.system" in data for data, _ in read_tree(root).values())


def test_a_first_text_status_from_the_compiled_file_hashes_no_hunk_set(
    compiled_case: tuple[Path, Path, Path, list[tuple[int, str, str]]], monkeypatch: pytest.MonkeyPatch,
    parses: list[str],
) -> None:
    """An unpinned manifest: the compiled set is taken without its digest, which a text status never prints
    (~30 ms of a large first status); --json prints it, and computes it once; the answers are as before."""
    patches, root, _, want = compiled_case
    hashed: list[int] = []
    real = HunkSet.__dict__["digest"].func

    def counted(self: HunkSet) -> str:
        hashed.append(1)
        return str(real(self))

    counting = functools.cached_property(counted)
    counting.__set_name__(HunkSet, "digest")
    monkeypatch.setattr(HunkSet, "digest", counting)
    again = cli("status", "p", "-v", "--root", root, "--patches", patches)
    assert [(again.code, again.out, again.err)] == want
    assert (parses, hashed) == ([], [])  # the compiled set, and no digest
    shown = cli("status", "p", "--json", "--root", root, "--patches", patches)
    assert (parses, hashed) == ([], [1])
    compiled_file(patches).unlink()
    parsed = cli("status", "p", "--json", "--root", root, "--patches", patches)
    assert (shown.code, shown.out, shown.err) == (parsed.code, parsed.out, parsed.err)
    assert parses == ["p"] and len(json.loads(shown.out)["hunk_set_sha256"]) == 64


def test_lint_reports_a_stale_compiled_file(compiled_case: tuple[Path, Path, Path, list[tuple[int, str, str]]],
                                            tmp_path: Path) -> None:
    patches, _, _, _ = compiled_case
    _edit_exclude(patches)
    found = cli("lint", "--patches", patches, "--waivers", tmp_path / "no-waivers", "--no-scan")
    said = found.out + found.err
    assert "PK105" in said
    # The command the finding suggests, run as printed from another folder, removes exactly that file.
    command = re.search(r"`(rm -- [^`]+)`", said)
    assert command is not None, said
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    subprocess.run(command.group(1), shell=True, cwd=elsewhere, check=True)
    assert not compiled_file(patches).exists()
    again = cli("lint", "--patches", patches, "--waivers", tmp_path / "no-waivers", "--no-scan")
    assert "PK105" not in again.out + again.err


@pytest.mark.parametrize("damage", ["group-writable", "hard link", "symlink", "folder"])
def test_a_compiled_file_that_is_not_a_private_regular_file_is_ignored(
    compiled_case: tuple[Path, Path, Path, list[tuple[int, str, str]]], parses: list[str], damage: str
) -> None:
    patches, root, _, _ = compiled_case
    path = compiled_file(patches)
    parses.clear()
    assert cli("status", "p", "--root", root, "--patches", patches).code == 3
    assert parses == []  # the control: as written, it is used
    if damage == "group-writable":
        os.chmod(path, 0o664)
    elif damage == "hard link":
        os.link(path, patches / "p" / "kept")
    elif damage == "symlink":
        path.rename(patches / "p" / "kept")
        path.symlink_to("kept")
    else:
        path.unlink()
        path.mkdir()
    assert cli("status", "p", "--root", root, "--patches", patches).code == 3
    assert parses == ["p"]


def test_a_compiled_file_another_user_owns_is_ignored(
    compiled_case: tuple[Path, Path, Path, list[tuple[int, str, str]]], parses: list[str], user: tuple[int, int]
) -> None:
    """The attack is a file an unprivileged user wrote, read by root (`user` skips, saying so, when not root)."""
    uid, gid = user
    patches, root, _, _ = compiled_case
    path = compiled_file(patches)
    parses.clear()
    os.chown(path, uid, gid)
    assert cli("status", "p", "--root", root, "--patches", patches).code == 3
    assert parses == ["p"]
    os.chown(path, 0, 0)
    assert cli("status", "p", "--root", root, "--patches", patches).code == 3
    assert parses == ["p"]  # the control: the owner alone decided


def test_a_first_start_reads_and_writes_nothing_in_home(case: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """HOME may be shared (HOME=/tmp/... in CI): patchkit keeps no per-user parse cache there any more, so an
    entry planted where the old one lived is never read, and a run leaves HOME as it was."""
    patches, root, _ = case
    home = tmp_path / "home"
    planted = home / ".cache" / "patchkit" / "parsed-diffs"
    planted.mkdir(parents=True)
    (planted / "planted.bin").write_bytes(b"patchkit-parsed-diff-3\n" + b"\0" * 64)
    before = sorted((str(p), p.read_bytes() if p.is_file() else b"") for p in home.rglob("*"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PATCHKIT_", "XDG_"))}
    env.update(HOME=str(home), PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    for action in ("status", "apply", "status"):
        run = subprocess.run([sys.executable, "-m", "patchkit", action, "p", "--root", str(root), "--patches",
                              str(patches)], env=env, capture_output=True, check=False)
        assert run.returncode in (0, 3), run
    assert sorted((str(p), p.read_bytes() if p.is_file() else b"") for p in home.rglob("*")) == before


@pytest.mark.parametrize("dropped", ["removes lines", "adds lines"])
def test_a_hunk_excludes_move_survives_the_compiled_file(tmp_path: Path, registry: Registry,
                                                          parses: list[str], dropped: str) -> None:
    """A file touched twice with a hunk of its first section excluded: the later section's hunks are moved
    (Hunk.dropped_old, dropped_growth), and their header as the diff wrote it (messages, the hunk set's digest,
    `-v`) comes back from those moves. The compiled file must keep both: every answer as without it."""
    base = [b"line %d\n" % i for i in range(20)]
    if dropped == "removes lines":
        middle = [line for i, line in enumerate(base) if i not in (0, 3)]
    else:
        middle = [b"ADDED 0\n", *base[:3], b"ADDED 3\n", *base[3:]]
    middle[middle.index(b"line 15\n")] = b"EDIT 15\n"
    top = list(middle)
    top.insert(1, b"INSERTED\n")
    top.insert(12, b"LATER\n")
    first = git_diff(tmp_path, {"x.py": b"".join(base)}, {"x.py": b"".join(middle)}, context=1)
    second = git_diff(tmp_path, {"x.py": b"".join(middle)}, {"x.py": b"".join(top)}, context=1)
    registry.add("p", first + second, exclude={"x.py": "ignored"})
    manifest = registry.path / "p" / "manifest.toml"
    manifest.write_text(manifest.read_text().replace('"x.py" = "ignored"',
                                                     '"x.py" = { hunks = [1], reason = "not ours" }'))
    root = tmp_path / "root"
    write_tree(root, {"x.py": b"".join(base)})
    runs = [("status", "p", "-v"), ("status", "p", "--json"), ("show", "p")]

    def answers() -> list[tuple[int, str]]:
        return [(r.code, untimed(r.out)) for r in (cli(*a, "--root", root, "--patches", registry.path)
                                                   if a[0] == "status" else cli(*a, "--patches", registry.path)
                                                   for a in runs)]

    parsed = answers()
    assert cli("compile", "--patches", registry.path).code == 0
    parses.clear()
    assert answers() == parsed
    assert parses == []  # the compiled file answered
    if dropped == "removes lines":  # the later section's second hunk: its own header, looked for where moved
        assert "hunk 2 @@ -11,2 +12,3 @@: unapplied (expected line 13" in parsed[0][1], parsed[0][1]
