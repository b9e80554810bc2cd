"""The diff a patch site of the consuming repository applies: `patchkit new ID --from-site FILE:LINE`.

The site is the scan's own record (patchkit.scan: kind, file, line, and for a heredoc diff the sha256 of its
body), so `--from-site` takes exactly what `patchkit lint` reports. For a heredoc diff (or a Python string that
is a diff) the body is read back from the file's bytes and taken only when its digest is the one the scan
recorded; for a `git apply` / `patch` line, the diff file it names is read (relative to the script's folder,
then to the project). A heredoc whose delimiter is unquoted is refused when its body holds `$`, a backtick or
a backslash: the shell expands those, so the text is not what the script applied. A `git apply "$3"` in a
function reads the file every call of the function passes. A `sed -i` or python-write site carries no diff:
with the pristine base tree, patchkit.tooling.siteedit does its edit on a copy of the file and git makes the
diff, as --from-tree does. Nothing here writes.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from patchkit.errors import BadInputError
from patchkit.scan import PatchSite, ScanConfig, SiteKind, scan_files
from patchkit.scan.shell import program_name
from patchkit.scan.sources import ScriptView, language_of, read_view
from patchkit.tooling.siteedit import FROM_TREE, python_site_diff, sed_site_diff

_SITE_DIGEST = re.compile(r"\[diff sha256:([0-9a-f]{16})\]")
_HEREDOC = re.compile(r"(?<![<\w])<<(?!<)(-?)[ \t]*(?:'([^'\n]*)'|\"([^\"\n]*)\"|\\?([^\s;&|<>()'\"]+))")
_DIFF_NAME = re.compile(r"\.(?:diff|patch)$")
_STRIP = re.compile(r"^(?:-p|--strip=)(\d+)$")
_ARGUMENT = re.compile(r"\$\{?([1-9])\}?")
DIFF_KINDS = (SiteKind.HEREDOC_DIFF, SiteKind.GIT_APPLY, SiteKind.PATCH)


@dataclass(frozen=True)
class SiteDiff:
    site: PatchSite
    data: bytes
    strip: int  # the -pN the script applies it with (1 unless it says otherwise)
    diff_file: str | None  # project-relative path of the diff file a git apply / patch line names
    patched_root: str | None = None  # the folder the line's git apply / patch runs in, as the script names it


def parse_site_arg(text: str) -> tuple[str, int]:
    """`FILE:LINE` (as lint prints a site) -> (FILE, LINE)."""
    path, sep, line = text.rpartition(":")
    if not sep or not path or not line.isdigit() or int(line) < 1:
        raise BadInputError(
            f"--from-site {text!r} must be FILE:LINE, the place `patchkit lint` reports for the site",
            hint="for example: --from-site docker/patch_engine.sh:42",
        )
    return path, int(line)


def read_site_diff(
    project_root: Path, script: Path, line: int, config: ScanConfig, base_tree: Path | None = None
) -> SiteDiff:
    """The diff the patch site at `script`:`line` applies, or (a `sed -i` site, with the pristine `base_tree`)
    the diff of its edit done by patchkit on a copy; refuses a site that yields none, saying why."""
    root = project_root.resolve()
    full = script if script.is_absolute() else Path.cwd() / script
    try:
        rel = PurePosixPath(full.resolve().relative_to(root).as_posix()).as_posix()
    except ValueError:
        raise BadInputError("the script is outside the project", where=str(script),
                            hint=f"--from-site takes a file of the project at {root}") from None
    try:
        data = (root / rel).read_bytes()
    except OSError as exc:
        raise BadInputError(f"cannot read the script: {exc.strerror}", where=str(script)) from None
    every = scan_files([(rel, data)], config).sites
    where = f"{script}:{line}"
    here = [s for s in every if s.line == line and s.kind in DIFF_KINDS]
    if not here:
        edits = [s for s in every if s.line == line]
        if not edits:
            raise BadInputError(f"no heredoc diff, `git apply`, `patch`, `sed -i` or python-write site at line {line}",
                                where=where, hint=_sites_hint(rel, every, line))
        convertible = (SiteKind.IN_PLACE_EDIT, SiteKind.PYTHON_WRITE)
        return _edited(root, rel, data, next((s for s in edits if s.kind in convertible), edits[0]), config,
                       base_tree, where)
    site = next((s for s in here if s.kind is SiteKind.HEREDOC_DIFF), here[0])
    strip = _strip_of(site.command)
    # a heredoc's own site names the file it patches; the command reading it (git apply, patch) the folder
    runs_in = next((s.engine_path for s in here if s.kind is not SiteKind.HEREDOC_DIFF and s.engine_path), None)
    if site.kind is SiteKind.HEREDOC_DIFF:
        return SiteDiff(site, _heredoc_body(data, site, where), strip, None, runs_in)
    found = _diff_file(root, rel, site, where, _view(rel, data, config))
    try:
        body = (root / found).read_bytes()
    except OSError as exc:
        raise BadInputError(f"cannot read the diff: {exc.strerror}", where=found) from None
    return SiteDiff(site, body, strip, found, runs_in)


def _sites_hint(rel: str, sites: tuple[PatchSite, ...], line: int) -> str:
    """Every site of the script, the nearest to `line` first (up to 8, shown in line order)."""
    near = sorted(sorted(sites, key=lambda s: abs(s.line - line))[:8], key=lambda s: s.line)
    listed = ", ".join(dict.fromkeys(f"{s.line} ({s.kind.label})" for s in near)) or "none"
    return f"the scan finds these in {rel}: {listed}; pass one of them as FILE:LINE"


def _view(rel: str, data: bytes, config: ScanConfig) -> ScriptView | None:
    """The scan's reading of the script (its commands with their words), as scan_files reads it."""
    text = data.decode("utf-8", errors="replace")
    language = language_of(rel, text)
    return None if language is None else read_view(rel, text, language, config)


