"""A `sed -i` site's edit, done by patchkit itself: `patchkit new ID --from-site FILE:LINE --base-tree PRISTINE`.

The script is never run. The sed command the scan found is read as data (its words, as the shell passes them)
and converted to the subset of GNU sed whose meaning is exact: `s/RE/REPL/` and `s/RE/REPL/g` commands (any
delimiter, several in `-e` lists or separated by `;`), with no address, in basic or extended (`-E`, `-r`)
syntax. The regular expression is translated to Python's `re` on bytes; the file is edited line by line as sed
does (bytes kept: CR, a missing final newline, any encoding). Whatever could mean something else is refused,
naming the construct: other commands, addresses, flags other than `g`, back-references and `\\|` / `|`
(POSIX takes the longest alternative, Python the first), a repeated group, case conversion, and a
locale-dependent construct (`.`, a bracket, `\\w`) on a file with non-ASCII bytes.

A python-write site is converted only when its statement, as the scan reports it, writes back a chain of
`.replace(OLD, NEW)` with literal strings: `p.write_text(text.replace("a", "b"))` (or `write_bytes`), the
text being the file's own (read with `read_text()`, so a file with CR bytes or that is not UTF-8 is refused:
reading it as text would change it beyond the replacement).

The file the site edits is its engine path (as the scan shows it: `<site-packages>/vllm/a.py`, `<vllm>/a.py`,
`$ROOT/vllm/a.py`, `/opt/ATOM/atom/x.py`) placed under the pristine tree given; the diff from its bytes to
the edited bytes is made by git, as `--from-tree` makes one. Nothing here writes.
"""

from __future__ import annotations

import ast
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from patchkit.errors import BadInputError
from patchkit.input.tree import Snapshot
from patchkit.scan import PatchSite, ScanConfig
from patchkit.scan.shell import program_name
from patchkit.scan.sources import ScriptView, read_capped
from patchkit.tooling.forge import diff_snapshots

MAX_EDITED_BYTES = 16 * 1024 * 1024
FROM_TREE = "make the edit in a copy of the pristine tree and pass --from-tree EDITED --base-tree PRISTINE"
_EXPANSION = re.compile(r"\$[\w{(@*#?!$-]|`")
_PACKAGES_FOLDER = re.compile(r"/(?:site|dist)-packages/")
_REGEX_SPECIAL = b".[]*^$\\+?(){}|"
_CLASSES = {  # POSIX classes in the C locale
    b"alpha": b"a-zA-Z", b"digit": b"0-9", b"alnum": b"0-9A-Za-z", b"upper": b"A-Z", b"lower": b"a-z",
    b"space": b" \\t\\n\\r\\f\\v", b"blank": b" \\t", b"punct": b"!-/:-@\\[-`{-~", b"print": b" -~",
    b"graph": b"!-~", b"cntrl": b"\\x00-\\x1f\\x7f", b"xdigit": b"0-9A-Fa-f",
}
_ESCAPES = {ord("w"): rb"\w", ord("W"): rb"\W", ord("s"): rb"\s", ord("S"): rb"\S"}
_ASSERTIONS = {ord("b"): rb"\b", ord("B"): rb"\B", ord("<"): rb"\b(?=\w)", ord(">"): rb"\b(?<=\w)"}


class Unconvertible(Exception):
    """The site's edit is not one patchkit can do exactly; the message says which construct and why."""


@dataclass(frozen=True)
class Substitution:
    """One `s` command: the translated expression, the replacement (bytes, or a group number), `g`."""

    regex: re.Pattern[bytes]
    replacement: tuple[bytes | int, ...]
    every: bool  # the g flag: every match of the line, not only the first
    locale_dependent: bool  # its meaning differs between the C and a UTF-8 locale on non-ASCII bytes


@dataclass(frozen=True)
class SedEdit:
    substitutions: tuple[Substitution, ...]
    files: tuple[str, ...]  # the file operands, as the shell passes them


