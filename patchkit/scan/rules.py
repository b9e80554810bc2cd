"""The scan rules: independent functions from one file's ScriptView to the patch sites of one kind.

SCAN_RULES maps every SiteKind to its rule, so a kind can be switched off (`[tool.patchkit] scan-ignore`) and
each rule tested alone. A rule never reports a call of patchkit itself (managed patching).
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from collections.abc import Callable, Iterator

from patchkit.scan.config import normalise_package
from patchkit.scan.engine import Resolved, is_make_install
from patchkit.scan.pip import conda_arguments, is_local_tree, pip_arguments
from patchkit.scan.python import diff_targets, is_backup_suffix, looks_like_diff
from patchkit.scan.shell import Command, argv_of, program_name
from patchkit.scan.sites import PatchSite, SiteKind
from patchkit.scan.sources import ScriptView, is_managed

ScanRule = Callable[[ScriptView], Iterator[PatchSite]]

_SCRATCH_PREFIXES = ("/tmp/", "/var/tmp/", "$TMPDIR", "${TMPDIR", "$RUNNER_TEMP", "${RUNNER_TEMP")


def _site(view: ScriptView, command: Command, kind: SiteKind, engine: Resolved | str | None, text: str = "",
          reason: str = "") -> PatchSite:
    if isinstance(engine, Resolved):
        shown: str | None = engine.shown
        reason = reason or engine.reason
    else:
        shown = engine
    if kind in _RECLASSIFIED and shown is not None and _METADATA.search(shown):
        kind = SiteKind.METADATA_EDIT
    return PatchSite(view.path, command.line, kind, text or command.text, shown, reason=reason)


# A write, edit or copy onto installed metadata is its own kind (it changes what pip and importlib report).
_METADATA = re.compile(r"\.(?:dist|egg)-info(?:/|$)")
_RECLASSIFIED = frozenset({SiteKind.IN_PLACE_EDIT, SiteKind.FILE_WRITE, SiteKind.COPY_OVER, SiteKind.PYTHON_WRITE,
                           SiteKind.DOWNLOAD_OVER})


def _commands(view: ScriptView) -> Iterator[tuple[Command, int, tuple[str, ...]]]:
    """(command, index of its argv[0] in its words, argv) for every command that is not patchkit's."""
    yield from view.runnable


def _engine(view: ScriptView, command: Command, index: int) -> Resolved | None:
    """The engine path word `index` of the command names, if any: the word itself, or a relative path in an
    engine folder the script changed into (`cd /sgl-workspace/sglang`, `cd vllm` after cloning vllm)."""
    for position, shown, reason in command.known:
        if position == index:
            return Resolved(shown, reason)
    if not 0 <= index < len(command.words):
        return None
    return _word_engine(view, command, command.words[index])


def _word_engine(view: ScriptView, command: Command, word: str) -> Resolved | None:
    """A word of the command (or its redirection's target) as an engine path, if it is one."""
    found = view.resolver.resolve(word, command.scope)
    if found is not None or not word or word.startswith(("/", "$", "~", "-")) or "://" in word:
        return found
    folder = _directory_before(view, command)
    if folder is None:
        return None
    inside = view.resolver.resolve(folder, command.scope)
    if inside is None:
        return None
    relative = word[2:] if word.startswith("./") else word
    shown = inside.shown if relative in ("", ".") else f"{inside.shown.rstrip('/')}/{relative}"
    return Resolved(shown, f"{inside.reason}; run in {folder}")


def _directory_before(view: ScriptView, command: Command) -> str | None:
    """The folder the command runs in, as written: the last `cd DIR` / `pushd DIR` before it in the file."""
    return view.folders.get(id(command))


def _in_other_clone(view: ScriptView, folder: str | None) -> bool:
    """The folder is a clone of a repository that is not a configured engine package and that the script does
    not install from (a benchmark harness run from its clone); one it installs is an engine checkout (#33)."""
    found = view.resolver.clone_holding(folder) if folder is not None else None
    if found is None or view.resolver.config.is_engine_package(found[1]):
        return False
    return view.resolver.installed_from(found[0]) is None


def _resolve_folder(view: ScriptView, command: Command, folder: str) -> Resolved | None:
    return view.resolver.resolve(folder, command.scope)


