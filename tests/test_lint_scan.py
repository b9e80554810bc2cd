"""The repository scan on small scripts: shell precision, engine-path resolution, and the harmless look-alikes."""

from __future__ import annotations

import subprocess

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


def test_backslashes_read_as_bash_reads_them_in_and_out_of_double_quotes() -> None:
    """Outside quotes a backslash escapes any character; inside double quotes only `"`, `\\`, `$`, a backquote
    and a newline, and stays itself before the rest: bash itself is the oracle."""
    words = r'a\b "a\b" "c\$d" "e\"f" "g\\h" i\\j "k\`l" "m\nn"'
    said = subprocess.run(["bash", "-c", f"printf '%s\\0' {words}"], capture_output=True, check=True).stdout
    (command,) = read_shell(f"echo {words}\n")
    assert command.words[1:] == tuple(said.decode().split("\0")[:-1])
    assert command.words[1:3] == ("ab", "a\\b")


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
        "pip install pandas==2.2.2 tabulate\n",  # the default index, pinned or not: not a fork
        "pip install sglang==0.4.1\n",  # the registry's release, not a fork
        "cp /sgl-workspace/sglang/python/x.py backup/\n",  # copies FROM the engine
        "patchkit apply --all --root /sgl-workspace/sglang\n",  # managed patching
        "python -m patchkit apply atom-pr2106 --root /opt/ATOM\n",
        "t=$(mktemp -d)\ncd \"$t\"\ngit init -q && git apply ../x.diff\n",  # a scratch repository
    ],
)
def test_look_alikes_are_not_sites(text: str) -> None:
    assert sites("run.sh", text) == []


def test_any_installed_package_counts_not_only_the_engine_list() -> None:
    """#33: a write into any installed package's file, or a fork/URL/index install of any package, is a site;
    the engine list names an engine package in the reason, it does not decide whether a site exists."""
    text = (
        "R=$(python3 -c 'import rixl, os; print(os.path.dirname(rixl._api.__file__))')\n"
        "sed -i 's/a/b/' \"$R/_api.py\"\n"
        "pip install git+https://github.com/example/bench-tools.git\n"
        "pip install --extra-index-url https://wheels.example.com/simple lm-eval==0.4.5\n"
        "pip install ./dist/minisweagent-1.0-py3-none-any.whl\n"
        "D=$(python3 -c 'import os; print(os.path.dirname(os.__file__))')\n"
        "sed -i 's/a/b/' \"$D/local_notes.txt\"\n"  # the standard library's folder: not an installed package
    )
    result = scan_files([("run.sh", text.encode())], CONFIG)
    assert [(s.line, s.kind.label, s.engine_path) for s in result.sites] == [
        (2, "in-place-edit", "<rixl>/_api.py"),
        (3, "pip-fork", "bench-tools from git+https://github.com/example/bench-tools.git"),
        (4, "pip-index", "lm-eval from https://wheels.example.com/simple"),
        (5, "pip-fork", "minisweagent from ./dist/minisweagent-1.0-py3-none-any.whl"),
    ]
    assert "installed package rixl" in result.sites[0].reason
    python = (
        "import os, swebench\n"
        "path = os.path.join(os.path.dirname(swebench.__file__), 'harness', 'run.py')\n"
        "open(path, 'w').write('x')\n"
    )
    assert sites("fix.py", python) == [(3, "python-write", "<swebench>/harness/run.py")]
    vllm = sites("v.sh", "pip install git+https://github.com/someone/vllm.git@x\n")
    assert vllm == [(1, "pip-fork", "vllm from git+https://github.com/someone/vllm.git@x")]
    reason = scan_files([("v.sh", b"pip install git+https://github.com/someone/vllm.git@x\n")], CONFIG).sites[0].reason
    assert reason.startswith("engine package vllm")


def test_the_repositorys_own_modules_are_not_installed_packages() -> None:
    """`benchtools.__file__` of the repository's own package (benchtools/__init__.py) is the repository's file."""
    python = b"import os, benchtools\nopen(os.path.join(os.path.dirname(benchtools.__file__), 'cache.json'), 'w')\n"
    files = [("scripts/warm.py", python), ("benchtools/__init__.py", b"")]
    assert scan_files(files, CONFIG).sites == ()
    assert [s.engine_path for s in scan_files(files[:1], CONFIG).sites] == ["<benchtools>/cache.json"]


