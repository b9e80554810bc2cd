"""git on a repository patchkit does not trust: its refs read here, its objects lent to git, nothing else.

A repository's own files can make git run programs: `.git/config` (a promisor remote with `core.sshCommand`
or `uploadpack`, `core.fsmonitor`, `core.pager`, aliases, hooks, diff and filter drivers), and through the
work tree `.gitattributes`, which name drivers. The engine tree (and its `.git`) may belong to a less
privileged user, and lint's repository holds a fork's files, so patchkit never lets git read either's
configuration:

- patchkit reads the refs itself (`HEAD`, loose refs, `packed-refs`: bounded reads, no link followed) from the
  `.git` folder it opened, refusing what it cannot read plainly (a `.git` file of a linked worktree or a
  submodule, a symbolic link, reftable, a sha256 repository) as "cannot tell";
- git then runs only in a private bare repository made for the one question (SealedGit): a fresh 0700
  temporary folder of the running user, holding a two-line config of its own, the refs patchkit read
  (`packed-refs`), and `objects/info/alternates` naming the repository's objects folder through the descriptor
  patchkit opened (`/proc/self/fd/N`, inherited by git alone). Objects are data: an alternate lends git
  objects and nothing else (no config, no hooks, no attributes, no remote);
- its environment is built from nothing (not from os.environ): PATH, an empty private HOME and
  XDG_CONFIG_HOME, no system or global config, no terminal prompt, no replace objects, no optional locks,
  LC_ALL=C, stdin from /dev/null, a timeout; every run also passes `protocol.allow=never`, `core.hooksPath`
  and `core.fsmonitor` off, `core.pager=cat`. With no remote and no promisor in the private config, a
  missing object is simply missing: git has nothing to fetch from (`GIT_NO_LAZY_FETCH=1` is set too, for a
  git new enough to read it);
- only plumbing runs (`rev-parse --verify`, `merge-base`, `diff-tree`, `ls-tree`, `cat-file`), with
  `--end-of-options` or `--` before anything that came from outside, and what came from outside is checked
  first (never an option).

`vet`, when given, is the caller's ownership rule, applied to every folder and file read here on the
descriptor or link-free lstat about to be used (the engine tree uses `.patchkit`'s rule: workspace.trust).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from patchkit.errors import PatchkitError
from patchkit.input.limits import GIT_TIMEOUT, MAX_GIT_REF_BYTES, MAX_GIT_REFS, MAX_PACKED_REFS_BYTES
from patchkit.input.tree import open_child_dir, read_entry

Vet = Callable[[os.stat_result, str], None]  # raises GitUnreadable to refuse what it is shown

GIT_DIR_NAME = ".git"
PSEUDO_REFS = ("FETCH_HEAD", "ORIG_HEAD")
_HEX40 = re.compile(r"[0-9a-f]{40}")
# A ref name as patchkit reads one: under refs/, plain components (no "..", none starting with "." or ending in
# ".lock", none of git's forbidden characters). Anything else is refused, never looked up.
_REF_NAME = re.compile(r"refs/(?:[A-Za-z0-9_+,=@%-][A-Za-z0-9_.+,=@%-]*/)*[A-Za-z0-9_+,=@%-][A-Za-z0-9_.+,=@%-]*")
_MAX_SYMREF_DEPTH = 5
_DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# Every git run: no network, no hook, no fsmonitor, no pager; whatever a config could say (there is none).
SEALED_OPTIONS = (
    "-c", "protocol.allow=never", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false",
    "-c", "core.pager=cat", "-c", "core.askPass=", "-c", "credential.helper=", "-c", "diff.external=",
)
# What patchkit's private bare repository says of itself; nothing more (no remote, no promisor, no extension).
_PRIVATE_CONFIG = "[core]\n\trepositoryformatversion = 0\n\tbare = true\n"


class GitUnreadable(Exception):
    """patchkit cannot (or will not) let git answer about this repository; `reason` says why, for a message."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class GitDir:
    """An opened git folder: its descriptor (HEAD, FETCH_HEAD), its common folder's (refs, packed-refs,
    shallow; the same folder but for a linked worktree) and its objects folder's, with their paths for messages."""

    fd: int
    common_fd: int
    objects_fd: int
    shown: str
    common_shown: str


