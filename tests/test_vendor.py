"""`patchkit vendor`: local files, a loopback HTTP server, real git ranges; pins, comments, idempotence."""

from __future__ import annotations

import re
import shlex
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from patchkit.errors import BadInputError
from patchkit.input.manifest import load_manifest
from patchkit.tooling.vendor import check_url, fetch_url, update_manifest
from tests.conftest import cli, git, git_diff, read_tree, write_tree
from tests.provenance_helpers import (
    BASE,
    PID,
    add_entry,
    commit_all,
    edit,
    git_repo,
    numbered,
    sha,
    v1_files,
)

EXCLUDE = {"eng/extra.py": "not ported"}
REAL_ENTRY = Path(__file__).resolve().parent.parent / "patches" / "atom-pr2106"


class _Routes(ThreadingHTTPServer):
    routes: dict[str, tuple[int, dict[str, str], bytes]]


class _Handler(BaseHTTPRequestHandler):
    server: _Routes

    def do_GET(self) -> None:
        status, headers, body = self.server.routes.get(self.path, (404, {}, b"not found\n"))
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[_Routes, str]]:
    httpd = _Routes(("127.0.0.1", 0), _Handler)
    httpd.routes = {}
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield httpd, f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def diff(tmp_path: Path) -> bytes:
    return git_diff(tmp_path, BASE, v1_files())


def vendor(patches: Path, *args: str | Path) -> Any:
    return cli("vendor", PID, "--patches", patches, *args)


def manifest_of(patches: Path) -> Path:
    return patches / PID / "manifest.toml"


# ----------------------------------------------------------------------------------------------- local file


def test_vendor_a_local_file_pins_it_and_keeps_the_comments(tmp_path: Path, patches: Path, diff: bytes) -> None:
    add_entry(patches, None, excludes=EXCLUDE)
    original = manifest_of(patches).read_text()
    source = tmp_path / "pr7.diff"
    source.write_bytes(diff)

    result = vendor(patches, "--from", source)
    assert result.code == 0, result.err
    assert "excluded by the manifest: eng/extra.py" in result.out
    assert (patches / PID / "change.diff").read_bytes() == diff
    text = manifest_of(patches).read_text()
    kept = [line for line in text.splitlines() if line in original.splitlines() and line]
    assert kept == [line for line in original.splitlines() if line]  # every line, comments included, in order
    spec = load_manifest(patches / PID)
    assert spec.sha256 == sha(diff) and not spec.pending
    assert spec.source is not None and spec.source.kind == "file"
    # relative to the folder holding the registry (no pyproject.toml: it stands for the project), where vendor ran
    assert patches.parent == source.parent and dict(spec.source.fields) == {"path": source.name}
    assert spec.recorded_file() == source
    assert f"from {source.name}" in cli("list", "--patches", patches).out

    status = cli("status", PID, "--root", _tree(tmp_path), "--patches", patches, "--json")
    assert status.code == 3
    assert spec.hunkset_sha256 == status.json()["hunk_set_sha256"]

    files = [manifest_of(patches), patches / PID / "change.diff"]
    before = [(f.read_bytes(), f.stat().st_mtime_ns) for f in files]
    again = vendor(patches, "--from", source)
    assert again.code == 0 and "already vendored" in again.out
    assert [(f.read_bytes(), f.stat().st_mtime_ns) for f in files] == before


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "engine"
    if not root.exists():
        write_tree(root, BASE)
    return root


def test_dry_run_writes_nothing(tmp_path: Path, patches: Path, diff: bytes) -> None:
    add_entry(patches, None, excludes=EXCLUDE)
    before = manifest_of(patches).read_bytes()
    (tmp_path / "pr.diff").write_bytes(diff)
    result = vendor(patches, "--from", tmp_path / "pr.diff", "--dry-run", "--json")
    assert result.code == 0
    assert result.json()["changed"] is True and result.json()["written"] == []
    assert manifest_of(patches).read_bytes() == before
    assert not (patches / PID / "change.diff").exists()


def test_a_diff_missing_an_excluded_file_is_refused(tmp_path: Path, patches: Path, diff: bytes) -> None:
    add_entry(patches, None, excludes={**EXCLUDE, "eng/gone.py": "rewritten upstream"})
    before = manifest_of(patches).read_bytes()
    (tmp_path / "pr.diff").write_bytes(diff)
    result = vendor(patches, "--from", tmp_path / "pr.diff")
    assert result.code == 2
    assert "exclude 'eng/gone.py' matches no file" in result.err
    assert manifest_of(patches).read_bytes() == before
    assert not (patches / PID / "change.diff").exists()


