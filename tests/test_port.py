"""Issue 26: `patchkit port PATCH --root NEW_TREE` on trees whose context drifted, through the real CLI.

The oracle is real git: the ported diff must `git apply --check` and `git apply` on a copy of the new tree,
and the result must equal the new tree with the old patch's changed lines made by hand in the test (never by
patchkit). A hunk that fits nowhere, or in two places neither of which is expected, is listed with its
candidates and written to a reject file, exit 1, nothing applied; an existing output file is never written over.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import random
import re
import shlex
import shutil
import subprocess
from pathlib import Path

from tests.conftest import Registry, cli, git, git_diff, read_tree, write_tree


def func(name: str, var: str = "cfg", indent: str = "    ", body: int = 6) -> bytes:
    rows = [f"def {name}({var}):\n"]
    rows += [f"{indent}{name}_step_{i} = {var}.get('{name}{i}')\n" for i in range(body)]
    rows += [f"{indent}return {name}_step_0\n", "\n", "\n"]
    return "".join(rows).encode()


def module(*names: str, **kwargs: str) -> bytes:
    return b"# engine module\n\n" + b"".join(func(n, **kwargs) for n in names)


NAMES = ("load", "plan", "run", "save")
OLD = {"eng/core.py": module(*NAMES)}


def change(data: bytes) -> bytes:
    """The patch's intent, made by hand: one line in `plan` and one in `save` changed, a line added in `run`."""
    out = data.replace(b"plan_step_3 = cfg.get('plan3')", b"plan_step_3 = cfg.get('plan3', 0)")
    out = out.replace(b"save_step_2 = cfg.get('save2')\n", b"save_step_2 = cfg.get('save2')\n    flush(cfg)\n")
    return out.replace(b"run_step_5 = cfg.get('run5')", b"run_step_5 = None")


def setup(tmp_path: Path, registry: Registry) -> Path:
    diff = git_diff(tmp_path, OLD, {"eng/core.py": change(OLD["eng/core.py"])})
    assert diff.count(b"\n@@ ") == 3
    registry.add("p", diff)
    return registry.path / "p" / "change.diff"


def port(registry: Registry, new: Path, *extra: str | Path) -> tuple[int, str, str]:
    run = cli("port", "p", "--root", new, "--patches", registry.path, *extra)
    return run.code, run.out, run.err


def git_apply_result(tmp_path: Path, new: Path, ported: Path) -> dict[str, tuple[bytes, bool]]:
    """`git apply` of the ported diff on a git copy of the new tree (the oracle); the tree after it."""
    copy = tmp_path / "git-copy"
    shutil.copytree(new, copy)
    git(copy, "init", "-q")
    git(copy, "add", "-A")
    git(copy, "commit", "-qm", "new")
    check = git(copy, "apply", "--check", str(ported), check=False)
    assert check.returncode == 0, check.stderr.decode()
    git(copy, "apply", str(ported))
    return read_tree(copy)


def test_a_renamed_identifier_in_context_is_fuzzed_and_listed(tmp_path: Path, registry: Registry) -> None:
    setup(tmp_path, registry)
    new = tmp_path / "new"
    drifted = module(*NAMES).replace(b"plan_step_2 = cfg.get", b"plan_step_2 = settings.get")
    drifted = b"import os\nimport sys\n\n" + drifted  # and everything moved down 3 lines
    write_tree(new, {"eng/core.py": drifted})
    before = read_tree(new)
    code, out, err = port(registry, new)
    assert code == 0, out + err
    assert re.search(r"fuzzed +eng/core.py hunk 1 .*: at line \d+ \(moved \+3 lines, 1 context line changed\)", out)
    assert "plan_step_2 = cfg.get('plan2')" in out and "plan_step_2 = settings.get('plan2')" in out
    assert read_tree(new) == before  # port never applies
    ported = registry.path / "p" / "change.diff.ported"
    assert f"wrote {ported}" in out
    assert git_apply_result(tmp_path, new, ported)["eng/core.py"][0] == change(drifted)


def test_moved_functions_far_away_and_reordered_are_found(tmp_path: Path, registry: Registry) -> None:
    setup(tmp_path, registry)
    new = tmp_path / "new"
    filler = tuple(f"helper{i}" for i in range(30))
    moved = module("save", *filler, "run", "load", "plan")  # save first, plan last: large offsets both ways
    write_tree(new, {"eng/core.py": moved})
    code, out, err = port(registry, new)
    assert code == 0, out + err
    offsets = [int(m) for m in re.findall(r"moved ([+-]\d+) lines", out)]
    assert len(offsets) == 3 and max(offsets) > 200 and min(offsets) < 0, out
    assert "context line" not in out  # exact, only moved
    ported = registry.path / "p" / "change.diff.ported"
    assert git_apply_result(tmp_path, new, ported)["eng/core.py"][0] == change(moved)


