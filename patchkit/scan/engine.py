"""Tell whether a path written in a script is an engine path, show it, and say why it counts.

An engine path is under `site-packages` / `dist-packages` (the serving stack's environment), under a configured
engine root (`/sgl-workspace`, `$ATOM_ROOT`), inside a clone of a configured engine package (`git clone
.../vllm`), or located by an idiom for a configured engine package: `find_spec("sglang")`, `sglang.__file__`,
`importlib.import_module(...)`, `pip show sglang`, `site.getsitepackages()`. A `python -c` substitution is read
as Python (patchkit.scan.python), so `$(python3 -c 'import vllm, os; print(os.path.dirname(vllm.__path__[0]))')`
is the site-packages folder, not `<vllm>`.

Shell variables carry these values with function scope: a `local` or `declare` inside a function binds a name
of that function only; any other assignment is global (as in bash); a function's `$1`, `$2`, ... hold what its
call sites in the same script pass. The reading is flow-insensitive within a scope, as a reviewer reads.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from patchkit.scan.config import ScanConfig, normalise_package
from patchkit.scan.pip import is_local_tree, pip_arguments
from patchkit.scan.shell import Command, argv_of, program_name

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*|[0-9@*])\}|\$([A-Za-z_][A-Za-z0-9_]*|[0-9@*])")
_DEFAULTED = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*|[0-9])(?::?[-=])([^{}]*)\}")  # ${VAR:-default}
_PLACEHOLDER = re.compile(r"^<([A-Za-z0-9_.-]+)>(?:/|$)")  # <vllm>/x.py, <site-packages>/...
_FIND_SPEC = re.compile(r"find_spec\(\s*['\"]([A-Za-z_][\w.]*)['\"]")
_IMPORT_MODULE = re.compile(r"import_module\(\s*['\"]([A-Za-z_][\w.]*)['\"]")
_IMPORT = re.compile(r"\bimport\s+([A-Za-z_][\w.]*)")
_FILES = re.compile(r"resources\.files\(\s*['\"]([A-Za-z_][\w.]*)['\"]")
_PIP_SHOW = re.compile(r"\bpip3?\s+show\s+(?:-\S+\s+)*([A-Za-z0-9_.-]+)")
_SITE_DIR = re.compile(r"getsitepackages|getusersitepackages|get_python_lib|purelib|platlib|sysconfig")
_INSTALLED = re.compile(r"(?:^|/)(?:site|dist)-packages(?:/|$)")
_DECLARE = frozenset({"export", "declare", "typeset", "local", "readonly"})
_SCOPED = frozenset({"local", "declare", "typeset"})  # inside a function: a name of that function only
_CLONE_VALUED = frozenset({"-b", "--branch", "--depth", "-o", "--origin", "--reference", "-c", "--config",
                           "--filter", "-j", "--jobs", "--shallow-since", "--separate-git-dir"})


class Resolved(NamedTuple):
    """An engine path as shown to a reviewer, and why it counts (which package or root, through what)."""

    shown: str
    reason: str


# Reads a `$(...)` substitution's code (the text inside) as a value, in a scope, with the variables a resolver
# knows; None when it cannot tell.
Evaluator = Callable[[str, str, "EngineResolver"], "Resolved | None"]


def package_location(config: ScanConfig, module: str, kind: str) -> Resolved | None:
    """The folder (`kind` "dir") or file ("file") of an imported module of an installed package (engine or
    not), or None for the standard library's: `vllm.benchmarks.serve` -> `<vllm>/benchmarks/serve.py`."""
    parts = module.split(".")
    if not parts or not config.is_installed_package(parts[0]):
        return None
    folder = "/".join([f"<{parts[0]}>", *parts[1:]])
    reason = config.package_reason(parts[0])
    if kind == "dir":
        return Resolved(folder, reason)
    return Resolved(f"<{parts[0]}>/__init__.py" if len(parts) == 1 else f"{folder}.py", reason)


