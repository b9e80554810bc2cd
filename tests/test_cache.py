"""The parsed-diff cache: a hit gives back exactly what parse_diff gives; anything doubtful is parsed again."""

from __future__ import annotations

import dataclasses
import hashlib
import marshal
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchkit.diff import cache
from patchkit.diff.diffs import parse_diff
from patchkit.diff.hunks import FilePatch
from patchkit.errors import DiffError

# version_sensitive: the parse cache is marshal data keyed on the interpreter.
pytestmark = pytest.mark.version_sensitive

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


# --------------------------------------------------------------------------------- an untrusted cache (issue 10)

def forged(files: tuple[FilePatch, ...], **changes: object) -> tuple[FilePatch, ...]:
    """The first file section with `changes`, the others as they are."""
    return (dataclasses.replace(files[0], **changes), *files[1:])  # type: ignore[arg-type]


def test_a_hit_comes_from_the_entry(cache_dir: Path) -> None:
    """The control for the refusals below: a valid entry of this user, in private folders, is what a hit reads."""
    real = parse_diff(DIFF, 1, "pr.diff").files
    changed = forged(real, hunks=(dataclasses.replace(real[0].hunks[0], new_lines=(b"import torch\n", b"X\n")),))
    cache.store_entry(SHA, 1, changed)
    assert cache.parse_diff_cached(DIFF, SHA, 1, "pr.diff").files == changed


