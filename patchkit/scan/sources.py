"""Which files the scan reads, what language each is, and what each says: a ScriptView per file.

Shell scripts are read as shell; Python as Python; a Dockerfile's RUN instructions as shell and its COPY / ADD
as copies; a workflow's `run:` steps as shell. Code embedded in shell (`python - <<EOF`, `python -c "..."`,
`bash -c "..."`, `sh <<EOF`) is read too, with its own line numbers in the file.
"""

from __future__ import annotations

import functools
import json
import os
import posixpath
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path

from patchkit.scan.bash import read_shell
from patchkit.scan.config import ScanConfig
from patchkit.scan.engine import (
    EngineResolver,
    Resolved,
    assigned_values,
    locate_idiom,
    parent_of,
    working_folders,
)
from patchkit.scan.python import InlineDiff, PythonWrite, printed_value, read_python, shell_placeholders
from patchkit.scan.shell import Command, Heredoc, argv_of, program_name


class Language(Enum):
    SHELL = "shell"
    PYTHON = "python"
    DOCKERFILE = "dockerfile"
    WORKFLOW = "workflow"
    REQUIREMENTS = "requirements"
    MAKEFILE = "makefile"


@dataclass(frozen=True)
class ScriptView:  # not slotted: `runnable` is computed once
    """Everything the scan rules look at in one file."""

    path: str  # repository-relative POSIX path
    language: Language
    commands: tuple[Command, ...]  # in file order, embedded code included
    writes: tuple[PythonWrite, ...]
    diffs: tuple[InlineDiff, ...]  # diff-looking Python strings; heredoc diffs are on their commands
    resolver: EngineResolver
    scratch: frozenset[str]  # shell variables holding a temporary folder (mktemp)
    problems: tuple[tuple[int | None, str], ...]  # (line, what) of parts that could not be read

    @functools.cached_property
    def folders(self) -> dict[int, str | None]:
        """The folder each command (by id) runs in, as written (engine.working_folders)."""
        return working_folders(self.commands)

    @functools.cached_property
    def runnable(self) -> tuple[tuple[Command, int, tuple[str, ...]], ...]:
        """(command, index of argv[0] in its words, argv) of every command that is not a call of patchkit."""
        out = []
        for command in self.commands:
            offset, argv = argv_of(command)
            if argv and not is_managed(command):
                out.append((command, offset, argv))
        return tuple(out)


def matches_glob(pattern: str, path: str) -> bool:
    """`*` within one path component, `**` across components (`**/x` also matches `x`), `?` one character."""
    return _glob_regex(pattern).fullmatch(path) is not None


@functools.lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    out = []
    index = 0
    while index < len(pattern):
        if pattern.startswith("**/", index):
            out.append("(?:.*/)?")
            index += 3
        elif pattern.startswith("**", index):
            out.append(".*")
            index += 2
        elif pattern[index] == "*":
            out.append("[^/]*")
            index += 1
        elif pattern[index] == "?":
            out.append("[^/]")
            index += 1
        else:
            out.append(re.escape(pattern[index]))
            index += 1
    return re.compile("".join(out))


def select_paths(paths: Iterable[str], config: ScanConfig) -> list[str]:
    return sorted(
        p
        for p in paths
        if any(matches_glob(g, p) for g in config.include) and not any(matches_glob(g, p) for g in config.exclude)
    )


# ---------------------------------------------------------------------------------------- the work tree


def walk_files(root: Path, prune: frozenset[str]) -> list[tuple[str, Path]]:
    """(root-relative POSIX path, path) of every regular file below `root`, links never followed, folders
    named in `prune` skipped. Iterative: a tree thousands of folders deep is walked, not a RecursionError (as
    os.walk is before Python 3.12); a folder that cannot be listed (a path past PATH_MAX) is skipped."""
    found: list[tuple[str, Path]] = []
    stack: list[tuple[Path, str]] = [(root, "")]
    while stack:
        folder, prefix = stack.pop()
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError:
            continue
        below = []
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in prune:
                        below.append((Path(entry.path), f"{prefix}{entry.name}/"))
                elif entry.is_file(follow_symlinks=False):
                    found.append((prefix + entry.name, Path(entry.path)))
            except OSError:
                continue
        stack.extend(reversed(below))
    return found


