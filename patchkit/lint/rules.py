"""The static lint rules: independent functions from a LintInput to findings.

Each rule looks at one thing and says how to fix it; none depends on another having run. Rules about what a
pull request changed live in history.py because they need git.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

from patchkit.errors import PatchkitError
from patchkit.lint.findings import Finding, Rule, split_where
from patchkit.lint.inputs import LintInput, WaiverFile
from patchkit.lint.waivers import Topic, WaiverDoc
from patchkit.manifest import PatchSpec, Upstream, line_of_key

RuleCheck = Callable[[LintInput], Iterator[Finding]]

_TOPIC_FIX = {
    Topic.WHAT: "say which files and behaviour the patch changes, and which files it leaves out",
    Topic.WHY: "say why the unmodified upstream image cannot run without the patch",
    Topic.LINK: "link the upstream PR or issue",
    Topic.REMOVAL: "say when and how the patch and this waiver are removed (e.g. once the pinned image "
    "contains the upstream fix)",
}


def check_manifests_load(lint_input: LintInput) -> Iterator[Finding]:
    """PK101: a manifest that fails to load is a finding with its file:line, not a crash."""
    for broken in lint_input.broken:
        fix = broken.hint or "see 'The manifest' in the README"
        yield Finding.of(Rule.MANIFEST_INVALID, broken.path, broken.line, f"{broken.message}; {fix}")


def check_pending(lint_input: LintInput) -> Iterator[Finding]:
    """PK102: an entry whose diff is not vendored cannot be applied, hashed or checked for dead excludes."""
    for spec in lint_input.specs:
        if spec.pending:
            yield Finding.of(
                Rule.PATCH_PENDING,
                spec.manifest_path,
                line_of_key(spec.manifest_path, "diff"),
                f"patch {spec.id} is pending: {spec.diff_name} is not vendored, so its hash and excludes are "
                f"unchecked; vendor it with `{spec.vendor_command()}`",
            )


def check_diff_hash(lint_input: LintInput) -> Iterator[Finding]:
    """PK103: a vendored diff must match the sha256 recorded when it was reviewed."""
    for spec in lint_input.specs:
        if spec.pending:
            continue
        try:
            spec.read_diff()
        except PatchkitError as exc:
            yield _from_error(Rule.DIFF_HASH, exc, spec.manifest_path)
        except OSError as exc:
            yield Finding.of(Rule.DIFF_HASH, spec.diff_path, None, f"cannot read the diff: {exc}")


def check_diff_excludes(lint_input: LintInput) -> Iterator[Finding]:
    """PK104: the diff parses, every exclude matches a file of it (none is dead), and the rest is usable."""
    vendored = [spec for spec in lint_input.specs if not spec.pending]
    if not vendored:
        return
    from patchkit.diffs import parse_diff  # imports unidiff: only now
    from patchkit.filtering import filter_diff, match_exclude
    from patchkit.hunks import paths_of

    for spec in vendored:
        try:
            data = spec.read_diff()
        except (PatchkitError, OSError):
            continue  # PK103 reports it
        try:
            diff = parse_diff(data, spec.strip, str(spec.diff_path))
        except PatchkitError as exc:
            yield _from_error(Rule.DIFF_EXCLUDES, exc, spec.diff_path)
            continue
        paths = paths_of(diff.files)
        # Each dead exclude gets its own line: filter_diff stops at the first one.
        dead = [e for e in spec.excludes if not any(match_exclude(e.pattern, p) for p in paths)]
        for exclude in dead:
            yield Finding.of(
                Rule.DIFF_EXCLUDES,
                spec.manifest_path,
                line_of_key(spec.manifest_path, exclude.pattern),
                f"exclude {exclude.pattern!r} matches no file of {spec.diff_name}; fix the path (a typo "
                f"would silently apply the file you meant to leave out) or remove the exclude",
            )
        if dead:
            continue
        try:
            filter_diff(diff, spec.excludes)
        except PatchkitError as exc:
            yield _from_error(Rule.DIFF_EXCLUDES, exc, spec.manifest_path)


def check_waiver_declared(lint_input: LintInput) -> Iterator[Finding]:
    """PK201: every manifest names the pull request that introduced it, whose number names the waiver."""
    for claim in lint_input.claims:
        if not claim.declared:
            yield Finding.of(
                Rule.WAIVER_UNDECLARED,
                claim.manifest,
                line_of_key(claim.manifest, "waiver") or 1,
                "no waiver named; add `[waiver]` with `introduced_by = N`, N the number of the pull request "
                f"of this repository that introduces the patch, and file {lint_input.waivers_dir}/N.md in "
                "that pull request",
            )


def check_waiver_exists(lint_input: LintInput) -> Iterator[Finding]:
    """PK202: the waiver a manifest points at exists."""
    for spec in lint_input.specs:
        number = spec.introduced_by
        if number is None or lint_input.waiver(number) is not None:
            continue
        expected = lint_input.waiver_path(number)
        message = (
            f"waiver {expected} of patch {spec.id} does not exist; write it in pull request #{number}, which "
            f"introduces the patch (what is patched, why the upstream image cannot run, upstream link, "
            f"removal plan)"
        )
        misnamed = lint_input.waiver(spec.upstream.pr)
        if misnamed is not None and _upstream_namesakes(lint_input, misnamed):
            message += f", or rename {misnamed.path}, which is named after the upstream PR"
        yield Finding.of(
            Rule.WAIVER_MISSING, spec.manifest_path, line_of_key(spec.manifest_path, "introduced_by"), message
        )


def check_waiver_names(lint_input: LintInput) -> Iterator[Finding]:
    """PK203: waivers are flat files named `<digits>.md`, so a PR number finds exactly one file."""
    for waiver in lint_input.waivers:
        if waiver.number is not None or waiver.path.name.lower() == "readme.md":
            continue
        if waiver.path.is_dir():
            fix = "waivers are flat files: move its files up and remove the folder"
        else:
            digits = re.findall(r"\d+", waiver.path.stem)
            target = f"{int(digits[0])}.md" if len(digits) == 1 and int(digits[0]) > 0 else "<PR number>.md"
            fix = f"rename it to {target} after the pull request that introduces its patch, or move it elsewhere"
        yield Finding.of(
            Rule.WAIVER_BAD_NAME,
            waiver.path,
            None,
            f"{waiver.path.name} is not a waiver name (<PR number>.md, digits without a leading zero); {fix}",
        )


def check_waiver_named_upstream(lint_input: LintInput) -> Iterator[Finding]:
    """PK204: a waiver named after the upstream PR, not the introducing PR."""
    for waiver in lint_input.waivers:
        for spec, introduced_by in _upstream_namesakes(lint_input, waiver):
            yield Finding.of(
                Rule.WAIVER_NAMED_UPSTREAM,
                waiver.path,
                1,
                f"waiver named after upstream PR #{spec.upstream.pr}; name it after the introducing PR "
                f"#{introduced_by} (patch {spec.id}): "
                f"git mv {waiver.path} {lint_input.waiver_path(introduced_by)}",
            )


def check_waiver_sections(lint_input: LintInput) -> Iterator[Finding]:
    """PK205: every required section is present and says something."""
    for waiver, doc in _named_waivers(lint_input):
        for topic in Topic:
            section = doc.section_for(topic)
            if section is None:
                yield Finding.of(
                    Rule.WAIVER_SECTIONS,
                    waiver.path,
                    _top_line(doc),
                    f"no '{topic.label}' section; add a heading for it and {_TOPIC_FIX[topic]}",
                )
            elif section.is_empty:
                yield Finding.of(
                    Rule.WAIVER_SECTIONS,
                    waiver.path,
                    section.heading.line,
                    f"section '{section.heading.text}' ({topic.label}) is empty; {_TOPIC_FIX[topic]}",
                )


def check_upstream_cited(lint_input: LintInput) -> Iterator[Finding]:
    """PK206: the waiver links the upstream PR of every patch it covers, so a reader can check its state."""
    for waiver, doc, spec in _covered_patches(lint_input):
        if not cites_upstream(doc.text, spec.upstream):
            yield Finding.of(
                Rule.WAIVER_UPSTREAM_UNCITED,
                waiver.path,
                _topic_line(doc, Topic.LINK),
                f"does not cite the upstream PR of patch {spec.id}; link {spec.upstream.url} "
                f"or write {spec.upstream.repo}#{spec.upstream.pr}",
            )


def check_patch_named(lint_input: LintInput) -> Iterator[Finding]:
    """PK207: the waiver names the patch id, so a reader can find the folder it justifies."""
    for waiver, doc, spec in _covered_patches(lint_input):
        if not _mentions(doc.text, spec.id):
            yield Finding.of(
                Rule.WAIVER_ID_UNNAMED,
                waiver.path,
                _top_line(doc),
                f"does not name patch {spec.id}; mention `{spec.id}` (its folder under "
                f"{lint_input.patches_dir})",
            )


def check_excludes_documented(lint_input: LintInput) -> Iterator[Finding]:
    """PK208: a partial port is documented: every excluded path is named in the waiver."""
    for waiver, doc, spec in _covered_patches(lint_input):
        for exclude in spec.excludes:
            if not _mentions(doc.text, exclude.pattern):
                yield Finding.of(
                    Rule.WAIVER_EXCLUDE_UNNAMED,
                    waiver.path,
                    _topic_line(doc, Topic.WHAT),
                    f"does not name {exclude.pattern}, which patch {spec.id} excludes "
                    f"(\"{exclude.reason}\"); a partial port must be documented: name the path and say why "
                    f"it is not ported",
                )


def check_orphan_waivers(lint_input: LintInput) -> Iterator[Finding]:
    """PK209: a waiver no manifest points at is stale: a removed patch takes its waiver with it."""
    for waiver in lint_input.waivers:
        number = waiver.number
        if number is None or lint_input.is_claimed(number):
            continue
        if _upstream_namesakes(lint_input, waiver):
            continue  # PK204 says precisely what is wrong with it
        yield Finding.of(
            Rule.WAIVER_ORPHAN,
            waiver.path,
            1,
            f"no manifest has introduced_by = {number}; delete this waiver if its patch was removed, or fix "
            f"the introduced_by of the patch it justifies",
        )


RULES: tuple[RuleCheck, ...] = (
    check_manifests_load,
    check_pending,
    check_diff_hash,
    check_diff_excludes,
    check_waiver_declared,
    check_waiver_exists,
    check_waiver_names,
    check_waiver_named_upstream,
    check_waiver_sections,
    check_upstream_cited,
    check_patch_named,
    check_excludes_documented,
    check_orphan_waivers,
)


def cites_upstream(text: str, upstream: Upstream) -> bool:
    """True if `text` links the upstream PR: a GitHub URL, `owner/repo#N`, or the manifest's own url."""
    repo, number = re.escape(upstream.repo), upstream.pr
    patterns = (
        rf"github\.com/{repo}/(?:pull|pulls|issues)/{number}(?!\d)",
        rf"(?<![\w.-]){repo}#{number}(?!\d)",
    )
    if any(re.search(p, text, re.IGNORECASE) for p in patterns):
        return True
    return re.search(re.escape(upstream.url) + r"(?![\w])", text) is not None


