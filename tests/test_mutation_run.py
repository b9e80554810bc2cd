"""scripts/mutation.py's run: `--jobs N` worker processes and the kill-first order (docs/testing.md).

The script runs for real, through its command line, on a small git project of its own: a copy of the script and
a five-mutant `patchkit/judge/treestate.py` whose tests note in a log each time they run (so the order a mutant's
tests ran in can be read back) and, while a hold file exists, hang (so a run can be stopped mid-mutant).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.script_loader import load_script

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "mutation.py"
MODULE = "patchkit/judge/treestate.py"

# pick: three mutants (an AddNot on each `if`), killed by test_pick; check: two, killed by test_check
TREESTATE = '''\
def pick(first, second, third):
    if first:
        return "first"
    if second:
        return "second"
    if third:
        return "third"
    return "none"


def check(flag, other):
    if flag:
        return "on"
    if other:
        return "other"
    return "off"
'''

# test_fast runs every line and asserts nothing; test_pick (0.3 s) runs check's lines too without checking them, so
# check's mutants select it between test_fast and test_check (0.6 s). pick's first mutant makes test_pick slow (2.5 s),
# so that with two workers it comes back after the next ones.
TESTS = '''\
import os
import time
from pathlib import Path

from patchkit.judge import treestate


def note(name):
    with open(os.environ["FAKE_LOG"], "a", encoding="utf-8") as log:
        log.write(name + "\\n")
    if os.path.exists(os.environ["FAKE_HOLD"]):
        Path(os.environ["FAKE_PIDS"], str(os.getpid())).touch()
        time.sleep(120)


def test_fast():
    note("fast")
    for args in ((True, False, False), (False, True, False), (False, False, True), (False, False, False)):
        treestate.pick(*args)
    for args in ((True, False), (False, True), (False, False)):
        treestate.check(*args)


def test_pick():
    note("pick")
    time.sleep(2.5 if "if not first" in Path(treestate.__file__).read_text() else 0.3)
    treestate.check(False, False)
    assert treestate.pick(True, False, False) == "first"
    assert treestate.pick(False, True, False) == "second"
    assert treestate.pick(False, False, True) == "third"
    assert treestate.pick(False, False, False) == "none"


def test_check():
    note("check")
    time.sleep(0.6)
    assert treestate.check(True, False) == "on"
    assert treestate.check(False, True) == "other"
    assert treestate.check(False, False) == "off"
'''


def make_project(root: Path) -> Path:
    """A git project the copied script mutates: its `MODULES` entry for treestate.py keeps tests/test_state.py."""
    project = root / "project"
    files = {
        "scripts/mutation.py": SCRIPT.read_text(encoding="utf-8"),
        "patchkit/__init__.py": "",
        "patchkit/judge/__init__.py": "",
        MODULE: TREESTATE,
        "tests/test_state.py": TESTS,
        "pyproject.toml": "[tool.pytest.ini_options]\n",
        ".gitignore": ".mutation-cache/\n",
    }
    for name, text in files.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text, encoding="utf-8")
    (root / "tmp").mkdir()
    (root / "pids").mkdir()
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    subprocess.run(["git", "add", "."], cwd=project, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qm", "project"],
                   cwd=project, check=True)
    return project


def environment(root: Path) -> dict[str, str]:
    return {**os.environ, "TMPDIR": str(root / "tmp"), "FAKE_LOG": str(root / "log"),
            "FAKE_HOLD": str(root / "hold"), "FAKE_PIDS": str(root / "pids")}


def run(root: Path, *options: str) -> tuple[dict[str, Any], list[str], str]:
    """Run the project's script on treestate.py; its JSON, the tests' log of that run, and its output."""
    (root / "log").write_text("", encoding="utf-8")
    out = root / "out.json"
    done = subprocess.run([sys.executable, "scripts/mutation.py", "--module", MODULE, "--out", str(out), *options],
                          cwd=root / "project", env=environment(root), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    log = (root / "log").read_text(encoding="utf-8").split()
    return json.loads(out.read_text(encoding="utf-8")), log, done.stdout


def untouched(root: Path) -> None:
    """The project as it was: the module's bytes, nothing new but the map cache (ignored); no scratch copy left."""
    project = root / "project"
    assert (project / MODULE).read_text(encoding="utf-8") == TREESTATE
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=project, check=True,
                            capture_output=True, text=True).stdout
    assert status == ""
    assert sorted(os.listdir(root / "tmp")) == []