@pytest.mark.parametrize(
    "runner",
    ['$PY', '"$PYTHON"', '${PY:-python3}', 'uv run python', '/opt/venv/bin/python', '"$INTERP"', 'sudo -E $PY3'],
)
def test_a_heredoc_run_by_a_variable_interpreter_is_read_as_python(runner: str) -> None:
    """#33: `$PY - "$T" <<X` is Python as `python3 - "$T" <<X` is ($INTERP through its assignment)."""
    text = (
        "INTERP=/opt/conda/envs/serve/bin/python3.11\n"
        "T=$(python3 -c 'import vllm, os; print(os.path.dirname(vllm.__file__))')/envs.py\n"
        f'{runner} - "$T" <<\'EOF\'\n'
        "import sys\n"
        "open(sys.argv[1], 'w').write('x')\n"
        "EOF\n"
    )
    assert sites("run.sh", text) == [(5, "python-write", "<vllm>/envs.py")]


def test_a_variable_that_is_no_interpreter_runs_no_python() -> None:
    text = "CAT=cat\n$CAT - /sgl-workspace/x.py <<'EOF'\nopen('/sgl-workspace/x.py', 'w')\nEOF\n"
    assert sites("run.sh", text) == []


@pytest.mark.parametrize(
    ("command", "kind"),
    [
        ("ruby -pi -e 'gsub(/a/, \"b\")' \"$SP/nixl/x.py\"", "in-place-edit"),
        ("ruby -i.bak -pe 'gsub(/a/, \"b\")' \"$SP/nixl/x.py\"", "in-place-edit"),
        ("ed -s \"$SP/nixl/x.py\" <<< $',s/a/b/g\\nw'", "in-place-edit"),
        ("ex -sc '%s/a/b/g|x' \"$SP/nixl/x.py\"", "in-place-edit"),
        ("sed s/a/b/ x.py | sponge \"$SP/nixl/x.py\"", "file-write"),
        ("truncate -s 0 \"$SP/nixl/x.py\"", "file-write"),
        ("dd if=fixed.py of=\"$SP/nixl/x.py\" conv=notrunc", "copy-over"),
    ],
)
def test_other_editors_and_writers_onto_an_installed_package(command: str, kind: str) -> None:
    text = f"SP=$(python3 -c 'import site; print(site.getsitepackages()[0])')\n{command}\n"
    assert sites("run.sh", text) == [(2, kind, "<site-packages>/nixl/x.py")]


@pytest.mark.parametrize(
    "command",
    ["ruby -ne 'puts $_' \"$SP/nixl/x.py\"", "dd if=\"$SP/nixl/x.py\" of=/tmp/x.py", "truncate -s 0 /tmp/x.log",
     "sed s/a/b/ \"$SP/nixl/x.py\" | sponge out.py", "ed -s notes.txt <<< w"],
)
def test_other_editors_reading_the_package_are_not_sites(command: str) -> None:
    text = f"SP=$(python3 -c 'import site; print(site.getsitepackages()[0])')\n{command}\n"
    assert sites("run.sh", text) == []


def test_a_makefiles_recipes_are_read_as_shell_with_makes_variables() -> None:
    """#33: a Makefile's recipes run at build time; `$(SITE)` from `$(shell python -c ...)` is site-packages."""
    text = (
        "PY ?= python3\n"
        "SITE := $(shell $(PY) -c 'import site; print(site.getsitepackages()[0])')\n"
        "patch: build\n"
        "\t@sed -i 's/a/b/' $(SITE)/mori/env.py\n"
        "\t-$(PY) -m pip install 'git+https://github.com/someone/mori.git@x'\n"
        "\tfor f in *.json; do cp $$f $(SITE)/mori/configs/; done\n"
        "# sed -i 's/a/b/' $(SITE)/mori/env.py\n"
        "bench:\n"
        "\tsed -i 's/a/b/' results/meta.yaml\n"
    )
    expected = [
        (4, "in-place-edit", "<site-packages>/mori/env.py"),
        (5, "pip-fork", "mori from git+https://github.com/someone/mori.git@x"),
        (6, "copy-over", "<site-packages>/mori/configs/"),
    ]
    assert sites("Makefile", text) == expected
    assert sites("build/rules.mk", text) == expected


def test_a_backup_beside_an_engine_file_is_not_a_site_but_moving_it_away_is() -> None:
    """#33's false alarm: `shutil.copy2(F, F + ".bak")` / `cp F F.orig` leave the engine file as it was."""
    python = (
        "import os, shutil, fileinput, vllm\n"
        "F = os.path.join(os.path.dirname(vllm.__file__), 'envs.py')\n"
        "shutil.copy2(F, F + '.bak')\n"
        "shutil.copyfile(F, f'{F}.orig')\n"
        "shutil.move(F, F + '.orig')\n"
        "for line in fileinput.input(files=[F], inplace=True):\n"
        "    print(line, end='')\n"
    )
    assert sites("fix.py", python) == [
        (5, "python-write", "<vllm>/envs.py.orig"),
        (6, "python-write", "<vllm>/envs.py"),
    ]


