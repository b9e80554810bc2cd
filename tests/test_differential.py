"""Differential test of the state judgement against real git and the ground truth of each tree (issues 16, 23).

Generators: small trees of source-like files with many repeated lines: synthetic (`}`, blank lines, `pass`) and
real-looking repetitive content (JSON lists of near-identical objects, C tables of kernels, parametrised test
functions); diffs made by real `git diff --no-index` with -U0..-U5, the myers, --patience, --histogram and
--minimal algorithms; trees derived from a diff's base B and target T by construction, so the true state and
the true place of every hunk are known: B, T, proper subsets of the hunks applied, each of them shifted by
lines inserted above or between hunks, and with planted copies of a hunk's pre- or post-image at several
distances above and below its real site (alone or with company); files touched twice in one diff (B -> M -> T
concatenated) and stacked patches of a series (`apply --all`).

Constructions by line identity (chain_example, same_line_example) add trees that drifted (unrelated edits,
inserts and deletions between the hunks, in the diff's files and in a file it never touches, some of them
planted copies of an image), so the diff's index blob ids prove nothing: B -> M -> T touched twice and as a
stacked series (the later step often edits right next to the earlier one, so its context is the earlier
post-image); the same diff with hunk excludes in either section, whose oracle is real `git apply` of a filtered
diff this file writes itself (headers placed by identity, filtered_diff), and `patchkit show` of that hunk set
must make the same tree; and a file whose pre- and post-image sit at the same line (a block inserted next to a
copy of itself: one more JSON list element, a duplicated test block) in a patch whose other files read one way
only, on pristine, patched and partial trees (only that file patched, only the others). Every diff with a file of
several hunks is also tried with two of them swapped (out_of_order): refused at load, nothing written.

Ported trees (issue #37, test_ported_trees_against_git): the diff made on C, judged on trees of an older or
newer image of the same history (lines added and removed around the hunks: offsets of 1 to 200 lines, files
shorter or longer; appended and prepended hunks, blocks that repeat their context, repeated blocks, copies of
an image), with and without the diff's `index` lines and with and without a `[base]` / `[base_applied]`
fingerprint of the ported image; over-caution is counted where real `git apply` applies cleanly (giving the
construction's tree) and the truth is certain. PATCHKIT_PORT_EXAMPLES sets their number (default 16), with
PATCHKIT_DIFF_SEED and PATCHKIT_DIFF_JOBS as above.

Oracles, never patchkit's own code: the construction (the true state, the true result of apply, revert and
--complete; a tree whose bytes another construction of the same example also gives has that one's truth too)
and real `git apply` on the same tree. Each tree counts as one of:
- wrong: `applied` / `unapplied` / `partial` when no construction of that tree has that state, a write that is
  not the construction's (nor git's, for a whole apply or revert), a refusal that writes, a tree that does not
  read as the write's goal afterwards. Must be zero: the test fails on any.
- ambiguous: `ambiguous` or `conflict` on a tree with a true state. Counted by what the tree holds: a planted
  copy (decoy), a look-alike the generator did not plant (an image of some hunk also at another place, in the
  tree or in the tree apply or revert makes of it), or neither (clean; a clean tree real git will not move
  either is counted apart); over-caution on clean trees is bounded (PATCHKIT_DIFF_MAX_OVER_CAUTIOUS).
- right: the true state, and every write exact.
Crashes (an exception, an exit code the command never gives here) must be zero.

Deterministic: PATCHKIT_DIFF_EXAMPLES (default 40 generated diffs, several trees each) and PATCHKIT_DIFF_SEED
choose the cases (each example draws from its own seed, so a run can be split); PATCHKIT_DIFF_JOBS runs the
examples in that many processes (default 1). A long run prints its progress and counts as it goes (so a killed
run still says how far it got and what it found), e.g. `PATCHKIT_DIFF_EXAMPLES=3000 PATCHKIT_DIFF_JOBS=2
pytest -s -q tests/test_differential.py`. Cost, measured: 300 examples (about 2,100 trees) take 40 s of CPU
(patchkit, git and the test together), so 3,000 take about 6 CPU minutes: some 3 minutes on 2 quiet cores.
"""

from __future__ import annotations

import difflib
import io
import itertools
import json
import multiprocessing
import os
import random
import re
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

from tests.conftest import Registry, cli, git, read_tree, write_tree

EXAMPLES = int(os.environ.get("PATCHKIT_DIFF_EXAMPLES", "40"))
JOBS = max(1, int(os.environ.get("PATCHKIT_DIFF_JOBS", "1")))
SEED = int(os.environ.get("PATCHKIT_DIFF_SEED", "0"))
# Over-caution on clean trees (no copy of any image anywhere) must stay rare: a hard bound, so that a regression
# towards refusing offsets fails the test.
MAX_OVER_CAUTIOUS = float(os.environ.get("PATCHKIT_DIFF_MAX_OVER_CAUTIOUS", "0.02"))

REPEATED = [b"}", b"", b"pass", b"    pass", b"    return x", b"{", b"else:", b"# note", b"x = 1", b"def f():"]
ALGORITHMS = ["", "--patience", "--histogram", "--minimal"]
CONTEXTS = [0, 1, 1, 2, 3, 3, 3, 4, 5]
STATUS_CODES = {"applied": 0, "unapplied": 3, "partial": 4, "conflict": 5, "ambiguous": 5}

Lines = list[bytes]


# --------------------------------------------------------------------------------------------- generators


KINDS = ["synthetic", "synthetic", "json", "kernels", "params"]


def random_line(rng: random.Random, i: int, kind: str = "synthetic") -> bytes:
    if kind == "json":  # one element of a JSON list of near-identical objects, and its brackets
        if rng.random() < 0.15:
            return rng.choice([b"  [", b"  ],", b"  {", b"  },"]) + b"\n"
        return b'    {"name": "k%d", "dtype": "%s", "tile": %d},\n' % (
            rng.randrange(6), rng.choice([b"fp16", b"bf16", b"fp8"]), rng.choice([64, 128]))
    if kind == "kernels":  # a C table of kernels, with the guards such tables have
        if rng.random() < 0.2:
            return rng.choice([b"#ifdef USE_ROCM", b"#endif", b"};", b"  // fallback"]) + b"\n"
        name = rng.choice([b"gemm", b"attn", b"norm"])
        return b"  {\"%s_%s\", %s_kernel<%d>, %d},\n" % (
            name, rng.choice([b"fp16", b"bf16"]), name, rng.choice([64, 128]), rng.randrange(3))
    if kind == "params":  # parametrised tests: the same few lines over and over
        return rng.choice([
            b'@pytest.mark.parametrize("n", [1, 2, 4])', b"def test_case(n):", b"    assert run(n) == n",
            b"", b"    x = setup()", b'@pytest.mark.parametrize("dtype", ["fp16", "bf16"])',
            b"def test_dtype(dtype):", b"    assert check(dtype)",
        ]) + b"\n"
    if rng.random() < 0.55:
        return rng.choice(REPEATED) + b"\n"
    return b"value_%d = compute(%d)\n" % (rng.randrange(40), i)


def random_file(rng: random.Random, kind: str = "synthetic") -> Lines:
    return [random_line(rng, i, kind) for i in range(rng.randint(6, 45))]


def random_edit(rng: random.Random, lines: Lines, kind: str = "synthetic") -> Lines:
    out = [line if line.endswith(b"\n") else line + b"\n" for line in lines]
    for _ in range(rng.randint(1, 4)):
        op = rng.choice(["replace", "insert", "delete", "move", "repeat"])
        at = rng.randrange(len(out) + 1)
        if op == "insert" or not out:
            out[at:at] = [random_line(rng, 100 + k, kind) for k in range(rng.randint(1, 3))]
        elif op == "replace":
            at = min(at, len(out) - 1)
            out[at:at + rng.randint(1, 2)] = [random_line(rng, 200 + k, kind) for k in range(rng.randint(1, 2))]
        elif op == "delete":
            del out[min(at, len(out) - 1):at + rng.randint(1, 2)]
        elif op == "move":  # a block move: both images of a hunk can then match
            size = rng.randint(2, 4)
            start = rng.randrange(max(len(out) - size, 0) + 1)
            block = out[start:start + size]
            del out[start:start + size]
            to = rng.randrange(len(out) + 1)
            out[to:to] = block
        else:  # a repeated block, next to its original
            size = rng.randint(1, 3)
            start = rng.randrange(max(len(out) - size, 0) + 1)
            out[start:start] = out[start:start + size]
    return out


def maybe_strip_newline(rng: random.Random, lines: Lines) -> Lines:
    """Some files end without a newline. The result is split again, so the list is exactly the file's lines."""
    if lines and rng.random() < 0.1:
        lines = [*lines[:-1], lines[-1].rstrip(b"\n")]
    return io.BytesIO(b"".join(lines)).readlines()


@dataclass(frozen=True)
class Hunk:
    old_start: int
    old_len: int
    new_start: int
    new_len: int
    old: tuple[bytes, ...]
    new: tuple[bytes, ...]
    trailing: int
    text: tuple[bytes, ...]  # the hunk's lines in the diff, header included

    @property
    def old_index(self) -> int:
        return self.old_start if self.old_len == 0 else self.old_start - 1

    @property
    def new_index(self) -> int:
        return self.new_start if self.new_len == 0 else self.new_start - 1

    @property
    def growth(self) -> int:
        return self.new_len - self.old_len


@dataclass
class Section:
    path: str
    head: list[bytes] = field(default_factory=list)
    hunks: list[Hunk] = field(default_factory=list)


RE_GIT = re.compile(rb"^diff --git a/a/(\S+) b/b/(\S+)$")
RE_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def parse_sections(diff: bytes) -> list[Section]:
    """A minimal reading of git's own output (independent of patchkit's parser)."""
    sections: list[Section] = []
    body: list[bytes] = []
    header: re.Match[bytes] | None = None

    def close() -> None:
        if header is None:
            return
        old: list[bytes] = []
        new: list[bytes] = []
        kinds: list[bytes] = []
        for line in body:
            kind = line[:1]
            if kind == b"\\":
                if kinds[-1] in (b" ", b"-"):
                    old[-1] = old[-1].rstrip(b"\n")
                if kinds[-1] in (b" ", b"+"):
                    new[-1] = new[-1].rstrip(b"\n")
                continue
            kinds.append(kind)
            if kind in (b" ", b"-"):
                old.append(line[1:])
            if kind in (b" ", b"+"):
                new.append(line[1:])
        trailing = 0
        for kind in reversed(kinds):
            if kind != b" ":
                break
            trailing += 1
        g = header.groups()
        sections[-1].hunks.append(Hunk(
            int(g[0]), 1 if g[1] is None else int(g[1]), int(g[2]), 1 if g[3] is None else int(g[3]),
            tuple(old), tuple(new), trailing, (header.group(0) + b"\n", *body),
        ))

    for line in diff.splitlines(keepends=True):
        if m := RE_GIT.match(line.rstrip(b"\n")):
            close()
            header, body = None, []
            sections.append(Section(m.group(2).decode(), [line]))
        elif m := RE_HUNK.match(line):
            close()
            header, body = m, []
        elif header is not None:
            body.append(line)
        else:
            sections[-1].head.append(line)
    close()
    return sections