@contextmanager
def open_git_dir(
    parent_fd: int, parent: Path, vet: Vet | None = None, *, follow_gitfile: bool = False
) -> Iterator[GitDir | None]:
    """`<parent>/.git` opened link-free and vetted, with its objects folder; None if there is no `.git`.

    A `.git` file (a linked worktree, a submodule) is refused unless `follow_gitfile` (lint's repository, the
    runner's own): then its `gitdir:` and that folder's `commondir` are followed, by path."""
    shown = f"{str(parent).rstrip('/')}/{GIT_DIR_NAME}"
    try:
        st = os.stat(GIT_DIR_NAME, dir_fd=parent_fd, follow_symlinks=False)
    except FileNotFoundError:
        yield None
        return
    except OSError as exc:
        raise GitUnreadable(f"cannot look at {shown}: {exc.strerror}") from None
    with ExitStack() as stack:
        if stat.S_ISREG(st.st_mode) and follow_gitfile:
            shown = _pointed(parent_fd, GIT_DIR_NAME, shown, "gitdir: ", parent)
            fd = _open_by_path(shown, stack)
        elif stat.S_ISREG(st.st_mode):
            raise GitUnreadable(f"{shown} is a file (a linked worktree or a submodule): patchkit reads only a "
                                ".git folder")
        elif not stat.S_ISDIR(st.st_mode):
            raise GitUnreadable(f"{shown} is not a folder (a symbolic link or another kind of file)")
        else:
            opened = _open_folder(parent_fd, GIT_DIR_NAME, shown, vet)
            if opened is None:
                raise GitUnreadable(f"{shown} vanished while being read")
            stack.callback(os.close, opened)
            fd = opened
        common_shown, common = shown, fd
        if follow_gitfile and _exists(fd, "commondir"):
            common_shown = _pointed(fd, "commondir", f"{shown}/commondir", "", Path(shown))
            common = _open_by_path(common_shown, stack)
        objects = _open_folder(common, "objects", f"{common_shown}/objects", vet)
        if objects is None:
            raise GitUnreadable(f"{common_shown} has no objects folder: not a repository patchkit can read")
        stack.callback(os.close, objects)
        if vet is not None:
            _vet_subfolders(objects, f"{common_shown}/objects", vet)
        yield GitDir(fd, common, objects, shown, common_shown)


def _pointed(folder_fd: int, name: str, shown: str, prefix: str, base: Path) -> str:
    """The folder a `.git` file (`gitdir: X`) or a `commondir` file names, absolute (relative to `base`)."""
    text = _read_small(folder_fd, name, shown, None) or ""
    line = text.strip()
    if not line.startswith(prefix) or "\n" in line:
        raise GitUnreadable(f"{shown} does not name a git folder")
    return os.path.normpath(base / line[len(prefix):].strip())


def _open_by_path(path: str, stack: ExitStack) -> int:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise GitUnreadable(f"cannot open the git folder {path}: {exc.strerror}") from None
    stack.callback(os.close, fd)
    return fd