def without_times(data: dict[str, Any]) -> dict[str, Any]:
    timed = ("seconds", "file_seconds", "baseline_seconds", "map_seconds")
    return json.loads(json.dumps(data), object_hook=lambda table: {k: v for k, v in table.items() if k not in timed})


def test_the_tests_that_killed_a_functions_mutants_run_first_for_its_next_ones(tmp_path: Path) -> None:
    make_project(tmp_path)
    fastest, fastest_log, _ = run(tmp_path, "--order", "fastest")
    kill_first, kill_first_log, _ = run(tmp_path)
    # the first run built the line map: the baseline's tests, then the map's run of them, in the file's order
    everything = ["fast", "pick", "check"]
    assert fastest_log == [*everything, *everything,
                           *["fast", "pick"] * 3, *["fast", "pick", "check"] * 2]
    # pick's first mutant: fastest first (test_fast, then test_pick kills it); its two next ones: test_pick first.
    # check's first mutant knows no killer of check (test_pick killed pick's mutants, not check's); its next one
    # runs test_check first
    assert kill_first_log == [*everything,
                              "fast", "pick", "pick", "pick", "fast", "pick", "check", "check"]
    # the same tests chosen, the same outcomes: only the order changed
    assert without_times(kill_first) == without_times(fastest)
    mutants = kill_first["modules"][0]["mutants"]
    assert [(m["outcome"], m["selection"]) for m in mutants] == [("killed", 2)] * 3 + [("killed", 3)] * 2
    untouched(tmp_path)


def test_two_workers_give_the_result_of_one_in_the_mutants_order(tmp_path: Path) -> None:
    make_project(tmp_path)
    one, _, _ = run(tmp_path, "--jobs", "1")
    two, _, output = run(tmp_path, "--jobs", "2")
    # the progress lines come in the order the results came back: pick's first mutant (line 2: test_pick sleeps
    # 2.5 s on it) after the next ones, which the other worker ran meanwhile
    back = [line.split()[2].split(":")[1] for line in output.splitlines() if line.startswith("  [")]
    assert sorted(back) == ["12", "14", "2", "4", "6"]
    assert back[0] != "2"
    assert "2 workers" in output.splitlines()[0]
    # listed in the mutants' order all the same: the JSON is the one worker's, but for the times
    assert [m["id"].split(":")[1] for m in two["modules"][0]["mutants"]] == ["2", "4", "6", "12", "14"]
    assert without_times(two) == without_times(one)
    untouched(tmp_path)


def started_tests(root: Path, count: int) -> list[int]:
    """Wait until `count` held tests are running (their pids, noted by the tests)."""
    for _ in range(600):
        pids = [int(name) for name in os.listdir(root / "pids")]
        if len(pids) >= count:
            return pids
        time.sleep(0.1)
    raise AssertionError(f"no {count} held tests in 60 s")


