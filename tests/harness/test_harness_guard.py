"""The guarded pytest run (issue 21, item 1): codeagent's plugin in a real pytest run of this
interpreter, and the checks of the log against its records. The same in Docker, through the whole
harness: tests/harness/test_harness_docker.py (CASES rewrites_reports, fakes_log_and_exits)."""

from __future__ import annotations

import hashlib
import hmac
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from codeagent.harness.grading.guard import Guard, allowed, evidence, guarded, read_records, verdict
from codeagent.harness.grading.verdict import Outcome, grade
from codeagent.harness.logs.parsers import parse_log
from tests.support.calc import (
    FAKES_LOG_AND_EXITS_CODE,
    GUARD_AWARE_CODE,
    LENIENT_PLUGIN_CODE,
    NEW_TESTS,
    REWRITES_REPORTS_CODE,
    SOURCE,
)

ADD, MUL = "tests/test_calc.py::test_add", "tests/test_calc.py::test_mul"
FIXED = SOURCE.replace("a - b", "a + b")


class FolderBox:
    """The three calls Guard makes of a sandbox, on a folder of this machine."""

    def __init__(self, root: Path):
        self.root = root

    def run(self, command: str, timeout: float | None = None):
        proc = subprocess.run(["bash", "-c", command], cwd=self.root, capture_output=True, text=True, timeout=300)
        return SimpleNamespace(output=proc.stdout + proc.stderr, exit_code=proc.returncode, timed_out=False)

    def read_file(self, path: str, max_bytes: int | None = None) -> bytes:
        return Path(path).read_bytes()

    def write_file(self, path: str, data: bytes | str) -> None:
        Path(path).write_bytes(data.encode() if isinstance(data, str) else data)


def guarded_run(tmp_path: Path, calc: str, tests: str = NEW_TESTS, files: dict[str, str] | None = None):
    """pytest -rA on a calc repository under the guard: (log, exit code, records, guard folder)."""
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "calc.py").write_text(calc)
    (repo / "tests" / "test_calc.py").write_text(tests)
    for name, text in (files or {}).items():
        (repo / name).write_text(text)
    box = FolderBox(repo)
    guard = Guard(box, str(tmp_path))
    exports = guard.install()
    log_file = tmp_path / "test.log"  # the name a harness log has: attack (b) looks for *.log
    result = box.run(f"{exports}{sys.executable} -m pytest -rA -p no:cacheprovider > {log_file} 2>&1")
    return log_file.read_text(), result.exit_code, guard.collect(), Path(guard.folder)


def graded(log: str, exit_code: int, records: dict, f2p=(ADD,), p2p=(MUL,)):
    report = grade(parse_log("pytest", log), list(f2p), list(p2p), exit_code=exit_code, log_complete=True)
    return verdict(report, records, "pytest", log, [*f2p, *p2p])


def test_an_honest_fix_resolves_and_an_honest_failure_does_not(tmp_path):
    log, code, records, folder = guarded_run(tmp_path / "gold", FIXED)
    report = graded(log, code, records)
    assert report.outcome is Outcome.RESOLVED and report.guard == "pytest" and report.tamper_evidence == []
    assert records["started"] == records["ended"] == 1 and records["unverified"] == 0 and records["replaced"] == []
    assert records["tests"][ADD] == {"setup": "passed", "call": "passed", "teardown": "passed", "xfail": False}
    assert not (folder / "key").exists()  # read and deleted before any test module was imported

    log, code, records, _ = guarded_run(tmp_path / "empty", SOURCE)
    report = graded(log, code, records)
    assert report.outcome is Outcome.UNRESOLVED and report.tamper_evidence == []
    assert records["tests"][ADD]["call"] == "failed"


def test_a_module_that_rewrites_pytest_reports_is_caught(tmp_path):
    """(a): calc.py wraps TestReport.from_item_and_call at import; pytest prints PASSED and exits 0."""
    log, code, records, _ = guarded_run(tmp_path, REWRITES_REPORTS_CODE + "\n\n\n" + SOURCE)
    assert f"PASSED {ADD}" in log and code == 0
    assert grade(parse_log("pytest", log), [ADD], [MUL], exit_code=code, log_complete=True).resolved  # unguarded
    report = graded(log, code, records)
    assert report.outcome is Outcome.UNRESOLVED and "does not match the run the guard saw" in report.reason
    assert f"{ADD}: the log says PASSED, the guard saw setup passed, call failed" in report.tamper_evidence
    assert any("TestReport.from_item_and_call" in line for line in report.tamper_evidence)


