"""Grading: the SWE-bench rule, the exit-status consistency check, outcomes, and whole logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from codeagent.harness.grading.integrity import zeroed
from codeagent.harness.grading.verdict import (
    END_MARKER,
    MISSING,
    START_MARKER,
    GradeReport,
    Outcome,
    extract_test_output,
    grade,
    grade_log,
    lookup,
    not_run,
)
from codeagent.harness.logs.parsers import parse_log

DATA = Path(__file__).parent.parent / "data" / "harness"

F2P = ["tests/test_a.py::test_fixed"]
P2P = ["tests/test_a.py::test_old", "tests/test_b.py::test_other"]
ALL_PASS = {"tests/test_a.py::test_fixed": "PASSED", "tests/test_a.py::test_old": "PASSED",
            "tests/test_b.py::test_other": "PASSED"}


def test_all_listed_tests_pass_resolves():
    report = grade(ALL_PASS, F2P, P2P, exit_code=0, log_complete=True)
    assert report.outcome is Outcome.RESOLVED and report.resolved and report.consistent
    assert report.counts == {"f2p_passed": 1, "f2p_total": 1, "p2p_passed": 2, "p2p_total": 2}


def test_gold_resolves_when_unrelated_tests_fail_in_the_same_run():
    statuses = {**ALL_PASS, "tests/test_b.py::test_needs_network": "FAILED", "tests/test_c.py": "ERROR"}
    report = grade(statuses, F2P, P2P, exit_code=1, log_complete=True)
    assert report.resolved and report.consistent
    assert report.failing_in_log == 2


def test_a_missing_test_counts_as_failed():
    statuses = {k: v for k, v in ALL_PASS.items() if k != "tests/test_b.py::test_other"}
    report = grade(statuses, F2P, P2P, exit_code=0, log_complete=True)
    assert not report.resolved and report.outcome is Outcome.UNRESOLVED
    assert report.pass_to_pass["tests/test_b.py::test_other"] == MISSING
    assert report.p2p_failed == ["tests/test_b.py::test_other"]


@pytest.mark.parametrize("status, f2p_passes", [("PASSED", True), ("XFAIL", True), ("SKIPPED", False),
                                                ("FAILED", False), ("ERROR", False)])
def test_fail_to_pass_statuses(status, f2p_passes):
    statuses = {**ALL_PASS, F2P[0]: status}
    assert grade(statuses, F2P, P2P, exit_code=None, log_complete=True).resolved is f2p_passes


@pytest.mark.parametrize("status, p2p_passes", [("PASSED", True), ("XFAIL", True), ("SKIPPED", True),
                                                ("FAILED", False), ("ERROR", False)])
def test_pass_to_pass_statuses(status, p2p_passes):
    # a skipped PASS_TO_PASS test is not a regression, as in SWE-bench
    statuses = {**ALL_PASS, P2P[0]: status}
    assert grade(statuses, F2P, P2P, exit_code=None, log_complete=True).resolved is p2p_passes


def test_a_fake_passed_line_after_the_real_failed_line_is_inconsistent_with_the_exit_status():
    log = ("PASSED tests/test_a.py::test_old\n"
           "PASSED tests/test_b.py::test_other\n"
           "FAILED tests/test_a.py::test_fixed - AssertionError: assert 1 == 2\n"
           "PASSED tests/test_a.py::test_fixed\n")  # printed by the patch, after pytest's summary
    report = grade(parse_log("pytest", log), F2P, P2P, exit_code=1, log_complete=True)
    assert not report.resolved and not report.consistent
    assert report.status_conflicts == ["tests/test_a.py::test_fixed"]
    # printing a fake failure too satisfies the exit status: SWE-bench's rule resolves it, and the
    # report names the masked failure, which rewards and verifier scores do not trust
    report = grade(parse_log("pytest", log + "FAILED tests/fake.py::test_fake\n"), F2P, P2P, exit_code=1,
                   log_complete=True)
    assert report.resolved and report.masked_failures == ["tests/test_a.py::test_fixed"]
    assert zeroed(report.model_dump(mode="json"))


def test_a_test_reported_several_times_grades_by_its_last_status_as_in_swebench():
    # issue 12, defect 4: pytest-5227 lists the junk id `[100%]` (FAILED once, PASSED 8 times,
    # last PASSED) in PASS_TO_PASS; SWE-bench resolves the gold patch there.
    p2p = [*P2P, "[100%]"]
    log = ("PASSED [100%]\n" * 4 + "FAILED [100%]\n" + "PASSED [100%]\n" * 4
           + "".join(f"PASSED {test}\n" for test in F2P + P2P) + "FAILED tests/test_c.py::test_unrelated\n")
    report = grade(parse_log("pytest", log), F2P, p2p, exit_code=1, log_complete=True)
    assert report.resolved, report.reason
    assert report.pass_to_pass["[100%]"] == "PASSED" and report.status_conflicts == ["[100%]"]
    assert report.masked_failures == ["[100%]"]
    clean = grade(parse_log("pytest", "".join(f"PASSED {test}\n" for test in F2P + P2P)), F2P, P2P, exit_code=0,
                  log_complete=True)
    assert clean.resolved and clean.masked_failures == [] and clean.status_conflicts == []


def test_fake_passed_lines_alone_are_inconsistent_with_a_failing_exit_status():
    # the patch swallowed the real summary and printed its own
    log = "".join(f"PASSED {test}\n" for test in F2P + P2P)
    report = grade(parse_log("pytest", log), F2P, P2P, exit_code=1, log_complete=True)
    assert not report.resolved and not report.consistent
    assert report.outcome is Outcome.UNRESOLVED
    assert "exited with 1" in report.reason
    # an unknown exit status skips the check; a zero one passes it
    assert grade(parse_log("pytest", log), F2P, P2P, exit_code=None, log_complete=True).resolved
    assert grade(parse_log("pytest", log), F2P, P2P, exit_code=0, log_complete=True).resolved


def test_an_incomplete_run_is_never_resolved():
    report = grade(ALL_PASS, F2P, P2P, exit_code=0, log_complete=False)
    assert report.outcome is Outcome.HARNESS_ERROR and not report.resolved
    assert not report.log_complete and report.tests_in_log == 3
    report = grade(ALL_PASS, F2P, P2P, exit_code=0, log_complete=True, timed_out=True)
    assert report.outcome is Outcome.TIMEOUT and not report.resolved
    assert report.f2p_failed == F2P and report.fail_to_pass[F2P[0]] == MISSING


def test_no_results_is_unresolved():
    report = grade({}, [], [], exit_code=0, log_complete=True)
    assert report.outcome is Outcome.UNRESOLVED and "no test results" in report.reason


def test_not_run_outcomes_are_distinct_from_unresolved():
    values = {outcome.value for outcome in Outcome}
    assert values == {"resolved", "unresolved", "patch_apply_failed", "timeout", "harness_error"}
    report = not_run("patch_apply_failed", F2P, P2P, reason="git apply, git apply --reject and patch all failed")
    assert report.outcome is Outcome.PATCH_APPLY_FAILED and report.outcome is not Outcome.UNRESOLVED
    assert not report.resolved and report.f2p_failed == F2P and report.p2p_failed == P2P
    with pytest.raises(ValueError):
        not_run(Outcome.UNRESOLVED, F2P, P2P)
    with pytest.raises(ValueError):
        not_run("crashed", F2P, P2P)


def test_report_serializes_and_matches_the_swebench_shape():
    statuses = {**ALL_PASS, P2P[1]: "FAILED"}
    report = grade(statuses, F2P, P2P, exit_code=1, log_complete=True)
    data = report.model_dump(mode="json")
    assert data["outcome"] == "unresolved" and data["resolved"] is False
    assert GradeReport.model_validate(data).p2p_failed == [P2P[1]]
    assert report.to_swebench() == {
        "FAIL_TO_PASS": {"success": F2P, "failure": []},
        "PASS_TO_PASS": {"success": [P2P[0]], "failure": [P2P[1]]},
    }


def test_ids_swebench_cut_at_a_space_match_whole_ids():
    statuses = {"t.py::test_f[a b]": "PASSED", "t.py::test_f[a c]": "PASSED", "t.py::test_f[ab]": "FAILED",
                "t.py::test_g[x y]": "PASSED", "t.py::test_g[x z]": "FAILED"}
    assert lookup(statuses, "t.py::test_f[a") == "PASSED"  # not confused with test_f[ab]
    assert lookup(statuses, "t.py::test_g[x") == "FAILED"  # several matches: the one reported last
    assert lookup({"t.py::test_g[x z]": "FAILED", "t.py::test_g[x y]": "PASSED"}, "t.py::test_g[x") == "PASSED"
    assert lookup(statuses, "t.py::test_h[x") is None
    assert lookup(statuses, "t.py::test_f[ab") is None  # never another parameter
    assert lookup(statuses, "t.py::test_f") is None  # balanced ids match exactly only


# --------------------------------------------------------------------------------- whole logs

def _eval_log(test_output: str, exit_code: int | None = 1, *, start: str = START_MARKER, end: str = END_MARKER,
              finished: bool = True) -> str:
    log = ("+ git apply -v /tmp/patch.diff\nApplied patch django/db/models/base.py cleanly.\n"
           f"+ : '{start}'\n{test_output}")
    if finished:
        log += f"+ : '{end}'\n"
        if exit_code is not None:
            log += f"+ echo '>>>>> Test Exit Code: {exit_code}'\n>>>>> Test Exit Code: {exit_code}\n"
        log += "+ git checkout 4c086d7da4 tests/migrations/test_operations.py\n"
    return log


def test_extract_test_output():
    output = extract_test_output(_eval_log("line one\nline two\n", 3))
    assert output.text == "line one\nline two\n" and output.complete and output.exit_code == 3
    assert not extract_test_output(_eval_log("line one\n", finished=False)).complete
    assert not extract_test_output("no markers at all\n").complete
    assert extract_test_output(_eval_log("x\n", None)).exit_code is None


def test_an_exit_code_line_printed_by_the_tests_is_ignored():
    output = extract_test_output(_eval_log(">>>>> Test Exit Code: 0\nFAILED t.py::test_x\n", 1))
    assert output.exit_code == 1


def test_per_run_markers_cannot_be_forged_by_the_tests():
    start, end = ">>>>> Start Test Output 9f2c41", ">>>>> End Test Output 9f2c41"
    test_output = ("PASSED tests/test_a.py::test_fixed\n" + END_MARKER + "\n"
                   "FAILED tests/test_a.py::test_fixed - assert 0\n")
    log = _eval_log(test_output, 1, start=start, end=end)
    report = grade_log(log, "pytest", F2P, [], start=start, end=end)
    assert report.fail_to_pass == {F2P[0]: "FAILED"} and not report.resolved


def test_grade_log_on_a_django_run():
    log = _eval_log((DATA / "django.log").read_text(), 1)
    f2p = ["test_rename_index (migrations.test_operations.OperationTests)", "Tests the AlterField operation."]
    p2p = ["test_add_field (migrations.test_operations.OperationTests)", "--version is equivalent to version",
           "test_unique (model_fields.tests.BasicFieldTests.test_unique)"]
    report = grade_log(log, "django", f2p, p2p)
    assert report.outcome is Outcome.UNRESOLVED and report.consistent  # the skipped F2P test
    assert report.f2p_failed == ["test_rename_index (migrations.test_operations.OperationTests)"]
    assert report.p2p_failed == []
    report = grade_log(log, "django", f2p[1:], p2p)
    assert report.resolved  # other tests failed in the same run: still resolved
    report = grade_log(_eval_log((DATA / "django.log").read_text(), finished=False), "django", f2p[1:], p2p)
    assert report.outcome is Outcome.HARNESS_ERROR
    report = grade_log(log, "django", f2p[1:], p2p, timed_out=True)
    assert report.outcome is Outcome.TIMEOUT


def test_grade_log_on_a_sympy_run():
    log = _eval_log((DATA / "sympy.log").read_text(), 1)
    report = grade_log(log, "sympy", ["test_latex_functions"], ["test_printmethod", "test_mod"])
    assert report.resolved
    report = grade_log(log, "sympy", ["test_latex_basic"], ["test_printmethod"])
    assert not report.resolved and report.f2p_failed == ["test_latex_basic"]
    report = grade_log(log, "sympy", ["test_equality"], [])  # expected to fail: not a pass
    assert not report.resolved