def read_sed(argv: tuple[str, ...]) -> SedEdit:
    """The edit of `sed -i [-E] [-e SCRIPT]... [SCRIPT] FILE...`; refuses any other option."""
    extended, in_place, scripts, operands = False, False, [], []
    words = iter(argv[1:])
    for word in words:
        if word in ("-e", "--expression"):
            scripts.append(next(words, ""))
        elif word.startswith("--expression="):
            scripts.append(word.split("=", 1)[1])
        elif word in ("--in-place", "--regexp-extended", "--"):
            in_place |= word == "--in-place"
            extended |= word == "--regexp-extended"
        elif word.startswith("-") and len(word) > 1:
            letters = word[1:]
            if "i" in letters and letters.index("i") != len(letters) - 1:
                raise Unconvertible(f"sed option {word!r} gives -i a backup suffix (a file patchkit would not "
                                    "make)")
            unknown = set(letters) - set("iEr")
            if unknown:
                raise Unconvertible(f"sed option {word!r}: only -i, -E / -r and -e are converted")
            in_place |= "i" in letters
            extended |= bool(set(letters) & set("Er"))
        else:
            operands.append(word)
    if not in_place:
        raise Unconvertible("the sed command does not edit in place (-i)")
    if not scripts:
        if not operands:
            raise Unconvertible("the sed command has no script")
        scripts.append(operands.pop(0))
    subs = tuple(s for script in scripts for s in parse_script(script, extended))
    return SedEdit(subs, tuple(operands))


def parse_script(script: str, extended: bool) -> list[Substitution]:
    """The `s` commands of one sed script; anything else is refused, naming it."""
    data = script.encode("utf-8", "surrogateescape")
    out: list[Substitution] = []
    index = 0
    while index < len(data):
        char = data[index : index + 1]
        if char in (b" ", b"\t", b"\n", b";"):
            index += 1
            continue
        if char != b"s":
            construct = "an address" if char in b"0123456789/$\\" else f"the command {char.decode(errors='replace')!r}"
            raise Unconvertible(f"the sed script {script!r} has {construct}: only `s/RE/REPL/` commands without an "
                                "address are converted")
        substitution, index = _read_s(data, index + 1, extended, script)
        out.append(substitution)
    return out


def _read_s(data: bytes, index: int, extended: bool, script: str) -> tuple[Substitution, int]:
    """One `s` command from just after its `s`: (the command, the index after its flags)."""
    delimiter = data[index : index + 1]
    if not delimiter or delimiter in b"\\\n&" or delimiter.isalnum():
        raise Unconvertible(f"the s command of {script!r} has a delimiter patchkit does not convert")
    pattern, index = _split(data, index + 1, delimiter, script, True)
    replacement, index = _split(data, index, delimiter, script, False)
    flags = re.match(rb"[^;\n}# \t]*", data[index:])
    assert flags is not None
    flag_text = flags.group(0)
    if flag_text not in (b"", b"g"):
        raise Unconvertible(f"the s command of {script!r} has the flags {flag_text.decode(errors='replace')!r}: "
                            "only g is converted")
    translated, groups, locale_dependent = translate(pattern, extended)
    try:
        regex = re.compile(translated)
    except re.error as exc:
        raise Unconvertible(f"the expression {pattern.decode(errors='replace')!r} does not translate ({exc})") from None
    substitution = Substitution(regex, _replacement(replacement, groups), flag_text == b"g", locale_dependent)
    return substitution, index + len(flag_text)


