"""prefix / [paths] placement, hunk-level excludes and several --target values, through the real CLI.

Diffs are made by real git against the package's own layout; the engine tree is laid out like a
dist-packages folder, so the placed paths differ from the diff's.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import Registry, cli, git_diff, read_tree, write_tree


def lines(name: str, count: int) -> bytes:
    return b"".join(b"%s %d\n" % (name.encode(), i) for i in range(1, count + 1))


KERNEL = lines("kernel", 40)


def edit(data: bytes, *pairs: tuple[bytes, bytes]) -> bytes:
    for old, new in pairs:
        assert data.count(old) == 1
        data = data.replace(old, new)
    return data


def test_prefix_and_paths_place_the_diff_under_the_root(tmp_path: Path, registry: Registry, engine: Path) -> None:
    # The upstream repo has csrc/ and aiter/; installed, csrc/ lives under aiter_meta/.
    before = {"csrc/k.cu": KERNEL, "aiter/ops.py": lines("ops", 12)}
    after = {"csrc/k.cu": edit(KERNEL, (b"kernel 20\n", b"kernel 20 fixed\n")),
             "aiter/ops.py": edit(lines("ops", 12), (b"ops 6\n", b"ops 6 fixed\n"))}
    diff = git_diff(tmp_path, before, after)
    registry.add("p", diff, extra='[paths]\n"csrc/" = "aiter_meta/csrc/"')
    write_tree(engine, {"aiter_meta/csrc/k.cu": KERNEL, "aiter/ops.py": lines("ops", 12),
                        "csrc/k.cu": KERNEL})  # a decoy at the diff's own path: never touched
    pristine = read_tree(engine)
    assert cli("status", "p", "--root", engine, "--patches", registry.path).code == 3
    result = cli("apply", "p", "--root", engine, "--patches", registry.path, "--json")
    assert result.code == 0, result.out + result.err
    assert sorted(f["path"] for f in result.json()["files"]) == ["aiter/ops.py", "aiter_meta/csrc/k.cu"]
    tree = read_tree(engine)
    assert tree["aiter_meta/csrc/k.cu"][0] == after["csrc/k.cu"]
    assert tree["csrc/k.cu"] == pristine["csrc/k.cu"]
    assert cli("apply", "p", "--root", engine, "--patches", registry.path).code == 0  # rerun: no-op
    assert cli("revert", "p", "--root", engine, "--patches", registry.path).code == 0
    assert read_tree(engine) == pristine


def test_prefix_moves_every_unmapped_path(tmp_path: Path, registry: Registry, engine: Path) -> None:
    diff = git_diff(tmp_path, {"k.py": KERNEL}, {"k.py": edit(KERNEL, (b"kernel 3\n", b"kernel three\n"))})
    registry.add("p", diff, extra='prefix = "aiter_meta/"')
    write_tree(engine, {"aiter_meta/k.py": KERNEL})
    assert cli("apply", "p", "--root", engine, "--patches", registry.path).code == 0
    assert b"kernel three" in (engine / "aiter_meta/k.py").read_bytes()
    # The digest covers the placement: the same diff placed elsewhere is another hunk set.
    registry.add("q", diff, extra='prefix = "elsewhere/"')
    ours = cli("list", "--patches", registry.path, "--json").json()["patches"]
    assert {p["patch"]: p["prefix"] for p in ours} == {"p": "aiter_meta/", "q": "elsewhere/"}


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to own the link test cleanly")
def test_a_placed_path_through_a_symlink_is_refused(tmp_path: Path, registry: Registry, engine: Path) -> None:
    diff = git_diff(tmp_path, {"k.py": KERNEL}, {"k.py": edit(KERNEL, (b"kernel 3\n", b"kernel three\n"))})
    registry.add("p", diff, extra='prefix = "meta/"')
    outside = tmp_path / "outside"
    write_tree(outside, {"k.py": KERNEL})
    (engine / "meta").symlink_to(outside)
    result = cli("apply", "p", "--root", engine, "--patches", registry.path)
    assert result.code == 2, result.out + result.err
    assert (outside / "k.py").read_bytes() == KERNEL


def test_placed_paths_that_meet_are_refused(tmp_path: Path, registry: Registry, engine: Path) -> None:
    diff = git_diff(tmp_path, {"csrc/k.py": KERNEL, "meta/k.py": KERNEL},
                    {"csrc/k.py": KERNEL + b"x\n", "meta/k.py": KERNEL + b"y\n"})
    registry.add("p", diff, extra='[paths]\n"csrc/" = "meta/"')
    result = cli("status", "p", "--root", engine, "--patches", registry.path)
    assert result.code == 2 and "both land at 'meta/k.py'" in result.err


FOUR = {"m.py": lines("m", 60)}
FOUR_AFTER = {"m.py": edit(lines("m", 60), *((b"m %d\n" % n, b"m %d changed\n" % n) for n in (5, 20, 35, 50)))}


def test_hunk_excludes_drop_hunks_from_reads_and_writes(tmp_path: Path, registry: Registry, engine: Path) -> None:
    diff = git_diff(tmp_path, FOUR, FOUR_AFTER)
    assert diff.count(b"\n@@ ") == 4
    registry.add("p", diff, extra="")
    manifest = registry.path / "p" / "manifest.toml"
    manifest.write_text(manifest.read_text() + '"m.py" = { hunks = [2, 3], reason = "not in this port" }\n')
    write_tree(engine, FOUR)
    # A tree that already has the dropped hunks' lines in some other form is still read only where kept.
    (engine / "m.py").write_bytes(edit(lines("m", 60), (b"m 20\n", b"m 20 locally different\n")))
    result = cli("apply", "p", "--root", engine, "--patches", registry.path, "--json")
    assert result.code == 0, result.out + result.err
    data = (engine / "m.py").read_bytes()
    assert b"m 5 changed" in data and b"m 50 changed" in data
    assert b"m 20 locally different" in data and b"m 35 changed" not in data
    assert [h["index"] for h in result.json()["files"][0]["hunks"]] == [1, 4]  # upstream numbering kept
    assert cli("revert", "p", "--root", engine, "--patches", registry.path).code == 0
    assert (engine / "m.py").read_bytes() == edit(lines("m", 60), (b"m 20\n", b"m 20 locally different\n"))


def test_the_hunk_choice_is_in_the_digest(tmp_path: Path, registry: Registry) -> None:
    diff = git_diff(tmp_path, FOUR, FOUR_AFTER)
    digests = {}
    for pid, hunks in (("a", "[2]"), ("b", "[3]"), ("c", "[2, 3]")):
        registry.add(pid, diff)
        manifest = registry.path / pid / "manifest.toml"
        manifest.write_text(manifest.read_text() + f'"m.py" = {{ hunks = {hunks}, reason = "r" }}\n')
        result = cli("vendor", pid, "--patches", registry.path, "--from", registry.path / pid / "change.diff",
                     "--json")
        assert result.code == 0, result.err
        digests[pid] = result.json()["hunk_set_sha256"]
    assert len(set(digests.values())) == 3


def test_a_hunk_that_does_not_exist_names_the_manifest_line(tmp_path: Path, registry: Registry, engine: Path) -> None:
    diff = git_diff(tmp_path, FOUR, FOUR_AFTER)
    registry.add("p", diff)
    manifest = registry.path / "p" / "manifest.toml"
    text = manifest.read_text() + '"m.py" = { hunks = [2, 5], reason = "r" }\n'
    manifest.write_text(text)
    write_tree(engine, FOUR)
    for args in (("status", "p", "--root", engine), ("vendor", "p", "--from", registry.path / "p" / "change.diff")):
        result = cli(*args, "--patches", registry.path)
        assert result.code == 2, result.err
        assert "drops hunk 5, but the diff has 4 hunks in that file" in result.err
        assert f"manifest.toml:{len(text.splitlines())}" in result.err
    assert read_tree(engine) == {"m.py": (FOUR["m.py"], False)}


def test_a_dead_exclude_gets_did_you_mean(tmp_path: Path, registry: Registry, engine: Path) -> None:
    diff = git_diff(tmp_path, {"pkg/model.py": KERNEL, "pkg/other.py": KERNEL},
                    {"pkg/model.py": KERNEL + b"x\n", "pkg/other.py": KERNEL + b"y\n"})
    registry.add("p", diff, exclude={"pkg/modle.py": "not ported"})
    result = cli("status", "p", "--root", engine, "--patches", registry.path)
    assert result.code == 2 and "did you mean 'pkg/model.py'?" in result.err


def _targets_registry(tmp_path: Path, registry: Registry) -> None:
    for pid, target, name in (("v", "vllm", "vllm/a.py"), ("k", "aiter", "aiter/b.py"), ("x", "atom", "atom/c.py")):
        diff = git_diff(tmp_path, {name: KERNEL}, {name: edit(KERNEL, (b"kernel 9\n", b"kernel nine\n"))})
        folder = registry.add(pid, diff)
        manifest = folder / "manifest.toml"
        manifest.write_text(manifest.read_text().replace('name = "engine"', f'name = "{target}"'))


@pytest.mark.parametrize("how", [("--target", "vllm", "--target", "aiter"), ("--target", "vllm,aiter")])
def test_several_targets_are_one_series(tmp_path: Path, registry: Registry, engine: Path, how: tuple[str, ...]) -> None:
    _targets_registry(tmp_path, registry)
    write_tree(engine, {"vllm/a.py": KERNEL, "aiter/b.py": KERNEL, "atom/c.py": KERNEL})
    # One of the two is drifted: all or nothing across both targets, so the other is not written either.
    (engine / "aiter/b.py").write_bytes(KERNEL.replace(b"kernel 9\n", b"kernel 9 drifted\n"))
    result = cli("apply", "--all", *how, "--root", engine, "--patches", registry.path, "--json")
    assert result.code == 1
    assert sorted(p["patch"] for p in result.json()["patches"]) == ["k", "v"]
    assert (engine / "vllm/a.py").read_bytes() == KERNEL
    (engine / "aiter/b.py").write_bytes(KERNEL)
    result = cli("apply", "--all", *how, "--root", engine, "--patches", registry.path, "--json")
    assert result.code == 0, result.out
    assert b"nine" in (engine / "vllm/a.py").read_bytes() and b"nine" in (engine / "aiter/b.py").read_bytes()
    assert (engine / "atom/c.py").read_bytes() == KERNEL
    records = sorted(p.name for p in (engine / ".patchkit/applied").iterdir())
    assert records == ["k.diff", "k.files", "k.json", "v.diff", "v.files", "v.json"]


def test_a_target_that_matches_nothing_stays_an_error(tmp_path: Path, registry: Registry, engine: Path) -> None:
    _targets_registry(tmp_path, registry)
    result = cli("status", "--all", "--target", "vllm,sglang", "--root", engine, "--patches", registry.path)
    assert result.code == 2 and "[target] name = 'sglang'" in result.err
    result = cli("status", "--all", "--target", "vllm,", "--root", engine, "--patches", registry.path)
    assert result.code == 2 and "empty name" in result.err


def test_list_shows_prs_origin_and_hunk_excludes(tmp_path: Path, registry: Registry) -> None:
    diff = git_diff(tmp_path, FOUR, FOUR_AFTER)
    folder = registry.add("p", diff)
    manifest = folder / "manifest.toml"
    manifest.write_text(manifest.read_text().replace("pr = 2106", 'prs = [2106, "other/kernels#7"]')
                        + '"m.py" = { hunks = [2], reason = "r" }\n')
    local = registry.add("l", diff)
    (local / "manifest.toml").write_text((local / "manifest.toml").read_text().replace(
        "pr = 2106", 'origin = "local"\nreason = "no upstream PR: our launcher only"'))
    result = cli("list", "--patches", registry.path)
    assert "p: example/engine#2106, other/kernels#7 -> engine; excludes m.py (hunks 2)" in result.out
    assert "l: local (no upstream PR: our launcher only) -> engine" in result.out
    doc = {p["patch"]: p for p in cli("list", "--patches", registry.path, "--json").json()["patches"]}
    assert [x["pr"] for x in doc["p"]["upstream"]["prs"]] == [2106, 7]
    assert doc["l"]["upstream"]["origin"] == "local" and doc["l"]["upstream"]["prs"] == []
    assert doc["p"]["excluded"] == [{"path": "m.py", "reason": "r", "hunks": [2]}]