def subset_diff(sections: Sequence[Section], chosen: set[tuple[int, int]]) -> bytes:
    out: list[bytes] = []
    for s, section in enumerate(sections):
        hunks = [h for i, h in enumerate(section.hunks) if (s, i) in chosen]
        if hunks:
            out += section.head
            for h in hunks:
                out += h.text
    return b"".join(out)


def out_of_order(tally: Tally, work: Path, sections: Sequence[Section], tree: dict[str, bytes], label: str,
                 number: int) -> None:
    """The diff with the first two hunks of its first file of several swapped (a hand edit; git still applies it,
    each hunk searched around its own line): patchkit refuses it at load with the diff error, never a verdict,
    and writes nothing. No draw from the example's generator: the examples stay the same."""
    k = next((k for k, s in enumerate(sections) if len(s.hunks) > 1), None)
    if k is None:
        return
    out: list[bytes] = []
    for j, section in enumerate(sections):
        hunks = list(section.hunks)
        if j == k:
            hunks[:2] = hunks[1], hunks[0]
        out += section.head
        for h in hunks:
            out += h.text
    registry_path = work / f"patches-{number}-out-of-order"
    registry_path.mkdir()
    Registry(registry_path).add("p", b"".join(out), strip=2)
    code, after, said = run_patchkit(work, registry_path, "p", tree, "apply")
    tally.cases += 1
    if code == 2 and "in the order of their lines" in said and after == tree:
        tally.refused_order += 1
    else:
        tally.crashes.append(f"{label}: a diff with its hunks out of line order was not refused at load "
                             f"(exit {code}): {said[-200:]}")


def make_diff(work: Path, before: dict[str, Lines], after: dict[str, Lines], context: int, algorithm: str) -> bytes:
    for side, tree in (("a", before), ("b", after)):
        shutil.rmtree(work / side, ignore_errors=True)
        write_tree(work / side, {p: b"".join(lines) for p, lines in tree.items()})
    args = ["diff", "--no-index", "--no-color", "--no-renames", f"-U{context}"]
    return git(work, *args, *([algorithm] if algorithm else []), "a", "b", check=False).stdout


# ------------------------------------------------------------------------------------------ constructions


@dataclass(frozen=True)
class Variant:
    """A tree built from B by construction: which hunks are applied, and blocks inserted (B coordinates)."""

    name: str
    applied: frozenset[tuple[int, int]]  # (section, hunk) applied in this tree
    inserts: tuple[tuple[int, int, tuple[bytes, ...]], ...] = ()  # (section, B line, lines) inserted before it


def build(section: Section, s: int, base: Lines, applied: frozenset[tuple[int, int]],
          inserts: Sequence[tuple[int, int, tuple[bytes, ...]]]) -> tuple[Lines, list[int]]:
    """The file with `applied` hunks in their post-image and the inserts; and each hunk's true position."""
    lines = list(base)
    for i, h in reversed(list(enumerate(section.hunks))):
        if (s, i) in applied:
            lines[h.old_index:h.old_index + h.old_len] = h.new
    mine = sorted(((x, block) for sec, x, block in inserts if sec == s), key=lambda xb: xb[0])

    def to_current(x: int) -> int:  # a B line (not inside any hunk) -> its line in this tree, before inserts
        return x + sum(h.growth for i, h in enumerate(section.hunks)
                       if (s, i) in applied and h.old_index + h.old_len <= x)

    positions = []
    for i, h in enumerate(section.hunks):
        here = h.old_index + sum(g.growth for j, g in enumerate(section.hunks[:i]) if (s, j) in applied)
        positions.append(here + sum(len(block) for x, block in mine if x <= h.old_index))
    for x, block in reversed(mine):
        at = to_current(x)
        lines[at:at] = block
    return lines, positions


def insert_points(section: Section, n: int) -> list[int]:
    """B lines before which a block may go without touching any hunk (pinned hunks keep their file edge)."""
    bad: set[int] = set()
    for h in section.hunks:
        bad.update(range(h.old_index + 1, h.old_index + h.old_len))
        if h.old_start <= 1:
            bad.add(0)
        if h.trailing == 0:
            bad.add(n)
    return [x for x in range(n + 1) if x not in bad]


def usable_points(section: Section, base: Lines) -> list[int]:
    """insert_points, less the end of a file whose last line lacks its newline (a block put there would join
    that line, and the tree would not be B with lines added)."""
    n = len(base)
    return [x for x in insert_points(section, n) if x < n or not base or base[-1].endswith(b"\n")]


def occurrences(lines: Lines, image: Sequence[bytes], at_start: bool, at_end: bool) -> list[int]:
    m, n = len(image), len(lines)
    spots = range(n - m + 1)
    if at_start:
        spots = range(0, 1 if m <= n else 0)
    if at_end:
        spots = range(n - m, n - m + 1) if m <= n and (not at_start or n == m) else range(0)
    return [q for q in spots if tuple(lines[q:q + m]) == tuple(image)]


def images_elsewhere(lines: Lines, hunks: Sequence[Hunk], states: Sequence[bool], positions: Sequence[int]) -> bool:
    """Does an image of some hunk occur at a place other than the hunk's true one (pins ignored)?"""
    for h, applied, p in zip(hunks, states, positions, strict=True):
        for is_post, image in ((False, h.old), (True, h.new)):
            if image and any((is_post, q) != (applied, p) for q in occurrences(lines, image, False, False)):
                return True
    return False


# ------------------------------------------------------------------------------ constructions by identity

# For diffs whose sections build on each other (a file touched twice, a stacked series, hunk excludes) and
# trees that drifted between the hunks: every line of B gets an identity, and each hunk, read off git's own
# output, keeps the identities of its context lines and gives new ones to the lines it adds. A tree is built by
# applying a chosen set of hunks where their old lines (by identity) are, then the drift. No line number of the
# diff is used past its own section: the filtered diff's headers are where those identities sit.

IdLine = tuple[int, bytes]


@dataclass(frozen=True)
class Step:
    """One hunk of a diff: its path, section, number in its path (1-based, across the path's sections, as
    excludes count), and the identities of its old and new lines."""

    path: str
    section: int
    number: int
    hunk: Hunk
    old_ids: tuple[int, ...]
    new_ids: tuple[int, ...]


@dataclass(frozen=True)
class Drift:
    """An unrelated edit: the lines `delete` (identities, none of them any hunk's; `anchor` the first) replaced
    by `block`, or with none deleted, `block` inserted before the line `anchor`."""

    path: str
    anchor: int
    delete: tuple[int, ...]
    block: tuple[bytes, ...]


def with_ids(files: dict[str, Lines], fresh: Iterator[int]) -> dict[str, list[IdLine]]:
    return {p: [(next(fresh), line) for line in lines] for p, lines in files.items()}


def chain_steps(sections: Sequence[Section], base: dict[str, list[IdLine]], fresh: Iterator[int]) -> list[Step]:
    """Every hunk of the diff, in diff order, with the identities of its lines (each section read at its own
    header lines, on the file the sections before it made)."""
    current = {p: list(v) for p, v in base.items()}
    numbers: Counter[str] = Counter()
    steps: list[Step] = []
    for s, section in enumerate(sections):
        lines = current[section.path]
        mine: list[Step] = []
        for h in section.hunks:
            old = lines[h.old_index:h.old_index + h.old_len]
            assert tuple(b for _, b in old) == h.old, "the diff's header does not point at its old lines"
            olds = iter(i for i, _ in old)
            new_ids = []
            for kind in (line[:1] for line in h.text[1:]):
                if kind == b" ":
                    new_ids.append(next(olds))
                elif kind == b"-":
                    next(olds)
                elif kind == b"+":
                    new_ids.append(next(fresh))
            numbers[section.path] += 1
            mine.append(Step(section.path, s, numbers[section.path], h, tuple(i for i, _ in old), tuple(new_ids)))
        for step in reversed(mine):
            h = step.hunk
            lines[h.old_index:h.old_index + h.old_len] = list(zip(step.new_ids, h.new, strict=True))
        steps += mine
    return steps


def find_run(lines: Sequence[IdLine], ids: Sequence[int]) -> int | None:
    """Where the identities `ids` sit, in order and together (None: not so)."""
    at = next((k for k, (i, _) in enumerate(lines) if i == ids[0]), None)
    if at is None or tuple(i for i, _ in lines[at:at + len(ids)]) != tuple(ids):
        return None
    return at


def construct(base: dict[str, list[IdLine]], steps: Sequence[Step], applied: frozenset[int],
              drift: Sequence[Drift] = ()) -> dict[str, bytes] | None:
    """The tree with the hunks `applied` (indexes into steps) and the drift; None when a hunk's old lines are
    not there together (it builds on a hunk that is not applied)."""
    current = {p: list(v) for p, v in base.items()}
    for k, step in enumerate(steps):
        if k in applied and step.path in current:
            lines = current[step.path]
            at = find_run(lines, step.old_ids)
            if at is None:
                return None
            lines[at:at + len(step.old_ids)] = list(zip(step.new_ids, step.hunk.new, strict=True))
    for d in drift:
        lines = current[d.path]
        at = find_run(lines, d.delete or (d.anchor,))
        assert at is not None, "drift touches only lines no hunk has"
        lines[at:at + len(d.delete)] = [(-1, line) for line in d.block]
    return {p: b"".join(b for _, b in lines) for p, lines in current.items()}