def _split(data: bytes, index: int, delimiter: bytes, script: str, is_pattern: bool) -> tuple[bytes, int]:
    """The text up to the next unescaped delimiter (`\\DELIM` becoming DELIM, as GNU sed reads it)."""
    out = bytearray()
    while index < len(data):
        char = data[index : index + 1]
        if char == delimiter:
            return bytes(out), index + 1
        if char == b"\n":
            raise Unconvertible(f"the s command of {script!r} holds a newline")
        if char == b"\\" and data[index + 1 : index + 2] == delimiter:
            if is_pattern and delimiter in _REGEX_SPECIAL:
                raise Unconvertible(f"the s command of {script!r} escapes its delimiter {delimiter.decode()!r}, "
                                    "which is also a regex operator (GNU sed versions read it differently)")
            out += delimiter
            index += 2
            continue
        if char == b"\\":
            out += data[index : index + 2]
            index += 2
            continue
        out += char
        index += 1
    raise Unconvertible(f"the s command of {script!r} is not terminated")


def translate(pattern: bytes, extended: bool) -> tuple[bytes, int, bool]:
    """A POSIX basic (or extended) expression as a Python one: (pattern, its groups, locale-dependent)."""
    if not pattern:
        raise Unconvertible("an empty expression (sed reuses the last one)")
    out: list[bytes] = []
    previous = "start"  # what the last token was: start, atom, group, repeat, assertion
    groups = depth = 0
    locale = False
    index = 0
    while index < len(pattern):
        byte = pattern[index]
        token, size, kind = _token(pattern, index, extended, previous)
        if kind == "repeat":
            if previous != "atom":
                what = "a repeated group" if previous == "group" else "a repetition here"
                raise Unconvertible(f"{what} in {_shown(pattern)} (POSIX's longest match may differ)")
            locale |= index > 0 and pattern[index - 1] >= 0x80
        elif kind == "open":
            groups, depth = groups + 1, depth + 1
        elif kind == "group":
            if depth == 0:
                raise Unconvertible(f"an unmatched ) in {_shown(pattern)}")
            depth -= 1
        locale |= kind == "atom" and (byte in b".[" or token in (rb"\w", rb"\W", rb"\s", rb"\S"))
        locale |= kind == "assertion" and token.startswith(b"\\b")
        out.append(token)
        previous = "start" if kind in ("open", "anchor") else kind
        index += size
    if depth:
        raise Unconvertible(f"an unmatched ( in {_shown(pattern)}")
    return b"".join(out), groups, locale


def _shown(pattern: bytes) -> str:
    return repr(pattern.decode("utf-8", errors="replace"))


def _token(pattern: bytes, index: int, extended: bool, previous: str) -> tuple[bytes, int, str]:
    """The Python text of the token at `index`, its length in the pattern and its kind."""
    char = pattern[index : index + 1]
    if char == b"\\":
        return _escaped(pattern, index, extended)
    if char == b"[":
        return _bracket(pattern, index)
    if char == b".":
        return b".", 1, "atom"
    if char == b"*":
        if previous == "start" and not extended:
            return rb"\*", 1, "atom"  # literal at the start of a basic expression
        return b"*", 1, "repeat"
    if char == b"^":
        if extended or previous == "start":
            return rb"\A", 1, "anchor"
        return rb"\^", 1, "atom"
    if char == b"$":
        if extended or index + 1 == len(pattern) or pattern[index + 1 : index + 3] == b"\\)":
            return rb"\Z", 1, "assertion"
        return rb"\$", 1, "atom"
    if extended and char in b"()|+?{}":
        return _operator(pattern, index, char)
    return re.escape(char), 1, "atom"


def _operator(pattern: bytes, index: int, char: bytes) -> tuple[bytes, int, str]:
    """An extended expression's ( ) | + ? {m,n}."""
    if char == b"(":
        return b"(", 1, "open"
    if char == b")":
        return b")", 1, "group"
    if char == b"|":
        raise Unconvertible(f"an alternative (|) in {_shown(pattern)}: POSIX takes the longest, Python the first")
    if char in b"+?":
        return char, 1, "repeat"
    found = re.match(rb"\{(\d*)(,?)(\d*)\}", pattern[index:])
    if found is None or char == b"}":
        raise Unconvertible(f"a {char.decode()} that is not an interval in {_shown(pattern)}")
    return _interval(found), len(found.group(0)), "repeat"


