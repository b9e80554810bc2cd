"""manifest.py and registry.py: every key validated, errors that name the file and line, registry lookup."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from patchkit.errors import ManifestError, PendingPatchError, RegistryError
from patchkit.input.manifest import load_manifest
from patchkit.input.registry import find_locations, resolve_patch
from tests.conftest import cli

# version_sensitive: TOML parsing is tomllib on 3.11+, tomli on 3.10 (input/tomlcompat.py): their error
# texts (the line a message names is read from them) and int() limits.
pytestmark = pytest.mark.version_sensitive

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


# ---------------------------------------------------------------------------------- origin, placement, lines

MULTI = GOOD.replace("pr = 2106", 'prs = [2106, "ROCm/aiter#77", "#12"]')


def test_several_prs_each_owner_repo_or_a_number_in_repo(tmp_path: Path) -> None:
    spec = load_manifest(write(tmp_path / "p1", MULTI))
    assert [str(p) for p in spec.upstream.prs] == ["ROCm/ATOM#2106", "ROCm/aiter#77", "ROCm/ATOM#12"]
    assert (spec.upstream.repo, spec.upstream.pr) == ("ROCm/ATOM", 2106)  # the first, for one-PR readers
    assert spec.upstream.prs[1].url == "https://github.com/ROCm/aiter/pull/77"
    assert not spec.upstream.is_local


def test_local_origin_needs_a_reason_and_no_pr(tmp_path: Path) -> None:
    local = GOOD.replace("pr = 2106", 'origin = "local"\nreason = "our own fix: no upstream PR"')
    spec = load_manifest(write(tmp_path / "p1", local))
    assert spec.upstream.is_local and spec.upstream.prs == () and spec.upstream.pr is None
    assert spec.upstream.reason == "our own fix: no upstream PR"
    for text, message, line in [
        (GOOD.replace("pr = 2106", 'origin = "local"'), "needs upstream.reason", 8),
        (GOOD.replace("pr = 2106", 'pr = 2106\norigin = "local"\nreason = "x"'), "but upstream.pr is set", 8),
        (GOOD.replace("pr = 2106", 'origin = "locale"'), "did you mean", 8),
        (GOOD.replace("pr = 2106", 'reason = "x"\npr = 2106'), "only for a local patch", 8),
        (GOOD.replace("pr = 2106", ""), "exactly one of pr = N and prs", 6),
        (GOOD.replace("pr = 2106", "pr = 2106\nprs = [3]"), "exactly one of pr = N and prs", 9),
        (MULTI.replace('"#12"', '"ROCm/ATOM#2106"'), "names ROCm/ATOM#2106 twice", 8),
        (MULTI.replace('"#12"', '"pull 12"'), "must be a PR number or", 8),
        (MULTI.replace('"#12"', "0"), "must be a positive PR number", 8),
        (GOOD.replace("pr = 2106", "prs = []"), "upstream.prs is empty", 8),
    ]:
        with pytest.raises(ManifestError, match=message) as info:
            load_manifest(write(tmp_path / "p1", text))
        assert (info.value.where or "").endswith(f":{line}"), (message, info.value.where)


def test_a_key_inside_a_table_is_reported_at_its_own_line(tmp_path: Path) -> None:
    # `name` exists at the top level too ("title" here plays decoy): the error must point into [target].
    text = 'name = "decoy"\n' + GOOD.replace('name = "ATOM"', "name = 3")
    with pytest.raises(ManifestError, match="unknown key name"):
        load_manifest(write(tmp_path / "p1", text))  # the top-level one is unknown: reported first, line 1
    # A file named like a top-level key: its exclude error belongs in [exclude], not at `title = ...`.
    text = GOOD.replace('"atom/x.py" = "not ported"', '"atom/x.py" = "not ported"\ntitle = ""')
    with pytest.raises(ManifestError, match="exclude 'title' needs a reason") as info:
        load_manifest(write(tmp_path / "p1", text))
    assert (info.value.where or "").endswith(":16")
    text = GOOD.replace("introduced_by = 2816", "introduced_by = -1").replace('pr = 2106', 'pr = 2106\n')
    with pytest.raises(ManifestError, match="introduced_by must be a positive") as info:
        load_manifest(write(tmp_path / "p1", text))
    assert (info.value.where or "").endswith(":19")


def test_unknown_keys_get_did_you_mean(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match=r"unknown key upstream\.pull") as info:
        load_manifest(write(tmp_path / "p1", GOOD.replace("pr = 2106", "pr = 2106\npull = 1")))
    assert "known keys here" in (info.value.hint or "")
    with pytest.raises(ManifestError, match="unknown key exlude") as info:
        load_manifest(write(tmp_path / "p1", GOOD.replace("[exclude]", "[exlude]")))
    assert "did you mean exclude?" in (info.value.hint or "")
    assert (info.value.where or "").endswith(":14")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('prefix = "aiter_meta"', "must end with '/'"),
        ('prefix = "../up/"', "plain relative folder"),
        ('prefix = "/abs/"', "plain relative folder"),
        ('prefix = "a//b/"', "plain relative folder"),
        ('prefix = "pkg/.git/"', "inside .git or .patchkit"),
        ('prefix = ".patchkit/"', "inside .git or .patchkit"),
        ('[paths]\n"csrc/" = "../x/"', "plain relative folder"),
        ('[paths]\n"csrc/" = "a/.git/"', "inside .git or .patchkit"),
        ('[paths]\n"csrc/" = 3', "must map to a folder string"),
        ('[paths]\n"csrc" = "x/"', "must end with '/'"),
    ],
)
def test_placement_is_checked_like_any_path(tmp_path: Path, extra: str, message: str) -> None:
    text = GOOD.replace('sha256 = "{sha}"', 'sha256 = "{sha}"\n' + extra + "\n[dummy_end]") \
        if extra.startswith("[") else GOOD.replace('sha256 = "{sha}"', 'sha256 = "{sha}"\n' + extra)
    text = text.replace("\n[dummy_end]", "")
    with pytest.raises(ManifestError, match=message):
        load_manifest(write(tmp_path / "p1", text))


def test_placement_and_hunk_excludes_load(tmp_path: Path) -> None:
    text = GOOD.replace('sha256 = "{sha}"', 'sha256 = "{sha}"\nprefix = "pkg/"\n[paths]\n"csrc/" = "meta/csrc/"\n'
                        '"csrc/deep/" = "other/"')
    text = text.replace('"atom/x.py" = "not ported"', '"atom/x.py" = { hunks = [3, 1], reason = "not ported" }')
    spec = load_manifest(write(tmp_path / "p1", text))
    assert spec.path_map.place("csrc/deep/k.cu") == "other/k.cu"  # the longest folder wins
    assert spec.path_map.place("csrc/k.cu") == "meta/csrc/k.cu"
    assert spec.path_map.place("csrcx/k.cu") == "pkg/csrcx/k.cu"
    assert spec.excludes[0].hunks == (1, 3)
    for bad, message in [
        ("{ hunks = [], reason = \"r\" }", "non-empty list"),
        ("{ hunks = [0], reason = \"r\" }", "non-empty list"),
        ("{ hunks = [true], reason = \"r\" }", "non-empty list"),
        ("{ hunks = [2, 2], reason = \"r\" }", "names a hunk twice"),
        ("{ hunks = [2] }", "needs a reason"),
        ("{ hunk = [2], reason = \"r\" }", "did you mean hunks"),
    ]:
        with pytest.raises(ManifestError, match=message) as info:
            load_manifest(write(tmp_path / "p1", GOOD.replace('"not ported"', bad)))
        assert (info.value.where or "").endswith(":15")
    with pytest.raises(ManifestError, match="names one file, not a glob"):
        load_manifest(write(tmp_path / "p1", GOOD.replace('"atom/x.py" = "not ported"',
                                                         '"atom/*.py" = { hunks = [1], reason = "r" }')))
