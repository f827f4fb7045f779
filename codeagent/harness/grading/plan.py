"""Grade a patch in a task environment: the one flow every grader runs (eval, prebuilt images, GRPO's
sandbox grader, the regression verifier).

    apply the patch -> flag the test infrastructure it touches -> put the hidden tests in (reset the
    test patch's files, apply it) -> put `reset` files back -> run the tests -> the verdict

A `TestPlan` says what differs between graders; its hooks are the variants: `verdict` (R2E-Gym's
expected-output rule, SWE-smith's verbose-line parser: prebuilt_rules.py), `reset` (SWE-smith's test
files, the regression verifier's), `relied_on` (the files the verdict relies on, for the flags).
A patch that does not apply, or a test patch that does not, stops the flow with its verdict.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from ...task import Task
from ..specs.directives import patched_files
from .integrity import report_fields
from .judge import verdict as judged
from .task_env import Applied, TaskEnvironment, TestRun, report_dict
from .verdict import GradeReport, Outcome, not_run

Verdict = Callable[[TaskEnvironment, TestRun, "TestPlan"], GradeReport]


@dataclass
class TestPlan:
    """What a grading run does once the patch is applied."""

    command: str
    log_parser: str
    timeout: float
    fail_to_pass: list[str]
    pass_to_pass: list[str]
    test_patch: str = ""  # the hidden tests: the files it touches are reset, then it is applied
    reset: list[str] = field(default_factory=list)  # put back to their base version before the run
    relied_on: list[str] | None = None  # the tests the verdict relies on (integrity flags); None: the test patch's
    verdict: Verdict | None = None  # None: the official rule over the log (TaskEnvironment.grade)
    network: bool = False  # report which failing tests tried to reach the network (an offline environment)

    __test__ = False  # not a pytest test class


@dataclass
class Graded:
    """What the flow found: the verdict, how the patch applied, the flags, the test run."""

    verdict: GradeReport
    applied: Applied | None = None  # None: the environment broke before the patch was tried
    flags: dict[str, str] = field(default_factory=dict)
    run: TestRun | None = None
    network: dict[str, Any] | None = None
    phases: dict[str, float] = field(default_factory=dict)  # seconds in each step of the flow (Laps)

    @property
    def log(self) -> str:
        return self.run.log if self.run is not None else ""

    def report(self) -> dict[str, Any]:
        """The report's grading fields (see evaluate.py's docstring for what each means)."""
        fields: dict[str, Any] = {}
        if self.applied is not None:
            if self.applied.applied_with:
                fields["patch_applied_with"] = self.applied.applied_with
            fields.update(report_fields(self.flags))
        if self.run is not None:
            fields["test_seconds"] = round(self.run.seconds, 2)
        if self.network is not None:
            fields["network"] = self.network
        if self.phases:
            fields["phase_seconds"] = {name: round(seconds, 3) for name, seconds in self.phases.items()}
        return {**fields, **report_dict(self.verdict)}


class Laps:
    """Seconds in each step of a grading flow, in order: each `lap(name)` takes the time since the last
    (what the harness spends beside the test command, step by step)."""

    def __init__(self):
        self.phases: dict[str, float] = {}
        self._last = time.monotonic()

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.phases[name] = self.phases.get(name, 0.0) + now - self._last
        self._last = now


def run_plan(env: TaskEnvironment, patch: str, plan: TestPlan, laps: Laps | None = None) -> Graded:
    """The flow, in an open environment (see the module docstring)."""
    laps = laps or Laps()
    f2p, p2p = plan.fail_to_pass, plan.pass_to_pass
    applied = env.apply(patch)
    laps.lap("apply")
    relied_on = plan.relied_on if plan.relied_on is not None else patched_files(plan.test_patch)
    flags = env.flags(patch, relied_on, applied.changed)
    laps.lap("flags")
    if applied.error:
        return Graded(not_run(Outcome.PATCH_APPLY_FAILED, f2p, p2p, reason=applied.error), applied, flags,
                      phases=laps.phases)
    if error := env.patch_tests(plan.test_patch):
        return Graded(not_run(Outcome.HARNESS_ERROR, f2p, p2p, reason=error), applied, flags, phases=laps.phases)
    if plan.reset:  # a patch cannot make a test pass by editing it
        env.reset(plan.reset)
    laps.lap("test_patch")
    run = env.run_tests(plan.command, plan.timeout, plan.log_parser, [*relied_on, *plan.reset])
    laps.lap("tests")
    if plan.verdict is not None:  # a prebuilt image's own rule (R2E-Gym, SWE-smith), judged as any run is
        verdict = plan.verdict(env, run, plan)
        verdict = judged(verdict, run.judge, run.log, [*verdict.fail_to_pass, *verdict.pass_to_pass])
    else:
        verdict = env.grade(run, plan.log_parser, f2p, p2p)
    network = None
    if plan.network:
        from ..logs.offline import network_failures

        network = {"available": False, "services": [service.name for service in env.services],
                   **network_failures(plan.log_parser, run.log, [*f2p, *p2p])}
    laps.lap("verdict")
    return Graded(verdict, applied, flags, run, network, laps.phases)


def _reason(error: Exception) -> str:
    return f"{type(error).__name__}: {error}"


def grade_in(environment: Callable[[], AbstractContextManager[TaskEnvironment]], patch: str, plan: TestPlan,
             reason: Callable[[Exception], str] = _reason) -> Graded:
    """The flow in the environment `environment()` opens; a broken environment (or engine) is a
    harness_error verdict, never an exception: one task's failure is not a dead batch or training run.
    The phases: `start` (the container, opened), the flow's steps, `stop` (removed)."""
    laps = Laps()
    try:
        with environment() as env:
            laps.lap("start")
            graded = run_plan(env, patch, plan, laps)
        laps.lap("stop")
        return graded
    except Exception as error:
        return Graded(not_run(Outcome.HARNESS_ERROR, plan.fail_to_pass, plan.pass_to_pass, reason=reason(error)))