def _interval(found: re.Match[bytes]) -> bytes:
    low, comma, high = found.group(1), found.group(2), found.group(3)
    if not low and not high:
        raise Unconvertible(f"the interval {found.group(0).decode()} has no bound")
    if low and high and int(low) > int(high):
        raise Unconvertible(f"the interval {found.group(0).decode()} is empty")
    return b"{" + (low or b"0") + comma + high + b"}"


def _escaped(pattern: bytes, index: int, extended: bool) -> tuple[bytes, int, str]:
    """A backslash and what follows it."""
    following = pattern[index + 1 : index + 2]
    if not following:
        raise Unconvertible(f"a trailing backslash in {_shown(pattern)}")
    code = following[0]
    if not extended and following in b"(){|+?":
        if following == b"{":
            found = re.match(rb"\\\{(\d*)(,?)(\d*)\\\}", pattern[index:])
            if found is None:
                raise Unconvertible(f"a \\{{ that is not an interval in {_shown(pattern)}")
            return _interval(found), len(found.group(0)), "repeat"
        if following == b"|":
            raise Unconvertible(f"an alternative (\\|) in {_shown(pattern)}: POSIX takes the longest, Python the "
                                "first")
        kinds = {b"(": (b"(", "open"), b")": (b")", "group"), b"+": (b"+", "repeat"), b"?": (b"?", "repeat")}
        token, kind = kinds[following]
        return token, 2, kind
    if code in _ESCAPES:
        return _ESCAPES[code], 2, "atom"
    if code in _ASSERTIONS:
        return _ASSERTIONS[code], 2, "assertion"
    if following == b"n":
        return b"\n", 2, "atom"
    if following == b"t":
        return b"\t", 2, "atom"
    if following.isdigit():
        raise Unconvertible(f"a back-reference \\{following.decode()} in {_shown(pattern)}")
    if following.isalnum() or code >= 0x80 or following in b"}'`":
        raise Unconvertible(f"the escape \\{following.decode(errors='replace')} in {_shown(pattern)}")
    return re.escape(following), 2, "atom"


def _bracket(pattern: bytes, index: int) -> tuple[bytes, int, str]:
    """A bracket expression `[...]` (classes of the C locale; no collating symbols or equivalence classes)."""
    start = index
    index += 1
    negated = pattern[index : index + 1] == b"^"
    index += negated
    items: list[bytes] = []
    first = True
    while index < len(pattern):
        char = pattern[index : index + 1]
        if char == b"]" and not first:
            body = b"".join(items)
            return b"[" + (b"^" if negated else b"") + body + b"]", index + 1 - start, "atom"
        first = False
        if pattern[index : index + 2] in (b"[=", b"[."):
            raise Unconvertible(f"a collating element or equivalence class in {_shown(pattern)}")
        if pattern[index : index + 2] == b"[:":
            end = pattern.find(b":]", index + 2)
            name = pattern[index + 2 : end] if end > 0 else b""
            if name not in _CLASSES:
                raise Unconvertible(f"the class [:{name.decode(errors='replace')}:] in {_shown(pattern)}")
            items.append(_CLASSES[name])
            index = end + 2
            continue
        if char == b"\\":
            raise Unconvertible(f"a backslash in a bracket expression of {_shown(pattern)} (GNU sed reads some "
                                "escapes there)")
        if char[0] >= 0x80:
            raise Unconvertible(f"a non-ASCII byte in a bracket expression of {_shown(pattern)} (locale-dependent)")
        high = pattern[index + 2 : index + 3]
        if pattern[index + 1 : index + 2] == b"-" and high not in (b"", b"]"):
            if high[0] >= 0x80 or high < char or high == b"[":
                raise Unconvertible(f"the range {char.decode()}-{high.decode(errors='replace')} in "
                                    f"{_shown(pattern)}")
            items.append(re.escape(char) + b"-" + re.escape(high))
            index += 3
            continue
        items.append(re.escape(char))
        index += 1
    raise Unconvertible(f"an unterminated [ in {_shown(pattern)}")