def choose_drift(rng: random.Random, base: dict[str, list[IdLine]], steps: Sequence[Step], kind: str
                 ) -> tuple[Drift, ...]:
    """One to three unrelated edits (insert, replace, delete) on lines no hunk of any section has, in the
    diff's files or others; never the last line (it may lack its newline). A quarter of them plant a copy of
    some hunk's pre- or post-image."""
    used = {i for step in steps for i in step.old_ids}
    drift: list[Drift] = []
    taken: set[int] = set()
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(sorted(base))
        lines = base[path]
        free = [k for k in range(len(lines) - 1) if lines[k][0] not in used | taken]
        if not free:
            continue
        k = rng.choice(free)
        size = 0 if rng.random() < 0.4 else 1 + (rng.random() < 0.3)
        delete = tuple(i for i, _ in lines[k:k + size])
        if len(delete) < size or used.intersection(delete) or taken.intersection(delete) or k + size >= len(lines):
            size, delete = 0, ()
        block = tuple(random_line(rng, 600 + j, kind) for j in range(rng.randint(0 if size else 1, 3)))
        if steps and rng.random() < 0.25:  # a planted copy of some hunk's pre- or post-image
            h = rng.choice(steps).hunk
            block = tuple(line if line.endswith(b"\n") else line + b"\n" for line in rng.choice([h.old, h.new]))
        drift.append(Drift(path, lines[k][0], delete, block))
        taken.update({lines[k][0], *delete})
    return tuple(drift)


def filtered_diff(sections: Sequence[Section], steps: Sequence[Step], base: dict[str, list[IdLine]],
                  kept: frozenset[int]) -> bytes | None:
    """The diff without the hunks not `kept`, written out as git would read it: each kept hunk's header where
    its old lines sit in the file the kept hunks before it made (by identity), its new side moved by the kept
    hunks above it in its section. None when a kept hunk's old lines are not together there, or not at the end
    of the file for a hunk without trailing context (it builds on a dropped hunk: no header makes git apply
    it)."""
    current = {p: list(v) for p, v in base.items()}
    out: list[bytes] = []
    for s, section in enumerate(sections):
        lines = current[section.path]
        rows: list[bytes] = []
        placed: list[tuple[int, Step]] = []
        growth = 0
        for k, step in enumerate(steps):
            if step.section != s or k not in kept:
                continue
            h = step.hunk
            at = find_run(lines, step.old_ids)
            if at is None or (h.trailing == 0 and at + h.old_len != len(lines)):
                return None  # (git pins a hunk without trailing context to the end of the file)
            new_at = at + growth
            rows += [b"@@ -%d,%d +%d,%d @@\n" % (at + 1 if h.old_len else at, h.old_len,
                                                  new_at + 1 if h.new_len else new_at, h.new_len), *h.text[1:]]
            growth += h.growth
            placed.append((at, step))
        for at, step in reversed(placed):
            lines[at:at + len(step.old_ids)] = list(zip(step.new_ids, step.hunk.new, strict=True))
        if rows:
            out += [*section.head, *rows]
    return b"".join(out)


def truth_by_construction(base: dict[str, list[IdLine]], steps: Sequence[Step], tree: dict[str, bytes],
                          every: frozenset[int], choices: Sequence[frozenset[int]], drift: tuple[Drift, ...]
                          ) -> Truth:
    """Every state a construction that gives these very bytes has, with the trees apply and revert must give.

    The constructions: any set of the hunks `every` (all subsets of a file's, up to 6; else `choices`) with any
    part of the drift, file by file (a drift that plants an image can give the very bytes a hunk gives)."""
    options: list[list[tuple[frozenset[int], tuple[Drift, ...]]]] = []
    for path in sorted(tree):
        mine = frozenset(k for k in every if steps[k].path == path)
        sets = all_subsets(mine, [c & mine for c in choices])
        edits = [d for d in drift if d.path == path]
        parts = [tuple(c) for r in range(len(edits) + 1) for c in combinations(edits, r)]
        one = {path: base[path]}
        found = [(applied, part) for applied in sets for part in parts
                 if (built := construct(one, steps, applied, part)) is not None and built[path] == tree[path]]
        assert found, "the tree is one of the constructions"
        options.append(found)
    states: set[str] = set()
    forward: dict[str, list[dict[str, bytes]]] = {}
    reverse: dict[str, list[dict[str, bytes]]] = {}
    for combination in itertools.islice(itertools.product(*options), 64):
        applied = frozenset[int]().union(*(a for a, _ in combination))
        edits_used = tuple(d for _, part in combination for d in part)
        state = "unapplied" if not applied else "applied" if applied == every else "partial"
        states.add(state)
        for store, goal in ((forward, every), (reverse, frozenset[int]())):
            result = construct(base, steps, goal, edits_used)
            assert result is not None
            store.setdefault(state, []).append(result)
    return Truth(frozenset(states), forward, reverse)


def has_lookalike(trees: Sequence[dict[str, bytes] | None], steps: Sequence[Step], chosen: frozenset[int]) -> bool:
    """Does some image of a chosen hunk occur more than once, counting both images, in the tree or in the trees
    apply and revert make of it (the round trip reads those too), or the one between the sections of a file
    touched twice (the later section is judged on it)? A tree with one image of every hunk at one
    place, and the other nowhere, has none."""
    for tree in trees:
        assert tree is not None
        files = {p: io.BytesIO(data).readlines() for p, data in tree.items()}
        for k in chosen:
            h = steps[k].hunk
            if sum(len(occurrences(files[steps[k].path], image, False, False)) for image in {h.old, h.new}) > 1:
                return True
    return False


def all_subsets(every: frozenset[int], given: Sequence[frozenset[int]]) -> list[frozenset[int]]:
    if len(every) > 6:
        return list(dict.fromkeys([*given, frozenset(), every]))
    return [frozenset(c) for r in range(len(every) + 1) for c in combinations(sorted(every), r)]


def add_hunk_excludes(folder: Path, path: str, numbers: Sequence[int]) -> None:
    manifest = folder / "manifest.toml"  # [exclude] is the manifest's last table
    manifest.write_text(manifest.read_text() + f'"{path}" = {{ hunks = {sorted(numbers)}, reason = "not ported" }}\n')


# ------------------------------------------------------------------------------------------------ running


@dataclass
class Tally:
    cases: int = 0
    right: int = 0
    wrong: list[str] = field(default_factory=list)
    ambiguous: Counter[str] = field(default_factory=Counter)  # by what the tree holds: decoy, look-alike, clean
    trees: Counter[str] = field(default_factory=Counter)  # every tree, by the same groups
    crashes: list[str] = field(default_factory=list)
    verdicts: Counter[str] = field(default_factory=Counter)
    cautious_examples: list[str] = field(default_factory=list)
    refused_u0: int = 0
    refused_order: int = 0  # diffs with their hunks out of line order (out_of_order)
    examples: int = 0
    wrong_by: Counter[str] = field(default_factory=Counter)  # wrong trees by group
    # ported trees: those git applies cleanly (giving the construction's tree) with a certain truth, by group,
    # and how many of them patchkit refused (ambiguous or conflict): the over-cautious
    eligible: Counter[str] = field(default_factory=Counter)
    cautious: Counter[str] = field(default_factory=Counter)

    def add(self, other: Tally) -> None:
        self.cases += other.cases
        self.right += other.right
        self.wrong += other.wrong
        self.ambiguous.update(other.ambiguous)
        self.trees.update(other.trees)
        self.crashes += other.crashes
        self.verdicts.update(other.verdicts)
        self.cautious_examples += other.cautious_examples[: max(0, 50 - len(self.cautious_examples))]
        self.refused_u0 += other.refused_u0
        self.refused_order += other.refused_order
        self.examples += other.examples
        self.wrong_by.update(other.wrong_by)
        self.eligible.update(other.eligible)
        self.cautious.update(other.cautious)

    def rate(self, *groups: str) -> str:
        trees = sum(self.trees[g] for g in groups)
        doubted = sum(self.ambiguous[g] for g in groups)
        return f"{doubted}/{trees} ({100 * doubted / max(trees, 1):.2f}%)"

    def summary(self) -> str:
        return (
            f"differential seed {SEED}: {self.examples} examples, {self.cases} trees: {len(self.wrong)} wrong, "
            f"{sum(self.ambiguous.values())} ambiguous, {self.right} right, {len(self.crashes)} crashes; "
            f"ambiguous on clean trees {self.rate('clean')}, on trees without a planted copy "
            f"{self.rate('clean', 'look-alike')}, with one {self.rate('decoy')}, where git refuses too "
            f"{self.ambiguous['git refuses']}; "
            f"verdicts {dict(self.verdicts)}; {self.refused_u0} -U0 diffs and "
            f"{self.refused_order} with hunks out of line order refused at load; by group (ambiguous, "
            f"wrong): " + ", ".join(f"{g} {self.rate(g)} {self.wrong_by[g]}" for g in sorted(self.trees))
        )

    def ported_summary(self) -> str:
        """Ported trees: wrong, ambiguous by group, and over-cautious where git applies cleanly."""
        lines = [f"ported seed {SEED}: {self.examples} examples, {self.cases} trees: {len(self.wrong)} wrong, "
                 f"{sum(self.ambiguous.values())} ambiguous, {self.right} right, {len(self.crashes)} crashes"]
        lines += [f"  {g}: ambiguous {self.rate(g)}, wrong {self.wrong_by[g]}" for g in sorted(self.trees)]
        lines += [f"  over-cautious {g}: {self.cautious[g]}/{self.eligible[g]} "
                  f"({100 * self.cautious[g] / max(self.eligible[g], 1):.2f}%)" for g in sorted(self.eligible)]
        return "\n".join(lines)


@contextmanager
def scratch() -> Iterator[Path]:
    # tmpfs when there is one: every apply fsyncs, and this test writes thousands of small trees
    shm = Path("/dev/shm")
    with tempfile.TemporaryDirectory(prefix="pk-diff-", dir=shm if shm.is_dir() else None) as tmp:
        yield Path(tmp)


def git_result(work: Path, tree: dict[str, bytes], diff: bytes, *args: str) -> dict[str, bytes] | None:
    """What real `git apply -p2 [args]` makes of the tree (None when it refuses); an -pN in args replaces -p2."""
    root = work / "git"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    write_tree(root, tree)
    (work / "patch.diff").write_bytes(diff)
    strip = [] if any(a.startswith("-p") for a in args) else ["-p2"]
    done = git(root, "apply", *strip, *args, str(work / "patch.diff"), check=False)
    if done.returncode != 0:
        return None
    return {p: data for p, (data, _) in read_tree(root).items()}


def run_patchkit(work: Path, registry: Path, patch: str, tree: dict[str, bytes], *args: str
                 ) -> tuple[int, dict[str, bytes], str]:
    root = work / "engine"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    write_tree(root, tree)
    result = cli(*args[:1], patch, "--root", root, "--patches", registry, *args[1:])
    return result.code, {p: data for p, (data, _) in read_tree(root).items()}, result.out + result.err