def parent_of(value: Resolved) -> Resolved:
    """The folder holding a path; the folder holding a package (`<vllm>`) is the site-packages folder."""
    if re.fullmatch(r"<[^/>]+>", value.shown) and value.shown != "<site-packages>":
        return Resolved("<site-packages>", f"the folder holding {value.shown}: installed packages")
    parent = posixpath.dirname(value.shown)
    return Resolved(parent or value.shown, value.reason)


def locate_idiom(config: ScanConfig, code: str) -> Resolved | None:
    """The engine folder a snippet of code computes, by its idioms (when it cannot be read as Python)."""
    package = None
    for pattern in (_FIND_SPEC, _IMPORT_MODULE, _FILES):
        found = pattern.search(code)
        if found:
            package = found.group(1)
            break
    if package is None and re.search(r"__file__|__path__", code):
        found = _IMPORT.search(code)
        package = found.group(1) if found else None
    if package is not None:
        return package_location(config, package.split(".")[0], "dir")
    shown = _PIP_SHOW.search(code)
    if shown:
        return Resolved("<site-packages>", f"installed packages (pip show {shown.group(1)})")
    if _SITE_DIR.search(code):
        return Resolved("<site-packages>", "installed packages (the interpreter's site folder)")
    return None


@dataclass(frozen=True)
class EngineResolver:
    config: ScanConfig
    # scope ("" for the top level, else a function's name) -> shell variable -> the engine path it holds
    bindings: Mapping[str, Mapping[str, Resolved]] = field(default_factory=dict)
    # Folders that are clones of a repository, as written -> the package cloned (engine or not).
    clones: Mapping[str, str] = field(default_factory=dict)
    evaluate: Evaluator | None = None
    # Folders the script installs from (`pip install -e DIR`, `cd DIR && pip install .`, `make install`), as
    # written -> how (#33): an installed checkout is the engine's wherever it is, and so is a clone holding one.
    installed: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def for_commands(cls, config: ScanConfig, commands: Iterable[Command],
                     evaluate: Evaluator | None = None) -> EngineResolver:
        commands = list(commands)
        pairs = list(_assignments(commands))
        clones = dict(_clones(commands))
        installed = dict(installed_folders(commands))
        functions = {c.scope for c in commands if c.scope}
        calls = [c for c in commands if argv_of(c)[1][:1] and argv_of(c)[1][0] in functions]
        bindings: dict[str, dict[str, Resolved]] = {}
        # Names defined from names defined later in the file (functions), and a function's `$1` from its calls:
        # recomputed from the previous round's values until nothing changes.
        for _ in range(6):
            resolver = cls(config, bindings, clones, evaluate, installed)
            fresh: dict[str, dict[str, Resolved]] = {}
            for scope, name, value, source_scope in pairs:
                if name in fresh.get(scope, {}):
                    continue
                shown = resolver.resolve(value, source_scope)
                if shown is None or not shown.reason:
                    continue
                through = f"${name}"
                reason = shown.reason if through in shown.reason else f"{shown.reason}, through {through}"
                fresh.setdefault(scope, {})[name] = Resolved(shown.shown, reason)
            for call in calls:
                _, argv = argv_of(call)
                for position, word in enumerate(argv[1:10], 1):
                    if str(position) in fresh.get(argv[0], {}):
                        continue
                    shown = resolver.resolve(word, call.scope)
                    if shown is None:  # a plain value: shown in place of `$1` (`local f="$SGL/$1"`)
                        fresh.setdefault(argv[0], {})[str(position)] = Resolved(word, "")
                    else:
                        reason = f"{shown.reason}, passed as ${position} to {argv[0]} (line {call.line})"
                        fresh.setdefault(argv[0], {})[str(position)] = Resolved(shown.shown, reason)
            if fresh == bindings:
                break
            bindings = fresh
        return cls(config, bindings, clones, evaluate, installed)

    def engine_path(self, word: str, scope: str = "") -> str | None:
        resolved = self.resolve(word, scope)
        return None if resolved is None else resolved.shown

    def lookup(self, name: str, scope: str) -> Resolved | None:
        own = self.bindings.get(scope, {})
        if name in own:
            return own[name]
        return self.bindings.get("", {}).get(name) if scope else None

    def resolve(self, word: str, scope: str = "") -> Resolved | None:
        """The word shown with engine variables and idioms substituted, if it is an engine path; else None."""
        if not word:
            return None
        reasons: list[str] = []

        def substitution(code: str) -> str:
            inner = code[2:-1] if code.startswith("$(") else code[1:-1]
            found = self.evaluate(inner, scope, self) if self.evaluate is not None else None
            if found is None and self.evaluate is None:
                found = locate_idiom(self.config, code)
            if found is None:
                return code
            reasons.append(found.reason)
            return found.shown

        shown = _substitute_commands(word, substitution)

        def defaulted(match: re.Match[str]) -> str:
            # `${ATOM_ROOT:-/opt/ATOM}`: the variable's value when the script sets it, else the default.
            name, default = match.group(1), match.group(2)
            found = self.lookup(name, scope)
            if found is None:
                found = self.resolve(default, scope) if default else None
            if found is None:
                return "$" + name if self.engine_text_reason("$" + name) else match.group(0)
            reasons.append(found.reason)
            return found.shown

        shown = _DEFAULTED.sub(defaulted, shown)

        def variable(match: re.Match[str]) -> str:
            name = match.group(1) or match.group(2)
            found = self.lookup(name, scope)
            if found is None:
                return match.group(0)
            if found.reason:  # a plain value (a function's argument) is shown, but does not make an engine path
                reasons.append(found.reason)
            return found.shown

        shown = _collapse(_VARIABLE.sub(variable, shown))
        if reasons:
            return Resolved(shown, reasons[0])
        reason = self.engine_text_reason(shown)
        return None if reason is None else Resolved(shown, reason)

    def engine_text_reason(self, text: str) -> str | None:
        """Why a literal path is an engine path (installed packages, an engine root, an engine clone), or None."""
        placeholder = _PLACEHOLDER.match(text)
        if placeholder:
            name = placeholder.group(1)
            if name == "site-packages":
                return "installed packages (site-packages)"
            if self.config.is_installed_package(name):
                return self.config.package_reason(name)
        installed = _INSTALLED.search(text)
        if installed:
            return f"installed packages ({installed.group(0).strip('/')})"
        for root in self.config.engine_roots:
            prefixes = [root]
            if root.startswith("$") and root[1:].isidentifier():
                prefixes.append("${" + root[1:] + "}")
            for prefix in prefixes:
                if text == prefix or text.startswith(prefix.rstrip("/") + "/"):
                    return f"engine root {root}"
        for folder, package in self.clones.items():
            if self.config.is_engine_package(package) and _below(text, folder):
                return f"a clone of engine package {package}"
        for folder, package in self.clones.items():
            how = self.installed_from(folder)
            if how is not None and _below(text, folder):
                return f"a clone of {package}, installed from ({how})"
        for folder, how in self.installed.items():
            if _below(text, folder):
                return f"a checkout installed from ({how})"
        return None

    def installed_from(self, folder: str) -> str | None:
        """How the script installs from this folder or a folder below it (a clone's `python/`), or None."""
        return next((how for done, how in self.installed.items() if _below(done, folder) or _below(folder, done)),
                    None)

    def clone_of(self, folder: str) -> str | None:
        """The package a folder (as written, or below one) is a clone of, engine or not."""
        found = self.clone_holding(folder)
        return None if found is None else found[1]

    def clone_holding(self, folder: str) -> tuple[str, str] | None:
        """(the clone's folder, its package) of the clone a folder is, or is below; None when it is none."""
        for cloned, package in self.clones.items():
            if folder == cloned or folder.startswith(cloned + "/") or folder.rstrip("/") == cloned:
                return cloned, package
        return None


