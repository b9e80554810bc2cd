"""The static lint rules: independent functions from a LintInput to findings.

Each rule looks at one thing and says how to fix it; none depends on another having run. Rules about what a
pull request changed live in history.py because they need git.
"""

from __future__ import annotations

import re
import shlex
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from patchkit.diff.compiled import compile_bytes, compiled_path
from patchkit.diff.filtering import load_hunk_set
from patchkit.errors import PatchkitError
from patchkit.input.limits import MAX_COMPILED_BYTES
from patchkit.input.manifest import PatchSpec, Upstream, line_of_key
from patchkit.lint.coverage import Cover, cover_site, waivers_naming
from patchkit.lint.findings import Finding, Rule, split_where
from patchkit.lint.inputs import PENDING_NAME, LintInput, WaiverFile, WaiverKind
from patchkit.lint.waivers import Topic, WaiverDoc

RuleCheck = Callable[[LintInput], Iterator[Finding]]

_TOPIC_FIX = {
    Topic.WHAT: "say which files and behaviour the patch changes, and which files it leaves out",
    Topic.WHY: "say why the unmodified upstream image cannot run without the patch",
    Topic.LINK: "link the upstream PR or issue",
    Topic.REMOVAL: "say when and how the patch and this waiver are removed (e.g. once the pinned image "
    "contains the upstream fix)",
}


