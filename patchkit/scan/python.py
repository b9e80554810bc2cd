"""Read Python code (a file, a `python - <<EOF` heredoc, a `python -c` string) for what the scan looks at:

- writes whose target is an engine path: `open(p, "w")`, `Path.write_text`, `shutil.copy(src, p)`,
  `os.replace`, `fileinput.input(p, inplace=True)`, `os.remove`, with `p` resolved through `find_spec`,
  `module.__file__`, `importlib.import_module`, `site.getsitepackages()`, `os.path.join`, `Path / "x"`,
  f-strings and plain names assigned any of these;
- commands it runs (`subprocess.run([...])`, `os.system("...")`), as shell commands for the shell rules;
- string constants that are unified diffs (inline patches).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from patchkit.scan.bash import read_shell
from patchkit.scan.engine import EngineResolver, Resolved, package_location, parent_of
from patchkit.scan.shell import Command

_RUNNERS = frozenset(
    {
        "subprocess.run", "subprocess.call", "subprocess.check_call", "subprocess.check_output",
        "subprocess.Popen", "run", "call", "check_call", "check_output", "Popen",
    }
)
_SHELL_RUNNERS = frozenset({"os.system", "os.popen", "subprocess.getoutput", "subprocess.getstatusoutput"})
_KEEPING_COPIERS = frozenset({"copy", "copy2", "copyfile"})  # the source stays where it was
_BACKUP_SUFFIX = re.compile(r"^(?:[._-]?(?:bak|orig|backup|old|save|dist)\d*|~|\.\d+)$")


def is_backup_suffix(suffix: str) -> bool:
    """A suffix that names a backup copy beside a file: `.bak`, `.orig`, `.backup`, `~`, `.old`, `.1`."""
    return _BACKUP_SUFFIX.match(suffix) is not None


_COPIERS = frozenset({"copy", "copy2", "copyfile", "copytree", "move", "replace", "rename", "symlink", "link"})
_REMOVERS = frozenset({"remove", "unlink", "rmtree"})
_PASS_THROUGH = frozenset({"abspath", "realpath", "normpath", "expanduser", "fspath", "str", "resolve", "absolute"})
_LOCATORS = frozenset({"find_spec", "import_module", "files", "__import__"})
_MODULE_ATTRIBUTES = frozenset({"__file__", "__path__", "origin", "submodule_search_locations", "parent", "__spec__",
                                "loader", "name", "parents", "__name__", "__version__"})
_SITE_DIRS = frozenset({"getsitepackages", "getusersitepackages", "get_python_lib", "get_path", "get_paths"})


@dataclass(frozen=True)
class PythonWrite:
    line: int
    target: str | None  # the engine path, shown; None for an unresolved write (see _Reader._unresolved)
    statement: str  # the call, normalised
    reason: str = ""  # why it counts: the engine package or root, through which names


@dataclass(frozen=True)
class InlineDiff:
    line: int
    text: str


@dataclass(frozen=True)
class PythonReading:
    writes: tuple[PythonWrite, ...]
    commands: tuple[Command, ...]
    diffs: tuple[InlineDiff, ...]
    error: str | None  # why the code could not be read (a syntax error), None when it was
    error_line: int | None = None


_EXPANSION = re.compile(r"\$\{[^{}]*\}|\$\([^()]*\)|\$[A-Za-z_][A-Za-z0-9_]*|\$[0-9@#?]")
SHELL_PLACEHOLDER = "_shell_value_"


def shell_placeholders(code: str) -> str:
    """Embedded Python (`python3 -c "..."`, an unquoted heredoc) with each shell expansion outside its string
    literals (`${RETRIES:-3}`, `$N`, `$(nproc)`) as a placeholder name: the code as it compiles once the shell
    has expanded it (#33). Expansions inside strings stay as written, so `'${SGL}/srt'` is still the path."""
    out: list[str] = []
    index, quote = 0, ""
    while index < len(code):
        char = code[index]
        if quote:
            if char == "\\":
                out.append(code[index : index + 2])
                index += 2
                continue
            if code.startswith(quote, index):
                out.append(quote)
                index += len(quote)
                quote = ""
                continue
        elif code.startswith(('"""', "'''"), index):
            quote = code[index : index + 3]
            out.append(quote)
            index += 3
            continue
        elif char in "\"'":
            quote = char
        elif char == "#":
            end = code.find("\n", index)
            end = len(code) if end < 0 else end
            out.append(code[index:end])
            index = end
            continue
        elif char == "$" and (found := _EXPANSION.match(code, index)):
            out.append(SHELL_PLACEHOLDER)
            index = found.end()
            continue
        out.append(char)
        index += 1
    return "".join(out)


_BLOCK_CONTINUES = re.compile(r"^(?:[)\]}#]|else\b|elif\b|except\b|finally\b)")


def _parse_around_errors(code: str, attempts: int = 20) -> tuple[ast.Module | None, Exception | None]:
    """The code's tree and its first syntax error: a top-level statement that does not parse is left out
    (its lines blanked, so every other line keeps its number) and the rest read, so one unreadable block
    does not hide the sites around it (#33). The error is still returned: the file is reported as not read."""
    lines = code.split("\n")
    first: Exception | None = None
    for _ in range(attempts):
        try:
            return ast.parse("\n".join(lines)), first
        except (SyntaxError, ValueError) as exc:
            first = first or exc
            index = (getattr(exc, "lineno", None) or 0) - 1
            if isinstance(exc, ValueError) or not 0 <= index < len(lines) or not lines[index].strip():
                return None, first
            start = index
            while start > 0 and (not lines[start].strip() or lines[start][0].isspace()
                                 or _BLOCK_CONTINUES.match(lines[start])):
                start -= 1
            end = index + 1
            while end < len(lines) and (not lines[end].strip() or lines[end][0].isspace()
                                        or _BLOCK_CONTINUES.match(lines[end])):
                end += 1
            lines[start:end] = [""] * (end - start)
    return None, first


def read_python(
    code: str,
    resolver: EngineResolver,
    first_line: int = 1,
    argv: tuple[Resolved | None, ...] = (),
    scope: str = "",
) -> PythonReading:
    """What the Python `code` does; `argv` is what the shell passes it (`python - "$F" <<EOF`: sys.argv[1] is
    the engine path of `$F`), `scope` the shell function it runs in (for `$VAR` left in an unquoted heredoc)."""
    tree, failure = _parse_around_errors(code)
    error = None if failure is None else str(getattr(failure, "msg", failure))
    error_line = None if failure is None else (getattr(failure, "lineno", None) or 1) + first_line - 1
    if tree is None:
        return PythonReading((), (), (), error, error_line)
    reader = _Reader(resolver, first_line - 1, argv, scope)
    reader.import_modules(tree)
    # Names are resolved per scope (a function's own assignments and parameters, then the module's),
    # flow-insensitively; parameters hold what the calls of the function in the same code pass.
    module_nodes = list(_scope_nodes(tree))
    functions = [
        node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
    ]
    nodes_of: dict[ast.AST, list[ast.AST]] = {tree: module_nodes}
    for function in functions:
        nodes_of[function] = list(_scope_nodes(function))
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            reader.functions.setdefault(function.name, (function, nodes_of[function]))
    module_names = Names()
    scope_names: dict[ast.AST, Names] = {}
    for _ in range(3):  # helpers calling helpers, and module names from what helpers return: a few rounds
        reader.module_names = module_names
        reader.returns.clear()  # return values read with the module's names of the round before
        module_names = reader.bind(module_nodes, Names())
        reader.module_names = module_names
        reader.returns.clear()
        scope_names[tree] = module_names
        calls = _calls_by_name(nodes_of, scope_names, module_names)
        for function in functions:
            reader.names = module_names
            parameters = reader.parameters(function, calls)
            scope_names[function] = reader.bind(nodes_of[function], module_names.extended(parameters))
    classes = [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    for klass in classes:
        nodes_of[klass] = list(_scope_nodes(klass))
        scope_names[klass] = reader.bind(nodes_of[klass], module_names)
    for owner, nodes in nodes_of.items():
        reader.names = scope_names[owner]
        reader.reads = _read_targets(nodes)
        for node in nodes:
            if isinstance(node, ast.Call):
                reader.call(node)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and looks_like_diff(node.value):
                reader.diffs.append(InlineDiff(node.lineno + reader.offset, node.value))
    return PythonReading(tuple(reader.writes), tuple(reader.commands), tuple(reader.diffs), error, error_line)


def printed_value(code: str, resolver: EngineResolver, scope: str = "") -> tuple[bool, Resolved | None]:
    """(read, value): whether `code` parses as Python, and the engine path its last `print(...)` shows
    (`SITE=$(python3 -c 'import vllm, os; print(os.path.dirname(vllm.__file__))')`)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return False, None
    reader = _Reader(resolver, 0, (), scope)
    reader.import_modules(tree)
    nodes = list(_scope_nodes(tree))
    reader.bind(nodes, Names())
    printed = [
        node for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print" and node.args
    ]
    if not printed:
        return True, None
    printed.sort(key=lambda n: (n.lineno, n.col_offset))
    return True, reader.engine_of(printed[-1].args[0])


def _calls_by_name(
    nodes_of: dict[ast.AST, list[ast.AST]], scope_names: dict[ast.AST, Names], module_names: Names
) -> dict[str, list[tuple[ast.Call, Names]]]:
    calls: dict[str, list[tuple[ast.Call, Names]]] = {}
    for owner, nodes in nodes_of.items():
        names = scope_names.get(owner, module_names)
        for node in nodes:
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                calls.setdefault(node.func.id, []).append((node, names))
    for found in calls.values():  # the first call in the file is the one a parameter is shown with
        found.sort(key=lambda pair: (pair[0].lineno, pair[0].col_offset))
    return calls


def _read_targets(nodes: list[ast.AST]) -> frozenset[str]:
    """The expressions (as text) a scope reads a file from: `open(X)`, `open(X, "r")`, `X.read_text()`."""
    out = set()
    for node in nodes:
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        last = name.rsplit(".", 1)[-1]
        attribute = isinstance(node.func, ast.Attribute)
        if last == "open" and not attribute and node.args:
            if not _writes(_argument(node, 1, "mode")):
                out.add(_text(node.args[0]))
        elif attribute and (
            last in ("read_text", "read_bytes") or (last == "open" and not _writes(_argument(node, 0, "mode")))
        ):
            out.add(_text(node.func.value))  # type: ignore[attr-defined]
    return frozenset(out)


def _scope_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of one scope: not those inside nested function, lambda or class definitions."""
    pending = list(ast.iter_child_nodes(scope))
    while pending:
        node = pending.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            pending.extend(ast.iter_child_nodes(node))


_GIT_HEADER = re.compile(r"^diff --git \S+ \S+")
_GIT_EXTENDED = ("index ", "new file mode ", "deleted file mode ", "rename from ", "similarity index ", "old mode ")


def looks_like_diff(text: str) -> bool:
    """A unified or git diff: `--- a` then `+++ b` then a hunk header, or a `diff --git a b` line followed by
    a git extended header or a hunk header (a lone mention of `diff --git` in prose is not a diff)."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if _GIT_HEADER.match(line) and any(
            later.startswith(_GIT_EXTENDED) or later.startswith("@@ -") for later in lines[index + 1 : index + 8]
        ):
            return True
    for index, line in enumerate(lines[:-2]):
        if (
            line.startswith("--- ")
            and lines[index + 1].startswith("+++ ")
            and any(later.startswith("@@ -") for later in lines[index + 2 :])
        ):
            return True
    return False


def diff_targets(text: str) -> list[str]:
    """The files a diff changes, from its `+++` lines (or `---` for deletions), prefixes `a/` `b/` removed."""
    targets: list[str] = []
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if not line.startswith("+++ "):
            continue
        path = line[4:].split("\t")[0].strip()
        if path == "/dev/null" and index > 0 and lines[index - 1].startswith("--- "):
            path = lines[index - 1][4:].split("\t")[0].strip()
        if path.startswith(("a/", "b/")):
            path = path[2:]
        if path not in targets:
            targets.append(path)
    return targets


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else node.attr
    return ""


def _text(node: ast.AST) -> str:
    return " ".join(ast.unparse(node).split())


@dataclass(frozen=True)
class Names:
    """What the names of one scope hold: engine paths, modules (or their specs), and string constants."""

    paths: Mapping[str, Resolved] = field(default_factory=dict)
    modules: Mapping[str, str] = field(default_factory=dict)  # name -> dotted module name
    texts: Mapping[str, str] = field(default_factory=dict)  # name -> a string it holds (a loop over keys)
    notes: Mapping[str, str] = field(default_factory=dict)  # module name -> how it got there (a parameter)

    def extended(self, other: Names) -> Names:
        return Names({**self.paths, **other.paths}, {**self.modules, **other.modules},
                     {**self.texts, **other.texts}, {**self.notes, **other.notes})

    def without(self, hidden: set[str]) -> Names:
        return Names({k: v for k, v in self.paths.items() if k not in hidden},
                     {k: v for k, v in self.modules.items() if k not in hidden},
                     {k: v for k, v in self.texts.items() if k not in hidden},
                     {k: v for k, v in self.notes.items() if k not in hidden})


class _Reader:
    def __init__(self, resolver: EngineResolver, offset: int, argv: tuple[Resolved | None, ...], scope: str) -> None:
        self.resolver = resolver
        self.config = resolver.config
        self.offset = offset
        self.argv = argv
        self.scope = scope
        self.names = Names()
        self.imports: dict[str, str] = {}  # local name -> module imported under it
        self.literals: dict[str, ast.expr] = {}  # module-level NAME = [..] / {..} / (..)
        self.engine_imports: list[str] = []  # engine packages the code imports or locates
        # Functions defined in the code: a call's value is what its `return` gives with that call's arguments.
        self.functions: dict[str, tuple[ast.FunctionDef | ast.AsyncFunctionDef, list[ast.AST]]] = {}
        self.module_names = Names()
        self.depth = 0
        # A local function's return value per (function, what its arguments hold), and the evaluations left
        # for this reading: a hostile file of helpers calling helpers stays near linear in its size.
        self.returns: dict[tuple[object, ...], Resolved | None] = {}
        self.budget = 2000
        self.reads: frozenset[str] = frozenset()
        self.writes: list[PythonWrite] = []
        self.commands: list[Command] = []
        self.diffs: list[InlineDiff] = []

    # ------------------------------------------------------------------ bindings

    def import_modules(self, tree: ast.AST) -> None:
        tops: list[str] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    top = alias.name.split(".")[0]
                    self.imports[alias.asname or top] = alias.name if alias.asname else top
                    tops.append(top)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    self.imports.setdefault(alias.asname or alias.name, f"{node.module}.{alias.name}")
                tops.append(node.module.split(".")[0])
            elif isinstance(node, ast.Call) and _dotted(node.func).rsplit(".", 1)[-1] in _LOCATORS:
                first = node.args[0] if node.args else None
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    tops.append(first.value.split(".")[0])
        for node in getattr(tree, "body", []):
            if isinstance(node, ast.Assign) and isinstance(node.value, (ast.List, ast.Tuple, ast.Dict, ast.Set)):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        self.literals[target.id] = node.value
        self.engine_imports = sorted({t for t in tops if self.config.is_engine_package(t)})

    def parameters(self, function: ast.AST, calls: dict[str, list[tuple[ast.Call, Names]]]) -> Names:
        """What the parameters of `function` hold, from its calls in the same code."""
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return Names()
        paths: dict[str, Resolved] = {}
        others: dict[str, list[str]] = {}  # the other engine paths later calls pass
        modules: dict[str, str] = {}
        notes: dict[str, str] = {}
        texts: dict[str, str] = {}
        saved = self.names
        for call, names in calls.get(function.name, []):
            self.names = names
            line = call.lineno + self.offset
            given = self._call_parameters(function, call)
            for parameter, found in given.paths.items():
                if parameter not in paths:
                    reason = f"{found.reason}, passed as {parameter} to {function.name}() (line {line})"
                    paths[parameter] = Resolved(found.shown, reason)
                elif found.shown != paths[parameter].shown:
                    seen = others.setdefault(parameter, [])
                    if f"{found.shown} (line {line})" not in seen:
                        seen.append(f"{found.shown} (line {line})")
            for parameter, module in given.modules.items():
                if parameter not in modules:
                    modules[parameter] = module
                    notes[parameter] = f"passed as {parameter} to {function.name}() (line {line})"
                elif module != modules[parameter] and f"{module} (line" not in notes[parameter]:
                    joiner = ", " if "; also called with " in notes[parameter] else "; also called with "
                    notes[parameter] += f"{joiner}{module} (line {line})"
            for parameter, text in given.texts.items():
                texts.setdefault(parameter, text)
        self.names = saved
        for parameter, seen in others.items():  # one statement, several targets: the message names them all
            first = paths[parameter]
            paths[parameter] = Resolved(first.shown, f"{first.reason}; also called with {', '.join(seen)}")
        return Names(paths, modules, texts, notes)

    def _call_parameters(self, function: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call) -> Names:
        """What one call gives the function's parameters, read in the caller's names (self.names)."""
        arguments = function.args
        positional = [a.arg for a in (*arguments.posonlyargs, *arguments.args)]
        given = list(zip(positional, call.args, strict=False))
        given += [(k.arg, k.value) for k in call.keywords if k.arg]
        paths: dict[str, Resolved] = {}
        modules: dict[str, str] = {}
        texts: dict[str, str] = {}
        for parameter, value in given:
            module = self.module_of(value)
            if module is not None:
                modules[parameter] = module
            found = self.engine_of(value)
            if found is not None:
                paths[parameter] = found
            text = self._string(value)
            if text is not None:
                texts[parameter] = text
        return Names(paths, modules, texts)

    def _call_local(self, call: ast.Call, name: str) -> Resolved | None:
        """The engine path a call of a function of the same code returns, with this call's arguments."""
        if self.depth >= 3:
            return None
        function, nodes = self.functions[name]
        parameters = self._call_parameters(function, call)
        key = (name, tuple(sorted(parameters.paths.items())), tuple(sorted(parameters.modules.items())),
               tuple(sorted(parameters.texts.items())))
        if key in self.returns:
            return self.returns[key]
        if self.budget <= 0:
            return None
        self.budget -= 1
        self.returns[key] = None  # a recursive call sees no value
        saved = self.names
        self.depth += 1
        try:
            self.bind(nodes, self.module_names.extended(parameters))
            found = self.returned(function, nodes)
        finally:
            self.names = saved
            self.depth -= 1
        self.returns[key] = found
        return found

    def returned(self, function: ast.AST, nodes: list[ast.AST]) -> Resolved | None:
        """The engine path a function returns (its first `return` that names one), in its own names."""
        returns = sorted((n for n in nodes if isinstance(n, ast.Return) and n.value is not None),
                         key=lambda n: n.lineno)
        for node in returns:
            found = self.engine_of(node.value)
            if found is not None:
                name = getattr(function, "name", "")
                return Resolved(found.shown, f"{found.reason}, returned by {name}()")
        return None

    def _string(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            return self.names.texts.get(node.id)
        return None

    def bind(self, nodes: list[ast.AST], outer: Names) -> Names:
        """What the names of one scope hold, on top of `outer` (the module's, and the parameters)."""
        pairs: list[tuple[str, ast.expr]] = []
        texts: dict[str, str] = {}
        for node in nodes:
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    pairs += _unpack(target, node.value)
            elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                if isinstance(node.target, ast.Name):
                    pairs.append((node.target.id, node.value))
            elif isinstance(node, ast.With):
                for item in node.items:
                    if isinstance(item.optional_vars, ast.Name):
                        pairs.append((item.optional_vars.id, item.context_expr))
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                walked = node.iter
                if (isinstance(walked, ast.Call) and _dotted(walked.func) in ("os.walk", "walk") and walked.args
                        and isinstance(node.target, ast.Tuple) and node.target.elts
                        and isinstance(node.target.elts[0], ast.Name)):
                    pairs.append((node.target.elts[0].id, walked.args[0]))  # `for root, _, files in os.walk(X)`
                    continue
                for element in self._elements(node.iter):
                    pairs += _unpack(node.target, element)
                    if isinstance(element, ast.Constant) and isinstance(element.value, str):
                        first = node.target.elts[0] if isinstance(node.target, ast.Tuple) else node.target
                        if isinstance(first, ast.Name):
                            texts.setdefault(first.id, element.value)
        local_names = {name for name, _ in pairs} | set(texts)
        # A local name hides the module's, even when it holds no engine path.
        base = outer.without(local_names & set(outer.paths) - {n for n in local_names if n in outer.modules})
        paths = dict(base.paths)
        modules = dict(base.modules)
        texts = {**base.texts, **texts}
        for name, value in pairs:
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                texts.setdefault(name, value.value)
        for _ in range(4):  # names defined from names: to a fixed point
            changed = False
            self.names = Names(paths, modules, texts, base.notes)
            for name, value in pairs:
                module = self.module_of(value)
                if module is not None and name not in modules:
                    modules[name] = module
                    changed = True
                found = self.engine_of(value)
                if found is not None and name not in paths:
                    paths[name] = found
                    changed = True
            if not changed:
                break
        self.names = Names(paths, modules, texts, base.notes)
        return self.names

    def _elements(self, node: ast.expr) -> list[ast.expr]:
        """What a loop runs over: a literal's elements (a dict's keys), through a name or `.items()`."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
            "items", "keys", "values"
        ):
            literal = self._literal(node.func.value)
            if isinstance(literal, ast.Dict):
                if node.func.attr == "values":
                    return list(literal.values)
                keys = [k for k in literal.keys if k is not None]
                if node.func.attr == "items":
                    return [ast.Tuple([k, v], ast.Load()) for k, v in zip(keys, literal.values, strict=False)]
                return keys
        literal = self._literal(node)
        if isinstance(literal, ast.Dict):
            return [k for k in literal.keys if k is not None]
        if isinstance(literal, (ast.List, ast.Tuple, ast.Set)):
            return list(literal.elts)
        return [node]

    def _literal(self, node: ast.expr) -> ast.expr | None:
        if isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict)):
            return node
        if isinstance(node, ast.Name):
            return self.literals.get(node.id)
        return None

    # ------------------------------------------------------------------ modules

    def module_of(self, node: ast.expr | None) -> str | None:
        """The dotted module (or module spec) an expression holds: `vllm.entrypoints.serve`, a parameter
        given one, `importlib.import_module("vllm.x")`, `find_spec("vllm")`, `sys.modules["vllm.x"]`."""
        if isinstance(node, ast.Name):
            return self.names.modules.get(node.id) or self.imports.get(node.id)
        if isinstance(node, ast.Attribute):
            if node.attr in _MODULE_ATTRIBUTES:
                return self.module_of(node.value) if node.attr == "__spec__" else None
            base = self.module_of(node.value)
            return None if base is None else f"{base}.{node.attr}"
        if isinstance(node, ast.Call):
            last = _dotted(node.func).rsplit(".", 1)[-1]
            first = node.args[0] if node.args else None
            if last in ("find_spec", "import_module", "reload", "getmodule", "__import__"):
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    return first.value
                if isinstance(first, ast.Name) and first.id in self.names.texts:
                    return self.names.texts[first.id]
                return self.module_of(first) if last in ("reload", "getmodule") else None
        if isinstance(node, ast.Subscript) and _dotted(node.value) == "sys.modules":
            key = node.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                return key.value
        return None

    # ------------------------------------------------------------------ engine paths

    def engine_of(self, node: ast.expr | None) -> Resolved | None:
        if node is None:
            return None
        if isinstance(node, ast.Constant):
            return self.resolver.resolve(node.value, self.scope) if isinstance(node.value, str) else None
        if isinstance(node, ast.JoinedStr):
            parts: list[str] = []
            reason = None
            for value in node.values:
                if isinstance(value, ast.FormattedValue):
                    found = self.engine_of(value.value)
                    reason = reason or (found.reason if found else None)
                    parts.append(found.shown if found is not None else self._part(value.value))
                elif isinstance(value, ast.Constant):
                    parts.append(str(value.value))
            joined = "".join(parts)
            return Resolved(joined, reason) if reason else self.resolver.resolve(joined, self.scope)
        if isinstance(node, ast.Name):
            return self.names.paths.get(node.id)
        if isinstance(node, ast.Attribute):
            return self._attribute(node)
        if isinstance(node, ast.Subscript):
            dotted = _dotted(node.value)
            if dotted == "os.environ":
                return self._environment(node.slice)
            if dotted in ("sys.argv", "argv") and (dotted == "sys.argv" or self.imports.get("argv") == "sys.argv"):
                return self._argv(node.slice)
            return self.engine_of(node.value)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Div)):
            left = self.engine_of(node.left)
            if left is None:
                return None
            right = self._part(node.right)
            shown = f"{left.shown}/{right}" if isinstance(node.op, ast.Div) else f"{left.shown}{right}"
            return Resolved(shown, left.reason)
        if isinstance(node, ast.Call):
            return self._call_result(node)
        if isinstance(node, ast.IfExp):
            return self.engine_of(node.body) or self.engine_of(node.orelse)
        if isinstance(node, ast.BoolOp):
            return next((found for value in node.values if (found := self.engine_of(value))), None)
        return None

    def _part(self, node: ast.expr) -> str:
        """A path component as shown: a constant, a name holding a string, else `{expression}`."""
        if isinstance(node, ast.Constant):
            return str(node.value)
        if isinstance(node, ast.Name) and node.id in self.names.texts:
            return self.names.texts[node.id]
        return "{" + _text(node) + "}"

    def _argv(self, key: ast.expr) -> Resolved | None:
        if isinstance(key, ast.Constant) and isinstance(key.value, int):
            index = key.value
            return self.argv[index] if 0 <= index < len(self.argv) else None
        if isinstance(key, ast.Slice):
            return next((found for found in self.argv[1:] if found is not None), None)
        return None

    def _attribute(self, node: ast.Attribute) -> Resolved | None:
        base = node.value
        if node.attr in ("__file__", "origin"):
            module = self.module_of(base)
            if module is not None:
                return self._noted(base, package_location(self.config, module, "file"))
            inner = self.engine_of(base)
            return None if inner is None else Resolved(f"{inner.shown}/__init__.py", inner.reason)
        if node.attr in ("__path__", "submodule_search_locations"):
            module = self.module_of(base)
            if module is not None:
                return self._noted(base, package_location(self.config, module, "dir"))
            return self.engine_of(base)
        if node.attr == "parent":
            inner = self.engine_of(base)
            return None if inner is None else parent_of(inner)
        if node.attr == "parents":
            return self.engine_of(base)
        return None

    def _noted(self, base: ast.expr, found: Resolved | None) -> Resolved | None:
        """A module's location, with how a parameter got the module (and the other calls' modules)."""
        note = self.names.notes.get(base.id) if isinstance(base, ast.Name) else None
        return found if found is None or not note else Resolved(found.shown, f"{found.reason}, {note}")

    def _environment(self, key: ast.expr | None) -> Resolved | None:
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return self.resolver.resolve("$" + key.value, self.scope)
        return None

    def _call_result(self, node: ast.Call) -> Resolved | None:
        name = _dotted(node.func)
        last = name.rsplit(".", 1)[-1]
        first = node.args[0] if node.args else None
        if last in ("find_spec", "import_module", "files"):
            module = self.module_of(node) if last != "files" else None
            if last == "files" and isinstance(first, ast.Constant) and isinstance(first.value, str):
                module = first.value
            return None if module is None else package_location(self.config, module, "dir")
        if last in _SITE_DIRS or last == "locate_file":
            return Resolved("<site-packages>", f"installed packages ({last}())")
        if last in ("getfile", "getsourcefile", "getabsfile") and name.split(".")[0] in ("inspect", last):
            module = self.module_of(first)
            if module is not None:
                return package_location(self.config, module, "file")
            return None
        if name in ("os.environ.get", "os.getenv", "environ.get", "getenv"):
            return self._environment(first)
        receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
        if last in ("join", "Path", "PurePath", "PosixPath", "PurePosixPath", "joinpath"):
            parts = list(node.args)
            if last == "joinpath" and receiver is not None:
                parts.insert(0, receiver)
            if not parts:
                return None
            head = self.engine_of(parts[0])
            if head is None:
                return None
            tail = [self._part(p) for p in parts[1:]]
            return Resolved("/".join([head.shown, *tail]), head.reason)
        if last == "dirname":
            inner = self.engine_of(first)
            return None if inner is None else parent_of(inner)
        if name in ("glob.glob", "glob.iglob", "glob"):
            return self.engine_of(first)
        if last in _PASS_THROUGH:
            if first is not None:
                return self.engine_of(first)
            return self.engine_of(receiver) if receiver is not None else None
        if last == "with_suffix" and receiver is not None:
            return self.engine_of(receiver)
        if last == "with_name" and receiver is not None:
            inner = self.engine_of(receiver)
            if inner is None or first is None:
                return inner
            return Resolved(f"{parent_of(inner).shown}/{self._part(first)}", inner.reason)
        if isinstance(node.func, ast.Name) and node.func.id in self.functions:
            return self._call_local(node, node.func.id)
        return None

    # ------------------------------------------------------------------ what a call does

    def call(self, node: ast.Call) -> None:
        name = _dotted(node.func)
        last = name.rsplit(".", 1)[-1]
        line = node.lineno + self.offset
        receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
        written: ast.expr | None = None
        if (last == "open" and receiver is None) or name in ("io.open", "codecs.open"):
            if _writes(_argument(node, 1, "mode")):
                written = _argument(node, 0, "file")
        elif last in ("write_text", "write_bytes", "touch", "open") and receiver is not None:
            if last != "open" or _writes(_argument(node, 0, "mode")):
                written = receiver
        elif last in _COPIERS and name.split(".")[0] in ("shutil", "os", last):
            written = _argument(node, 1, "dst")
            if last in _KEEPING_COPIERS and self._is_backup(_argument(node, 0, "src"), written):
                written = None  # `shutil.copy2(F, F + ".bak")`: the engine file stays as it was
        elif last in _REMOVERS and name.split(".")[0] in ("os", "shutil"):
            written = _argument(node, 0, "path")
        elif last in ("unlink", "rmdir") and receiver is not None and not node.args:
            written = receiver  # Path(...).unlink()
        elif last in ("input", "FileInput") and name.split(".")[0] in ("fileinput", last):
            inplace = next((k.value for k in node.keywords if k.arg == "inplace"), None)
            if isinstance(inplace, ast.Constant) and inplace.value:
                written = _argument(node, 0, "files")
                if isinstance(written, (ast.List, ast.Tuple)) and written.elts:
                    written = written.elts[0]  # fileinput.input(files=[p, ...], inplace=True)
        if written is not None:
            target = self.engine_of(written)
            if target is not None:
                self.writes.append(PythonWrite(line, target.shown, _text(node), target.reason))
            elif self._unresolved(written, last):
                packages = ", ".join(self.engine_imports)
                reason = (f"rewrites {_text(written)} after reading it, in code that imports {packages}; "
                          "its target could not be told")
                self.writes.append(PythonWrite(line, None, _text(node), reason))
        if name in _RUNNERS or name in _SHELL_RUNNERS:
            self._command(node, line)

    def _is_backup(self, source: ast.expr | None, destination: ast.expr | None) -> bool:
        """The copy's destination is its source with a backup suffix (`.bak`, `.orig`, `~`, ...)."""
        if source is None or destination is None:
            return False
        found, copied = self.engine_of(source), self.engine_of(destination)
        if found is None or copied is None:
            return False
        return copied.shown.startswith(found.shown) and is_backup_suffix(copied.shown[len(found.shown):])

    def _unresolved(self, written: ast.expr, how: str) -> bool:
        """A write that may patch the engine: code that imports an engine package reads the file it rewrites
        (or edits it in place), and the file is not a literal path of its own."""
        if not self.engine_imports or how in _REMOVERS or how in _COPIERS:
            return False
        if isinstance(written, ast.Constant) or (
            isinstance(written, ast.JoinedStr) and not any(isinstance(v, ast.FormattedValue) for v in written.values)
        ):
            return False
        return how in ("input", "FileInput") or _text(written) in self.reads

    def _command(self, node: ast.Call, line: int) -> None:
        argv = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "args"), None)
        if isinstance(argv, (ast.List, ast.Tuple)):
            words: list[str] = []
            known: list[tuple[int, str, str]] = []
            for index, element in enumerate(argv.elts):
                found = self.engine_of(element)
                if found is not None:
                    known.append((index, found.shown, found.reason))
                if isinstance(element, ast.Constant) and isinstance(element.value, str):
                    words.append(element.value)
                else:
                    words.append(found.shown if found is not None else "{" + _text(element) + "}")
            self.commands.append(Command(tuple(words), (), (), (), line, tuple(known)))
        elif isinstance(argv, ast.Constant) and isinstance(argv.value, str):
            self.commands += read_shell(argv.value, line)
        elif isinstance(argv, ast.JoinedStr):
            # Each {value} becomes a shell variable of its own while the text is read as shell (a shown
            # `<site-packages>` would read as a redirection), then the words get the values back.
            values: dict[str, Resolved | None] = {}
            parts: list[str] = []
            for value in argv.values:
                if isinstance(value, ast.FormattedValue):
                    token = f"__pk{len(values)}"
                    values[token] = self.engine_of(value.value)
                    parts.append("${" + token + "}")
                elif isinstance(value, ast.Constant):
                    parts.append(str(value.value))
            for command in read_shell("".join(parts), line):
                self.commands.append(_with_values(command, values))