def _is_scratch(view: ScriptView, word: str) -> bool:
    """A temporary folder: `$(mktemp -d)` held in a variable, or under /tmp: not the engine's tree."""
    package = view.resolver.clone_of(word)
    if package is not None and view.resolver.config.is_engine_package(package):
        return False  # an engine cloned into /tmp is still the engine that gets installed
    if word.startswith(_SCRATCH_PREFIXES) or "mktemp" in word:
        return True
    return any(word.startswith((f"${name}", f"${{{name}}}")) for name in view.scratch)


def _operands(argv: tuple[str, ...], start: int, valued: frozenset[str]) -> list[int]:
    """Indexes (into argv) of the operands from `start`: not options, nor the values of `valued` options."""
    out: list[int] = []
    index = start
    while index < len(argv):
        word = argv[index]
        if word == "--":
            out += range(index + 1, len(argv))
            break
        if word.startswith("-") and len(word) > 1:
            index += 2 if word in valued else 1
            continue
        out.append(index)
        index += 1
    return out


# ---------------------------------------------------------------------------------------- git apply / patch


_GIT_VALUED = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path"})
_GIT_READ_ONLY = frozenset({"--check", "--stat", "--numstat", "--summary"})
# The options of git's own that name the folder a command works in, as each rule reads them.
_GIT_APPLY_FOLDERS = frozenset({"-C", "--work-tree"})
_GIT_CHECKOUT_FOLDERS = frozenset({"-C"})


def _git_options(argv: tuple[str, ...], folder_options: frozenset[str]) -> tuple[int, str | None, int | None]:
    """git's own options before its subcommand: (the subcommand's index, or len(argv) when there is none; the
    folder the last of `folder_options` (or a `--work-tree=DIR`) names; the index of the word of the last of
    `folder_options`, None when there is none)."""
    index, folder, folder_at = 1, None, None
    while index < len(argv) and argv[index].startswith("-"):
        option = argv[index]
        if option in folder_options and index + 1 < len(argv):
            folder, folder_at = argv[index + 1], index + 1
        elif option.startswith("--work-tree="):
            folder = option.split("=", 1)[1]
        index += 2 if option in _GIT_VALUED else 1
    return index, folder, folder_at


def find_git_apply(view: ScriptView) -> Iterator[PatchSite]:
    """`git apply` / `git am` that change files (not `--check` / `--stat`), unless run in a temporary repo."""
    for command, offset, argv in _commands(view):
        if program_name(argv[0]) != "git":
            continue
        index, folder, folder_at = _git_options(argv, _GIT_APPLY_FOLDERS)
        if index >= len(argv) or argv[index] not in ("apply", "am"):
            continue
        rest = argv[index + 1 :]
        if argv[index] == "apply" and _GIT_READ_ONLY & set(rest) and "--apply" not in rest:
            continue
        directories = [r.split("=", 1)[1] for r in rest if r.startswith("--directory=")]
        folder = folder or _directory_before(view, command)
        if folder is not None and (_is_scratch(view, folder) or _in_other_clone(view, folder)):
            continue
        engine = _engine(view, command, offset + folder_at) if folder_at is not None else None
        for candidate in [folder, *directories]:
            engine = engine or (_resolve_folder(view, command, candidate) if candidate else None)
        yield _site(view, command, SiteKind.GIT_APPLY, engine)


# Subcommands that change the files of the work tree they run in (or, for clone, create one).
_GIT_TREE_CHANGING = frozenset(
    {"checkout", "switch", "restore", "cherry-pick", "pull", "merge", "rebase", "reset", "revert", "stash", "clone"}
)
_GIT_READ_ONLY_FORMS = frozenset({"--help", "-h", "--list", "-l", "show", "list"})


def find_git_checkouts(view: ScriptView) -> Iterator[PatchSite]:
    """`git checkout REF`, `cherry-pick`, `pull`, `reset --hard`, ... run in an engine checkout (by `-C DIR` or a
    `cd DIR` before it), and `git clone URL DIR` into an engine path: the engine is then other code."""
    for command, offset, argv in _commands(view):
        if program_name(argv[0]) != "git":
            continue
        index, _, folder_at = _git_options(argv, _GIT_CHECKOUT_FOLDERS)
        if index >= len(argv) or argv[index] not in _GIT_TREE_CHANGING:
            continue
        sub, rest = argv[index], argv[index + 1 :]
        if _GIT_READ_ONLY_FORMS & set(rest[:1]) or (sub == "stash" and rest[:1] not in (("pop",), ("apply",))):
            continue
        if sub == "clone":
            operands = _operands(argv, index + 1, frozenset({"-b", "--branch", "--depth", "-o", "--origin"}))
            engine = _engine(view, command, offset + operands[1]) if len(operands) >= 2 else None
            if engine is not None and engine.reason.startswith("a clone of"):
                continue  # a fresh clone outside the engine's roots changes nothing that runs; its checkout,
                # edits and install do
        elif folder_at is not None:
            engine = _engine(view, command, offset + folder_at)
        else:
            cwd = _directory_before(view, command)
            engine = _resolve_folder(view, command, cwd) if cwd else None
        if engine is not None:
            yield _site(view, command, SiteKind.GIT_CHECKOUT, engine)