def test_whitespace_only_changes_in_context_and_removed_lines(tmp_path: Path, registry: Registry) -> None:
    setup(tmp_path, registry)
    new = tmp_path / "new"
    spaced = module(*NAMES)
    spaced = spaced.replace(b"plan_step_2 = cfg.get('plan2')", b"plan_step_2 = cfg.get( 'plan2' )  ")  # context
    spaced = spaced.replace(b"run_step_5 = cfg.get('run5')", b"run_step_5 = cfg.get('run5')\t")  # a removed line
    write_tree(new, {"eng/core.py": spaced})
    code, out, err = port(registry, new, "--fuzz", "0")  # whitespace is not fuzz
    assert code == 0, out + err
    assert out.count("differ in whitespace only") == 2, out
    ported = registry.path / "p" / "change.diff.ported"
    text = ported.read_bytes()
    assert b"-    run_step_5 = cfg.get('run5')\t\n" in text  # the new tree's own bytes
    want = spaced.replace(b"plan_step_3 = cfg.get('plan3')", b"plan_step_3 = cfg.get('plan3', 0)")
    want = want.replace(b"save_step_2 = cfg.get('save2')\n", b"save_step_2 = cfg.get('save2')\n    flush(cfg)\n")
    want = want.replace(b"run_step_5 = cfg.get('run5')\t", b"run_step_5 = None")
    assert git_apply_result(tmp_path, new, ported)["eng/core.py"][0] == want


def test_a_hunk_that_fits_nowhere_is_listed_with_candidates_and_rejected(tmp_path: Path, registry: Registry) -> None:
    setup(tmp_path, registry)
    new = tmp_path / "new"
    gone = module(*NAMES).replace(b"plan_step_3 = cfg.get('plan3')", b"plan_step_3 = compute_plan(cfg)")
    write_tree(new, {"eng/core.py": gone})
    code, out, err = port(registry, new)
    assert code == 1, out + err
    assert "1 of 3 hunks could not be placed" in out and "nothing applied" in out
    assert re.search(r"not placed +eng/core.py hunk 1 @@ [^:]+: no place in the file has its 1 removed lines", out)
    nearest = re.search(r"nearest: line (\d+) \((\d+)% alike\)", out)
    assert nearest is not None, out
    assert int(nearest[2]) >= 80 and abs(int(nearest[1]) - 11) <= 3  # the plan function, where it was
    assert (registry.path / "p" / "change.diff.ported.rej/eng/core.py.rej").is_file()
    assert read_tree(new)["eng/core.py"][0] == gone  # nothing applied
    # more fuzz does not make a removed line that changed fit
    assert port(registry, new, "--fuzz", "10", "--output", tmp_path / "again.diff")[0] == 1


def test_two_equally_good_places_neither_expected_are_not_guessed(tmp_path: Path, registry: Registry) -> None:
    setup(tmp_path, registry)
    new = tmp_path / "new"
    twice = module("load", "run", "save", "helper", "plan", "other", "plan")  # plan twice, both moved
    write_tree(new, {"eng/core.py": twice})
    code, out, _ = port(registry, new)
    assert code == 1
    line = next(row for row in out.splitlines() if "not placed" in row)
    assert "hunk 1" in line and "2 places fit equally well, and none is" in line and "not guessed" in line
    assert len(re.findall(r"line \d+ \(100% alike\)", out)) == 2
    assert b"plan_step_3" in (registry.path / "p" / "change.diff.ported.rej/eng/core.py.rej").read_bytes()


def test_port_never_writes_over_a_file_and_the_printed_moves_install_it(tmp_path: Path, registry: Registry) -> None:
    setup(tmp_path, registry)
    new = tmp_path / "new"
    drifted = b"# new header\n" + module(*NAMES).replace(b"# engine module", b"# engine module v2")
    write_tree(new, {"eng/core.py": drifted})
    mine = registry.path / "p" / "change.diff.ported"
    mine.write_bytes(b"my own notes\n")
    code, out, err = port(registry, new)
    assert code == 2 and "port never writes over a file" in err and "--output" in err
    assert mine.read_bytes() == b"my own notes\n"
    elsewhere = tmp_path / "review" / "core.ported"
    elsewhere.parent.mkdir()
    code, out, err = port(registry, new, "--output", elsewhere)
    assert code == 0, out + err
    folder = registry.path / "p"
    assert commands(out) == [
        f"env GIT_CEILING_DIRECTORIES={tmp_path} git -C {new} apply --check {elsewhere}",
        f"mv {elsewhere} {folder / 'change.diff'}",
        f"mv {elsewhere}.manifest.toml {folder / 'manifest.toml'}"]
    for command in commands(out):
        assert run_as_printed(command, tmp_path)[0] == 0, command
    assert mine.read_bytes() == b"my own notes\n"
    assert cli("status", "p", "--root", new, "--patches", registry.path).code == 3
    assert cli("apply", "p", "--root", new, "--patches", registry.path).code == 0
    assert read_tree(new)["eng/core.py"][0] == change(drifted)