def _replacement(text: bytes, groups: int) -> tuple[bytes | int, ...]:
    """The replacement's parts: literal bytes, or the number of the group (0: the match, `&`) put there."""
    parts: list[bytes | int] = []
    index = 0
    while index < len(text):
        char = text[index : index + 1]
        if char == b"&":
            parts.append(0)
        elif char == b"\\":
            following = text[index + 1 : index + 2]
            if following.isdigit():
                if int(following) > groups:
                    raise Unconvertible(f"the replacement refers to group \\{following.decode()}, which the "
                                        "expression does not have")
                parts.append(int(following))
            elif following in (b"n", b"t"):
                parts.append(b"\n" if following == b"n" else b"\t")
            elif not following or following.isalnum() or following[0] >= 0x80:
                raise Unconvertible(f"the escape \\{following.decode(errors='replace')} in a replacement "
                                    "(case conversion and control escapes are not converted)")
            else:
                parts.append(following)
            index += 1
        else:
            parts.append(char)
        index += 1
    return tuple(parts)


def run_sed(edit: SedEdit, data: bytes, where: str) -> bytes:
    """The bytes `sed -i` leaves in a file that held `data` (line by line; the last line may lack its newline)."""
    if any(s.locale_dependent for s in edit.substitutions) and any(b >= 0x80 for b in data):
        raise Unconvertible(f"{where} holds non-ASCII bytes, and the expression's `.`, bracket or \\w means "
                            "something else in a UTF-8 locale than in the C locale")
    if not data:
        return data
    lines = data.split(b"\n")
    ending = lines.pop() if data.endswith(b"\n") else None  # after the last newline: not a line
    for number, line in enumerate(lines):
        for substitution in edit.substitutions:
            line = _substitute(substitution, line)
        lines[number] = line
    return b"\n".join(lines if ending is None else [*lines, ending])


def _substitute(substitution: Substitution, line: bytes) -> bytes:
    """One `s` on one line, with sed's rule for empty matches: none right after the previous match."""
    out: list[bytes] = []
    position, last_end = 0, -1
    while position <= len(line):
        found = substitution.regex.search(line, position)
        if found is None:
            break
        start, end = found.span()
        if start == end == last_end:  # an empty match where the previous one ended: sed moves on one byte
            if start >= len(line):
                break
            out.append(line[position : start + 1])
            position = start + 1
            continue
        out.append(line[position:start])
        out.append(b"".join(p if isinstance(p, bytes) else (found.group(p) or b"") for p in substitution.replacement))
        last_end = position = end
        if not substitution.every:
            break
        if start == end:
            out.append(line[end : end + 1])
            position = end + 1
    out.append(line[position:])
    return b"".join(out)


def sed_site_diff(
    site: PatchSite, view: ScriptView, text: str, base: Path, config: ScanConfig, where: str
) -> bytes:
    """The diff of the `sed -i` at the site's line, done on the file it edits under `base`; refuses, saying
    why, an edit patchkit cannot do exactly."""
    argv = _sed_argv(site, view, where)
    try:
        edit = read_sed(argv)
        _literal_scripts(tuple(w for w in argv[1:] if w not in edit.files), text, site.line)
    except Unconvertible as exc:
        raise BadInputError(f"cannot convert this sed -i: {exc}", where=where, hint=FROM_TREE) from None
    if len(edit.files) != 1:
        raise BadInputError(f"the sed -i edits {len(edit.files)} files: patchkit converts an edit of one",
                            where=where, hint=FROM_TREE)
    relative, before = _base_file(site, base, config, where)
    try:
        edited = run_sed(edit, before.data or b"", f"{base / relative}")
    except Unconvertible as exc:
        raise BadInputError(f"cannot convert this sed -i: {exc}", where=where, hint=FROM_TREE) from None
    if edited == before.data:
        raise BadInputError(
            f"the sed -i changes nothing in {base / relative}: its expressions match nothing there",
            where=where, hint="pass as --base-tree the pristine tree the script edits (not one it has edited)",
        )
    return diff_snapshots({relative: before}, {relative: Snapshot(relative, edited, before.mode)})