def _mentions(text: str, name: str) -> bool:
    # Bounded: `atom-pr2106` is not found inside `atom-pr2106-v2`, yet a full stop or a `/` may follow it.
    return re.search(r"(?<![\w.-])" + re.escape(name) + r"(?![\w-]|\.\w)", text) is not None


def _upstream_namesakes(lint_input: LintInput, waiver: WaiverFile) -> list[tuple[PatchSpec, int]]:
    """(patch, its introducing PR) for each patch whose upstream PR number names this unclaimed waiver."""
    number = waiver.number
    if number is None or lint_input.is_claimed(number):
        return []
    return [
        (s, s.introduced_by)
        for s in lint_input.specs
        if s.upstream.pr == number and s.introduced_by is not None and s.introduced_by != number
    ]


def _named_waivers(lint_input: LintInput) -> Iterator[tuple[WaiverFile, WaiverDoc]]:
    for waiver in lint_input.waivers:
        if waiver.number is not None and waiver.doc is not None:
            yield waiver, waiver.doc


def _covered_patches(lint_input: LintInput) -> Iterator[tuple[WaiverFile, WaiverDoc, PatchSpec]]:
    for waiver, doc in _named_waivers(lint_input):
        for spec in lint_input.specs:
            if spec.introduced_by == waiver.number:
                yield waiver, doc, spec


def _top_line(doc: WaiverDoc) -> int:
    return doc.title.line if doc.title else 1


def _topic_line(doc: WaiverDoc, topic: Topic) -> int:
    section = doc.section_for(topic)
    return section.heading.line if section else _top_line(doc)


def _from_error(rule: Rule, exc: PatchkitError, fallback: Path) -> Finding:
    path, line = split_where(exc.where, fallback)
    message = f"{exc.message}; {exc.hint}" if exc.hint else exc.message
    return Finding.of(rule, path, line, message)