def test_excluded_files_are_left_out_and_line_endings_are_never_mixed(
    tmp_path: Path, registry: Registry
) -> None:
    other = {"eng/gone.py": b"x = 1\ny = 2\nz = 3\n"}
    diff = git_diff(tmp_path, {**OLD, **other},
                    {"eng/core.py": change(OLD["eng/core.py"]), "eng/gone.py": b"x = 1\ny = 20\nz = 3\n"})
    registry.add("p", diff, exclude={"eng/gone.py": "not in this engine"})
    new = tmp_path / "new"
    write_tree(new, {"eng/core.py": b"# moved\n" + OLD["eng/core.py"]})
    code, out, err = port(registry, new)
    assert code == 0, out + err
    assert "eng/gone.py: excluded by the manifest, left out of the ported diff" in out
    ported = registry.path / "p" / "change.diff.ported"
    assert b"gone.py" not in ported.read_bytes()
    copy = tmp_path / "git-copy"
    shutil.copytree(new, copy)
    git(copy, "init", "-q")
    assert git(copy, "apply", str(ported), check=False).returncode == 0
    assert (copy / "eng/core.py").read_bytes() == change(b"# moved\n" + OLD["eng/core.py"])
    # vendor takes the ported diff once the ported manifest (no excludes left) is in place
    folder = registry.path / "p"
    (folder / "manifest.toml").write_bytes((folder / "change.diff.ported.manifest.toml").read_bytes())
    assert cli("vendor", "p", "--patches", registry.path, "--from", ported, "--base-tree", new).code == 0
    # The new tree converted to CRLF: not a whitespace change (the added lines would bring LF in).
    crlf = tmp_path / "crlf"
    write_tree(crlf, {"eng/core.py": OLD["eng/core.py"].replace(b"\n", b"\r\n")})
    code, out, _ = port(registry, crlf, "--output", tmp_path / "c.diff")
    assert code == 1 and "not placed" in out and not (tmp_path / "c.diff").exists()  # no hunk placed: no diff
    assert (tmp_path / "c.diff.rej/eng/core.py.rej").read_bytes().count(b"\n@@ ") == 3  # every hunk rejected


# ------------------------------------------------------------------------------- differential, against git

VOCAB = [b"\n", b"pass\n", b"    return x\n", b"x = 1\n", b"}\n", b"    # note\n"]


def _random_file(rng: random.Random, count: int) -> list[bytes]:
    """Lines with many repeats (blank lines, `pass`, ...), and some unique ones to anchor hunks."""
    return [rng.choice(VOCAB) if rng.random() < 0.45 else b"line %d\n" % rng.randrange(10**6) for _ in range(count)]