def read_capped(path: Path, limit: int) -> bytes | None:
    """A regular file's bytes, never through a final link; None when it holds more than `limit` bytes, known
    from fstat before a byte is read (and checked while reading: the file may grow). OSError for a link (ELOOP),
    a file that is not regular, or an I/O error."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)  # a FIFO never blocks
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{path} is not a regular file")
        if st.st_size > limit:
            return None
        chunks = []
        left = limit + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    return None if len(data) > limit else data


_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash"})


def language_of(path: str, text: str) -> Language | None:
    name = path.rsplit("/", 1)[-1]
    lower = name.lower()
    if lower.endswith((".sh", ".bash")):
        return Language.SHELL
    if lower.endswith(".py"):
        return Language.PYTHON
    if lower in ("dockerfile", "containerfile") or lower.startswith("dockerfile.") or lower.endswith(".dockerfile"):
        return Language.DOCKERFILE
    if lower.endswith((".yml", ".yaml")):
        return Language.WORKFLOW
    if lower.startswith("requirements") and lower.endswith(".txt"):
        return Language.REQUIREMENTS
    if lower in ("makefile", "gnumakefile") or lower.endswith(".mk"):
        return Language.MAKEFILE
    program = _interpreter(text)
    if program in _SHELLS:
        return Language.SHELL
    if program is not None and re.fullmatch(r"python[\d.]*", program):
        return Language.PYTHON
    return None


def _interpreter(text: str) -> str | None:
    """The program a `#!` line runs (`#!/usr/bin/env -S bash -e` -> bash), or None."""
    if not text.startswith("#!"):
        return None
    words = text[2:].split("\n", 1)[0].split()
    if not words:
        return None
    program = words[0].rsplit("/", 1)[-1]
    if program == "env":
        program = next((w for w in words[1:] if not w.startswith("-") and "=" not in w), "")
    return program or None


def read_view(
    path: str, text: str, language: Language, config: ScanConfig, repository: Mapping[str, bytes] | None = None
) -> ScriptView:
    """One file read for the rules; `repository` (path -> content) holds the other files a script may run
    (`python "$(dirname "$0")/graft.py" ENGINE_FILE`), whose writes of what they are given count at the call."""
    problems: list[tuple[int | None, str]] = []
    if language is Language.PYTHON:
        resolver = EngineResolver(config, {})
        if not _may_have_sites(text, config):
            return ScriptView(path, language, (), (), (), resolver, frozenset(), ())
        reading = read_python(text, resolver)
        if reading.error:
            problems.append((reading.error_line, f"Python does not parse ({reading.error})"))
        commands = list(reading.commands)
        return ScriptView(
            path, language, tuple(commands), reading.writes, reading.diffs, resolver,
            _scratch(commands), tuple(problems),
        )
    if language is Language.DOCKERFILE:
        commands = _dockerfile_commands(text)
    elif language is Language.WORKFLOW:
        commands = _workflow_commands(text)
    elif language is Language.REQUIREMENTS:
        commands = _requirement_commands(text)
    elif language is Language.MAKEFILE:
        commands = read_shell(makefile_shell(text))
    else:
        commands = read_shell(text)
    commands = _with_embedded_shell(commands)
    resolver = _shell_resolver(config, commands)
    writes: list[PythonWrite] = []
    diffs: list[InlineDiff] = []
    for code, first_line, argv, scope in _embedded_python(commands, resolver):
        reading = read_python(code, resolver, first_line, argv, scope)
        if reading.error and "$" in code:  # `python3 -c "x = ${N:-3}"`: Python once the shell has expanded it
            expanded = read_python(shell_placeholders(code), resolver, first_line, argv, scope)
            reading = reading if expanded.error else expanded
        if reading.error:
            problems.append((reading.error_line, f"embedded Python does not parse ({reading.error})"))
        writes += reading.writes
        diffs += reading.diffs
        commands += [replace(c, scope=scope) for c in reading.commands]
    for command, script, code, argv in _followed_scripts(path, commands, resolver, repository or {}):
        reading = read_python(code, resolver, 1, argv, command.scope)
        writes += [
            PythonWrite(command.line, w.target, f"{command.text} [{script}:{w.line}: {w.statement}]",
                        f"{w.reason}; written by {script} (line {w.line})")
            for w in reading.writes if w.target is not None
        ]
    commands.sort(key=lambda c: c.line)
    return ScriptView(
        path, language, tuple(commands), tuple(writes), tuple(diffs), resolver, _scratch(commands), tuple(problems)
    )


def _shell_resolver(config: ScanConfig, commands: list[Command]) -> EngineResolver:
    """The resolver of a shell script, reading each `$(python3 -c '...')` substitution as Python."""

    values = assigned_values(commands)

    def evaluate(code: str, scope: str, current: EngineResolver) -> Resolved | None:
        for command in read_shell(code):
            _, argv = argv_of(command)
            program = program_name(argv[0]) if argv else ""
            if argv and is_python(argv[0], values) and len(argv) >= 3 and argv[1] == "-c":
                parsed, value = printed_value(argv[2], current, scope)
                if parsed:
                    return value
            operands = [w for w in argv[1:] if not w.startswith("-")]
            if program == "dirname" and len(operands) == 1:
                found = current.resolve(operands[0], scope)
                return None if found is None else parent_of(found)
            if program in ("realpath", "readlink", "cd", "ls", "echo", "printf") and len(operands) == 1:
                return current.resolve(operands[0], scope)
            if program == "find" and operands:  # `$(find DIR -name '*.py')`: files below DIR
                return current.resolve(operands[0], scope)
            break
        return locate_idiom(config, code)

    return EngineResolver.for_commands(config, commands, evaluate)


# A Python file can only hold a site if it names an engine path (an idiom, an installed-packages folder, an
# engine root or the environment) or runs a command, or holds a diff: without any of these words, skip parsing.
_PYTHON_TRIGGERS = (
    "site-packages", "dist-packages", "find_spec", "__file__", "__path__", "import_module", "resources",
    "getsitepackages", "getusersitepackages", "get_python_lib", "get_path", "locate_file", "environ", "getenv",
    "subprocess", "system", "popen", "Popen", "@@ -", "diff --git",
)


def _may_have_sites(text: str, config: ScanConfig) -> bool:
    roots = tuple(root.lstrip("$") for root in config.engine_roots)
    # Code importing an engine package may rewrite its files through names the scan cannot tell (an
    # unresolved write), so an import of one is a trigger too.
    packages = tuple(f"import {name.replace('-', '_')}" for name in config.engine_packages)
    packages += tuple(f"from {name.replace('-', '_')}" for name in config.engine_packages)
    return any(word in text for word in _PYTHON_TRIGGERS + roots + packages)


def _scratch(commands: Iterable[Command]) -> frozenset[str]:
    names = set()
    for command in commands:
        for name, value in command.assignments:
            if "mktemp" in value:
                names.add(name)
    return frozenset(names)


# ---------------------------------------------------------------------------------------- embedded code

_PYTHON = re.compile(r"^python[\d.]*$")
# A variable named for an interpreter: $PY, $PYTHON, ${PYTHON_BIN}, $PY3, $python_exe.
_PYTHON_VARIABLE = re.compile(r"(?i)^(?:py|python)[\d.]*(?:_?(?:bin|exe|cmd|interp|interpreter))?$")
_REFERENCE = re.compile(r"^\$\{?([A-Za-z_][A-Za-z0-9_]*)(?:(?::?[-=])([^{}]*))?\}?$")


def is_python(word: str, values: Mapping[str, str] | None = None, depth: int = 0) -> bool:
    """The word runs a Python interpreter: `python3.12`, `/opt/venv/bin/python`, or a variable that holds one
    (`$PY` with `PY=${PYTHON:-/opt/venv/bin/python}` in the script, `${PY:-python3}`, or a variable named for
    an interpreter, `"$PYTHON"`)."""
    if _PYTHON.match(program_name(word)):
        return True
    reference = _REFERENCE.match(word)
    if reference is None or depth > 3:
        return False
    name, default = reference.group(1), reference.group(2)
    if default and is_python(default, values, depth + 1):
        return True
    value = (values or {}).get(name)
    if value is not None and is_python(value, values, depth + 1):
        return True
    return _PYTHON_VARIABLE.match(name) is not None


def _with_embedded_shell(commands: list[Command]) -> list[Command]:
    """Commands plus those of `bash -c "..."`, `sh <<EOF` bodies and the like, recursively."""
    out: list[Command] = []
    for command in commands:
        out.append(command)
        words = command.words
        for index, word in enumerate(words):
            if program_name(word) not in _SHELLS:
                continue
            following = words[index + 1 :]
            if len(following) >= 2 and re.fullmatch(r"-[a-z]*c[a-z]*", following[0]):
                out += _with_embedded_shell(read_shell(following[1], command.line))
            elif not following or following[0] in ("-", "-s", "-e", "-ex", "-eu", "-eux", "-euxo"):
                for heredoc in command.heredocs:
                    out += _with_embedded_shell(read_shell(_body(heredoc), heredoc.line))
            break
    return out


def _embedded_python(
    commands: Iterable[Command], resolver: EngineResolver
) -> Iterable[tuple[str, int, tuple[Resolved | None, ...], str]]:
    """(code, first line, sys.argv as engine paths, shell scope) of each `python -c CODE ARGS` and each
    `python [-] ARGS <<EOF` heredoc: sys.argv[1:] are the shell words after `-c CODE` or `-`."""
    commands = list(commands)
    piped = _piped_heredocs(commands)
    values = assigned_values(commands)
    for command in commands:
        words = command.words
        heredocs = command.heredocs or piped.get(command.line, ())
        for index, word in enumerate(words):
            if not is_python(word, values):
                continue
            following = words[index + 1 :]
            if len(following) >= 2 and following[0] == "-c":
                argv = ("-c", *following[2:])
                yield following[1], command.line, _argv_values(resolver, argv, command.scope), command.scope
            elif not following or following[0] == "-" or (following[0].startswith("-") and "-c" not in following):
                rest = following[following.index("-") :] if "-" in following else ("-",)
                argv_values = _argv_values(resolver, tuple(rest), command.scope)
                for heredoc in heredocs:
                    yield _body(heredoc), heredoc.line, argv_values, command.scope
            break


# `$(dirname "$0")`, `$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)`, `${BASH_SOURCE%/*}`: the script's own folder.
_OWN_FOLDER = re.compile(
    r"\$\((?:[^()]|\$\([^()]*\))*(?:\$0|BASH_SOURCE)(?:[^()]|\$\([^()]*\))*\)|\$\{BASH_SOURCE(?:\[0\])?%/\*\}"
)


def _followed_scripts(
    path: str, commands: list[Command], resolver: EngineResolver, repository: Mapping[str, bytes]
) -> Iterable[tuple[Command, str, str, tuple[Resolved | None, ...]]]:
    """(command, repository path, code, sys.argv) of each `python FILE.py ARGS` whose FILE is a Python file
    of this repository (beside the script through `$(dirname "$0")` or a variable holding it, or a path from
    the root): the patcher the script calls, read with the arguments it is given."""
    if not repository:
        return
    values = assigned_values(commands)
    here = {name for name, value in values.items() if _OWN_FOLDER.search(value)}
    folder = posixpath.dirname(path)
    for command in commands:
        words = command.words
        for index, word in enumerate(words[:-1]):
            if not is_python(word, values):
                continue
            script, rest = words[index + 1], words[index + 2 :]
            if script == "-m" and rest and re.fullmatch(r"[A-Za-z_][\w.]*", rest[0]):  # python -m tools.graft F
                module, rest = rest[0].replace(".", "/"), rest[1:]
                script = next((c for c in (f"{module}.py", f"{module}/__main__.py") if c in repository), script)
            for name in here:
                script = re.sub(r"\$\{?" + name + r"\}?(?![A-Za-z0-9_])", "@here@", script)
            script = _OWN_FOLDER.sub("@here@", script)
            candidates = [posixpath.join(folder, script[len("@here@/"):])] if script.startswith("@here@/") else (
                [script, posixpath.join(folder, script)] if "$" not in script and not script.startswith("/") else []
            )
            found = next((posixpath.normpath(c) for c in candidates if posixpath.normpath(c) in repository), None)
            if found is not None and found.endswith(".py") and found != path:
                code = repository[found].decode("utf-8", errors="replace")
                yield command, found, code, _argv_values(resolver, (script, *rest), command.scope)
            break


def _piped_heredocs(commands: list[Command]) -> dict[int, tuple[Heredoc, ...]]:
    """`cat <<'EOF' | python3 -`: the heredocs of a `cat` by its line, for the command it pipes into."""
    out: dict[int, tuple[Heredoc, ...]] = {}
    for command in commands:
        _, argv = argv_of(command)
        if command.heredocs and argv[:1] == ("cat",) and len(argv) == 1:
            out[command.line] = command.heredocs
    return out


def _argv_values(resolver: EngineResolver, argv: tuple[str, ...], scope: str) -> tuple[Resolved | None, ...]:
    out: list[Resolved | None] = []
    for position, word in enumerate(argv):
        found = resolver.resolve(word, scope) if position else None
        out.append(None if found is None else Resolved(found.shown, f"{found.reason}, given as sys.argv[{position}]"))
    return tuple(out)


def _body(heredoc: Heredoc) -> str:
    return "\n".join(heredoc.body) + "\n"


# ---------------------------------------------------------------------------------------- Dockerfiles

_INSTRUCTION = re.compile(r"^\s*([A-Za-z]+)(\s+|$)")
_RUN_FLAG = re.compile(r"^\s*(?:--[a-z-]+(?:=\S*)?\s+)*")
_BUILDKIT_SCRIPT = re.compile(r"\s*<<-?\s*['\"]?([A-Za-z_][A-Za-z0-9_]*)['\"]?\s*(?:\n|$)")
_DOCKER_HEREDOC = re.compile(r"<<-?\s*['\"]?([A-Za-z_][A-Za-z0-9_]*)['\"]?")


def _dockerfile_commands(text: str) -> list[Command]:
    lines = text.splitlines()
    commands: list[Command] = []
    index = 0
    while index < len(lines):
        start = index
        match = _INSTRUCTION.match(lines[index])
        if not match or lines[index].lstrip().startswith("#"):
            index += 1
            continue
        # The instruction's lines: backslash continuations, skipping comment and blank lines inside, as Docker does.
        block = [lines[index]]
        while block[-1].rstrip().endswith("\\") and index + 1 < len(lines):
            index += 1
            following = lines[index]
            block.append("\\" if not following.strip() or following.lstrip().startswith("#") else following)
        index += 1
        delimiters = _DOCKER_HEREDOC.findall("\n".join(block))
        for delimiter in delimiters:  # BuildKit heredocs: their bodies follow the instruction
            while index < len(lines):
                block.append(lines[index])
                index += 1
                if lines[index - 1].strip() == delimiter:
                    break
        instruction = match.group(1).upper()
        body = "\n".join(block)[match.end() :]
        padding = " " * match.end()
        if instruction == "RUN":
            flags = _RUN_FLAG.match(body)
            body = body[flags.end() :] if flags else body
            exec_form = _exec_form(body)
            if exec_form is not None:
                commands.append(Command(tuple(exec_form), (), (), (), start + 1))
                continue
            script = _BUILDKIT_SCRIPT.match(body)
            if script:  # `RUN <<EOF` runs the heredoc itself as a script
                lines_of = body.split("\n")[1:]
                end = next((i for i, x in enumerate(lines_of) if x.strip() == script.group(1)), len(lines_of))
                commands += read_shell("\n".join(lines_of[:end]) + "\n", start + 2)
                continue
            commands += read_shell(padding + body, start + 1)
        elif instruction in ("COPY", "ADD"):
            joined = re.sub(r"\\[ \t]*\n", " ", body)
            words = [w for w in (_exec_form(joined) or joined.split()) if not w.startswith("--")]
            if len(words) >= 2:
                commands.append(Command((instruction, *words), (), (), (), start + 1))
        elif instruction == "WORKDIR" and body.strip():
            commands.append(Command(("cd", body.strip().strip("'\"")), (), (), (), start + 1))
        elif instruction in ("ENV", "ARG"):
            pairs = re.findall(r"([A-Za-z_][A-Za-z0-9_]*)=(\"[^\"]*\"|'[^']*'|\S+)", body)
            if not pairs and len(body.split()) >= 2 and instruction == "ENV":
                name, value = body.split(None, 1)
                pairs = [(name, value)]
            for name, value in pairs:
                commands.append(Command((), ((name, value.strip("'\"")),), (), (), start + 1))
    return commands


def _exec_form(body: str) -> list[str] | None:
    stripped = body.strip()
    if not stripped.startswith("["):
        return None
    try:
        value = json.loads(stripped)
    except ValueError:
        return None
    return [str(v) for v in value] if isinstance(value, list) else None


# ---------------------------------------------------------------------------------------- Makefiles

_MAKE_ASSIGNMENT = re.compile(r"^(?:export\s+|override\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*(?:\?|:{1,3}|\+|!)?=\s*(.*)$")
_MAKE_VARIABLE = re.compile(r"\$[({]([A-Za-z_][A-Za-z0-9_]*)[)}]")


def makefile_shell(text: str) -> str:
    """A Makefile as the shell script its recipes run, line for line (so sites keep their lines): each recipe
    line (a tab first; `@`, `-`, `+` dropped) as a command, each variable assignment as a shell assignment,
    `$(NAME)` as `${NAME}`, `$(shell CMD)` as `$(CMD)`, `$$` as `$`; any other line blank."""
    out = []
    for line in text.splitlines():
        if line.startswith("\t"):
            recipe = _make_words(line[1:].lstrip("@-+ \t"))
            # make runs each recipe line in a shell of its own: a `cd` there does not carry to the next line.
            out.append(recipe if recipe.rstrip().endswith("\\") else f"{recipe} ; cd \"$CURDIR\"")
            continue
        assignment = _MAKE_ASSIGNMENT.match(line.strip()) if not line.startswith("#") else None
        if assignment:
            value = _make_words(assignment.group(2).strip()).replace('"', '\\"')
            out.append(f'{assignment.group(1)}="{value}"')
        else:
            out.append("")
    return "\n".join(out) + "\n"


def _make_words(text: str) -> str:
    """Make's references in a recipe or value as the shell's."""
    text = text.replace("$$", "\0")
    text = _MAKE_VARIABLE.sub(lambda m: "${" + m.group(1) + "}", text)
    text = text.replace("$(shell ", "$(")
    return text.replace("\0", "$")


# ---------------------------------------------------------------------------------------- workflows

_RUN_KEY = re.compile(r"^(\s*)(?:-\s+)?run:\s*(.*?)\s*$")


def _workflow_commands(text: str) -> list[Command]:
    """The shell of every `run:` step (a plain, quoted or block scalar), at its own lines."""
    lines = text.splitlines()
    commands: list[Command] = []
    for index, line in enumerate(lines):
        match = _RUN_KEY.match(line)
        if not match:
            continue
        value = match.group(2)
        key_indent = line.index("run:")
        if re.fullmatch(r"[|>][-+0-9]*(?:\s+#.*)?", value):
            block: list[str] = []
            indent: int | None = None
            for following in lines[index + 1 :]:
                if not following.strip():
                    block.append("")
                    continue
                width = len(following) - len(following.lstrip())
                if width <= key_indent:
                    break
                indent = width if indent is None else indent
                block.append(following[indent:] if width >= indent else following.lstrip())
            commands += read_shell("\n".join(block) + "\n", index + 2)
        elif value and not value.startswith("#"):
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            commands += read_shell(value, index + 1)
    return commands


def _requirement_commands(text: str) -> list[Command]:
    """Each requirement line as the `pip install LINE` it amounts to (comments and options dropped)."""
    commands = []
    lines = [re.sub(r"(?:^|\s)#.*$", "", line).strip() for line in text.splitlines()]
    # `--extra-index-url URL` (or -i, --find-links) anywhere in the file applies to every requirement in it.
    indexes = [w for line in lines if line.startswith(_INDEX_LINE) for w in line.replace("=", " ", 1).split()[:2]]
    for number, requirement in enumerate(lines, 1):
        if requirement.startswith(("-e ", "--editable ")):
            commands.append(Command(("pip", "install", *requirement.split(None, 1)), (), (), (), number))
        elif requirement and not requirement.startswith("-"):
            commands.append(Command(("pip", "install", *indexes, requirement), (), (), (), number))
    return commands


_INDEX_LINE = ("--extra-index-url", "--index-url", "-i ", "--find-links", "-f ")


def is_managed(command: Command) -> bool:
    """A call of patchkit itself: managed patching (the registry's own waivers apply), never a site."""
    _, argv = argv_of(command)
    if not argv:
        return False
    if program_name(argv[0]) == "patchkit":
        return True
    return _PYTHON.match(program_name(argv[0])) is not None and argv[1:3] == ("-m", "patchkit")