_UP = re.compile(r"/(?!\.\.(?:/|$))[^/$<>]+/\.\.(?=/|$)")  # `/x/..` (not `$X/..`, whose value is unknown)
_PACKAGE_UP = re.compile(r"^<(?!site-packages>)[^/>]+>/\.\.(?=/|$)")


def _collapse(shown: str) -> str:
    """`<sglang>/..` is `<site-packages>`, `/opt/x/../y` is `/opt/y`: a path as a reviewer reads it."""
    if "/.." not in shown:
        return shown
    previous = None
    while previous != shown:
        previous = shown
        shown = _PACKAGE_UP.sub("<site-packages>", _UP.sub("", shown, count=1), count=1)
    return shown


def _below(text: str, folder: str) -> bool:
    folder = folder.rstrip("/") or "/"
    return text.rstrip("/") == folder or text.startswith(folder + "/")


# Folders a script installs from that are the repository itself (its checkout in CI), not an engine checkout.
_OWN_TREE = re.compile(r"\$0|\$\{?(?:GITHUB_WORKSPACE|CI_PROJECT_DIR|BUILDKITE_BUILD_CHECKOUT_PATH|PWD)\b")


def installed_folders(commands: Iterable[Command]) -> Iterable[tuple[str, str]]:
    """(folder as written, how) of every folder the commands install from: a local-tree operand of a pip
    install (`-e DIR`, `DIR`, `.` joined to the folder of the last `cd`), `python setup.py install|develop` and
    `make install` run in a folder. A relative folder with no `cd` before it is the repository's own tree."""
    commands = list(commands)
    folders = working_folders(commands)
    for command in commands:
        _, argv = argv_of(command)
        cwd = folders.get(id(command))
        operands: list[str] = []
        arguments = pip_arguments(argv)
        if arguments is not None:
            operands = [o.word for o in arguments.operands
                        if is_local_tree(o.word) or (o.editable and "://" not in o.word)]
        elif len(argv) >= 3 and program_name(argv[0]).startswith("python") and argv[1].endswith("setup.py") and (
            {"install", "develop"} & set(argv[2:])
        ):
            operands = [posixpath.dirname(argv[1]) or "."]
        elif is_make_install(argv):
            operands = ["."]
        for word in operands:
            word = re.sub(r"\[[^\]]*\]$", "", word).rstrip("/") or "/"
            if word in (".", "./"):
                folder = cwd
            elif word.startswith(("/", "$", "~")):
                folder = word
            else:
                folder = f"{cwd}/{word[2:] if word.startswith('./') else word}" if cwd else None
            if folder and not _OWN_TREE.search(folder):
                yield folder, f"{' '.join(argv[:4])}, line {command.line}"


