"""The import graph: no circle (type-only and in-function imports included) and no import of a higher stage.

Read from the sources with ast: nothing of patchkit is imported or asked. A module's stage is its folder under
patchkit/ (STAGES, bottom first); a module directly in patchkit/ is the shared vocabulary at the bottom
(VOCABULARY) unless FLAT_STAGES names its stage. FLAT_STAGES is the flat layout's table (the modules side by side
before the stage packages); the relayout that moves them into their folders empties it.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "patchkit"
NOT_CODE = ("data",)  # the demo's engine-like tree: package data, not patchkit's modules

# Bottom first: a module may import its own stage and the ones before it, never a later one.
STAGES = (
    "vocabulary",  # errors, outcome, display escaping: what every stage says; imports nothing above it
    "input",  # manifests, the registry, bounds, paths, globs, and the engine tree's files as read
    "diff",  # the parser (the only unidiff user), hunks, filtering: the filtered hunk set
    "judge",  # matching, verdicts, rewriting a section, the states: what a tree's state is
    "plan",  # every new content in memory, re-judged; bytecode removals
    "workspace",  # the only code that writes the engine tree: lock, trust, journal, commit, recovery
    "run",  # one patch, a series, the restart fast path, provenance and the applied records
    "scan",  # patch sites in a repository (a room of its own)
    "lint",  # waivers and rules in CI (a room of its own, reads the scan)
    "tooling",  # the registry's tooling: vendor, forge formats, scaffold, the demo
    "speak",  # report and console: text, JSON, colour; decides nothing
    "cli",  # the click group and one module per command
)
VOCABULARY = {"patchkit", "patchkit.errors", "patchkit.outcome", "patchkit.display"}
ENTRY_POINTS = {"patchkit.__main__": "cli"}  # `python -m patchkit` needs it at the top

# FLAT_STAGES: the flat layout's table (a module or a package, and everything under it). The relayout empties it.
FLAT_STAGES: dict[str, str] = {}
# FLAT_STAGES end


def modules_of(package: Path) -> dict[str, Path]:
    """Every module of the package under `package`, by dotted name (a package by its own name)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent)
        if rel.parts[1] in NOT_CODE:
            continue
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports_of(modules: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the package's modules it imports anywhere: at the top, in a function, under TYPE_CHECKING."""
    graph: dict[str, set[str]] = {}
    top = next(iter(modules)).split(".")[0]
    for name, path in modules.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_bytes(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")[: len(here.split(".")) - node.level + 1]
                    source = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    source = node.module or ""
                for alias in node.names:  # `from pkg import module` imports that module; else the source
                    targets.add(f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source)
        graph[name] = {t for t in targets if t.split(".")[0] == top and t in modules and t != name}
    return graph


def cycles_of(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def stage_of(module: str) -> str | None:
    if module in ENTRY_POINTS:
        return ENTRY_POINTS[module]
    if module in VOCABULARY:
        return "vocabulary"
    parts = module.split(".")
    for end in range(len(parts), 1, -1):
        if ".".join(parts[:end]) in FLAT_STAGES:
            return FLAT_STAGES[".".join(parts[:end])]
    if len(parts) > 2 and parts[1] in STAGES:  # patchkit.<stage>.<module>...
        return parts[1]
    if len(parts) == 2 and parts[1] in STAGES:  # a stage package's own __init__
        return parts[1]
    return None


def test_no_import_circle() -> None:
    circles = cycles_of(imports_of(modules_of(PACKAGE)))
    assert circles == [], f"import circles (type-only and in-function imports count): {circles}"


def test_every_module_has_a_stage() -> None:
    modules = modules_of(PACKAGE)
    unplaced = sorted(m for m in modules if stage_of(m) is None)
    assert not unplaced, (
        f"modules with no stage: {unplaced}; put each in its stage's folder (or, in the flat layout, name its "
        "stage in tests/test_imports.py FLAT_STAGES)"
    )
    stale = sorted(m for m in FLAT_STAGES if m not in modules)
    assert not stale, f"FLAT_STAGES names modules that do not exist: {stale}"


def test_a_stage_imports_only_itself_and_the_stages_below() -> None:
    graph = imports_of(modules_of(PACKAGE))
    rank = {stage: i for i, stage in enumerate(STAGES)}
    upward = sorted(
        f"{a} ({stage_of(a)}) imports {b} ({stage_of(b)})"
        for a, targets in graph.items()
        for b in targets
        if stage_of(a) is not None and stage_of(b) is not None and rank[str(stage_of(b))] > rank[str(stage_of(a))]
    )
    assert not upward, "imports of a higher stage:\n" + "\n".join(upward)


def test_the_graph_reader_sees_type_only_relative_and_in_function_imports(tmp_path: Path) -> None:
    """The checks above can fail: a circle made only of a TYPE_CHECKING import, a relative import and one inside a
    function is found, and so is a module of the vocabulary that imports a stage."""
    pkg = tmp_path / "patchkit"
    (pkg / "judge").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "judge" / "__init__.py").write_text("")
    (pkg / "outcome.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from patchkit.judge.state import State\n"
    )
    (pkg / "judge" / "state.py").write_text("from . import matching\n")
    (pkg / "judge" / "matching.py").write_text("def f():\n    from patchkit import outcome\n")
    graph = imports_of(modules_of(pkg))
    assert graph["patchkit.outcome"] == {"patchkit.judge.state"}
    assert graph["patchkit.judge.state"] == {"patchkit.judge.matching"}
    assert graph["patchkit.judge.matching"] == {"patchkit.outcome"}
    assert cycles_of(graph) == [["patchkit.judge.matching", "patchkit.judge.state", "patchkit.outcome"]]
    assert stage_of("patchkit.outcome") == "vocabulary" and stage_of("patchkit.judge.state") == "judge"


# The only places an import may wait inside a function, each for a reason measured (docs/performance.md): the line
# says which, `# lazy: <boundary>` (the first line of a group of such imports says it for the group).
BOUNDARIES = (
    "the parser",  # unidiff and patchkit's parse: a parse-cache hit and a restart the records answer parse nothing
    "the judgement",  # state, matching, rewrite, hunks: a restart the records answer judges nothing
    "the write stage",  # planner, bytecode scan, transaction, recovery: status writes nothing
    "gitpython",  # ~140 ms: vendoring from git
    "sealed git",  # subprocess and a private repository (input.sealedgit): a pinned git checkout, lint --base
    "the CLI",  # a command's modules load when it runs: `--version` loads cli, console, display and errors
    "--root-from-package",  # importlib.metadata (~15 ms) and running the engine's interpreter
    "vendor's fetch",  # urllib.request (~20 ms): only a URL is fetched
    "vendor's manifest edit",  # tomlkit (~40 ms)
    "lint",  # the scan's shell parser (tree-sitter, compiled): never loaded by apply, status or revert
)


def lazy_imports(modules: dict[str, Path]) -> list[tuple[str, int, str]]:
    """(file, line, its text) of every import inside a function, outside an `if TYPE_CHECKING:` block."""
    found = []
    for path in modules.values():
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        for func in ast.walk(ast.parse(source)):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(func):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    found.append((str(path.relative_to(PACKAGE.parent)), node.lineno, lines[node.lineno - 1]))
    return sorted(set(found))


def test_lazy_imports_sit_at_the_named_boundaries_only() -> None:
    imports = lazy_imports(modules_of(PACKAGE))
    unnamed, covered = [], set()
    for file, line, text in imports:  # in file and line order
        if "# lazy: " in text:
            if text.split("# lazy: ", 1)[1].startswith(BOUNDARIES):
                covered.add((file, line))
            else:
                unnamed.append(f"{file}:{line}: {text.strip()} (not one of BOUNDARIES)")
        elif (file, line - 1) in covered:  # the next line of a group whose first line names the boundary
            covered.add((file, line))
        else:
            unnamed.append(f"{file}:{line}: {text.strip()}")
    assert not unnamed, "imports inside functions without `# lazy: <boundary>`:\n" + "\n".join(unnamed)
