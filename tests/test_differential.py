"""Differential test of the state judgement against real git (issue 16).

Generators: small trees of source-like files with many repeated lines (`}`, blank lines, `pass`); diffs made
by real `git diff --no-index` with -U0..-U5 and the default, --patience, --histogram and --minimal algorithms;
trees derived from a diff's base B and target T by construction, so the true state and the true position of
every hunk are known: B, T, proper subsets of the hunks applied, each of them shifted by lines inserted above
or between hunks, with decoy copies of a hunk's pre- or post-image planted elsewhere; files touched twice in
one diff (B -> M -> T concatenated) and stacked patches of a series (`apply --all`).

Oracles: the construction (the true state, the true result of apply/revert/--complete) and real `git apply`,
`git apply --check`, `git apply -R --check` on the same tree. Counted:
- unsafe: `applied`/`unapplied`/`partial` when that is not the tree's true state (unless a look-alike is at least
  as near as the true image, where the documented rule lets position decide), a `status unapplied` that
  `git apply --check` rejects or an `applied` that `git apply -R --check` rejects, a written tree that differs
  from git's or from the construction's result, a refused plain apply that writes. Must be zero.
- over-cautious: `ambiguous`/`conflict` on a tree whose true state is applied, unapplied or partial (split by
  whether git applies it cleanly, and whether git itself would be fooled there). Counted and printed (-s).
- crashes: an exception, or an exit code the command never gives for these inputs. Must be zero.

Deterministic: PATCHKIT_DIFF_EXAMPLES (default 90 generated diffs, several trees each) and PATCHKIT_DIFF_SEED
choose the cases; a long run is e.g. `PATCHKIT_DIFF_EXAMPLES=5000 PATCHKIT_DIFF_SEED=7 pytest -s -q
tests/test_differential.py`.
"""

from __future__ import annotations

import io
import json
import os
import random
import re
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import Registry, cli, git, read_tree, write_tree

EXAMPLES = int(os.environ.get("PATCHKIT_DIFF_EXAMPLES", "90"))
SEED = int(os.environ.get("PATCHKIT_DIFF_SEED", "0"))
# Over-caution must stay rare: a hard bound, so that a regression towards refusing offsets fails the test.
MAX_OVER_CAUTIOUS = float(os.environ.get("PATCHKIT_DIFF_MAX_OVER_CAUTIOUS", "0.06"))

REPEATED = [b"}", b"", b"pass", b"    pass", b"    return x", b"{", b"else:", b"# note", b"x = 1", b"def f():"]
ALGORITHMS = ["", "--patience", "--histogram", "--minimal"]
CONTEXTS = [0, 1, 1, 2, 3, 3, 3, 4, 5]
STATUS_CODES = {"applied": 0, "unapplied": 3, "partial": 4, "conflict": 5, "ambiguous": 5}

Lines = list[bytes]


# --------------------------------------------------------------------------------------------- generators


def random_line(rng: random.Random, i: int) -> bytes:
    if rng.random() < 0.55:
        return rng.choice(REPEATED) + b"\n"
    return b"value_%d = compute(%d)\n" % (rng.randrange(40), i)


def random_file(rng: random.Random) -> Lines:
    return [random_line(rng, i) for i in range(rng.randint(6, 45))]


def random_edit(rng: random.Random, lines: Lines) -> Lines:
    out = [line if line.endswith(b"\n") else line + b"\n" for line in lines]
    for _ in range(rng.randint(1, 4)):
        op = rng.choice(["replace", "insert", "delete", "move", "repeat"])
        at = rng.randrange(len(out) + 1)
        if op == "insert" or not out:
            out[at:at] = [random_line(rng, 100 + k) for k in range(rng.randint(1, 3))]
        elif op == "replace":
            at = min(at, len(out) - 1)
            out[at:at + rng.randint(1, 2)] = [random_line(rng, 200 + k) for k in range(rng.randint(1, 2))]
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