def test_something_that_is_not_a_diff_is_refused(tmp_path: Path, patches: Path) -> None:
    add_entry(patches, None)
    (tmp_path / "page.html").write_text("<html><body>Sign in to GitHub</body></html>\n")
    result = vendor(patches, "--from", tmp_path / "page.html")
    assert result.code == 2
    assert not (patches / PID / "change.diff").exists()


# ------------------------------------------------------------------------------------------------------ URL


def test_vendor_from_a_url_follows_a_redirect(
    tmp_path: Path, patches: Path, diff: bytes, server: tuple[_Routes, str]
) -> None:
    httpd, base = server
    httpd.routes["/pull/7.diff"] = (302, {"Location": f"{base}/raw/pull/7.diff"}, b"")
    httpd.routes["/raw/pull/7.diff"] = (200, {"Content-Type": "text/plain"}, diff)
    add_entry(patches, None, excludes=EXCLUDE)

    result = vendor(patches, "--from", f"{base}/pull/7.diff", "--json")
    assert result.code == 0, result.err
    data = result.json()
    assert data["source"] == {"kind": "url", "location": f"{base}/pull/7.diff", "bytes": len(diff)}
    assert data["sha256"] == sha(diff) and [e["path"] for e in data["excluded"]] == ["eng/extra.py"]
    assert (patches / PID / "change.diff").read_bytes() == diff


def test_url_refusals(patches: Path, server: tuple[_Routes, str]) -> None:
    httpd, base = server
    httpd.routes["/away.diff"] = (302, {"Location": "http://example.invalid/x.diff"}, b"")
    httpd.routes["/huge.diff"] = (200, {}, b"x" * 5000)
    add_entry(patches, None)

    missing = vendor(patches, "--from", f"{base}/nope.diff")
    assert missing.code == 2 and "HTTP 404" in missing.err
    for url in ("http://example.invalid/pr.diff", "ftp://example.invalid/pr.diff", "file:///etc/hostname"):
        refused = vendor(patches, "--from", url)
        assert refused.code == 2 and "only https://" in refused.err, url
    redirected = vendor(patches, "--from", f"{base}/away.diff")
    assert redirected.code == 2 and "example.invalid" in redirected.err
    with pytest.raises(BadInputError, match="larger than 1000 bytes"):
        fetch_url(f"{base}/huge.diff", max_bytes=1000)
    check_url("https://github.com/ROCm/ATOM/pull/2106.diff")
    check_url("http://localhost:8080/x.diff")


def test_a_reexport_with_other_index_lines_and_headings_keeps_the_hunkset(
    tmp_path: Path, patches: Path, diff: bytes, server: tuple[_Routes, str]
) -> None:
    httpd, base = server
    # What a forge serves for the same change: full-length index hashes and its own hunk headings.
    forge = re.sub(rb"(?m)^index [0-9a-f]+\.\.[0-9a-f]+", b"index " + b"a" * 40 + b".." + b"b" * 40, diff)
    forge = re.sub(rb"(?m)^(@@ [^@]+ @@).*$", rb"\1 class Core:", forge)
    assert forge != diff
    httpd.routes["/pull/7.diff"] = (200, {}, forge)
    add_entry(patches, None, excludes=EXCLUDE)
    (tmp_path / "local.diff").write_bytes(diff)
    first = vendor(patches, "--from", tmp_path / "local.diff", "--json").json()

    second = vendor(patches, "--from", f"{base}/pull/7.diff", "--json")
    assert second.code == 0
    data = second.json()
    assert data["sha256"] == sha(forge) != first["sha256"]
    assert data["hunk_set_sha256"] == first["hunk_set_sha256"]
    assert data["previous_sha256"] == first["sha256"] and data["hunk_set_changed"] is False
    text = vendor(patches, "--from", tmp_path / "local.diff")
    assert "only header noise" in text.out


# ------------------------------------------------------------------------------------------------ git range