@dataclass(frozen=True)
class Truth:
    """What the constructions of one tree say: its possible true states, and for each the trees apply and
    revert (and --complete) must give."""

    states: frozenset[str]
    forward: dict[str, list[dict[str, bytes]]]  # state -> acceptable results of apply / apply --complete
    reverse: dict[str, list[dict[str, bytes]]]


# The actions run on a tree, by its verdict: (command, extra arguments, does it write, the goal it moves to).
ACTIONS = {
    "unapplied": [("apply", (), True, "applied"), ("revert", ("--force",), False, None)],
    "applied": [("revert", ("--force",), True, "unapplied"), ("apply", (), False, None)],
    "partial": [("apply", (), False, None), ("apply", ("--complete",), True, "applied"),
                ("revert", ("--complete", "--force"), True, "unapplied")],
    "ambiguous": [("apply", ("--complete",), False, None), ("revert", ("--complete", "--force"), False, None)],
}
ACTIONS["conflict"] = ACTIONS["ambiguous"]


def judge_case(tally: Tally, work: Path, registry: Path, patch: str, label: str, diff: bytes,
               tree: dict[str, bytes], truth: Truth, group: str) -> str:
    """One tree: status, then the actions its verdict allows or refuses, each checked against the truth and git.
    Returns the verdict (`crash` when status failed)."""
    tally.cases += 1
    tally.trees[group] += 1
    code, _, out = run_patchkit(work, registry, patch, tree, "status", "--json")
    if code not in (0, 3, 4, 5):
        tally.crashes.append(f"{label}: status exit {code}: {out[-300:]}")
        return "crash"
    state = re.search(r'"state": "(\w+)"', out)
    assert state is not None
    verdict = state.group(1)
    tally.verdicts[verdict] += 1
    if STATUS_CODES[verdict] != code:
        tally.crashes.append(f"{label}: status {verdict} with exit {code}")
    problems: list[str] = []
    if verdict in ("ambiguous", "conflict"):
        if group == "clean" and truth.states in ({"unapplied"}, {"applied"}) and git_result(
            work, tree, diff, *(() if truth.states == {"unapplied"} else ("-R",))
        ) is None:
            group = "git refuses"  # git will not apply it either (a -U0 hunk at the start of a file, ...)
            tally.trees["clean"] -= 1
            tally.trees[group] += 1
        tally.ambiguous[group] += 1
        if group not in ("decoy", "look-alike") and not group.endswith("look-alike") \
                and len(tally.cautious_examples) < 50:
            doc = json.loads(out)
            doubts = [f"{f['path']} hunk {h['index']}: {h['detail']}" for f in doc["files"]
                      for h in f["hunks"] if h["state"] in ("ambiguous", "conflict")]
            doubts += [f"{f['path']}: {f['detail']}" for f in doc["files"]
                       if f["state"] in ("ambiguous", "conflict") and not f["hunks"]]
            tally.cautious_examples.append(
                f"{label} ({group}): {sorted(truth.states)} read {verdict}: {'; '.join(doubts)}")
    elif verdict not in truth.states:
        problems.append("a verdict that is not the tree's true state")
    for action, extra, writes, goal in ACTIONS[verdict]:
        if problems:
            break
        code, after, out = run_patchkit(work, registry, patch, tree, action, *extra)
        want_code = 0 if writes or verdict == ("applied" if action == "apply" else "unapplied") else 1
        what = f"{action} {' '.join(extra)}".strip()
        if code != want_code:
            (tally.crashes if code not in (0, 1) else problems).append(f"{what} exit {code}: {out[-300:]}")
            continue
        if not writes:
            if after != tree:
                problems.append(f"{what} wrote although it had nothing to write or refused")
            continue
        results = (truth.forward if action == "apply" else truth.reverse)[verdict]
        if after not in results:
            problems.append(f"{what} wrote a tree other than the construction's")
        if verdict != "partial":
            theirs = git_result(work, tree, diff, *(() if action == "apply" else ("-R",)))
            if after != theirs:
                problems.append(f"{what} wrote a tree other than `git apply{'' if action == 'apply' else ' -R'}`'s")
        assert goal is not None
        code, _, out = run_patchkit(work, registry, patch, after, "status")
        if code != STATUS_CODES[goal]:
            problems.append(f"after {what} the tree reads exit {code}, not {goal}")
    if problems:
        tally.wrong += [f"{label} ({group}, truth {sorted(truth.states)}, verdict {verdict}): {p}" for p in problems]
        tally.wrong_by[group] += 1
        progress(f"WRONG {tally.wrong[-1]}")
    elif verdict not in ("ambiguous", "conflict"):
        tally.right += 1
    return verdict


def progress(message: str) -> None:
    print(message, flush=True)


def state_of(applied: frozenset[tuple[int, int]], every: frozenset[tuple[int, int]]) -> str:
    return "unapplied" if not applied else "applied" if applied == every else "partial"


def one_example(tally: Tally, work: Path, rng: random.Random, number: int) -> None:
    kind = rng.choice(KINDS)
    paths = [f"src/engine/mod_{k}.py" for k in range(rng.randint(1, 3))]
    before = {p: maybe_strip_newline(rng, random_file(rng, kind)) for p in paths}
    after = {p: maybe_strip_newline(rng, random_edit(rng, before[p], kind)) for p in paths}
    if after == before:
        return
    context = rng.choice(CONTEXTS)
    algorithm = rng.choice(ALGORITHMS)
    diff = make_diff(work, before, after, context, algorithm)
    label = f"seed {SEED} example {number} ({kind}, -U{context} {algorithm or 'myers'})"
    registry_path = work / f"patches-{number}"
    registry_path.mkdir()
    Registry(registry_path).add("p", diff, strip=2)
    sections = parse_sections(diff)
    if context == 0 and any(h.old_start > 1 for s in sections for h in s.hunks):
        code, _, out = run_patchkit(work, registry_path, "p", {p: b"".join(v) for p, v in before.items()}, "status")
        tally.cases += 1
        if code == 2 and "cannot be located safely" in out and "without -U0" in out:
            tally.refused_u0 += 1
        else:
            tally.crashes.append(f"{label}: a -U0 diff was not refused at load (exit {code}): {out[-200:]}")
        return
    out_of_order(tally, work, sections, {p: b"".join(v) for p, v in before.items()}, label, number)
    index = {s.path: k for k, s in enumerate(sections)}
    every = frozenset((k, i) for k, s in enumerate(sections) for i in range(len(s.hunks)))
    variants = [Variant("base", frozenset()), Variant("target", every)]
    if len(every) > 1:
        chosen = frozenset(rng.sample(sorted(every), rng.randint(1, len(every) - 1)))
        variants.append(Variant("subset", chosen))
    for variant in list(variants):
        # a shift: a few lines above or between hunks
        k = rng.randrange(len(sections))
        points = usable_points(sections[k], before[sections[k].path])
        if points:
            block = tuple(random_line(rng, 400 + j, kind) for j in range(rng.randint(1, 6)))
            variants.append(Variant(variant.name + "+shifted", variant.applied, ((k, rng.choice(points), block),)))
        # decoys: a copy of one hunk's pre- or post-image at several distances above and below its site
        for _ in range(1 if len(every) > 1 else 2):
            k = rng.randrange(len(sections))
            s = sections[k]
            if not s.hunks:
                continue
            h = rng.choice(s.hunks)
            points = set(usable_points(s, before[s.path]))
            distance = rng.choice([0, 0, 1, 1, 2, 3, 5, 8])
            x = h.old_index - distance if rng.random() < 0.5 else h.old_index + h.old_len + distance
            if x not in points:
                continue
            image = h.new if rng.random() < 0.5 else h.old
            block = tuple(line if line.endswith(b"\n") else line + b"\n" for line in image)
            if rng.random() < 0.3:
                block = (random_line(rng, 300, kind), *block)
            inserts: tuple[tuple[int, int, tuple[bytes, ...]], ...] = ((k, x, block),)
            if rng.random() < 0.3 and points:  # and a shift elsewhere
                inserts += ((k, rng.choice(sorted(points)), (random_line(rng, 500, kind),)),)
            variants.append(Variant(f"{variant.name}+decoy@{'-' if x <= h.old_index else '+'}{distance}",
                                    variant.applied, inserts))
    def tree_of(applied: frozenset[tuple[int, int]], inserts: Sequence[tuple[int, int, tuple[bytes, ...]]]
                ) -> dict[str, bytes]:
        return {p: b"".join(build(sections[index[p]], index[p], before[p], applied, inserts)[0]) if p in index
                else b"".join(before[p]) for p in paths}

    for variant in variants:
        tree = tree_of(variant.applied, variant.inserts)
        truth_states: set[str] = set()
        forward: dict[str, list[dict[str, bytes]]] = {}
        reverse: dict[str, list[dict[str, bytes]]] = {}
        for inserts in dict.fromkeys((variant.inserts, ())):
            # File by file: every subset of a file's hunks (up to 8; else the variant's, none, all) that gives
            # this file's very bytes, with these inserts; the tree's constructions are their products. A planted
            # copy can give the very bytes a hunk gives (a pre-image copy right above the real one is its post-
            # image: seed 20261201 example 18849), in a diff of any number of hunks.
            options: list[list[frozenset[tuple[int, int]]]] = []
            for p in paths:
                if p not in index:
                    continue
                k = index[p]
                mine = frozenset((k, i) for i in range(len(sections[k].hunks)))
                sets = [frozenset(c) for r in range(len(mine) + 1) for c in combinations(sorted(mine), r)] \
                    if len(mine) <= 8 else list(dict.fromkeys([variant.applied & mine, frozenset(), mine]))
                options.append([a for a in sets if b"".join(build(sections[k], k, before[p], a, inserts)[0])
                                == tree[p]])
            for combination in itertools.product(*options):
                st = state_of(frozenset[tuple[int, int]]().union(*combination), every)
                truth_states.add(st)
                forward.setdefault(st, []).append(tree_of(every, inserts))
                reverse.setdefault(st, []).append(tree_of(frozenset(), inserts))
        truth = Truth(frozenset(truth_states), forward, reverse)
        decoy = "decoy" in variant.name
        elsewhere = False
        for p in paths:
            if p not in index:
                continue
            k = index[p]
            s = sections[k]
            # the tree, and the trees apply and revert make of it (the round trip reads those too)
            for applied in (variant.applied, every, frozenset()):
                lines, positions = build(s, k, before[p], applied, variant.inserts)
                states = [(k, i) in applied for i in range(len(s.hunks))]
                elsewhere = elsewhere or images_elsewhere(lines, s.hunks, states, positions)
        group = "decoy" if decoy else "look-alike" if elsewhere else "clean"
        judge_case(tally, work, registry_path, "p", f"{label} {variant.name}", diff, tree, truth, group)