_PATCH_VALUED = frozenset({"-p", "-d", "-i", "-o", "-r", "-B", "-D", "-F", "-V", "-Y", "-z", "-g"})


def find_patch(view: ScriptView) -> Iterator[PatchSite]:
    """`patch -p1 < x.diff`, `patch -d DIR -i x.diff`, `patch FILE x.diff`; not `--dry-run`, not a bare word."""
    for command, offset, argv in _commands(view):
        if program_name(argv[0]) != "patch":
            continue
        rest = argv[1:]
        if not rest and not command.redirects and not command.heredocs:
            continue  # a function named patch, or the word alone
        if {"--dry-run", "--help", "--version"} & set(rest):
            continue
        folder_at = next((i for i, w in enumerate(argv) if w == "-d" and i + 1 < len(argv)), None)
        folder = argv[folder_at + 1] if folder_at is not None else None
        folder = folder or next((w.split("=", 1)[1] for w in rest if w.startswith("--directory=")), None)
        folder = folder or next((w[2:] for w in rest if w.startswith("-d") and len(w) > 2), None)
        cwd = folder or _directory_before(view, command)
        if cwd is not None and (_is_scratch(view, cwd) or _in_other_clone(view, cwd)):
            continue
        engine = _engine(view, command, offset + folder_at + 1) if folder_at is not None else None
        for index in _operands(argv, 1, _PATCH_VALUED)[:1]:
            engine = engine or _engine(view, command, offset + index)
        engine = engine or (_resolve_folder(view, command, cwd) if cwd else None)
        yield _site(view, command, SiteKind.PATCH, engine)


def find_heredoc_diffs(view: ScriptView) -> Iterator[PatchSite]:
    """Heredoc bodies (and Python string constants) that are unified diffs: inline patches."""
    for command in view.commands:
        if is_managed(command):
            continue
        for heredoc in command.heredocs:
            body = "\n".join(heredoc.body)
            if looks_like_diff(body):
                text = f"{command.text} [diff {_digest(body)}]"
                yield _site(view, command, SiteKind.HEREDOC_DIFF, _shown_targets(body), text)
    for diff in view.diffs:
        command = Command((), (), (), (), diff.line)
        yield _site(view, command, SiteKind.HEREDOC_DIFF, _shown_targets(diff.text), f"[diff {_digest(diff.text)}]")


def _digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def _shown_targets(diff: str) -> str | None:
    targets = diff_targets(diff)
    if not targets:
        return None
    more = f" (+{len(targets) - 1} more)" if len(targets) > 1 else ""
    return targets[0] + more


# ---------------------------------------------------------------------------------------- in-place edits


_SED_IN_PLACE = re.compile(r"-[nrsuEz]*i.*")
_PERL_IN_PLACE = re.compile(r"-[pnlaswTtWXcU0-9]*i.*")  # not -I/-M/-m/-e, whose values may hold an i
_SCRIPT_OPTIONS = {"sed": frozenset({"-e", "-f", "--expression", "--file"}), "perl": frozenset({"-e", "-E"}),
                   "ruby": frozenset({"-e"})}
_LINE_EDITORS = frozenset({"ed", "ex"})  # `ed -s FILE <<< $',s/a/b/\nw'`, `ex -sc '%s/a/b/|x' FILE`