def _sed_argv(site: PatchSite, view: ScriptView, where: str) -> tuple[str, ...]:
    """The words of the sed command at the site's line, as the shell passes them."""
    for command, _, argv in view.runnable:
        if command.line == site.line and program_name(argv[0]) == "sed":
            return argv
    raise BadInputError(
        f"the {site.kind.label} site is not a plain `sed -i` command (patchkit converts only that; under find "
        "or xargs the files are known when it runs)", where=where, hint=FROM_TREE,
    )


def _literal_scripts(words: tuple[str, ...], text: str, line: int) -> None:
    """Refuse a sed word holding `$NAME` or a backtick unless it is single-quoted on the command's lines: the
    shell expands it, so the text is not what sed was given."""
    near = "\n".join(text.split("\n")[line - 1 : line + 20])
    for word in words:
        if _EXPANSION.search(word) and f"'{word}'" not in near:
            raise Unconvertible(f"the word {word!r} holds a shell expansion: sed is given what the shell makes "
                                "of it, not this text")


def _base_file(site: PatchSite, base: Path, config: ScanConfig, where: str) -> tuple[str, Snapshot]:
    """The file the site edits, under the pristine tree: (its path there, its bytes and mode)."""
    shown = site.engine_path
    candidates = engine_relative(shown, config) if shown else []
    if not candidates:
        raise BadInputError(
            f"cannot place the file the site edits ({shown or 'a path the scan could not name'}) under a base tree",
            where=where, hint=FROM_TREE,
        )
    found = [c for c in candidates if _regular_inside(base, c)]
    if not found:
        looked = " or ".join(candidates)
        raise BadInputError(
            f"the site edits {shown}, which is {looked} under --base-tree {base}: there is no such file",
            where=where, hint=f"pass as --base-tree the pristine folder that holds {candidates[0]}",
        )
    relative = found[0]
    try:
        data = read_capped(base / relative, MAX_EDITED_BYTES)
        mode = stat.S_IMODE(os.lstat(base / relative).st_mode)
    except OSError as exc:
        raise BadInputError(f"cannot read the file: {exc.strerror or exc}", where=str(base / relative)) from None
    if data is None:
        raise BadInputError(f"the file is larger than {MAX_EDITED_BYTES} bytes", where=str(base / relative))
    return relative, Snapshot(relative, data, mode)


def engine_relative(shown: str, config: ScanConfig) -> list[str]:
    """Where an engine path, as the scan shows it, may be under a base tree (most likely first); [] when it
    cannot be told. `<vllm>/a.py` is `vllm/a.py` in a site-packages tree, `a.py` in the package's own."""
    found = re.fullmatch(r"<([^>/]+)>/(.+)", shown)
    if found:
        name, rest = found.groups()
        if name in ("site-packages", "dist-packages"):
            return _clean([rest])
        return _clean([f"{name.replace('-', '_')}/{rest}", rest])
    found = re.fullmatch(r"\$\{?\w+\}?/(.+)", shown)
    if found:
        return _clean([found.group(1)])
    if shown.startswith("/"):
        roots = [r.rstrip("/") + "/" for r in config.engine_roots if r.startswith("/")]
        rests = [shown[len(r):] for r in roots if shown.startswith(r)]
        rests += [_PACKAGES_FOLDER.split(shown)[-1]] if _PACKAGES_FOLDER.search(shown) else []
        return _clean(rests)
    return []


