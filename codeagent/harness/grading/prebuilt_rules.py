"""The grading plans of tasks in prebuilt images (images/prebuilt.py): what the harness each layout comes
from does, as hooks of the one grading flow (plan.py).

- `swebench` (official images, SWE-Gym): apply the patch, reset the test patch's files and apply
  it, run the spec's test command after activating the env as the official eval script does, grade
  with the spec's log parser (FAIL_TO_PASS/PASS_TO_PASS). One difference: the official script
  re-runs a spec's `install` command before the tests (it has a network); here the sandbox has
  none, so the image's install stands (a patch to compiled code is not rebuilt).
- `swe-smith`: apply the patch, put the test files back, run the task's pytest command in the
  activated env, grade FAIL_TO_PASS/PASS_TO_PASS with the pytest parser.
- `r2e-gym`: apply the patch, copy the hidden tests in, run `run_tests.sh`, and compare each test's
  status with `expected_output_json` (r2e_grade).
"""

from __future__ import annotations

import re

from ...task import Task
from ..images.prebuilt import CONDA_ACTIVATE, R2E_HIDDEN, layout
from .plan import TestPlan
from .verdict import GradeReport, Outcome, not_run

R2E_TIMEOUT = 1800
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def test_command(task: Task) -> tuple[str, str, float]:
    """(the command run in /testbed, the log parser, the timeout) for the task's layout."""
    kind = layout(task)
    if kind == "r2e-gym":
        return (f"rm -rf r2e_tests && cp -r {R2E_HIDDEN}/r2e_tests r2e_tests && bash {R2E_HIDDEN}/run_tests.sh",
                "r2e", R2E_TIMEOUT)
    if kind == "swe-smith":
        return f"{CONDA_ACTIVATE} && cd /testbed && {task.test_command}", "swe-smith", R2E_TIMEOUT
    from ..specs.directives import test_command as spec_command
    from ..specs.swebench import spec_for

    spec = spec_for(task)
    return f"{CONDA_ACTIVATE} && cd /testbed && {spec_command(task, spec)}", spec.log_parser, spec.test_timeout


def swe_smith_statuses(log: str):
    """Statuses from `pytest --verbose` lines, as SWE-smith reads them (log_parsers: `swe-smith`); a test
    reported twice keeps its last status."""
    from ..logs.parsers import parse_log

    return parse_log("swe-smith", log)


def r2e_statuses(log: str) -> dict[str, str]:
    """Test statuses from pytest's short test summary, keyed as R2E-Gym keys them (log_parsers: `r2e`)."""
    from ..logs.parsers import parse_log

    return dict(parse_log("r2e", log))


def r2e_grade(log: str, expected: dict[str, str], run) -> GradeReport:
    """R2E-Gym's rule: resolved when the log reports exactly the expected tests, each with its
    expected status (a test expected to fail must still fail; no test more, none fewer)."""
    expected = {_ANSI.sub("", k).split(" - ")[0]: v for k, v in expected.items()}
    got = r2e_statuses(log)
    if run.timed_out:
        return not_run(Outcome.TIMEOUT, list(expected), [], reason="the tests timed out")
    if not run.complete:
        return not_run(Outcome.HARNESS_ERROR, list(expected), [], reason="the test run did not finish")
    matched = [name for name, status in expected.items() if got.get(name) == status]
    wrong = [name for name in expected if name not in matched]
    extra = sorted(set(got) - set(expected))
    resolved = not wrong and not extra
    reason = "" if resolved else "; ".join(filter(None, [
        f"{len(wrong)} test(s) without their expected status: {', '.join(wrong[:5])}" if wrong else "",
        f"{len(extra)} test(s) not in the expected output: {', '.join(extra[:5])}" if extra else ""]))
    return GradeReport(outcome=Outcome.RESOLVED if resolved else Outcome.UNRESOLVED, reason=reason,
                       fail_to_pass={name: got.get(name, "MISSING") for name in expected},
                       f2p_passed=matched, f2p_failed=wrong, exit_code=run.exit_code, log_complete=run.complete,
                       tests_in_log=len(got), failing_in_log=sum(s != "PASSED" for s in got.values()))


def _r2e_verdict(task: Task):
    def verdict(env, run, plan) -> GradeReport:
        return r2e_grade(run.log, task.expected_output or {}, run)

    return verdict


def _swe_smith_verdict(env, run, plan) -> GradeReport:
    from .verdict import ABORT_EXIT_CODES, grade

    return grade(swe_smith_statuses(run.log), plan.fail_to_pass, plan.pass_to_pass, exit_code=run.exit_code,
                 log_complete=run.complete, timed_out=run.timed_out, abort_exit_codes=ABORT_EXIT_CODES["pytest"])


def _test_files(task: Task) -> list[str]:
    return sorted({name.split("::", 1)[0] for name in [*task.FAIL_TO_PASS, *task.PASS_TO_PASS] if "::" in name})


def layout_plan(task: Task) -> TestPlan:
    """The grading plan of the task's layout (see the module docstring), with its hooks: R2E-Gym's
    verdict by expected output; SWE-smith's test files reset and its verbose-line parser."""
    command, parser, timeout = test_command(task)
    plan = TestPlan(command, parser, timeout, list(task.FAIL_TO_PASS), list(task.PASS_TO_PASS),
                    test_patch=task.test_patch or "")
    if parser == "r2e":
        plan.verdict = _r2e_verdict(task)
    elif parser == "swe-smith":
        plan.verdict = _swe_smith_verdict
    if layout(task) == "swe-smith":  # the patch cannot make a test pass by editing it
        plan.reset = _test_files(task)
    return plan
