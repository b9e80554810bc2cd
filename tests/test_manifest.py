"""manifest.py and registry.py: every key validated, errors that name the file and line, registry lookup."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from patchkit.errors import ManifestError, PendingPatchError, RegistryError
from patchkit.manifest import load_manifest
from patchkit.registry import find_locations, resolve_patch
from tests.conftest import cli

GOOD = """\
id = "p1"
title = "t"
diff = "p.diff"
sha256 = "{sha}"

[upstream]
repo = "ROCm/ATOM"
pr = 2106

[target]
name = "ATOM"
pinned_commit = "unknown"

[exclude]
"atom/x.py" = "not ported"

[waiver]
introduced_by = 2816
"""


def write(folder: Path, text: str, diff: bytes | None = b"d\n") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if diff is not None:
        (folder / "p.diff").write_bytes(diff)
    sha = hashlib.sha256(diff or b"").hexdigest()
    (folder / "manifest.toml").write_text(text.replace("{sha}", sha), encoding="utf-8")
    return folder


def test_good_manifest(tmp_path: Path) -> None:
    spec = load_manifest(write(tmp_path / "p1", GOOD))
    assert spec.upstream.url == "https://github.com/ROCm/ATOM/pull/2106"
    assert spec.target.pinned_commit is None  # "unknown" is represented, not faked
    assert spec.strip == 1
    assert spec.introduced_by == 2816
    assert [(e.pattern, e.reason) for e in spec.excludes] == [("atom/x.py", "not ported")]
    assert spec.read_diff() == b"d\n"


@pytest.mark.parametrize(
    ("edit", "message", "line"),
    [
        (lambda t: t.replace('title = "t"', 'title = "t"\ncolour = "red"'), "unknown key colour", 3),
        (lambda t: t.replace("pr = 2106", "pr = 2106\nbranch = 1"), "unknown key upstream.branch", 9),
        (lambda t: t.replace('"not ported"', '""'), "needs a reason", 15),
        (lambda t: t.replace('id = "p1"', 'id = "p2"'), "does not match the folder", 1),
        (lambda t: t.replace('diff = "p.diff"', 'diff = "../../etc/passwd"'), "inside the patch folder", 3),
        (lambda t: t.replace("pr = 2106", 'pr = "2106"'), "must be an integer", 8),
        (lambda t: t.replace('pinned_commit = "unknown"', 'pinned_commit = "abc"'), "40-hex", 12),
        (lambda t: t.replace('repo = "ROCm/ATOM"', 'repo = "ATOM"'), "owner/name", 7),
        (lambda t: t.replace('title = "t"\n', ""), "missing required key title", None),
        (lambda t: t.replace("introduced_by = 2816", "introduced_by = true"), "must be an integer", 18),
        (lambda t: "not = toml = at all", "not valid TOML", None),
    ],
)
def test_bad_manifests_name_the_line(tmp_path: Path, edit, message: str, line: int | None) -> None:  # type: ignore[no-untyped-def]
    folder = write(tmp_path / "p1", edit(GOOD))
    with pytest.raises(ManifestError, match=message) as info:
        load_manifest(folder)
    where = info.value.where or ""
    assert where.startswith(str(folder / "manifest.toml"))
    if line is not None:
        assert where.endswith(f":{line}")


def test_hash_mismatch_is_refused_before_anything_else(tmp_path: Path) -> None:
    folder = write(tmp_path / "p1", GOOD)
    (folder / "p.diff").write_bytes(b"tampered\n")
    with pytest.raises(ManifestError, match="sha256") as info:
        load_manifest(folder).read_diff()
    assert info.value.where == f"{folder / 'manifest.toml'}:4"


def test_pending_entry_says_how_to_vendor(tmp_path: Path) -> None:
    folder = write(tmp_path / "p1", GOOD.replace('sha256 = "{sha}"\n', ""), diff=None)
    spec = load_manifest(folder)
    assert spec.pending
    with pytest.raises(PendingPatchError) as info:
        spec.read_diff()
    assert info.value.hint is not None and "patchkit vendor p1" in info.value.hint


def test_registry_lookup_and_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reg = tmp_path / "regs" / "one"
    write(reg / "p1", GOOD)
    (tmp_path / "pyproject.toml").write_text('[tool.patchkit]\npatches = "regs/one"\nwaivers = "docs/waiver"\n')
    monkeypatch.delenv("PATCHKIT_PATCHES", raising=False)
    locs = find_locations(cwd=tmp_path)
    assert (locs.patches, locs.waivers) == (tmp_path / "regs/one", tmp_path / "docs/waiver")
    monkeypatch.setenv("PATCHKIT_PATCHES", str(tmp_path / "env"))
    assert find_locations(cwd=tmp_path).patches == tmp_path / "env"
    assert find_locations(patches="opt", cwd=tmp_path).patches == Path("opt")

    assert resolve_patch("p1", reg).id == "p1"
    assert resolve_patch(str(reg / "p1"), tmp_path).id == "p1"
    assert resolve_patch(str(reg / "p1" / "manifest.toml"), tmp_path).id == "p1"
    with pytest.raises(RegistryError, match="known patches: p1"):
        resolve_patch("p9", reg)


def test_cli_bad_manifest_exits_2_without_traceback(tmp_path: Path) -> None:
    folder = write(tmp_path / "reg" / "p1", GOOD.replace('title = "t"', 'title = 5'))
    root = tmp_path / "engine"
    root.mkdir()
    res = cli("apply", "p1", "--root", root, "--patches", folder.parent)
    assert res.code == 2
    assert "title must be a string" in res.err and "manifest.toml:2" in res.err
    assert "Traceback" not in res.err + res.out
    assert not (root / ".patchkit").exists()  # refused before the tree was touched
