"""`codeagent traj grade`: grade stored runs (`solve`, `eval`, rollouts) against their task's tests in
the harness's task environment, and store the verdict and the rewards on each trajectory.

The task comes from `--tasks` (any file a task loader reads, matched by instance id) or, failing that,
from the trajectory's own record when it carries the grading fields (test_patch, FAIL_TO_PASS). A
harness error is an infrastructure failure: its verdict is stored, no reward is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..task import Task
from . import TrainError
from .recipe import RewardsSection

Grader = Callable[[Task, str, Path], dict]


def _harness_grade(task: Task, patch: str, folder: Path) -> dict:
    from ..harness.env_grade import grade_patch, say

    return grade_patch(task, patch, folder, progress=lambda line: say(task.instance_id, line))


def task_for(trajectory, known: dict[str, Task]) -> Task | None:
    """The task to grade a run against: the given one with its id, else the run's own if it can be graded."""
    if trajectory.instance_id and trajectory.instance_id in known:
        return known[trajectory.instance_id]
    recorded = dict(trajectory.task or {})
    if not (recorded.get("repo") and (recorded.get("FAIL_TO_PASS") or recorded.get("test_patch"))):
        return None
    try:
        return Task.model_validate(recorded)
    except Exception:
        return None


def grade_trajectories(store, trajectories: Iterable[Any], *, tasks: dict[str, Task], weights: RewardsSection,
                       output_dir: Path, force: bool = False, grade: Grader = _harness_grade) -> list[dict]:
    """Grade each run, store verification and rewards; one summary line (a dict) per run."""
    from ..harness import integrity
    from .grpo import rewards
    from .grpo.rollout_results import infrastructure_failure

    results = []
    for trajectory in trajectories:
        line: dict[str, Any] = {"id": trajectory.id, "instance_id": trajectory.instance_id}
        if trajectory.resolved is not None and not force:
            results.append({**line, "skipped": "already graded (--force grades again)"})
            continue
        task = task_for(trajectory, tasks)
        if task is None:
            results.append({**line, "skipped": "no task with tests for it (give --tasks FILE)"})
            continue
        try:
            report = grade(task, trajectory.patch or "", output_dir / trajectory.id)
        except Exception as error:  # one run that cannot be graded is a harness error, not a dead batch
            report = {"outcome": "harness_error", "reason": f"{type(error).__name__}: {error}"}
        outcome = report.get("outcome")
        failure = infrastructure_failure(None, outcome, report)
        if failure:
            store.add_verification(trajectory.id, {"outcome": outcome, "grader": "harness",
                                                   "infrastructure_failure": failure,
                                                   "reason": str(report.get("reason", ""))[:500]})
            results.append({**line, "outcome": outcome, "reward": None})
            continue
        resolved = outcome == "resolved"
        distrust = integrity.reasons(report)
        values = rewards.compute(trajectory, resolved=resolved, gold_patch=task.gold_patch, weights=weights,
                                 distrust=distrust)
        store.add_verification(trajectory.id, {"resolved": resolved, "outcome": outcome, "grader": "harness",
                                               "distrust": distrust})
        store.add_rewards(trajectory.id, values)
        results.append({**line, "outcome": outcome, "reward": values["total"]})
    return results


def load_tasks(path: str | None, format: str = "auto") -> dict[str, Task]:
    if not path:
        return {}
    from ..data import DatasetError
    from ..data import load_tasks as load

    try:
        return {task.instance_id: task for task in load(path, format)}
    except (DatasetError, OSError) as error:
        raise TrainError(f"--tasks {path}: {error}") from None
