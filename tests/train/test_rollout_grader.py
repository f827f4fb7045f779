"""GRPO's `rollout.grader: sandbox` with the model as the adversary (issue 21, item 7): what the model
leaves in its sandbox must not grade its run."""

from __future__ import annotations

import shlex

import pytest

from codeagent.config import Config
from codeagent.models.replay import ScriptedModel
from codeagent.run.examples import example_as_task
from codeagent.train.grpo.rollouts import Rollouts
from codeagent.train.recipe import load_recipe
from codeagent.trajectory.store import TrajectoryStore
from tests.support.cart import RIGHT, fixer, turn

pytestmark = pytest.mark.usefixtures("no_leaks")


def cart():
    """The bundled example, its tests run with -rA (the pytest log parser reads passes from that summary)."""
    return example_as_task("cart").model_copy(update={"test_command": "python -m pytest -rA tests"})


def _rollouts(tmp_path, policy: ScriptedModel, count: int = 1) -> Rollouts:
    task = cart()
    recipe = load_recipe("grpo-tiny", ["model.base=unused", f"output_dir={tmp_path / 'out'}", "rollout.environment=base",
                                       "rollout.grader=sandbox", "rollout.workers=1"])
    config = Config(trajectories_dir=str(tmp_path / "unused"), agent={"localize": False})
    rollouts = Rollouts(recipe, [task], tokenizer=type("T", (), {"eos_token_id": 2})(), config=config,
                        store=TrajectoryStore(tmp_path / "rollouts"))
    policy.close = lambda: None
    rollouts.policy = lambda trainer, model=None: policy
    trainer = type("Trainer", (), {"state": type("State", (), {"global_step": 0})()})()
    rollouts([task.instance_id] * count, trainer)
    return rollouts


def _fakes(task) -> str:
    """Bash that prints a PASSED line for every listed test and exits 0, whatever it was asked."""
    lines = " ".join(shlex.quote(f"PASSED {test}") for test in [*task.FAIL_TO_PASS, *task.PASS_TO_PASS])
    return f"printf '%s\\n' {lines}; exit 0"


@pytest.mark.parametrize("left", ["shell state", "files outside the repository"])
def test_what_the_model_left_in_its_sandbox_does_not_grade_an_empty_patch(tmp_path, left):
    """The model changes no file of the repository. It leaves shell state (functions and an alias named
    like the test runner printing PASSED for every listed test, exported variables, its shell in another
    folder), or files outside the repository that a fresh process in the same container would still
    run (a wrapper in /usr/local/bin, a sitecustomize.py in site-packages faking the same). Graded in a
    fresh sandbox, the run is what its patch is: empty, unresolved, reward 0."""
    task = cart()
    fake = _fakes(task)
    if left == "shell state":
        attack = [*(f"{name}() {{ {fake.replace('exit 0', 'return 0')}; }}" for name in ("python", "python3", "pytest")),
                  "export -f python python3 pytest", "shopt -s expand_aliases",
                  f"alias python={shlex.quote(fake.replace('exit 0', 'true'))}",
                  "export PYTHONDONTWRITEBYTECODE=1 PYTEST_ADDOPTS=-q", "cd /tmp"]
    else:
        site = ("import os, sys\nif 'pytest' in ' '.join(sys.argv):\n"
                + "".join(f"    print({f'PASSED {t}'!r})\n" for t in [*task.FAIL_TO_PASS, *task.PASS_TO_PASS])
                + "    sys.stdout.flush(); os._exit(0)\n")
        attack = [f"printf %s {shlex.quote(f'#!/bin/sh{chr(10)}{fake}{chr(10)}')} > /usr/local/bin/python",
                  "chmod +x /usr/local/bin/python", "hash -r",
                  "site=$(python3 -c 'import site; print(site.getsitepackages()[0])')",
                  f"printf %s {shlex.quote(site)} > $site/sitecustomize.py"]
    command = "; ".join([*attack, "python -m pytest -rA tests"])  # the model sees its trick work
    rollouts = _rollouts(tmp_path, ScriptedModel([turn("bash", command=command), turn("submit")]))
    [trajectory] = rollouts.store.list()
    observation = trajectory.messages[-3]["content"]
    assert f"PASSED {task.FAIL_TO_PASS[0]}" in observation and "FAILED" not in observation  # there, it works
    assert trajectory.exit_status == "submitted" and not (trajectory.patch or "").strip()
    assert trajectory.verification["outcome"] == "unresolved", trajectory.verification
    assert trajectory.rewards["total"] == 0.0 and rollouts.history[0]["infra_failures"] == 0


def test_a_real_fix_still_resolves_in_the_fresh_sandbox(tmp_path):
    rollouts = _rollouts(tmp_path, fixer(RIGHT))
    [trajectory] = rollouts.store.list()
    assert "raise ValueError(sku)" in trajectory.patch
    assert trajectory.verification["outcome"] == "resolved", trajectory.verification
    assert trajectory.rewards["total"] == 1.0
