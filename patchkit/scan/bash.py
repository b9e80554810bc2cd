"""Shell read by a real parser: tree-sitter with the tree-sitter-bash grammar, the scan's parser of record.

`read_shell` turns a script into the simple commands the scan rules look at (shell.Command: words unquoted with
their expansions kept as written, NAME=value prefixes, redirections, heredoc bodies, the 1-based line), each with
the function it runs in (`scope`), so a `local f` of one function never names the `$f` of another. Commands
inside `$(...)`, `if`/`while`/`case` arms, subshells, pipelines and `&&` lists are all found; `for X in ...`
becomes the command `for X in ...` (the loop variable's values), a bare `X=...` a command of assignments only.

tree-sitter-bash reads everything the hand-written reader (shell.py) does and more (arrays, `[[ ]]`, `case`,
`$'...'`, functions, here-strings), but two heredocs started on one line (`cat > a <<A; cat > b <<B`, or
`cat <<A | python - <<'B'`) come out as an error; a tree with an error is read again by the hand-written
reader, which handles them (the figures are in docs/lint.md, "The shell parser").

The grammar is a compiled extension: it is imported here, lazily, when the scan first reads shell (the lint
boundary), so `apply`/`status`/`revert` and the single-file runner never load it. Without it the scan raises
ScanUnavailableError: lint from `patchkit.pyz` says it needs the installed package.
"""

from __future__ import annotations

import codecs
import functools
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from patchkit.errors import ScanUnavailableError
from patchkit.scan.shell import Command, Heredoc, Redirect, parse_shell

if TYPE_CHECKING:
    from tree_sitter import Node, Parser

_DECLARATIONS = frozenset({"local", "declare", "typeset", "export", "readonly"})
# Statement containers: a variable_assignment directly inside one is a statement of its own.
_STATEMENT_PARENTS = frozenset(
    {"program", "compound_statement", "do_group", "list", "if_statement", "elif_clause", "else_clause",
     "subshell", "case_item", "command_substitution", "pipeline", "while_statement", "negated_command"}
)


@functools.lru_cache(maxsize=1)
def _parser() -> Parser:
    try:
        import tree_sitter_bash  # lazy: lint (a compiled grammar, never loaded by apply/status/revert)
        from tree_sitter import Language, Parser
    except ImportError as exc:
        raise ScanUnavailableError(
            f"the repository scan needs the shell parser (tree-sitter, tree-sitter-bash), which is not "
            f"installed here ({exc.name or exc})",
            hint="install patchkit with its lint extra (pip install 'patchkit-engine[lint]') and run "
            "`patchkit lint` from it, or run `patchkit lint --no-scan` to check the registry and waivers only",
        ) from None
    return Parser(Language(tree_sitter_bash.language()))


def read_shell(text: str, first_line: int = 1) -> list[Command]:
    """Every simple command of the shell `text`, in order, lines counted from `first_line`."""
    data = text.encode("utf-8", "surrogateescape")
    tree = _parser().parse(data)
    root = tree.root_node
    if root.has_error:
        return parse_shell(text, first_line)
    reader = _Converter(data, first_line)
    return sorted(reader.commands(root), key=lambda c: c.line)


def require_parser() -> None:
    """Raise ScanUnavailableError unless the shell parser can be loaded (before any file is read)."""
    _parser()