def find_in_place_edits(view: ScriptView) -> Iterator[PatchSite]:
    """`sed -i` / `perl -pi` / `ruby -pi` whose target is an engine path (also under `find ... -exec` and
    `xargs`), and `ed FILE` / `ex FILE`, which edit the file they are given."""
    for command, offset, argv in _commands(view):
        if program_name(argv[0]) in _LINE_EDITORS:
            operands = _operands(argv, 1, frozenset({"-p", "-c"}))
            engine = next((e for i in operands if (e := _engine(view, command, offset + i)) is not None), None)
            if engine is not None:
                yield _site(view, command, SiteKind.IN_PLACE_EDIT, engine)
            continue
        for start, word in enumerate(argv):
            tool = program_name(word)
            if tool not in _SCRIPT_OPTIONS:
                continue
            if start and argv[start - 1] not in ("-exec", "-execdir") and not _after_xargs(argv, start):
                continue
            targets = _edit_targets(argv, start, tool)
            if targets is None:
                break
            if start and argv[0] == "find":
                targets += [i for i in range(1, len(argv)) if not argv[i].startswith(("-", "(", "!"))][:1]
            engine = next((e for i in targets if (e := _engine(view, command, offset + i)) is not None), None)
            if engine is None and not targets and _after_xargs(argv, start):
                engine = _piped_folder(view, command)
            if engine is not None:
                yield _site(view, command, SiteKind.IN_PLACE_EDIT, engine)
            break


def _piped_folder(view: ScriptView, command: Command) -> Resolved | None:
    """`grep -rl X ENGINE_DIR | xargs sed -i ...`: the engine folder the command piping the names searches."""
    before = [c for c in view.commands if c.line == command.line and c is not command]
    for other in before:
        _, argv = argv_of(other)
        if argv and program_name(argv[0]) in ("grep", "find", "rg", "ls", "git"):
            for word in argv[1:]:
                if not word.startswith("-") and (found := _word_engine(view, other, word)) is not None:
                    return found
    return None


def _after_xargs(argv: tuple[str, ...], start: int) -> bool:
    return "xargs" in argv[:start] and all(w.startswith("-") for w in argv[argv.index("xargs") + 1 : start])


def _edit_targets(argv: tuple[str, ...], start: int, tool: str) -> list[int] | None:
    """Indexes of the files an in-place sed / perl edits; None when it does not edit in place."""
    in_place = False
    script_given = False
    operands: list[int] = []
    index = start + 1
    pattern = _SED_IN_PLACE if tool == "sed" else _PERL_IN_PLACE
    while index < len(argv):
        word = argv[index]
        if word in _SCRIPT_OPTIONS[tool]:
            script_given = True
            index += 2
            continue
        if word.startswith(("--expression=", "--file=")):
            script_given = True
        elif word == "--in-place" or word.startswith("--in-place="):
            in_place = True
        elif word.startswith("-") and len(word) > 1:
            if pattern.fullmatch(word) and not word.startswith("-e"):
                in_place = True
            if tool != "sed" and word.endswith("e") and "i" in word[:-1]:
                script_given = True  # -pie: -p -i -e
                index += 2
                continue
            if tool != "sed" and re.fullmatch(r"-[a-zA-Z]*e", word):
                script_given = True
                index += 2
                continue
        elif word in ("{}", ";", "+", "\\;"):
            pass
        else:
            operands.append(index)
        index += 1
    if not in_place:
        return None
    return operands if script_given else operands[1:]


# ---------------------------------------------------------------------------------------- writes and copies


_WRITE_OPERATORS = frozenset({">", ">>", ">|", "&>", "&>>"})
# Commands that write the files they are given (the options that take a value).
_FILE_WRITERS = {"tee": frozenset(), "sponge": frozenset(),
                 "truncate": frozenset({"-s", "--size", "-r", "--reference"})}


def find_file_writes(view: ScriptView) -> Iterator[PatchSite]:
    """`cat > ENGINE_FILE`, `echo ... >> ENGINE_FILE`, `tee ENGINE_FILE`, `... | sponge ENGINE_FILE`,
    `truncate -s 0 ENGINE_FILE` (a download is download-over)."""
    for command, offset, argv in _commands(view):
        if program_name(argv[0]) in ("curl", "wget"):
            continue
        engine = next(
            (e for r in command.redirects if r.op in _WRITE_OPERATORS and (e := _word_engine(view, command, r.target))),
            None,
        )
        writer = program_name(argv[0])
        if engine is None and writer in _FILE_WRITERS:
            engine = next(
                (e for i in _operands(argv, 1, _FILE_WRITERS[writer]) if (e := _engine(view, command, offset + i))),
                None,
            )
        if engine is not None:
            yield _site(view, command, SiteKind.FILE_WRITE, engine)