def _exists(folder_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def read_head(repo: GitDir, vet: Vet | None = None) -> str:
    """The commit id HEAD names, resolved through loose refs and packed-refs as git would."""
    text = _read_small(repo.fd, "HEAD", f"{repo.shown}/HEAD", vet)
    if text is None:
        raise GitUnreadable(f"{repo.shown} has no HEAD: not a repository patchkit can read")
    packed: dict[str, str] | None = None
    for _ in range(_MAX_SYMREF_DEPTH):
        value = text.strip()
        if _HEX40.fullmatch(value):
            return value
        if not value.startswith("ref: "):
            raise GitUnreadable(f"{repo.shown}: HEAD holds neither a commit id nor a ref (a sha256 repository?)")
        name = value[5:].strip()
        if not _REF_NAME.fullmatch(name):
            raise GitUnreadable(f"{repo.shown}: HEAD names {name!r}, not a ref patchkit reads (reftable?)")
        loose = _read_loose(repo, name, vet)
        if loose is not None:
            text = loose
            continue
        if packed is None:
            packed = read_packed_refs(repo, vet)
        if name in packed:
            return packed[name]
        raise GitUnreadable(f"HEAD names {name}, which has no commit yet (an unborn branch)")
    raise GitUnreadable(f"{repo.shown}: HEAD goes through more than {_MAX_SYMREF_DEPTH} symbolic refs")


def read_refs(repo: GitDir, vet: Vet | None = None) -> dict[str, str]:
    """Every ref of the repository that names an object (name -> id): packed-refs, then loose refs over them.
    A symbolic ref (refs/remotes/origin/HEAD) is resolved to what it names; one that names nothing is left out."""
    refs = read_packed_refs(repo, vet)
    symbolic: dict[str, str] = {}
    for name, value in _walk_loose(repo, vet):
        if _HEX40.fullmatch(value):
            refs[name] = value
        elif value.startswith("ref: "):
            symbolic[name] = value[5:].strip()
    for name, target in symbolic.items():
        for _ in range(_MAX_SYMREF_DEPTH):
            if target in refs or target not in symbolic:
                break
            target = symbolic[target]
        if target in refs:
            refs[name] = refs[target]
    return refs


def read_packed_refs(repo: GitDir, vet: Vet | None = None) -> dict[str, str]:
    """`packed-refs` as name -> id (peeled `^` lines and the header skipped); empty if there is none."""
    text = _read_small(repo.common_fd, "packed-refs", f"{repo.common_shown}/packed-refs", vet,
                       limit=MAX_PACKED_REFS_BYTES)
    refs: dict[str, str] = {}
    for line in (text or "").splitlines():
        sha, _, name = line.partition(" ")
        if _HEX40.fullmatch(sha) and _REF_NAME.fullmatch(name):
            refs[name] = sha
    return refs


def read_pseudo_refs(repo: GitDir, vet: Vet | None = None) -> dict[str, str]:
    """FETCH_HEAD and ORIG_HEAD (name -> the first commit id each names), for a `--base FETCH_HEAD`."""
    found: dict[str, str] = {}
    for name in PSEUDO_REFS:
        text = _read_small(repo.fd, name, f"{repo.shown}/{name}", vet, limit=MAX_PACKED_REFS_BYTES)
        first = (text or "").split(None, 1)
        if first and _HEX40.fullmatch(first[0]):
            found[name] = first[0]
    return found


def read_shallow(repo: GitDir, vet: Vet | None = None) -> str | None:
    """The shallow clone's boundary commits (`.git/shallow`), which git needs to walk its history; or None."""
    text = _read_small(repo.common_fd, "shallow", f"{repo.common_shown}/shallow", vet, limit=MAX_PACKED_REFS_BYTES)
    if text is None:
        return None
    if not all(_HEX40.fullmatch(line) for line in text.split()):
        raise GitUnreadable(f"{repo.common_shown}/shallow holds something other than commit ids")
    return text


class SealedGit:
    """A private bare repository lending `repo`'s objects, with the refs given: `run` asks git about it.

    Use as a context manager; the private folder (and the git it made) is removed on exit."""

    def __init__(self, repo: GitDir, head: str, refs: Mapping[str, str] | None = None,
                 shallow: str | None = None, pseudo: Mapping[str, str] | None = None) -> None:
        self._objects_fd = repo.objects_fd
        self._private = Path(tempfile.mkdtemp(prefix="patchkit-git-"))  # 0700, ours, a fresh name
        try:
            self._lay_out(repo, head, refs or {}, shallow)
            for name, sha in (pseudo or {}).items():
                if name in PSEUDO_REFS and _HEX40.fullmatch(sha):
                    (self._private / "repo" / name).write_text(sha + "\n", encoding="ascii")
        except BaseException:
            shutil.rmtree(self._private, ignore_errors=True)
            raise
        self._git = shutil.which("git")
        self._env = sealed_environment(self._private / "home", self._private / "repo")

    def _lay_out(self, repo: GitDir, head: str, refs: Mapping[str, str], shallow: str | None) -> None:
        store = self._private / "repo"
        (store / "objects" / "info").mkdir(parents=True)
        (store / "refs").mkdir()
        (self._private / "home").mkdir()
        (store / "config").write_text(_PRIVATE_CONFIG, encoding="utf-8")
        (store / "HEAD").write_text(head + "\n", encoding="ascii")  # detached: names only a commit id
        packed = "".join(f"{sha} {name}\n" for name, sha in sorted(refs.items()))
        (store / "packed-refs").write_text("# pack-refs with: peeled fully-peeled sorted \n" + packed, "ascii")
        if shallow is not None:
            (store / "shallow").write_text(shallow, encoding="ascii")
        (store / "objects" / "info" / "alternates").write_text(_objects_path(repo) + "\n", encoding="utf-8")

    def run(self, *args: str, input: bytes | None = None, check: bool = False) -> subprocess.CompletedProcess[bytes]:
        """git ARGS in the private repository (stdin: `input`, else /dev/null); GitUnreadable if git cannot run,
        times out, or (check) fails."""
        if self._git is None:
            raise GitUnreadable("cannot run git: no git executable on PATH")
        try:
            done = subprocess.run(
                [self._git, *SEALED_OPTIONS, *args], cwd=self._private / "repo", env=self._env, input=input,
                stdin=subprocess.DEVNULL if input is None else None, capture_output=True, timeout=GIT_TIMEOUT,
                check=False, pass_fds=(self._objects_fd,), close_fds=True,
            )
        except subprocess.TimeoutExpired:
            raise GitUnreadable(f"git {args[0]} took more than {GIT_TIMEOUT:.0f} s") from None
        except OSError as exc:
            raise GitUnreadable(f"cannot run git: {exc.strerror}") from None
        if check and done.returncode != 0:
            said = done.stderr.decode(errors="replace").strip()[:400]
            raise GitUnreadable(f"git {args[0]} failed (exit {done.returncode}): {said}")
        return done

    def close(self) -> None:
        shutil.rmtree(self._private, ignore_errors=True)

    def __enter__(self) -> SealedGit:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def sealed_environment(home: Path, git_dir: Path) -> dict[str, str]:
    """git's whole environment, from nothing: no variable of the caller's reaches git but PATH."""
    return {
        "PATH": os.environ.get("PATH") or _DEFAULT_PATH,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home),
        "GIT_DIR": str(git_dir),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_NO_LAZY_FETCH": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_PROTOCOL_FROM_USER": "0",
        "GIT_LITERAL_PATHSPECS": "1",  # a folder name is a name, never a pattern or pathspec magic
        "LC_ALL": "C",
    }


