"""Grade one test run: parsed statuses + FAIL_TO_PASS/PASS_TO_PASS + exit status -> GradeReport.

The rule, in the order it is applied:

1. Run state. A run that timed out is `timeout`; a run whose log is incomplete (no end marker:
   killed, crashed, lost) is `harness_error`. Neither is ever resolved. `patch_apply_failed` is
   made by `not_run()`, as the harness never gets to the tests.
2. No results. A log from which the parser read no test at all is `unresolved`; but when the task
   lists tests and the log shows nothing of the parser's tool either (none of its `MARKERS`: not its
   test runner's lines, not its build's errors), the log is in an unknown format and the run is a
   `harness_error` naming the parser: the environment ran something else, never resolved. A build the
   patch broke still prints its compiler's errors, so it stays `unresolved`. The Python parsers have
   no markers: their verdicts are as before.
3. Consistency with the exit status (a patch cannot pass by printing fake PASSED lines). If the test
   command's exit code is known and nonzero, the log must report at least one FAILED or ERROR
   test, ANY test, listed or not: otherwise the log does not describe the run that happened, and
   the run is `unresolved` with `consistent=False`. Unrelated failing tests satisfy this, so a gold
   patch still resolves when tests outside the two lists fail in the same run. An unknown exit
   code (None) skips this check. This catches fake passes printed over a failing run; it cannot
   catch a patch that also prints a fake failure: such a patch must run code during the tests
   (a conftest.py, a startup hook, an import-time print), and the harness flags patches that touch
   test infrastructure (`integrity.py`), and checks every run against what its judge's observers saw
   (`judge/`: a log that does not match is unresolved, `tamper_evidence`); the harness also cuts
   the output with per-run markers a patch cannot forge. A test reported several times takes its last status, as in SWE-bench (see
   logs/parsers.py); the listed tests reported with differing statuses are named in the report
   (`status_conflicts`), and those that pass although the log also reports them failing
   (`masked_failures`: a fake `PASSED` line after the real `FAILED` one, or a junk id such as
   pytest-5227's `[100%]`) count as 0 for rewards and verifier scores (integrity.py).
   And when the runner's exit code says it aborted before running the tests (pytest: 2
   interrupted, e.g. a collection error; 3 internal error; 4 usage error: `ABORT_EXIT_CODES`),
   the run is `unresolved` whatever PASSED lines the log holds: nothing that printed them was a
   test that ran.
4. Per test. A FAIL_TO_PASS test passes when its status is PASSED or XFAIL; a PASS_TO_PASS test
   when PASSED, XFAIL or SKIPPED (a skip is not a regression, as in SWE-bench); a test missing
   from the log has failed. `resolved` = every FAIL_TO_PASS and every PASS_TO_PASS test passes.

A listed id that SWE-bench cut at a space (`test_f[a` for `test_f[a b]`: more `[` than `]`) also
matches the whole ids that start with it followed by a space; several matches grade as the one
reported last, as SWE-bench's cut key keeps the last line's status. Parsers other than `pytest_v2`
cut ids the same way, so there the match is exact.

`extract_test_output()` cuts the test command's output out of a whole evaluation log, between
start/end markers, and reads the exit-code line after the end marker. The defaults are the
official SWE-bench markers; a harness should pass markers carrying a per-run random token, which
a patch cannot forge, and then the exit code line cannot be faked either.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Any

from pydantic import BaseModel, computed_field

from ..logs.parsers import FAILING, PASSING, parse_log

START_MARKER = ">>>>> Start Test Output"
END_MARKER = ">>>>> End Test Output"
EXIT_CODE_MARKER = ">>>>> Test Exit Code"

MISSING = "MISSING"  # the status of a listed test the log does not mention
_PYTEST_ABORTS = frozenset({2, 3, 4})
# Exit codes by which a test runner says it did not run the tests (per log parser).
PYTEST_PARSERS = frozenset({"pytest", "pytest_options", "pytest_v2", "matplotlib", "seaborn", "swe-smith", "r2e"})
ABORT_EXIT_CODES: dict[str, frozenset[int]] = {name: _PYTEST_ABORTS for name in PYTEST_PARSERS}


class Outcome(str, Enum):
    RESOLVED = "resolved"
    UNRESOLVED = "unresolved"
    PATCH_APPLY_FAILED = "patch_apply_failed"
    TIMEOUT = "timeout"
    HARNESS_ERROR = "harness_error"


class GradeReport(BaseModel):
    outcome: Outcome
    reason: str = ""
    fail_to_pass: dict[str, str] = {}  # test id -> status (or MISSING)
    pass_to_pass: dict[str, str] = {}
    f2p_passed: list[str] = []
    f2p_failed: list[str] = []
    p2p_passed: list[str] = []
    p2p_failed: list[str] = []
    exit_code: int | None = None
    log_complete: bool = True
    consistent: bool = True  # False: nonzero exit code but no failing test in the log
    tests_in_log: int = 0
    failing_in_log: int = 0  # FAILED or ERROR entries anywhere in the log
    status_conflicts: list[str] = []  # listed tests the log reports with differing statuses (the last counts)
    masked_failures: list[str] = []  # listed tests that pass, whose id the log also reports FAILED or ERROR
    guard: str = ""  # the judge's observers that watched the run ("pytest", "go", "process", "node", "reports": judge/)
    tamper_evidence: list[str] = []  # where the log and what the observers saw disagree (never resolved then)
    doubts: list[str] = []  # passes the judge cannot believe, with no sign of tampering (a crash before its canary)
    # harness_error because the log is in none of its parser's formats: the environment's fault, or a patch
    # that stopped the tests from running (deleted go.mod): training scores it as a failure (rollout_results)
    log_format_unknown: bool = False

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented form
    @property
    def resolved(self) -> bool:
        return self.outcome is Outcome.RESOLVED

    @computed_field  # type: ignore[prop-decorator]
    @property
    def counts(self) -> dict[str, int]:
        return {"f2p_passed": len(self.f2p_passed), "f2p_total": len(self.fail_to_pass),
                "p2p_passed": len(self.p2p_passed), "p2p_total": len(self.pass_to_pass)}

    def to_swebench(self) -> dict[str, dict[str, list[str]]]:
        """The `tests_status` part of an official SWE-bench report."""
        return {"FAIL_TO_PASS": {"success": list(self.f2p_passed), "failure": list(self.f2p_failed)},
                "PASS_TO_PASS": {"success": list(self.p2p_passed), "failure": list(self.p2p_failed)}}


def _keys(statuses: dict[str, str], test: str) -> list[str]:
    """The log's ids that a listed test id names (see the module docstring), in report order."""
    if test in statuses:
        return [test]
    if test.count("[") <= test.count("]"):
        return []
    return [key for key in statuses if key.startswith(test + " ")]


