"""Tell whether a path written in a script is an engine path, and show it.

An engine path is under `site-packages` / `dist-packages`, under a configured engine root (`/sgl-workspace`,
`$ATOM_ROOT`), or comes from an idiom that locates an installed package: `find_spec("sglang")`,
`sglang.__file__`, `importlib.import_module(...)`, `pip show sglang`, `site.getsitepackages()`. Shell variables
assigned such a value (anywhere in the script: the reading is flow-insensitive, as a reviewer reads) carry it,
so `sed -i ... "$SGL/srt/x.py"` shows as `<sglang>/srt/x.py`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from patchkit.scan.config import ScanConfig
from patchkit.scan.shell import Command, argv_of, program_name

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")
_FIND_SPEC = re.compile(r"find_spec\(\s*['\"]([A-Za-z_][\w.]*)['\"]")
_IMPORT_MODULE = re.compile(r"import_module\(\s*['\"]([A-Za-z_][\w.]*)['\"]")
_IMPORT = re.compile(r"\bimport\s+([A-Za-z_][\w.]*)")
_FILES = re.compile(r"resources\.files\(\s*['\"]([A-Za-z_][\w.]*)['\"]")
_PIP_SHOW = re.compile(r"\bpip3?\s+show\s+(?:-\S+\s+)*([A-Za-z0-9_.-]+)")
_SITE_DIR = re.compile(r"getsitepackages|getusersitepackages|get_python_lib|purelib|platlib|sysconfig")
_INSTALLED = re.compile(r"(?:^|/)(?:site|dist)-packages(?:/|$)")
_DECLARE = frozenset({"export", "declare", "typeset", "local", "readonly"})


def locate_idiom(code: str) -> str | None:
    """The engine folder a snippet of code computes (`<sglang>`, `<site-packages>`), or None."""
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
        return f"<{package.split('.')[0]}>"
    found = _PIP_SHOW.search(code)
    if found or _SITE_DIR.search(code):
        return "<site-packages>"
    return None


@dataclass(frozen=True)
class EngineResolver:
    config: ScanConfig
    bindings: Mapping[str, str]  # shell variable -> the engine path it holds, shown

    @classmethod
    def for_commands(cls, config: ScanConfig, commands: Iterable[Command]) -> EngineResolver:
        pairs = list(_assignments(commands))
        bindings: dict[str, str] = {}
        # A variable may be defined from one defined later in the file (functions): iterate to a fixed point.
        for _ in range(4):
            resolver = cls(config, dict(bindings))
            changed = False
            for name, value in pairs:
                shown = resolver.engine_path(value)
                if shown is not None and name not in bindings:
                    bindings[name] = shown
                    changed = True
            if not changed:
                break
        return cls(config, bindings)

    def engine_path(self, word: str) -> str | None:
        """The word shown with engine variables and idioms substituted, if it is an engine path; else None."""
        if not word:
            return None
        located = False

        def substitution(code: str) -> str:
            nonlocal located
            shown = locate_idiom(code)
            if shown is None:
                return code
            located = True
            return shown

        shown = _substitute_commands(word, substitution)

        def variable(match: re.Match[str]) -> str:
            nonlocal located
            name = match.group(1) or match.group(2)
            if name in self.bindings:
                located = True
                return self.bindings[name]
            return match.group(0)

        shown = _VARIABLE.sub(variable, shown)
        if located or self._is_engine_text(shown):
            return shown
        return None

    def _is_engine_text(self, text: str) -> bool:
        if _INSTALLED.search(text):
            return True
        for root in self.config.engine_roots:
            prefixes = [root]
            if root.startswith("$") and root[1:].isidentifier():
                prefixes.append("${" + root[1:] + "}")
            for prefix in prefixes:
                if text == prefix or text.startswith(prefix.rstrip("/") + "/"):
                    return True
        return False


def _substitute_commands(word: str, replace: Callable[[str], str]) -> str:
    """`word` with each top-level `$(...)` or backtick command replaced by `replace(its text)`."""
    out: list[str] = []
    index = 0
    while index < len(word):
        if word.startswith("$(", index):
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


def _assignments(commands: Iterable[Command]) -> Iterable[tuple[str, str]]:
    for command in commands:
        yield from command.assignments
        _, argv = argv_of(command)
        if not argv:
            continue
        if program_name(argv[0]) in _DECLARE:
            for word in argv[1:]:
                name, eq, value = word.partition("=")
                if eq and name.isidentifier():
                    yield name, value
        elif argv[0] == "for" and len(argv) > 3 and argv[2] == "in":
            # `for f in "$SGL"/a.py "$SGL"/b.py`: the loop variable holds each of them.
            for value in argv[3:]:
                yield argv[1], value