def is_make_install(argv: tuple[str, ...]) -> bool:
    """`make install`, `sudo make -j8 install`, `cmake --install build`."""
    words = list(argv[1:] if argv[:1] == ("sudo",) else argv)
    if words and program_name(words[0]) == "make":
        return "install" in words[1:]
    return bool(words) and program_name(words[0]) == "cmake" and "--install" in words[1:]


def _substitute_commands(word: str, replace: Callable[[str], str]) -> str:
    """`word` with each top-level `$(...)` or backtick command replaced by `replace(its text)`."""
    if "$(" not in word and "`" not in word:
        return word
    out: list[str] = []
    index = 0
    while index < len(word):
        if word.startswith("$(", index) and not word.startswith("$((", index):
            depth, end = 0, index + 1
            while end < len(word):
                depth += {"(": 1, ")": -1}.get(word[end], 0)
                if depth == 0:
                    break
                end += 1
            out.append(replace(word[index : end + 1]))
            index = end + 1
        elif word[index] == "`":
            end = word.find("`", index + 1)
            end = len(word) - 1 if end < 0 else end
            out.append(replace(word[index : end + 1]))
            index = end + 1
        else:
            out.append(word[index])
            index += 1
    return "".join(out)


def assigned_values(commands: list[Command]) -> dict[str, str]:
    """Every shell variable's first assigned value as written (any scope): `PY=${PYTHON:-/opt/venv/bin/python}`
    -> {"PY": "${PYTHON:-/opt/venv/bin/python}"}."""
    values: dict[str, str] = {}
    for _, name, value, _ in _assignments(commands):
        values.setdefault(name, value)
    return values