_COPY_VALUED = {
    "cp": frozenset({"-t", "-S", "--target-directory"}),
    "mv": frozenset({"-t", "-S", "--target-directory"}),
    "install": frozenset({"-m", "-o", "-g", "-t", "-S", "--mode", "--owner", "--group"}),
    "rsync": frozenset({"-e", "--rsh", "--exclude", "--include", "--filter", "-f"}),
    "ln": frozenset({"-t", "-S", "--target-directory"}),
    "COPY": frozenset(),
    "ADD": frozenset(),
}


def find_copies_over(view: ScriptView) -> Iterator[PatchSite]:
    """`cp`/`mv`/`install`/`rsync`/`ln` and Dockerfile `COPY`/`ADD` onto an engine path; `tar -C` and
    `unzip -d` extracting into one."""
    for command, offset, argv in _commands(view):
        tool = program_name(argv[0])
        destination: int | None = None
        if tool in _COPY_VALUED:
            targeted = next((i + 1 for i, w in enumerate(argv) if w == "-t" and i + 1 < len(argv)), None)
            operands = _operands(argv, 1, _COPY_VALUED[tool])
            destination = targeted if targeted is not None else (operands[-1] if len(operands) >= 2 else None)
        elif tool == "tar" and _extracts(argv):
            destination = next((i + 1 for i, w in enumerate(argv) if w in ("-C", "--directory")), None)
        elif tool == "unzip":
            destination = next((i + 1 for i, w in enumerate(argv) if w == "-d"), None)
        elif tool == "dd":  # `dd if=x.so of=ENGINE_FILE`
            target = next((w[3:] for w in argv[1:] if w.startswith("of=")), None)
            found = _word_engine(view, command, target) if target else None
            if found is not None:
                yield _site(view, command, SiteKind.COPY_OVER, found)
            continue
        if destination is None or destination >= len(argv):
            continue
        if tool == "cp" and _is_backup_copy(argv, destination, _COPY_VALUED[tool]):
            continue
        engine = _engine(view, command, offset + destination)
        if engine is not None:
            yield _site(view, command, SiteKind.COPY_OVER, engine)


def _is_backup_copy(argv: tuple[str, ...], destination: int, valued: frozenset[str]) -> bool:
    """`cp F F.bak`: one source, copied beside itself under a backup name; the engine file stays as it was."""
    sources = [i for i in _operands(argv, 1, valued) if i != destination]
    if len(sources) != 1:
        return False
    source, copy = argv[sources[0]], argv[destination]
    return copy.startswith(source) and is_backup_suffix(copy[len(source):])


def _extracts(argv: tuple[str, ...]) -> bool:
    """`tar xzf`, `tar -xzf`, `tar -C DIR -xzf` (the extract flag anywhere), `tar --extract`."""
    first = argv[1] if len(argv) > 1 else ""
    if re.fullmatch(r"-?[a-zA-Z]*x[a-zA-Z]*", first) or "--extract" in argv or "--get" in argv:
        return True
    return any(re.fullmatch(r"-[a-zA-Z]*x[a-zA-Z]*", word) for word in argv[2:])


def find_python_writes(view: ScriptView) -> Iterator[PatchSite]:
    """Python (a file or embedded) writing, copying over or removing an engine file."""
    for write in view.writes:
        if write.target is None:
            continue
        command = Command((), (), (), (), write.line)
        yield _site(view, command, SiteKind.PYTHON_WRITE, write.target, write.statement, write.reason)


def find_unresolved_writes(view: ScriptView) -> Iterator[PatchSite]:
    """Python that imports an engine package and rewrites a file it has read, whose name cannot be told."""
    for write in view.writes:
        if write.target is None:
            command = Command((), (), (), (), write.line)
            yield _site(view, command, SiteKind.UNRESOLVED_WRITE, None, write.statement, write.reason)


# ---------------------------------------------------------------------------------------- pip


_DIRECT_URL = re.compile(r"^(?:git|hg|svn|bzr)\+\S+|^(?:https?|file|ftp)://\S+")
_NAMED_URL = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*@\s*(\S+)\s*$")