def two_step_example(tally: Tally, work: Path, rng: random.Random, number: int) -> None:
    """B -> M -> T: one diff touching each file twice (B->M, then M->T), and the same steps as two stacked
    patches of a series (p2 after p1)."""
    kind = rng.choice(KINDS)
    paths = [f"src/engine/mod_{k}.py" for k in range(rng.randint(1, 2))]
    base = {p: random_file(rng, kind) for p in paths}
    middle = {p: random_edit(rng, base[p], kind) for p in paths}
    top = {p: random_edit(rng, middle[p], kind) for p in paths}
    if middle == base or top == middle:
        return
    context = rng.choice([c for c in CONTEXTS if c])
    algorithm = rng.choice(ALGORITHMS)
    first = make_diff(work, base, middle, context, algorithm)
    second = make_diff(work, middle, top, context, algorithm)
    label = f"seed {SEED} two-step {number} ({kind}, -U{context} {algorithm or 'myers'})"
    registry_path, series_path = work / f"patches-2-{number}", work / f"series-{number}"
    registry_path.mkdir()
    series_path.mkdir()
    twice = first + second
    Registry(registry_path).add("twice", twice, strip=2)
    Registry(series_path).add("p1", first, strip=2)
    Registry(series_path).add("p2", second, strip=2, extra='after = ["p1"]')
    trees = [{p: b"".join(t[p]) for p in paths} for t in (base, middle, top)]
    for name, tree, state in zip(("base", "middle", "top"), trees, ("unapplied", "partial", "applied"), strict=True):
        states = {st for st, t in zip(("unapplied", "partial", "applied"), trees, strict=True) if t == tree}
        truth = Truth(frozenset(states | {state}), {st: [trees[2]] for st in states | {state}},
                      {st: [trees[0]] for st in states | {state}})
        judge_case(tally, work, registry_path, "twice", f"{label} touched twice, {name}", twice, tree, truth,
                   "clean")
    for name, tree, states in zip(("base", "middle", "top"), trees,
                                  (("unapplied", "unapplied"), ("applied", "unapplied"), ("applied", "applied")),
                                  strict=True):
        series_case(tally, work, series_path, f"{label} stacked, {name}", tree, states, trees[2], trees[0])


def series_case(tally: Tally, work: Path, registry: Path, label: str, tree: dict[str, bytes],
                truth: tuple[str, str], forward: dict[str, bytes], reverse: dict[str, bytes],
                group: str = "series") -> None:
    tally.cases += 1
    tally.trees[group] += 1
    code, _, out = run_patchkit(work, registry, "--all", tree, "status", "--json")
    if code not in (0, 3, 4, 5):
        tally.crashes.append(f"{label}: status --all exit {code}: {out[-300:]}")
        return
    doc = json.loads(out)
    states = {p["patch"]: p["state"] for p in doc["patches"]}
    verdict = (states["p1"], states["p2"])
    tally.verdicts["series " + "/".join(verdict)] += 1
    if any(mine in ("applied", "unapplied", "partial") and mine != true for mine, true in zip(verdict, truth,
                                                                                               strict=True)):
        tally.wrong.append(f"{label}: the series reads {verdict}, truly {truth}")
        tally.wrong_by[group] += 1
        progress(f"WRONG {tally.wrong[-1]}")
        return
    if any(v in ("ambiguous", "conflict") for v in verdict):
        tally.ambiguous[group] += 1
        return
    for action, expected in (("apply", forward), ("revert", reverse)):
        code, after, out = run_patchkit(work, registry, "--all", tree, action, *(["--force"] * (action == "revert")))
        if code != 0:
            tally.wrong.append(f"{label}: {action} --all on {verdict} exit {code}: {out[-300:]}")
        elif after != expected:
            tally.wrong.append(f"{label}: {action} --all wrote a tree other than the construction's")
        else:
            continue
        tally.wrong_by[group] += 1
        progress(f"WRONG {tally.wrong[-1]}")
        return
    tally.right += 1


OTHER = "src/engine/other.py"  # a file of the tree the diffs never touch (drift lands there too)


def simple_hunks(sections: Sequence[Section]) -> bool:
    """Every hunk has lines on both sides (no file emptied or filled from nothing: those are other tests')."""
    return all(h.old_len and h.new_len for s in sections for h in s.hunks)


def top_edit(rng: random.Random, lines: Lines, kind: str) -> Lines:
    """Sometimes lines added or removed at the very top as well: a later section's hunk then starts at line 1 in
    one reading of the file and not in the other (git pins a hunk at line 1 to the start of the file)."""
    if rng.random() < 0.7 or len(lines) < 8:
        return lines
    if rng.random() < 0.5:
        return lines[rng.randint(1, 4):]
    return [*(random_line(rng, 700 + j, kind) for j in range(rng.randint(1, 4))), *lines]


def near_edit(rng: random.Random, before: Lines, lines: Lines, kind: str) -> Lines:
    """An edit of `lines`, half the time right next to (or inside) what the step before changed, so that the
    later hunk's context is the earlier one's post-image."""
    changed = [(j1, j2) for tag, _, _, j1, j2 in difflib.SequenceMatcher(None, before, lines, autojunk=False)
               .get_opcodes() if tag != "equal"]
    if not changed or rng.random() < 0.5:
        return random_edit(rng, lines, kind)
    j1, j2 = rng.choice(changed)
    at = max(0, min(len(lines), rng.randint(j1 - 2, j2 + 2)))
    out = [line if line.endswith(b"\n") else line + b"\n" for line in lines]
    out[at:at + rng.randint(0, 2)] = [random_line(rng, 800 + k, kind) for k in range(rng.randint(1, 2))]
    return out


def chain_example(tally: Tally, work: Path, rng: random.Random, number: int) -> None:
    """B -> M -> T on drifted trees: the diff touching each file twice, the same steps as a stacked series,
    and the diff touching a file twice with hunk excludes (in either section); for the last, the oracle is
    real `git apply` of the filtered diff this test writes itself (headers by identity, filtered_diff)."""
    kind = rng.choice(KINDS)
    paths = [f"src/engine/mod_{k}.py" for k in range(rng.randint(1, 2))]
    base = {p: random_file(rng, kind) for p in paths}
    middle = {p: top_edit(rng, random_edit(rng, base[p], kind), kind) for p in paths}
    top = {p: top_edit(rng, near_edit(rng, base[p], middle[p], kind), kind) for p in paths}
    if middle == base or top == middle:
        return
    context = rng.choice([c for c in CONTEXTS if c])
    algorithm = rng.choice(ALGORITHMS)
    first = make_diff(work, base, middle, context, algorithm)
    twice = first + make_diff(work, middle, top, context, algorithm)
    sections = parse_sections(twice)
    if not simple_hunks(sections):
        return
    label = f"seed {SEED} chain {number} ({kind}, -U{context} {algorithm or 'myers'})"
    fresh = itertools.count()
    ids = with_ids({**base, OTHER: random_file(rng, kind)}, fresh)
    steps = chain_steps(sections, ids, fresh)
    every = frozenset(range(len(steps)))
    first_sections = len(parse_sections(first))
    lower = frozenset(k for k, step in enumerate(steps) if step.section < first_sections)
    drift = choose_drift(rng, ids, steps, kind)
    registry_path, series_path = work / f"patches-c-{number}", work / f"series-c-{number}"
    registry_path.mkdir()
    series_path.mkdir()
    registry = Registry(registry_path)
    registry.add("twice", twice, strip=2)
    Registry(series_path).add("p1", first, strip=2)
    Registry(series_path).add("p2", twice[len(first):], strip=2, extra='after = ["p1"]')
    choices = all_subsets(every, [lower])
    layers = [frozenset[int](), lower, every]
    trees = [construct(ids, steps, applied, drift) for applied in layers]
    if drift:
        for name, tree in zip(("base", "middle", "top"), trees, strict=True):
            assert tree is not None
            truth = truth_by_construction(ids, steps, tree, every, choices, drift)
            alike = " look-alike" if has_lookalike([tree, *trees], steps, every) else ""
            judge_case(tally, work, registry_path, "twice", f"{label} touched twice, drifted {name}", twice, tree,
                       truth, f"twice drifted{alike}")
        if trees[0] != trees[1] != trees[2] != trees[0]:  # else the series' truth is not one pair of states
            for name, tree, states in zip(("base", "middle", "top"), trees,
                                          (("unapplied", "unapplied"), ("applied", "unapplied"),
                                           ("applied", "applied")), strict=True):
                assert tree is not None and trees[0] is not None and trees[2] is not None
                alike = " look-alike" if has_lookalike([tree, *trees], steps, every) else ""
                series_case(tally, work, series_path, f"{label} stacked, drifted {name}", tree, states, trees[2],
                            trees[0], group=f"series drifted{alike}")
    # Hunk excludes in a file touched twice: drop a proper subset of some section's hunks.
    path = rng.choice(paths)
    mine = [k for k, step in enumerate(steps) if step.path == path]
    dropped: set[int] = set()
    for s in sorted({steps[k].section for k in mine}):
        hunks = [k for k in mine if steps[k].section == s]
        if len(hunks) > 1 and rng.random() < 0.7:
            dropped.update(rng.sample(hunks, rng.randint(1, len(hunks) - 1)))
    if not dropped:
        return
    kept = every - dropped
    filtered = filtered_diff(sections, steps, ids, kept)
    if filtered is None:  # a kept hunk builds on a dropped one: git cannot apply the filtered diff anywhere
        tally.verdicts["excludes: a kept hunk builds on a dropped one"] += 1
        return
    pristine, whole = construct(ids, steps, frozenset()), construct(ids, steps, kept)
    assert pristine is not None
    if git_result(work, pristine, filtered) != whole:  # the two oracles: git on the filtered diff, construction
        tally.crashes.append(f"{label}: git apply of the filtered diff does not give the construction")
        return
    folder = registry.add("twice-x", twice, strip=2)
    add_hunk_excludes(folder, path, [steps[k].number for k in dropped])
    shown = cli("show", "twice-x", "--patches", registry_path)  # patchkit's own filtered diff: git applies it too
    if shown.code != 0 or git_result(work, pristine, shown.out.encode(), "-p1") != whole:
        tally.wrong.append(f"{label}: `patchkit show` of the filtered hunk set (exit {shown.code}) does not make "
                           "the construction under git apply")
        tally.wrong_by["excludes show"] += 1
        progress(f"WRONG {tally.wrong[-1]}")
    kept_lower = kept & lower
    kept_choices = all_subsets(kept, [kept_lower])
    drifts: list[tuple[Drift, ...]] = [(), drift] if drift else [()]
    for d in drifts:
        made = [construct(ids, steps, applied, d) for applied in (frozenset[int](), kept_lower, kept)]
        for name, tree in zip(("base", "first section", "whole"), made, strict=True):
            assert tree is not None
            if name == "first section" and kept_lower in (frozenset(), kept):
                continue
            truth = truth_by_construction(ids, steps, tree, kept, kept_choices, drift)
            alike = " look-alike" if has_lookalike([tree, *made], steps, kept) else ""
            judge_case(tally, work, registry_path, "twice-x",
                       f"{label} touched twice, hunks {sorted(steps[k].number for k in dropped)} of {path} "
                       f"excluded, {'drifted ' if d else ''}{name}", filtered, tree, truth,
                       f"excludes{' drifted' if d else ''}{alike}")