def _assignments(commands: list[Command]) -> Iterable[tuple[str, str, str, str]]:
    """(scope it binds in, name, value, scope the value is read in) of every assignment."""
    scoped: dict[str, set[str]] = {}
    for command in commands:
        _, argv = argv_of(command)
        if command.scope and argv and program_name(argv[0]) in _SCOPED:
            for word in argv[1:]:
                name = word.partition("=")[0]
                if name.isidentifier():
                    scoped.setdefault(command.scope, set()).add(name)

    def target(name: str, scope: str) -> str:
        return scope if name in scoped.get(scope, ()) else ""

    for command in commands:
        scope = command.scope
        for name, value in command.assignments:
            if command.words:  # `A=b cmd`: only for cmd
                continue
            yield target(name, scope), name, value, scope
        _, argv = argv_of(command)
        if not argv:
            continue
        if program_name(argv[0]) in _DECLARE:
            for word in argv[1:]:
                name, eq, value = word.partition("=")
                if eq and name.isidentifier():
                    yield target(name, scope), name, value, scope
        elif argv[0] == "for" and len(argv) > 3 and argv[2] == "in":
            # `for f in "$SGL"/a.py "$SGL"/b.py`: the loop variable holds each of them.
            for value in argv[3:]:
                yield target(argv[1], scope), argv[1], value, scope
        elif argv[0] in ("cd", "pushd") and len(argv) == 2 and not argv[1].startswith("-"):
            yield target("PWD", scope), "PWD", argv[1], scope


def working_folders(commands: Iterable[Command]) -> dict[int, str | None]:
    """The folder each command (by id) runs in, as written: the last `cd DIR` / `pushd DIR` before it in the
    file (a relative one joined to the folder before it; `cd -`, `popd` and a `cd` inside `$(...)` do not
    count). The reading is in file order, not in run order."""
    folders: dict[int, str | None] = {}
    folder: str | None = None
    for command in sorted(commands, key=lambda c: c.line):
        folders[id(command)] = folder
        _, argv = argv_of(command)
        if command.substituted or len(argv) < 2 or argv[0] not in ("cd", "pushd") or argv[1].startswith("-"):
            continue
        target = argv[1].rstrip("/") or "/"
        if target == "..":
            folder = posixpath.dirname(folder) if folder else None
        elif folder is not None and not target.startswith(("/", "$", "~")):
            folder = f"{folder}/{target[2:] if target.startswith('./') else target}"
        else:
            folder = target
    return folders


def _clones(commands: list[Command]) -> Iterable[tuple[str, str]]:
    """(folder, package) of every `git clone URL [DIR]`: the folder is a clone of the URL's repository; a
    relative folder is joined to the folder the clone runs in."""
    folders = working_folders(commands)
    for command in commands:
        _, argv = argv_of(command)
        if len(argv) < 3 or program_name(argv[0]) != "git":
            continue
        try:
            index = argv.index("clone")
        except ValueError:
            continue
        operands = []
        position = index + 1
        while position < len(argv):
            word = argv[position]
            if word.startswith("-"):
                position += 2 if word in _CLONE_VALUED else 1
                continue
            operands.append(word)
            position += 1
        if not operands:
            continue
        url = operands[0].rstrip("/")
        name = re.sub(r"\.git$", "", url.rsplit("/", 1)[-1].rsplit(":", 1)[-1])
        folder = (operands[1] if len(operands) > 1 else name).rstrip("/")
        cwd = folders.get(id(command))
        if cwd and not folder.startswith(("/", "$", "~")):
            folder = f"{cwd}/{folder}"
        if name:
            yield folder, normalise_package(name)
