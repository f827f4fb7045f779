"""`codeagent traj grade`: stored runs graded against their task's tests by the harness, in Docker,
into verdicts and rewards on the trajectory; then SFT takes the run graded resolved."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from codeagent.task import Task
from tests.support.calc import FAKES_LOG_AND_EXITS, GOLD, REWRITES_REPORTS, TEST_PATCH, calc_task

pytestmark = pytest.mark.usefixtures("no_leaks")


@pytest.fixture(scope="module")
def task(tmp_path_factory, base_image):
    return calc_task(tmp_path_factory.mktemp("synthetic"))


def _record(store, task: Task, patch: str, *, with_tests: bool) -> str:
    """A run as `solve` records it: the task as the agent saw it (without its tests, unless asked)."""
    seen = task if with_tests else task.model_copy(update={"test_patch": None, "gold_patch": None,
                                                           "FAIL_TO_PASS": [], "PASS_TO_PASS": []})
    call = {"id": "c1", "type": "function", "function": {"name": "submit", "arguments": "{}"}}
    with store.create(task=seen.model_dump(exclude_none=True), model="scripted",
                      messages=[{"role": "user", "content": task.problem_statement}]) as writer:
        writer.append_step({"finish_reason": "stop"}, [
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "name": "submit", "content": "Submitted."}])
        writer.update(exit_status="submitted", patch=patch)
        return writer.id


def test_traj_grade_stores_verdicts_and_rewards(task, tmp_path):
    from codeagent.trajectory.store import TrajectoryStore

    store = TrajectoryStore(tmp_path / "store")
    good = _record(store, task, GOLD, with_tests=True)
    empty = _record(store, task, "", with_tests=False)
    tasks = tmp_path / "tasks.jsonl"
    row = {"instance_id": task.instance_id, "repo": "synthetic/calc", "base_commit": task.base_commit,
           "patch": GOLD, "test_patch": TEST_PATCH, "problem_statement": task.problem_statement,
           "FAIL_TO_PASS": task.FAIL_TO_PASS, "PASS_TO_PASS": task.PASS_TO_PASS}
    tasks.write_text(json.dumps(row) + "\n")

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", "codeagent.cli", "traj", "--store", str(store.root), "grade", "--similarity", "0.5"]
    # The empty run recorded no tests and no --tasks is given: said, not guessed.
    first = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert first.returncode == 0, first.stderr[-2000:]
    assert f"{empty}  synthetic__calc-1  no task with tests for it" in first.stdout
    graded = store.load(good)
    assert graded.verification["resolved"] is True and graded.verification["outcome"] == "resolved"
    assert graded.rewards["resolved"] == 1.0 and graded.rewards["similarity"] == 1.0 and graded.rewards["total"] == 1.5
    # Already graded runs are skipped. The tasks file names the task, but no environment can be built
    # for it (no spec, no install_config): an infrastructure failure, stored, with no reward.
    second = subprocess.run([*command, "--tasks", str(tasks)], capture_output=True, text=True, env=env, timeout=600)
    assert second.returncode == 0, second.stderr[-2000:]
    assert f"{good}  synthetic__calc-1  already graded" in second.stdout
    assert f"{empty}  synthetic__calc-1  harness_error, reward None" in second.stdout
    failed = store.load(empty)
    assert failed.rewards == {} and "infrastructure failure" in failed.verification["infrastructure_failure"]
    assert "no environment spec" in failed.verification["reason"]
    bad = subprocess.run([*command, "--tasks", str(tmp_path / "missing.jsonl")], capture_output=True, text=True,
                         env=env, timeout=600)
    assert bad.returncode == 3 and bad.stderr.startswith("error: --tasks") and "Traceback" not in bad.stderr


def test_traj_grade_gives_a_fake_fix_no_reward(task, tmp_path):
    """issue 21, item 1: runs whose calc.py rewrites pytest's reports, or fakes the log and exits
    early, are graded unresolved with the guard's evidence, and every reward is 0."""
    from codeagent.trajectory.store import TrajectoryStore

    store = TrajectoryStore(tmp_path / "store")
    runs = [_record(store, task, patch, with_tests=True) for patch in (REWRITES_REPORTS, FAKES_LOG_AND_EXITS)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", "codeagent.cli", "traj", "--store", str(store.root), "grade", "--similarity", "0.5"]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for run in runs:
        graded = store.load(run)
        assert graded.verification["resolved"] is False and graded.verification["outcome"] == "unresolved"
        assert any(reason.startswith("tamper evidence: ") for reason in graded.verification["distrust"])
        assert graded.rewards["total"] == 0.0 and graded.rewards["zeroed_test_infrastructure"] == 1.0


def test_grade_uses_the_tasks_file_and_gives_an_empty_patch_minus_one(task, tmp_path):
    """A run whose record has no tests, graded with the task given: unresolved, and SWE-RL's -1."""
    from codeagent.train.grade import grade_trajectories
    from codeagent.train.recipe import RewardsSection
    from codeagent.trajectory.store import TrajectoryStore

    store = TrajectoryStore(tmp_path / "store")
    empty = _record(store, task, "", with_tests=False)
    results = grade_trajectories(store, [store.load(empty)], tasks={task.instance_id: task},
                                 weights=RewardsSection(similarity=1.0), output_dir=tmp_path / "logs")
    assert results == [{"id": empty, "instance_id": task.instance_id, "outcome": "unresolved", "reward": -1.0}]
    graded = store.load(empty)
    assert graded.verification["resolved"] is False and graded.rewards["similarity"] == -1.0