def test_vendor_from_a_git_range(tmp_path: Path, patches: Path, diff: bytes) -> None:
    repo = tmp_path / "upstream"
    base_commit = git_repo(repo, BASE)
    git(repo, "checkout", "-q", "-b", "fix")
    commit_all(repo, v1_files(), "the fix")
    git(repo, "checkout", "-q", "-")
    util = BASE["eng/util.py"]
    assert isinstance(util, bytes)
    commit_all(repo, {"eng/util.py": edit(util, {b"util_2 = 2\n": b"util_2 = 22\n"})}, "main moves on")
    add_entry(patches, None, excludes=EXCLUDE)
    (tmp_path / "ref.diff").write_bytes(diff)
    reference = vendor(patches, "--from", tmp_path / "ref.diff", "--dry-run", "--json").json()

    three = vendor(patches, "--from-git", repo, "--range", "HEAD...fix", "--json")
    assert three.code == 0, three.err
    assert three.json()["source"]["kind"] == "git"
    assert three.json()["hunk_set_sha256"] == reference["hunk_set_sha256"]  # only the fix, as a PR shows it
    assert load_manifest(patches / PID).sha256 == sha((patches / PID / "change.diff").read_bytes())

    two = vendor(patches, "--from-git", repo, "--range", "HEAD..fix", "--json")
    assert two.code == 0
    assert two.json()["hunk_set_sha256"] != reference["hunk_set_sha256"]  # also undoes main's util.py change
    assert "eng/util.py" in (patches / PID / "change.diff").read_text()

    same = vendor(patches, "--from-git", repo, "--range", f"{base_commit}...fix", "--json")
    assert same.json()["hunk_set_sha256"] == reference["hunk_set_sha256"]


def test_git_range_refusals(tmp_path: Path, patches: Path) -> None:
    repo = tmp_path / "upstream"
    git_repo(repo, BASE)
    add_entry(patches, None)
    for bad in ("--output=x..HEAD", "HEAD..-p", "HEAD", "..HEAD"):
        result = vendor(patches, "--from-git", repo, "--range", bad)
        assert result.code == 2 and "BASE..HEAD" in result.err, bad
    unknown = vendor(patches, "--from-git", repo, "--range", "nosuchref..HEAD")
    assert unknown.code == 2 and "names no commit" in unknown.err
    assert vendor(patches, "--from-git", repo).code == 2
    assert vendor(patches, "--from-git", repo, "--range", "HEAD..HEAD", "--from", "x.diff").code == 2
    assert vendor(patches, "--from-git", tmp_path, "--range", "a..b").code == 2
    assert not (tmp_path / "x").exists()


# ---------------------------------------------------------------------------------------------------- base


def test_base_tree_fingerprint(tmp_path: Path, patches: Path, diff: bytes) -> None:
    pristine = _tree(tmp_path)
    add_entry(patches, None, excludes=EXCLUDE)
    (tmp_path / "pr.diff").write_bytes(diff)

    result = vendor(patches, "--from", tmp_path / "pr.diff", "--base-tree", pristine, "--json")
    assert result.code == 0, result.err
    core = (pristine / "eng/core.py").read_bytes()
    assert result.json()["base"] == {"eng/core.py": sha(core)}  # only what the filtered hunk set reads
    assert load_manifest(patches / PID).base_files == (("eng/core.py", sha(core)),)
    again = vendor(patches, "--from", tmp_path / "pr.diff", "--base-tree", pristine)
    assert "already vendored" in again.out

    applied = tmp_path / "applied"
    shutil.copytree(pristine, applied)
    write_tree(applied, {"eng/core.py": v1_files()["eng/core.py"]})
    refused = vendor(patches, "--from", tmp_path / "pr.diff", "--base-tree", applied)
    assert refused.code == 2 and "reads as applied, not unapplied" in refused.err
    assert "eng/core.py hunk 1 " in refused.err and ": applied (expected line " in refused.err, refused.err  # by hunk

    # A new diff that reads other files cannot keep the old fingerprint.
    util = BASE["eng/util.py"]
    assert isinstance(util, bytes)
    other = git_diff(tmp_path, BASE, {**v1_files(), "eng/util.py": edit(util, {b"util_9 = 9\n": b"util_9 = 90\n"})})
    (tmp_path / "other.diff").write_bytes(other)
    stale = vendor(patches, "--from", tmp_path / "other.diff")
    assert stale.code == 2 and "--base-tree" in stale.err
    assert vendor(patches, "--from", tmp_path / "other.diff", "--base-tree", pristine).code == 0
    assert {p for p, _ in load_manifest(patches / PID).base_files} == {"eng/core.py", "eng/util.py"}


def test_a_git_base_tree_must_be_at_the_pinned_commit(tmp_path: Path, patches: Path, diff: bytes) -> None:
    engine = tmp_path / "engine"
    pinned = git_repo(engine, BASE)
    commit_all(engine, {"eng/util.py": numbered("util", 13)}, "later")
    add_entry(patches, None, excludes=EXCLUDE, pinned=pinned)
    (tmp_path / "pr.diff").write_bytes(diff)
    refused = vendor(patches, "--from", tmp_path / "pr.diff", "--base-tree", engine)
    assert refused.code == 2 and f"not the pinned commit {pinned}" in refused.err
    git(engine, "checkout", "-q", pinned)
    assert vendor(patches, "--from", tmp_path / "pr.diff", "--base-tree", engine).code == 0


