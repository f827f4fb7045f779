"""One owner for a task's environment (issue 20, item 1): built-or-pulled is decided in
harness/env_images.py only, the grading steps are run by harness/grading/plan.py's flow only, and every
front end that grades (eval, `traj grade`, GRPO's harness and sandbox graders, the regression
verifier, prebuilt images) goes through that flow."""

from __future__ import annotations

import contextlib
import re
import time
from pathlib import Path

import pytest

from codeagent.harness.env_images import BuiltImages, Grading, PulledImages, image_source, pulled
from codeagent.harness.grading import plan as env_plan
from codeagent.harness.grading import task_env
from codeagent.harness.grading.plan import Graded, TestPlan, grade_in, run_plan
from codeagent.harness.grading.task_env import Applied, TaskEnvironment
from codeagent.harness.grading.verdict import GradeReport, Outcome
from codeagent.task import Task

PACKAGE = Path(__file__).parent.resolve().parent.parent / "codeagent"


def _sources(pattern: str) -> dict[str, int]:
    """{module path under codeagent/: occurrences of `pattern`}, for the modules where it occurs."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        count = len(re.findall(pattern, path.read_text(encoding="utf-8")))
        if count:
            found[path.relative_to(PACKAGE).as_posix()] = count
    return found


def test_built_or_pulled_is_decided_in_one_module():
    assert _sources(r"\bis_prebuilt\b") == {}
    # the image mark is written by prebuilt.mark and read (what to pull from where) by prebuilt.py; whether
    # a task is pulled at all is read in env_images only
    assert set(_sources(r"""extra(?:\.get\(|\[)["']images["']""")) <= {"harness/env_images.py",
                                                                     "harness/images/prebuilt.py"}
    assert set(_sources(r"""extra\.get\(["']docker_image["']\)""")) <= {"harness/env_images.py",
                                                                       "harness/images/prebuilt.py"}
    # building or pulling a task's images: only the sources there
    assert set(_sources(r"\btask_images\(")) == {"harness/env_images.py", "harness/layers/python_env.py"}
    assert set(_sources(r"from \.+(?:harness\.)?(?:images\.)?prebuilt import [^\n]*\bprepare\b")) == {"harness/env_images.py"}


def test_the_grading_steps_are_run_in_one_flow():
    """Applying the hidden tests, running them and grading the run happen in env_plan.run_plan only."""
    assert set(_sources(r"\.patch_tests\(")) == {"harness/grading/plan.py"}
    assert set(_sources(r"\benv\.run_tests\(")) == {"harness/grading/plan.py"}
    assert set(_sources(r"\benv\.grade\(")) == {"harness/grading/plan.py"}
    assert set(_sources(r"\benv\.apply\(")) == {"harness/grading/plan.py"}


def test_train_does_not_import_evals_for_grading():
    for path in sorted((PACKAGE / "train").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert "evals.batch" not in text and "evals import batch" not in text, path.name


def test_image_source_is_the_one_decision():
    plain = Task(repo="/r", problem_statement="p", instance_id="a")
    r2e = Task(repo="/r", problem_statement="p", instance_id="b",
               extra={"task_format": "r2e-gym", "docker_image": "namanjain12/orange3_final:abc"})
    official = plain.model_copy(update={"images": {"source": "official", "namespace": "swebench"}})
    assert [pulled(task) for task in (plain, r2e, official)] == [False, True, True]
    assert isinstance(image_source(plain), BuiltImages) and image_source(plain).sandbox_grades
    source = image_source(r2e, registry="mirror.local:5000")
    assert isinstance(source, PulledImages) and not source.sandbox_grades
    assert source.task.images["registry"] == "mirror.local:5000"  # pulled through the mirror
    named = r2e.model_copy(update={"images": {"source": "prebuilt", "registry": "own:1"}})
    assert image_source(named, registry="mirror.local:5000").task.images["registry"] == "own:1"


class _Env:
    """A task environment that records the flow's steps."""

    def __init__(self, *, apply_error=None, test_patch_error=None):
        self.steps, self.services = [], []
        self.apply_error, self.test_patch_error = apply_error, test_patch_error

    def apply(self, patch):
        self.steps.append(("apply", patch))
        return Applied(self.apply_error, ["a.py"], None if self.apply_error else "git apply")

    def flags(self, patch, relied_on, changed):
        self.steps.append(("flags", list(relied_on), list(changed)))
        return {"tests/conftest.py": "conftest"} if "conftest" in patch else {}

    def patch_tests(self, test_patch):
        self.steps.append(("patch_tests", test_patch))
        return self.test_patch_error if test_patch else None

    def reset(self, paths):
        self.steps.append(("reset", list(paths)))

    def run_tests(self, command, timeout, log_parser="", test_files=()):
        self.steps.append(("run", command, timeout))
        return task_env.TestRun("t::a PASSED\n", 0, True, False, 1.5)

    def grade(self, run, parser, f2p, p2p):
        self.steps.append(("grade", parser, list(f2p), list(p2p)))
        return GradeReport(outcome=Outcome.RESOLVED)


TEST_PATCH = "diff --git a/tests/test_a.py b/tests/test_a.py\n--- a/tests/test_a.py\n+++ b/tests/test_a.py\n"


def test_the_flow_applies_flags_puts_the_tests_in_runs_and_grades_in_that_order():
    env = _Env()
    plan = TestPlan("pytest", "pytest", 60, ["t::a"], ["t::b"], test_patch=TEST_PATCH, reset=["tests/x.py"])
    graded = run_plan(env, "PATCH", plan)
    assert [step[0] for step in env.steps] == ["apply", "flags", "patch_tests", "reset", "run", "grade"]
    assert env.steps[1] == ("flags", ["tests/test_a.py"], ["a.py"])  # relied on: the test patch's files
    assert env.steps[-1] == ("grade", "pytest", ["t::a"], ["t::b"])
    report = graded.report()
    assert report["outcome"] == "resolved" and report["patch_applied_with"] == "git apply"
    assert report["touches_test_infrastructure"] == [] and report["test_seconds"] == 1.5


def test_the_report_gives_the_seconds_of_each_step_of_the_flow():
    env = _Env()
    tests = env.run_tests

    def slow_tests(command, timeout, *judged):
        time.sleep(0.05)
        return tests(command, timeout, *judged)

    env.run_tests = slow_tests
    plan = TestPlan("pytest", "pytest", 60, ["t::a"], ["t::b"], test_patch=TEST_PATCH)
    phases = grade_in(lambda: contextlib.nullcontext(env), "PATCH", plan).report()["phase_seconds"]
    assert list(phases) == ["start", "apply", "flags", "test_patch", "tests", "verdict", "stop"]
    assert phases["tests"] >= 0.05 and min(phases.values()) >= 0


def test_the_flow_stops_where_the_patch_or_the_test_patch_does_not_apply():
    env = _Env(apply_error="does not apply")
    graded = run_plan(env, "conftest PATCH", TestPlan("pytest", "pytest", 60, ["t::a"], [], test_patch=TEST_PATCH))
    assert [step[0] for step in env.steps] == ["apply", "flags"]
    assert graded.verdict.outcome is Outcome.PATCH_APPLY_FAILED and graded.run is None
    assert graded.report()["touches_test_infrastructure"] == ["tests/conftest.py"]
    env = _Env(test_patch_error="the test patch does not apply")
    graded = run_plan(env, "PATCH", TestPlan("pytest", "pytest", 60, ["t::a"], [], test_patch=TEST_PATCH))
    assert graded.verdict.outcome is Outcome.HARNESS_ERROR and "run" not in [step[0] for step in env.steps]


def test_a_verdict_hook_replaces_the_official_rule():
    env = _Env()
    seen = []

    def verdict(env, run, plan):
        seen.append(run.log)
        return GradeReport(outcome=Outcome.UNRESOLVED, reason="hook")

    plan = TestPlan("bash run_tests.sh", "r2e", 60, [], [], verdict=verdict)
    assert run_plan(env, "", plan).verdict.reason == "hook"
    assert seen == ["t::a PASSED\n"] and "grade" not in [step[0] for step in env.steps]


def test_the_layouts_hooks_are_the_plan_of_a_pulled_task():
    from codeagent.harness.grading.prebuilt_rules import layout_plan

    smith = Task(repo="/r", problem_statement="p", instance_id="s", test_command="pytest -v tests/test_a.py",
                 FAIL_TO_PASS=["tests/test_a.py::test_x"], extra={"task_format": "swe-smith"})
    plan = layout_plan(smith)
    assert plan.reset == ["tests/test_a.py"] and plan.verdict is not None and plan.log_parser == "swe-smith"
    r2e = Task(repo="/r", problem_statement="p", instance_id="r", extra={"task_format": "r2e-gym"})
    plan = layout_plan(r2e)
    assert plan.reset == [] and plan.verdict is not None and "run_tests.sh" in plan.command


@pytest.fixture
def flow(monkeypatch):
    """Every run of the flow, recorded, in an environment that opens nothing."""
    calls = []

    def recorded(env, patch, plan, laps=None):
        calls.append((patch, plan))
        return Graded(GradeReport(outcome=Outcome.RESOLVED), Applied(None, [], "git apply"), {},
                      task_env.TestRun("", 0, True, False, 0.1))

    monkeypatch.setattr(TaskEnvironment, "__enter__", lambda self: self)
    monkeypatch.setattr(TaskEnvironment, "__exit__", lambda self, *exc: None)
    monkeypatch.setattr(env_plan, "run_plan", recorded)
    plan = TestPlan("pytest", "pytest", 60, ["t::a"], [])
    monkeypatch.setattr(BuiltImages, "grading", lambda self, log_dir=None, phase=None: Grading("img", plan))
    monkeypatch.setattr(BuiltImages, "facts", lambda self: {})
    monkeypatch.setattr(BuiltImages, "services", [])
    monkeypatch.setattr(BuiltImages, "plan", lambda self, network=False: plan)
    monkeypatch.setattr(PulledImages, "grading", lambda self, log_dir=None, phase=None: Grading("eval", plan))
    return calls


def test_every_front_end_grades_through_the_one_flow(flow, tmp_path):
    from codeagent.evals.batch import grade_task
    from codeagent.harness.env_grade import grade_in_sandbox
    from codeagent.scaling.regression import _run
    from codeagent.train.grade import _harness_grade

    task = Task(repo="/r", problem_statement="p", instance_id="a", test_command="pytest", FAIL_TO_PASS=["t::a"])
    pulled_task = task.model_copy(update={"instance_id": "b", "task_format": "r2e-gym", "docker_image": "x/y:z"})
    assert grade_task(task, "P1", tmp_path / "eval")["outcome"] == "resolved"  # eval grade/run
    assert grade_task(pulled_task, "P2", tmp_path / "pulled")["outcome"] == "resolved"  # prebuilt images
    assert _harness_grade(task, "P3", tmp_path / "traj")["outcome"] == "resolved"  # traj grade, GRPO harness grader
    assert grade_in_sandbox(object(), task, "P4", harness=True)["outcome"] == "resolved"  # GRPO sandbox grader
    assert grade_in_sandbox(object(), task, "P5")["outcome"] == "resolved"  # the task's own command (toy)
    assert _run(task, "img", "pytest tests", "pytest", 60, ["t::b"], "P6", reset=["tests/t.py"])["outcome"] == \
        "resolved"  # the regression verifier
    assert [patch for patch, _ in flow] == ["P1", "P2", "P3", "P4", "P5", "P6"]
    suite = flow[-1][1]
    assert (suite.fail_to_pass, suite.pass_to_pass, suite.reset, suite.test_patch) == ([], ["t::b"], ["tests/t.py"], "")