def test_folders_are_made_private_whatever_the_umask(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home" / ".cache"))
    monkeypatch.delenv("PATCHKIT_CACHE_DIR")
    monkeypatch.delenv("PATCHKIT_NO_CACHE", raising=False)
    old = os.umask(0)
    try:
        cache.parse_diff_cached(DIFF, SHA, 1, "pr.diff")
    finally:
        os.umask(old)
    made = [tmp_path / "home", tmp_path / "home" / ".cache", tmp_path / "home" / ".cache" / "patchkit",
            tmp_path / "home" / ".cache" / "patchkit" / cache.FOLDER]
    assert [stat.S_IMODE(p.stat().st_mode) for p in made] == [0o700] * 4
    (entry,) = entries(made[-2])
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600
    assert cache.load_entry(SHA, 1) is not None


@pytest.mark.parametrize("level", ["cache dir", "entries folder"])
@pytest.mark.parametrize("mode", [0o777, 0o770, 0o702, 0o720])
def test_a_folder_others_can_write_is_ignored(cache_dir: Path, level: str, mode: int) -> None:
    real = parse_diff(DIFF, 1, "pr.diff").files
    cache.store_entry(SHA, 1, forged(real, new_path="atom/elsewhere.py", old_path="atom/elsewhere.py"))
    (entry,) = entries(cache_dir)
    before = entry.read_bytes()
    os.chmod(cache_dir if level == "cache dir" else cache_dir / cache.FOLDER, mode)
    assert cache.load_entry(SHA, 1) is None
    assert cache.parse_diff_cached(DIFF, SHA, 1, "pr.diff").files == real
    assert entry.read_bytes() == before  # nor is anything stored there


@pytest.mark.parametrize("damage", ["group-writable", "world-writable", "hard-link", "symlink", "folder"])
def test_an_entry_that_is_not_a_private_file_is_ignored(cache_dir: Path, damage: str) -> None:
    real = parse_diff(DIFF, 1, "pr.diff").files
    cache.store_entry(SHA, 1, forged(real, new_path="atom/elsewhere.py", old_path="atom/elsewhere.py"))
    (entry,) = entries(cache_dir)
    if damage.endswith("writable"):
        os.chmod(entry, 0o620 if damage == "group-writable" else 0o602)
    elif damage == "hard-link":
        os.link(entry, cache_dir / "elsewhere.bin")
    elif damage == "symlink":
        entry.rename(cache_dir / "kept.bin")
        entry.symlink_to(cache_dir / "kept.bin")
    else:
        entry.unlink()
        entry.mkdir()
    assert cache.load_entry(SHA, 1) is None
    assert cache.parse_diff_cached(DIFF, SHA, 1, "pr.diff").files == real


@pytest.mark.parametrize("path", [
    ".git/config", "../x", "atom/../../x", "/etc/passwd", ".patchkit/journal.json", "atom/.GIT/hooks/pre-commit",
    ".Patchkit/lock", ".patch\u212ait/lock", ".g\u200cit/config", "a//b", "atom/./x", "a\\b", "x\0y", "",
    "/".join(["d"] * 65), "x" * 256, "\udcff",
])
def test_an_entry_naming_a_path_the_parser_refuses_is_ignored(cache_dir: Path, path: str) -> None:
    real = parse_diff(DIFF, 1, "pr.diff").files
    cache.store_entry(SHA, 1, forged(real, new_path=path))
    assert len(entries(cache_dir)) == 1  # it was written: the refusal below is the loader's
    assert cache.load_entry(SHA, 1) is None
    assert cache.parse_diff_cached(DIFF, SHA, 1, "pr.diff").files == real
    assert cache.load_entry(SHA, 1) == real  # and the refused entry was replaced by a good one


@pytest.mark.parametrize("changes", [
    {"new_mode": 0o104755}, {"old_mode": 0o4755}, {"new_mode": 0o20644}, {"old_path": 7}, {"binary": 1},
    {"diff_line": "1"}, {"new_path": b"atom/x.py"}, {"old_path": None, "new_path": None},
])
def test_an_entry_with_fields_the_parser_never_makes_is_ignored(cache_dir: Path, changes: dict[str, object]) -> None:
    real = parse_diff(DIFF, 1, "pr.diff").files
    cache.store_entry(SHA, 1, forged(real, **changes))
    assert len(entries(cache_dir)) == 1
    assert cache.load_entry(SHA, 1) is None
    assert cache.parse_diff_cached(DIFF, SHA, 1, "pr.diff").files == real


def test_an_entry_bound_to_other_bytes_is_ignored(cache_dir: Path) -> None:
    """Under the right key but naming another diff's sha256 (the payload checksum is intact)."""
    real = parse_diff(DIFF, 1, "pr.diff").files
    key = cache.entry_key(SHA, 1)
    payload = marshal.dumps((key, "0" * 64, cache._encode_rows(real)))
    (cache_dir / cache.FOLDER).mkdir(mode=0o700, parents=True)
    (cache_dir / cache.FOLDER / f"{key}.bin").write_bytes(cache.FORMAT + hashlib.sha256(payload).digest() + payload)
    os.chmod(cache_dir / cache.FOLDER / f"{key}.bin", 0o600)
    assert cache.load_entry(SHA, 1) is None
    good = marshal.dumps((key, SHA, cache._encode_rows(real)))  # the same entry bound to the right bytes is used
    (cache_dir / cache.FOLDER / f"{key}.bin").write_bytes(cache.FORMAT + hashlib.sha256(good).digest() + good)
    assert cache.load_entry(SHA, 1) == real


def test_a_hash_that_is_not_of_the_bytes_never_reaches_the_cache(cache_dir: Path) -> None:
    real = parse_diff(DIFF, 1, "pr.diff").files
    cache.store_entry(SHA, 1, forged(real, new_path="atom/elsewhere.py", old_path="atom/elsewhere.py"))
    other = DIFF.replace(b'print("new")', b'print("other")')
    assert cache.parse_diff_cached(other, SHA, 1, "pr.diff") == parse_diff(other, 1, "pr.diff")


# ------------------------------------------------------------------ another user's cache (root, unprivileged user)

OTHER_USER = "pk-cache-other"


@pytest.fixture(scope="module")
def other_uid() -> Iterator[int]:
    """An unprivileged user, created for this module (and removed after) unless it exists."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the attack is another user's cache read by root")
    created = False
    try:
        uid = pwd.getpwnam(OTHER_USER).pw_uid
    except KeyError:
        if shutil.which("useradd") is None:
            pytest.skip("useradd is not available")
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", OTHER_USER],
                       check=True, capture_output=True)
        created = True
        uid = pwd.getpwnam(OTHER_USER).pw_uid
    yield uid
    if created:
        subprocess.run(["userdel", OTHER_USER], check=False, capture_output=True)


def chown_tree(top: Path, uid: int) -> None:
    for path in [top, *top.rglob("*")]:
        os.lchown(path, uid, uid)


def test_an_entry_another_user_owns_is_ignored(cache_dir: Path, other_uid: int) -> None:
    real = parse_diff(DIFF, 1, "pr.diff").files
    cache.store_entry(SHA, 1, forged(real, new_path="atom/elsewhere.py", old_path="atom/elsewhere.py"))
    (entry,) = entries(cache_dir)
    os.chown(entry, other_uid, other_uid)
    assert cache.load_entry(SHA, 1) is None
    os.chown(entry, 0, 0)
    assert cache.load_entry(SHA, 1) is not None  # the control: ownership alone made the difference


TREE = {"engine/x.py": (b"x = 1\n", 0o644)}
REAL = b"--- a/engine/x.py\n+++ b/engine/x.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"


@pytest.mark.parametrize("planted", ["other owner", "world-writable folder", "forged path"])
def test_a_planted_cache_in_a_shared_home_never_decides_a_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, other_uid: int, planted: str
) -> None:
    """HOME=/tmp/<shared> as in CI: another user plants the entry root's apply would read; root applies the diff."""
    from tests.safety_helpers import PATCH_ID, add_patch, image, run_forked, write_files

    shared = Path(tempfile.mkdtemp(prefix="pk-shared-home-", dir="/tmp"))
    try:
        root, patches = tmp_path / "root", tmp_path / "patches"
        write_files(root, {**TREE, ".git/config": (b"[core]\n", 0o644)})
        add_patch(patches, PATCH_ID, REAL)
        sha = hashlib.sha256(REAL).hexdigest()
        real = parse_diff(REAL, 1, "change.diff").files
        bad_hunk = dataclasses.replace(real[0].hunks[0], new_lines=(b"import os; os.system('id')\n",))
        evil = forged(real, hunks=(bad_hunk,))
        if planted == "forged path":
            evil = forged(real, old_path=".git/config", new_path=".git/config",
                          hunks=(dataclasses.replace(real[0].hunks[0], old_lines=(b"[core]\n",)),))
        entries_dir = shared / ".cache" / "patchkit" / cache.FOLDER
        monkeypatch.setenv("PATCHKIT_CACHE_DIR", str(shared / ".cache" / "patchkit"))
        cache.store_entry(sha, 1, evil)  # made as root, then handed over as the planting user would leave it
        assert len(entries(shared / ".cache" / "patchkit")) == 1
        if planted == "other owner":
            chown_tree(shared, other_uid)
        elif planted == "world-writable folder":
            os.chmod(entries_dir, 0o777)
        else:
            os.chown(shared, other_uid, other_uid)  # the shared home is the other user's; the cache is root's
        os.chmod(shared, 0o755)
        planted_bytes = {p.name: p.read_bytes() for p in entries_dir.iterdir()}
        monkeypatch.delenv("PATCHKIT_CACHE_DIR")
        monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
        monkeypatch.delenv("PATCHKIT_NO_CACHE", raising=False)
        monkeypatch.setenv("HOME", str(shared))
        assert cache.cache_dir() == shared / ".cache" / "patchkit"
        run = run_forked(["apply", PATCH_ID, "--root", str(root), "--patches", str(patches)])
        assert run.code == 0, run.err
        assert image(root)["engine/x.py"] == ("file", b"x = 2\n", 0o644)
        assert image(root)[".git/config"] == ("file", b"[core]\n", 0o644)
        if planted != "forged path":  # an untrusted folder is neither read nor written
            assert {p.name: p.read_bytes() for p in entries_dir.iterdir()} == planted_bytes
    finally:
        shutil.rmtree(shared, ignore_errors=True)
