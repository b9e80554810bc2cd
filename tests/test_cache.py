"""The parsed-diff cache: a hit gives back exactly what parse_diff gives; anything doubtful is parsed again."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from patchkit import cache
from patchkit.diffs import parse_diff
from patchkit.errors import DiffError

DIFF = b"""diff --git a/atom/model_ops/layout.py b/atom/model_ops/layout.py
index 3b18e51..a9c1f03 100644
--- a/atom/model_ops/layout.py
+++ b/atom/model_ops/layout.py
@@ -1,3 +1,4 @@
 import torch
+FLASH = True
 def pool():
     return None
\\ No newline at end of file
diff --git a/atom/utils/new.py b/atom/utils/new.py
new file mode 100755
index 0000000..e69de29
--- /dev/null
+++ b/atom/utils/new.py
@@ -0,0 +1 @@
+print("new")
"""
SHA = hashlib.sha256(DIFF).hexdigest()


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("PATCHKIT_CACHE_DIR", str(folder))
    monkeypatch.delenv("PATCHKIT_NO_CACHE", raising=False)
    return folder


def entries(folder: Path) -> list[Path]:
    return sorted((folder / cache.FOLDER).glob("*.bin"))


def test_a_hit_equals_a_fresh_parse(cache_dir: Path) -> None:
    fresh = parse_diff(DIFF, 1, "pr.diff")
    first = cache.parse_diff_cached(DIFF, SHA, 1, "pr.diff")
    assert len(entries(cache_dir)) == 1
    second = cache.parse_diff_cached(DIFF, SHA, 1, "elsewhere/pr.diff")
    assert first == fresh
    assert second.files == fresh.files
    assert second.source == "elsewhere/pr.diff"  # messages name the diff as found now


def test_strip_is_part_of_the_key(cache_dir: Path) -> None:
    one = cache.parse_diff_cached(DIFF, SHA, 1, "pr.diff")
    two = cache.parse_diff_cached(DIFF, SHA, 2, "pr.diff")
    assert len(entries(cache_dir)) == 2
    assert one.files[0].path == "atom/model_ops/layout.py"
    assert two.files[0].path == "model_ops/layout.py"


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty", "garbage"])
def test_a_damaged_entry_is_ignored_and_rewritten(cache_dir: Path, damage: str) -> None:
    cache.parse_diff_cached(DIFF, SHA, 1, "pr.diff")
    (entry,) = entries(cache_dir)
    blob = entry.read_bytes()
    damaged = {
        "flip": blob[:-5] + bytes([blob[-5] ^ 0x01]) + blob[-4:],
        "truncate": blob[: len(blob) // 2],
        "empty": b"",
        "garbage": b"\x00" * 100,
    }[damage]
    entry.write_bytes(damaged)
    assert cache.parse_diff_cached(DIFF, SHA, 1, "pr.diff") == parse_diff(DIFF, 1, "pr.diff")
    assert entry.read_bytes() == blob


def test_an_entry_under_another_key_is_not_used(cache_dir: Path) -> None:
    # A file renamed onto another key (or a key collision) is caught by the key stored inside the entry.
    other = b"--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"
    other_sha = hashlib.sha256(other).hexdigest()
    cache.parse_diff_cached(other, other_sha, 1, "other.diff")
    (entry,) = entries(cache_dir)
    entry.rename(entry.with_name(f"{cache.entry_key(SHA, 1)}.bin"))
    assert cache.parse_diff_cached(DIFF, SHA, 1, "pr.diff") == parse_diff(DIFF, 1, "pr.diff")


def test_errors_are_raised_every_time_and_never_cached(cache_dir: Path) -> None:
    bad = b"--- a/x.py\n+++ b/x.py\n@@ -1,3 +1,3 @@\n-a\n+b\n"
    sha = hashlib.sha256(bad).hexdigest()
    for _ in range(2):
        with pytest.raises(DiffError, match="ends early"):
            cache.parse_diff_cached(bad, sha, 1, "bad.diff")
    assert entries(cache_dir) == []


def test_turned_off_writes_nothing(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATCHKIT_NO_CACHE", "1")
    assert cache.parse_diff_cached(DIFF, SHA, 1, "pr.diff") == parse_diff(DIFF, 1, "pr.diff")
    assert not cache_dir.exists()


def test_an_unwritable_cache_only_costs_the_speed_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    monkeypatch.setenv("PATCHKIT_CACHE_DIR", str(blocker))
    monkeypatch.delenv("PATCHKIT_NO_CACHE", raising=False)
    assert cache.parse_diff_cached(DIFF, SHA, 1, "pr.diff") == parse_diff(DIFF, 1, "pr.diff")


def test_old_entries_are_pruned(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache, "KEEP", 2)
    for strip in (0, 1, 2, 3):
        cache.parse_diff_cached(DIFF, SHA, strip, "pr.diff")
    assert len(entries(cache_dir)) == 2


def test_default_location_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("PATCHKIT_CACHE_DIR", raising=False)
    monkeypatch.delenv("PATCHKIT_NO_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache.cache_dir() == tmp_path / "patchkit"
