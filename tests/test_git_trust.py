"""Issue 32 item 1: git in an engine tree patchkit does not trust runs no command, as root.

A user who can change only `<root>/.git/config` (or owns the whole tree, with `safe.directory=*` in root's global
config) must not get a command run by `patchkit status` or `apply`. The hostile config names every way a config
makes git run a program (a promisor remote's `core.sshCommand` and `uploadpack` for the lazy fetch of a missing
pinned commit, `core.fsmonitor`, `core.pager`, `diff.external`, `core.hooksPath`), each a script that writes a
marker; real git, the real CLI (forked) as root, the attacker's steps as the real unprivileged user, everything
in a shared 0755 scratch folder (never under the checkout, which may be 0700).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import git, git_diff, read_tree
from tests.lint_helpers import FIXTURES, _chdir, lint
from tests.provenance_helpers import BASE, PID, add_entry, commit_all, git_repo, v1_files
from tests.safety_helpers import Run, as_user, chown_tree, run_forked, shared_workdir

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")  # root: the `user` fixture

EXCLUDE = {"eng/extra.py": "not ported"}
VECTORS = ("ssh", "uploadpack", "fsmonitor", "pager", "extdiff", "hook")
HOOKS = ("post-checkout", "reference-transaction", "pre-auto-gc", "post-index-change", "fsmonitor-watchman")
MISSING = "ab" * 20  # a commit id the checkout does not have: git would fetch it from a promisor remote


@dataclass(frozen=True)
class World:
    workdir: Path
    markers: Path
    scripts: Path
    home: Path  # root's HOME, with `safe.directory = *` in its global config (common in images and CI)

    def marks(self) -> list[str]:
        return sorted(p.name for p in self.markers.iterdir())

    def hostile_config(self) -> str:
        """A `.git/config` whose every code-running key runs a script that writes the marker it is named for."""
        mark = {v: self.scripts / f"mark-{v}" for v in VECTORS}
        return (
            "[core]\n\trepositoryformatversion = 1\n\tbare = false\n"
            f"\tsshCommand = {mark['ssh']}\n\tfsmonitor = {mark['fsmonitor']}\n\tpager = {mark['pager']}\n"
            f"\thooksPath = {self.scripts / 'hooks'}\n"
            f"[diff]\n\texternal = {mark['extdiff']}\n"
            "[extensions]\n\tpartialClone = origin\n"
            '[remote "origin"]\n\turl = ssh://example.invalid/engine.git\n\tpromisor = true\n'
            f"\tuploadpack = {mark['uploadpack']}\n"
            '[remote "local"]\n'
            f"\turl = {self.workdir / 'nowhere.git'}\n\tpromisor = true\n\tuploadpack = {mark['uploadpack']}\n"
        )


@pytest.fixture
def world(user: tuple[int, int]) -> Iterator[World]:
    with shared_workdir() as workdir:
        yield make_world(workdir)


def make_world(workdir: Path) -> World:
    """The marker scripts and root's HOME in a scratch folder the unprivileged user can reach (0755)."""
    markers, scripts, home = workdir / "markers", workdir / "scripts", workdir / "root-home"
    for folder in (markers, scripts / "hooks", home):
        folder.mkdir(parents=True)
    for vector in VECTORS:
        script = scripts / f"mark-{vector}"
        script.write_text(f"#!/bin/sh\ntouch {markers / vector}\nexit 1\n")
        script.chmod(0o755)
    for hook in HOOKS:
        (scripts / "hooks" / hook).symlink_to(scripts / "mark-hook")
    (home / ".gitconfig").write_text("[safe]\n\tdirectory = *\n")
    return World(workdir, markers, scripts, home)


def checkout(world: World, name: str, *, pinned_there: bool) -> tuple[Path, Path, str, str]:
    """An engine checkout (root's) whose HEAD descends from the pinned commit, and its registry:
    (root, patches, pinned, head). With pinned_there False the manifest pins a commit the clone lacks."""
    root = world.workdir / name
    pinned = git_repo(root, BASE)
    head = commit_all(root, {"eng/util.py": b"bumped\n"}, "image bump")
    patches = world.workdir / f"{name}-patches"
    add_entry(patches, git_diff(world.workdir, BASE, v1_files()), pinned=pinned if pinned_there else MISSING,
              excludes=EXCLUDE)
    return root, patches, pinned if pinned_there else MISSING, head


def write_config_as(world: World, user: tuple[int, int], root: Path) -> None:
    """The attacker writes the hostile config, as the unprivileged user, in a file that user may write."""
    config = root / ".git" / "config"
    text = world.hostile_config()
    as_user(*user, lambda: config.write_text(text))


def run(world: World, action: str, root: Path, patches: Path) -> Run:
    """patchkit as root, HOME and the global git config root's own (safe.directory = *)."""
    env = {"HOME": str(world.home), "GIT_CONFIG_GLOBAL": str(world.home / ".gitconfig")}
    return run_forked([action, PID, "--root", str(root), "--patches", str(patches), "--json"], env)


