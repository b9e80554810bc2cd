"""Compare shell parsers on real-looking constructs: which commands, words, lines and heredoc bodies each reads.

    .venv/bin/python benchmarks/shell_parsers.py

Candidates: the hand-written reader (patchkit/scan/shell.py), bashlex, tree-sitter-bash alone, and the scan's
parser of record (patchkit/scan/bash.py: tree-sitter-bash, the hand-written reader for a tree with an error).
Each case lists the commands a reviewer sees in it (line, words; heredoc bodies by their first line) and, for
functions, the function each command runs in. A parser scores a case when it reads exactly those; it is also
timed on a 2,000-line script built from the cases. The figures go in docs/lint.md ("The shell parser").
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from patchkit.scan.shell import Command, argv_of, parse_shell

# (name, script, expected [(line, words, scope)], expected heredoc bodies [(command line, first body line)])
Case = tuple[str, str, list[tuple[int, tuple[str, ...], str]], list[tuple[int, str]]]
CASES: list[Case] = [
    ("function with local", 'apply() {\n  local f="$ROOT/$1"\n  sed -i s/a/b/ "$f"\n}\napply x.py\n',
     [(2, ("local", "f=$ROOT/$1"), "apply"), (3, ("sed", "-i", "s/a/b/", "$f"), "apply"), (5, ("apply", "x.py"), "")],
     []),
    ("function keyword", "function fix {\n  cp a.py \"$SGL\"/b.py\n}\n",
     [(2, ("cp", "a.py", "$SGL/b.py"), "fix")], []),
    ("arrays", 'FILES=(a.py "b c.py")\nfor f in "${FILES[@]}"; do sed -i s/x/y/ "$SITE/$f"; done\n',
     [(1, (), ""), (2, ("for", "f", "in", "${FILES[@]}"), ""), (2, ("sed", "-i", "s/x/y/", "$SITE/$f"), "")], []),
    ("case", 'case "$MODE" in\n  fix) git apply x.diff ;;\n  *) echo no ;;\nesac\n',
     [(2, ("git", "apply", "x.diff"), ""), (3, ("echo", "no"), "")], []),
    ("[[ ]] and &&", '[[ -d $VLLM_ROOT && $X == "a b" ]] && patch -p1 < fix.diff\n',
     [(1, ("patch", "-p1"), "")], []),
    ("ansi-c string", "sed -i $'s/\\\\tA/B/' /opt/ATOM/x.py\n",
     [(1, ("sed", "-i", "s/\\tA/B/", "/opt/ATOM/x.py"), "")], []),
    ("here-string", 'python3 - <<< "print(1)"\nls\n', [(1, ("python3", "-"), ""), (2, ("ls",), "")], []),
    ("heredoc piped", "cat <<EOF | sh\necho $X\nEOF\nls\n", [(1, ("cat",), ""), (1, ("sh",), ""), (4, ("ls",), "")],
     [(1, "echo $X")]),
    ("two heredocs on a line", "cat > a <<A; cat > b <<'B'\n1\nA\n2\nB\nls\n",
     [(1, ("cat",), ""), (1, ("cat",), ""), (6, ("ls",), "")], [(1, "1"), (1, "2")]),
    ("heredoc into a pipe into a heredoc", "cat <<A | python - \"$X\" <<'B'\na\nA\nprint(1)\nB\nls\n",
     [(1, ("cat",), ""), (1, ("python", "-", "$X"), ""), (6, ("ls",), "")], [(1, "a"), (1, "print(1)")]),
    ("heredoc in a substitution", "X=$(cat <<EOF\nhi\nEOF\n)\nls\n", [(1, (), ""), (1, ("cat",), ""), (5, ("ls",), "")],
     [(1, "hi")]),
    ("tab-stripped heredoc in a function", "f() {\n\tcat <<-X > \"$SGL/a.py\"\n\tbody\n\tX\n}\nls\n",
     [(2, ("cat",), "f"), (6, ("ls",), "")], [(2, "body")]),
    ("continuation inside quotes", 'echo "a \\\nb" && sed -i \\\n  s/a/b/ f\n',
     [(1, ("echo", "a b"), ""), (2, ("sed", "-i", "s/a/b/", "f"), "")], []),
    ("substitution with quotes", 'echo "a $(echo "b c" | tr b d) e"\n',
     [(1, ("echo", 'a $(echo "b c" | tr b d) e'), ""), (1, ("echo", "b c"), ""), (1, ("tr", "b", "d"), "")], []),
    ("if / while / subshell",
     "if [ -f x ]; then\n  (cd /opt/ATOM && git apply y.diff)\nfi\nwhile read l; do echo $l; done\n",
     [(2, ("cd", "/opt/ATOM"), ""), (2, ("git", "apply", "y.diff"), ""), (4, ("read", "l"), ""),
      (4, ("echo", "$l"), "")], []),
    ("comments and hashes", "echo a#b '#x' # tail 'quote\nls # git apply\n",
     [(1, ("echo", "a#b", "#x"), ""), (2, ("ls",), "")], []),
    ("prefix assignments", "A=1 B=$(pwd) sed -i s/a/b/ f\n",
     [(1, ("sed", "-i", "s/a/b/", "f"), ""), (1, ("pwd",), "")], []),
    ("export and declare", 'export SGL="$(python3 -c "import sglang")"\ndeclare -A M=([a]=1)\n',
     [(1, ("export", 'SGL=$(python3 -c "import sglang")'), ""), (1, ("python3", "-c", "import sglang"), ""),
      (2, ("declare", "-A", "M=[a]=1"), "")], []),
    ("backticks", "D=`dirname $0`\n", [(1, (), ""), (1, ("dirname", "$0"), "")], []),
    ("process substitution", "diff <(sort a) b\n", [(1, ("diff", "<(sort a)", "b"), ""), (1, ("sort", "a"), "")], []),
]


def run_hand(text: str) -> tuple[list[tuple[int, tuple[str, ...], str]], list[tuple[int, str]]]:
    commands = parse_shell(text)
    return _shape(commands)


def run_record(text: str) -> tuple[list[tuple[int, tuple[str, ...], str]], list[tuple[int, str]]]:
    from patchkit.scan.bash import read_shell

    return _shape(read_shell(text))


def run_tree_sitter(text: str) -> tuple[list[tuple[int, tuple[str, ...], str]], list[tuple[int, str]]]:
    from patchkit.scan import bash

    data = text.encode()
    tree = bash._parser().parse(data)
    if tree.root_node.has_error:
        raise ValueError("error node")
    return _shape(sorted(bash._Converter(data, 1).commands(tree.root_node), key=lambda c: c.line))


def _shape(commands: list[Command]) -> tuple[list[tuple[int, tuple[str, ...], str]], list[tuple[int, str]]]:
    listed = [(c.line, argv_of(c)[1], c.scope) for c in commands]
    bodies = [(c.line, h.body[0] if h.body else "") for c in commands for h in c.heredocs]
    return listed, bodies


def run_bashlex(text: str) -> tuple[list[tuple[int, tuple[str, ...], str]], list[tuple[int, str]]]:
    import bashlex  # type: ignore[import-not-found]

    starts = [0]
    for index, char in enumerate(text):
        if char == "\n":
            starts.append(index + 1)

    def line_of(pos: int) -> int:
        return sum(1 for s in starts if s <= pos)

    listed: list[tuple[int, tuple[str, ...], str]] = []
    bodies: list[tuple[int, str]] = []

    def walk(node: object, scope: str) -> None:
        kind = getattr(node, "kind", "")
        if kind == "function":
            scope = node.name.word  # type: ignore[attr-defined]
        if kind == "command":
            parts = node.parts  # type: ignore[attr-defined]
            words = tuple(p.word for p in parts if getattr(p, "kind", "") == "word" and "=" not in p.word[:1])
            assigns = [p for p in parts if getattr(p, "kind", "") == "assignment"]
            words = tuple(p.word for p in parts if getattr(p, "kind", "") == "word")
            listed.append((line_of(node.pos[0]), words if words or not assigns else (), scope))  # type: ignore[attr-defined]
            for part in parts:
                if getattr(part, "kind", "") == "redirect" and getattr(part, "heredoc", None) is not None:
                    bodies.append((line_of(node.pos[0]), part.heredoc.value.split("\n", 1)[0]))  # type: ignore[attr-defined]
        for attr in ("parts", "list", "command"):
            children = getattr(node, attr, None)
            if isinstance(children, list):
                for child in children:
                    walk(child, scope)
            elif children is not None and hasattr(children, "kind"):
                walk(children, scope)
        if kind == "function":
            walk(node.body, scope)  # type: ignore[attr-defined]

    for tree in bashlex.parse(text):
        walk(tree, "")
    listed.sort(key=lambda x: x[0])
    return listed, bodies


PARSERS: dict[str, Callable[[str], tuple[list[tuple[int, tuple[str, ...], str]], list[tuple[int, str]]]]] = {
    "hand-written reader": run_hand,
    "bashlex 0.18": run_bashlex,
    "tree-sitter-bash alone": run_tree_sitter,
    "parser of record (tree-sitter, hand reader on error)": run_record,
}


def _matches(expected: list[tuple[int, tuple[str, ...], str]], got: list[tuple[int, tuple[str, ...], str]],
             scopes: bool) -> bool:
    want = sorted(expected) if scopes else sorted((line, words) for line, words, _ in expected)
    have = sorted(got) if scopes else sorted((line, words) for line, words, _ in got)
    return want == have


def main() -> int:
    print(f"{len(CASES)} cases")
    big = "".join(text for _, text, _, _ in CASES) * 60
    for name, parser in PARSERS.items():
        passed, with_scopes, failed = 0, 0, []
        for case, text, expected, bodies in CASES:
            try:
                got, got_bodies = parser(text)
            except Exception as exc:
                failed.append(f"{case} ({type(exc).__name__})")
                continue
            if _matches(expected, got, False) and sorted(bodies) == sorted(got_bodies):
                passed += 1
                with_scopes += _matches(expected, got, True)
            else:
                failed.append(case)
        try:
            start = time.perf_counter()
            parser(big)
            elapsed = f"{(time.perf_counter() - start) * 1000:.0f} ms"
        except Exception as exc:
            elapsed = f"fails ({type(exc).__name__})"
        print(f"{name}: {passed}/{len(CASES)} cases read right ({with_scopes} with function scopes); "
              f"{big.count(chr(10))} lines in {elapsed}")
        for case in failed:
            print(f"    wrong: {case}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