def occurrences(lines: Lines, image: Sequence[bytes], at_start: bool, at_end: bool) -> list[int]:
    m, n = len(image), len(lines)
    spots = range(n - m + 1)
    if at_start:
        spots = range(0, 1 if m <= n else 0)
    if at_end:
        spots = range(n - m, n - m + 1) if m <= n and (not at_start or n == m) else range(0)
    return [q for q in spots if tuple(lines[q:q + m]) == tuple(image)]


def lookalike_near(lines: Lines, hunks: Sequence[Hunk], states: Sequence[bool], positions: Sequence[int]) -> bool:
    """Is some hunk's true image not strictly the nearest match of either image, counted from the line the
    hunks before it put it at or from its header line? Then the documented rule lets position decide."""
    end = growth = 0
    for i, (h, applied, p) in enumerate(zip(hunks, states, positions, strict=True)):
        if i == 0:
            e_run = h.old_index
        else:
            prev = hunks[i - 1]
            e_run = end + h.old_index - (prev.old_index + prev.old_len)
        e_hdr = h.old_index + growth
        d_run, d_hdr = abs(p - e_run), abs(p - e_hdr)
        for is_post, image, start in ((False, h.old, h.old_start), (True, h.new, h.new_start)):
            for q in occurrences(lines, image, start <= 1, h.trailing == 0):
                if (is_post, q) == (applied, p):
                    continue
                if abs(q - e_run) <= d_run or abs(q - e_hdr) <= d_hdr:
                    return True
        end = p + (len(h.new) if applied else len(h.old))
        growth += h.growth if applied else 0
    return False


# ------------------------------------------------------------------------------------------------ running


@dataclass
class Tally:
    cases: int = 0
    unsafe: list[str] = field(default_factory=list)
    crashes: list[str] = field(default_factory=list)
    verdicts: Counter[str] = field(default_factory=Counter)
    over_cautious: Counter[str] = field(default_factory=Counter)
    cautious_examples: list[str] = field(default_factory=list)
    position_decided: int = 0
    refused_u0: int = 0

    def summary(self) -> str:
        cautious = sum(self.over_cautious.values())
        avoidable = sum(n for k, n in self.over_cautious.items() if not k.endswith(("near look-alike", "two-way")))
        return (
            f"differential: {self.cases} cases, {len(self.unsafe)} unsafe, {cautious} over-cautious, of which "
            f"{avoidable} with no look-alike as near as the true hunk and no two-way tree "
            f"({dict(self.over_cautious)}), {len(self.crashes)} crashes; verdicts {dict(self.verdicts)}; "
            f"{self.position_decided} with a look-alike as near as the true hunk; {self.refused_u0} -U0 diffs "
            f"refused at load"
        )


@contextmanager
def scratch() -> Iterator[Path]:
    # tmpfs when there is one: every apply fsyncs, and this test writes thousands of small trees
    shm = Path("/dev/shm")
    with tempfile.TemporaryDirectory(prefix="pk-diff-", dir=shm if shm.is_dir() else None) as tmp:
        yield Path(tmp)


def git_result(work: Path, tree: dict[str, bytes], diff: bytes, *args: str) -> dict[str, bytes] | None:
    """What real `git apply -p2 [args]` makes of the tree (None when it refuses)."""
    root = work / "git"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    write_tree(root, tree)
    (work / "patch.diff").write_bytes(diff)
    done = git(root, "apply", "-p2", *args, str(work / "patch.diff"), check=False)
    if done.returncode != 0:
        return None
    return {p: data for p, (data, _) in read_tree(root).items()}


def two_way(work: Path, tree: dict[str, bytes], diff: bytes) -> bool:
    """Does git apply some hunk of the diff, alone, to the tree both forward and in reverse? Then content
    cannot tell that hunk's state, and no judge can answer more than `ambiguous` there (or on a tree that
    must round-trip through this one)."""
    for section in parse_sections(diff):
        for hunk in section.hunks:
            alone = b"".join(section.head) + b"".join(hunk.text)
            if git_result(work, tree, alone) is not None and git_result(work, tree, alone, "-R") is not None:
                return True
    return False