def test_port_agrees_with_git_apply_on_drifted_trees(tmp_path: Path, registry: Registry) -> None:
    """Random files full of repeated lines, a random change, a new tree with random blocks (look-alikes
    included) inserted, and in a third of the cases one hunk excluded by the manifest: whenever `git apply` of
    the old diff (without the excluded hunk, cut out by the test) and port both succeed, the ported diff applies
    with plain git and gives the same tree. When some hunk is not placed (exit 1), the placed ones still
    `git apply --check`, each rejected one is in the reject file, and the tree is untouched."""
    rng = random.Random(2026)
    cases = int(os.environ.get("PATCHKIT_PORT_EXAMPLES", "60"))
    agreed = refused = excluded = agreed_excluded = 0
    for case in range(cases):
        if case and case % 20 == 0:
            print(f"port differential: {case}/{cases} cases, {agreed} agreed with git, {refused} with rejects, "
                  f"{excluded} with a hunk excluded")
        old, fixed, new = _drifted_case(rng)
        if fixed == old:
            continue
        work = tmp_path / f"case{case}"
        work.mkdir()
        diff = git_diff(work, {"f.py": b"".join(old)}, {"f.py": b"".join(fixed)})
        header, hunks = _hunk_texts(diff)
        drop = rng.randrange(len(hunks)) if len(hunks) > 1 and rng.random() < 0.35 else None
        registry.add(f"c{case}", diff)
        if drop is not None:
            excluded += 1
            manifest = registry.path / f"c{case}" / "manifest.toml"
            manifest.write_text(manifest.read_text().replace(
                "[exclude]\n", f'[exclude]\n"f.py" = {{ hunks = [{drop + 1}], reason = "not here" }}\n'))
        tree = work / "new"
        write_tree(tree, {"f.py": b"".join(new)})
        before = read_tree(tree)
        out = work / "ported.diff"
        run = cli("port", f"c{case}", "--root", tree, "--patches", registry.path, "--fuzz", "0", "--output", out)
        assert run.code in (0, 1), run.out + run.err
        assert read_tree(tree) == before  # port never applies
        filtered = work / "filtered.diff"  # the old diff without the excluded hunk, as the oracle's input
        filtered.write_bytes(header + b"".join(h for i, h in enumerate(hunks) if i != drop))
        theirs = git_copy(work, tree, "git")
        by_git = git(theirs, "apply", str(filtered), check=False).returncode == 0
        if run.code == 1:
            refused += 1
            rejected = len(re.findall(r"^  not placed ", run.out, re.M))
            assert (work / "ported.diff.rej/f.py.rej").read_bytes().count(b"\n@@ ") == rejected, run.out
            if out.exists():  # some hunks placed: they make a diff git takes as it is
                check = git(git_copy(work, tree, "mine"), "apply", "--check", str(out), check=False)
                assert check.returncode == 0, (case, check.stderr, run.out)
            continue
        mine = git_copy(work, tree, "mine")
        _check_headers(out.read_bytes())
        applied = git(mine, "apply", str(out), check=False)
        assert applied.returncode == 0, (case, applied.stderr, out.read_text())
        if by_git:
            assert (mine / "f.py").read_bytes() == (theirs / "f.py").read_bytes(), (case, run.out)
            agreed += 1
            agreed_excluded += drop is not None
    print(f"port differential: {cases} cases, {agreed} agreed with git ({agreed_excluded} of them with a hunk "
          f"excluded), {refused} with rejects, {excluded} with a hunk excluded")
    assert agreed >= cases // 3 and agreed_excluded >= cases // 20, (agreed, agreed_excluded, refused, excluded)


def _drifted_case(rng: random.Random) -> tuple[list[bytes], list[bytes], list[bytes]]:
    """An old file, the patch's version of it, and a new tree's version (blocks inserted, look-alikes too)."""
    old = _random_file(rng, rng.randrange(20, 90))
    fixed = list(old)
    spots = []
    for _ in range(rng.randrange(1, 4)):
        at = rng.randrange(len(fixed))
        spots.append(at)
        if rng.random() < 0.5:
            fixed[at] = b"changed %d\n" % rng.randrange(10**6)
        else:
            fixed.insert(at, b"added %d\n" % rng.randrange(10**6))
    new = list(old)
    for _ in range(rng.randrange(1, 4)):
        at = rng.randrange(len(new) + 1)
        spot = rng.choice(spots)
        pick = rng.random()
        if pick < 0.4:  # a planted copy of a hunk's whole pre-image (and more): a look-alike
            block = old[max(0, spot - 5):spot + 6]
        elif pick < 0.55:
            block = old[at:at + rng.randrange(2, 8)]
        else:
            block = _random_file(rng, rng.randrange(1, 30))
        new[at:at] = block
    return old, fixed, new


def _hunk_texts(diff: bytes) -> tuple[bytes, list[bytes]]:
    """The diff (one file) cut at its `@@` lines: its header and each hunk's own bytes (an oracle's cut, not
    patchkit's parser)."""
    rows = diff.splitlines(keepends=True)
    starts = [i for i, row in enumerate(rows) if row.startswith(b"@@ ")]
    cuts = [*starts, len(rows)]
    return b"".join(rows[:starts[0]]), [b"".join(rows[a:b]) for a, b in itertools.pairwise(cuts)]


def _check_headers(diff: bytes) -> None:
    """Each hunk header's counts match its body, and its new start is its old start moved by the lines the
    hunks before it (in its file) add: an oracle of its own, not patchkit's parser."""
    delta = 0
    rows = diff.split(b"\n")
    for i, row in enumerate(rows):
        if row.startswith(b"diff --git "):
            delta = 0
        match = re.match(rb"^@@ -(\d+),(\d+) \+(\d+),(\d+) @@", row)
        if match is None:
            continue
        old_start, old_count, new_start, new_count = (int(g) for g in match.groups())
        assert new_start - old_start == delta or (old_count == 0 or new_count == 0), row
        body = rows[i + 1:i + 1 + old_count + new_count + 10]
        olds = news = 0
        for line in body:
            if olds == old_count and news == new_count:
                break
            kind = line[:1]
            olds += kind in (b" ", b"-")
            news += kind in (b" ", b"+")
        assert (olds, news) == (old_count, new_count), row
        delta += new_count - old_count


