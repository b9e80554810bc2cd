"""A small POSIX-shell reader: text -> simple commands with their words, redirections and heredoc bodies.

It is not a shell. It knows what changes where a command starts and what its words are: backslash-newline
continuations, comments (`#` at the start of a word only), single and double quotes, `$(...)`, `${...}` and
backticks (nested, with quotes inside), operators (`;`, `&&`, `||`, `|`, `&`, parentheses), redirections and
heredocs (`<<WORD`, `<<'WORD'`, `<<"WORD"`, `<<-WORD` with its leading tabs, but not the `<<<` herestring).
Every command keeps the 1-based line it starts on. Words keep expansions as written (`$SITE/x.py`), unquoted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_OPERATORS = ("&&", "||", ";;", ";&", "|&", ";", "&", "|", "(", ")")
_REDIRECTS = ("<<<", "<<-", "<<", ">>", "&>>", "&>", ">&", "<&", "<>", ">|", ">", "<")
_METACHARS = " \t\n;&|()<>"
_OPERATOR_STARTS = ";&|()"
_PLAIN = re.compile(r"[^\s;&|()<>\\'\"$`]+")
_OPENING = {")": "(", "}": "{"}
# Command substitutions nested in a word that the scan follows as values (no script needs 8); past it a word
# shows `$(…)` (bash.py), the resolver stops (engine.py) and the command is marked too deep (a PK405 error).
SHOWN_DEPTH = 8
ELIDED = "$(\u2026)"  # a substitution nested past SHOWN_DEPTH, as a word shows it


@dataclass(frozen=True)
class Redirect:
    op: str  # ">", ">>", "<", "<<<", ...; heredocs are in Command.heredocs
    target: str


@dataclass(frozen=True)
class Heredoc:
    delimiter: str
    quoted: bool  # the body is literal: no expansion
    body: tuple[str, ...]
    line: int  # 1-based line of the body's first line


@dataclass(frozen=True)
class Command:
    """One simple command. `words` exclude the leading NAME=value assignments, which are in `assignments`."""

    words: tuple[str, ...]
    assignments: tuple[tuple[str, str], ...]
    redirects: tuple[Redirect, ...]
    heredocs: tuple[Heredoc, ...]
    line: int
    # Engine paths already known for some words (from Python list arguments): (index, shown path, reason).
    known: tuple[tuple[int, str, str], ...] = ()
    scope: str = ""  # the shell function it runs in ("" at the top level); its `local` names are its own
    substituted: bool = False  # inside `$(...)` / `<(...)`: a `cd` there does not move the script
    # A word of it nests substitutions deeper than the reader shows (bash.SHOWN_DEPTH): the deeper ones are
    # not followed as values, so the scan cannot tell what it computes (a problem of the file, PK405).
    too_deep: bool = False

    @property
    def text(self) -> str:
        """The command normalised for fingerprints and messages: words and redirections, single-spaced."""
        parts = [f"{name}={value}" for name, value in self.assignments]
        parts += list(self.words)
        parts += [f"{r.op} {r.target}" for r in self.redirects]
        parts += [f"<<{h.delimiter}" for h in self.heredocs]
        return " ".join(" ".join(parts).split())


@dataclass
class _Building:
    line: int = 0
    words: list[str] = field(default_factory=list)
    assignments: list[tuple[str, str]] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)
    heredocs: list[Heredoc] = field(default_factory=list)
    too_deep: bool = False

    def empty(self) -> bool:
        return not (self.words or self.assignments or self.redirects or self.heredocs)


def parse_shell(text: str, first_line: int = 1) -> list[Command]:
    """Every simple command of `text`, in order; line numbers count from `first_line`."""
    return _Reader(text, first_line).read()


def parse_shell_nested(text: str, first_line: int = 1) -> tuple[list[Command], list[tuple[str, int]]]:
    """The commands of `text` and the (code, line) of every outermost command substitution in their words
    (`$(...)` and backticks, in quotes and `${...}` too): the reader does not go inside them, its caller
    reads them (bash.read_shell), so a command in `$(...)` is found when tree-sitter cannot read the script."""
    reader = _Reader(text, first_line)
    return reader.read(), reader.substitutions


class _Reader:
    def __init__(self, text: str, first_line: int) -> None:
        self.text = text
        self.pos = 0
        self.line = first_line
        self.built: list[_Building] = []
        self.current = _Building()
        # Heredocs whose delimiter has been read; their bodies start after the current line ends.
        self.pending: list[tuple[str, bool, bool, _Building]] = []
        self.substitutions: list[tuple[str, int]] = []  # (code, line) of each outermost `$(...)` / backtick
        self.cuts: list[tuple[int, int]] = []  # (start, end) of the substitutions the expansion read shows elided

    def read(self) -> list[Command]:
        text = self.text
        while self.pos < len(text):
            char = text[self.pos]
            if char == "\\" and text.startswith("\\\n", self.pos):
                self._advance(2)
            elif char in " \t\r":
                self._advance(1)
            elif char == "\n":
                self._advance(1)
                self._end_command()
                self._read_heredoc_bodies()
            elif char == "#":
                end = text.find("\n", self.pos)
                self._advance((len(text) if end < 0 else end) - self.pos)
            elif (char in "<>&" or char.isdigit()) and self._read_redirect():
                continue
            elif char in _OPERATOR_STARTS:
                op = next(o for o in _OPERATORS if text.startswith(o, self.pos))
                self._advance(len(op))
                self._end_command()
            else:
                line = self.line
                word = self._read_word()
                self._add_word(word, line)
        self._end_command()
        self._read_heredoc_bodies()
        return [_freeze(building) for building in self.built]

    # ------------------------------------------------------------------ building commands

    def _add_word(self, word: str, line: int) -> None:
        if self.current.empty():
            self.current.line = line
        name, eq, value = word.partition("=")
        if not self.current.words and eq and name.isidentifier():
            self.current.assignments.append((name, value))
        else:
            self.current.words.append(word)

    def _end_command(self) -> None:
        building = self.current
        if not building.empty():
            self.built.append(building)
        self.current = _Building()

    # ------------------------------------------------------------------ redirections and heredocs

    def _read_redirect(self) -> bool:
        text = self.text
        start = self.pos
        digits = start
        while digits < len(text) and text[digits].isdigit():
            digits += 1
        if digits > start and (digits >= len(text) or text[digits] not in "<>"):
            return False  # a word that starts with digits
        op = next((r for r in _REDIRECTS if text.startswith(r, digits)), None)
        if op is None:
            return False
        if self.current.empty():
            self.current.line = self.line
        self._advance(digits + len(op) - start)
        while self.pos < len(text) and text[self.pos] in " \t":
            self._advance(1)
        raw_start = self.pos
        target = self._read_word()
        raw = text[raw_start : self.pos]
        if op in ("<<", "<<-"):
            quoted = any(c in raw for c in "'\"\\")
            self.pending.append((target, quoted, op == "<<-", self.current))
        else:
            self.current.redirects.append(Redirect(op, target))
        return True

    def _read_heredoc_bodies(self) -> None:
        text = self.text
        for delimiter, quoted, strip_tabs, owner in self.pending:
            body: list[str] = []
            body_line = self.line
            while self.pos < len(text):
                end = text.find("\n", self.pos)
                end = len(text) if end < 0 else end
                raw = text[self.pos : end]
                self._advance(min(end + 1, len(text)) - self.pos)
                candidate = raw.lstrip("\t") if strip_tabs else raw
                if candidate.rstrip("\r") == delimiter:
                    break
                body.append(candidate)
            owner.heredocs.append(Heredoc(delimiter, quoted, tuple(body), body_line))
        self.pending = []

    # ------------------------------------------------------------------ words

    def _read_word(self) -> str:
        text = self.text
        out: list[str] = []
        while self.pos < len(text):
            char = text[self.pos]
            if char in _METACHARS:
                break
            if char == "\\":
                if text.startswith("\\\n", self.pos):
                    self._advance(2)
                    continue
                out.append(text[self.pos + 1 : self.pos + 2])
                self._advance(2)
            elif char == "'":
                end = text.find("'", self.pos + 1)
                end = len(text) if end < 0 else end
                out.append(text[self.pos + 1 : end])
                self._advance(end + 1 - self.pos)
            elif char == '"':
                out.append(self._read_double_quoted())
            elif (char == "$" and text.startswith(("$(", "${"), self.pos)) or char == "`":
                out.append(self._skip_expansion())
            else:
                # A run of plain characters at once: the common case, and no newline in it.
                plain = _PLAIN.match(text, self.pos)
                end = plain.end() if plain else self.pos + 1
                out.append(text[self.pos : end])
                self.pos = end
        return "".join(out)

    def _read_double_quoted(self) -> str:
        text = self.text
        self._advance(1)
        out: list[str] = []
        while self.pos < len(text) and text[self.pos] != '"':
            char = text[self.pos]
            if char == "\\" and self.pos + 1 < len(text):
                following = text[self.pos + 1]
                if following == "\n":
                    self._advance(2)
                    continue
                out.append(following if following in '"\\$`' else "\\" + following)
                self._advance(2)
            elif (char == "$" and text.startswith(("$(", "${"), self.pos)) or char == "`":
                out.append(self._skip_expansion())
            else:
                out.append(char)
                self._advance(1)
        self._advance(1)
        return "".join(out)

    def _skip_expansion(self) -> str:
        """Move past `$(...)`, `${...}` or a backtick command, with nesting and quotes inside, and return it as
        a word shows it. Iterative: a stack of what each open level waits for (its closer and its depth in its
        own brackets), so hostile nesting thousands deep is read, not a RecursionError. As in the tree-sitter
        reader, command substitutions nested deeper than SHOWN_DEPTH are shown as ELIDED (a word holds at
        most SHOWN_DEPTH levels: linear however deep) and the command is marked too deep."""
        text = self.text
        start = self.pos
        self.cuts = []
        # [closer, depth in its own brackets, commands substituted around it (itself included), where its code
        # starts, its line]
        stack: list[list[Any]] = []
        self._open(stack)
        while stack and self.pos < len(text):
            closer = stack[-1][0]
            char = text[self.pos]
            if char == "\\":
                self._advance(2)
            elif closer in '`"':
                if char == closer:
                    self._close(stack)
                    self._advance(1)
                elif closer == '"' and (text.startswith(("$(", "${"), self.pos) or char == "`"):
                    self._open(stack)
                else:
                    self._advance(1)
            elif char == "'" and closer == ")":
                end = text.find("'", self.pos + 1)
                self._advance((len(text) if end < 0 else end + 1) - self.pos)
            elif char == '"':
                stack.append(['"', 0, stack[-1][2], 0, 0])
                self._advance(1)
            elif text.startswith(("$(", "${"), self.pos) or char == "`":
                self._open(stack)
            else:
                if char == _OPENING[closer]:
                    stack[-1][1] += 1
                elif char == closer:
                    stack[-1][1] -= 1
                    if not stack[-1][1]:
                        self._close(stack)
                self._advance(1)
        return self._shown(start, self.pos)

    def _shown(self, start: int, end: int) -> str:
        """The text from `start` to `end` with each cut substitution (self.cuts, in order) shown as ELIDED."""
        parts: list[str] = []
        for cut_start, cut_end in self.cuts:
            parts += [self.text[start:cut_start], ELIDED]
            start = cut_end
        parts.append(self.text[start:end])
        return "".join(parts)

    def _open(self, stack: list[list[Any]]) -> None:
        """Enter the `$(`, `${` or backtick at the position: push what closes it and how many commands are
        substituted around it; past SHOWN_DEPTH the command being read is too deep."""
        around = stack[-1][2] if stack else 0
        if self.text[self.pos] == "`":
            self._advance(1)
            stack.append(["`", 0, around + 1, self.pos, self.line])
        else:
            closer = ")" if self.text[self.pos + 1] == "(" else "}"
            self._advance(2)
            stack.append([closer, 1, around + (closer == ")"), self.pos, self.line])
        if stack[-1][2] > SHOWN_DEPTH:
            self.current.too_deep = True

    def _close(self, stack: list[list[Any]]) -> None:
        """Leave the innermost level (at its closer); keep the code of an outermost command substitution."""
        closer, _, around, start, line = stack.pop()
        if closer in ")`" and around == 1:
            self.substitutions.append((self.text[start : self.pos], line))
        if closer in ")`" and around == SHOWN_DEPTH + 1:
            self.cuts.append((start - (2 if closer == ")" else 1), self.pos + 1))

    def _advance(self, count: int) -> None:
        count = max(count, 0)
        self.line += self.text.count("\n", self.pos, self.pos + count)
        self.pos += count


def _freeze(building: _Building) -> Command:
    return Command(
        tuple(building.words),
        tuple(building.assignments),
        tuple(building.redirects),
        tuple(building.heredocs),
        building.line,
        too_deep=building.too_deep,
    )


# Words that may precede the real command name and are not it.
_PREFIX_WORDS = frozenset({"if", "then", "else", "elif", "do", "while", "until", "!", "{", "time", "exec", "command",
                           "nohup", "builtin", "eval"})
_SUDO_VALUE_OPTIONS = frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"})


def argv_of(command: Command) -> tuple[int, tuple[str, ...]]:
    """The command's real argv, past `sudo`, `env A=b`, `time`, `if`, ... and the index of its first word."""
    words = command.words
    index = 0
    while index < len(words):
        word = words[index]
        if word in _PREFIX_WORDS:
            index += 1
        elif word == "sudo":
            index += 1
            while index < len(words) and words[index].startswith("-"):
                index += 2 if words[index] in _SUDO_VALUE_OPTIONS else 1
        elif word == "env":
            index += 1
            while index < len(words) and (words[index].startswith("-") or _is_assignment(words[index])):
                index += 1
        elif _is_assignment(word) and index > 0:
            index += 1
        else:
            break
    return index, words[index:]


def _is_assignment(word: str) -> bool:
    name, eq, _ = word.partition("=")
    return bool(eq) and name.isidentifier()


def program_name(word: str) -> str:
    """`/usr/bin/git` -> `git`; `python3.10` stays itself."""
    return word.rsplit("/", 1)[-1]