def status_then_apply(world: World, root: Path, patches: Path) -> dict[str, object]:
    """status (unapplied, exit 3) then apply (exit 0, the change in the tree); the status's base."""
    status = run(world, "status", root, patches)
    assert status.code == 3, (status.code, status.err)
    applied = run(world, "apply", root, patches)
    assert applied.code == 0, (applied.code, applied.err)
    assert read_tree(root)["eng/core.py"][0] == v1_files()["eng/core.py"]
    base = status.json()["base"]
    assert isinstance(base, dict)
    return base


@pytest.mark.parametrize("pinned_there", [False, True], ids=["pinned-missing", "pinned-present"])
def test_a_user_writable_git_config_runs_nothing_and_is_never_read(
    world: World, user: tuple[int, int], pinned_there: bool
) -> None:
    """Folder and repository root's, only `.git/config` the user's: git never reads it, so the answer is the
    repository's own (descendant, or the pinned commit missing: no lazy fetch) and no command runs."""
    root, patches, pinned, head = checkout(world, "config-only", pinned_there=pinned_there)
    os.chown(root / ".git" / "config", *user)
    write_config_as(world, user, root)

    base = status_then_apply(world, root, patches)
    assert world.marks() == [], f"git ran the hostile config's commands as root: {world.marks()}"
    assert base["head"] == head
    if pinned_there:
        assert (base["state"], base["relation"], base["detail"]) == ("drifted", "descendant", None)
    else:
        assert (base["state"], base["relation"]) == ("unknown", "unknown-object")
        assert f"commit {pinned} is not in" in str(base["detail"])


def test_a_tree_the_user_owns_is_not_given_to_git_even_with_safe_directory_star(
    world: World, user: tuple[int, int]
) -> None:
    """The whole checkout the user's, root's global config `safe.directory = *`: git is not run at all; the base
    says why (the owner named), falls back to the fingerprint (none here: unknown), and apply still works."""
    root, patches, _, _ = checkout(world, "user-owned", pinned_there=False)
    chown_tree(root, *user)
    write_config_as(world, user, root)

    base = status_then_apply(world, root, patches)
    assert world.marks() == [], f"git ran the hostile config's commands as root: {world.marks()}"
    assert (base["state"], base["relation"], base["head"]) == ("unknown", None, None)
    detail = str(base["detail"])
    assert f"{root}/.git is owned by uid {user[0]}" in detail and "git was not asked" in detail, detail


@pytest.mark.parametrize("where", ["objects", "objects/pack", "refs/heads", "HEAD", "packed-refs"])
def test_a_root_owned_git_with_one_part_others_may_write_is_not_given_to_git(
    world: World, user: tuple[int, int], where: str
) -> None:
    """Every folder and file git or patchkit reads in `.git` follows the rule: one the user owns, or any other
    user may write, and git is not run (the base says which and why)."""
    root, patches, _, _ = checkout(world, f"part-{where.replace('/', '-')}", pinned_there=True)
    if where == "packed-refs":
        git(root, "pack-refs", "--all")  # HEAD's branch then only in packed-refs
    target = root / ".git" / where
    if where == "objects":
        target.chmod(0o777)
    else:
        os.chown(target, *user)
    base = status_then_apply(world, root, patches)
    assert (base["state"], base["relation"]) == ("unknown", None), base
    assert f"{target} is owned by uid" in str(base["detail"]), base["detail"]


def test_head_through_packed_refs_a_shallow_clone_and_a_worktree_file(world: World) -> None:
    """HEAD read by patchkit: from packed-refs only, in a shallow clone (its boundary honoured), and a `.git`
    file (a linked worktree) refused as "cannot tell", never handed to git."""
    root, patches, pinned, head = checkout(world, "packed", pinned_there=True)
    git(root, "pack-refs", "--all")  # refs/heads/* now only in packed-refs
    assert not any((root / ".git" / "refs" / "heads").iterdir())
    base = run(world, "status", root, patches).json()["base"]
    assert (base["relation"], base["head"]) == ("descendant", head)

    shallow = world.workdir / "shallow"
    git(world.workdir, "clone", "-q", "--depth", "1", f"file://{root}", str(shallow))
    base = run(world, "status", shallow, patches).json()["base"]
    assert (base["relation"], base["head"]) == ("unknown-object", head)  # the pinned parent is not in the clone
    git(shallow, "fetch", "-q", "--deepen", "1")
    base = run(world, "status", shallow, patches).json()["base"]
    assert (base["relation"], base["head"]) == ("descendant", head)

    worktree = world.workdir / "linked"
    git(root, "worktree", "add", "-q", "--detach", str(worktree), pinned)
    base = run(world, "status", worktree, patches).json()["base"]
    assert (base["state"], base["relation"]) == ("unknown", None)
    assert "is a file (a linked worktree or a submodule)" in str(base["detail"])
    assert world.marks() == []