def lookup(statuses: dict[str, str], test: str) -> str | None:
    """The status of a listed test id, or None when the log does not mention it."""
    keys = _keys(statuses, test)
    return statuses[keys[-1]] if keys else None  # parse_log orders ids by their last report


def _unresolved_lists(fail_to_pass: list[str], pass_to_pass: list[str]) -> dict:
    f2p = dict.fromkeys(fail_to_pass, MISSING)
    p2p = dict.fromkeys(pass_to_pass, MISSING)
    return {"fail_to_pass": f2p, "pass_to_pass": p2p, "f2p_failed": list(f2p), "p2p_failed": list(p2p)}


def not_run(outcome: Outcome | str, fail_to_pass: list[str], pass_to_pass: list[str], *,
            reason: str = "", exit_code: int | None = None) -> GradeReport:
    """A report for a run whose tests did not run to the end: patch_apply_failed, timeout, harness_error."""
    outcome = Outcome(outcome)
    if outcome in (Outcome.RESOLVED, Outcome.UNRESOLVED):
        raise ValueError(f"not_run() is for runs without test results, not {outcome.value!r}")
    return GradeReport(outcome=outcome, reason=reason or outcome.value, exit_code=exit_code,
                       log_complete=False,
                       **_unresolved_lists(fail_to_pass, pass_to_pass))