def test_a_module_that_knows_the_guard_by_name_cannot_blind_it(tmp_path):
    """Issue 34: the code under test looks the plugin up (by its old fixed name, or by its helpers among the
    loaded modules), replaces two helpers, then rewrites the reports. The plugin's name is drawn per run,
    it leaves sys.modules, and its helpers are closures: there is nothing to replace (on 0972c8d, this
    resolved with no evidence)."""
    log, code, records, _ = guarded_run(tmp_path, GUARD_AWARE_CODE + "\n\n\n" + SOURCE)
    assert "PASSED tests/test_calc.py::test_add" in log and code == 0  # the log alone says resolved
    report = graded(log, code, records)
    assert report.outcome is Outcome.UNRESOLVED and report.tamper_evidence, report
    assert "_pytest.reports.TestReport.from_item_and_call" in records["replaced"]


def test_a_plugin_the_code_under_test_registers_to_decide_outcomes_is_caught(tmp_path):
    """Issue 34 (the red team): the module under test registers a plugin whose pytest_pyfunc_call runs the test
    itself and swallows its failure; the guard's wrapper sees a call that raised nothing and no pytest internal
    is replaced. A plugin registered after the session started that implements a hook deciding outcomes is
    evidence (a conftest or a module imported as a plugin is not)."""
    log, code, records, _ = guarded_run(tmp_path, LENIENT_PLUGIN_CODE + "\n\n\n" + SOURCE)
    assert "PASSED tests/test_calc.py::test_add" in log and code == 0
    report = graded(log, code, records)
    assert report.outcome is Outcome.UNRESOLVED and report.tamper_evidence, report
    assert any("lenient" in item for item in records["replaced"]), records["replaced"]


@pytest.fixture(scope="module")
def xdist() -> Path:
    """pytest-xdist (and execnet), installed once per machine into a folder of their own."""
    import os

    folder = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "codeagent" / "pytest-xdist-3.6.1"
    if not (folder / "xdist").is_dir():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(folder),
                        "pytest-xdist==3.6.1", "execnet==2.1.1"], check=True, timeout=600)
    return folder


def test_tests_run_in_xdist_workers_are_no_tampering(tmp_path, xdist):
    """pytest -n 2: the tests run in workers the plugin is not loaded in; an honest fix must resolve (the red
    team's false alarm: every listed test 'not seen to run'). The session's own checks still hold."""
    import os

    os.environ["PYTHONPATH"] = str(xdist)
    try:
        repo = tmp_path / "repo"
        (repo / "tests").mkdir(parents=True)
        (repo / "calc.py").write_text(FIXED)
        (repo / "tests" / "test_calc.py").write_text(NEW_TESTS)
        box = FolderBox(repo)
        guard = Guard(box, str(tmp_path))
        exports = guard.install()
        log_file = tmp_path / "test.log"
        result = box.run(f"{exports}{sys.executable} -m pytest -rA -n 2 -p no:cacheprovider > {log_file} 2>&1")
        log, records = log_file.read_text(), guard.collect()
    finally:
        del os.environ["PYTHONPATH"]
    assert "2 workers" in log or "created: 2/2 workers" in log, log[-2000:]
    assert records["distributed"] and graded(log, result.exit_code, records).outcome is Outcome.RESOLVED