def _edited(
    root: Path, rel: str, data: bytes, site: PatchSite, config: ScanConfig, base_tree: Path | None, where: str
) -> SiteDiff:
    """A site that carries no diff: a `sed -i` or a literal python-write is converted (patchkit does its edit on
    the base tree's file); any other kind is refused, saying why."""
    if site.kind not in (SiteKind.IN_PLACE_EDIT, SiteKind.PYTHON_WRITE):
        raise BadInputError(
            f"the {site.kind.label} site at line {site.line} carries no diff, and patchkit converts only a sed -i "
            f"or a literal python-write edit (it never runs the script's code): `{site.command}`", where=where,
            hint=FROM_TREE,
        )
    shown = "a sed -i" if site.kind is SiteKind.IN_PLACE_EDIT else "a python-write"
    if base_tree is None:
        raise BadInputError(
            f"the site at line {site.line} is {shown} edit, not a diff: patchkit can do its edit on a copy of "
            "the file it edits", where=where,
            hint="pass --base-tree PRISTINE (the tree the script edits) to run the site's edit on a copy",
        )
    base = Path(os.path.abspath(base_tree))
    if site.kind is SiteKind.PYTHON_WRITE:
        return SiteDiff(site, python_site_diff(site, base, config, where), 1, None, None)
    view = _view(rel, data, config)
    assert view is not None  # the scan found a site in it
    text = data.decode("utf-8", errors="replace")
    return SiteDiff(site, sed_site_diff(site, view, text, base, config, where), 1, None, None)


def _strip_of(command: str) -> int:
    words = command.split()
    for index, word in enumerate(words):
        found = _STRIP.match(word)
        if found:
            return int(found.group(1))
        if word == "-p" and index + 1 < len(words) and words[index + 1].isdigit():
            return int(words[index + 1])
    return 1


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def _heredoc_body(data: bytes, site: PatchSite, where: str) -> bytes:
    """The body (heredoc, or Python string) whose digest is the one the scan recorded for this site."""
    wanted = _SITE_DIGEST.search(site.command)
    if wanted is None:
        raise BadInputError("the scan recorded no digest for this heredoc diff", where=where,
                            hint="save the diff to a file and pass --from FILE")
    lines = data.split(b"\n")
    heredocs = list(_heredocs(lines))
    matches: list[tuple[int, bytes, bool]] = []
    for start, body, quoted in heredocs:
        if _digest(_text(body)) == wanted.group(1):
            matches.append((start, body, quoted))
    if not matches:
        for code in [data, *(body for _, body, _ in heredocs)]:  # the scan digests a Python string as it is
            matches += [(0, s, True) for s in _python_strings(code)
                        if _digest(s.decode("utf-8", errors="replace")) == wanted.group(1)]
    if not matches:
        raise BadInputError(
            "cannot read back the diff the scan found here (its text differs from what the scan read)",
            where=where, hint="save the diff to a file and pass --from FILE",
        )
    start, body, quoted = min(matches, key=lambda m: abs(m[0] - site.line))
    if not quoted and re.search(rb"[$`\\]", body):
        raise BadInputError(
            "the heredoc's delimiter is unquoted, so the shell expands $, ` and \\ in its body: the diff the "
            "script applied is not this text", where=where,
            hint="quote the delimiter (<<'EOF') if the body is literal, or save the diff the script feeds to "
            "patch and pass --from FILE",
        )
    return body if body.endswith(b"\n") else body + b"\n"


