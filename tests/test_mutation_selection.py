"""scripts/mutation.py's coverage-guided selection: which tests a mutant on a given line runs (docs/testing.md).

The maps here are written by hand (line -> node ids, as a coverage run would give it), so each rule is pinned
apart from coverage.py: a statement's own lines, the function around a line no test ran, import-time lines and
the functions that read them. The last tests run the map's coverage measurement for real, on a small project:
a forked child's lines are mapped to its test, and a child that saves nothing makes its test lost.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType

import pytest

from tests.script_loader import load_script

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "mutation.py"

MODULE = b'''\
LIMIT = 1 << 20


def read(path):
    try:
        data = open(path).read(
            LIMIT)
    except OSError:
        return None
    return data


def never_called():
    return 1
'''


def mutation_script() -> ModuleType:
    return load_script(SCRIPT, "mutation_script")


def test_a_mutant_runs_the_tests_of_its_statement_fastest_first_and_widens_where_the_map_is_blind(
    tmp_path: Path,
) -> None:
    script = mutation_script()
    module = tmp_path / "sample.py"
    module.write_bytes(MODULE)
    # coverage saw: line 1 and the defs at import; `read`'s body by two tests (line 6 holds the statement
    # that goes on to line 7); nobody reached the `except` body or `never_called`'s
    line_map = script.LineMap(
        lines={1: ["t::slow"], 4: ["t::slow"], 5: ["t::fast", "t::slow"], 6: ["t::slow"], 7: ["t::fast"],
               10: ["t::fast", "t::slow"], 13: ["t::slow"]},
        durations={"t::fast": 0.1, "t::slow": 9.0},
        imported=[1, 4, 13],
    )
    shape = script.code_shape(str(module), elsewhere=[])

    def chosen(line: int) -> list[str] | None:
        mutant = script.Mutant(f"sample.py:{line}:op#0", str(module), line, "op", 0)
        result: list[str] | None = script.select_tests(mutant, line_map, shape)
        return result

    assert chosen(1) == ["t::fast", "t::slow"]  # a constant, run at import: the tests of `read`, which reads it
    assert chosen(4) is None  # a signature, in a module that evaluates its annotations: the file selection
    assert chosen(6) == ["t::fast", "t::slow"]  # both lines of the statement, the faster test first
    assert chosen(7) == ["t::fast", "t::slow"]  # its second line: the same statement
    assert chosen(9) == ["t::fast", "t::slow"]  # the except body nobody ran: the tests that ran `read`
    assert chosen(14) is None  # a function nobody ran: the file selection


CONSTANTS = b'''\
from __future__ import annotations

import functools

BASE = 10
DERIVED = BASE * 2
SHOWN = 3
EXPORTED = 4
TABLE_SIZE = 5
DECORATING = 6
SIZE = 7
ROOT = 8
CHILD = ROOT + 1
CHECKED = 9
PRECOMPUTED = 10
__all__ = ["EXPORTED"]

if CHECKED:
    pass


def uses_derived():
    return DERIVED


def uses_shown():
    return SHOWN


def uses_the_rest():
    return EXPORTED + DECORATING + CHILD + CHECKED


def precomputed():
    return PRECOMPUTED


def with_default(limit=SIZE):
    return limit


def builds():
    return TABLE_SIZE


TABLE = builds()


@functools.lru_cache(maxsize=DECORATING)
def cached():
    return 1


class Holder:
    width = BASE + 1
'''


def test_an_import_time_line_gets_the_tests_of_the_functions_that_read_its_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = mutation_script()
    monkeypatch.chdir(tmp_path)
    Path("constants.py").write_bytes(CONSTANTS)
    # another file names SHOWN through the module (as a test's monkeypatch would): its mutants keep the file selection
    Path("user.py").write_text("import constants\n\nprint(constants.SHOWN)\n", encoding="utf-8")
    # coverage saw every module-level line at import; each function's body by its own test (the module was first
    # imported inside t::importer, so its context says nothing about who reads the constants)
    source = CONSTANTS.decode().splitlines()
    where = {text: number for number, text in enumerate(source, 1)}
    body = {name: where[f"    return {value}"] for name, value in (
        ("uses_derived", "DERIVED"), ("uses_shown", "SHOWN"), ("with_default", "limit"), ("builds", "TABLE_SIZE"),
        ("cached", "1"), ("uses_the_rest", "EXPORTED + DECORATING + CHILD + CHECKED"),
        ("precomputed", "PRECOMPUTED"))}
    lines: dict[int, list[str]] = {number: ["t::importer"] for number, text in enumerate(source, 1)
                                   if text and not text.startswith(" ")}
    lines.update({line: [f"t::{name}"] for name, line in body.items()})
    # builds() ran at import (TABLE's call), precomputed() too (another module's constant, say: no AST tells)
    line_map = script.LineMap(lines=lines, durations={}, imported=[body["builds"], body["precomputed"]])
    shape = script.code_shape("constants.py", elsewhere=[Path("user.py")])

    def chosen(text: str) -> list[str] | None:
        mutant = script.Mutant(f"constants.py:{where[text]}:op#0", "constants.py", where[text], "op", 0)
        result: list[str] | None = script.select_tests(mutant, line_map, shape)
        return result

    assert chosen("DERIVED = BASE * 2") == ["t::uses_derived"]
    # BASE is read by DERIVED at import (followed), and by a class body (not followed): the file selection
    assert chosen("BASE = 10") is None
    assert chosen("SIZE = 7") == ["t::with_default"]  # a default of with_default: its body's tests
    assert chosen("ROOT = 8") == ["t::uses_the_rest"]  # read into CHILD at import: CHILD's readers
    assert chosen("CHECKED = 9") is None  # read by a module-level `if` too
    assert chosen("PRECOMPUTED = 10") is None  # its reader's body ran at import
    assert chosen("def with_default(limit=SIZE):") == ["t::with_default"]
    assert chosen("SHOWN = 3") is None  # another file reads it through the module
    assert chosen("EXPORTED = 4") is None  # in __all__
    assert chosen("TABLE_SIZE = 5") is None  # its reader ran at import (TABLE keeps the result)
    assert chosen("DECORATING = 6") is None  # read by a decorator
    assert chosen("@functools.lru_cache(maxsize=DECORATING)") is None
    assert chosen("    width = BASE + 1") is None  # a class body


def test_the_reader_rule_sees_a_function_called_at_import_that_coverage_did_not_see_run_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = mutation_script()
    monkeypatch.chdir(tmp_path)
    Path("constants.py").write_bytes(CONSTANTS)
    source = CONSTANTS.decode().splitlines()
    where = {text: number for number, text in enumerate(source, 1)}
    # the module was imported inside a test, so no line has the import's context: builds() is called by TABLE at
    # module level all the same, and TABLE_SIZE's mutant must not be left to builds()'s test alone
    line_map = script.LineMap(lines={where["    return TABLE_SIZE"]: ["t::builds"],
                                     where["TABLE_SIZE = 5"]: ["t::importer"]}, durations={}, imported=[])
    shape = script.code_shape("constants.py", elsewhere=[])
    mutant = script.Mutant("constants.py:9:op#0", "constants.py", where["TABLE_SIZE = 5"], "op", 0)
    assert script.select_tests(mutant, line_map, shape) is None


MEASURED = '''\
def in_parent():
    return 1


def in_child():
    return 2


def in_killed_child():
    return 3


def in_self_killed_child():
    return 5


def in_subprocess():
    return 4
'''

FORKING_TESTS = '''\
import os
import signal
import subprocess
import sys

import measured


def test_in_process():
    assert measured.in_parent() == 1


def test_forks():  # as tests.safety_helpers.as_user: the child ends with os._exit
    pid = os.fork()
    if pid == 0:
        measured.in_child()
        os._exit(0)
    os.waitpid(pid, 0)


def test_forks_a_child_that_kills_itself():  # as a fault point of workspace/disk.py (PATCHKIT_FAULT_AFTER)
    pid = os.fork()
    if pid == 0:
        measured.in_self_killed_child()
        os.kill(os.getpid(), signal.SIGKILL)
    os.waitpid(pid, 0)


def test_forks_a_child_that_is_killed():
    ready, done = os.pipe()
    pid = os.fork()
    if pid == 0:
        measured.in_killed_child()
        os.write(done, b"x")
        signal.pause()
    os.read(ready, 1)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def test_starts_a_subprocess():  # as the CLI does (cli.main.entry ends with os._exit)
    code = "import os, measured; measured.in_subprocess(); os._exit(0)"
    subprocess.run([sys.executable, "-c", code], check=True)
'''


def test_coverage_follows_a_forked_child_and_a_subprocess_that_end_with_os_exit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = mutation_script()
    project = tmp_path / "project"
    project.mkdir()
    (project / "measured.py").write_text(MEASURED, encoding="utf-8")
    (project / "test_forking.py").write_text(FORKING_TESTS, encoding="utf-8")
    monkeypatch.chdir(project)
    monkeypatch.setenv("PYTHONPATH", str(project) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    by_line, durations, lost = script.measure_coverage("measured.py", ["test_forking.py"], tmp_path / "coverage")
    assert sorted(durations) == sorted(f"test_forking.py::{name}" for name in (
        "test_in_process", "test_forks", "test_forks_a_child_that_kills_itself", "test_forks_a_child_that_is_killed",
        "test_starts_a_subprocess"))
    body = {name: MEASURED.splitlines().index(f"def {name}():") + 2 for name in (
        "in_parent", "in_child", "in_killed_child", "in_self_killed_child", "in_subprocess")}
    assert by_line[body["in_parent"]] == {"test_forking.py::test_in_process"}
    assert by_line[body["in_child"]] == {"test_forking.py::test_forks"}  # the child's lines, under its test
    assert by_line[body["in_self_killed_child"]] == {"test_forking.py::test_forks_a_child_that_kills_itself"}
    assert by_line[body["in_subprocess"]] == {"sub:test_forking.py::test_starts_a_subprocess"}
    # the killed child saved nothing: its test is lost (build_map adds it to every line), the others are not
    assert body["in_killed_child"] not in by_line
    assert lost == {"test_forking.py::test_forks_a_child_that_is_killed"}
    assert not sorted(path.name for path in project.iterdir() if path.name.startswith(("sitecustomize", "_mutation")))


def test_an_equivalent_whose_line_moved_is_reported_stale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--stale's check: a listed id that names a mutant of today's module is kept; one at a line the module no
    longer has there (a merge moved it), or of a module that is gone, is reported."""
    pytest.importorskip("cosmic_ray")
    script = mutation_script()
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_bytes(MODULE)
    monkeypatch.chdir(tmp_path)
    current = "pkg/m.py:1:core/ReplaceBinaryOperator_LShift_Add#0"
    moved = "pkg/m.py:2:core/ReplaceBinaryOperator_LShift_Add#0"
    gone = "pkg/gone.py:1:core/NumberReplacer#0"
    listed = {current: "a reason", moved: "a reason", gone: "a reason"}
    assert script.stale_equivalents(listed) == [gone, moved]