def find_pip_forks(view: ScriptView) -> Iterator[PatchSite]:
    """`pip install` of any package from a VCS URL, an archive URL or `name @ url`: it replaces what the image
    ships (the engine list only names it an engine package in the reason)."""
    config = view.resolver.config
    for command, _offset, argv in _commands(view):
        arguments = pip_arguments(argv)
        for operand in arguments.operands if arguments else ():
            package = _url_package(operand.word)
            if package is not None:
                how = "a VCS URL" if re.match(r"^(?:git|hg|svn|bzr)\+", package[1]) else "a URL"
                reason = f"{config.package_reason(package[0])} from {how}"
                yield _site(view, command, SiteKind.PIP_FORK, f"{package[0]} from {package[1]}", reason=reason)
                break


def _url_package(word: str) -> tuple[str, str] | None:
    """(distribution name, URL) of a direct-URL requirement, or None for a plain name or a local path."""
    named = _NAMED_URL.match(word)
    if named:
        return named.group(1), named.group(2)
    if not _DIRECT_URL.match(word):
        return None
    egg = re.search(r"[#&]egg=([A-Za-z0-9][A-Za-z0-9._-]*)", word)
    if egg:
        return egg.group(1), word
    path = re.sub(r"^[a-z+]+://", "", word.split("#", 1)[0]).rstrip("/")
    archive = re.search(r"/([^/]+)/archive/", path)  # a forge's archive: .../owner/repo/archive/ref.zip
    if archive:
        return normalise_package(archive.group(1)), word
    last = path.rsplit("/", 1)[-1]
    last = last.split("@", 1)[0]
    if last.endswith(".whl"):
        return last.split("-", 1)[0], word
    last = re.sub(r"(?:\.git|\.tar\.gz|\.tgz|\.zip|\.tar\.bz2)$", "", last)
    last = re.sub(r"-\d[\w.]*$", "", last)  # sglang-0.4.1 -> sglang
    return (normalise_package(last), word) if last else None


_REQUIREMENT_NAME = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?(?:[=<>!~;].*)?$")


def find_pip_indexes(view: ScriptView) -> Iterator[PatchSite]:
    """`pip install vllm --extra-index-url URL` (or `-i`, `--find-links`; `conda install -c URL pkg`): a package
    from outside the image, at whatever build that index serves."""
    config = view.resolver.config
    for command, _offset, argv in _commands(view):
        arguments = pip_arguments(argv) or conda_arguments(argv)
        if arguments is None or not arguments.indexes:
            continue
        packages = [
            named.group(1) for o in arguments.operands
            if "/" not in o.word and (named := _REQUIREMENT_NAME.match(o.word))
        ]
        chosen = next((p for p in packages if config.is_engine_package(p)), packages[0] if packages else None)
        if chosen is not None:
            reason = f"{config.package_reason(chosen)} from the index {arguments.indexes[0]}"
            yield _site(view, command, SiteKind.PIP_INDEX, f"{chosen} from {arguments.indexes[0]}", reason=reason)


_SETUP_INSTALLS = frozenset({"develop", "install", "bdist_wheel", "build_ext"})


def find_source_installs(view: ScriptView) -> Iterator[PatchSite]:
    """`pip install -e .`, `pip install .`, `python setup.py develop` of an engine checkout (a clone of an
    engine package, or an engine root): the engine that runs is then built from that tree, edits included."""
    for command, _offset, argv in _commands(view):
        targets: list[int] = []
        arguments = pip_arguments(argv)
        if arguments is not None:
            for operand in arguments.operands:
                word = operand.word
                if is_local_tree(word) or (operand.editable and "://" not in word and "+" not in word.split("/")[0]):
                    targets.append(operand.index)
        elif (
            len(argv) >= 3 and _PYTHON_PROGRAM.match(program_name(argv[0])) and argv[1].endswith("setup.py")
            and _SETUP_INSTALLS & set(argv[2:])
        ):
            targets.append(1)
        elif is_make_install(argv):  # `sudo make install` in a checkout: what it installs is built from there
            engine = _word_engine(view, command, ".")
            if engine is not None:
                yield _site(view, command, SiteKind.SOURCE_INSTALL, engine)
            continue
        for index in targets:
            word = re.sub(r"\[[^\]]*\]$", "", argv[index])  # python[all] -> python
            folder = posixpath.dirname(word) or "." if word.endswith("setup.py") else word
            engine = _word_engine(view, command, folder)
            if engine is None and folder != word:
                engine = _word_engine(view, command, ".")
            if engine is not None:
                yield _site(view, command, SiteKind.SOURCE_INSTALL, engine)
                break