class _Converter:
    def __init__(self, data: bytes, first_line: int) -> None:
        self.data = data
        self.offset = first_line

    def commands(self, root: Node) -> Iterator[Command]:
        pending: list[tuple[Node, str, bool]] = [(root, "", False)]
        while pending:
            node, scope, nested = pending.pop()
            kind = node.type
            if kind in ("command_substitution", "process_substitution"):
                nested = True
            if kind == "function_definition":
                name = node.child_by_field_name("name")
                scope = self.text(name) if name is not None else scope
            elif kind == "command":
                yield replace(self.command(node, scope), substituted=nested)
            elif kind == "declaration_command":
                yield self.declaration(node, scope)
            elif kind == "variable_assignment" and node.parent is not None and (
                node.parent.type in _STATEMENT_PARENTS
            ):
                yield Command((), (self.assignment(node),), (), (), self.line(node), scope=scope)
            elif kind == "variable_assignments":
                pairs = tuple(self.assignment(c) for c in node.named_children if c.type == "variable_assignment")
                yield Command((), pairs, (), (), self.line(node), scope=scope)
            elif kind == "for_statement":
                yield self.loop(node, scope)
            elif kind in ("heredoc_body", "comment"):
                continue
            pending.extend((child, scope, nested) for child in reversed(node.children))

    # ------------------------------------------------------------------ commands

    def command(self, node: Node, scope: str) -> Command:
        words: list[str] = []
        assignments: list[tuple[str, str]] = []
        redirects: list[Redirect] = []
        heredocs: list[Heredoc] = []
        for child in node.named_children:
            kind = child.type
            if kind == "variable_assignment" and not words:
                assignments.append(self.assignment(child))
            elif kind == "command_name":
                words.append(self.word(child))
            elif kind in ("file_redirect", "herestring_redirect"):
                redirects.append(self.redirect(child))
            elif kind == "heredoc_redirect":
                heredocs.append(self.heredoc(child))
            elif kind != "comment":
                words.append(self.word(child))
        parent = node.parent
        if parent is not None and parent.type == "redirected_statement" and parent.child_by_field_name("body") == node:
            for child in parent.named_children:
                if child.type in ("file_redirect", "herestring_redirect"):
                    redirects.append(self.redirect(child))
                elif child.type == "heredoc_redirect":
                    heredocs.append(self.heredoc(child))
                    redirects += [self.redirect(c) for c in child.named_children if c.type == "file_redirect"]
        return Command(tuple(words), tuple(assignments), tuple(redirects), tuple(heredocs), self.line(node),
                       scope=scope)

    def declaration(self, node: Node, scope: str) -> Command:
        words = [self.text(node.children[0])] if node.children else []
        for child in node.named_children:
            if child.type == "variable_assignment":
                name, value = self.assignment(child)
                words.append(f"{name}={value}")
            elif child.type != "comment":
                words.append(self.word(child))
        return Command(tuple(words), (), (), (), self.line(node), scope=scope)

    def loop(self, node: Node, scope: str) -> Command:
        variable = node.child_by_field_name("variable")
        values = [self.word(v) for v in node.children_by_field_name("value")]
        name = self.text(variable) if variable is not None else ""
        return Command(("for", name, "in", *values), (), (), (), self.line(node), scope=scope)

    def assignment(self, node: Node) -> tuple[str, str]:
        name = node.child_by_field_name("name")
        value = node.child_by_field_name("value")
        shown = self.text(name) if name is not None else ""
        if shown.endswith("]") and "[" in shown:  # map[key]=value
            shown = shown.split("[", 1)[0]
        return shown, self.word(value) if value is not None else ""

    def redirect(self, node: Node) -> Redirect:
        destination = node.child_by_field_name("destination")
        operator = next((self.text(c) for c in node.children if not c.is_named), "")
        if node.type == "herestring_redirect":
            target = next((self.word(c) for c in node.named_children), "")
            return Redirect("<<<", target)
        return Redirect(operator, self.word(destination) if destination is not None else "")

    def heredoc(self, node: Node) -> Heredoc:
        start = next((c for c in node.children if c.type == "heredoc_start"), None)
        body = next((c for c in node.children if c.type == "heredoc_body"), None)
        strip_tabs = any(self.text(c) == "<<-" for c in node.children if not c.is_named)
        raw = self.text(start) if start is not None else ""
        quoted = any(c in raw for c in "'\"\\")
        delimiter = raw.replace("'", "").replace('"', "").replace("\\", "")
        if body is None:
            return Heredoc(delimiter, quoted, (), self.line(node) + 1)
        text = self.text(body)
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if strip_tabs:
            lines = [line.lstrip("\t") for line in lines]
        return Heredoc(delimiter, quoted, tuple(lines), self.line(body))

    # ------------------------------------------------------------------ words

    def word(self, node: Node) -> str:
        """A word as the shell sees it before expansion: quotes removed, expansions kept as written."""
        kind = node.type
        if kind == "raw_string":
            return self.text(node)[1:-1]
        if kind == "ansi_c_string":
            return _ansi_c(self.text(node)[2:-1])
        if kind in ("string", "translated_string"):
            # The grammar leaves the newlines and blanks between a string's parts out of every child: the gaps
            # are kept, so `python3 -c "<newline>import os<newline>..."` keeps its lines (#33).
            parts, end = [], None
            for child in node.children:
                if end is not None and child.start_byte > end:
                    parts.append(self.data[end : child.start_byte].decode("utf-8", "surrogateescape"))
                end = child.end_byte
                if child.type not in ('"', "$"):
                    parts.append(self.string_part(child))
            return "".join(parts)
        if kind in ("concatenation", "command_name", "array"):
            if kind == "array":
                return " ".join(self.word(c) for c in node.named_children)
            return "".join(self.word(c) for c in node.children)
        if kind == "word":
            return _unescape(self.text(node))
        return self.text(node)  # expansions, substitutions, numbers: as written

    def string_part(self, node: Node) -> str:
        if node.type == "string_content":
            return _unescape_double(self.text(node))
        return self.text(node)

    def text(self, node: Node) -> str:
        return self.data[node.start_byte : node.end_byte].decode("utf-8", "surrogateescape")

    def line(self, node: Node) -> int:
        return int(node.start_point[0]) + self.offset


def _unescape(text: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text):
            if text[index + 1] != "\n":
                out.append(text[index + 1])
            index += 2
            continue
        out.append(char)
        index += 1
    return "".join(out)


def _unescape_double(text: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text) and text[index + 1] in '"\\$`\n':
            if text[index + 1] != "\n":
                out.append(text[index + 1])
            index += 2
            continue
        out.append(char)
        index += 1
    return "".join(out)


def _ansi_c(text: str) -> str:
    try:
        decoded: Any = codecs.decode(text.encode("latin-1", "backslashreplace"), "unicode_escape")
    except (UnicodeDecodeError, ValueError):
        return text
    return str(decoded)
