"""The text of every lint rule as docs/lint.md's "Rules" table has it, for `patchkit lint --explain`.

A copy, so that an installed patchkit (whose wheel ships no docs) explains a rule as a checkout does;
tests/test_explain.py holds it equal to the table, row by row.
"""

from __future__ import annotations

RULE_TEXT = {
    "PK101": (
        'manifest does not load: schema, `id` not equal to the folder name, an exclude without a reason, a '
        'folder without `manifest.toml`'
    ),
    "PK102": (
        'pending entry: the diff is not vendored yet, so its hash and excludes cannot be checked; the message'
        ' gives the `patchkit vendor` command'
    ),
    "PK103": (
        'vendored diff has no `sha256`, or does not match it'
    ),
    "PK104": (
        'diff cannot be parsed, or an exclude matches no file of the diff (a dead exclude, usually a typo)'
    ),
    "PK105": (
        'compiled hunk set `<id>/<id>.compiled` in the repository that is not byte for byte what `patchkit '
        'compile` makes of its diff and manifest now (stale, damaged, or lying hunks): a build artefact, not to '
        'be committed'
    ),
    "PK201": (
        'manifest has no `[waiver] introduced_by`'
    ),
    "PK202": (
        'waiver `<waivers>/<introduced_by>.md` does not exist'
    ),
    "PK203": (
        'a file in the waivers folder is not named `<digits>.md` (no leading zero; `README.md` is allowed)'
    ),
    "PK204": (
        'waiver named after a patch\'s upstream PR while `introduced_by` names another PR: "named after '
        'upstream PR #2106; name it after the introducing PR #2816"'
    ),
    "PK205": (
        'a required section is missing or empty (one finding per section)'
    ),
    "PK206": (
        'waiver does not cite the upstream PR of a patch pointing at it'
    ),
    "PK207": (
        'waiver does not name the id of a patch pointing at it'
    ),
    "PK208": (
        'waiver does not name a path excluded by a patch pointing at it'
    ),
    "PK209": (
        'orphan waiver: no manifest points at it and it names no file holding a patch site; a removed patch '
        'takes its waiver with it'
    ),
    "PK210": (
        'pending waiver `PENDING-<topic>.md`: the message gives the `git mv` to `<PR>.md` once the pull '
        'request is opened'
    ),
    "PK211": (
        "`introduced_by` equals the patch's upstream PR number (almost always the upstream PR written twice)"
    ),
    "PK301": (
        'history: a patch added or changed in `REV..HEAD` without its waiver added or changed in the same '
        'range'
    ),
    "PK302": (
        'history: a newly added patch whose `introduced_by` is not the pull request being checked (or, for a '
        'moved patch, whose `moved_in` is not)'
    ),
    "PK303": (
        'history: new patches or sites exist but the pull request number is unknown (no `--pr`, no CI '
        'variable)'
    ),
    "PK304": (
        'history: a patch added with `moved_in` (moved into the registry with its waiver) whose original waiver '
        '`<introduced_by>.md` is not on the base: it does not exist, or this range adds it'
    ),
    "PK401": (
        'patch site that no waiver names, that runs no registry patch and that the baseline does not accept'
    ),
    "PK402": (
        'history: a patch site added or changed in `REV..HEAD` without the waiver `<PR>.md` of this pull '
        'request, added in the range and naming its file'
    ),
    "PK403": (
        'history: a pre-existing patch site (on the base) that no waiver named on the base, and not in the '
        'baseline'
    ),
    "PK404": (
        'a baseline entry that matches no site any more (removed or changed); rerun `--write-baseline`'
    ),
    "PK405": (
        'a scanned file, or a part of one, that could not be read: Python that does not parse, shell nesting '
        'substitutions or embedded shells too deep to follow, a script over 4 MiB or holding a NUL byte; an '
        'error (the sites there are unknown), the rest of the file is still checked'
    ),
}