def test_the_guard_does_not_run_pytests_assertion_rewriter_on_itself(tmp_path):
    """Issue 34: on pytest-dev__pytest-11143 a third-party patch the official harness grades resolved (a second
    @staticmethod on AssertionRewriter.is_rewrite_disabled, which Python 3.9 cannot call) crashed the guarded
    run before any test: `-p` marks the plugin for assertion rewriting, and rewriting its module (a docstring
    first) calls the patched method. Here that method raises whenever it is called, as it did there: the
    official path (these tests have no docstring) never calls it, so the guarded run must not either."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(
        "import _pytest.assertion.rewrite as rewrite\n\n"
        "def broken(docstring):\n    raise TypeError(\"'staticmethod' object is not callable\")\n\n"
        "rewrite.AssertionRewriter.is_rewrite_disabled = staticmethod(broken)\n")
    import os

    os.environ.update(PYTHONPATH=str(tmp_path / "site"), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")  # this venv's plugins
    try:                                                                # are rewritten too (as the official run's)
        log, code, records, _ = guarded_run(tmp_path / "run", FIXED)
    finally:
        del os.environ["PYTHONPATH"], os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"]
    assert "TypeError" not in log and code == 0, log[-2000:]
    assert graded(log, code, records).outcome is Outcome.RESOLVED


def test_a_module_that_fakes_the_log_and_exits_early_is_caught(tmp_path):
    """(b): calc.py writes PASSED lines to the *.log among its descriptors and calls os._exit(0)."""
    log, code, records, _ = guarded_run(tmp_path, FAKES_LOG_AND_EXITS_CODE + "\n\n\n" + SOURCE)
    assert f"PASSED {ADD}" in log and code == 0 and records["started"] == 1 and records["ended"] == 0
    report = graded(log, code, records)
    assert report.outcome is Outcome.UNRESOLVED
    assert report.tamper_evidence == ["a pytest session did not reach its end: the test process exited early",
                                      f"{ADD}: the log says PASSED, the guard did not see it run",
                                      f"{MUL}: the log says PASSED, the guard did not see it run"]


VARIETY = '''import os
import subprocess
import sys
import unittest

import pytest

import _pytest.runner


def test_pass():
    assert "codeagent" not in os.environ.get("PYTEST_ADDOPTS", "") + os.environ.get("PYTHONPATH", "")
    assert not any("guard-" in entry for entry in sys.path)


@pytest.mark.skip(reason="no")
def test_skip_marker():
    pass


def test_skip_inside():
    pytest.skip("inside")


def test_unittest_skip_in_a_function():
    raise unittest.SkipTest("plain")


@pytest.mark.xfail(reason="known")
def test_xfail_marker():
    assert False


def test_xfail_inside():
    pytest.xfail("inside")


@pytest.mark.parametrize("value", ["a b", "c"])
def test_params(value):
    assert value


def test_monkeypatches_pytest(monkeypatch):
    monkeypatch.setattr(_pytest.runner, "runtestprotocol", None)  # undone before the guard looks


def test_runs_pytest_again(tmp_path):
    (tmp_path / "test_inner.py").write_text("def test_inner():\\n    assert True\\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.returncode == 0, proc.stdout


class Case(unittest.TestCase):
    def test_ok(self):
        self.assertEqual(1, 1)

    def test_bad(self):
        self.assertEqual(1, 2)

    @unittest.skip("no")
    def test_skipped(self):
        pass

    @unittest.expectedFailure
    def test_expected(self):
        self.assertEqual(1, 2)
'''


def test_honest_outcomes_of_every_kind_agree_with_the_guard(tmp_path):
    """Skips, xfails, parameters with a space, unittest cases, a test that monkeypatches pytest and
    one that runs pytest again: the log and the guard agree, and the tests see no trace of it."""
    log, code, records, _ = guarded_run(tmp_path, FIXED, files={"tests/test_variety.py": VARIETY})
    statuses = parse_log("pytest", log)
    listed = [test for test in statuses if test.startswith("tests/")]
    assert code == 1 and statuses["tests/test_variety.py::Case::test_bad"] == "FAILED"
    assert {statuses[f"tests/test_variety.py::{name}"] for name in ("test_pass", "test_params[a", "Case::test_ok",
            "test_monkeypatches_pytest", "test_runs_pytest_again")} == {"PASSED"}
    assert statuses["tests/test_variety.py::test_xfail_marker"] == statuses["tests/test_variety.py::Case::test_expected"] \
        == statuses["tests/test_variety.py::test_xfail_inside"] == "XFAIL"
    assert records["started"] == records["ended"] == 1 and records["replaced"] == []
    assert evidence(records, "pytest", log, listed) == []
    assert records["tests"]["tests/test_variety.py::test_skip_marker"]["setup"] == "skipped"
    assert records["tests"]["tests/test_variety.py::test_unittest_skip_in_a_function"]["call"] == "skipped"


def test_records_that_were_not_signed_with_the_key_do_not_count():
    key = b"k" * 64

    def line(record: dict) -> bytes:
        body = json.dumps(record, sort_keys=True).encode()
        return body + b" " + hmac.new(key, body, hashlib.sha256).hexdigest().encode()

    forged = json.dumps({"k": "end", "exit": 0}).encode() + b" " + b"0" * 64
    raw = b"\n".join([line({"k": "start"}), forged, b"PASSED tests/x.py::t", line(
        {"k": "phase", "id": "tests/x.py::t", "when": "setup", "raw": "passed"})])
    records = read_records(raw, key)
    assert records["started"] == 1 and records["ended"] == 0 and records["unverified"] == 2
    assert records["tests"] == {"tests/x.py::t": {"setup": "passed", "xfail": False}}
    found = evidence(records, "pytest", "PASSED tests/x.py::t\n", ["tests/x.py::t"])
    assert found[:2] == ["2 record(s) of the guard do not verify: something else wrote there",
                         "a pytest session did not reach its end: the test process exited early"]
    assert found[2] == "tests/x.py::t: the log says PASSED, the guard saw setup passed"  # no call
    assert evidence(read_records(b"", key), "pytest", "PASSED tests/x.py::t\n", ["tests/x.py::t"])[0] == \
        "the guard saw no pytest session start: its plugin did not load or its records were removed"


@pytest.mark.parametrize("phases, statuses", [
    ({"setup": "passed", "call": "passed"}, {"PASSED"}),
    ({"setup": "passed", "call": "failed"}, set()),
    ({"setup": "passed", "call": "failed", "xfail": True}, {"XFAIL", "SKIPPED"}),
    ({"setup": "xfailed", "xfail": True}, {"XFAIL", "SKIPPED"}),
    ({"setup": "skipped"}, {"SKIPPED"}),
    ({"setup": "passed", "call": "skipped"}, {"SKIPPED"}),
    ({"setup": "failed"}, set()),
])
def test_the_passing_statuses_each_outcome_allows(phases, statuses):
    assert allowed(phases) == statuses


def test_ids_are_matched_as_the_parser_spells_them():
    records = {"started": 1, "ended": 1, "tests": {"tests/x.py::t[a b]": {"setup": "passed", "call": "failed"}}}
    assert evidence(records, "pytest", "PASSED tests/x.py::t[a b]\n", ["tests/x.py::t[a"]) == [
        "tests/x.py::t[a: the log says PASSED, the guard saw setup passed, call failed"]
    assert evidence(records, "pytest_v2", "PASSED tests/x.py::t[a b]\n", ["tests/x.py::t[a b]"]) != []
    # two node ids that read as one cut id: either one's outcome may be the one the log reports last
    records["tests"]["tests/x.py::t[a c]"] = {"setup": "passed", "call": "passed"}
    assert evidence(records, "pytest", "FAILED tests/x.py::t[a b]\nPASSED tests/x.py::t[a c]\n",
                    ["tests/x.py::t[a"]) == []


def test_listed_ids_that_are_no_node_ids_are_not_checked():
    """pytest-5227 lists `[100%]`, a word of pytester's output that the log holds as PASSED."""
    records = {"started": 1, "ended": 1, "tests": {}}
    assert evidence(records, "pytest", "PASSED [100%]\nPASSED tests/x.py::t\n", ["[100%]", "tests/x.py::t"]) == [
        "tests/x.py::t: the log says PASSED, the guard did not see it run"]


def test_which_commands_run_under_the_guard():
    assert guarded("pytest -rA tests/x.py") and guarded("python -m pytest -rA") and guarded("py.test -v")
    assert guarded("source /opt/activate && pytest --no-header -rA -p no:cacheprovider a.py")
    for other in ("./tests/runtests.py --verbosity 2", "bin/test -C --verbose", "tox --current-env -epy39 -v --",
                  "bash run_tests.sh", "cat pytest.ini", "pip install pytest-cov"):
        assert not guarded(other), other


def test_other_runners_and_unfinished_runs_are_graded_as_before():
    report = grade({"t": "PASSED"}, ["t"], [], exit_code=0, log_complete=True)
    assert verdict(report, None, "pytest", "", ["t"]) is report  # not guarded
    assert verdict(report, {"started": 0}, "django", "", ["t"]) is report  # not a pytest parser
    timed_out = grade({}, ["t"], [], exit_code=None, log_complete=True, timed_out=True)
    assert verdict(timed_out, {"started": 0}, "pytest", "", ["t"]) is timed_out