def same_line_example(tally: Tally, work: Path, rng: random.Random, number: int) -> None:
    """A file whose pre- and post-image sit at the same line (a block inserted next to a copy of itself: one
    more element of a JSON list, a duplicated test block) in a patch whose other files read unambiguously:
    pristine, patched and partial trees (only that file patched, only the others), plain and drifted."""
    kind = rng.choice(["json", "params", "kernels", "synthetic"])
    same = "src/engine/table.json" if kind == "json" else "src/engine/table_test.py"
    others = [f"src/engine/mod_{k}.py" for k in range(rng.randint(1, 2))]
    base: dict[str, Lines] = {same: random_file(rng, kind)}
    size = rng.randint(1, min(4, len(base[same])))
    start = rng.randrange(len(base[same]) - size + 1)
    block = base[same][start:start + size]
    at = start if rng.random() < 0.5 else start + size
    after: dict[str, Lines] = {same: [*base[same][:at], *block, *base[same][at:]]}
    for k, p in enumerate(others):  # distinct lines: these files read one way only
        base[p] = [b"setting_%d_%d = %d\n" % (k, i, rng.randrange(10**6)) for i in range(rng.randint(6, 30))]
        edited = list(base[p])
        for _ in range(rng.randint(1, 2)):
            edited[rng.randrange(len(edited))] = b"setting_%d_x = %d\n" % (k, rng.randrange(10**6))
        after[p] = edited
    if any(after[p] == base[p] for p in base):
        return
    context = rng.choice([c for c in CONTEXTS if c])
    algorithm = rng.choice(ALGORITHMS)
    diff = make_diff(work, base, after, context, algorithm)
    sections = parse_sections(diff)
    if not simple_hunks(sections):
        return
    label = f"seed {SEED} same-line {number} ({kind}, {size}-line block, -U{context} {algorithm or 'myers'})"
    registry_path = work / f"patches-s-{number}"
    registry_path.mkdir()
    Registry(registry_path).add("p", diff, strip=2)
    fresh = itertools.count()
    ids = with_ids({**base, OTHER: random_file(rng, kind)}, fresh)
    steps = chain_steps(sections, ids, fresh)
    every = frozenset(range(len(steps)))
    only_same = frozenset(k for k in every if steps[k].path == same)
    variants = [frozenset[int](), every, only_same, every - only_same]
    if len(every) > 1:
        variants.append(frozenset(rng.sample(sorted(every), rng.randint(1, len(every) - 1))))
    variants = list(dict.fromkeys(variants))
    drift = choose_drift(rng, ids, steps, kind)
    drifts: list[tuple[Drift, ...]] = [(), drift] if drift else [()]
    choices = all_subsets(every, variants)
    for d in drifts:
        for applied in variants:
            tree = construct(ids, steps, applied, d)
            assert tree is not None
            name = ("base" if not applied else "target" if applied == every else "only the same-line file"
                    if applied == only_same else "only the others" if applied == every - only_same else "subset")
            truth = truth_by_construction(ids, steps, tree, every, choices, drift)
            group = "same-line" if not d else "same-line drifted" if any(x.path == same for x in d) else \
                "same-line, others drifted"
            judge_case(tally, work, registry_path, "p", f"{label} {'drifted ' if d else ''}{name}", diff, tree,
                       truth, group)


def run_examples(worker: int) -> Tally:
    """Examples worker, worker + JOBS, ...: each from its own seed, with progress lines as it goes."""
    tally = Tally()
    started = time.monotonic()
    last = started
    with scratch() as work:
        for number in range(worker, EXAMPLES, JOBS):
            rng = random.Random(f"{SEED}-{number}")
            if number % 8 == 5:
                two_step_example(tally, work, rng, number)
            elif number % 8 == 3:
                chain_example(tally, work, rng, number)
            elif number % 8 == 7:
                same_line_example(tally, work, rng, number)
            else:
                one_example(tally, work, rng, number)
            tally.examples += 1
            if EXAMPLES > 100 and time.monotonic() - last > 30:
                last = time.monotonic()
                progress(f"[worker {worker}] {tally.examples} examples in {last - started:.0f}s: {tally.summary()}")
    return tally


def test_differential_against_git() -> None:
    started = time.monotonic()
    if JOBS == 1:
        tally = run_examples(0)
    else:
        with multiprocessing.get_context("fork").Pool(JOBS) as pool:
            tally = Tally()
            for part in pool.map(run_examples, range(JOBS)):
                tally.add(part)
    progress(f"\n{tally.summary()} in {time.monotonic() - started:.0f}s")
    for example in tally.cautious_examples[:10]:
        progress(f"  ambiguous on a tree without a look-alike: {example}")
    assert not tally.crashes, "\n".join(tally.crashes[:10])
    assert not tally.wrong, "\n".join(tally.wrong[:10])
    clean = tally.trees["clean"]
    assert tally.ambiguous["clean"] <= MAX_OVER_CAUTIOUS * clean, tally.summary()
    # the chains on trees without a look-alike: touched twice and stacked (drifted), with hunk excludes
    chains = [g for g in tally.trees
              if g.startswith(("twice drifted", "series drifted", "excludes")) and "look-alike" not in g]
    assert sum(tally.ambiguous[g] for g in chains) <= MAX_OVER_CAUTIOUS * sum(tally.trees[g] for g in chains), \
        tally.summary()
    assert tally.cases >= EXAMPLES  # the generator really produced cases


def test_seed_4242_example_1668_a_post_image_copy_overlapping_the_pre_image() -> None:
    """Found by the long run (PATCHKIT_DIFF_SEED=4242, PATCHKIT_DIFF_EXAMPLES=2000): the only wrong tree in 13,013.
    In src/engine/mod_2.py the -U1 hunk's post-image is at line 8 and its pre-image at lines 11-12, inside that
    copy; the tree is partial, and `apply --complete` wrote a tree other than the construction's (the reading with
    the longer image kept every gap, and the one with the shorter image, the copy's other lines added, was not
    named as a rival)."""
    tally = Tally()
    with scratch() as work:
        one_example(tally, work, random.Random("4242-1668"), 1668)
    assert not tally.wrong, tally.wrong


def test_seed_0_example_264_an_anchored_run_that_reaches_the_end_of_the_file() -> None:
    """Found by the mutation run (docs/testing.md; PATCHKIT_DIFF_EXAMPLES=400, the default seed 0, example 264:
    synthetic, -U2 --minimal): on the shifted base and target trees a run of hunks with exact gaps is anchored by
    the end of the file, where the diff saw it end, so judge/state.py `_rivals` bounds it by the file's length, not
    by a hunk after it. Replayed here at the default size.

    Kills patchkit/judge/state.py:647:core/ReplaceComparisonOperator_Eq_Lt#16 (`k < len(located)`: the bound
    read the hunk past the last one, and status crashed with an IndexError, exit 10)."""
    tally = Tally()
    with scratch() as work:
        one_example(tally, work, random.Random("0-264"), 264)
    assert not tally.crashes and not tally.wrong, (tally.crashes, tally.wrong)


def test_seed_20261201_example_18849_a_pre_image_copy_above_the_pre_image_is_the_post_image() -> None:
    """Found by the 20,000-example run (PATCHKIT_DIFF_SEED=20261201): `base+decoy@-0` read `partial`, truth
    `unapplied`. The oracle was wrong, not the judgement: in src/engine/mod_2.py hunk 1 (-U1, @@ -4,2 +4,4 @@)
    has the pre-image `    x = setup()`, `@pytest.mark.parametrize("n", [1, 2, 4])` and the post-image that
    pair twice; the decoy is a copy of the pre-image at distance 0 above it, so lines 4-7 are the post-image and
    the file is byte for byte the base with hunk 1 applied (its "before" blob id e1fb9fe proves that reading).
    The diff has 7 hunks, and the generator listed every subset as a possible truth only up to 6 hunks in all;
    it now lists them file by file."""
    tally = Tally()
    with scratch() as work:
        one_example(tally, work, random.Random("20261201-18849"), 18849)
    assert tally.cases >= 4 and not tally.wrong, tally.wrong


