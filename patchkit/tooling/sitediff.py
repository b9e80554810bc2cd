"""The diff a patch site of the consuming repository applies: `patchkit new ID --from-site FILE:LINE`.

The site is the scan's own record (patchkit.scan: kind, file, line, and for a heredoc diff the sha256 of its
body), so `--from-site` takes exactly what `patchkit lint` reports. For a heredoc diff (or a Python string that
is a diff) the body is read back from the file's bytes and taken only when its digest is the one the scan
recorded; for a `git apply` / `patch` line, the diff file it names is read (relative to the script's folder,
then to the project). A heredoc whose delimiter is unquoted is refused when its body holds `$`, a backtick or
a backslash: the shell expands those, so the text is not what the script applied. Nothing here writes.
"""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from patchkit.errors import BadInputError
from patchkit.scan import PatchSite, ScanConfig, SiteKind, scan_files

_SITE_DIGEST = re.compile(r"\[diff sha256:([0-9a-f]{16})\]")
_HEREDOC = re.compile(r"(?<![<\w])<<(?!<)(-?)[ \t]*(?:'([^'\n]*)'|\"([^\"\n]*)\"|\\?([^\s;&|<>()'\"]+))")
_DIFF_NAME = re.compile(r"\.(?:diff|patch)$")
_STRIP = re.compile(r"^(?:-p|--strip=)(\d+)$")
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


def read_site_diff(project_root: Path, script: Path, line: int, config: ScanConfig) -> SiteDiff:
    """The diff the patch site at `script`:`line` applies; refuses a site that carries none."""
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
    sites = [s for s in scan_files([(rel, data)], config).sites if s.kind in DIFF_KINDS]
    here = [s for s in sites if s.line == line]
    if not here:
        listed = ", ".join(f"{s.line} ({s.kind.label})" for s in sites[:8]) or "none"
        raise BadInputError(
            f"no heredoc diff, `git apply` or `patch` site at line {line}", where=f"{script}:{line}",
            hint=f"the scan finds these in {rel}: {listed}; pass one of them as FILE:LINE",
        )
    site = next((s for s in here if s.kind is SiteKind.HEREDOC_DIFF), here[0])
    strip = _strip_of(site.command)
    # a heredoc's own site names the file it patches; the command reading it (git apply, patch) the folder
    runs_in = next((s.engine_path for s in here if s.kind is not SiteKind.HEREDOC_DIFF and s.engine_path), None)
    if site.kind is SiteKind.HEREDOC_DIFF:
        return SiteDiff(site, _heredoc_body(data, site, f"{script}:{line}"), strip, None, runs_in)
    found = _diff_file(root, rel, site, f"{script}:{line}")
    try:
        body = (root / found).read_bytes()
    except OSError as exc:
        raise BadInputError(f"cannot read the diff: {exc.strerror}", where=found) from None
    return SiteDiff(site, body, strip, found, runs_in)


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


def _diff_file(root: Path, script: str, site: PatchSite, where: str) -> str:
    """The project-relative diff file a `git apply` / `patch` command names."""
    words = site.command.split()
    named = [w for i, w in enumerate(words) if _DIFF_NAME.search(w) and not w.startswith("-")]
    named += [w.split("=", 1)[1] for w in words if w.startswith("--input=")]
    named += [words[i + 1] for i, w in enumerate(words[:-1]) if w in ("-i", "<")]
    named = list(dict.fromkeys(named))
    if not named:
        raise BadInputError(f"the {site.kind.label} line names no diff file", where=where,
                            hint="pass the diff it applies with --from FILE")
    word = named[-1]
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