def _objects_path(repo: GitDir) -> str:
    """The objects folder as git in the child sees it: the very descriptor opened and vetted (inherited)."""
    through_fd = f"/proc/self/fd/{repo.objects_fd}"
    if os.path.isdir(through_fd):
        return through_fd
    return f"{repo.common_shown}/objects"  # no /proc: by path (vetted above; only its owner or root can swap it)


def _open_folder(parent_fd: int, name: str, shown: str, vet: Vet | None) -> int | None:
    try:
        fd = open_child_dir(parent_fd, name, name, shown)
    except PatchkitError as exc:
        raise GitUnreadable(exc.message) from None
    if fd is not None and vet is not None:
        try:
            vet(os.fstat(fd), shown)
        except BaseException:
            os.close(fd)
            raise
    return fd


def _vet_subfolders(objects_fd: int, shown: str, vet: Vet) -> None:
    """Every folder git reads objects from under `objects/` (the fan-out folders, pack/, info/) passes `vet`,
    and so does every file of `info/` (alternates, commit-graph, packs): git reads those by name."""
    with os.scandir(objects_fd) as entries:
        for entry in entries:
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                raise GitUnreadable(f"{shown}/{entry.name} is a symbolic link")
            if stat.S_ISDIR(st.st_mode):
                vet(st, f"{shown}/{entry.name}")
    info = _open_folder(objects_fd, "info", f"{shown}/info", vet)
    if info is None:
        return
    try:
        with os.scandir(info) as entries:
            for entry in entries:
                vet(entry.stat(follow_symlinks=False), f"{shown}/info/{entry.name}")
    finally:
        os.close(info)


def _read_small(folder_fd: int, name: str, shown: str, vet: Vet | None, limit: int = MAX_GIT_REF_BYTES) -> str | None:
    """A file of `.git` (HEAD, a ref, packed-refs), link-free and bounded, vetted; None if absent."""
    try:
        if vet is not None:
            try:
                vet(os.stat(name, dir_fd=folder_fd, follow_symlinks=False), shown)
            except FileNotFoundError:
                return None
        snap = read_entry(folder_fd, name, name, shown, limit=limit)
    except PatchkitError as exc:
        raise GitUnreadable(exc.message) from None
    if snap.data is None:
        return None
    try:
        return snap.data.decode("ascii")
    except UnicodeDecodeError:
        raise GitUnreadable(f"{shown} is not a ref file (not ASCII)") from None


def _read_loose(repo: GitDir, name: str, vet: Vet | None) -> str | None:
    """The loose ref file `name` (e.g. refs/heads/main), each folder on the way opened link-free and vetted."""
    folder, _, leaf = name.rpartition("/")
    fd = _open_path(repo, folder, vet)
    if fd is None:
        return None
    try:
        return _read_small(fd, leaf, f"{repo.common_shown}/{name}", vet)
    finally:
        os.close(fd)


def _walk_loose(repo: GitDir, vet: Vet | None) -> Iterator[tuple[str, str]]:
    """(name, content) of every loose ref under refs/, link-free, at most MAX_GIT_REFS of them."""
    todo = ["refs"]
    seen = 0
    while todo:
        folder = todo.pop()
        fd = _open_path(repo, folder, vet)
        if fd is None:
            continue
        try:
            names = sorted(os.listdir(fd))
            for name in names:
                rel = f"{folder}/{name}"
                seen += 1
                if seen > MAX_GIT_REFS:
                    raise GitUnreadable(f"{repo.common_shown} has more than {MAX_GIT_REFS} loose refs")
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    todo.append(rel)
                elif stat.S_ISREG(st.st_mode) and _REF_NAME.fullmatch(rel):
                    text = _read_small(fd, name, f"{repo.common_shown}/{rel}", vet)
                    if text is not None:
                        yield rel, text.strip()
        finally:
            os.close(fd)


def _open_path(repo: GitDir, rel: str, vet: Vet | None) -> int | None:
    fd = os.dup(repo.common_fd)
    shown = repo.common_shown
    for part in rel.split("/"):
        shown = f"{shown}/{part}"
        try:
            child = _open_folder(fd, part, shown, vet)
        finally:
            os.close(fd)
        if child is None:
            return None
        fd = child
    return fd
