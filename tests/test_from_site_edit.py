"""`new --from-site` on a site that carries no diff (issue 34 item 3): a `sed -i` site's edit done by patchkit on
a copy of the pristine tree (never by running the script), `git apply "$3"` in a function, and the refusals
that say why a site cannot be converted and what to pass instead.

Everything runs through the real CLI in a subprocess, from another folder, offline; every hint is run as
printed. The oracle for a converted sed is real GNU `sed -i` run on a second copy of the pristine tree: the
vendored diff, applied by real `git apply` to a first copy, must leave the same bytes."""

from __future__ import annotations

import os
import random
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from patchkit.tooling.siteedit import Unconvertible, read_sed, run_sed
from tests.conftest import git, git_diff, write_tree

OFFLINE = {"PATH": "/usr/bin:/bin", "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9",
           "LC_ALL": "C"}
pytestmark = pytest.mark.skipif(shutil.which("sed") is None, reason="needs GNU sed, the oracle")

A_PY = b"".join(b"a %d = value(%d)\n" % (i, i) for i in range(1, 25)) + b"x.y = 'a|b' # (p) {q}\n"
ENGINE = {
    "vllm/a.py": A_PY,
    "vllm/crlf.py": A_PY.replace(b"\n", b"\r\n"),
    "vllm/nofinal.py": A_PY.rstrip(b"\n"),
    "vllm/latin1.py": A_PY.replace(b"(1)", b"(1) # caf\xe9"),  # not UTF-8: bytes stay as they are
}


def patchkit(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "patchkit", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, check=False, env={**OFFLINE, "HOME": str(cwd)})


def consumer(tmp_path: Path, lines: list[str], files: dict[str, bytes] | None = None) -> Path:
    """A consuming repository whose docker/patch.sh holds `lines` after a preamble of 3 lines; a pristine
    site-packages-like engine tree at tmp_path/pristine, and an empty folder tmp_path/elsewhere to run from."""
    repo = tmp_path / "repo"
    script = ["#!/bin/bash", "set -e", 'SITE=$(python3 -c "import site; print(site.getsitepackages()[0])")', *lines]
    write_tree(repo, {"pyproject.toml": b'[tool.patchkit]\npatches = "registry"\n',
                      "docker/patch.sh": ("\n".join(script) + "\n").encode(), **(files or {})})
    write_tree(tmp_path / "pristine", ENGINE)
    (tmp_path / "elsewhere").mkdir(exist_ok=True)
    return repo


def new(tmp_path: Path, patch_id: str, *source: str | Path) -> subprocess.CompletedProcess[str]:
    repo = tmp_path / "repo"
    return patchkit("new", patch_id, "--patches", repo / "registry", "--target", "vllm", "--local", "ours",
                    *source, cwd=tmp_path / "elsewhere")


def site(tmp_path: Path, line: int) -> list[str]:
    return ["--from-site", f"{tmp_path / 'repo' / 'docker' / 'patch.sh'}:{line}"]


def applied(tmp_path: Path, diff: Path, name: str) -> Path:
    """A copy of the pristine tree with `diff` applied by real git apply."""
    copy = tmp_path / name
    shutil.copytree(tmp_path / "pristine", copy)
    git(copy, "apply", "-p1", str(diff))
    return copy


def sedded(tmp_path: Path, argv: list[str], target: str, name: str) -> Path:
    """A copy of the pristine tree edited by real GNU sed (the C locale, as in a container without one)."""
    copy = tmp_path / name
    shutil.copytree(tmp_path / "pristine", copy)
    subprocess.run(["sed", *argv, str(copy / target)], check=True, env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"})
    return copy


# ------------------------------------------------------------------------------------------ sed -i, converted

SED_CASES = [
    (["-i", "s/value(12)/twelve/"], "vllm/a.py"),
    (["-i", "s/a \\([0-9]*\\) = /A\\1: /g"], "vllm/a.py"),  # groups, \1
    (["-i", "-E", "s/([0-9]+)\\)/<\\1>/g"], "vllm/a.py"),  # extended
    (["-i", "-e", "s|a 3 |A-3 |", "-e", "s#'a|b'#'c'#"], "vllm/a.py"),  # -e list, other delimiters
    (["-i", "s/^a 1/one/;s/$/ ;/"], "vllm/a.py"),  # ; separated, anchors
    (["-i", "s/x*/-/g"], "vllm/nofinal.py"),  # empty matches; no final newline kept
    (["-i", "s/ = value/=V/g"], "vllm/crlf.py"),  # CRLF kept
    (["-i", "s/(p) {q}/[&]/"], "vllm/a.py"),  # a basic expression's literal ( { &
    (["-i", "s/[[:digit:]]\\{2\\}/NN/g"], "vllm/a.py"),  # class and interval
    (["-i", "s/value(7)/seven/"], "vllm/latin1.py"),  # a literal expression on a file that is not UTF-8
    (["-Ei", "s/\\bvalue\\b/v/"], "vllm/a.py"),
]


@pytest.mark.parametrize(("argv", "target"), SED_CASES, ids=[" ".join(a) for a, _ in SED_CASES])
def test_sed_site_vendors_the_bytes_real_sed_makes(tmp_path: Path, argv: list[str], target: str) -> None:
    line = f"sed {shlex.join(argv)} \"$SITE/{target}\""
    consumer(tmp_path, [line])
    made = new(tmp_path, "sed-fix", *site(tmp_path, 4), "--base-tree", tmp_path / "pristine")
    assert made.returncode == 0, made.stderr
    folder = tmp_path / "repo" / "registry" / "sed-fix"
    manifest = (folder / "manifest.toml").read_text()
    assert '[source]\nkind = "site"\npath = "docker/patch.sh"\nline = 4\n' in manifest
    ours = applied(tmp_path, folder / "sed-fix.diff", "ours")
    theirs = sedded(tmp_path, argv, target, "theirs")
    assert (ours / target).read_bytes() == (theirs / target).read_bytes()
    assert (ours / target).read_bytes() != ENGINE[target]
    assert (tmp_path / "pristine" / target).read_bytes() == ENGINE[target]  # the pristine tree is not written


def test_sed_site_without_base_tree_says_to_pass_it_and_the_hint_runs(tmp_path: Path) -> None:
    consumer(tmp_path, ['sed -i "s/value(3)/three/" "$SITE/vllm/a.py"'])
    refused = new(tmp_path, "sed-fix", *site(tmp_path, 4))
    assert refused.returncode == 2
    assert "the site at line 4 is a sed -i edit, not a diff" in refused.stderr, refused.stderr
    hint = "pass --base-tree PRISTINE (the tree the script edits) to run the site's edit on a copy"
    assert hint in refused.stderr
    assert not (tmp_path / "repo" / "registry").exists()
    again = new(tmp_path, "sed-fix", *site(tmp_path, 4), "--base-tree", tmp_path / "pristine")  # as the hint says
    assert again.returncode == 0, again.stderr


def test_a_line_without_a_site_lists_every_site_near_it_and_each_runs(tmp_path: Path) -> None:
    consumer(tmp_path, ["echo start", 'sed -i "s/value(3)/three/" "$SITE/vllm/a.py"',
                        "sed -i 's/value(4)/four/' /usr/local/lib/python3.12/dist-packages/vllm/a.py"])
    refused = new(tmp_path, "sed-fix", *site(tmp_path, 4))
    assert refused.returncode == 2 and "at line 4" in refused.stderr, refused.stderr
    listed = refused.stderr.split("the scan finds these in ", 1)[1].split("; pass one of them", 1)[0]
    assert listed == "docker/patch.sh: 5 (in-place-edit), 6 (in-place-edit)", refused.stderr  # not "none"
    for number in (5, 6):
        made = new(tmp_path, f"fix-{number}", *site(tmp_path, number), "--base-tree", tmp_path / "pristine")
        assert made.returncode == 0, made.stderr


REFUSED = [
    ("sed -i '3d' \"$SITE/vllm/a.py\"", "has an address: only `s/RE/REPL/` commands"),
    ("sed -i 's/value\\|a/X/' \"$SITE/vllm/a.py\"", "an alternative (\\|)"),
    ("sed -i 's/\\(a\\) \\1/X/' \"$SITE/vllm/a.py\"", "a back-reference \\1"),
    ("sed -i.bak 's/a/b/' \"$SITE/vllm/a.py\"", "gives -i a backup suffix"),
    ("sed -i 's/a/\\U&/' \"$SITE/vllm/a.py\"", "the escape \\U in a replacement"),
    ("sed -i 's/a/b/2' \"$SITE/vllm/a.py\"", "has the flags '2': only g is converted"),
    ('sed -i "s/a/$NAME/" "$SITE/vllm/a.py"', "holds a shell expansion"),
    ("sed -i 's/value(.)/X/' \"$SITE/vllm/latin1.py\"", "holds non-ASCII bytes"),
    ("sed -i 's/a/b/' \"$SITE/vllm/a.py\" \"$SITE/vllm/crlf.py\"", "edits 2 files"),
    ("perl -pi -e 's/a/b/' \"$SITE/vllm/a.py\"", "is not a plain `sed -i` command"),
    ("find \"$SITE/vllm\" -name '*.py' -exec sed -i 's/a/b/' {} +", "is not a plain `sed -i` command"),
]


@pytest.mark.parametrize(("line", "said"), REFUSED, ids=[s for _, s in REFUSED])
def test_a_sed_site_patchkit_cannot_convert_is_refused_saying_why(tmp_path: Path, line: str, said: str) -> None:
    consumer(tmp_path, [line])
    refused = new(tmp_path, "sed-fix", *site(tmp_path, 4), "--base-tree", tmp_path / "pristine")
    assert refused.returncode == 2, refused.stdout
    assert said in refused.stderr, refused.stderr
    assert "docker/patch.sh:4" in refused.stderr
    assert "pass --from-tree EDITED --base-tree PRISTINE" in refused.stderr
    assert not (tmp_path / "repo" / "registry").exists()


@pytest.mark.parametrize("kind", ["sed", "python"])
def test_an_edit_that_changes_nothing_in_the_base_tree_says_to_pass_the_pristine_one(tmp_path: Path, kind: str) -> None:
    if kind == "sed":
        lines, at = ["sed -i 's/value(3)/three/' \"$SITE/vllm/a.py\""], 4
    else:
        lines, at = python_site("a.py", "p.write_text(s.replace('value(3)', 'three'))"), 8
    consumer(tmp_path, lines)
    edited = sedded(tmp_path, ["-i", "s/value(3)/three/"], "vllm/a.py", "edited")  # a tree the script edited
    refused = new(tmp_path, "fix", *site(tmp_path, at), "--base-tree", edited)
    assert refused.returncode == 2, refused.stdout
    assert f"changes nothing in {edited / 'vllm' / 'a.py'}" in refused.stderr, refused.stderr
    assert "pass as --base-tree the pristine tree the script edits (not one it has edited)" in refused.stderr
    made = new(tmp_path, "fix", *site(tmp_path, at), "--base-tree", tmp_path / "pristine")  # as the hint says
    assert made.returncode == 0, made.stderr


def test_the_from_tree_hint_runs_on_a_copy_the_user_edits(tmp_path: Path) -> None:
    consumer(tmp_path, ["sed -i '3d' \"$SITE/vllm/a.py\""])
    refused = new(tmp_path, "sed-fix", *site(tmp_path, 4), "--base-tree", tmp_path / "pristine")
    assert "make the edit in a copy of the pristine tree and pass --from-tree EDITED --base-tree PRISTINE" in (
        refused.stderr)
    edited = sedded(tmp_path, ["-i", "3d"], "vllm/a.py", "edited")  # the edit, made by the user on a copy
    made = new(tmp_path, "sed-fix", "--from-tree", edited, "--base-tree", tmp_path / "pristine")
    assert made.returncode == 0, made.stderr


def test_a_sed_site_whose_file_is_not_under_the_base_tree_names_the_path(tmp_path: Path) -> None:
    consumer(tmp_path, ["cd /opt/ATOM && sed -i 's/a/b/' atom/model.py"])
    refused = new(tmp_path, "sed-fix", *site(tmp_path, 4), "--base-tree", tmp_path / "pristine")
    assert refused.returncode == 2
    assert (f"the site edits /opt/ATOM/atom/model.py, which is atom/model.py under --base-tree "
            f"{tmp_path / 'pristine'}: there is no such file") in refused.stderr, refused.stderr
    assert "pass as --base-tree the pristine folder that holds atom/model.py" in refused.stderr
    atom = tmp_path / "atom-tree"
    write_tree(atom, {"atom/model.py": b"a = 1\n"})
    made = new(tmp_path, "sed-fix", *site(tmp_path, 4), "--base-tree", atom)  # as the hint says
    assert made.returncode == 0, made.stderr
    assert b"+b = 1\n" in (tmp_path / "repo" / "registry" / "sed-fix" / "sed-fix.diff").read_bytes()


def python_site(name: str, statement: str) -> list[str]:
    return ["python3 - <<'PY'", "import vllm, pathlib", f'p = pathlib.Path(vllm.__file__).parent / "{name}"',
            "s = p.read_text()", statement, "PY"]


def test_a_python_write_of_literal_replacements_vendors_what_python_writes(tmp_path: Path) -> None:
    statement = "p.write_text(s.replace('value(3)', 'three').replace('a 1', 'A 1', 1))"
    consumer(tmp_path, python_site("a.py", statement))
    made = new(tmp_path, "py-fix", *site(tmp_path, 8), "--base-tree", tmp_path / "pristine")
    assert made.returncode == 0, made.stderr
    ours = applied(tmp_path, tmp_path / "repo" / "registry" / "py-fix" / "py-fix.diff", "ours")
    theirs = tmp_path / "theirs"
    shutil.copytree(tmp_path / "pristine", theirs)
    oracle = f"import pathlib\np = pathlib.Path({str(theirs / 'vllm' / 'a.py')!r})\ns = p.read_text()\n{statement}\n"
    subprocess.run([sys.executable, "-c", oracle], check=True)  # the script's own statements, run by Python
    assert (ours / "vllm/a.py").read_bytes() == (theirs / "vllm/a.py").read_bytes() != ENGINE["vllm/a.py"]


PY_REFUSED = [
    ("a.py", "p.write_text(compute(p.read_text()))", "the statement does not write back literal replacements"),
    ("crlf.py", "p.write_text(s.replace('value(3)', 'three'))", "as text, which would change its CR bytes"),
]


@pytest.mark.parametrize(("name", "statement", "said"), PY_REFUSED, ids=[n for n, _, _ in PY_REFUSED])
def test_a_python_write_patchkit_cannot_convert_is_refused_saying_why(
    tmp_path: Path, name: str, statement: str, said: str
) -> None:
    consumer(tmp_path, python_site(name, statement))
    refused = new(tmp_path, "py-fix", *site(tmp_path, 8), "--base-tree", tmp_path / "pristine")
    assert refused.returncode == 2, refused.stdout
    assert "docker/patch.sh:8" in refused.stderr and said in refused.stderr, refused.stderr
    assert "pass --from-tree EDITED --base-tree PRISTINE" in refused.stderr
    without = new(tmp_path, "py-fix", *site(tmp_path, 8))
    assert "pass --base-tree PRISTINE (the tree the script edits)" in without.stderr, without.stderr


def test_a_site_of_another_kind_is_refused_saying_patchkit_never_runs_it(tmp_path: Path) -> None:
    consumer(tmp_path, ["cp docker/fixed.py \"$SITE/vllm/a.py\""])
    refused = new(tmp_path, "cp-fix", *site(tmp_path, 4), "--base-tree", tmp_path / "pristine")
    assert refused.returncode == 2, refused.stdout
    assert "the copy-over site at line 4 carries no diff" in refused.stderr, refused.stderr
    assert "it never runs the script's code" in refused.stderr


# ------------------------------------------------------------------------------- git apply "$3" in a function


def fix_diff(tmp_path: Path) -> bytes:
    (tmp_path / "g").mkdir(exist_ok=True)
    return git_diff(tmp_path / "g", ENGINE, {"vllm/a.py": A_PY.replace(b"value(5)", b"five")})


FUNCTION = ["apply_fix() {", '  git -C "$SITE" apply -p1 "$3"', "}"]


def test_git_apply_of_a_functions_argument_reads_the_file_its_one_call_names(tmp_path: Path) -> None:
    diff = fix_diff(tmp_path)
    consumer(tmp_path, [*FUNCTION, "apply_fix a b docker/fix.diff"], {"docker/fix.diff": diff})
    made = new(tmp_path, "fn-fix", *site(tmp_path, 5), "--base-tree", tmp_path / "pristine")
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "repo" / "registry" / "fn-fix" / "fn-fix.diff").read_bytes() == diff


def test_git_apply_of_a_functions_argument_called_with_several_files_says_to_pass_one(tmp_path: Path) -> None:
    diff = fix_diff(tmp_path)
    consumer(tmp_path, [*FUNCTION, "apply_fix a b docker/fix.diff", 'apply_fix a b "$OTHER"'],
             {"docker/fix.diff": diff})
    refused = new(tmp_path, "fn-fix", *site(tmp_path, 5), "--base-tree", tmp_path / "pristine")
    assert refused.returncode == 2, refused.stdout
    assert ("the diff file is the function's argument $3: pass it with --from FILE (apply_fix is given "
            "docker/fix.diff at line 7, $OTHER at line 8)") in refused.stderr, refused.stderr
    assert "pass the diff file with --from FILE in place of --from-site" in refused.stderr
    made = new(tmp_path, "fn-fix", "--from", tmp_path / "repo" / "docker" / "fix.diff",
               "--base-tree", tmp_path / "pristine")  # the hint, with the file the message names
    assert made.returncode == 0, made.stderr


def test_git_apply_of_the_scripts_own_argument_says_to_pass_the_file(tmp_path: Path) -> None:
    diff = fix_diff(tmp_path)
    consumer(tmp_path, ['git -C "$SITE" apply -p1 "$1"'], {"docker/fix.diff": diff})
    refused = new(tmp_path, "arg-fix", *site(tmp_path, 4), "--base-tree", tmp_path / "pristine")
    assert refused.returncode == 2, refused.stdout
    assert "the diff file is the script's argument $1: pass it with --from FILE" in refused.stderr, refused.stderr
    made = new(tmp_path, "arg-fix", "--from", tmp_path / "repo" / "docker" / "fix.diff",
               "--base-tree", tmp_path / "pristine")
    assert made.returncode == 0, made.stderr


def test_what_new_prints_after_a_sed_site_runs_as_printed(tmp_path: Path) -> None:
    argv = ["-i", "s/value(9)/nine/"]
    consumer(tmp_path, [f'sed {shlex.join(argv)} "$SITE/vllm/a.py"'])
    made = new(tmp_path, "sed-fix", *site(tmp_path, 4), "--base-tree", tmp_path / "pristine")
    assert made.returncode == 0, made.stderr
    again = made.stdout.split("(then vendor again: ", 1)[1].split(")\n", 1)[0]
    call = next(w for w in made.stdout.splitlines() if "lint then stops reporting the site" in w).rsplit(": ", 1)[1]
    rerun = patchkit(*shlex.split(again)[1:], cwd=tmp_path / "elsewhere")
    assert rerun.returncode == 0 and "already vendored" in rerun.stdout, rerun.stderr
    theirs = sedded(tmp_path, argv, "vllm/a.py", "theirs")
    done = patchkit(*shlex.split(call)[1:], cwd=tmp_path / "elsewhere")  # applies to the base tree it names
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "pristine/vllm/a.py").read_bytes() == (theirs / "vllm/a.py").read_bytes()


# ------------------------------------------------------------------------ the translation against real sed

ATOMS = ["a", "b", "ab", ".", "[ab]", "[^a ]", "x", "\\(a\\)", "\\(ab*\\)", "^", "$", "\\w", "\\s", "\\b", "\\<",
         " ", "[[:digit:]]", "1"]
REPEATS = ["", "", "*", "\\+", "\\?", "\\{1,2\\}", "\\{2\\}", "\\{,2\\}"]


def test_random_substitutions_leave_the_bytes_real_sed_leaves(tmp_path: Path) -> None:
    """Seeded random basic expressions and lines (PATCHKIT_SED_EXAMPLES, default 300): every one patchkit
    converts gives sed's bytes; those it refuses are counted, not compared."""
    rng = random.Random(34)
    converted = 0
    target = tmp_path / "f"
    for _ in range(int(os.environ.get("PATCHKIT_SED_EXAMPLES", "300"))):
        pattern = "".join(rng.choice(ATOMS) + rng.choice(REPEATS) for _ in range(rng.randint(1, 4)))
        script = f"s/{pattern}/{rng.choice(['X', '<&>', '', '[&]'])}/{rng.choice(['', 'g'])}"
        data = "".join(rng.choice("ab x1\n\r") for _ in range(rng.randint(0, 30))).encode()
        try:
            ours = run_sed(read_sed(("sed", "-i", script, "f")), data, "f")
        except Unconvertible:
            continue
        target.write_bytes(data)
        done = subprocess.run(["sed", "-i", script, str(target)], env={"LC_ALL": "C"}, capture_output=True)
        assert done.returncode == 0, (script, done.stderr)
        assert ours == target.read_bytes(), (script, data)
        converted += 1
    assert converted > 100  # most are converted: the comparison is not vacuous
