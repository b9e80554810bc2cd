"""Shell read by a real parser: tree-sitter with the tree-sitter-bash grammar, the scan's parser of record.

`read_shell` turns a script into the simple commands the scan rules look at (shell.Command: words unquoted with
their expansions kept as written, NAME=value prefixes, redirections, heredoc bodies, the 1-based line), each with
the function it runs in (`scope`), so a `local f` of one function never names the `$f` of another. Commands
inside `$(...)`, `if`/`while`/`case` arms, subshells, pipelines and `&&` lists are all found; `for X in ...`
becomes the command `for X in ...` (the loop variable's values), a bare `X=...` a command of assignments only.

tree-sitter-bash reads everything the hand-written reader (shell.py) does and more (arrays, `[[ ]]`, `case`,
`$'...'`, functions, here-strings), but two heredocs started on one line (`cat > a <<A; cat > b <<B`, or
`cat <<A | python - <<'B'`) come out as an error; a tree with an error is read again by the hand-written
reader, which handles them (the figures are in docs/lint.md, "The shell parser"), and the substitutions it
does not go inside are read in turn.

The conversion is linear in the script, however deep it nests (hostile input: lint runs on forks' pull
requests): the tree is walked with an explicit stack carrying each node's parent (tree-sitter's `Node.parent`
walks down from the root, so asking it at depth d costs d), and a word shows the substitutions nested in it
only SHOWN_DEPTH levels deep, the deeper ones as `$(…)`. Without that bound a word of `$($($(...)))` n deep
would hold the whole rest of the chain at every level: n^2 characters. The commands inside the deeper levels
are still read (they are commands of their own, each showing its own SHOWN_DEPTH levels); a command with a word
cut short is marked `too_deep`, since the values computed past the cut are not followed (read_view reports it).

The grammar is a compiled extension: it is imported here, lazily, when the scan first reads shell (the lint
boundary), so `apply`/`status`/`revert` and the single-file runner never load it. Without it the scan raises
ScanUnavailableError: lint from `patchkit.pyz` says it needs the installed package.
"""

from __future__ import annotations

import bisect
import codecs
import functools
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from patchkit.errors import ScanUnavailableError
from patchkit.scan.shell import ELIDED, SHOWN_DEPTH, Command, Heredoc, Redirect, parse_shell_nested

if TYPE_CHECKING:
    from tree_sitter import Node, Parser

_DECLARATIONS = frozenset({"local", "declare", "typeset", "export", "readonly"})
# Statement containers: a variable_assignment directly inside one is a statement of its own.
_STATEMENT_PARENTS = frozenset(
    {"program", "compound_statement", "do_group", "list", "if_statement", "elif_clause", "else_clause",
     "subshell", "case_item", "command_substitution", "pipeline", "while_statement", "negated_command"}
)
_SUBSTITUTIONS = frozenset({"command_substitution", "process_substitution"})


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
    """Every simple command of the shell `text`, in order, lines counted from `first_line`.

    A tree with an error is read by the hand-written reader, which does not go inside substitutions: the code
    of each is read here in turn (tree-sitter first again), SHOWN_DEPTH levels deep, with a work list rather
    than recursion. Without it, one `x=$()` anywhere made every `$(git apply ...)` of the script invisible."""
    commands: list[Command] = []
    pending: list[tuple[str, int, int]] = [(text, first_line, 0)]  # (code, first line, substitutions around)
    while pending:
        code, line, around = pending.pop()
        data = code.encode("utf-8", "surrogateescape")
        root = _parser().parse(data).root_node
        if root.has_error:
            found, substitutions = parse_shell_nested(code, line)
            if around < SHOWN_DEPTH:  # deeper: those commands are marked too deep (parse_shell)
                pending += [(inner, at, around + 1) for inner, at in substitutions]
        else:
            found = list(_Converter(data, line, root).commands(root))
        commands += [replace(c, substituted=True) for c in found] if around else found
    return sorted(commands, key=lambda c: c.line)


def require_parser() -> None:
    """Raise ScanUnavailableError unless the shell parser can be loaded (before any file is read)."""
    _parser()