def run_patchkit(work: Path, registry: Path, patch: str, tree: dict[str, bytes], *args: str
                 ) -> tuple[int, dict[str, bytes], str]:
    root = work / "engine"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    write_tree(root, tree)
    result = cli(*args[:1], patch, "--root", root, "--patches", registry, *args[1:])
    return result.code, {p: data for p, (data, _) in read_tree(root).items()}, result.out + result.err


def judge_case(tally: Tally, work: Path, registry: Path, patch: str, label: str, diff: bytes,
               tree: dict[str, bytes], truth: str, forward: dict[str, bytes], reverse: dict[str, bytes],
               near: bool) -> None:
    """One tree: status, then every action the verdict allows, each checked against git and the construction."""
    tally.cases += 1
    code, _, out = run_patchkit(work, registry, patch, tree, "status", "--json")
    if code not in (0, 3, 4, 5):
        tally.crashes.append(f"{label}: status exit {code}: {out[-300:]}")
        return
    state = re.search(r'"state": "(\w+)"', out)
    assert state is not None
    verdict = state.group(1)
    tally.verdicts[verdict] += 1
    if STATUS_CODES[verdict] != code:
        tally.crashes.append(f"{label}: status {verdict} with exit {code}")
    tally.position_decided += near
    git_fwd = git_result(work, tree, diff)
    git_rev = git_result(work, tree, diff, "-R")

    def unsafe(why: str) -> None:
        tally.unsafe.append(f"{label} (truth {truth}, verdict {verdict}): {why}")

    if verdict in ("applied", "unapplied", "partial") and verdict != truth and not near:
        unsafe("a verdict that is not the tree's true state")
    if verdict == "unapplied" and git_fwd is None:
        unsafe("`git apply --check` rejects a tree that reads unapplied")
    if verdict == "applied" and git_rev is None:
        unsafe("`git apply -R --check` rejects a tree that reads applied")
    if verdict in ("ambiguous", "conflict") and truth != "conflict":
        git_ok = {"unapplied": git_fwd is not None, "applied": git_rev is not None}.get(truth)
        fooled = {"unapplied": git_fwd != forward, "applied": git_rev != reverse}.get(truth)
        if near:
            kind = "near look-alike"
        elif any(two_way(work, t, diff) for t in (tree, forward, reverse)):
            kind = "two-way"  # a tree on the way applies both forward and reverse in git too
        else:
            kind = "git fooled" if git_ok and fooled else f"git {'ok' if git_ok else 'no'}"
        tally.over_cautious[f"{truth}/{verdict}/{kind}"] += 1
        if not near and len(tally.cautious_examples) < 50:
            doubts = [f"{f['path']} hunk {h['index']}: {h['detail']}" for f in json.loads(out)["files"]
                      for h in f["hunks"] if h["state"] in ("ambiguous", "conflict")]
            doubts += [f"{f['path']}: {f['detail']}" for f in json.loads(out)["files"]
                       if f["state"] in ("ambiguous", "conflict") and not f["hunks"]]
            tally.cautious_examples.append(f"{label}: {truth} read {verdict} ({kind}): {'; '.join(doubts)}")

    for action, extra in (("apply", ()), ("revert", ("--force",)), ("apply", ("--complete",)),
                          ("revert", ("--complete", "--force"))):
        code, after, out = run_patchkit(work, registry, patch, tree, action, *extra)
        fwd = action == "apply"
        start, goal = ("unapplied", "applied") if fwd else ("applied", "unapplied")
        writes = verdict == start or (verdict == "partial" and "--complete" in extra)
        if verdict == goal:
            writes = False
        want_code = 0 if writes or verdict == goal else 1
        if code != want_code:
            (tally.crashes if code not in (0, 1) else tally.unsafe).append(
                f"{label}: {action} {' '.join(extra)} on {verdict} exit {code}: {out[-300:]}"
            )
            continue
        if not writes:
            if after != tree:
                unsafe(f"{action} {' '.join(extra)} wrote although it had nothing to write or refused")
            continue
        expected = forward if fwd else reverse
        if not near and after != expected:
            unsafe(f"{action} {' '.join(extra)} wrote a tree other than the construction's")
        if verdict != "partial":
            theirs = git_fwd if fwd else git_rev
            if after != theirs:
                unsafe(f"{action} wrote a tree other than `git apply{'' if fwd else ' -R'}`'s")
        code, _, out = run_patchkit(work, registry, patch, after, "status")
        if code != STATUS_CODES[goal]:
            unsafe(f"after {action} {' '.join(extra)} the tree reads exit {code}, not {goal}")


