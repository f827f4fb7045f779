"""Run a test plan in a task's image: a fresh container of the image, the patch applied, the plan's
command run and graded by the one flow (grading/plan.py). What mining's validation (mine/validate.py)
and the verifiers (scaling/regression.py, scaling/reproduction.py) need from the harness, behind one door.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..sandbox.workspace import RepoSnapshot
from ..task import Task
from .grading.judge import judge_evidence, without_canaries
from .grading.plan import Graded, TestPlan, grade_in, suite_plan
from .grading.task_env import TaskEnvironment, watched_run

__all__ = ["Graded", "TestPlan", "judge_evidence", "run_plan_in_image", "suite_plan", "watched_run",
           "without_canaries"]


def run_plan_in_image(task: Task, plan: TestPlan, patch: str, *, image: str, services: Sequence[Any] = (),
                      workspace: RepoSnapshot | None = None, progress: Callable[[str], None] | None = None,
                      reason: Callable[[Exception], str] | None = None) -> Graded:
    """`plan` after `patch` in a fresh container of `image` standing on `workspace` (None: the task's
    repository), with the `services` its tests reach; `progress(line)` hears the test run. A broken
    environment is a harness_error verdict (`reason(error)` says why), never an exception."""
    def environment() -> TaskEnvironment:
        return TaskEnvironment(task, image, services=services, workspace=workspace, progress=progress)

    if reason is None:
        return grade_in(environment, patch, plan)
    return grade_in(environment, patch, plan, reason=reason)