_PYTHON_PROGRAM = re.compile(r"^python[\d.]*$")


def find_pip_local_wheels(view: ScriptView) -> Iterator[PatchSite]:
    """`pip install ./dist/vllm-0.6.3+rocm-cp312-...whl`: a package built elsewhere (a pip-fork)."""
    for command, _offset, argv in _commands(view):
        arguments = pip_arguments(argv)
        for word in (o.word for o in arguments.operands) if arguments else ():
            if "://" in word or not word.endswith((".whl", ".tar.gz", ".zip")):
                continue
            name = re.sub(r"-[\d*].*$", "", word.rsplit("/", 1)[-1])  # vllm-0.6.4+rocm-....whl, x-*.whl
            if name:
                reason = f"{view.resolver.config.package_reason(name)} from a local archive"
                yield _site(view, command, SiteKind.PIP_FORK, f"{name} from {word}", reason=reason)
                break


def find_downloads_over(view: ScriptView) -> Iterator[PatchSite]:
    """`curl -o ENGINE_FILE URL`, `wget -O ENGINE_FILE URL` (or `-P ENGINE_DIR`, or `> ENGINE_FILE`)."""
    for command, _offset, argv in _commands(view):
        tool = program_name(argv[0])
        if tool not in ("curl", "wget"):
            continue
        targets: list[str] = []
        for index, word in enumerate(argv[1:], 1):
            following = argv[index + 1] if index + 1 < len(argv) else None
            if tool == "curl":
                if word in ("-o", "--output", "--output-dir") or re.fullmatch(r"-[a-zA-Z]*o", word):
                    targets += [following] if following else []
                elif word.startswith("--output="):
                    targets.append(word.split("=", 1)[1])
            else:
                if word in ("-O", "--output-document", "-P", "--directory-prefix"):
                    targets += [following] if following else []
                elif word.startswith(("--output-document=", "--directory-prefix=")):
                    targets.append(word.split("=", 1)[1])
                elif re.fullmatch(r"-[a-zA-Z]*O", word) and following:
                    targets.append(following)
        targets += [r.target for r in command.redirects if r.op in _WRITE_OPERATORS]
        engine = next((e for t in targets if t != "-" and (e := _word_engine(view, command, t))), None)
        if engine is not None:
            yield _site(view, command, SiteKind.DOWNLOAD_OVER, engine)


def find_engine_removes(view: ScriptView) -> Iterator[PatchSite]:
    """`rm -f ENGINE_FILE`, `rm -rf ENGINE_DIR` (not bytecode caches, which Python rebuilds)."""
    for command, offset, argv in _commands(view):
        if program_name(argv[0]) != "rm":
            continue
        for index in _operands(argv, 1, frozenset()):
            word = argv[index]
            if "__pycache__" in word or word.endswith((".pyc", ".pyo")):
                continue
            engine = _engine(view, command, offset + index)
            if engine is not None:
                yield _site(view, command, SiteKind.ENGINE_REMOVE, engine)
                break


SCAN_RULES: dict[SiteKind, ScanRule] = {
    SiteKind.GIT_APPLY: find_git_apply,
    SiteKind.GIT_CHECKOUT: find_git_checkouts,
    SiteKind.PATCH: find_patch,
    SiteKind.HEREDOC_DIFF: find_heredoc_diffs,
    SiteKind.IN_PLACE_EDIT: find_in_place_edits,
    SiteKind.FILE_WRITE: find_file_writes,
    SiteKind.COPY_OVER: find_copies_over,
    SiteKind.PYTHON_WRITE: find_python_writes,
    SiteKind.PIP_FORK: lambda view: _chain(find_pip_forks(view), find_pip_local_wheels(view)),
    SiteKind.PIP_INDEX: find_pip_indexes,
    SiteKind.SOURCE_INSTALL: find_source_installs,
    SiteKind.METADATA_EDIT: lambda view: iter(()),  # reclassified from the edit, write and copy rules (_site)
    SiteKind.DOWNLOAD_OVER: find_downloads_over,
    SiteKind.ENGINE_REMOVE: find_engine_removes,
    SiteKind.UNRESOLVED_WRITE: find_unresolved_writes,
}


def _chain(*runs: Iterator[PatchSite]) -> Iterator[PatchSite]:
    for run in runs:
        yield from run