_TOPIC_EXAMPLES = {
    Topic.WHAT: '"What is patched"',
    Topic.WHY: '"Why the unmodified image cannot run"',
    Topic.LINK: '"Upstream PR / issue links" or "Upstream status"',
    Topic.REMOVAL: '"Removal plan"',
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
    from patchkit.diff.diffs import parse_diff  # lazy: the parser (imports unidiff: only now)
    from patchkit.diff.filtering import filter_diff, match_exclude
    from patchkit.diff.hunks import paths_of

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


def check_compiled_current(lint_input: LintInput) -> Iterator[Finding]:
    """PK105: a compiled hunk set (`<id>/<id>.compiled`) in the repository is exactly what `patchkit compile`
    writes now for its diff and manifest, or it is a finding.

    A start believes a compiled file that is well formed and bound to the diff's sha256 (patchkit.diff.compiled):
    its hunks are not compared with the diff's there. A pull request could commit one whose hunks are not the
    diff's; review sees a reviewed diff and a binary blob. So lint compiles every patch that has one and
    compares bytes: a stale one (the diff, manifest or patchkit changed) is reported too, since it is an artefact
    of the image build that should not be committed at all."""
    for spec in lint_input.specs:
        path = compiled_path(spec)
        try:
            st = path.lstat()
        except OSError:
            continue
        # rm, not git rm: the file may be the image build's and untracked; absolute: it runs from any folder.
        fix = (f"it is a build artefact of `patchkit compile` (the image build makes it): delete it "
               f"(`rm -- {shlex.quote(str(path.absolute()))}`) and ignore `*.compiled` in .gitignore")
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_COMPILED_BYTES:
            yield Finding.of(Rule.COMPILED_STALE, path, None, f"not a regular file of a sane size; {fix}")
            continue
        try:
            expected = None if spec.pending else compile_bytes(spec, load_hunk_set(spec, compiled=False))
            actual = path.read_bytes()
        except (PatchkitError, OSError):
            expected, actual = None, b""
        if expected is None:
            yield Finding.of(Rule.COMPILED_STALE, path, None,
                             f"compiled hunk set of patch {spec.id}, whose diff does not load; {fix}")
        elif actual != expected:
            yield Finding.of(Rule.COMPILED_STALE, path, None,
                             f"compiled hunk set that is not what `patchkit compile` makes of {spec.diff_name} and "
                             f"its manifest (stale, damaged, or hunks that are not the diff's); {fix}")


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
        misnamed = lint_input.waiver(spec.upstream.pr) if spec.upstream.pr is not None else None
        if misnamed is not None and _upstream_namesakes(lint_input, misnamed):
            message += f", or rename {misnamed.path}, which is named after the upstream PR"
        yield Finding.of(
            Rule.WAIVER_MISSING, spec.manifest_path, line_of_key(spec.manifest_path, "introduced_by"), message
        )


def check_waiver_names(lint_input: LintInput) -> Iterator[Finding]:
    """PK203: waivers are flat files named `<digits>.md`, so a PR number finds exactly one file. Also allowed:
    README.md, translations of an existing waiver (`2306_zh.md`) or README, and PENDING-<topic>.md (PK210)."""
    stems = {w.path.stem for w in lint_input.waivers if w.kind in (WaiverKind.NUMBERED, WaiverKind.README)}
    for waiver in lint_input.waivers:
        if waiver.kind in (WaiverKind.NUMBERED, WaiverKind.README, WaiverKind.PENDING):
            continue
        if waiver.kind is WaiverKind.TRANSLATION:
            if waiver.translates in stems or (waiver.translates or "").lower() == "readme":
                continue
            yield Finding.of(
                Rule.WAIVER_BAD_NAME,
                waiver.path,
                1,
                f"{waiver.path.name} is a translation of {waiver.translates}.md, which does not exist; add the "
                f"waiver {lint_input.waiver_path(int(waiver.translates or 0))} itself, or remove the translation",
            )
            continue
        if waiver.path.is_dir():
            fix = "waivers are flat files: move its files up and remove the folder"
        else:
            # Only a number that is the PR's: `pr-105`, `0106`, `2306-draft`; never the 3 of `qwen3-fix`.
            number = _PR_STEM.match(waiver.path.stem)
            target = f"{int(number.group(1))}.md" if number else "<PR number>.md"
            fix = f"rename it to {target} after the pull request that introduces its patch, or move it elsewhere"
            if target == "<PR number>.md":
                fix += f" (before that pull request exists, name it PENDING-{_topic_of(waiver.path.stem)}.md)"
        yield Finding.of(
            Rule.WAIVER_BAD_NAME,
            waiver.path,
            None if waiver.path.is_dir() else 1,
            f"{waiver.path.name} is not a waiver name (<PR number>.md, digits without a leading zero); {fix}",
        )


_PR_STEM = re.compile(r"^(?:pr|pull|waiver)?[-_ #]*0*([1-9][0-9]*)(?:[-_ .][A-Za-z].*)?$", re.IGNORECASE)


def _topic_of(stem: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", stem.lower()).strip("-") or "topic"


def check_pending_waivers(lint_input: LintInput) -> Iterator[Finding]:
    """PK210: a waiver written before its pull request exists; once it does, the file takes the PR's number."""
    for waiver in lint_input.waivers:
        if waiver.kind is not WaiverKind.PENDING:
            continue
        match = PENDING_NAME.match(waiver.path.name)
        topic = match.group(1) if match else waiver.path.stem
        yield Finding.of(
            Rule.WAIVER_PENDING,
            waiver.path,
            1,
            f"pending waiver ({topic}): once its pull request is opened, rename it after that pull request's "
            f"number N: git mv {waiver.path} {lint_input.waivers_dir}/N.md (and set introduced_by = N in any "
            f"manifest pointing at it)",
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
    """PK205: every required section is present and says something (pending waivers too)."""
    for waiver, doc in _named_waivers(lint_input, pending=True):
        for topic in Topic:
            section = doc.section_for(topic)
            if section is None:
                yield Finding.of(
                    Rule.WAIVER_SECTIONS,
                    waiver.path,
                    _top_line(doc),
                    f"no '{topic.label}' section (a heading such as {_TOPIC_EXAMPLES[topic]}); add it and "
                    f"{_TOPIC_FIX[topic]}",
                )
            elif section.is_empty:
                yield Finding.of(
                    Rule.WAIVER_SECTIONS,
                    waiver.path,
                    section.heading.line,
                    f"section '{section.heading.text}' ({topic.label}) is empty; {_TOPIC_FIX[topic]}",
                )


def check_upstream_cited(lint_input: LintInput) -> Iterator[Finding]:
    """PK206: the waiver links every upstream PR of every patch it covers (`pr` and each of `prs`), or, for a
    local patch (`origin = "local"`), says that it is local."""
    for waiver, doc, spec in _covered_patches(lint_input):
        claim = lint_input.claim_of(spec)
        if claim is not None and claim.origin == "local":
            # A patch id such as `launcher-local` is no statement that the patch is local.
            without_ids = re.sub("|".join(re.escape(s.id) for s in lint_input.specs), "", doc.text)
            if not re.search(r"\blocal\b", without_ids, re.IGNORECASE):
                reason = f' ("{claim.reason}")' if claim.reason else ""
                yield Finding.of(
                    Rule.WAIVER_UPSTREAM_UNCITED,
                    waiver.path,
                    _topic_line(doc, Topic.LINK),
                    f"patch {spec.id} is local (origin = \"local\"{reason}) but the waiver does not say so; "
                    f"write that it is a local patch with no upstream PR, and why",
                )
            continue
        references = list(claim.upstream_prs) if claim is not None and claim.upstream_prs else []
        if not references:
            references = [(p.repo, p.number) for p in spec.upstream.prs]  # the manifest's, when no claim
        for repo, number in references:
            url = spec.upstream.url if (repo, number) == (spec.upstream.repo, spec.upstream.pr) else ""
            upstream = Upstream(repo, number, url or f"https://github.com/{repo}/pull/{number}", None)
            if not cites_upstream(doc.text, upstream):
                yield Finding.of(
                    Rule.WAIVER_UPSTREAM_UNCITED,
                    waiver.path,
                    _topic_line(doc, Topic.LINK),
                    f"does not cite the upstream PR {repo}#{number} of patch {spec.id}; link {upstream.url} "
                    f"or write {repo}#{number}",
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
    """PK208: a partial port is documented: every excluded path is named in the waiver, as written in the
    manifest, as its folder (`atom/spec_decode/` for `atom/spec_decode/**`), or by naming every file it matches."""
    for waiver, doc, spec in _covered_patches(lint_input):
        for exclude in spec.excludes:
            if not _exclude_named(doc.text, exclude.pattern, spec):
                yield Finding.of(
                    Rule.WAIVER_EXCLUDE_UNNAMED,
                    waiver.path,
                    _topic_line(doc, Topic.WHAT),
                    f"does not name {exclude.pattern}, which patch {spec.id} excludes "
                    f"(\"{exclude.reason}\"); a partial port must be documented: name the path and say why "
                    f"it is not ported",
                )


def _exclude_named(text: str, pattern: str, spec: PatchSpec) -> bool:
    folder = re.sub(r"/(?:\*\*?)?(?:/\*\*?)*$", "", pattern).rstrip("/")
    if _mentions(text, pattern) or (folder and not any(c in folder for c in "*?[") and _mentions(text, folder)):
        return True
    matched = _excluded_files(spec, pattern)
    return bool(matched) and all(_mentions(text, path) for path in matched)


def _excluded_files(spec: PatchSpec, pattern: str) -> list[str]:
    """The files of the vendored diff an exclude matches; none when the diff is pending or unreadable."""
    if spec.pending:
        return []
    from patchkit.diff.diffs import parse_diff  # lazy: the parser (imports unidiff: only now)
    from patchkit.diff.filtering import match_exclude
    from patchkit.diff.hunks import paths_of

    try:
        diff = parse_diff(spec.read_diff(), spec.strip, str(spec.diff_path))
    except (PatchkitError, OSError):
        return []
    return sorted({p for p in paths_of(diff.files) if match_exclude(pattern, p)})


def check_orphan_waivers(lint_input: LintInput) -> Iterator[Finding]:
    """PK209: a waiver no manifest points at is stale: a removed patch takes its waiver with it."""
    for waiver in lint_input.waivers:
        number = waiver.number
        if number is None or lint_input.is_claimed(number):
            continue
        if _upstream_namesakes(lint_input, waiver):
            continue  # PK204 says precisely what is wrong with it
        if any(waivers_naming(lint_input, site, [waiver]) for site in lint_input.sites):
            continue  # it waives a patch site of the repository
        yield Finding.of(
            Rule.WAIVER_ORPHAN,
            waiver.path,
            1,
            f"no manifest has introduced_by = {number} and the waiver names no file holding a patch site; "
            f"delete this waiver if its patch was removed, fix the introduced_by of the patch it justifies, or "
            f"name the script it covers (its repository path)",
        )


def check_introduced_by_upstream(lint_input: LintInput) -> Iterator[Finding]:
    """PK211: introduced_by equal to the upstream PR number is almost always the upstream PR written twice."""
    for spec in lint_input.specs:
        if spec.introduced_by is not None and spec.introduced_by == spec.upstream.pr:
            yield Finding.of(
                Rule.WAIVER_NUMBER_IS_UPSTREAM,
                spec.manifest_path,
                line_of_key(spec.manifest_path, "introduced_by"),
                f"introduced_by = {spec.introduced_by} is also the upstream PR of patch {spec.id} "
                f"({spec.upstream.repo}#{spec.upstream.pr}); introduced_by is the pull request of THIS repository "
                f"that adds the patch: check it, and rename the waiver with it",
            )


def check_sites_covered(lint_input: LintInput) -> Iterator[Finding]:
    """PK401: every patch site of the repository is covered: a waiver names its file, it runs a registry patch,
    or the baseline accepts it."""
    for site in lint_input.sites:
        if cover_site(lint_input, site).cover is not Cover.NONE:
            continue
        yield Finding.of(
            Rule.SITE_UNCOVERED,
            lint_input.site_path(site),
            site.line,
            f"patch site ({site.kind.label}) patching {site.what}: `{_short(site.command)}`",
            f"no waiver names {site.path}: add {lint_input.waivers_dir}/N.md, N the pull request that introduces "
            f"it, naming {site.path}, or accept the site as pre-existing with --write-baseline",
        )


def check_scan_readable(lint_input: LintInput) -> Iterator[Finding]:
    """PK405: a scanned file that could not be read: its patch sites are unknown."""
    for problem in lint_input.scan_problems:
        yield Finding.of(
            Rule.SCAN_UNREADABLE,
            lint_input.root / problem.path,
            problem.line,
            f"{problem.message}; its patch sites are not checked: fix the file or exclude it "
            f"([tool.patchkit] scan-exclude)",
        )


def check_baseline_current(lint_input: LintInput) -> Iterator[Finding]:
    """PK404: a baseline entry that matches no site: the site was removed or changed; shrink the baseline."""
    for fingerprint, shown in lint_input.stale_baseline:
        path = lint_input.baseline_path or Path("baseline")
        yield Finding.of(
            Rule.BASELINE_STALE,
            path,
            _line_containing(path, fingerprint),
            f"baseline entry matches no patch site any more ({shown}); run `patchkit lint --write-baseline` to "
            f"drop it",
        )


def _line_containing(path: Path, text: str) -> int | None:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    return next((number for number, line in enumerate(lines, 1) if text in line), None)


def _short(command: str, limit: int = 100) -> str:
    return command if len(command) <= limit else command[: limit - 1] + "…"


RULES: tuple[RuleCheck, ...] = (
    check_manifests_load,
    check_pending,
    check_diff_hash,
    check_diff_excludes,
    check_compiled_current,
    check_waiver_declared,
    check_waiver_exists,
    check_waiver_names,
    check_pending_waivers,
    check_waiver_named_upstream,
    check_waiver_sections,
    check_upstream_cited,
    check_patch_named,
    check_excludes_documented,
    check_orphan_waivers,
    check_introduced_by_upstream,
    check_sites_covered,
    check_scan_readable,
    check_baseline_current,
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


def _named_waivers(lint_input: LintInput, pending: bool = False) -> Iterator[tuple[WaiverFile, WaiverDoc]]:
    for waiver in lint_input.waivers:
        if waiver.doc is None:
            continue
        if waiver.number is not None or (pending and waiver.kind is WaiverKind.PENDING):
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