def test_hunk_excludes_in_a_file_touched_twice_move_the_later_section(tmp_path: Path) -> None:
    """B -> M drops B's first five lines (hunk 1) and changes line 16 (hunk 2); M -> T changes M's line 2, a hunk
    at line 1 of M. With hunk 1 excluded, the later section's lines sit five lines lower: git, given the filtered
    diff with its headers, applies it at line 6. A model of git's search with M's header pins that hunk to the
    start of the file, where it is not (the old code read the pristine tree as a conflict).

    The oracle is real `git apply` of the filtered diff this test writes (filtered_diff: headers by identity);
    patchkit is driven through the CLI."""
    work = tmp_path / "work"
    work.mkdir()
    path = "src/engine/mod_0.py"
    base = [b"line %d\n" % i for i in range(1, 31)]
    middle = base[5:]
    middle[10] = b"changed\n"
    top = list(middle)
    top[1] = b"top change\n"
    twice = make_diff(work, {path: base}, {path: middle}, 3, "") + make_diff(work, {path: middle}, {path: top}, 3, "")
    sections = parse_sections(twice)
    fresh = itertools.count()
    ids = with_ids({path: base}, fresh)
    steps = chain_steps(sections, ids, fresh)
    assert [(st.section, st.number, st.hunk.old_start) for st in steps] == [(0, 1, 1), (0, 2, 13), (1, 3, 1)]
    kept = frozenset({1, 2})
    filtered = filtered_diff(sections, steps, ids, kept)
    assert filtered is not None and b"@@ -6,5 +6,5 @@" in filtered  # the later section, five lines lower
    pristine, first, whole = (construct(ids, steps, applied) for applied in (frozenset(), frozenset({1}), kept))
    assert pristine is not None and first is not None and whole is not None
    assert git_result(work, pristine, filtered) == whole  # the oracle agrees with the construction
    registry = tmp_path / "patches"
    folder = Registry(registry).add("p", twice, strip=2)
    add_hunk_excludes(folder, path, [1])
    for tree, state, code in ((pristine, "unapplied", 3), (first, "partial", 4), (whole, "applied", 0)):
        got, _, out = run_patchkit(work, registry, "p", tree, "status", "--json")
        assert (got, json.loads(out)["state"]) == (code, state), out
    code, after, out = run_patchkit(work, registry, "p", pristine, "apply")
    assert (code, after) == (0, whole), out
    shown = cli("show", "p", "--patches", registry)  # the filtered hunk set as a diff: git applies it too
    assert shown.code == 0 and b"@@ -6,5 +6,5 @@" in shown.out.encode(), shown.out
    assert git_result(work, pristine, shown.out.encode(), "-p1") == whole
    code, after, out = run_patchkit(work, registry, "p", first, "apply", "--complete")
    assert (code, after) == (0, git_result(work, first, filtered[filtered.index(b"diff --git", 1):])), out
    code, after, out = run_patchkit(work, registry, "p", whole, "revert", "--force")
    assert (code, after) == (0, git_result(work, whole, filtered, "-R")) == (0, pristine), out


def test_hunk_excludes_in_a_file_touched_three_times(tmp_path: Path) -> None:
    """Three sections of one file, a hunk dropped from each of the first two: the third section's hunks move by
    what both dropped hunks did (B's first three lines deleted, four lines inserted in M), each by the ones above
    it. Oracle: real `git apply` of the filtered diff written by identity; patchkit through the CLI."""
    work = tmp_path / "work"
    work.mkdir()
    path = "src/engine/mod_0.py"
    base = [b"line %d\n" % i for i in range(1, 41)]
    middle = base[3:]  # hunk 1 (dropped)
    middle[20] = b"changed in M\n"  # hunk 2
    top = [*middle[:10], *(b"inserted %d\n" % i for i in range(4)), *middle[10:]]  # hunk 3 (dropped)
    top[31] = b"changed in T\n"  # hunk 4
    last = list(top)
    last[1] = b"changed in U, near the top\n"  # hunk 5
    last[36] = b"changed in U, below both\n"  # hunk 6
    steps_made = ((base, middle), (middle, top), (top, last))
    diff = b"".join(make_diff(work, {path: a}, {path: b}, 3, "") for a, b in steps_made)
    sections = parse_sections(diff)
    fresh = itertools.count()
    ids = with_ids({path: base}, fresh)
    steps = chain_steps(sections, ids, fresh)
    assert [(st.section, st.number) for st in steps] == [(0, 1), (0, 2), (1, 3), (1, 4), (2, 5), (2, 6)]
    kept = frozenset({1, 3, 4, 5})
    filtered = filtered_diff(sections, steps, ids, kept)
    pristine, whole = construct(ids, steps, frozenset()), construct(ids, steps, kept)
    assert filtered is not None and pristine is not None and whole is not None
    assert git_result(work, pristine, filtered) == whole
    registry = tmp_path / "patches"
    folder = Registry(registry).add("p", diff, strip=2)
    add_hunk_excludes(folder, path, [1, 3])
    for tree, state, code in ((pristine, "unapplied", 3), (whole, "applied", 0)):
        got, _, out = run_patchkit(work, registry, "p", tree, "status", "--json")
        assert (got, json.loads(out)["state"]) == (code, state), out
    code, after, out = run_patchkit(work, registry, "p", pristine, "apply")
    assert (code, after) == (0, whole), out
    shown = cli("show", "p", "--patches", registry)
    assert shown.code == 0 and git_result(work, pristine, shown.out.encode(), "-p1") == whole, shown.out


_ATTN64 = b'  {"attn_fp16", attn_kernel<64>, 0},\n'
_NORM64 = b'  {"norm_fp16", norm_kernel<64>, 2},\n'
_TABLE = [  # seed 7 chain 91's mod_0.py, B: a C table of kernels
    b"  // fallback\n", b"};\n", b'  {"gemm_fp16", gemm_kernel<64>, 1},\n', _ATTN64, b"};\n", b"};\n",
    b'  {"norm_bf16", norm_kernel<128>, 1},\n', b"  // fallback\n", b'  {"gemm_fp16", gemm_kernel<128>, 2},\n',
    b'  {"attn_fp16", attn_kernel<128>, 0},\n', _NORM64, b"#endif\n", b'  {"attn_bf16", attn_kernel<128>, 0},\n',
    b'  {"attn_fp16", attn_kernel<64>, 2},\n', b'  {"gemm_fp16", gemm_kernel<128>, 0},\n', b"  // fallback\n",
    b'  {"norm_fp16", norm_kernel<128>, 0},\n', b"};\n", b'  {"gemm_fp16", gemm_kernel<128>, 1},\n', _NORM64,
    b'  {"attn_bf16", attn_kernel<64>, 0},\n', b'  {"norm_fp16", norm_kernel<128>, 1},\n',
]


def test_seed_7_chain_91_a_same_line_hunk_read_applied_to_fit_the_next_hunks_offset(tmp_path: Path) -> None:
    """Found by the chain generator (PATCHKIT_DIFF_SEED=7, PATCHKIT_DIFF_EXAMPLES=1000, chain 91: the file touched
    twice and the stacked series, drifted base; minimised to the first section of one file).

    `git diff --patience -U1` of B -> M gives hunk 1 `@@ -4,3 +4,2 @@` (` attn`, `-};`, ` };`: its post-image is
    a prefix of its pre-image, both at line 4) and hunk 2 `@@ -20,2 +19,7 @@`. The tree is B with two unrelated
    lines deleted (line 10 and the last line): truly unapplied. Read unapplied, hunk 2 sits one line above its
    running line; read applied, hunk 1's `};` at line 6 is an extra line and hunk 2 sits at its header line. Both
    readings need one unrelated edit, so the rule (docs/judgement.md) makes hunk 1 ambiguous. Before the
    overlap rule (judge/state.py `_rivals`) patchkit read hunk 1 applied and the file partial, and `apply
    --complete` would have written hunk 2 alone."""
    work = tmp_path / "work"
    work.mkdir()
    path = "src/engine/mod_0.py"
    middle = [*_TABLE[:5], *_TABLE[6:20], _ATTN64, b"};\n", _NORM64, _ATTN64, b"};\n", *_TABLE[20:]]
    diff = make_diff(work, {path: _TABLE}, {path: middle}, 1, "--patience")
    if b"@@ -4,3 +4,2 @@" not in diff or b"@@ -20,2 +19,7 @@" not in diff:
        raise RuntimeError(f"this git makes another diff of the case:\n{diff.decode()}")
    tree = {path: b"".join(line for k, line in enumerate(_TABLE) if k not in (9, len(_TABLE) - 1))}
    registry = tmp_path / "patches"
    Registry(registry).add("p", diff, strip=2)
    code, _, out = run_patchkit(work, registry, "p", tree, "status", "--json")
    assert (code, json.loads(out)["state"]) in ((3, "unapplied"), (5, "ambiguous")), out


def test_seed_8_chain_955_an_end_of_file_hunk_that_repeats_the_last_line() -> None:
    """Found by the chain generator (PATCHKIT_DIFF_SEED=8, PATCHKIT_DIFF_EXAMPLES=1000, chain 955; kernels, -U1,
    myers): mod_0.py's second section ends with `@@ -44 +45,2 @@` (` G`, `+G`, no trailing context). On the
    drifted base tree (truly unapplied: no subset of the hunks with any part of the drift gives its bytes
    otherwise) that hunk reads applied, the file partial and the stacked series (unapplied, partial); on the
    drifted middle tree `apply --complete` writes a tree other than the construction's. Replayed from the
    generator, as the seed 4242 case is; wrong before the overlap rule (judge/state.py `_rivals`)."""
    tally = Tally()
    with scratch() as work:
        chain_example(tally, work, random.Random("8-955"), 955)
    assert not tally.wrong, tally.wrong


def test_seed_20261201_chain_13187_a_later_section_reads_context_inside_a_dropped_hunk() -> None:
    """Found by the chain generator (PATCHKIT_DIFF_SEED=20261201, 20,000 examples, chain 13187; synthetic, -U1,
    patience): mod_1.py's first section has `@@ -1,7 +1,3 @@` (`-value_8`, ` def f():`, ` value_35`, three `-`
    lines, ` value_4`), excluded; its second section `@@ -1,2 +1,3 @@` reads ` def f():` ` value_35`, context
    lines between the dropped hunk's changes. In the file the filtered diff makes they sit at line 2 (the dropped
    hunk left `value_8` above them); the header recompute (filtering._filtered_line) took any line before the
    hunk's trailing context as before its change and kept `-1,2`, and git pins a hunk at line 1 to the start of
    the file: `patchkit show` wrote a diff git refuses. Replayed from the generator; wrong before Hunk.gaps."""
    tally = Tally()
    with scratch() as work:
        chain_example(tally, work, random.Random("20261201-13187"), 13187)
    assert not tally.wrong, tally.wrong


# ---------------------------------------------------------------------------------------------- ported trees

# Issue #37: the main use is an upstream diff ported to an older or newer image of the engine, where the
# diff's blob ids prove nothing. The diff is made on commit C (B -> T); the tree comes from another image of
# the same history: B with lines added and removed around the hunks (by identity, never inside one), so every
# hunk sits at an offset of 1 to 200 lines and the files are shorter or longer. The diffs append and prepend
# (hunks pinned to an end of the file), insert blocks that repeat their own context, and edit repeated blocks
# (JSON lists, kernel tables); the port sometimes adds a copy of a region or of an image (context that
# recurs). Each tree is judged with and without the diff's `index` lines and with and without a `[base]`
# fingerprint of the ported image (sha256 of each file of the pristine ported tree, as `vendor --base-tree`
# records it, and of the same file with the hunks applied). Oracles: the construction, and real `git apply`.