def _clean(paths: list[str]) -> list[str]:
    """The relative paths without `.`, `..` or an empty part (a shown path is the script's text)."""
    out = []
    for path in paths:
        parts = PurePosixPath(path).parts
        if parts and not any(p in ("..", ".", "") for p in parts) and not path.startswith("/"):
            out.append(path)
    return list(dict.fromkeys(out))


def _regular_inside(base: Path, relative: str) -> bool:
    """`relative` is a regular file of `base`, reached without a link."""
    folder = base
    for part in PurePosixPath(relative).parts[:-1]:
        folder = folder / part
        if folder.is_symlink() or not folder.is_dir():
            return False
    target = base / relative
    return target.is_file() and not target.is_symlink()


@dataclass(frozen=True)
class Replacement:
    old: bytes
    new: bytes
    count: int  # -1: every occurrence


def python_site_diff(site: PatchSite, base: Path, config: ScanConfig, where: str) -> bytes:
    """The diff of a python-write site that writes back literal `.replace(OLD, NEW)`s of the file's text."""
    try:
        as_text, replacements = read_replacements(site.command)
    except Unconvertible as exc:
        raise BadInputError(f"cannot convert this python-write: {exc}", where=where, hint=FROM_TREE) from None
    relative, before = _base_file(site, base, config, where)
    data = before.data or b""
    if as_text and (b"\r" in data or not _is_utf8(data)):
        raise BadInputError(
            f"the python-write reads {base / relative} as text, which would change its CR bytes or its encoding "
            "beyond the replacement", where=where, hint=FROM_TREE,
        )
    edited = data
    for replacement in replacements:
        edited = edited.replace(replacement.old, replacement.new, replacement.count)
    if edited == data:
        raise BadInputError(
            f"the python-write changes nothing in {base / relative}: the text it replaces is not there",
            where=where, hint="pass as --base-tree the pristine tree the script edits (not one it has edited)",
        )
    return diff_snapshots({relative: before}, {relative: Snapshot(relative, edited, before.mode)})


def read_replacements(statement: str) -> tuple[bool, tuple[Replacement, ...]]:
    """(read as text, the replacements in order) of `X.write_text(Y.replace(A, B)...)` / `write_bytes`."""
    reason = ("the statement does not write back literal replacements (patchkit converts "
              f"`path.write_text(text.replace('old', 'new'))`): `{statement}`")
    try:
        node = ast.parse(statement, mode="eval").body
    except SyntaxError:
        raise Unconvertible(reason) from None
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and len(node.args) == 1
            and node.func.attr in ("write_text", "write_bytes") and not node.keywords):
        raise Unconvertible(reason)
    as_text = node.func.attr == "write_text"
    chain: list[Replacement] = []
    value = node.args[0]
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "replace":
        chain.append(_literal_replacement(value, as_text, reason))
        value = value.func.value
    if not chain or not isinstance(value, ast.Name):
        raise Unconvertible(reason)
    return as_text, tuple(reversed(chain))


def _literal_replacement(call: ast.Call, as_text: bool, reason: str) -> Replacement:
    """One `.replace(OLD, NEW[, COUNT])` of literals of the write's type (str for write_text)."""
    kind = str if as_text else bytes
    values = [a.value if isinstance(a, ast.Constant) else None for a in call.args]
    if call.keywords or len(values) not in (2, 3) or not all(isinstance(v, kind) for v in values[:2]):
        raise Unconvertible(reason)
    count = values[2] if len(values) == 3 else -1
    if not isinstance(count, int) or isinstance(count, bool):
        raise Unconvertible(reason)
    old, new = (v.encode("utf-8", "surrogateescape") if isinstance(v, str) else v for v in values[:2])
    assert isinstance(old, bytes) and isinstance(new, bytes)
    return Replacement(old, new, count)


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
