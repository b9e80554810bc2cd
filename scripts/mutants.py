"""A curated mutation suite: realistic single-point mistakes in the code that decides and protects, each of
which some named test must catch.

    .venv/bin/python scripts/mutants.py                       # every mutant (4 to 7 min on 2 loaded cores)
    .venv/bin/python scripts/mutants.py --sample 8 --seed 1   # a random sample (CI)
    .venv/bin/python scripts/mutants.py --list                # names, files and descriptions
    .venv/bin/python scripts/mutants.py --only trust-group-writable

Each mutant is one edit (an exact snippet that must occur exactly once in its file, and its replacement) in a
scratch copy of the repository; the tests it names then run there (this venv's python, `pytest -x -q -p
no:cacheprovider --rootdir <copy>`, PYTHONPATH=<copy>, no bytecode written, so an edit that keeps a file's
size and mtime second is never hidden by a stale .pyc). The working tree is never modified. Before the first
mutant, a probe checks that the copy's patchkit is the one imported (not the editable install), two canaries
check it under pytest (an inert edit must survive, a broken package must be killed), and the named tests run
once unmutated (unless --no-baseline, for CI right after the tests): a test that fails on the real code kills
nothing.

A mutant is killed when its tests fail, survived when they pass, stale when its snippet is not found exactly
once (the code moved on: refresh the snippet), skipped when every test it names skipped itself (the security
tests need root and an unprivileged user). Exit status 0 only when every mutant run was killed.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# What the scratch copy leaves out: the venv, git, caches and build output (none of it is read by the tests).
SKIP = shutil.ignore_patterns(".venv", ".git", "__pycache__", "*.pyc", ".mypy_cache", ".ruff_cache",
                              ".pytest_cache", ".hypothesis", "dist", "build", "*.egg-info")


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str  # a path in the repository, written as "patchkit/....py"
    find: str  # must occur exactly once in the file
    replace: str
    tests: tuple[str, ...]  # pytest node ids or files that must fail with the edit in place
    what: str


def m(name: str, file: str, find: str, replace: str, tests: Sequence[str], what: str) -> Mutant:
    return Mutant(name, file, find, replace, tuple(tests), what)


TRUST = "tests/test_state_trust.py"
RULE = "tests/test_trust_rule.py"
EDGES = "tests/test_rule_edges.py"

MATCHING = "tests/test_matching.py"
STATE = "tests/test_state.py"
CRASH = "tests/test_crash.py"
WORKSPACE = "tests/test_workspace.py"
FAST = "tests/test_fastpath.py"
ENTRY = "tests/test_restart_entry.py"
STATUS_ENTRY = "tests/test_status_entry.py"
STATUS_ALIKE = f"{STATUS_ENTRY}::test_a_status_is_answered_without_click_byte_for_byte"
WRITER = f"{STATUS_ENTRY}::test_the_writer_writes_what_click_echo_writes"
STATUS_FALLS = f"{STATUS_ENTRY}::test_any_other_shape_falls_through_to_the_full_cli"
UNSEALED_SHOWN = f"{ENTRY}::test_shown_verdicts_the_record_does_not_seal_are_rendered_again"
LINT_RULES = "tests/test_lint_rules.py"
LINT_POLICY = "tests/test_lint_policy.py"
PORT = "tests/test_port.py"
LINT_SCAN = "tests/test_lint_scan.py"
HOSTILE_LINT = "tests/test_lint_hostile.py"
LINT_CONSUMER = "tests/test_lint_consumer.py"
ORDER = "tests/test_hunk_order.py"

CANARY_TEST = f"{MATCHING}::test_split_lines_keeps_endings_and_a_missing_final_newline"

MUTANTS: tuple[Mutant, ...] = (
    # ---------------------------------------------------------------------------------------- matching
    m("match-tie-goes-up", "patchkit/judge/matching.py",
      "positions[down] - expected <= expected - positions[up]", "positions[down] - expected < expected - positions[up]",
      [MATCHING], "at equal distance the match above wins (git takes the one further down)"),
    m("match-start-pin-off-by-one", "patchkit/judge/matching.py",
      "return start <= 1, hunk.at_end", "return start < 1, hunk.at_end",
      [f"{EDGES}::test_a_hunk_at_line_1_matches_only_at_the_start_like_git"],
      "a hunk starting at line 1 is no longer pinned to the start of the file"),
    # locate's first look (an image's pin, or its expected line) is where every caller finds nearly every image.
    m("match-image-at-end-of-file", "patchkit/judge/matching.py",
      "if low <= first and first + m <= n and", "if low <= first and first + m < n and",
      [MATCHING], "an image that ends on the file's last line never matches where locate looks first"),
    m("match-low-bound", "patchkit/judge/matching.py",
      "if low <= first and first + m <= n and", "if low < first and first + m <= n and",
      [MATCHING, STATE], "a hunk may not start right where the previous one ended"),
    m("match-tie-read-one-way", "patchkit/judge/matching.py",
      "(post is None or abs(pre - expected) <= abs(post - expected))",
      "(post is None or abs(pre - expected) < abs(post - expected))",
      [MATCHING, STATE], "equally near pre- and post-images read as applied only: no second reading"),
    m("match-header-line-ignored", "patchkit/judge/matching.py",
      "git_pos = _find(content, hunk, state, header, 0) if header != expected else pos", "git_pos = pos",
      [MATCHING, STATE], "a look-alike nearer to the header's line no longer makes the hunk ambiguous"),
    m("match-inline-end-pin", "patchkit/judge/matching.py",
      "and hunk.trailing and hunk.old_start > 1", "and hunk.old_start > 1",
      ["tests/test_matching_reference.py", MATCHING, STATE],
      "the inline common case also takes hunks without trailing context (pinned to the end)"),
    m("simulate-git-shift-sign", "patchkit/judge/matching.py",
      "shift += len(new) - len(old)\n        end = pos + len(old)",
      "shift += len(old) - len(new)\n        end = pos + len(old)",
      [STATE, MATCHING, "tests/test_regressions.py"],
      "the git simulation carries the lines earlier hunks added with the wrong sign"),
    # simulate_git keeps the image as modified so far as a head (the earlier hunks and the lines between them)
    # and the content as it is past the last hunk; git's match may be in the head, an earlier hunk's new lines.
    m("simulate-git-head-unsearched", "patchkit/judge/matching.py",
      "return _Joined(self.index.get(line, []), below, low, len(self.head) - self.start)",
      "return _Joined([], below, low, len(self.head) - self.start)",
      ["tests/test_simulate_git.py"],
      "the git simulation looks an image up only past the last hunk applied, never in the image as modified "
      "above it (an earlier hunk's new lines)"),
    m("simulate-git-head-straddle", "patchkit/judge/matching.py",
      "        if q + m <= split:\n            return tuple(self.head[q:q + m])",
      "        if True:\n            return tuple(self.head[q:q + m])",
      ["tests/test_simulate_git.py"],
      "the git simulation never matches an image that starts in the image as modified and ends in the content "
      "as it is"),
    # -------------------------------------------------------------------------------------------- state
    m("combine-ambiguous-before-conflict", "patchkit/outcome.py",
      'if "conflict" in seen:\n        return PatchState.CONFLICT\n    if "ambiguous" in seen:\n'
      '        return PatchState.AMBIGUOUS',
      'if "ambiguous" in seen:\n        return PatchState.AMBIGUOUS\n    if "conflict" in seen:\n'
      '        return PatchState.CONFLICT',
      [STATE], "a conflict next to an ambiguous hunk combines to ambiguous"),
    m("combine-partial-reads-unapplied", "patchkit/outcome.py",
      'if seen == {"unapplied"}:', 'if "unapplied" in seen:',
      [STATE], "applied and unapplied hunks together combine to unapplied, not partial"),
    m("rename-both-exist-reads-old", "patchkit/judge/state.py",
      "if old.exists and not new.exists:", "if old.exists:",
      [f"{EDGES}::test_a_rename_whose_old_and_new_paths_both_exist_is_a_conflict"],
      "a rename whose old and new paths both exist is judged by the old file, not a conflict"),
    # Since issue #23, position only proposes a reading: several git-consistent readings, or the one the file's
    # end prefers, are then checked against every other place an image occurs (the old mutants of _by_position,
    # first-wins and edges-ignored, became equivalent: the look-alike check catches what they let through).
    m("places-any-certain", "patchkit/judge/state.py",
      "if all(len(p) == 1 for p in places):", "if any(len(p) == 1 for p in places):",
      ["tests/test_lookalikes.py", STATE],
      "a reading stands when some hunk is certain, though another has a look-alike the evidence does not exclude"),
    m("blob-proof-ignored", "patchkit/judge/state.py",
      "if not old_blob and not new_blob:", "if True:",
      ["tests/test_lookalikes.py", STATE],
      "the diff's blob ids never prove a reading: an undrifted file with its own look-alike reads ambiguous"),
    m("overlap-rivals-ignored", "patchkit/judge/state.py",
      "others = [p for p in others if p.pos >= low[i] + gaps[i] and p.pos + p.span <= high[i + 1]]",
      "others = []",
      ["tests/test_lookalikes.py", "tests/test_matching_reference.py"],
      "a run of exact gaps excludes every other place, though one that overlaps the reading's place fits with "
      "lines only added (seed 4242 example 1668: --complete wrote)"),
    # test_matching_reference at its default 400 files stopped killing this one with the anchor change (it
    # does at PATCHKIT_MATCHING_EXAMPLES=3000); the look-alike test pins it (issue #37).
    m("rivals-left-bound-strict", "patchkit/judge/state.py",
      "ends = [p.pos + p.span for p in places[m] if p.pos >= low[m] + gaps[m]]",
      "ends = [p.pos + p.span for p in places[m] if p.pos > low[m] + gaps[m]]",
      ["tests/test_lookalikes.py::test_a_rival_exactly_at_the_gap_past_an_uncertain_hunk_is_a_rival",
       "tests/test_matching_reference.py"],
      "a placement that keeps a gap exactly is not counted as fitting (one line too many asked)"),
    # Since issue #25's third pass the plan's check takes the round trip's reading of each moved file
    # (judge_planned); what it still checks must be checked.
    m("planned-way-back-unchecked", "patchkit/judge/state.py",
      "if set(back_reading.states) - {moving} or back_reading.positions != moved_positions(",
      "if False and back_reading.positions != moved_positions(",
      ["tests/test_plan.py::test_the_plans_check_judges_again_what_the_round_trip_cannot_vouch_for"],
      "the plan's check believes a round trip's reading whose way back does not lead to the tree's reading"),
    m("planned-other-verdicts-trusted", "patchkit/judge/state.py",
      "if len(verdicts) != len(sections) or any(v.section is not s for v, s in zip(verdicts, sections, strict=True)):",
      "if False:",
      ["tests/test_plan.py::test_a_plan_whose_result_does_not_read_as_its_goal_is_an_internal_error"],
      "the plan's check takes the verdicts of a tree state that lacks a section for the sections' own"),
    m("planned-line-count-unchecked", "patchkit/judge/state.py",
      "if known is not None and _line_count(data) == known.content.lines:", "if known is not None:",
      ["tests/test_plan.py::test_the_plans_check_judges_again_what_the_round_trip_cannot_vouch_for"],
      "the plan's check believes a round trip's reading of content with another number of lines"),
    # patchkit.pyz's loader: only this Python's checked bytecode of the very source beside it.
    m("pyz-bytecode-hash-unchecked", "scripts/build_pyz.py",
      "and pyc[8:16] == (", "and True or pyc[8:16] == (",
      ["tests/test_pyz.py::test_bytecode_that_is_not_the_sources_is_never_run"],
      "the archive's loader runs a pyc whose hash is not its source's (a stale one)"),
    m("pyz-bytecode-unchecked-flag", "scripts/build_pyz.py",
      "if pyc[:8] == importlib.util.MAGIC_NUMBER + CHECKED_HASH", "if pyc[:4] == importlib.util.MAGIC_NUMBER",
      ["tests/test_pyz.py::test_bytecode_that_is_not_the_sources_is_never_run"],
      "the archive's loader runs an unchecked-hash pyc, which Python keeps running after its source changes"),
    # ------------------------------------------------------------------------------------- --complete
    m("complete-on-conflict", "patchkit/run/actions.py",
      "(state is PatchState.PARTIAL and complete)",
      "(state in (PatchState.PARTIAL, PatchState.CONFLICT) and complete)",
      [f"{EDGES}::test_complete_never_writes_a_conflicted_tree"],
      "`--complete` is accepted on a conflicted tree"),
    m("partial-without-complete", "patchkit/run/actions.py",
      "(state is PatchState.PARTIAL and complete)", "(state is PatchState.PARTIAL)",
      [STATE, "tests/test_regressions.py"], "a partially patched tree is written without `--complete`"),
    # ---------------------------------------------------------------------------------------- filtering
    m("exclude-ignores-rename-source", "patchkit/diff/filtering.py",
      "any(match_exclude(e.pattern, p) for p in f.paths)", "match_exclude(e.pattern, f.path)",
      [f"{EDGES}::test_a_file_exclude_matches_a_renames_old_path"],
      "a file exclude looks at a rename's new path only"),
    m("dead-exclude-accepted", "patchkit/diff/filtering.py",
      "dead = [e for e in excludes if e.pattern not in used]", "dead: list[Exclude] = []",
      ["tests/test_scenarios.py::test_scenario[dead-exclude-plain]", "tests/test_manifest.py"],
      "an exclude that matches no file of the diff (a typo) is silently ignored"),
    m("hunk-exclude-last-hunk", "patchkit/diff/filtering.py",
      "missing = [n for n in exclude.hunks or () if n > total]",
      "missing = [n for n in exclude.hunks or () if n >= total]",
      [f"{EDGES}::test_a_hunk_exclude_may_name_the_files_last_hunk"],
      "excluding a file's last hunk is refused as a hunk the diff does not have"),
    m("hunk-numbers-from-zero", "patchkit/diff/filtering.py",
      "enumerate(f.hunks, first + 1)", "enumerate(f.hunks, first)",
      ["tests/test_placement.py", "tests/test_manifest.py", "tests/test_cli.py"],
      "hunk excludes count from 0: the hunk after the one named is dropped"),
    m("placement-collision-unchecked", "patchkit/diff/filtering.py",
      "if origin.setdefault(after, before) != before:", "if False:",
      ["tests/test_placement.py"], "two diff paths placed at the same root path are not refused"),
    m("folder-exclude-prefix-unbounded", "patchkit/input/globs.py",
      'return path == stem or path.startswith(stem + "/")', "return path.startswith(stem)",
      ["tests/test_globs.py", "tests/test_manifest.py"],
      "a folder exclude `atom/ops` also drops `atom/ops_extra.py`"),
    m("zero-context-whole-file", "patchkit/diff/diffs.py",
      "if h.leading == 0 and h.old_start > 1:",
      "if h.leading == 0 and h.old_start > 0:",
      ["tests/test_diffs.py", "tests/test_scenarios.py", "tests/test_cli.py"],
      "a hunk that rewrites a whole file from line 1 (no context to have) is refused as a -U0 diff"),
    m("hunk-order-unchecked", "patchkit/diff/diffs.py",
      "    _check_order(files, source)\n", "",
      [ORDER],
      "a file section whose hunks are out of line order is judged (a pristine tree read as drifted)"),
    m("hunk-order-old-side-only", "patchkit/diff/diffs.py",
      '        ("new", later.new_start, later.new_len, earlier.new_start, earlier.new_len),\n', "",
      [f"{ORDER}::test_hunks_in_line_order_on_the_old_side_only_are_refused"],
      "hunks whose new sides overlap (what a revert reads) pass the order check"),
    m("hunk-order-fast-path-overlap", "patchkit/diff/diffs.py",
      "later.old_start >= earlier.old_start + earlier.old_len\n" + " " * 20
      + "and earlier.new_len and later.new_len and later.new_start >= earlier.new_start + earlier.new_len",
      "later.old_start >= earlier.old_start + earlier.old_len - 1\n" + " " * 20
      + "and earlier.new_len and later.new_len and later.new_start >= earlier.new_start + earlier.new_len - 1",
      [f"{ORDER}::test_overlapping_hunks_are_refused"],
      "the order check's common case (off by one on both sides) lets a hunk that starts on the last line of the one "
      "before it through"),
    m("hunk-order-insertion-takes-its-neighbours", "patchkit/diff/hunks.py",
      "        return 2 * start + 1, 2 * start + 1\n", "        return 2 * start - 1, 2 * start + 1\n",
      [f"{ORDER}::test_insertions_before_and_after_line_1_are_in_line_order"],
      "an insertion (-N,0) is taken to cover the lines on both sides of it: git's -U0 insertions before and "
      "after line 1 are refused"),
    m("compiled-hunk-order-unchecked", "patchkit/diff/compiled.py",
      "if count > 1 and not (_in_line_order(", "if False and not (_in_line_order(",
      ["tests/test_compiled.py::test_a_hostile_compiled_file_is_ignored"],
      "a compiled hunk set whose hunks are out of line order is believed"),
    m("compiled-hunk-order-insertions-refused", "patchkit/diff/compiled.py",
      "    return all(later[0] > earlier[1] for earlier, later in pairwise(places))\n", "    return False\n",
      [f"{ORDER}::test_insertions_before_and_after_line_1_are_in_line_order"],
      "the compiled load refuses a file of several hunks with a side of no lines (git's -U0 insertions): the "
      "compile writes nothing"),
    m("rewrite-in-diff-order", "patchkit/judge/rewrite.py",
      "sorted(zip(hunks, located, strict=True), key=lambda hl: hl[1].pos or 0)", "zip(hunks, located, strict=True)",
      ["tests/test_ported.py::test_a_hunk_git_places_above_the_one_before_it_on_a_fingerprinted_image"],
      "the rewrite takes hunks in diff order: where git puts a hunk above the one before it (a fingerprinted "
      "image), the file is not git's"),
    # -------------------------------------------------------------------------------------------- trust
    m("trust-group-writable", "patchkit/input/trust.py",
      "_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH", "_OTHERS_WRITE = stat.S_IWOTH",
      [TRUST, RULE], "state (or anything the rule checks) writable by its group, not others, is trusted"),
    m("trust-owner-folders-only", "patchkit/input/trust.py",
      "    if not trusted_owner(st.st_uid):", "    if not trusted_owner(st.st_uid) and stat.S_ISDIR(mode):",
      [TRUST], "the owner check applies to folders only: another user's journal or record in root's folder is read"),
    m("trust-sticky-file", "patchkit/input/trust.py",
      "not (stat.S_ISDIR(mode) and mode & stat.S_ISVTX)", "not (mode & stat.S_ISVTX)",
      [RULE, "tests/test_untrusted_env.py::test_a_world_writable_sticky_interpreter_file_is_never_run"],
      "the sticky exception of folders taken for files: a 1777 interpreter is run, a 1777 record believed"),
    m("trust-no-sticky-folder", "patchkit/input/trust.py",
      "not (stat.S_ISDIR(mode) and mode & stat.S_ISVTX)", "True",
      [RULE], "a sticky folder of root's (/tmp) is refused like any world-writable one"),
    m("trust-own-user-only", "patchkit/input/trust.py",
      "return uid == 0 or uid == os.geteuid()", "return uid == os.geteuid()",
      [f"{RULE}::test_a_non_root_status_reads_roots_records",
       f"{RULE}::test_a_non_root_restart_is_answered_from_roots_records"],
      "root's state refused to a non-root user (invisible to a suite that runs only as root)"),
    m("trust-link-trusted", "patchkit/input/trust.py",
      "    if stat.S_ISLNK(mode):\n        return Refusal(shown, Flaw.LINK, st.st_uid, mode)\n", "",
      [f"{RULE}::test_a_link_is_refused_at_the_end_and_on_the_way"],
      "a link checked by its lstat (or opened as O_PATH) is trusted"),
    m("trust-state-file-unchecked", "patchkit/workspace/trust.py",
      "        if stat.S_ISREG(st.st_mode):\n            check_trusted(st, shown, state_path)\n",
      "        pass\n",
      [TRUST, "tests/test_untrusted_state.py"], "a state file is read without checking its owner and mode"),
    m("trust-nested-folder-unchecked", "patchkit/workspace/trust.py",
      "fd = trusted_fd(child, str(shown), state_path)", "fd = child",
      [TRUST], "a folder under .patchkit (applied/) is used without checking its owner and mode"),
    m("git-dir-unvetted", "patchkit/run/provenance.py",
      "        check_trusted(st, shown, Path(shown))\n", "        pass\n",
      ["tests/test_git_trust.py"], "git runs on a .git the tree's owner owns or others may write"),
    m("git-objects-subfolders-unvetted", "patchkit/input/sealedgit.py",
      "        if vet is not None:\n            _vet_subfolders(", "        if False:\n            _vet_subfolders(",
      ["tests/test_git_trust.py"], "git reads objects from a pack or fan-out folder another user may write"),
    m("compiled-trust-rule-skipped", "patchkit/diff/compiled.py",
      "refusal(st, str(spec.diff_path)) is None", "True",
      ["tests/test_compiled.py"], "a compiled hunk set another user owns or may write is believed"),
    m("compiled-binding-ignored", "patchkit/diff/compiled.py",
      'header.get("binding") != binding', "False",
      ["tests/test_compiled.py"], "a compiled hunk set made for another diff, manifest or patchkit is believed"),
    m("compiled-path-unchecked", "patchkit/diff/compiled.py",
      "            check_path(path)\n        # The file's hunk rows", "        # The file's hunk rows",
      ["tests/test_compiled.py"], "a compiled hunk set may name a path outside the root"),
    m("compiled-flags-first-row-only", "patchkit/diff/compiled.py",
      "max(flag_column) > 3", "max(flag_column[:1]) > 3",
      ["tests/test_compiled.py::test_a_hostile_compiled_file_is_ignored"],
      "a compiled hunk set's column checks (the flat rows) judge only its first hunk"),
    m("compiled-context-past-image", "patchkit/diff/compiled.py",
      "and all(map(le, trailings, old_lens)) and all(map(le, trailings, new_lens))", "and True",
      ["tests/test_compiled.py::test_a_hostile_compiled_file_is_ignored"],
      "a compiled hunk row whose trailing context is longer than its images is believed"),
    m("compiled-pinned-hunk-set-unchecked", "patchkit/diff/filtering.py",
      "spec.hunkset_sha256 is None or spec.hunkset_sha256 == hunk_set.digest", "True",
      ["tests/test_compiled.py::test_a_lying_compiled_file_is_not_believed_against_a_pinned_hunk_set"],
      "a compiled hunk set is believed against the manifest's hunkset_sha256"),
    m("compiled-digest-always", "patchkit/diff/filtering.py",
      "spec.hunkset_sha256 is None or spec.hunkset_sha256 == hunk_set.digest",
      "spec.hunkset_sha256 in (None, hunk_set.digest)",
      ["tests/test_compiled.py::test_a_first_text_status_from_the_compiled_file_hashes_no_hunk_set"],
      "a first text status from the compiled set hashes the whole hunk set it never prints"),
    m("fast-path-trusts-other-owner", "patchkit/run/fastpath.py",
      "child = open_trusted_child(fd, name, shown, folder=not last, flags=_READ_FLAGS if last else None)",
      "child = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=fd)",
      [f"{FAST}::test_a_record_owned_by_another_user_is_not_trusted"],
      "the restart fast path reads its record without the trust rule"),
    # ------------------------------------------------------------------------------------------ journal
    m("journal-any-root", "patchkit/workspace/journal.py",
      "if written_for != os.fsdecode(root) and written_ino != root_ino:",
      "if written_for != os.fsdecode(root) and written_ino == root_ino:",
      ["tests/test_untrusted_state.py::test_a_journal_moved_in_from_another_tree_is_refused_but_a_moved_tree_recovers"],
      "a journal written for another root is replayed here"),
    m("journal-moved-tree-refused", "patchkit/workspace/journal.py",
      "if written_for != os.fsdecode(root) and written_ino != root_ino:",
      "if written_for != os.fsdecode(root) or written_ino != root_ino:",
      ["tests/test_untrusted_state.py::test_a_journal_moved_in_from_another_tree_is_refused_but_a_moved_tree_recovers"],
      "a tree mounted at another path can no longer recover its own journal"),
    m("journal-duplicate-paths", "patchkit/workspace/journal.py",
      "if len({(e.area, e.path) for e in entries}) != len(entries):", "if False:",
      ["tests/test_recovery_checks.py::test_a_journal_that_lists_a_path_twice_is_not_replayed"],
      "a journal listing one path twice is replayed"),
    m("journal-reserved-tree-path", "patchkit/workspace/journal.py",
      "if any(reserved_name(p) is not None for p in parts):", "if False:",
      [WORKSPACE], "a journal may name paths inside .git or .patchkit"),
    m("journal-blob-bound", "patchkit/workspace/journal.py",
      "if offset + size > len(body):", "if offset + size >= len(body):",
      [WORKSPACE, CRASH], "the last blob of the journal (ending at its end) is called truncated"),
    m("journal-state-name-reserved", "patchkit/workspace/journal.py",
      "if parts[0] in RESERVED_STATE_NAMES or any(", "if any(",
      [WORKSPACE], "a journal may overwrite patchkit's own lock or journal in .patchkit"),
    # ---------------------------------------------------------------------------------------- signals
    m("signal-ignored-sigint-counted", "patchkit/workspace/interrupts.py",
      "return any(signal.getsignal(sig) is not signal.SIG_IGN for sig in signal.sigpending() & HELD)",
      "return bool(signal.sigpending() & HELD)",
      ["tests/test_hostile_fs.py::test_a_signal_the_run_was_started_ignoring_does_not_stop_the_write[INT]"],
      "a SIGINT the run was started ignoring (blocked, so pending) rolls the write back with exit 7"),
    m("signal-ignored-sigterm-overridden", "patchkit/workspace/interrupts.py",
      "if signal.getsignal(signal.SIGTERM) is signal.SIG_IGN:", "if False:",
      ["tests/test_hostile_fs.py::test_a_signal_the_run_was_started_ignoring_does_not_stop_the_write[TERM]"],
      "an ignored SIGTERM is made an interrupt again: the write is rolled back with exit 143"),
    # ----------------------------------------------------------------------------------------- recovery
    m("recovery-kept-unchecked", "patchkit/workspace/recovery.py",
      "differs = _differences(kept, entry.original)", 'differs = ""',
      ["tests/test_recovery_checks.py::test_a_kept_link_swapped_by_the_tree_owner_is_never_restored",
       "tests/test_moved_folders.py::test_a_kept_original_replaced_by_another_file_is_not_put_back"],
      "rollback renames back whatever file sits at the kept .orig name"),
    m("recovery-kept-inode-only", "patchkit/workspace/recovery.py",
      '("size", kept.st_size, original.size),\n        ("mtime_ns", kept.st_mtime_ns, original.mtime_ns),', "",
      ["tests/test_moved_folders.py::test_a_kept_original_changed_in_place_is_not_put_back"],
      "the kept original is compared with the journal by its inode number alone (a freed number is reused)"),
    m("recovery-forward-on-any", "patchkit/workspace/recovery.py",
      "if all(_written(roots, e) for e in entries):",
      "if any(_written(roots, e) for e in entries):",
      ["tests/test_recovery_checks.py::test_recovery_says_forward_only_for_a_tree_that_is_whole_after", CRASH],
      "recovery rolls forward when some (not all) files are written"),
    m("recovery-folders-parents-first", "patchkit/workspace/recovery.py",
      'key=lambda item: item[1].count("/"), reverse=True)', 'key=lambda item: item[1].count("/"))',
      [CRASH, WORKSPACE], "rollback removes created folders parents first: the nested ones stay behind"),
    m("recovery-same-ignores-mode", "patchkit/workspace/recovery.py",
      "return (snap.data, snap.mode) == (other.data, other.mode)", "return snap.data == other.data",
      ["tests/test_recovery_checks.py::test_a_rollback_without_its_kept_links_restores_modes_too"],
      "a file whose bytes are back but whose mode is not counts as restored"),
    # ---------------------------------------------------------------------------------------- fast path
    m("fast-path-ignores-mode", "patchkit/run/fastpath.py",
      'snap.mode == want.get("mode")\n        and ', "",
      [FAST], "the restart fast path misses a file whose mode changed"),
    m("fast-path-size-only", "patchkit/run/fastpath.py",
      '\n        and _sha256(snap.data) == want.get("sha256")', "",
      [FAST], "the restart fast path compares sizes, not contents"),
    m("fast-path-ignores-series", "patchkit/run/fastpath.py",
      'or block.get("series") != [list(e) for e in series]:', ":",
      [f"{FAST}::test_the_series_fast_path_holds_only_for_the_same_series"],
      "a record written by another series vouches for this one"),
    m("fast-path-unsealed", "patchkit/run/fastpath.py",
      "if not _sealed(data):", "if False:",
      [FAST], "an edited record (seal broken) still vouches"),
    # ------------------------------------------------------------------------------------- restart entry
    m("restart-entry-skips-diff-digest", "patchkit/cli/restart.py",
      "return hashlib.sha256(manifest).hexdigest(), hashlib.sha256(data).hexdigest()",
      'return hashlib.sha256(manifest).hexdigest(), str(facts.get("diff_sha256"))',
      [f"{ENTRY}::test_any_change_the_records_do_not_vouch_for_falls_through[diff]"],
      "the restart entry believes the sealed record's diff digest instead of hashing the diff"),
    m("restart-entry-skips-manifest-digest", "patchkit/cli/restart.py",
      "series.append([pid, *digests])", "series.append([pid, claimed[pid][1], digests[1]])",
      [f"{ENTRY}::test_any_change_the_records_do_not_vouch_for_falls_through[manifest]"],
      "the restart entry takes the manifest digest the record claims instead of hashing the manifest"),
    m("restart-entry-skips-code", "patchkit/run/fastpath.py",
      'if block.get("code") != code_fingerprint() or', "if",
      [f"{ENTRY}::test_any_change_the_records_do_not_vouch_for_falls_through[code]"],
      "records written by other code (another patchkit, another Python) vouch"),
    m("restart-entry-unsealed", "patchkit/run/fastpath.py",
      "if not _sealed(data):", "if False:",
      [f"{ENTRY}::test_any_change_the_records_do_not_vouch_for_falls_through[record]"],
      "the restart entry answers from an edited record"),
    m("restart-entry-ignores-files", "patchkit/run/fastpath.py",
      "if not all(_file_is(snap, files[path]) for path, snap in found):", "if False:",
      [f"{ENTRY}::test_any_change_the_records_do_not_vouch_for_falls_through[engine file]"],
      "the restart entry answers for an engine file edited since the apply"),
    m("restart-entry-trusts-other-owner", "patchkit/run/fastpath.py",
      "child = open_trusted_child(fd, name, shown, folder=not last, flags=_READ_FLAGS if last else None)",
      "child = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=fd)",
      [f"{ENTRY}::test_a_record_owned_by_another_user_falls_through"],
      "the restart entry reads its records without the trust rule"),
    m("restart-entry-ignores-journal", "patchkit/cli/restart.py",
      "if _journal_pending(state):", "if False:",
      [f"{ENTRY}::test_a_journal_pending_falls_through_and_is_recovered"],
      "the restart entry answers while an interrupted transaction's journal waits for recovery"),
    m("restart-entry-no-lock", "patchkit/cli/restart.py",
      "fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)", "pass",
      [f"{ENTRY}::test_a_busy_lock_falls_through"],
      "the restart entry reads the records while a writer holds the root's lock"),
    m("restart-entry-ignores-git", "patchkit/cli/restart.py",
      'if any(facts.get("pinned_commit") is not None and has_git for _, facts in answers):', "if False:",
      [f"{ENTRY}::test_a_pinned_checkout_falls_through_and_a_pinned_tree_without_git_answers"],
      "the restart entry says `base unknown` for a pinned git checkout, whose HEAD the full path compares"),
    m("restart-entry-ignores-strays", "patchkit/cli/restart.py",
      'elif not name.startswith(".") and (os.path.isdir(folder) or os.path.exists(manifest)):\n            return []',
      'elif False:\n            return []',
      [f"{ENTRY}::test_a_registry_the_records_do_not_name_falls_through"],
      "the restart entry answers where the full path warns of a stray folder"),
    m("restart-entry-root-as-given", "patchkit/cli/restart.py",
      "pieces = render(request, root, vouched, has_git, reports)",
      "pieces = render(request, request.root, vouched, has_git, reports)",
      [f"{ENTRY}::test_the_root_and_registry_may_come_from_the_environment_or_relative"],
      "the restart entry's --json names the root as given, not as the full path resolves it"),
    m("restart-entry-series-words", "patchkit/cli/restart.py",
      'every = "the only patch is" if count == 1 else f"all {count} patches are"',
      'every = f"all {count} patches are"',
      [f"{ENTRY}::test_a_series_of_one_reads_alike"],
      "the restart entry's series line for a series of one reads unlike the full path's"),
    # -------------------------------------------------------------------------------- first-status entry
    m("status-entry-drops-verbose", "patchkit/cli/patch_run.py",
      "verbose=asked.verbose, ", "",
      [f"{STATUS_ALIKE}[unapplied-one patch--v]"],
      "the first-status entry answers `status -v` without the per-hunk table"),
    m("status-entry-silent-errors", "patchkit/cli/patch_run.py",
      "        return error_code(exc)", "        return 2",
      [f"{STATUS_ENTRY}::test_errors_and_warnings_read_alike[unknown patch-text]"],
      "the first-status entry ends an error with a code and no words, unlike the full CLI's boundary"),
    m("status-entry-ignores-environment", "patchkit/cli/argv.py",
      "    if any(name in os.environ for name in FULL_ENV):\n        return True\n", "",
      [f"{STATUS_FALLS}[FORCE_COLOR]"],
      "the entries answer under FORCE_COLOR (or $PATCHKIT_TARGET ...), which the full CLI reads"),
    m("status-entry-quiet-and-verbose", "patchkit/cli/argv.py",
      'if {"-q", "-v"} <= flags:', "if False:",
      [f"{STATUS_FALLS}[-q -v]"],
      "the first-status entry answers `-q -v`, which the full CLI refuses as a usage error"),
    m("echo-keeps-escapes", "patchkit/speak/console.py",
      'message = _ANSI.sub("", message)', "pass",
      [f"{WRITER}[utf-8-out-None]"],
      "console.echo leaves click.style's escapes in text for a pipe, which click.echo strips"),
    m("echo-ascii-stream-own-writer", "patchkit/speak/console.py",
      "or _ascii(stream.encoding) or", "or",
      [f"{WRITER}[ascii-out-None]"],
      "console.echo writes to an ASCII stream itself, where click.echo rewraps it (UTF-8, errors replaced)"),
    m("style-wrong-colour", "patchkit/speak/console.py",
      '"yellow": 33', '"yellow": 34',
      [f"{STATUS_ENTRY}::test_the_report_colours_are_clicks"],
      "the report's yellow words take another code than click.style's"),
    m("shown-verdicts-unchecked", "patchkit/run/fastpath.py",
      "if data is None or _sha256(data) != vouched.shown:", "if data is None:",
      [f"{UNSEALED_SHOWN}[entry-changed]", f"{UNSEALED_SHOWN}[cli-changed]"],
      "a --json restart prints the kept verdicts without checking them against the sha256 the record seals"),
    m("shown-verdicts-untrusted", "patchkit/run/fastpath.py",
      'data = read_trusted(root_fd, root, f"{STATE_DIR}/{shown_name(vouched.record.patch)}")',
      'data = (root / STATE_DIR / shown_name(vouched.record.patch)).read_bytes()',
      [f"{UNSEALED_SHOWN}[entry-not ours]", f"{UNSEALED_SHOWN}[entry-a link]"],
      "a --json restart reads the kept verdicts without the trust rule (another owner's file, a link)"),
    m("shown-verdicts-never-read", "patchkit/run/fastpath.py",
      "shown = read_shown(root_fd, root, vouched)", "shown = None",
      [f"{ENTRY}::test_a_json_restart_prints_the_shown_verdicts_the_record_seals"],
      "a --json restart (the entry and the CLI's fast path: their one choice) decodes and renders the recorded "
      "verdicts again instead of printing the kept ones"),
    m("shown-verdicts-not-printed", "patchkit/cli/restart.py",
      '"files": RawJSON(shown_files(report))', '"files": RawJSON(shown_files(report._replace(shown=None)))',
      [f"{ENTRY}::test_a_json_restart_prints_the_shown_verdicts_the_record_seals[entry-single]",
       f"{ENTRY}::test_a_json_restart_prints_the_shown_verdicts_the_record_seals[entry-series]"],
      "the restart entry renders the recorded verdicts again instead of printing the kept ones"),
    m("shown-verdicts-not-printed-cli", "patchkit/speak/report.py",
      "return RawJSON(shown_files(outcome.recorded))",
      "return RawJSON(shown_files(outcome.recorded._replace(shown=None)))",
      [f"{ENTRY}::test_a_json_restart_prints_the_shown_verdicts_the_record_seals[cli-single]"],
      "the CLI's fast path renders the recorded verdicts again instead of printing the kept ones"),
    m("shown-verdicts-without-rows", "patchkit/run/fastpath.py",
      "if shown is not None and not rows and excluded is not None:", "if shown is not None and excluded is not None:",
      [f"{FAST}::test_every_output_mode_is_answered_from_the_record_byte_for_byte[verbose]"],
      "a -v restart on the CLI's fast path takes the kept JSON text and prints no row per hunk"),
    m("shown-verdicts-nothing-excluded", "patchkit/run/fastpath.py",
      "excluded = _excluded_paths(vouched.restart)", "excluded: tuple[str, ...] | None = ()",
      [FAST, ENTRY],
      "a --json restart on the CLI's fast path says nothing was excluded, beside the kept verdicts"),
    m("shown-verdicts-kept-after-revert", "patchkit/run/records.py",
      "return dict.fromkeys((*record_names(patch_id), shown_name(patch_id)))",
      "return dict.fromkeys(record_names(patch_id))",
      [f"{ENTRY}::test_an_apply_keeps_the_shown_verdicts_and_a_revert_removes_them"],
      "a revert leaves the kept verdicts of the patch it took out in the state folder"),
    # --------------------------------------------------------------------------------------- lint rules
    m("pk204-claimed-waiver", "patchkit/lint/rules.py",
      "if number is None or lint_input.is_claimed(number):\n        return []",
      "if number is None:\n        return []",
      [f"{EDGES}::test_a_waiver_another_patch_claims_is_not_called_misnamed"],
      "PK204 fires on a waiver that another patch's introduced_by rightly claims"),
    m("pk211-never", "patchkit/lint/rules.py",
      "if spec.introduced_by is not None and spec.introduced_by == spec.upstream.pr:",
      "if spec.introduced_by is not None and spec.introduced_by == spec.upstream.pr and False:",
      [LINT_POLICY], "PK211 misses introduced_by = the upstream PR number"),
    m("pk209-orphan-unreported", "patchkit/lint/rules.py",
      "        if number is None or lint_input.is_claimed(number):\n            continue",
      "        if True:\n            continue",
      ["tests/test_lint_scenarios.py::test_a_removed_patch_leaves_an_orphan_waiver"],
      "PK209 never reports a waiver no manifest points at"),
    m("pk208-one-file-names-a-glob", "patchkit/lint/rules.py",
      "return bool(matched) and all(_mentions(text, path) for path in matched)",
      "return bool(matched) and any(_mentions(text, path) for path in matched)",
      [f"{EDGES}::test_a_glob_exclude_is_documented_only_by_naming_every_file_it_matches"],
      "PK208 takes naming one of the files a glob exclude matches as documenting all of them"),
    m("pk206-local-needs-no-word", "patchkit/lint/rules.py",
      'if not re.search(r"\\blocal\\b", without_ids, re.IGNORECASE):', "if False:",
      [LINT_POLICY, "tests/test_lint_scenarios.py"],
      "PK206 accepts a local patch's waiver that never says it is local"),
    # ------------------------------------------------------------------------------------ scan coverage
    m("cover-baseline-inverted", "patchkit/lint/coverage.py",
      "if site.fingerprint in lint_input.baselined:", "if site.fingerprint not in lint_input.baselined:",
      [LINT_CONSUMER, LINT_SCAN], "a site the baseline accepts counts as uncovered, and the rest as baselined"),
    m("cover-names-longer-file", "patchkit/lint/coverage.py",
      r'pattern = r"(?<![\w.\-/])(?:\./|/)?" + re.escape(path) + r"(?![\w/\-]|\.\w)"',
      r'pattern = r"(?<![\w.\-/])(?:\./|/)?" + re.escape(path)',
      [f"{EDGES}::test_a_waiver_naming_a_longer_file_name_does_not_cover_the_site"],
      "a waiver naming `fix.sh.bak` or `fix.shx` covers `fix.sh`"),
    m("cover-link-anchor", "patchkit/lint/coverage.py",
      'target = target.split("#", 1)[0].split("?", 1)[0]', 'target = target.split("?", 1)[0]',
      [f"{LINT_CONSUMER}::test_naming_the_file_in_a_waiver_covers_its_sites"],
      "a link to the file with a `#L7` anchor no longer names it"),
    m("scan-sed-in-place", "patchkit/scan/rules.py",
      '_SED_IN_PLACE = re.compile(r"-[nrsuEz]*i.*")', '_SED_IN_PLACE = re.compile(r"-i.*")',
      [LINT_SCAN, LINT_CONSUMER], "`sed -ni` / `sed -Ei` edits of engine files are not patch sites"),
    m("scan-tmp-is-engine", "patchkit/scan/rules.py",
      '_SCRATCH_PREFIXES = ("/tmp/", "/var/tmp/",', '_SCRATCH_PREFIXES = ("/var/tmp/",',
      [f"{EDGES}::test_patching_in_a_scratch_folder_under_tmp_is_not_a_patch_site"],
      "patching under /tmp is reported as patching the engine"),
    # ------------------------------------------------------------------------------------------------ port
    m("port-stale-pin-ignored", "patchkit/tooling/port.py",
      "    check_hunkset_pin(spec, hunk_set)  # as status", "    # as status",
      [f"{PORT}::test_a_stale_hunkset_pin_is_refused_as_status_refuses"],
      "port runs on a manifest whose hunkset_sha256 is stale, where status refuses"),
    m("port-writes-into-the-tree", "patchkit/tooling/port.py",
      "resolve().is_relative_to(tree):", "resolve().is_relative_to(tree / '.nowhere'):",
      [f"{PORT}::test_port_never_writes_into_the_engine_tree"], "--output inside --root is written"),
    m("port-earlier-output-clobbered", "patchkit/tooling/port.py",
      "    there = next((p for p in files if os.path.lexists(p)), None)",
      "    there = next((p for p in files[:1] if os.path.lexists(p)), None)",
      [f"{PORT}::test_a_reject_with_hunk_excludes_and_an_earlier_port_is_never_written_over"],
      "an earlier port's reject folder or manifest does not stop a second port"),
    m("port-rejects-reject-all", "patchkit/tooling/port.py",
      "rejected = [row for hunk, _, report in located if not report.placed for row in _body_rows(lines, hunk)]",
      "rejected = [row for hunk, _, report in located for row in _body_rows(lines, hunk)]",
      [f"{PORT}::test_a_hunk_that_fits_nowhere_gets_git_s_reject_file_and_the_placed_hunks_a_diff"],
      "the reject file holds the placed hunks too"),
    m("port-manifest-keeps-excludes", "patchkit/tooling/port.py",
      "    if spec.excludes:\n        table", "    if False:\n        table",
      [f"{PORT}::test_hunk_excludes_port_to_the_filtered_set_and_a_repinned_manifest"],
      "the ported manifest keeps excludes that name nothing (or another hunk) in the ported diff"),
    # ------------------------------------------------------ issue #32: reads, the lock, the tree changed mid-write
    m("lock-readable-by-others", "patchkit/workspace/trust.py",
      "LOCK_FILE_MODE = 0o600", "LOCK_FILE_MODE = 0o644",
      ["tests/test_lock_others.py::test_another_user_cannot_open_the_lock_so_cannot_stall_an_apply"],
      "the lock file is 0644 again: another user opens it and holds it, and every start waits and fails"),
    m("lock-timeout-per-lock", "patchkit/workspace/lock.py",
      "deadline = start + wait.left()", "deadline = start + wait.timeout",
      ["tests/test_lock_others.py::test_the_lock_timeout_is_the_whole_wait_and_what_it_waits_for_is_said_once"],
      "--lock-timeout counts afresh for every lock a command takes (a start waited about twice as long)"),
    m("write-judged-bytes-unchecked", "patchkit/workspace/commit.py",
      "    return st if found == entry.before.data else None\n", "    return st\n",
      ["tests/test_write_mutations.py::test_an_edit_in_place_that_puts_the_mtime_back_is_seen"],
      "a same-size edit that put the mtime back, made before the kept link, is overwritten with exit 0"),
    m("write-kept-bytes-unchecked", "patchkit/workspace/commit.py",
      "(o.size, o.mtime_ns) or _as_judged(parent, entry.keep, entry) is None:", "(o.size, o.mtime_ns):",
      ["tests/test_write_mutations.py::test_an_edit_in_place_right_before_the_replace_is_kept_not_overwritten"],
      "an edit landing between the last check and the replace that puts the mtime back is lost with exit 0"),
    m("write-kept-unchecked-after-replace", "patchkit/workspace/commit.py",
      "        if entry.original is not None:\n            _check_kept(disk, parent, entry)\n", "",
      ["tests/test_write_mutations.py::test_an_edit_in_place_right_before_the_replace_is_kept_not_overwritten"],
      "an edit landing between the last check and the replace is lost with exit 0"),
    m("treediff-reads-by-path", "patchkit/tooling/treediff.py",
      "    snap = read_at(tree.fd, tree.path, path)\n",
      "    with open(tree.path / path, 'rb') as handle:\n"
      "        snap = Snapshot(path, handle.read(), stat.S_IMODE(info.st_mode))\n",
      ["tests/test_new_races.py::test_a_folder_swapped_for_a_link_after_the_walk_is_refused_and_never_read"],
      "new --from-tree reads a file by its path, following a link swapped in after the walk"),
    m("lock-waits-for-the-folder", "patchkit/workspace/lock.py",
      "wait, False, blocking=created)", "wait, False, blocking=True)",
      ["tests/test_lock_others.py::test_another_user_holding_the_root_folder_does_not_stall_a_later_apply"],
      "every writer waits for the root folder's lock, which any user who may open the root can hold"),
    m("write-deleted-file-back-unchecked", "patchkit/workspace/commit.py",
      "    back = _deleted_but_back(roots, entries)\n", "    back = None\n",
      ["tests/test_write_mutations.py::test_a_deleted_file_created_again_while_patchkit_finishes_is_not_exit_0"],
      "a file the patch deletes, created again while the transaction finishes, ends in exit 0"),
    m("write-remakes-a-gone-folder", "patchkit/workspace/commit.py",
      "{folder: mode for folder, mode in entry.folders if mode is None}", "dict(entry.folders)",
      ["tests/test_mutation_kills.py::test_a_folder_moved_out_mid_write_is_neither_made_again_nor_left_with_a_"
       "folder_of_ours"],
      "a folder the plan found and the tree's owner moved out mid-write is made again in the tree, and left there"),
    m("write-undoes-an-unbegun-entry", "patchkit/workspace/commit.py",
      "                             unbegun=True) from None", "                             unbegun=False) from None",
      ["tests/test_mutation_kills.py::test_a_modified_files_folder_moved_out_before_its_write_is_not_made_again_by_"
       "the_rollback"],
      "the rollback writes back the original of a file whose folder was gone before its write began, making the "
      "folder again in the tree"),
    m("write-empty-file-unread", "patchkit/workspace/commit.py",
      "found = os.pread(fd, len(data) + 1, 0)  #", "found = os.pread(fd, len(data) + 1, 0) if data else b\"\"  #",
      ["tests/test_mutation_kills.py::test_an_empty_file_written_is_read_back_too"],
      "another writer's bytes in an empty file patchkit just wrote pass the check after the write: exit 0"),
    m("gitignore-error-internal", "patchkit/workspace/commit.py",
      'GITIGNORE_NAME, b"*\\n", STATE_FILE_MODE)\n        except OSError as exc:',
      'GITIGNORE_NAME, b"*\\n", STATE_FILE_MODE)\n        except ZeroDivisionError as exc:',
      ["tests/test_hostile_fs.py::test_a_state_gitignore_that_cannot_be_written_is_a_clear_error_before_any_change"],
      "a .patchkit/.gitignore that cannot be written is an internal error (exit 10), not exit 7 naming the file"),
    m("journal-format-float", "patchkit/workspace/journal.py",
      'if _count(doc["format"]) != JOURNAL_FORMAT:', 'if doc["format"] != JOURNAL_FORMAT:',
      ["tests/test_recovery_checks.py::test_a_journal_with_a_forged_field_is_not_replayed"],
      "a journal whose format is 3.0, not the integer patchkit writes, is replayed"),
    # ------------------------------------------------------------------------ hostile shell (issue #32)
    m("pk405-a-warning", "patchkit/lint/findings.py",
      'SCAN_UNREADABLE = ("PK405", Severity.ERROR,', 'SCAN_UNREADABLE = ("PK405", Severity.WARNING,',
      [f"{HOSTILE_LINT}::test_a_script_with_a_nul_byte_fails_lint_a_data_file_does_not"],
      "a file lint cannot read is a warning the example CI workflow lets pass"),
    m("shell-words-unbounded", "patchkit/scan/bash.py",
      "starts, ends = self.spans.get(self.depth + SHOWN_DEPTH + 1, ((), ()))", "starts, ends = (), ()",
      [f"{LINT_SCAN}::test_20000_nested_substitutions_are_read_with_words_of_bounded_size"],
      "each level of `$($(...))` n deep holds the rest of the chain: n^2 characters"),
    m("fallback-substitutions-unread", "patchkit/scan/bash.py",
      "pending += [(inner, at, around + 1) for inner, at in substitutions]", "pending += []",
      [f"{LINT_SCAN}::test_an_error_tree_does_not_hide_the_commands_in_substitutions"],
      "one `x=$()` hides every command in a substitution of the script"),
    m("skipped-script-silent", "patchkit/scan/__init__.py",
      "problems += skipped_problem(path, data[:8192], len(data) > MAX_SCANNED_BYTES)", "problems += []",
      [f"{HOSTILE_LINT}::test_a_script_with_a_nul_byte_fails_lint_a_data_file_does_not"],
      "a script with a NUL byte is skipped in silence"),
    m("resolver-previous-round-only", "patchkit/scan/engine.py",
      "visible.setdefault(scope, {})[name] = fresh[scope][name]", "pass",
      [f"{LINT_SCAN}::test_a_long_chain_of_variables_in_file_order_is_followed_to_its_end"],
      "a chain of 7 assignments hides the engine path of its last name"),
)


# ----------------------------------------------------------------------------------------------- running


@dataclass(frozen=True)
class Outcome:
    mutant: Mutant
    verdict: str  # killed, survived, stale, skipped (every named test skipped itself: not a kill)
    seconds: float
    detail: str = ""


def make_copy() -> Path:
    scratch = Path(tempfile.mkdtemp(prefix="patchkit-mutants-"))
    # The security tests run patchkit from here as an unprivileged user: it must be able to read the copy.
    os.chmod(scratch, 0o755)
    copy = scratch / "repo"
    shutil.copytree(REPO, copy, symlinks=True, ignore=SKIP)
    return copy


def env_for(copy: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PYTHONPATH"] = str(copy)
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # a same-size edit in the same second must never run a stale .pyc
    return env


def pytest_command(copy: Path, tests: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "--rootdir", str(copy),
            "-c", str(copy / "pyproject.toml"), *tests]


def probe(copy: Path) -> None:
    """Refuse to run unless the copy's patchkit (and tests) are what a run there imports."""
    code = "import patchkit, tests; print(patchkit.__file__); print(tests.__file__)"
    done = subprocess.run([sys.executable, "-c", code], cwd=copy, env=env_for(copy), capture_output=True,
                          text=True, check=False)
    seen = done.stdout.split()
    if done.returncode != 0 or len(seen) != 2 or not all(Path(p).is_relative_to(copy) for p in seen):
        raise SystemExit(f"mutants: the scratch copy is not what gets imported: {done.stdout}{done.stderr}")
    # And under pytest, both ways: an inert edit (a comment) must survive, or the copy fails its tests for some
    # other reason and every mutant would look killed; an edit that breaks the copy's package must be killed,
    # or pytest imports another patchkit (the editable install) and every mutant would look survived.
    for verdict, edit in (("survived", "# mutants.py: an inert edit"), ("killed", "raise ImportError('canary')")):
        canary = Mutant("canary", "patchkit/__init__.py", "from __future__ import annotations",
                        f"from __future__ import annotations\n{edit}", (CANARY_TEST,), "canary")
        outcome = run_one(copy, canary)
        if outcome.verdict != verdict:
            raise SystemExit(f"mutants: the {verdict} canary ({edit!r}) was {outcome.verdict}; the scratch copy "
                             f"does not test its own code:\n{outcome.detail}")