def _text(body: bytes) -> str:
    # The scan joins the body's lines with "\n" and has no final newline; it reads files as UTF-8, replacing.
    return body[:-1].decode("utf-8", errors="replace") if body.endswith(b"\n") else body.decode(
        "utf-8", errors="replace")


def _heredocs(lines: list[bytes]) -> list[tuple[int, bytes, bool]]:
    """(line of the operator, body with a final newline, delimiter quoted) of every heredoc of a shell file."""
    out: list[tuple[int, bytes, bool]] = []
    index = 0
    while index < len(lines):
        text = lines[index].decode("utf-8", errors="replace")
        operators = [m for m in _HEREDOC.finditer(text) if not text[: m.start()].lstrip().startswith("#")]
        first = index + 1
        while text.rstrip("\r").endswith("\\") and index + 1 < len(lines):  # a continued command
            index += 1
            text = lines[index].decode("utf-8", errors="replace")
            operators += list(_HEREDOC.finditer(text))
        index += 1
        for found in operators:
            strip_tabs = found.group(1) == "-"
            delimiter = next(g for g in found.groups()[1:] if g is not None)
            quoted = found.group(4) is None or found.group(0).count("\\") > 0
            body: list[bytes] = []
            while index < len(lines):
                raw = lines[index]
                index += 1
                candidate = raw.lstrip(b"\t") if strip_tabs else raw
                if candidate.rstrip(b"\r").decode("utf-8", errors="replace") == delimiter:
                    break
                body.append(candidate)
            out.append((first, b"\n".join(body) + b"\n", quoted))
    return out


def _python_strings(code: bytes) -> list[bytes]:
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError):
        return []
    return [
        node.value.encode("utf-8", "surrogateescape")
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]


def _diff_file(root: Path, script: str, site: PatchSite, where: str, view: ScriptView | None) -> str:
    """The project-relative diff file a `git apply` / `patch` command names (a function's positional argument
    when every call of the function in the script passes the same literal path)."""
    words = site.command.split()
    named = [w for i, w in enumerate(words) if _DIFF_NAME.search(w) and not w.startswith("-")]
    named += [w.split("=", 1)[1] for w in words if w.startswith("--input=")]
    named += [words[i + 1] for i, w in enumerate(words[:-1]) if w in ("-i", "<")]
    named += [w for w in words[2:] if _ARGUMENT.fullmatch(w)]  # `git apply "$3"` in a function
    named = list(dict.fromkeys(named))
    if not named:
        raise BadInputError(f"the {site.kind.label} line names no diff file", where=where,
                            hint="pass the diff it applies with --from FILE")
    word = named[-1]
    argument = _ARGUMENT.fullmatch(word)
    if argument is not None:
        word = _argument_of(view, site, int(argument.group(1)), word, where)
    if "$" in word or "`" in word:
        raise BadInputError(
            f"the diff file {word!r} is computed by the script (a variable or command): it cannot be read here",
            where=where, hint="pass the file it names with --from FILE",
        )
    folder = PurePosixPath(script).parent
    for candidate in (folder / word, PurePosixPath(word)):
        if PurePosixPath(word).is_absolute():
            break
        try:
            inside = (root / candidate).resolve().relative_to(root)
        except ValueError:
            continue
        if (root / inside).is_file():
            return inside.as_posix()
    raise BadInputError(
        f"the diff file {word!r} is not a file of the project (looked next to {script} and at the project root)",
        where=where, hint="pass the file it names with --from FILE",
    )


def _argument_of(view: ScriptView | None, site: PatchSite, number: int, word: str, where: str) -> str:
    """The literal path every call of the function holding the site passes as its argument `number`."""
    scope = next((c.scope for c, _, _ in (view.runnable if view else ()) if c.line == site.line and c.scope), "")
    if not scope:
        raise BadInputError(f"the diff file is the script's argument {word}: pass it with --from FILE",
                            where=where, hint="pass the diff the script is given with --from FILE")
    calls = [(c.line, argv[number] if len(argv) > number else "")
             for c, _, argv in (view.runnable if view else ()) if program_name(argv[0]) == scope]
    literal = {value for _, value in calls if value and "$" not in value and "`" not in value}
    if len(literal) == 1 and len(literal) == len({value for _, value in calls}):
        return literal.pop()
    shown = ", ".join(f"{value or 'nothing'} at line {at}" for at, value in calls) or "no call in this script"
    raise BadInputError(
        f"the diff file is the function's argument {word}: pass it with --from FILE ({scope} is given "
        f"{shown})", where=where, hint="pass the diff file with --from FILE in place of --from-site",
    )
