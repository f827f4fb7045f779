"""The judge's JVM part (codeagent/harness/grading/judge/reports.py) on recorded runs, without Docker: a Maven
build the tests killed is evidence whatever the log says, and turns a cut-short run from a masked
harness_error into a scored failure."""

from __future__ import annotations

from codeagent.harness.grading.judge import judge_evidence, verdict
from codeagent.harness.grading.verdict import Outcome, grade

LISTED = ["calc.SubTest.subtracts", "calc.CalcTest.adds"]
PASSING_REPORTS = "".join(
    f'<testsuite name="{test.rsplit(".", 1)[0]}" tests="1" failures="0">'
    f'<testcase name="{test.rsplit(".", 1)[1]}" classname="{test.rsplit(".", 1)[0]}"/></testsuite>\n'
    for test in LISTED)


def seen(*builds: str) -> dict:
    return {"reports": {"parser": "junit_xml", "moved": [], "builds": list(builds)}}


def test_a_killed_build_is_evidence_even_when_the_log_has_no_result():
    for builds, says in ((["start"], "never ended"), (["start end 137"], "killed by signal 9")):
        found = judge_evidence(seen(*builds), "", LISTED, 0)
        assert found and says in found[0], found


def test_a_build_that_ended_is_no_evidence_when_nothing_passed():
    assert judge_evidence(seen("start end 0"), "", LISTED, 0) == []
    assert judge_evidence(seen("start end 1"), "[ERROR] BUILD FAILURE", LISTED, 1) == []


def test_a_killed_build_with_passing_reports_is_not_resolved():
    graded = grade({test: "PASSED" for test in LISTED}, LISTED[:1], LISTED[1:], exit_code=0, log_complete=True)
    assert graded.outcome is Outcome.RESOLVED
    judged = verdict(graded, seen("start"), PASSING_REPORTS, LISTED)
    assert judged.outcome is Outcome.UNRESOLVED and judged.tamper_evidence


def test_a_cut_short_log_with_evidence_is_scored_not_masked():
    cut = grade({}, LISTED[:1], LISTED[1:], exit_code=0, log_complete=False)
    assert cut.outcome is Outcome.HARNESS_ERROR
    judged = verdict(cut, seen("start end 137"), "", LISTED)
    assert judged.outcome is Outcome.UNRESOLVED
    assert "cut short by the code under test" in judged.reason and judged.tamper_evidence
    # without evidence a harness error stays one (the sandbox's failure, masked in training)
    assert verdict(cut, seen("start end 0"), "", LISTED).outcome is Outcome.HARNESS_ERROR