class _Converter:
    """The commands of one tree. `depth` is the number of substitutions around the command being converted
    (a word of it shows SHOWN_DEPTH more levels); `cut` records that a word of it was cut short there."""

    def __init__(self, data: bytes, first_line: int, root: Node) -> None:
        self.data = data
        self.offset = first_line
        self.depth = 0
        self.cut = False
        # depth (1 = a substitution in a top-level command) -> (start bytes, end bytes) of the substitutions
        # at that depth, in file order: those at one depth never overlap, so a word's are found by bisection.
        self.spans: dict[int, tuple[list[int], list[int]]] = _substitution_spans(root)

    def commands(self, root: Node) -> Iterator[Command]:
        """Every command below `root`, walked in pre-order with an explicit stack of (node, its parent, scope,
        substitutions around it): no recursion, and no `Node.parent` (linear in the depth)."""
        pending: list[tuple[Node, Node | None, str, int]] = [(root, None, "", 0)]
        while pending:
            node, parent, scope, depth = pending.pop()
            kind = node.type
            if kind in _SUBSTITUTIONS:
                depth += 1
            self.depth, self.cut = depth, False
            if kind == "function_definition":
                name = node.child_by_field_name("name")
                scope = self.text(name) if name is not None else scope
            elif kind == "command":
                yield self.marked(self.command(node, parent, scope))
            elif kind == "declaration_command":
                yield self.marked(self.declaration(node, scope))
            elif kind == "variable_assignment" and parent is not None and parent.type in _STATEMENT_PARENTS:
                yield self.marked(Command((), (self.assignment(node),), (), (), self.line(node), scope=scope))
            elif kind == "variable_assignments":
                pairs = tuple(self.assignment(c) for c in node.named_children if c.type == "variable_assignment")
                yield self.marked(Command((), pairs, (), (), self.line(node), scope=scope))
            elif kind == "for_statement":
                yield self.marked(self.loop(node, scope))
            elif kind in ("heredoc_body", "comment"):
                continue
            pending.extend((child, node, scope, depth) for child in reversed(node.children))

    def marked(self, command: Command) -> Command:
        """The command with where it sits: inside a substitution or not, a word of it cut short or not."""
        if not (self.depth or self.cut):
            return command
        return replace(command, substituted=self.depth > 0, too_deep=self.cut)

    # ------------------------------------------------------------------ commands

    def command(self, node: Node, parent: Node | None, scope: str) -> Command:
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
            return _unescape(self.text(node), _DOUBLE_QUOTED_ESCAPES)
        return self.text(node)

    def text(self, node: Node) -> str:
        """The node's source, with each substitution nested past SHOWN_DEPTH (below the current command)
        shown as ELIDED: every byte is copied into at most SHOWN_DEPTH + 1 words, whatever the nesting."""
        start, end = node.start_byte, node.end_byte
        starts, ends = self.spans.get(self.depth + SHOWN_DEPTH + 1, ((), ()))
        index = bisect.bisect_left(starts, start)
        if index == len(starts) or starts[index] >= end:
            return self.data[start:end].decode("utf-8", "surrogateescape")
        self.cut = True
        parts: list[bytes] = []
        position = start
        while index < len(starts) and starts[index] < end:
            parts += [self.data[position : starts[index]], ELIDED.encode()]
            position = ends[index]
            index += 1
        parts.append(self.data[position:end])
        return b"".join(parts).decode("utf-8", "surrogateescape")

    def line(self, node: Node) -> int:
        return int(node.start_point[0]) + self.offset


def _substitution_spans(root: Node) -> dict[int, tuple[list[int], list[int]]]:
    """(start bytes, end bytes) of every `$(...)`, backtick and `<(...)` below `root`, by nesting depth (1 for
    the outermost), each list in file order (a pre-order walk with an explicit stack)."""
    spans: dict[int, tuple[list[int], list[int]]] = {}
    pending: list[tuple[Node, int]] = [(root, 0)]
    while pending:
        node, depth = pending.pop()
        if node.type in _SUBSTITUTIONS:
            depth += 1
            starts, ends = spans.setdefault(depth, ([], []))
            starts.append(node.start_byte)
            ends.append(node.end_byte)
        pending.extend((child, depth) for child in reversed(node.children))
    return spans


# Inside double quotes a backslash escapes only these (bash's manual, "Double Quotes"); outside quotes, any character.
_DOUBLE_QUOTED_ESCAPES = '"\\$`\n'


def _unescape(text: str, escapable: str | None = None) -> str:
    """`text` with its backslash escapes resolved as the shell reads them: a backslash before a character
    `escapable` names (any character when None) gives that character, before a newline joins the lines (both
    go), and stays itself before any other character or at the end."""
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text) and (escapable is None or text[index + 1] in escapable):
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