def test_a_shell_backup_copy_beside_an_engine_file_is_not_a_site() -> None:
    shell = 'cp /opt/vllm/vllm/envs.py /opt/vllm/vllm/envs.py.bak\ncp fixed.py /opt/vllm/vllm/envs.py\n'
    assert sites("run.sh", shell) == [(2, "copy-over", "/opt/vllm/vllm/envs.py")]


def test_a_patcher_script_the_shell_calls_is_followed_into_the_repositorys_own_file() -> None:
    """#33: `python "$(dirname "$0")/graft.py" "$ROOT/aiter/ops/x.py"` where graft.py writes sys.argv[1]."""
    graft = b"import sys\nt = sys.argv[1]\ns = open(t).read()\nopen(t, 'w').write(s.replace('a', 'b'))\n"
    shell = (
        "HERE=$(cd \"$(dirname \"${BASH_SOURCE[0]}\")\" && pwd)\n"
        "ROOT=$(python3 -c 'import aiter, os; print(os.path.dirname(aiter.__file__))')\n"
        "python \"$(dirname \"$0\")/graft.py\" \"$ROOT/ops/x.py\"\n"
        "python3 \"$HERE/graft.py\" \"$ROOT/ops/y.py\"\n"
        "python3 tools/graft.py results/out.txt\n"  # the same patcher on the repository's own file
        "python3 -m tools.graft \"$ROOT/ops/z.py\"\n"
    )
    files = [("tools/run.sh", shell.encode()), ("tools/graft.py", graft)]
    result = scan_files(files, CONFIG)
    assert [(s.path, s.line, s.kind.label, s.engine_path) for s in result.sites] == [
        ("tools/run.sh", 3, "python-write", "<aiter>/ops/x.py"),
        ("tools/run.sh", 4, "python-write", "<aiter>/ops/y.py"),
        ("tools/run.sh", 6, "python-write", "<aiter>/ops/z.py"),
    ]
    assert "written by tools/graft.py (line 4)" in result.sites[0].reason


def test_python_c_with_shell_expansions_compiles_with_placeholders_and_hides_nothing() -> None:
    """#33: `python3 -c "...${N:-3}..."` is Python once the shell expands it: no PK405, and its sites count."""
    text = (
        'V=$(python3 -c "import vllm, os; print(os.path.dirname(vllm.__file__))")\n'
        'python3 -c "\nimport os\nn = ${RETRIES:-3} + $EXTRA\nopen(os.path.join(\'${V}\', \'envs.py\'), \'w\')\n"\n'
        "sed -i s/a/b/ \"$V/config.py\"\n"
    )
    result = scan_files([("run.sh", text.encode())], CONFIG)
    assert result.problems == ()
    assert [(s.line, s.kind.label, s.engine_path) for s in result.sites] == [
        (5, "python-write", "<vllm>/envs.py"),
        (7, "in-place-edit", "<vllm>/config.py"),
    ]


def test_a_makefile_recipe_lines_cd_does_not_carry_to_the_next_line() -> None:
    """make runs each recipe line in its own shell (the 2026-12b held-out false alarm)."""
    text = (
        "SITE := $(shell python3 -c 'import site; print(site.getsitepackages()[0])')\n"
        "aiter:\n\tcd $(SITE)/aiter && patch -p1 < $(CURDIR)/aiter.diff\n"
        "\tsed -i 's/x/y/' docs/index.md\n"
        "\tcd $(SITE)/aiter && \\\n\t  sed -i 's/x/y/' ops.py\n"
    )
    assert sites("Makefile", text) == [
        (3, "patch", "<site-packages>/aiter"),
        (6, "in-place-edit", "<site-packages>/aiter/ops.py"),  # a continued line is one shell
    ]


def test_tar_extracting_with_c_before_x() -> None:
    text = "tar -C /opt/vllm/vllm -xzf overlay.tgz\ntar -czf out.tgz -C /opt/vllm vllm\n"
    assert sites("run.sh", text) == [(1, "copy-over", "/opt/vllm/vllm")]


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