def run_tests(copy: Path, tests: Sequence[str]) -> tuple[str, str]:
    """("passed" | "failed" | "skipped", the output's tail); skipped: nothing ran (e.g. root-only tests)."""
    done = subprocess.run(pytest_command(copy, tests), cwd=copy, env=env_for(copy), capture_output=True,
                          text=True, check=False)
    lines = (done.stdout + done.stderr).strip().splitlines()
    tail = "\n".join(lines[-15:])
    if done.returncode != 0:
        return "failed", tail
    summary = lines[-1] if lines else ""
    return ("skipped" if "skipped" in summary and "passed" not in summary else "passed"), tail


def apply_mutant(copy: Path, mutant: Mutant) -> str | None:
    """Write the mutated file into the copy; the original text to restore, or None when the snippet is stale."""
    path = copy / mutant.file
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    if text.count(mutant.find) != 1:
        return None
    path.write_text(text.replace(mutant.find, mutant.replace), encoding="utf-8")
    return text


def stale_reason(copy: Path, mutant: Mutant) -> str:
    path = copy / mutant.file
    if not path.is_file():
        return f"{mutant.file} does not exist"
    count = path.read_text(encoding="utf-8").count(mutant.find)
    return f"snippet found {count} times in {mutant.file} (must be exactly once)"