def test_a_look_alike_where_git_would_look_is_not_guessed_against(tmp_path: Path, registry: Registry) -> None:
    """Hunk 2's pre-image is where the hunk before it puts it (+10, like hunk 1) and a copy of it is at the line
    its header names, where `git apply` of the old diff puts it: two readings, so port names both."""
    lines = [b"u%d\n" % i for i in range(1, 61)]
    fixed = [b"U10\n" if x == b"u10\n" else b"U40\n" if x == b"u40\n" else x for x in lines]
    registry.add("p", git_diff(tmp_path, {"f.py": b"".join(lines)}, {"f.py": b"".join(fixed)}))
    top = [b"new %d\n" % i for i in range(10)]
    new = top + lines[0:19] + lines[26:33] + lines[36:43] + lines[33:]
    assert new[36:43] == lines[36:43] == new[46:53]  # the copy at the header's line, the real one at +10
    tree = tmp_path / "new"
    write_tree(tree, {"f.py": b"".join(new)})
    code, out, _ = port(registry, tree, "--fuzz", "0")
    assert code == 1, out
    row = next(r for r in out.splitlines() if "not placed" in r)
    assert "hunk 2" in row and "(line 47)" in row and "(line 37)" in row and "not guessed" in row
    assert "line 47 (100% alike)" in out and "line 37 (100% alike)" in out
    assert re.search(r"moved +f.py hunk 1 .*moved \+10 lines", out)


def test_a_hunk_the_new_tree_already_has_says_so(tmp_path: Path, registry: Registry) -> None:
    setup(tmp_path, registry)
    new = tmp_path / "new"
    shipped = module(*NAMES).replace(b"plan_step_3 = cfg.get('plan3')", b"plan_step_3 = cfg.get('plan3', 0)")
    write_tree(new, {"eng/core.py": shipped})
    code, out, _ = port(registry, new)
    assert code == 1
    row = next(r for r in out.splitlines() if "not placed" in r)
    assert "hunk 1" in row and "already has this hunk's change (its post-image is at line 14)" in row, row


# ------------------------------------------- issue 34: the filtered set, a re-pinned manifest, reject files
#
# Generated histories: the engine file is edited on commit C (the patch: `git diff C~1 C`), and the new tree is
# the base moved by other commits (lines added above, lines removed between the functions: offsets both
# ways), never by C. The oracle is real git on the new tree; every command a message prints is run as printed
# (shlex-split, from another folder, offline), exactly as a maintainer would paste it.

FUNCS = ("load", "plan", "run", "save", "stop")
EXTRA = {"eng/extra.py": b"a = 1\nb = 2\nc = 3\n"}  # a file of the patch the new tree does not have


def edit(data: bytes, *, skip: str | None = None) -> bytes:
    """The patch's intent, made by hand, one edit per function; `skip` names one left out (an excluded hunk)."""
    edits = {
        "load": (b"load_step_2 = cfg.get('load2')", b"load_step_2 = cfg.get('load2', 1)"),
        "plan": (b"plan_step_3 = cfg.get('plan3')\n", b"plan_step_3 = cfg.get('plan3')\n    trace(cfg)\n"),
        "save": (b"save_step_4 = cfg.get('save4')", b"save_step_4 = None"),
        "stop": (b"stop_step_1 = cfg.get('stop1')", b"stop_step_1 = cfg.pop('stop1')"),
    }
    for name, (old, new) in edits.items():
        if name != skip:
            assert data.count(old) == 1
            data = data.replace(old, new)
    return data


def history(tmp_path: Path) -> tuple[Path, bytes, Path]:
    """A repository: base, commit C (the patch, 4 hunks in eng/core.py, 1 in eng/extra.py) on a branch, and the
    new tree: the base with two other commits (40 lines added on top, `run` shortened). Returns the repository,
    C's diff and a plain copy of the new tree (no .git)."""
    repo = tmp_path / "engine-git"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    base = b"# engine module\n\n" + b"".join(func(name, body=12) for name in FUNCS)  # hunks 12+ lines apart
    write_tree(repo, {"eng/core.py": base, **EXTRA})
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    git(repo, "checkout", "-qb", "fix")
    write_tree(repo, {"eng/core.py": edit(base), "eng/extra.py": b"a = 1\nb = 20\nc = 3\n"})
    git(repo, "commit", "-qam", "C: the fix")
    diff = git(repo, "diff", "HEAD~1", "HEAD").stdout
    assert diff.count(b"\n@@ ") == 5
    git(repo, "checkout", "-q", "main")
    forward = b"".join(b"import mod%d\n" % i for i in range(40)) + base
    write_tree(repo, {"eng/core.py": forward})
    git(repo, "commit", "-qam", "D1: imports on top (everything moves down)")
    backward = forward.replace(b"    run_step_1 = cfg.get('run1')\n    run_step_2 = cfg.get('run2')\n", b"")
    write_tree(repo, {"eng/core.py": backward})
    git(repo, "rm", "-q", "eng/extra.py")
    git(repo, "commit", "-qam", "D2: run shortened (what follows moves up), extra.py gone")
    new = tmp_path / "new"
    shutil.copytree(repo, new, ignore=shutil.ignore_patterns(".git"))
    return repo, diff, new


