"""Test-time scaling with scripted models in real Docker sandboxes, on the bundled example."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest

from codeagent.config import Config
from codeagent.events import EventBus
from codeagent.models import ModelResponse, ScriptedModel
from codeagent.run.examples import example_as_task
from codeagent.sandbox import open_sandbox, snapshot
from codeagent.scaling.judge import judge, judge_score
from codeagent.scaling.pipeline import regression_by_command, scale
from codeagent.scaling.reproduction import TEST_PATH, score_reproduction, write_reproduction
from codeagent.scaling.types import Candidate
from codeagent.trajectory.store import TrajectoryStore
from tests.support.cart import BUGGY, CART, RIGHT, fixer, turn

pytestmark = pytest.mark.usefixtures("no_leaks")

# Always drops the whole line: fixes the case but breaks removing some units (a passing test).
WRONG = "        del self._lines[sku]\n"


@pytest.fixture
def task():
    return example_as_task("cart")


@pytest.fixture
def config(tmp_path):
    return Config(trajectories_dir=str(tmp_path / "store"), agent={"localize": False},
                  scaling={"candidates": 3, "max_parallel": 3, "verifiers": ["regression"]})


def factory(task):
    snap = snapshot(task.repo, task.base_commit)
    return lambda: open_sandbox(snap)


def test_candidates_run_in_parallel_share_a_group_and_one_failure_sinks_none(task, config):
    models = {"a": fixer(RIGHT), "b": fixer(WRONG)}

    def build(name):
        if name == "broken":
            raise RuntimeError("this model is down")
        return models[name]

    config = config.model_copy(update={"scaling": config.scaling.model_copy(update={"models": ["a", "b", "broken"]})})
    events = []
    result = scale(task, config, factory(task), model_factory=build, events=EventBus(events.append))
    by_index = {c.index: c for c in result.candidates}
    assert by_index[0].exit_status == by_index[1].exit_status == "submitted"
    assert by_index[2].exit_status == "error" and "this model is down" in by_index[2].details["error"]
    assert by_index[0].scores["regression"] == 1.0 and by_index[1].scores["regression"] < 1.0
    assert "tests/test_cart.py::test_remove_some_units" in by_index[1].details["regression"]["broken"]
    store = TrajectoryStore(config.trajectory_root())
    groups = {store.load(c.trajectory_id).group_id for c in result.candidates if c.trajectory_id}
    assert len(groups) == 1 and None not in groups
    assert store.load(by_index[0].trajectory_id).verification["scores"] == {"regression": 1.0}
    assert result.selection.chosen == 0
    kinds = [e.kind for e in events]
    assert kinds.count("candidate_scored") == 3 and kinds[-1] == "selection_made"


def test_hybrid_picks_the_right_candidate_where_votes_pick_wrong(task, config):
    models = iter([fixer(WRONG), fixer(WRONG), fixer(RIGHT)])
    config = config.model_copy(update={"scaling": config.scaling.model_copy(update={"policy": "hybrid"})})
    result = scale(task, config, factory(task), model_factory=lambda name: next(models))
    wrong_votes = [c for c in result.candidates if c.scores.get("regression", 1) < 1]
    assert len(wrong_votes) == 2  # the majority answer is the wrong one
    from codeagent.scaling.selection import select

    assert select(result.candidates, "vote").chosen in {c.index for c in wrong_votes}
    assert result.chosen.scores["regression"] == 1.0 and "del self._lines[sku]" in result.chosen.patch


def test_reproduction_test_is_kept_only_if_it_fails_on_the_original(task, config):
    good_test = ("from decimal import Decimal\nfrom shop import Cart\n\n\ndef test_ghost_line():\n"
                 "    cart = Cart()\n    cart.add('apple', 2, Decimal('0.50'))\n    cart.remove('apple', 2)\n"
                 "    assert len(cart) == 0\n")
    passing_test = "def test_nothing():\n    assert True\n"

    def writer(source):
        return ScriptedModel([turn("editor", command="create", path=TEST_PATH, file_text=source), turn("submit")])

    kept, why = write_reproduction(task, config, writer(good_test), factory(task))
    assert kept == good_test and why.startswith("kept")
    dropped, why = write_reproduction(task, config, writer(passing_test), factory(task))
    assert dropped is None and "does not fail on the original code" in why
    candidates = [Candidate(instance_id="x", index=0, patch=_patch(task, RIGHT)),
                  Candidate(instance_id="x", index=1, patch=_patch(task, BUGGY + "        pass\n"))]
    score_reproduction(kept, candidates, factory(task), timeout=60)
    assert [c.scores["reproduction"] for c in candidates] == [1.0, 0.0]


def test_judge_scores_from_logprobs_and_from_text():
    assert judge_score("YES", [-0.105]) == (pytest.approx(math.exp(-0.105)), "logprobs")
    assert judge_score("NO", [-0.2])[0] == pytest.approx(1 - math.exp(-0.2))
    assert judge_score("I think... YES", None) == (1.0, "answer in the text")
    assert judge_score("score: 0.35", None) == (0.35, "score in the text")
    assert judge_score("hmm", None)[0] == 0.5
    model = ScriptedModel([ModelResponse(content="YES", logprobs=[-0.05]), "NO"])
    candidates = [Candidate(instance_id="x", index=i, patch="diff --git a/x b/x\n") for i in range(2)]
    judge(model, "the issue", candidates)
    assert candidates[0].scores["judge"] == pytest.approx(math.exp(-0.05), abs=1e-4)
    assert candidates[1].scores["judge"] == 0.0
    assert "the issue" in model.calls[0][0]["content"] and "diff --git a/x b/x" in model.calls[0][0]["content"]


def test_regression_needs_the_original_passing_tests(task, config):
    candidates = [Candidate(instance_id="x", index=0, patch=_patch(task, WRONG)),
                  Candidate(instance_id="x", index=1, patch="diff --git a/nope b/nope\n--- a/nope\n+++ b/nope\n@@ -1 +1 @@\n-a\n+b\n")]
    regression_by_command(task.test_command, candidates, factory(task), timeout=60)
    assert candidates[0].details["regression"]["tests"] == 4  # the 4 tests that pass on the original code
    assert candidates[0].scores["regression"] == 0.75
    assert "does not apply" in candidates[1].details["discarded"]


def test_solve_with_candidates_on_the_example(tmp_path):
    env = {**os.environ, "CODEAGENT_TRAJECTORY_DIR": str(tmp_path / "t"), "CODEAGENT_CONFIG": str(tmp_path / "none.yaml")}
    proc = subprocess.run([sys.executable, "-m", "codeagent.cli", "solve", "--example", "cart", "--candidates", "2",
                           "--headless"], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("candidate ") >= 2 and "chosen: candidate" in proc.stderr
    assert "del self._lines[sku]" in proc.stdout


def _patch(task, new_text: str) -> str:
    with open_sandbox(task.repo) as sandbox:
        text = sandbox.read_file(CART).decode()
        sandbox.write_file(CART, text.replace(BUGGY, new_text))
        return sandbox.diff()