def run_one(copy: Path, mutant: Mutant) -> Outcome:
    started = time.monotonic()
    original = apply_mutant(copy, mutant)
    if original is None:
        return Outcome(mutant, "stale", 0.0, stale_reason(copy, mutant))
    try:
        result, tail = run_tests(copy, mutant.tests)
    finally:
        (copy / mutant.file).write_text(original, encoding="utf-8")
    verdict = {"failed": "killed", "passed": "survived", "skipped": "skipped"}[result]
    return Outcome(mutant, verdict, time.monotonic() - started, tail)


def select(args: argparse.Namespace) -> list[Mutant]:
    chosen = list(MUTANTS)
    if args.only:
        names = set(args.only)
        unknown = names - {mu.name for mu in MUTANTS}
        if unknown:
            raise SystemExit(f"mutants: no mutant named {', '.join(sorted(unknown))} (see --list)")
        chosen = [mu for mu in chosen if mu.name in names]
    if args.sample is not None:
        chosen = random.Random(args.seed).sample(chosen, min(args.sample, len(chosen)))
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--only", action="append", metavar="NAME", help="run this mutant (repeatable)")
    parser.add_argument("--sample", type=int, metavar="N", help="run N mutants chosen at random")
    parser.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    parser.add_argument("--no-baseline", action="store_true", help="skip the unmutated run of the named tests")
    parser.add_argument("--show", action="store_true", help="print how each killed mutant's tests failed too")
    parser.add_argument("--against", nargs="+", metavar="TEST",
                        help="run these tests instead of each mutant's own (to see which mutants they let through)")
    args = parser.parse_args(argv)
    names = [mu.name for mu in MUTANTS]
    if len(set(names)) != len(names):
        raise SystemExit("mutants: two mutants share a name")
    chosen = select(args)
    if args.against:
        chosen = [replace(mu, tests=tuple(args.against)) for mu in chosen]
    if args.list:
        stale = 0
        for mu in chosen:
            text = (REPO / mu.file).read_text(encoding="utf-8") if (REPO / mu.file).is_file() else ""
            found = text.count(mu.find)
            stale += found != 1
            mark = "" if found == 1 else f"  [STALE: snippet found {found} times]"
            print(f"{mu.name:34} {mu.file:32} {mu.what}{mark}\n{'':34} killed by {' '.join(mu.tests)}")
        print(f"{len(chosen)} mutants, {stale} stale")
        return 1 if stale else 0

    if args.sample is not None:
        print(f"a sample of {len(chosen)} of the {len(MUTANTS)} mutants, seed {args.seed} (rerun one: --only NAME)",
              flush=True)
    started = time.monotonic()
    copy = make_copy()
    try:
        probe(copy)
        if not args.no_baseline:
            tests = sorted({t for mu in chosen for t in mu.tests})
            print(f"baseline: {len(tests)} test selections on the unmutated copy ...", flush=True)
            result, tail = run_tests(copy, tests)
            if result == "failed":
                print(f"mutants: the named tests fail without any mutation:\n{tail}", file=sys.stderr)
                return 1
        outcomes: list[Outcome] = []
        for number, mutant in enumerate(chosen, 1):
            outcome = run_one(copy, mutant)
            outcomes.append(outcome)
            killed = sum(o.verdict == "killed" for o in outcomes)
            print(f"[{number}/{len(chosen)}] {outcome.verdict:8} {mutant.name} ({outcome.seconds:.1f} s; "
                  f"{killed} killed so far)", flush=True)
            if outcome.detail and (outcome.verdict != "killed" or args.show):
                print("    " + outcome.detail.replace("\n", "\n    "), flush=True)
    finally:
        shutil.rmtree(copy.parent, ignore_errors=True)
    counts = {v: sum(o.verdict == v for o in outcomes) for v in ("killed", "survived", "stale", "skipped")}
    total = len(outcomes)
    print(f"\n{counts['killed']}/{total} killed ({100 * counts['killed'] // max(total, 1)}%), "
          f"{counts['survived']} survived, {counts['stale']} stale, {counts['skipped']} not run (tests skipped: "
          f"the security tests need root), in {time.monotonic() - started:.0f} s")
    for o in outcomes:
        if o.verdict != "killed":
            print(f"  {o.verdict}: {o.mutant.name} ({o.mutant.file}): {o.mutant.what}")
    return 0 if counts["killed"] == total else 1


if __name__ == "__main__":
    sys.exit(main())