def grade(statuses: dict[str, str], fail_to_pass: list[str], pass_to_pass: list[str], *,
          exit_code: int | None, log_complete: bool, timed_out: bool = False,
          abort_exit_codes: frozenset[int] = frozenset()) -> GradeReport:
    """Grade parsed statuses against the two lists; see the module docstring for the exact rule."""
    failing = sum(status in FAILING for status in statuses.values())
    conflicts: set[str] = getattr(statuses, "conflicts", set())
    listed = list(dict.fromkeys([*fail_to_pass, *pass_to_pass]))
    common = {"exit_code": exit_code, "log_complete": log_complete,
              "tests_in_log": len(statuses), "failing_in_log": failing,
              "status_conflicts": [test for test in listed if test in conflicts]}
    if timed_out:
        return not_run(Outcome.TIMEOUT, fail_to_pass, pass_to_pass, exit_code=exit_code,
                       reason="the test command timed out").model_copy(update=common)
    if not log_complete:
        return not_run(Outcome.HARNESS_ERROR, fail_to_pass, pass_to_pass, exit_code=exit_code,
                       reason="the test output is incomplete (no end marker)").model_copy(update=common)

    report: dict[str, Any] = {"fail_to_pass": {}, "pass_to_pass": {}, "f2p_passed": [], "f2p_failed": [],
              "p2p_passed": [], "p2p_failed": []}
    for tests, key, passing in ((fail_to_pass, "f2p", PASSING), (pass_to_pass, "p2p", PASSING | {"SKIPPED"})):
        table = report["fail_to_pass" if key == "f2p" else "pass_to_pass"]
        for test in dict.fromkeys(tests):
            status = lookup(statuses, test)
            table[test] = status or MISSING
            report[f"{key}_passed" if status in passing else f"{key}_failed"].append(test)

    failing_before: set[str] = getattr(statuses, "reported_failing", set())
    passed = set(report["f2p_passed"]) | set(report["p2p_passed"])
    common["masked_failures"] = [test for test in listed if test in passed
                                 and any(key in failing_before for key in _keys(statuses, test))]
    if not statuses:
        parser = getattr(statuses, "parser", "")
        if listed and getattr(statuses, "format_seen", None) is False:
            return GradeReport(outcome=Outcome.HARNESS_ERROR, **common, **report, log_format_unknown=True,
                               reason=f"the log is not in the format of log parser {parser!r}: no test result "
                                      f"and no output of its test runner or build")
        return GradeReport(outcome=Outcome.UNRESOLVED, reason="no test results in the log", **common, **report)
    if exit_code in abort_exit_codes:
        return GradeReport(outcome=Outcome.UNRESOLVED, consistent=False, **common, **report,
                           reason=f"the test runner aborted (exit code {exit_code}) before running the tests")
    if exit_code not in (None, 0) and not failing:
        return GradeReport(outcome=Outcome.UNRESOLVED, consistent=False, **common, **report,
                           reason=f"the test command exited with {exit_code} but the log reports no "
                                  f"failing test: the log does not match the run")
    if report["f2p_failed"] or report["p2p_failed"]:
        reason = (f"{len(report['f2p_failed'])} FAIL_TO_PASS and {len(report['p2p_failed'])} "
                  f"PASS_TO_PASS tests did not pass")
        return GradeReport(outcome=Outcome.UNRESOLVED, reason=reason, **common, **report)
    return GradeReport(outcome=Outcome.RESOLVED, **common, **report)


class TestOutput(BaseModel):
    text: str  # what the test command printed, between the markers
    complete: bool  # both markers were found
    exit_code: int | None  # from the exit-code line after the end marker, if any

    __test__ = False  # not a pytest test class


def extract_test_output(log: str, *, start: str = START_MARKER, end: str = END_MARKER,
                        exit_code_marker: str = EXIT_CODE_MARKER) -> TestOutput:
    """Cut the test command's output out of a whole evaluation log."""
    begin = log.find(start)
    if begin < 0:
        return TestOutput(text="", complete=False, exit_code=None)
    body_start = log.find("\n", begin)
    body_start = len(log) if body_start < 0 else body_start + 1
    stop = log.find(end, body_start)
    if stop < 0:
        return TestOutput(text=log[body_start:], complete=False, exit_code=None)
    # the end marker's line may begin with shell tracing (`+ : '>>>>> End...'`): stop before that line
    line_start = log.rfind("\n", body_start, stop)
    text = log[body_start:line_start + 1] if line_start >= 0 else ""
    match = re.search(rf"{re.escape(exit_code_marker)}:?\s*(-?\d+)", log[stop + len(end):])
    return TestOutput(text=text, complete=True, exit_code=int(match.group(1)) if match else None)


def grade_log(log: str, parser: str, fail_to_pass: list[str], pass_to_pass: list[str], *,
              timed_out: bool = False, exit_code: int | None = None, start: str = START_MARKER,
              end: str = END_MARKER, exit_code_marker: str = EXIT_CODE_MARKER) -> GradeReport:
    """Extract, parse and grade a whole evaluation log (an explicit `exit_code` wins over the log's)."""
    output = extract_test_output(log, start=start, end=end, exit_code_marker=exit_code_marker)
    statuses = parse_log(parser, output.text)
    return grade(statuses, fail_to_pass, pass_to_pass, timed_out=timed_out, log_complete=output.complete,
                 exit_code=exit_code if exit_code is not None else output.exit_code)