# -- plans ------------------------------------------------------------------------------------------

def spec_plan(task: Task, spec, *, network: bool = False) -> TestPlan:
    """The plan of a task with an environment spec (harness/specs/swebench.py): the spec's test command, log
    parser and timeout, the task's lists and test patch."""
    from ..specs.directives import test_command

    return TestPlan(test_command(task, spec), spec.log_parser, float(spec.test_timeout), list(task.FAIL_TO_PASS),
                    list(task.PASS_TO_PASS), test_patch=task.test_patch or "", network=network)


def language_command(spec) -> str:
    """A language spec's tests as one script (lang_specs.LanguageSpec): test_env exported, pre_test, then
    every test command, one after the other whatever each exits with, all into one log. The exit code is
    the last command's, under pipefail: the status SWE-bench's eval script records right after its test
    commands (which run under `set -x -o pipefail`, without `-e`). Traced, as there: SWE-bench's `maven`
    parser reads the test names from the traced `mvn ... -Dtest=...` lines."""
    exports = [f"export {name}={shlex.quote(value)}" for name, value in spec.test_env.items()]
    return "\n".join(["set -x -o pipefail", *exports, *spec.pre_test, *spec.test_cmds])


def language_plan(task: Task, spec, *, network: bool = False) -> TestPlan:
    """The plan of a language task: its spec's test commands (the task's own `test_command` wins, as for
    Python), log parser and timeout; the task's lists and test patch."""
    return TestPlan(task.test_command or language_command(spec), spec.log_parser, float(spec.test_timeout),
                    list(task.FAIL_TO_PASS), list(task.PASS_TO_PASS), test_patch=task.test_patch or "",
                    network=network)


class NoTestCommand(ValueError):
    """A task without a spec whose record names no test command either: nothing to grade with."""


OWN_COMMAND_TIMEOUT = 300


def own_plan(task: Task) -> TestPlan:
    """The plan of a task graded by its own `test_command` (the toy tasks; a base-image sandbox)."""
    if not task.test_command:
        raise NoTestCommand(f"task {task.instance_id} has no test_command to grade with in the sandbox")
    return TestPlan(task.test_command, task.log_parser or "pytest", OWN_COMMAND_TIMEOUT,
                    list(task.FAIL_TO_PASS), list(task.PASS_TO_PASS), test_patch=task.test_patch or "")


def suite_plan(command: str, log_parser: str, timeout: float, tests: list[str], reset: list[str]) -> TestPlan:
    """The regression verifier's plan: no hidden tests; `tests` must stay passing, with the files run
    put back to their original version (editing a test does not fix a regression)."""
    return TestPlan(command, log_parser, timeout, [], list(tests), reset=list(reset), relied_on=list(reset))