def test_a_statement_that_does_not_parse_hides_no_site_around_it() -> None:
    """#33: the unreadable statement is left out and the rest read; the file is still reported (PK405)."""
    code = (
        "import os, vllm\nV = os.path.dirname(vllm.__file__)\ndef broken(:\n    pass\n"
        "open(os.path.join(V, 'envs.py'), 'w').write('x')\nx = = 3\n"
        "with open(os.path.join(V, 'config.py'), 'a') as f:\n    f.write('y')\n"
    )
    result = scan_files([("fix.py", code.encode())], CONFIG)
    assert [(s.line, s.engine_path) for s in result.sites] == [(5, "<vllm>/envs.py"), (7, "<vllm>/config.py")]
    assert [(p.line, p.message.split(" (")[0]) for p in result.problems] == [(3, "Python does not parse")]
    heredoc = "python3 - <<'PY'\nimport vllm\nif (:\nopen(vllm.__file__, 'w')\nPY\n"
    embedded = scan_files([("x.sh", heredoc.encode())], CONFIG)
    assert [(s.line, s.engine_path) for s in embedded.sites] == [(4, "<vllm>/__init__.py")]
    assert len(embedded.problems) == 1


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


def test_git_apply_in_the_work_tree_its_options_name() -> None:
    text = (
        "git --work-tree /opt/ATOM apply x.diff\n"
        "git --work-tree=/opt/vllm apply x.diff\n"
        "git -C /tmp/scratch apply --check x.diff\n"  # read only
    )
    assert sites("run.sh", text) == [(1, "git-apply", "/opt/ATOM"), (2, "git-apply", "/opt/vllm")]


def test_requirements_files_with_forks_and_another_index() -> None:
    text = (
        "# pinned helpers\n"
        "pandas==2.2.0\n"
        "bench-helpers @ git+https://github.com/example-org/bench-helpers.git@v1\n"
        "sglang @ git+https://github.com/someone/sglang.git@fix#subdirectory=python  # our fork\n"
        "-e git+https://github.com/someone/vllm.git#egg=vllm\n"
        "--extra-index-url https://download.pytorch.org/whl/rocm6.2\n"
    )
    # Any package (#33): the index line applies to pandas too, and a fork of a helper replaces one.
    assert [(line, kind) for line, kind, _ in sites("benchmarks/requirements-rocm.txt", text)] == [
        (2, "pip-index"),
        (3, "pip-fork"),
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


def test_a_clone_is_the_engine_when_it_is_an_engine_package_or_installed_from() -> None:
    """A harness run from its clone is not the engine; once the script installs it (#33: a folder that is
    `pip install -e`'d is an engine checkout wherever it is) its patches are sites, as a clone of vllm's are."""
    harness = (
        "git clone https://github.com/example-org/bench-harness.git\ncd bench-harness\n"
        "git show 1a2b3c | git apply -\npython3 -m harness.run\n"
    )
    assert reported("run.sh", harness) == []
    installed = harness.replace("python3 -m harness.run", "pip install -e .")
    assert [r[:3] for r in reported("run.sh", installed)] == [
        (3, "git-apply", "bench-harness"),
        (4, "source-install", "bench-harness"),
    ]
    engine = harness.replace("example-org/bench-harness", "vllm-project/vllm").replace("bench-harness", "vllm")
    assert [r[:3] for r in reported("run.sh", engine)] == [(3, "git-apply", "vllm")]


def test_a_folder_installed_from_is_an_engine_checkout_wherever_it_is() -> None:
    """#33: `/opt/aiter-local`, `/root/aiter`, `$LOCAL_AITER` installed with `pip install -e` are checkouts;
    edits into them are sites; `pip install -e .` of the repository itself (no cd before it) is not."""
    text = (
        "sed -i 's/a/b/' /opt/aiter-local/aiter/ops/moe.py\n"
        "pip install -e /opt/aiter-local\n"
        "cp tuned.csv \"$LOCAL_AITER/aiter/configs/tuned.csv\"\n"
        "uv pip install -e \"$LOCAL_AITER\"\n"
        "cd /root/mori && git checkout main && sudo make install\n"
    )
    assert [r[:3] for r in reported("run.sh", text)] == [
        (1, "in-place-edit", "/opt/aiter-local/aiter/ops/moe.py"),
        (2, "source-install", "/opt/aiter-local"),
        (3, "copy-over", "$LOCAL_AITER/aiter/configs/tuned.csv"),
        (4, "source-install", "$LOCAL_AITER"),
        (5, "git-checkout", "/root/mori"),
        (5, "source-install", "/root/mori"),
    ]
    assert reported("run.sh", "pip install -e .\npip install -e '.[test]'\n") == []


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