def add_entry(registry: Registry, diff: bytes, excludes: str) -> Path:
    folder = registry.add("p", diff)
    manifest = folder / "manifest.toml"
    manifest.write_text(manifest.read_text().replace("[exclude]\n", "[exclude]\n" + excludes))
    return folder


def commands(text: str) -> list[str]:
    """Every command a message prints (between backticks)."""
    return re.findall(r"`([^`]+)`", text)


def run_as_printed(command: str, elsewhere: Path) -> tuple[int, str]:
    """Run a printed command exactly as printed: shlex-split, from another folder, offline (no network is
    reachable from these commands: git on local paths, mv, patchkit on the registry)."""
    words = shlex.split(command)
    cwd = os.getcwd()
    os.chdir(elsewhere)
    try:
        if words[0] == "patchkit":
            run = cli(*words[1:])
            return run.code, run.out + run.err
        done = subprocess.run(words, capture_output=True, check=False, env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1"})
        return done.returncode, (done.stdout + done.stderr).decode()
    finally:
        os.chdir(cwd)


def git_copy(tmp_path: Path, new: Path, name: str) -> Path:
    copy = tmp_path / name
    shutil.copytree(new, copy)
    git(copy, "init", "-q")
    git(copy, "add", "-A")
    git(copy, "commit", "-qm", "new")
    return copy


HUNK_EXCLUDES = ('"eng/extra.py" = "not in the new engine"\n'
                 '"eng/core.py" = { hunks = [2], reason = "upstream did it" }\n')


def test_hunk_excludes_port_to_the_filtered_set_and_a_repinned_manifest(tmp_path: Path, registry: Registry) -> None:
    """Issue 34, item 1: a file exclude and `hunks = [2]` (plan's hunk). The ported diff is the filtered set
    (git applies it to the new tree as it is), the ported manifest has no exclude left that could name another
    hunk (each is kept as a comment), its pins are the ported diff's, and the printed commands install it."""
    _, diff, new = history(tmp_path)
    folder = add_entry(registry, diff, HUNK_EXCLUDES)
    old_manifest = (folder / "manifest.toml").read_bytes()
    before = read_tree(new)
    code, out, err = port(registry, new)
    assert code == 0, out + err
    assert read_tree(new) == before and (folder / "manifest.toml").read_bytes() == old_manifest
    assert "eng/extra.py: excluded by the manifest, left out of the ported diff" in out
    assert "eng/core.py: hunk 2 excluded by the manifest, left out of the ported diff" in out
    assert len(re.findall(r"^  moved +eng/core.py hunk [134] ", out, re.M)) == 3, out
    ported = folder / "change.diff.ported"
    text = ported.read_bytes()
    assert b"extra.py" not in text and b"trace(cfg)" not in text and text.count(b"\n@@ ") == 3
    # The oracle: plain `git apply` on the new tree gives the new tree with the kept edits, made by hand.
    copy = git_copy(tmp_path, new, "by-git")
    assert git(copy, "apply", "--check", str(ported), check=False).returncode == 0
    git(copy, "apply", str(ported))
    want = edit(before["eng/core.py"][0], skip="plan")
    assert (copy / "eng/core.py").read_bytes() == want
    manifest = (folder / "change.diff.ported.manifest.toml").read_text()
    assert "hunks = [" not in manifest.split("# left out")[0].split("[exclude]")[1]
    assert ('# left out of the ported diff by patchkit port: "eng/core.py" = { hunks = [2], reason = '
            '"upstream did it" }') in manifest
    assert f'sha256 = "{hashlib.sha256(text).hexdigest()}"' in manifest
    # Every printed command, as printed, from another folder: git's check, then the two moves.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    printed = commands(out)
    assert [c.split()[0] for c in printed] == ["env", "mv", "mv"], out
    for command in printed:
        done, said = run_as_printed(command, elsewhere)
        assert done == 0, (command, said)
    assert (folder / "change.diff").read_bytes() == text and not ported.exists()
    status = cli("status", "p", "--root", new, "--patches", registry.path, "--json")
    assert status.code == 3, status.out + status.err  # unapplied: pins, hunk set and base all agree
    assert status.json()["base"]["state"] == "pinned", status.out
    assert cli("apply", "p", "--root", new, "--patches", registry.path).code == 0
    assert read_tree(new)["eng/core.py"][0] == want


def test_a_stale_hunkset_pin_is_refused_as_status_refuses(tmp_path: Path, registry: Registry) -> None:
    """Issue 34, item 1: excludes edited after the pin. port says what status says (exit 2), and the command
    it prints re-pins the entry, as printed, from another folder; then port runs."""
    _, diff, new = history(tmp_path)
    folder = add_entry(registry, diff, '"eng/extra.py" = "not in the new engine"\n')
    (tmp_path / "C.diff").write_bytes(diff)
    assert cli("vendor", "p", "--patches", registry.path, "--from", tmp_path / "C.diff").code == 0
    manifest = folder / "manifest.toml"
    source = manifest.read_text().split("[source]")[1]
    assert "C.diff" in source
    manifest.write_text(manifest.read_text().replace(
        '"eng/extra.py" = "not in the new engine"\n', '"eng/extra.py" = "not in the new engine"\n'
        '"eng/core.py" = { hunks = [2], reason = "upstream did it" }\n'))
    status = cli("status", "p", "--root", new, "--patches", registry.path)
    ported = port(registry, new)
    assert status.code == 2 and ported[0] == 2, ported
    assert "the filtered hunk set has sha256" in ported[2] and ported[2] == status.err
    assert not (folder / "change.diff.ported").exists()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    printed = commands(ported[2])
    assert len(printed) == 1 and printed[0].startswith("patchkit vendor p "), ported[2]
    done, said = run_as_printed(printed[0], elsewhere)
    assert done == 0, said
    assert manifest.read_text().split("[source]")[1] == source  # re-pinning its own diff keeps the source
    code, out, err = port(registry, new)
    assert code == 0, out + err


def rejected_tree(new: Path) -> bytes:
    """The new tree with save's removed line changed upstream: hunk 3 of eng/core.py fits nowhere."""
    core = new / "eng/core.py"
    data = core.read_bytes().replace(b"save_step_4 = cfg.get('save4')", b"save_step_4 = compute(cfg)")
    core.write_bytes(data)
    return data


def test_a_hunk_that_fits_nowhere_gets_git_s_reject_file_and_the_placed_hunks_a_diff(
    tmp_path: Path, registry: Registry
) -> None:
    """Issue 34, item 2, without excludes but for the file the new tree lacks: the placed hunks make the
    ported diff (git applies it), the others go to reject files byte for byte as `git apply --reject` of the
    old diff writes them on the same tree; exit 1, nothing applied, the manifest as it was."""
    _, diff, new = history(tmp_path)
    folder = add_entry(registry, diff, "")
    rejected_tree(new)
    core = new / "eng/core.py"  # and stop's context removed upstream: three lines, more than the fuzz
    context = b"".join(b"    stop_step_%d = cfg.get('stop%d')\n" % (i, i) for i in (2, 3, 4))
    core.write_bytes(core.read_bytes().replace(context, b""))
    old_manifest = (folder / "manifest.toml").read_bytes()
    before = read_tree(new)
    code, out, err = port(registry, new)
    assert code == 1, out + err
    assert read_tree(new) == before and (folder / "manifest.toml").read_bytes() == old_manifest
    assert "3 of 5 hunks could not be placed" in out and "nothing applied, the manifest not re-pinned" in out
    assert re.search(r"not placed +eng/core.py hunk 4 @@ -\d+,\d+ \+\d+,\d+ @@[^:]*: no place in the file", out)
    assert re.search(r"not placed +eng/core.py hunk 3 @@ -\d+,\d+ \+\d+,\d+ @@[^:]*: no place in the file", out)
    assert re.search(r"not placed +eng/extra.py hunk 1 @@ -1,3 \+1,3 @@: the new tree does not have this file", out)
    rejects = folder / "change.diff.ported.rej"
    assert sorted(p.relative_to(rejects).as_posix() for p in rejects.rglob("*.rej")) == [
        "eng/core.py.rej", "eng/extra.py.rej"]
    assert not (folder / "change.diff.ported.manifest.toml").exists()
    # The oracle: git's own --reject of the old diff on a copy of the new tree.
    theirs = git_copy(tmp_path, new, "git-reject")
    assert git(theirs, "apply", "--reject", str(folder / "change.diff"), check=False).returncode == 1
    assert (rejects / "eng/core.py.rej").read_bytes() == (theirs / "eng/core.py.rej").read_bytes()
    mine = git_copy(tmp_path, new, "git-ported")
    ported = folder / "change.diff.ported"
    assert git(mine, "apply", "--check", str(ported), check=False).returncode == 0
    git(mine, "apply", str(ported))
    assert (mine / "eng/core.py").read_bytes() == (theirs / "eng/core.py").read_bytes()
    assert f"rejected: {rejects / 'eng/core.py.rej'} (2 hunks)" in out
    # Every printed command runs as printed: git's check of the placed hunks, a port with more fuzz to new
    # files (still refused: a removed line that changed is never fuzzed).
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    printed = commands(out)
    assert [c.split()[:3:2] for c in printed] == [["env", "git"], ["patchkit", "p"]], out
    assert run_as_printed(printed[0], elsewhere)[0] == 0
    done, said = run_as_printed(printed[1], elsewhere)
    assert done == 1 and "fuzz 3" in said and (folder / "change.diff.ported.2.rej/eng/core.py.rej").is_file()
    assert read_tree(new) == before


def test_a_reject_with_hunk_excludes_and_an_earlier_port_is_never_written_over(
    tmp_path: Path, registry: Registry
) -> None:
    """Issue 34, item 2, with `hunks = [2]`: the reject file holds hunk 3 as the old diff has it; a second port
    refuses (exit 2) while the first one's files are there (the maintainer's edits to the reject kept), and the
    command it prints ports to new names, as printed."""
    _, diff, new = history(tmp_path)
    folder = add_entry(registry, diff, HUNK_EXCLUDES)
    rejected_tree(new)
    code, out, err = port(registry, new)
    assert code == 1, out + err
    assert "1 of 3 hunks could not be placed" in out
    reject = folder / "change.diff.ported.rej/eng/core.py.rej"
    hunks = diff.split(b"\n@@ ")
    save = next(h for h in hunks if b"save_step_4 = None" in h)
    assert reject.read_bytes() == save_reject(save)
    ported = folder / "change.diff.ported"
    assert b"trace(cfg)" not in ported.read_bytes() and b"save_step" not in ported.read_bytes()
    copy = git_copy(tmp_path, new, "git-ported")
    assert git(copy, "apply", "--check", str(ported), check=False).returncode == 0
    git(copy, "apply", str(ported))
    assert (copy / "eng/core.py").read_bytes() == edit(
        (new / "eng/core.py").read_bytes().replace(b"compute(cfg)", b"cfg.get('save4')"), skip="plan"
    ).replace(b"save_step_4 = None", b"save_step_4 = compute(cfg)")
    reject.write_bytes(reject.read_bytes() + b"# my notes\n")
    mine = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    code, out, err = port(registry, new)
    assert code == 2 and "an earlier port's output is there" in err and str(ported) in err, err
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == mine
    # The ported diff moved away (installed, say), the reject folder kept: still nothing written.
    ported.rename(tmp_path / "installed.diff")
    again = port(registry, new)
    assert again[0] == 2 and f"{folder / 'change.diff.ported.rej'}: an earlier port's output" in again[2], again
    assert not ported.exists() and reject.read_bytes().endswith(b"# my notes\n")
    printed = commands(err)
    assert len(printed) == 1, err
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done, said = run_as_printed(printed[0], elsewhere)
    assert done == 1 and "1 of 3 hunks could not be placed" in said
    assert (folder / "change.diff.ported.2.rej/eng/core.py.rej").read_bytes() == save_reject(save)


def save_reject(save: bytes) -> bytes:
    return b"diff a/eng/core.py b/eng/core.py\t(rejected hunks)\n@@ " + save.split(b"\ndiff --git")[0] + b"\n"


def test_port_never_writes_into_the_engine_tree(tmp_path: Path, registry: Registry) -> None:
    _, diff, new = history(tmp_path)
    add_entry(registry, diff, HUNK_EXCLUDES)
    before = read_tree(new)
    code, _, err = port(registry, new, "--output", new / "eng" / "ported.diff")
    assert code == 2 and "port never writes into the engine tree it reads" in err, err
    assert read_tree(new) == before


def test_the_printed_git_check_checks_a_tree_inside_another_repository(tmp_path: Path, registry: Registry) -> None:
    """A new tree that is a folder of another git repository (a monorepo, a checkout holding several engines):
    git there would skip every path of the diff and pass having checked nothing. The printed check does
    check: it passes on the tree as ported, and fails once the tree no longer takes the diff."""
    _, diff, new = history(tmp_path)
    outer = tmp_path / "monorepo"
    outer.mkdir()
    git(outer, "init", "-q")
    inside = outer / "engines" / "next"
    shutil.copytree(new, inside)
    git(outer, "add", "-A")
    git(outer, "commit", "-qm", "engines")
    add_entry(registry, diff, HUNK_EXCLUDES)
    code, out, err = port(registry, inside)
    assert code == 0, out + err
    check = commands(out)[0]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert run_as_printed(check, elsewhere)[0] == 0
    core = inside / "eng/core.py"
    core.write_bytes(core.read_bytes().replace(b"load_step_2 = cfg.get('load2')", b"load_step_2 = 0"))
    done, said = run_as_printed(check, elsewhere)
    assert done == 1 and "patch does not apply" in said, said