# ---------------------------------------------------------------------------------------- vendor_command()


def test_the_pending_hint_is_a_command_that_works(
    tmp_path: Path, patches: Path, diff: bytes, server: tuple[_Routes, str]
) -> None:
    httpd, base = server
    httpd.routes["/pull/7.diff"] = (200, {}, diff)
    add_entry(patches, None, excludes=EXCLUDE, diff_url=f"{base}/pull/7.diff")
    tree = _tree(tmp_path)
    pending = cli("status", PID, "--root", tree, "--patches", patches)
    assert pending.code == 2
    command = pending.err.split("vendor it first: ", 1)[1].strip()
    argv = shlex.split(command)
    assert argv[:2] == ["patchkit", "vendor"]

    assert cli(*argv[1:]).code == 0
    assert cli("apply", PID, "--root", tree, "--patches", patches).code == 0
    assert read_tree(tree)["eng/core.py"][0] == v1_files()["eng/core.py"]


def test_the_real_pending_entry_vendors_and_keeps_its_comments(tmp_path: Path) -> None:
    patches = tmp_path / "patches"
    shutil.copytree(REAL_ENTRY, patches / "atom-pr2106")
    spec = load_manifest(patches / "atom-pr2106")
    assert spec.pending
    argv = shlex.split(spec.vendor_command())
    assert argv[2:] == ["atom-pr2106", "--patches", str(patches), "--from",
                        "https://github.com/ROCm/ATOM/pull/2106.diff"]

    # Offline stand-in for the PR's diff: our own tiny files at the paths the entry excludes, plus one kept file.
    before = {
        "atom/model_engine/model_runner.py": numbered("runner", 8),
        "atom/model_ops/attentions/backends.py": numbered("backends", 8),
        "atom/spec_decode/eagle_proposer.py": numbered("proposer", 8),
    }
    after = {path: data.replace(b"_4 = 4\n", b"_4 = 40\n") for path, data in before.items()}
    (tmp_path / "2106.diff").write_bytes(git_diff(tmp_path, before, after))
    original = (patches / "atom-pr2106" / "manifest.toml").read_text()

    result = cli(*argv[1:-1], tmp_path / "2106.diff")
    assert result.code == 0, result.err
    text = (patches / "atom-pr2106" / "manifest.toml").read_text()
    assert [line for line in text.splitlines() if line and line in original.splitlines()] == [
        line for line in original.splitlines() if line
    ]
    vendored = load_manifest(patches / "atom-pr2106")
    assert not vendored.pending and vendored.hunkset_sha256 is not None
    assert "excluded by the manifest: atom/model_ops/attentions/backends.py, atom/spec_decode/eagle_proposer.py" in (
        result.out
    )


def test_update_manifest_edits_base_in_place() -> None:
    text = 'id = "x"\n\n[base]\n# pinned pre-images\n"a.py" = "' + "1" * 64 + '"\n"b.py" = "' + "2" * 64 + '"\n'
    out = update_manifest(text, "3" * 64, "4" * 64, {"a.py": "1" * 64, "c.py": "5" * 64})
    assert "# pinned pre-images" in out and '"b.py"' not in out and '"c.py" = "' + "5" * 64 in out
    assert update_manifest(out, "3" * 64, "4" * 64, {"a.py": "1" * 64, "c.py": "5" * 64}) == out


def test_vendor_never_writes_through_a_name_planted_in_the_registry(
    tmp_path: Path, patches: Path, diff: bytes
) -> None:
    """The old predictable temp names, planted as links to a file outside, are neither followed nor removed."""
    add_entry(patches, None, excludes=EXCLUDE)
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"keep me\n")
    planted = [patches / PID / f".{name}.patchkit-tmp" for name in ("manifest.toml", "change.diff")]
    for link in planted:
        link.symlink_to(outside)
    source = tmp_path / "pr7.diff"
    source.write_bytes(diff)

    result = vendor(patches, "--from", source)
    assert result.code == 0, result.err
    assert outside.read_bytes() == b"keep me\n"
    assert all(link.is_symlink() for link in planted)
    assert (patches / PID / "change.diff").read_bytes() == diff
    leftovers = [p.name for p in (patches / PID).iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []
