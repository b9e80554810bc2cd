"""The repository scan on small scripts: shell precision, engine-path resolution, and the harmless look-alikes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from patchkit.scan import ScanConfig, scan_files
from patchkit.scan.bash import read_shell
from patchkit.scan.shell import parse_shell

# version_sensitive: tree-sitter-bash is a compiled wheel per Python version; the Python scan is the ast module.
pytestmark = pytest.mark.version_sensitive

CONFIG = ScanConfig()


def sites(path: str, text: str) -> list[tuple[int, str, str | None]]:
    result = scan_files([(path, text.encode())], CONFIG)
    return [(s.line, s.kind.label, s.engine_path) for s in result.sites]


# ------------------------------------------------------------------------------------------------ the reader


def test_continuations_comments_and_quotes() -> None:
    commands = parse_shell(
        "sed -i \\\n  -e 's/a # b/c/' \\\n  \"$X/y z.py\"  # trailing comment\necho a#b '#x' \"it's\"\n"
    )
    assert [(c.line, c.words) for c in commands] == [
        (1, ("sed", "-i", "-e", "s/a # b/c/", "$X/y z.py")),
        (4, ("echo", "a#b", "#x", "it's")),
    ]


def test_heredoc_delimiters_quoted_unquoted_and_tab_stripped() -> None:
    text = "cat <<'A' > x\nline $1\nA\n\tcat <<-B | wc\n\t\tbody\n\tB\ncat <<\"C\"; echo after\nC\nB\nC\n"
    commands = parse_shell(text)
    bodies = [(c.line, h.delimiter, h.quoted, h.body, h.line) for c in commands for h in c.heredocs]
    assert bodies == [
        (1, "A", True, ("line $1",), 2),
        (4, "B", False, ("body",), 5),  # <<- strips every leading tab
        (7, "C", True, (), 8),
    ]
    # The lines after the third heredoc's end are commands again.
    assert [c.words for c in commands if c.line >= 7] == [("cat",), ("echo", "after"), ("B",), ("C",)]


def test_herestring_is_not_a_heredoc_and_substitutions_nest() -> None:
    (command,) = parse_shell("X=$(python3 -c \"print(')')\" | tr -d '\"') grep -q x <<< \"$X\"\n")
    assert command.heredocs == () and command.redirects[0].op == "<<<"
    assert command.assignments[0][1] == "$(python3 -c \"print(')')\" | tr -d '\"')"


# ------------------------------------------------------------------------------------------------ sites


def test_sed_in_place_resolved_through_find_spec_and_a_loop_variable() -> None:
    text = (
        "SGL=$(python3 -c 'import importlib.util as u; print(u.find_spec(\"sglang\").origin)')\n"
        "D=$(dirname \"$SGL\")\n"
        "for f in \"$D/a.py\" \"$D/b.py\"; do\n"
        "  sed -Ei.bak 's/x/y/' \"$f\"\n"
        "done\n"
        "perl -pi -e 's/x/y/' /usr/lib/python3/dist-packages/vllm/config.py\n"
        "find \"$D\" -name '*.py' -exec sed -i 's/a/b/' {} +\n"
    )
    assert sites("run.sh", text) == [
        (4, "in-place-edit", "<sglang>/a.py"),  # dirname of <sglang>/__init__.py, the spec's origin
        (6, "in-place-edit", "/usr/lib/python3/dist-packages/vllm/config.py"),
        (7, "in-place-edit", "<sglang>"),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "sed -i 's/a/b/' config/local.yaml\n",  # a local file
        "sed 's/a/b/' /sgl-workspace/sglang/x.py > out.py\n",  # reads the engine, writes elsewhere
        "echo 'git apply x.diff; patch -p1 < y.diff'\n",  # prose in a string
        "# git apply fix.diff && patch -p1 < fix.diff\n",  # a comment
        "cat <<EOF\nthen run: git apply fix.diff\nsed -i s/a/b/ /sgl-workspace/x.py\nEOF\n",  # heredoc text
        "git apply --check /tmp/fix.diff\n",  # read-only
        "patch --dry-run -p1 < fix.diff\n",
        "patch() { echo patching; }\n",  # a function named patch
        "grep -rn 'patch -p1' .\n",
        "pip install git+https://github.com/example/bench-tools.git\n",  # not an engine package
        "pip install sglang==0.4.1\n",  # the registry's release, not a fork
        "cp /sgl-workspace/sglang/python/x.py backup/\n",  # copies FROM the engine
        "patchkit apply --all --root /sgl-workspace/sglang\n",  # managed patching
        "python -m patchkit apply atom-pr2106 --root /opt/ATOM\n",
        "t=$(mktemp -d)\ncd \"$t\"\ngit init -q && git apply ../x.diff\n",  # a scratch repository
    ],
)
def test_look_alikes_are_not_sites(text: str) -> None:
    assert sites("run.sh", text) == []


def test_git_apply_patch_and_inline_diff_kinds() -> None:
    text = (
        "cd \"$ATOM_ROOT\"\n"
        "git -c core.autocrlf=false apply -p1 fix.diff\n"
        "patch -d /opt/ATOM -p1 -i fix.diff\n"
        "git am < series.mbox\n"
        "cat > /tmp/x.patch <<'EOF'\n"
        "diff --git a/atom/x.py b/atom/x.py\n"
        "index 111..222 100644\n"
        "--- a/atom/x.py\n+++ b/atom/x.py\n@@ -1 +1 @@\n-a\n+b\n"
        "EOF\n"
    )
    assert sites("run.sh", text) == [
        (2, "git-apply", "$ATOM_ROOT"),
        (3, "patch", "/opt/ATOM"),
        (4, "git-apply", "$ATOM_ROOT"),
        (5, "heredoc-diff", "atom/x.py"),
    ]


def test_writes_and_copies_onto_engine_paths() -> None:
    text = (
        "V=$(python3 -c 'import vllm, os; print(os.path.dirname(vllm.__file__))')\n"
        "echo 'x = 1' >> \"$V/envs.py\"\n"
        "echo y | sudo tee -a /opt/ATOM/atom/conf.py > /dev/null\n"
        "install -m 644 fixed.py \"${V}/worker.py\"\n"
        "tar -xzf overlay.tgz -C /sgl-workspace/sglang\n"
    )
    assert sites("run.sh", text) == [
        (2, "file-write", "<vllm>/envs.py"),
        (3, "file-write", "/opt/ATOM/atom/conf.py"),
        (4, "copy-over", "<vllm>/worker.py"),
        (5, "copy-over", "/sgl-workspace/sglang"),
    ]


def test_pip_installs_of_engine_forks() -> None:
    text = (
        "pip install -e 'git+https://github.com/someone/sglang.git@fix#egg=sglang&subdirectory=python'\n"
        "uv pip install https://example.com/wheels/vllm-0.6.0+rocm-cp310-linux_x86_64.whl\n"
        "python3 -m pip install --index-url https://pypi.org/simple 'triton @ https://example.com/triton.tar.gz'\n"
    )
    assert [(line, kind) for line, kind, _ in sites("run.sh", text)] == [
        (1, "pip-fork"),
        (2, "pip-fork"),
        (3, "pip-fork"),
    ]
    assert sites("run.sh", text)[0][2] == (
        "sglang from git+https://github.com/someone/sglang.git@fix#egg=sglang&subdirectory=python"
    )


def test_python_writes_and_subprocess_calls() -> None:
    text = (
        "import importlib.util, os, shutil, subprocess, sglang\n"
        "from pathlib import Path\n"
        "root = Path(importlib.util.find_spec('vllm').submodule_search_locations[0])\n"
        "(root / 'config.py').write_text('x')\n"
        "shutil.copy('mine.py', os.path.join(os.path.dirname(sglang.__file__), 'srt', 'x.py'))\n"
        "subprocess.run(['sed', '-i', 's/a/b/', str(root / 'envs.py')], check=True)\n"
        "os.system('cd /sgl-workspace/sglang && git apply fix.diff')\n"
        "open('results.json', 'w').write('{}')\n"
        "def local():\n"
        "    root = 'out'\n"
        "    open(root + '/x.txt', 'w')\n"
    )
    assert sites("tune.py", text) == [
        (4, "python-write", "<vllm>/config.py"),
        (5, "python-write", "<sglang>/srt/x.py"),
        (6, "in-place-edit", "<vllm>/envs.py"),
        (7, "git-apply", "/sgl-workspace/sglang"),
    ]


def test_python_heredoc_in_shell_uses_the_shells_variables() -> None:
    text = (
        "SITE=$(python3 -c 'import site; print(site.getsitepackages()[0])')\n"
        "python3 - <<EOF\n"
        "import re\n"
        "p = '$SITE/sglang/srt/server_args.py'\n"
        "s = open(p).read()\n"
        "open(p, 'w').write(re.sub('a', 'b', s))\n"
        "EOF\n"
    )
    assert sites("run.sh", text) == [(6, "python-write", "<site-packages>/sglang/srt/server_args.py")]


def test_dockerfile_and_workflow_readers() -> None:
    dockerfile = (
        "FROM image\n"
        "RUN --mount=type=cache,target=/root/.cache \\\n"
        "    # a comment inside the continuation\n"
        "    sed -i 's/a/b/' /sgl-workspace/sglang/python/x.py\n"
        "COPY --chown=root fix.py /usr/local/lib/python3.10/dist-packages/sglang/x.py\n"
        "ADD notes.txt /opt/notes.txt\n"
    )
    assert sites("docker/Dockerfile.rocm", dockerfile) == [
        (4, "in-place-edit", "/sgl-workspace/sglang/python/x.py"),  # the line the command is on
        (5, "copy-over", "/usr/local/lib/python3.10/dist-packages/sglang/x.py"),
    ]
    workflow = (
        "jobs:\n  a:\n    steps:\n"
        "      - run: echo 'git apply'\n"
        "      - name: patch\n"
        "        run: |\n"
        "          echo start\n"
        "\n"
        "          cd /sgl-workspace/sglang && git apply $GITHUB_WORKSPACE/fix.diff\n"
        "        env:\n"
        "          X: git apply\n"
    )
    assert sites(".github/workflows/ci.yml", workflow) == [(9, "git-apply", "/sgl-workspace/sglang")]


def test_configured_engine_roots_and_globs() -> None:
    config = ScanConfig(engine_roots=("/models/engine",), include=("ops/**",))
    files = [
        ("ops/deploy", b"#!/bin/bash\nsed -i s/a/b/ /models/engine/x.py\nsed -i s/a/b/ /sgl-workspace/x.py\n"),
        ("other/run.sh", b"git apply x.diff\n"),
    ]
    result = scan_files(files, config)
    assert [(s.path, s.line) for s in result.sites] == [("ops/deploy", 2)]
    assert result.files == ("ops/deploy",)


def test_fingerprints_ignore_line_numbers_but_not_commands_or_repeats() -> None:
    one = scan_files([("a.sh", b"git apply x.diff\ngit apply x.diff\n")], CONFIG).sites
    moved = scan_files([("a.sh", b"\n\ngit apply x.diff\necho\ngit apply x.diff\n")], CONFIG).sites
    changed = scan_files([("a.sh", b"git apply y.diff\ngit apply x.diff\n")], CONFIG).sites
    assert [s.fingerprint for s in one] == [s.fingerprint for s in moved]
    assert len({s.fingerprint for s in one}) == 2  # the second occurrence is its own site
    assert {s.fingerprint for s in changed} != {s.fingerprint for s in one}


def test_a_python_file_that_does_not_parse_is_a_problem_not_a_crash() -> None:
    result = scan_files([("x.py", b"import subprocess\ndef (:\n")], CONFIG)
    assert result.sites == () and len(result.problems) == 1
    assert "does not parse" in result.problems[0].message and result.problems[0].line == 2
    # A file that names no engine idiom, runs nothing and holds no diff cannot hold a site: it is not parsed.
    assert scan_files([("y.py", b"def (:\n")], CONFIG).problems == ()
    embedded = scan_files([("x.sh", b"echo\npython3 - <<'PY'\nok = 1\ndef (:\nPY\n")], CONFIG)
    assert [(p.line, p.message.split(" (")[0]) for p in embedded.problems] == [(4, "embedded Python does not parse")]


def test_perl_options_holding_an_i_are_not_in_place() -> None:
    assert sites("run.sh", "perl -Mlib=/x -ne 'print' /sgl-workspace/sglang/x.py\n") == []
    assert sites("run.sh", "perl -i.orig -pe 's/a/b/' /sgl-workspace/sglang/x.py\n") == [
        (1, "in-place-edit", "/sgl-workspace/sglang/x.py")
    ]


def test_hostile_nesting_is_a_problem_not_a_crash() -> None:
    deep_shell = b"X=" + b"$(" * 5000 + b")" * 5000 + b"\n"
    deep_python = b"import subprocess\nx = " + b"+".join([b"'a'"] * 20000) + b"\n"
    result = scan_files([("a.sh", deep_shell), ("b.py", deep_python)], CONFIG)
    assert result.sites == ()
    assert [(p.path, p.line, p.message.split(":")[0]) for p in result.problems] == [
        ("a.sh", 1, "command substitutions `$(...)` nested more than 8 deep"),  # read, the line named
        ("b.py", None, "too deeply nested to read"),
    ]


# Issue #32, 4: the conversion after tree-sitter was quadratic (20,000 closed `$(` took 17 s and 621 MB: each
# level's word held the whole rest of the chain). Checked here by what it makes, not by time (the growth
# check with timings is benchmarks/lint_growth.py).
def test_20000_nested_substitutions_are_read_with_words_of_bounded_size() -> None:
    text = "git apply /tmp/a.diff\nx=" + "$(" * 20000 + "git apply /tmp/in.diff" + ")" * 20000 + "\n"
    commands = read_shell(text + "git apply /tmp/b.diff\n")
    assert len(commands) == 20000 + 3  # x=..., one command per level (the innermost is git apply), and two
    assert [c.words for c in commands if c.words[:2] == ("git", "apply")] == [
        ("git", "apply", "/tmp/a.diff"), ("git", "apply", "/tmp/in.diff"), ("git", "apply", "/tmp/b.diff"),
    ]
    shown = sum(len(w) for c in commands for w in (*c.words, *(v for _, v in c.assignments)))
    assert shown < 40 * len(text), f"{shown} characters in the words of a {len(text)}-character script"
    assert commands[1].assignments == (("x", "$(" * 8 + "$(\u2026)" + ")" * 8),)  # 8 levels, then elided
    assert commands[1].too_deep and not commands[-1].too_deep


def test_the_fallback_reader_shows_8_levels_of_a_20000_deep_word_too() -> None:
    # The hand-written reader (a tree with an error) read each of 8 levels in turn with whole words: the
    # resolver then parsed the rest of the chain 8 x 8 times for each (10 s for 5,000 levels).
    commands = parse_shell('x="' + '$(echo "' * 20000 + "a" + '")' * 20000 + '" y\n')
    assert [(c.assignments, c.words, c.too_deep) for c in commands] == [
        ((("x", '$(echo "' * 8 + "$(\u2026)" + '")' * 8),), ("y",), True)
    ]
    assert [c.too_deep for c in parse_shell("x=" + "$(echo " * 8 + "a" + ")" * 8 + "\n")] == [False]


def test_40000_nested_if_blocks_are_read_and_the_site_after_them_found() -> None:
    text = "if true; then\n" * 40000 + "git apply /tmp/in.diff\n" + "fi\n" * 40000 + "git apply /tmp/b.diff\n"
    result = scan_files([("a.sh", text.encode())], CONFIG)
    assert [(s.line, s.kind.label) for s in result.sites] == [(40001, "git-apply"), (80002, "git-apply")]
    assert result.problems == ()


# A tree with an error is read by the hand-written reader, which does not go inside `$(...)`: one `x=$()`
# anywhere (an ERROR tree for tree-sitter-bash) hid every command substitution's command of the script.
@pytest.mark.parametrize("broken", ["x=$()\n", "cat > a <<A; cat > b <<B\nx\nA\ny\nB\n"], ids=["$()", "heredocs"])
@pytest.mark.parametrize("hidden", [
    "y=$(git apply /tmp/e.diff)", 'y="${a:-`git apply /tmp/e.diff`}"', "y=$(echo $(cd /x && git apply /tmp/e.diff))",
])
def test_an_error_tree_does_not_hide_the_commands_in_substitutions(broken: str, hidden: str) -> None:
    text = broken + hidden + "\n"
    line = text.count("\n")
    result = scan_files([("a.sh", text.encode())], CONFIG)
    assert [(s.line, s.kind.label) for s in result.sites] == [(line, "git-apply")]


def test_a_long_chain_of_variables_in_file_order_is_followed_to_its_end() -> None:
    # Each round of the resolver saw only the values of the round before: after 6 rounds, `$X7` was unknown.
    text = "X0=/opt/vllm\n" + "".join(f"X{i}=$X{i - 1}/d\n" for i in range(1, 40)) + "sed -i s/a/b/ $X39/x.py\n"
    result = scan_files([("a.sh", text.encode())], CONFIG)
    assert [(s.line, s.engine_path) for s in result.sites] == [(41, "/opt/vllm" + "/d" * 39 + "/x.py")]


def _chain(depth: int, innermost: str) -> str:
    return "$(echo " * depth + innermost + ")" * depth


@pytest.mark.parametrize("broken", [False, True], ids=["tree-sitter", "fallback reader"])
def test_substitutions_are_followed_8_deep_and_a_problem_past_that(broken: bool) -> None:
    # `$()` is an ERROR tree for tree-sitter-bash: the script is read by the hand-written reader instead.
    tail = "y=$()\n" if broken else ""
    for depth, followed in ((8, True), (9, False)):
        text = f"F={_chain(depth, '/opt/vllm/x.py')}\nsed -i s/a/b/ $F\n{tail}"
        result = scan_files([("a.sh", text.encode())], CONFIG)
        engine_paths = [s.engine_path for s in result.sites]
        assert engine_paths == (["/opt/vllm/x.py"] if followed else []), (depth, result.sites)
        problems = [(p.line, p.message.split(":")[0]) for p in result.problems]
        assert problems == ([] if followed else [(1, "command substitutions `$(...)` nested more than 8 deep")])


_SHELLISH = "abc $'\"`\\#;&|()<>{}-=/\n\t EOF<<-"


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet=_SHELLISH, max_size=120),
    st.sampled_from(["a.sh", "x.py", "Dockerfile", ".github/workflows/w.yml"]),
)
def test_any_text_is_read_without_error(text: str, path: str) -> None:
    result = scan_files([(path, text.encode())], CONFIG)
    assert all(site.line >= 1 for site in result.sites)


def test_git_checkouts_in_an_engine_tree() -> None:
    text = (
        "git clone https://github.com/someone/sglang /sgl-workspace/sglang\n"
        "cd /sgl-workspace/sglang\n"
        "git fetch origin && git log -1 && git status\n"
        "git cherry-pick 1a2b3c\n"
        "git -C /opt/ATOM reset --hard v1.2\n"
        "git stash list\n"
        "cd /tmp/work && git checkout main\n"  # not an engine tree
        "git -C \"$GITHUB_WORKSPACE\" checkout main\n"
    )
    assert sites("run.sh", text) == [
        (1, "git-checkout", "/sgl-workspace/sglang"),
        (4, "git-checkout", "/sgl-workspace/sglang"),
        (5, "git-checkout", "/opt/ATOM"),
    ]


def test_requirements_files_with_engine_forks() -> None:
    text = (
        "# pinned helpers\n"
        "pandas==2.2.0\n"
        "bench-helpers @ git+https://github.com/example-org/bench-helpers.git@v1\n"
        "sglang @ git+https://github.com/someone/sglang.git@fix#subdirectory=python  # our fork\n"
        "-e git+https://github.com/someone/vllm.git#egg=vllm\n"
        "--extra-index-url https://download.pytorch.org/whl/rocm6.2\n"
    )
    assert [(line, kind) for line, kind, _ in sites("benchmarks/requirements-rocm.txt", text)] == [
        (4, "pip-fork"),
        (5, "pip-fork"),
    ]


# ------------------------------------------------------------------------------------------------ data flow (#24)


def reported(path: str, text: str) -> list[tuple[int, str, str | None, str]]:
    result = scan_files([(path, text.encode())], CONFIG)
    return [(s.line, s.kind.label, s.engine_path, s.reason) for s in result.sites]


def test_a_local_of_one_function_never_names_the_variable_of_another() -> None:
    text = (
        'SGL=$(python3 -c "import sglang, os; print(os.path.dirname(sglang.__file__))")\n'
        'log() {\n  local f="/tmp/run.log"\n  echo "$*" >> "$f"\n}\n'
        'fix() {\n  local f="$SGL/$1"\n  sed -i "s/a/b/" "$f"\n}\n'
        "fix srt/managers/scheduler.py\n"
    )
    ((line, kind, engine, reason),) = reported("run.sh", text)
    assert (line, kind, engine) == (8, "in-place-edit", "<sglang>/srt/managers/scheduler.py")
    assert "engine package sglang" in reason and "$SGL" in reason


def test_a_site_packages_root_is_not_shown_as_the_package() -> None:
    text = (
        "ROOT=$(python3 -c 'import vllm, os; print(os.path.dirname(vllm.__path__[0]))')\n"
        'sed -i s/a/b/ "$ROOT/vllm/config.py"\n'
    )
    assert [r[:3] for r in reported("run.sh", text)] == [(2, "in-place-edit", "<site-packages>/vllm/config.py")]


def test_a_helper_receiving_the_module_and_the_modules_own_file() -> None:
    text = (
        "import vllm.benchmarks.serve\nimport vllm.entrypoints.serve\n\n"
        "def patch(mod, edits, marker):\n    f = mod.__file__\n    src = open(f).read()\n"
        "    open(f, 'w').write(src + marker)\n\n"
        "patch(vllm.benchmarks.serve, [], 'M1')\npatch(vllm.entrypoints.serve, [], 'M2')\n"
    )
    ((line, kind, engine, reason),) = reported("fix.py", text)
    assert (line, kind, engine) == (7, "python-write", "<vllm>/benchmarks/serve.py")
    assert "passed as mod to patch() (line 9); also called with vllm.entrypoints.serve (line 10)" in reason


def test_paths_passed_from_the_shell_into_a_python_heredoc() -> None:
    text = (
        'python - "$VLLM_ROOT/vllm/v1/attention/x.py" <<\'PY\'\nimport sys\nF = sys.argv[1]\n'
        'src = open(F).read()\nopen(F, "w").write(src)\nPY\n'
    )
    ((line, kind, engine, reason),) = reported("run.sh", text)
    assert (line, kind, engine) == (5, "python-write", "$VLLM_ROOT/vllm/v1/attention/x.py")
    assert "sys.argv[1]" in reason


def test_import_system_roots_and_a_loop_over_edits() -> None:
    text = (
        "import importlib.util\nfrom pathlib import Path\n"
        "EDITS = {'v1/core.py': ('a', 'b'), 'config.py': ('c', 'd')}\n"
        "root = Path(importlib.util.find_spec('vllm').origin).parent\n"
        "for rel, (old, new) in EDITS.items():\n    (root / rel).write_text((root / rel).read_text())\n"
        "pkg = Path(importlib.util.find_spec('sglang').submodule_search_locations[0])\n"
        "(pkg / 'x.py').write_text('')\n"
    )
    assert [r[:3] for r in reported("fix.py", text)] == [
        (6, "python-write", "<vllm>/v1/core.py"),
        (8, "python-write", "<sglang>/x.py"),
    ]


def test_a_clone_of_a_harness_is_not_the_engine_but_a_clone_of_vllm_is() -> None:
    harness = (
        "git clone https://github.com/example-org/bench-harness.git\ncd bench-harness\n"
        "git show 1a2b3c | git apply -\npip install -e .\n"
    )
    assert reported("run.sh", harness) == []
    engine = harness.replace("example-org/bench-harness", "vllm-project/vllm").replace("bench-harness", "vllm")
    assert [r[:3] for r in reported("run.sh", engine)] == [
        (3, "git-apply", "vllm"),
        (4, "source-install", "vllm"),
    ]


def test_every_way_of_replacing_installed_code_has_its_kind() -> None:
    text = (
        "SITE=/usr/local/lib/python3.12/dist-packages\n"
        "pip install https://github.com/someone/vllm/archive/main.zip\n"
        "pip install vllm --extra-index-url https://wheels.example.com/abc123\n"
        "pip install git+https://github.com/someone/sglang.git@fix\n"
        "curl -fsSL -o $SITE/vllm/envs.py https://example.com/envs.py\n"
        "wget -O $SITE/vllm/config.py https://example.com/config.py\n"
        "install -m 644 x.py $SITE/vllm/x.py\n"
        "echo x | tee $SITE/vllm/y.py\n"
        "mv z.py $SITE/vllm/z.py\n"
        "rm -f $SITE/vllm/w.py\n"
        "sed -i /torch/d $SITE/vllm-0.6.3.dist-info/METADATA\n"
        "pip install vllm==0.6.3\n"
    )
    assert [(line, kind) for line, kind, _, _ in reported("run.sh", text)] == [
        (2, "pip-fork"), (3, "pip-index"), (4, "pip-fork"), (5, "download-over"), (6, "download-over"),
        (7, "copy-over"), (8, "file-write"), (9, "copy-over"), (10, "engine-remove"), (11, "metadata-edit"),
    ]


def test_an_unresolved_rewrite_in_code_importing_the_engine_is_a_site_a_results_file_is_not() -> None:
    text = (
        "import sys\nimport vllm\n\nfor name in sys.argv[1:]:\n    src = open(name).read()\n"
        "    open(name, 'w').write(src.replace('a', 'b'))\n"
        "with open(f'results/{vllm.__version__}.json', 'w') as out:\n    out.write('{}')\n"
    )
    ((line, kind, engine, reason),) = reported("fix.py", text)
    assert (line, kind, engine) == (6, "unresolved-write", None)
    assert "imports vllm" in reason


def test_case_arms_and_test_brackets_are_read_as_commands() -> None:
    text = '[[ -d /opt/ATOM ]] && case "$MODE" in\n  fix) git -C /opt/ATOM apply x.diff ;;\nesac\n'
    assert [r[:3] for r in reported("run.sh", text)] == [(2, "git-apply", "/opt/ATOM")]


def test_helpers_calling_helpers_stay_bounded() -> None:
    """A hostile file of helpers that call helpers (each value asks for the helper's return value with its
    own arguments): the scan reads it in bounded work (a call chain deeper than 3 is not followed) and still
    finds the write through a short one."""
    lines = ["import vllm", "", "def h0(x):", "    return vllm.__file__", ""]
    for index in range(1, 40):
        body = [f"    a{k} = h{index - 1}(x)" for k in range(30)]
        lines += [f"def h{index}(x):", *body, "    return a0", ""]
    lines += ["open(h39('x'), 'w').write('')", "open(h2('x'), 'w').write('')"]
    result = scan_files([("fix.py", "\n".join(lines).encode())], CONFIG)
    assert [(s.line, s.kind.label, s.engine_path) for s in result.sites] == [
        (len(lines), "python-write", "<vllm>/__init__.py")
    ]
