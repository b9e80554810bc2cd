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
import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass

from patchkit.scan.engine import EngineResolver
from patchkit.scan.shell import Command, parse_shell

_RUNNERS = frozenset(
    {
        "subprocess.run", "subprocess.call", "subprocess.check_call", "subprocess.check_output",
        "subprocess.Popen", "run", "call", "check_call", "check_output", "Popen",
    }
)
_SHELL_RUNNERS = frozenset({"os.system", "os.popen", "subprocess.getoutput", "subprocess.getstatusoutput"})
_COPIERS = frozenset({"copy", "copy2", "copyfile", "copytree", "move", "replace", "rename", "symlink", "link"})
_REMOVERS = frozenset({"remove", "unlink", "rmtree"})
_PASS_THROUGH = frozenset({"abspath", "realpath", "normpath", "expanduser", "fspath", "str", "resolve", "absolute"})
_SITE_DIRS = frozenset({"getsitepackages", "getusersitepackages", "get_python_lib", "get_path", "get_paths"})


@dataclass(frozen=True)
class PythonWrite:
    line: int
    target: str  # the engine path, shown
    statement: str  # the call, normalised


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


def read_python(code: str, resolver: EngineResolver, first_line: int = 1) -> PythonReading:
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError) as exc:
        line = (getattr(exc, "lineno", None) or 1) + first_line - 1
        return PythonReading((), (), (), str(getattr(exc, "msg", exc)), line)
    reader = _Reader(resolver, first_line - 1)
    reader.import_modules(tree)
    # Names are resolved per scope (a function's own assignments, then the module's), flow-insensitively.
    module_nodes = list(_scope_nodes(tree))
    module_names = reader.bind(module_nodes, {})
    scopes = [(tree, module_nodes)] + [
        (node, list(_scope_nodes(node)))
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef))
    ]
    for scope, nodes in scopes:
        reader.names = module_names if scope is tree else reader.bind(nodes, module_names)
        for node in nodes:
            if isinstance(node, ast.Call):
                reader.call(node)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and looks_like_diff(node.value):
                reader.diffs.append(InlineDiff(node.lineno + reader.offset, node.value))
    return PythonReading(tuple(reader.writes), tuple(reader.commands), tuple(reader.diffs), None)


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