def _with_values(command: Command, values: dict[str, Resolved | None]) -> Command:
    """The command with the f-string's `${__pkN}` tokens replaced by their shown values; a word holding an
    engine path is `known`."""
    words: list[str] = []
    known: list[tuple[int, str, str]] = []
    for index, word in enumerate(command.words):
        reason = ""
        for token, found in values.items():
            if "${" + token + "}" in word:
                shown = found.shown if found is not None else "{...}"
                word = word.replace("${" + token + "}", shown)
                reason = reason or (found.reason if found is not None else "")
        if reason:
            known.append((index, word, reason))
        words.append(word)
    return Command(tuple(words), command.assignments, command.redirects, command.heredocs, command.line,
                   tuple(known), command.scope)


def _unpack(target: ast.expr, value: ast.expr) -> list[tuple[str, ast.expr]]:
    """(name, value) pairs of an assignment or loop target: `a = x`, `a, b = x, y`, `rel, (old, new) = ...`."""
    if isinstance(target, ast.Name):
        return [(target.id, value)]
    if isinstance(target, (ast.Tuple, ast.List)):
        if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
            return [pair for t, v in zip(target.elts, value.elts, strict=False) for pair in _unpack(t, v)]
        return []
    return []


def _argument(node: ast.Call, position: int, keyword: str) -> ast.expr | None:
    if len(node.args) > position:
        return node.args[position]
    return next((k.value for k in node.keywords if k.arg == keyword), None)


def _writes(mode: ast.expr | None) -> bool:
    if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
        return any(c in mode.value for c in "wax+")
    return False