def one_example(tally: Tally, work: Path, rng: random.Random, number: int) -> None:
    paths = [f"src/engine/mod_{k}.py" for k in range(rng.randint(1, 3))]
    before = {p: maybe_strip_newline(rng, random_file(rng)) for p in paths}
    after = {p: maybe_strip_newline(rng, random_edit(rng, before[p])) for p in paths}
    if after == before:
        return
    context = rng.choice(CONTEXTS)
    algorithm = rng.choice(ALGORITHMS)
    diff = make_diff(work, before, after, context, algorithm)
    label = f"seed {SEED} example {number} (-U{context} {algorithm or 'myers'})"
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
    index = {s.path: k for k, s in enumerate(sections)}
    every = frozenset((k, i) for k, s in enumerate(sections) for i in range(len(s.hunks)))
    variants = [Variant("base", frozenset()), Variant("target", every)]
    if len(every) > 1:
        chosen = frozenset(rng.sample(sorted(every), rng.randint(1, len(every) - 1)))
        variants.append(Variant("subset", chosen))
    for variant in list(variants):
        inserts = []
        for _ in range(rng.randint(1, 2)):
            k = rng.randrange(len(sections))
            s = sections[k]
            points = insert_points(s, len(before[s.path]))
            if not points or not s.hunks:
                continue
            x = rng.choice(points)
            if rng.random() < 0.6:  # a decoy: a copy of one hunk's pre- or post-image, maybe with company
                h = rng.choice(s.hunks)
                image = h.new if rng.random() < 0.5 else h.old
                block = tuple(line if line.endswith(b"\n") else line + b"\n" for line in image)
                if rng.random() < 0.5:
                    block = (random_line(rng, 300), *block)
            else:  # a shift: a few lines above or between hunks
                block = tuple(random_line(rng, 400 + j) for j in range(rng.randint(1, 6)))
            inserts.append((k, x, block))
        if inserts:
            variants.append(Variant(variant.name + "+inserted", variant.applied, tuple(inserts)))
    for variant in variants:
        tree: dict[str, bytes] = {}
        forward: dict[str, bytes] = {}
        reverse: dict[str, bytes] = {}
        near = False
        for p in paths:
            if p not in index:
                tree[p] = forward[p] = reverse[p] = b"".join(before[p])
                continue
            k = index[p]
            s = sections[k]
            lines, positions = build(s, k, before[p], variant.applied, variant.inserts)
            tree[p] = b"".join(lines)
            forward[p] = b"".join(build(s, k, before[p], every, variant.inserts)[0])
            reverse[p] = b"".join(build(s, k, before[p], frozenset(), variant.inserts)[0])
            states = [(k, i) in variant.applied for i in range(len(s.hunks))]
            near = near or lookalike_near(lines, s.hunks, states, positions)
        truth = {frozenset(): "unapplied", every: "applied"}.get(variant.applied, "partial")
        judge_case(tally, work, registry_path, "p", f"{label} {variant.name}", diff, tree, truth, forward, reverse,
                   near)


