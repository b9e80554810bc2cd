"""scripts/mutation.py's coverage-guided selection: which tests a mutant on a given line runs (docs/testing.md).

The map here is written by hand (line -> node ids, as a coverage run would give it), so each rule is pinned
apart from coverage.py: a statement's own lines, the function around a line no test ran, import-time lines.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

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
    shape = script.code_shape(str(module))

    def chosen(line: int) -> list[str] | None:
        mutant = script.Mutant(f"sample.py:{line}:op#0", str(module), line, "op", 0)
        result: list[str] | None = script.select_tests(mutant, line_map, shape)
        return result

    assert chosen(1) is None  # a constant, run at import: the whole file selection
    assert chosen(4) is None  # a signature, the same
    assert chosen(6) == ["t::fast", "t::slow"]  # both lines of the statement, the faster test first
    assert chosen(7) == ["t::fast", "t::slow"]  # its second line: the same statement
    assert chosen(9) == ["t::fast", "t::slow"]  # the except body nobody ran: the tests that ran `read`
    assert chosen(14) is None  # a function nobody ran: the file selection