def status(pid: int) -> list[str]:
    """A process's state, parent, ... from /proc ([] when it is gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rpartition(")")[2].split()
    except OSError:
        return []


def alive(pid: int) -> bool:
    return status(pid)[:1] not in ([], ["Z"])


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
@pytest.mark.parametrize(("jobs", "stop"), [(1, "ctrl-c"), (2, "ctrl-c"), (2, "worker killed")])
def test_a_run_stopped_mid_mutant_leaves_no_scratch_copy_no_test_running_and_the_worktree_as_it_was(
    tmp_path: Path, jobs: int, stop: str
) -> None:
    make_project(tmp_path)
    (tmp_path / "log").write_text("", encoding="utf-8")
    process = subprocess.Popen([sys.executable, "scripts/mutation.py", "--module", MODULE, "--jobs", str(jobs)],
                               cwd=tmp_path / "project", env=environment(tmp_path), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    held: list[int] = []
    try:
        assert process.stdout is not None
        for line in process.stdout:  # the header: the baseline and the map are done, the mutants are next
            if line.startswith("== "):
                break
        (tmp_path / "hold").touch()
        held = started_tests(tmp_path, jobs)  # each worker in a mutant's test
        if stop == "ctrl-c":
            process.send_signal(signal.SIGINT)  # what a Ctrl-C at the terminal sends the script
        else:
            workers = [pid for pid in (int(path.parent.name) for path in Path("/proc").glob("[0-9]*/stat"))
                       if alive(pid) and status(pid)[1:2] == [str(process.pid)]]
            assert len(workers) == jobs
            os.kill(workers[0], signal.SIGKILL)
        _, errors = process.communicate(timeout=60)
        assert process.returncode != 0
        if stop == "worker killed":
            assert "a worker process ended without its result" in errors
        else:
            assert "KeyboardInterrupt" in errors
            for _ in range(50):  # SIGKILLed, and reaped, by the time the script ends; allow a moment all the same
                if not any(alive(pid) for pid in held):
                    break
                time.sleep(0.1)
            assert [pid for pid in held if alive(pid)] == []
        untouched(tmp_path)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for pid in held:  # a killed worker's test is not stopped by anyone (the worker cannot): stopped here
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_the_killing_test_is_read_from_the_summary_and_kill_first_keeps_the_selection() -> None:
    script = load_script(SCRIPT, "mutation_script")
    output = ("F\n___ test_b ___\n----- Captured stdout call -----\nFAILED tests/t.py::test_printed - no\n"
              "=== short test summary info ===\nFAILED tests/t.py::test_b[a - b] - assert 1 == 2\n"
              "!!! stopping after 1 failures !!!\n1 failed in 0.1s\n")
    assert script.first_failure(output) == "tests/t.py::test_b[a - b]"  # not the test's own output
    assert script.first_failure("=== short test summary info ===\nERROR tests/t.py::test_c[x]\n") == \
        "tests/t.py::test_c[x]"
    assert script.first_failure("ERROR tests/t.py::test_c - x\n") == ""  # no summary: nothing said
    selected = ["t::a", "t::b", "t::c", "t::d"]
    assert script.kill_first(selected, {"t::c": 1, "t::d": 2, "t::gone": 5}) == ["t::d", "t::c", "t::a", "t::b"]
    assert script.kill_first(selected, {}) == selected


def test_a_recorded_run_is_taken_up_where_it_stopped_and_only_for_the_same_code(tmp_path: Path) -> None:
    make_project(tmp_path)
    record = tmp_path / "record.jsonl"
    whole, _, _ = run(tmp_path, "--record", str(record))
    lines = record.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["id"] for line in lines] == [m["id"] for m in whole["modules"][0]["mutants"]]
    # every result recorded: the rerun runs no test (not even the baseline) and reports the same result
    again, again_log, output = run(tmp_path, "--record", str(record))
    assert again_log == []
    assert f"5 of its 5 mutants taken from {record}, 0 to run" in output
    assert without_times(again) == without_times(whole)
    assert [m["seconds"] for m in again["modules"][0]["mutants"]] == [m["seconds"] for m in whole["modules"][0][
        "mutants"]]
    # a run stopped after three results, the last line cut short by the kill: the two others run, nothing else
    record.write_text("\n".join(lines[:3]) + "\n" + lines[3][:20], encoding="utf-8")
    resumed, resumed_log, output = run(tmp_path, "--record", str(record))
    assert "3 of its 5 mutants taken" in output
    ran = [line.split()[2] for line in output.splitlines() if line.startswith("  [")]
    assert ran == [json.loads(line)["id"] for line in lines[3:]]
    assert resumed_log[:3] == ["fast", "pick", "check"]  # the baseline, then check's two mutants' tests only
    assert set(resumed_log[3:]) <= {"fast", "pick", "check"} and "check" in resumed_log[3:]
    assert without_times(resumed) == without_times(whole)
    # the module changed: its recorded results stand for other code, and every mutant runs again
    module = tmp_path / "project" / MODULE
    module.write_text(TREESTATE + "\n", encoding="utf-8")
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qam", "edit"],
                   cwd=tmp_path / "project", check=True)
    changed, _, output = run(tmp_path, "--record", str(record))
    assert "0 of its 5 mutants taken" in output and "passed over" in output
    # three whole lines, the cut one left as it was (the next result starts a line of its own), two resumed, five
    # of the new code
    assert len(record.read_text(encoding="utf-8").splitlines()) == 3 + 1 + 2 + 5
    assert without_times(changed) == without_times(whole)


# A module with one equivalent mutant: `if flag:` into `if not flag:` in spare() (both branches return None).
SPARE = TREESTATE + '''

def spare(flag):
    if flag:
        return None
    return None
'''


def test_a_listed_equivalent_is_run_again_only_when_its_code_changed(tmp_path: Path) -> None:
    make_project(tmp_path)
    project = tmp_path / "project"
    (project / MODULE).write_text(SPARE, encoding="utf-8")
    (project / "tests/test_state.py").write_text(TESTS + "\n\ndef test_spare():\n    note('spare')\n"
                                                 "    assert treestate.spare(True) is None\n", encoding="utf-8")
    spare = f"{MODULE}:20:core/AddNot#5"
    (project / "scripts/mutation_equivalent.toml").write_text(
        f'[equivalent]\n"{spare}" = "both branches return None"\n', encoding="utf-8")
    subprocess.run(["git", "add", "-A"], cwd=project, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qm", "spare"],
                   cwd=project, check=True)

    def outcome(data: dict[str, Any]) -> tuple[str, str]:
        found = next(m for m in data["modules"][0]["mutants"] if m["id"] == spare)
        return found["outcome"], found["reason"]

    first, first_log, _ = run(tmp_path)
    assert outcome(first) == ("equivalent", "both branches return None")
    assert first_log.count("spare") > 2  # the baseline, the map and the mutant's own run
    # nothing it rests on changed: counted as equivalent, not run (the baseline runs test_spare once)
    again, again_log, output = run(tmp_path)
    assert outcome(again) == ("equivalent", "not run: listed, and unchanged since it last survived")
    assert "1 listed equivalents not run" in output and again_log.count("spare") == 1
    outcomes = [m["outcome"] for m in first["modules"][0]["mutants"]]
    assert [m["outcome"] for m in again["modules"][0]["mutants"]] == outcomes
    # asked to recheck, or asked for by its id, it runs
    for options in (("--recheck-equivalents",), ("--mutant", spare)):
        rechecked, rechecked_log, _ = run(tmp_path, *options)
        assert outcome(rechecked) == ("equivalent", "both branches return None")
        assert rechecked_log.count("spare") >= 2
    # its function changed (a line of its body): it runs again
    (project / MODULE).write_text(SPARE.replace("    return None\n", "    return None  # none\n", 1), encoding="utf-8")
    changed, changed_log, _ = run(tmp_path)
    assert outcome(changed) == ("equivalent", "both branches return None")
    assert changed_log.count("spare") >= 2


def test_follow_moves_a_listed_equivalent_to_where_its_mutant_is_now(tmp_path: Path) -> None:
    make_project(tmp_path)
    project = tmp_path / "project"
    (project / MODULE).write_text(SPARE, encoding="utf-8")
    spare = f"{MODULE}:20:core/AddNot#5"
    listed = f'[equivalent]\n"{spare}" = "both branches return None"\n"{MODULE}:2:core/AddNot#0" = "a wrong listing"\n'
    (project / "scripts/mutation_equivalent.toml").write_text(listed, encoding="utf-8")
    subprocess.run(["git", "add", "-A"], cwd=project, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qm", "spare"],
                   cwd=project, check=True)
    # two lines above spare(), one with an `if` of its own (AddNot's places after it are counted one further), and
    # pick()'s first `if` edited
    edited = SPARE.replace("    if first:\n", "    if first or False:\n").replace(
        "\n\ndef spare(flag):", "\n\nEXTRA = 1 if True else 2\n\n\ndef spare(flag):")
    (project / MODULE).write_text(edited, encoding="utf-8")
    done = subprocess.run([sys.executable, "scripts/mutation.py", "--follow", "HEAD"], cwd=project,
                          env=environment(tmp_path), capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"moved: {spare} -> {MODULE}:23:core/AddNot#6" in done.stdout, done.stdout
    assert f"its lines changed (triage it anew): {MODULE}:2:core/AddNot#0" in done.stdout, done.stdout
    assert (project / "scripts/mutation_equivalent.toml").read_text(encoding="utf-8") == listed.replace(
        spare, f"{MODULE}:23:core/AddNot#6")