# ---------------------------------------------------------------------------------- lint --base on a fork


def fork_clone(workdir: Path, *, partial: bool) -> tuple[Path, Path]:
    """The upstream registry (main), a fork's branch whose files attack git, and the CI runner's clone of it
    (a partial clone, `--filter=blob:none`, when asked) with the fork's branch checked out: (clone, markers).

    The runner's config includes a file of the work tree (`include.path = ../.gitconfig`, as projects that
    share settings ask contributors to set) and takes hooks from it (`core.hooksPath = .githooks`): the worst
    case, where the fork's files are the repository's config."""
    markers, scripts = workdir / "markers", workdir / "scripts"
    markers.mkdir()
    scripts.mkdir()
    for vector in (*VECTORS, "textconv", "diffcmd", "filter", "submodule"):
        (scripts / f"mark-{vector}").write_text(f"#!/bin/sh\ntouch {markers / vector}\nexit 1\n")
        (scripts / f"mark-{vector}").chmod(0o755)
    upstream = workdir / "upstream"
    shutil.copytree(FIXTURES / "clean", upstream)
    git(upstream, "init", "-q", "-b", "main")
    git(upstream, "config", "uploadpack.allowFilter", "true")
    git(upstream, "add", "-A")
    git(upstream, "commit", "-q", "-m", "registry")
    git(upstream, "checkout", "-q", "-b", "fork")
    mark = {v: scripts / f"mark-{v}" for v in (*VECTORS, "textconv", "diffcmd", "filter", "submodule")}
    hostile = {
        ".gitattributes": "* diff=evil filter=evil merge=evil\n",
        ".gitconfig": (
            f"[core]\n\tfsmonitor = {mark['fsmonitor']}\n\tpager = {mark['pager']}\n\tsshCommand = {mark['ssh']}\n"
            f"[diff]\n\texternal = {mark['extdiff']}\n"
            f'[diff "evil"]\n\tcommand = {mark["diffcmd"]}\n\ttextconv = {mark["textconv"]}\n'
            f'[filter "evil"]\n\tclean = {mark["filter"]}\n\tsmudge = {mark["filter"]}\n\tprocess = {mark["filter"]}\n'
            f'[remote "origin"]\n\tuploadpack = {mark["uploadpack"]}\n'
        ),
        ".gitmodules": (
            f'[submodule "x"]\n\tpath = x\n\turl = ext::{mark["submodule"]}\n\tupdate = !{mark["submodule"]}\n'
        ),
    }
    for name, text in hostile.items():
        (upstream / name).write_text(text)
    (upstream / ".githooks").mkdir()
    for hook in (*HOOKS, "post-merge", "pre-commit"):
        (upstream / ".githooks" / hook).symlink_to(mark["hook"])
    waiver = upstream / "waivers" / "7001.md"
    waiver.write_text(waiver.read_text() + "\nA fork's edit.\n")  # the base's copy differs: read through git
    manifest = upstream / "patches" / "enginex-pr512" / "manifest.toml"
    manifest.write_text(manifest.read_text().replace("title = ", "title = 'edited' # ", 1))
    git(upstream, "add", "-A")
    git(upstream, "commit", "-q", "-m", "a fork's pull request")
    clone = workdir / "ci"
    filters = ["--filter=blob:none"] if partial else []
    git(workdir, "clone", "-q", "--no-local", *filters, "--branch", "fork", f"file://{upstream}", str(clone))
    git(clone, "config", "include.path", "../.gitconfig")
    git(clone, "config", "core.hooksPath", ".githooks")
    return clone, markers


@pytest.mark.parametrize("partial", [False, True], ids=["full-clone", "partial-clone"])
def test_lint_base_on_a_fork_runs_nothing_the_fork_wrote(tmp_path: Path, partial: bool) -> None:
    """`lint --base origin/main` on the fork's checkout: no command of the fork's files runs. In a full clone
    lint answers as usual; in a partial clone the base's copy of the edited waiver is not in the clone, and
    git is not allowed to fetch it (a fetch would run the fork's uploadpack): exit 2 saying what to fetch."""
    workdir = tmp_path / "w"
    workdir.mkdir()
    clone, markers = fork_clone(workdir, partial=partial)
    env = {"HOME": str(workdir), "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    with _chdir(clone):
        run = lint("--base", "origin/main", "--pr", "7001", "--format", "json", env=env)
    assert sorted(p.name for p in markers.iterdir()) == [], "git ran a command the fork's files named"
    assert "Traceback" not in run.stderr
    if partial:
        assert run.exit_code == 2, (run.exit_code, run.stderr)
        assert "waivers/7001.md" in run.stderr and "partial clone" in run.stderr, run.stderr
    else:
        assert run.exit_code in (0, 1), (run.exit_code, run.stderr)
        report = run.json()  # the range holds the manifest's and the waiver's edits: history mode read them
        assert (report["change_patches_engine"], report["findings"]) == (True, []), report