class _Reader:
    def __init__(self, resolver: EngineResolver, offset: int) -> None:
        self.resolver = resolver
        self.offset = offset
        self.names: dict[str, str] = {}  # variable -> engine path it holds
        self.modules: dict[str, str] = {}  # local name -> top-level package imported under it
        self.writes: list[PythonWrite] = []
        self.commands: list[Command] = []
        self.diffs: list[InlineDiff] = []

    # ------------------------------------------------------------------ bindings

    def import_modules(self, tree: ast.AST) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    top = alias.name.split(".")[0]
                    self.modules[alias.asname or top] = alias.name if alias.asname else top
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    self.modules.setdefault(alias.asname or alias.name, f"{node.module}.{alias.name}")

    def bind(self, nodes: list[ast.AST], outer: dict[str, str]) -> dict[str, str]:
        """The engine paths the names of one scope hold, on top of `outer` (the module's)."""
        pairs: list[tuple[str, ast.expr]] = []
        for node in nodes:
            if isinstance(node, ast.Assign):
                pairs += [(t.id, node.value) for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                if isinstance(node.target, ast.Name):
                    pairs.append((node.target.id, node.value))
            elif isinstance(node, ast.With):
                for item in node.items:
                    if isinstance(item.optional_vars, ast.Name):
                        pairs.append((item.optional_vars.id, item.context_expr))
            elif isinstance(node, (ast.For, ast.comprehension)) and isinstance(node.target, ast.Name):
                values = node.iter.elts if isinstance(node.iter, (ast.List, ast.Tuple, ast.Set)) else [node.iter]
                pairs += [(node.target.id, value) for value in values]
        local_names = {name for name, _ in pairs}
        # A local name hides the module's, even when it holds no engine path.
        self.names = {k: v for k, v in outer.items() if k not in local_names}
        for _ in range(4):  # names defined from names: to a fixed point
            changed = False
            for name, value in pairs:
                shown = self.engine_of(value)
                if shown is not None and name not in self.names:
                    self.names[name] = shown
                    changed = True
            if not changed:
                break
        return self.names

    # ------------------------------------------------------------------ engine paths

    def engine_of(self, node: ast.expr | None) -> str | None:
        if node is None:
            return None
        if isinstance(node, ast.Constant):
            return self.resolver.engine_path(node.value) if isinstance(node.value, str) else None
        if isinstance(node, ast.JoinedStr):
            parts, located = [], False
            for value in node.values:
                if isinstance(value, ast.FormattedValue):
                    shown = self.engine_of(value.value)
                    located = located or shown is not None
                    parts.append(shown if shown is not None else "{" + _text(value.value) + "}")
                elif isinstance(value, ast.Constant):
                    parts.append(str(value.value))
            joined = "".join(parts)
            return joined if located else self.resolver.engine_path(joined)
        if isinstance(node, ast.Name):
            return self.names.get(node.id)
        if isinstance(node, ast.Attribute):
            return self._attribute(node)
        if isinstance(node, ast.Subscript):
            if _dotted(node.value) == "os.environ":
                return self._environment(node.slice)
            return self.engine_of(node.value)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Div)):
            left = self.engine_of(node.left)
            if left is None:
                return None
            right = str(node.right.value) if isinstance(node.right, ast.Constant) else "{" + _text(node.right) + "}"
            return f"{left}/{right}" if isinstance(node.op, ast.Div) else f"{left}{right}"
        if isinstance(node, ast.Call):
            return self._call_result(node)
        return None

    def _attribute(self, node: ast.Attribute) -> str | None:
        base = node.value
        module = self.modules.get(base.id) if isinstance(base, ast.Name) else None
        if node.attr in ("__file__", "origin"):
            if module is not None:
                return f"<{module.split('.')[0]}>/__init__.py"
            inner = self.engine_of(base)
            return None if inner is None else f"{inner}/__init__.py"
        if node.attr in ("__path__", "submodule_search_locations"):
            return f"<{module.split('.')[0]}>" if module is not None else self.engine_of(base)
        if node.attr == "parent":
            inner = self.engine_of(base)
            return None if inner is None else posixpath.dirname(inner) or inner
        return None

    def _environment(self, key: ast.expr | None) -> str | None:
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return self.resolver.engine_path("$" + key.value)
        return None

    def _call_result(self, node: ast.Call) -> str | None:
        name = _dotted(node.func)
        last = name.rsplit(".", 1)[-1]
        first = node.args[0] if node.args else None
        is_text = isinstance(first, ast.Constant) and isinstance(first.value, str)
        if last in ("find_spec", "import_module", "files") and isinstance(first, ast.Constant) and is_text:
            return f"<{str(first.value).split('.')[0]}>"
        if last in _SITE_DIRS or last == "locate_file":
            return "<site-packages>"
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
            tail = [p.value if isinstance(p, ast.Constant) else "{" + _text(p) + "}" for p in parts[1:]]
            return "/".join([head, *map(str, tail)])
        if last == "dirname":
            inner = self.engine_of(first)
            return None if inner is None else posixpath.dirname(inner) or inner
        if last in _PASS_THROUGH:
            if first is not None:
                return self.engine_of(first)
            return self.engine_of(receiver) if receiver is not None else None
        if last in ("with_name", "with_suffix") and receiver is not None:
            return self.engine_of(receiver)
        return None

    # ------------------------------------------------------------------ what a call does

    def call(self, node: ast.Call) -> None:
        name = _dotted(node.func)
        last = name.rsplit(".", 1)[-1]
        line = node.lineno + self.offset
        receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
        target: str | None = None
        if (last == "open" and receiver is None) or name in ("io.open", "codecs.open"):
            if _writes(_argument(node, 1, "mode")):
                target = self.engine_of(_argument(node, 0, "file"))
        elif last in ("write_text", "write_bytes", "touch", "open") and receiver is not None:
            if last != "open" or _writes(_argument(node, 0, "mode")):
                target = self.engine_of(receiver)
        elif last in _COPIERS and name.split(".")[0] in ("shutil", "os", last):
            target = self.engine_of(_argument(node, 1, "dst"))
        elif last in _REMOVERS and name.split(".")[0] in ("os", "shutil"):
            target = self.engine_of(_argument(node, 0, "path"))
        elif last in ("input", "FileInput") and name.split(".")[0] in ("fileinput", last):
            inplace = next((k.value for k in node.keywords if k.arg == "inplace"), None)
            if isinstance(inplace, ast.Constant) and inplace.value:
                target = self.engine_of(_argument(node, 0, "files"))
        if target is not None:
            self.writes.append(PythonWrite(line, target, _text(node)))
        if name in _RUNNERS or name in _SHELL_RUNNERS:
            self._command(node, line)

    def _command(self, node: ast.Call, line: int) -> None:
        argv = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "args"), None)
        if isinstance(argv, (ast.List, ast.Tuple)):
            words: list[str] = []
            known: list[tuple[int, str]] = []
            for index, element in enumerate(argv.elts):
                shown = self.engine_of(element)
                if shown is not None:
                    known.append((index, shown))
                if isinstance(element, ast.Constant) and isinstance(element.value, str):
                    words.append(element.value)
                else:
                    words.append(shown if shown is not None else "{" + _text(element) + "}")
            self.commands.append(Command(tuple(words), (), (), (), line, tuple(known)))
        elif isinstance(argv, ast.Constant) and isinstance(argv.value, str):
            self.commands += parse_shell(argv.value, line)
        elif isinstance(argv, ast.JoinedStr):
            shown = self.engine_of(argv)
            text = shown if shown is not None else _text(argv)
            self.commands += parse_shell(text, line)


def _argument(node: ast.Call, position: int, keyword: str) -> ast.expr | None:
    if len(node.args) > position:
        return node.args[position]
    return next((k.value for k in node.keywords if k.arg == keyword), None)


def _writes(mode: ast.expr | None) -> bool:
    if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
        return any(c in mode.value for c in "wax+")
    return False