def two_step_example(tally: Tally, work: Path, rng: random.Random, number: int) -> None:
    """B -> M -> T: one diff touching each file twice (B->M, then M->T), and the same steps as two stacked
    patches of a series (p2 after p1)."""
    paths = [f"src/engine/mod_{k}.py" for k in range(rng.randint(1, 2))]
    base = {p: random_file(rng) for p in paths}
    middle = {p: random_edit(rng, base[p]) for p in paths}
    top = {p: random_edit(rng, middle[p]) for p in paths}
    if middle == base or top == middle:
        return
    context = rng.choice([c for c in CONTEXTS if c])
    algorithm = rng.choice(ALGORITHMS)
    first = make_diff(work, base, middle, context, algorithm)
    second = make_diff(work, middle, top, context, algorithm)
    label = f"seed {SEED} two-step {number} (-U{context} {algorithm or 'myers'})"
    registry_path, series_path = work / f"patches-2-{number}", work / f"series-{number}"
    registry_path.mkdir()
    series_path.mkdir()
    twice = first + second
    Registry(registry_path).add("twice", twice, strip=2)
    Registry(series_path).add("p1", first, strip=2)
    Registry(series_path).add("p2", second, strip=2, extra='after = ["p1"]')
    trees = [{p: b"".join(t[p]) for p in paths} for t in (base, middle, top)]
    for name, tree, truth in zip(("base", "middle", "top"), trees, ("unapplied", "partial", "applied"), strict=True):
        judge_case(tally, work, registry_path, "twice", f"{label} touched twice, {name}", twice, tree, truth,
                   trees[2], trees[0], False)
    for name, tree, states in zip(("base", "middle", "top"), trees,
                                  (("unapplied", "unapplied"), ("applied", "unapplied"), ("applied", "applied")),
                                  strict=True):
        series_case(tally, work, series_path, f"{label} stacked, {name}", tree, states, trees[2], trees[0])


def series_case(tally: Tally, work: Path, registry: Path, label: str, tree: dict[str, bytes],
                truth: tuple[str, str], forward: dict[str, bytes], reverse: dict[str, bytes]) -> None:
    tally.cases += 1
    code, _, out = run_patchkit(work, registry, "--all", tree, "status", "--json")
    if code not in (0, 3, 4, 5):
        tally.crashes.append(f"{label}: status --all exit {code}: {out[-300:]}")
        return
    doc = json.loads(out)
    states = {p["patch"]: p["state"] for p in doc["patches"]}
    verdict = (states["p1"], states["p2"])
    tally.verdicts["series " + "/".join(verdict)] += 1
    for mine, true in zip(verdict, truth, strict=True):
        if mine in ("applied", "unapplied", "partial") and mine != true:
            tally.unsafe.append(f"{label}: the series reads {verdict}, truly {truth}")
        elif mine in ("ambiguous", "conflict"):
            diffs = [(registry / p / "change.diff").read_bytes() for p in ("p1", "p2")]
            inherent = any(two_way(work, t, d) for t in (tree, forward, reverse) for d in diffs)
            tally.over_cautious[f"series {true}/{mine}" + ("/two-way" if inherent else "")] += 1
    if any(v in ("ambiguous", "conflict") for v in verdict):
        return
    for action, expected in (("apply", forward), ("revert", reverse)):
        code, after, out = run_patchkit(work, registry, "--all", tree, action, *(["--force"] * (action == "revert")))
        if code != 0:
            tally.unsafe.append(f"{label}: {action} --all on {verdict} exit {code}: {out[-300:]}")
        elif after != expected:
            tally.unsafe.append(f"{label}: {action} --all wrote a tree other than the construction's")


def test_differential_against_git() -> None:
    rng = random.Random(SEED)
    tally = Tally()
    with scratch() as work:
        for number in range(EXAMPLES):
            if number % 6 == 5:
                two_step_example(tally, work, rng, number)
            else:
                one_example(tally, work, rng, number)
    print("\n" + tally.summary())
    assert not tally.crashes, "\n".join(tally.crashes[:10])
    assert not tally.unsafe, "\n".join(tally.unsafe[:10])
    cautious = sum(n for key, n in tally.over_cautious.items() if not key.endswith(("near look-alike", "two-way")))
    assert cautious <= MAX_OVER_CAUTIOUS * tally.cases, tally.summary()
    assert tally.cases >= EXAMPLES  # the generator really produced cases