PORT_EXAMPLES = int(os.environ.get("PATCHKIT_PORT_EXAMPLES", "16"))
PORT_SIZES = [1, 1, 2, 3, 5, 8, 15, 30, 60, 120, 200]


def port_edit(rng: random.Random, lines: Lines, kind: str) -> Lines:
    """C -> T: an interior edit, an append at the end, a prepend at the top, a block inserted next to its own
    copy (its added lines repeat its context), or two of them."""
    out = list(lines)
    for op in rng.sample(["interior", "append", "prepend", "repeat"], rng.choice([1, 1, 2])):
        if op == "interior":
            out = random_edit(rng, out, kind)
        elif op == "append":
            out = [*out, *(random_line(rng, 900 + j, kind) for j in range(rng.choice([1, 3, 10, 40, 119])))]
        elif op == "prepend":
            out = [*(random_line(rng, 950 + j, kind) for j in range(rng.randint(1, 6))), *out]
        else:
            size = rng.randint(1, min(4, len(out)))
            start = rng.randrange(len(out) - size + 1)
            at = start if rng.random() < 0.5 else start + size
            out[at:at] = out[start:start + size]
    return out


def choose_port(rng: random.Random, base: dict[str, list[IdLine]], steps: Sequence[Step], kind: str
                ) -> tuple[tuple[Drift, ...], bool]:
    """The other image: one to four edits of each file on lines no hunk has (insert before a free line or a
    hunk's first line, unless git pins that hunk to the start; or delete a run of free lines), of 1 to 200
    lines. Some inserts copy a region of the file (repeated blocks) or an image of a hunk (context that
    recurs). Returns the edits and whether one of them planted a copy of an image."""
    inside = {i for step in steps for i in step.old_ids[1:]}
    used = {i for step in steps for i in step.old_ids}
    pinned = {step.old_ids[0] for step in steps if step.hunk.old_start <= 1 and step.old_ids}
    drift: list[Drift] = []
    planted = False
    for path in sorted(base):
        lines = base[path]
        taken: set[int] = set()
        for _ in range(rng.randint(1, 4)):
            size = rng.choice(PORT_SIZES)
            if rng.random() < 0.3:  # delete a run of free lines (never the last line: it may lack its newline)
                k = rng.randrange(len(lines))
                run = [i for i, _ in lines[k:k + size]]
                if k + len(run) >= len(lines) or used.intersection(run) or taken.intersection(run):
                    continue
                drift.append(Drift(path, run[0], tuple(run), ()))
                taken.update(run)
                continue
            anchors = [i for i, _ in lines if i not in inside | pinned | taken]
            if not anchors:
                continue
            anchor = rng.choice(anchors)
            roll = rng.random()
            if roll < 0.15 and steps:  # context that recurs: a copy of some hunk's image
                h = rng.choice([s for s in steps if s.path == path] or list(steps)).hunk
                block = tuple(line if line.endswith(b"\n") else line + b"\n" for line in rng.choice([h.old, h.new]))
                planted = True
            elif roll < 0.35:  # a repeated block: a copy of a region of the file
                start = rng.randrange(len(lines))
                block = tuple(b if b.endswith(b"\n") else b + b"\n" for _, b in lines[start:start + min(size, 12)])
            else:
                block = tuple(port_line(rng, j) for j in range(size))
            drift.append(Drift(path, anchor, (), block))
            taken.add(anchor)
    return tuple(drift), planted


def port_line(rng: random.Random, j: int) -> bytes:
    """A line another commit of the history added: mostly its own code, now and then a brace or a blank."""
    if rng.random() < 0.2:
        return rng.choice(REPEATED) + b"\n"
    return b"history_%d = step(%d)\n" % (rng.randrange(10**9), j)


def without_index(diff: bytes) -> bytes:
    return b"".join(line for line in diff.splitlines(keepends=True) if not line.startswith(b"index "))


def fingerprint_table(tree: dict[str, bytes], applied: dict[str, bytes], paths: Sequence[str]) -> str:
    """The manifest's [base] and [base_applied] tables for the ported image: the sha256 of each file the diff
    reads, pristine and patched (the oracle's own hashes of the construction's trees)."""
    import hashlib

    return "".join(f"[{table}]\n" + "".join(f'"{p}" = "{hashlib.sha256(files[p]).hexdigest()}"\n' for p in paths)
                   for table, files in (("base", tree), ("base_applied", applied)))


def pinned_hunk(h: Hunk) -> bool:
    """git anchors this hunk to an end of the file: no trailing context, or it starts at line 1."""
    return h.trailing == 0 or h.old_start <= 1


def ported_example(tally: Tally, work: Path, rng: random.Random, number: int) -> None:
    kind = rng.choice(KINDS)
    paths = [f"src/engine/mod_{k}.py" for k in range(rng.randint(1, 2))]
    before = {p: random_file(rng, kind) + (random_file(rng, kind) if rng.random() < 0.3 else []) for p in paths}
    after = {p: port_edit(rng, before[p], kind) for p in paths}
    if after == before:
        return
    context = rng.choice([c for c in CONTEXTS if c])
    algorithm = rng.choice(ALGORITHMS)
    full = make_diff(work, before, after, context, algorithm)
    sections = parse_sections(full)
    if not simple_hunks(sections):
        return
    fresh = itertools.count()
    ids = with_ids(before, fresh)
    steps = chain_steps(sections, ids, fresh)
    every = frozenset(range(len(steps)))
    port, planted = choose_port(rng, ids, steps, kind)
    pristine = construct(ids, steps, frozenset(), port)
    patched = construct(ids, steps, every, port)
    assert pristine is not None and patched is not None
    anchored = all(pinned_hunk(s.hunk) for s in steps)
    label = f"seed {SEED} ported {number} ({kind}, -U{context} {algorithm or 'myers'})"
    variants = [frozenset[int](), every]
    if len(every) > 1:
        variants.append(frozenset(rng.sample(sorted(every), rng.randint(1, len(every) - 1))))
    variants = list(dict.fromkeys(variants))
    choices = all_subsets(every, variants)
    read = sorted({s.path for s in sections})
    registries = []
    for with_index in (True, False):
        diff = full if with_index else without_index(full)
        for with_base in (False, True):
            folder = work / f"patches-p-{number}-{int(with_index)}{int(with_base)}"
            folder.mkdir()
            Registry(folder).add("p", diff, strip=2,
                                 extra=fingerprint_table(pristine, patched, read) if with_base else "")
            registries.append((with_index, with_base, folder, diff))
    # git ports it cleanly: it applies the diff to the ported image where the construction puts it, and reverts
    # it from there (else patchkit's round trip, which asks exactly that of git, cannot hold)
    round_trips = git_result(work, pristine, full) == patched and git_result(work, patched, full, "-R") == pristine
    for applied in variants:
        tree = construct(ids, steps, applied, port)
        assert tree is not None
        truth = truth_by_construction(ids, steps, tree, every, choices, port)
        name = "pristine" if not applied else "patched" if applied == every else "partial"
        holds = "planted" if planted else "look-alike" if has_lookalike([tree, truth.forward[next(iter(
            sorted(truth.states)))][0], truth.reverse[next(iter(sorted(truth.states)))][0]], steps, every) else "clean"
        for with_index, with_base, folder, diff in registries:
            group = f"ported {name} {'+' if with_index else '-'}index {'+' if with_base else '-'}base {holds}"
            verdict = judge_case(tally, work, folder, "p", f"{label} {name}", diff, tree, truth, group)
            if name == "partial" or len(truth.states) != 1:
                continue
            # over-caution: git applies it cleanly, giving the construction's tree, and the truth is certain
            goal = truth.forward if name == "pristine" else truth.reverse
            theirs = git_result(work, tree, diff, *(() if name == "pristine" else ("-R",)))
            if theirs is None or theirs not in goal[next(iter(truth.states))]:
                continue
            tags = [group, f"ported {'anchored' if anchored else 'interior'} {'+' if with_base else '-'}base {holds}"]
            if round_trips and with_base and verdict in ("ambiguous", "conflict"):
                progress(f"OVER-CAUTIOUS with a fingerprint: {label} {name} ({group})")
            if round_trips:
                tags += [f"{tag} git-round-trips" for tag in tags]
            for tag in tags:
                tally.eligible[tag] += 1
                tally.cautious[tag] += verdict in ("ambiguous", "conflict")


def run_ported(worker: int) -> Tally:
    tally = Tally()
    started = last = time.monotonic()
    with scratch() as work:
        for number in range(worker, PORT_EXAMPLES, JOBS):
            ported_example(tally, work, random.Random(f"{SEED}-ported-{number}"), number)
            tally.examples += 1
            if PORT_EXAMPLES > 100 and time.monotonic() - last > 30:
                last = time.monotonic()
                progress(f"[worker {worker}] {tally.examples} ported examples in {last - started:.0f}s: "
                         + " | ".join(line.strip() for line in tally.ported_summary().splitlines()
                                      if line.startswith(("ported", "  over-cautious ported anchored",
                                                          "  over-cautious ported interior"))))
    return tally


def test_ported_trees_against_git() -> None:
    """Issue #37: the diff made on C, applied to trees of an older or newer image (see above)."""
    started = time.monotonic()
    if JOBS == 1:
        tally = run_ported(0)
    else:
        with multiprocessing.get_context("fork").Pool(JOBS) as pool:
            tally = Tally()
            for part in pool.map(run_ported, range(JOBS)):
                tally.add(part)
    progress(f"\n{tally.ported_summary()} in {time.monotonic() - started:.0f}s")
    for example in tally.cautious_examples[:10]:
        progress(f"  ambiguous: {example}")
    assert not tally.crashes, "\n".join(tally.crashes[:10])
    assert not tally.wrong, "\n".join(tally.wrong[:10])
    # with a fingerprint, where git round-trips the port: over-caution below 0.5% (one tree at small sizes)
    proved = [g for g in tally.eligible if g.startswith(("ported pristine", "ported patched"))
              and "+base" in g and g.endswith("git-round-trips")]
    cautious, eligible = sum(tally.cautious[g] for g in proved), sum(tally.eligible[g] for g in proved)
    assert cautious <= max(1.0, 0.005 * eligible), tally.ported_summary()
    # clean trees (no image of any hunk anywhere else) are never refused where git applies them cleanly
    assert not sum(tally.cautious[g] for g in tally.eligible if g.endswith("clean")), tally.ported_summary()
    assert tally.cases >= PORT_EXAMPLES
