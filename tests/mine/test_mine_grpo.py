"""GRPO learns on mined tasks: a task mined from a small history (validated in Docker), scripted
demonstrations of it (`codeagent tasks demos`), SFT of the tiny model on them, then one GRPO step whose
rollouts run in the mined task's own environment and are graded by the harness: the runs are not masked,
their rewards differ, and the step has a non-zero gradient. (From the random tiny model instead, every
run is a format error, masked, and the gradient is 0: why the demonstrations come first.)"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest
from rich.console import Console

from tests.support.history import history_repo

pytestmark = pytest.mark.usefixtures("no_leaks")


def test_a_grpo_step_on_a_mined_task_has_a_gradient(tmp_path, env):
    import torch

    from codeagent.mine.mining import Options, mine, open_repository
    from codeagent.mine.progress import MiningProgress
    from codeagent.train import sft
    from codeagent.train.grpo import trainer as grpo
    from codeagent.train.modeling import merge_adapter
    from codeagent.train.recipe import load_recipe
    from codeagent.train.toy import build_toy_model

    torch.set_num_threads(1)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    tasks = tmp_path / "mined.jsonl"
    with MiningProgress(Console(file=io.StringIO())) as progress:
        summary = mine(open_repository(str(history_repo(tmp_path)), "synthetic/calc"), tasks, Options(), progress)
    assert summary.kept == 1

    store = tmp_path / "demos"
    demos = subprocess.run([sys.executable, "-m", "codeagent.cli", "tasks", "demos", str(tasks), "--store", str(store)],
                           capture_output=True, text=True, env=env, timeout=600)
    assert demos.returncode == 0, demos.stderr[-3000:]
    assert ": resolved (" in demos.stdout and " look: unresolved (" in demos.stdout
    assert "2 demonstrations of 1 tasks" in demos.stdout

    tiny = build_toy_model(tmp_path / "tiny", store, vocab_size=1024)  # its tokenizer knows the demonstrations
    adapter = sft.run(load_recipe("sft-mined-tiny", [f"model.base={tiny}", f"data.store={store}",
                                                     f"output_dir={tmp_path / 'sft'}", "trainer.max_steps=150"]))
    merged = merge_adapter(adapter, tmp_path / "merged")
    output = tmp_path / "grpo"
    grpo.run(load_recipe("grpo-mined-tiny", [f"model.base={merged}", f"data.tasks={tasks}", f"output_dir={output}",
                                             f"rollout.store={tmp_path / 'rollouts'}", "trainer.max_steps=1",
                                             "rollout.workers=1"]))
    records = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    [rollouts] = [record for record in records if record.get("event") == "rollouts"]
    assert rollouts["rollouts"] == 8 and rollouts["masked"] < 8, rollouts
    assert rollouts["infra_failures"] == 0 and set(rollouts["rewards"]) == {0.0, 1.0}, rollouts  # a choice to reward
    [step] = [record for record in records if "grad_norm" in record]
    assert step["grad_norm"] > 0, step


def test_the_fix_demonstration_applies_the_gold_patch_in_one_bash_command(tmp_path):
    from codeagent.mine.candidates import candidate
    from codeagent.mine.demos import apply_command, demo_turns
    from codeagent.mine.walk import history
    from codeagent.task import Task

    repo = history_repo(tmp_path)
    fix = next(commit for commit in history(repo / ".git") if commit.message.startswith("Fix add()"))
    gold = candidate(repo / ".git", fix).gold_patch
    assert "\nindex " in gold
    task = Task(repo=str(repo), base_commit=fix.parent, problem_statement="p", gold_patch=gold + "CODEAGENT_PATCH\n")
    fix_turn, submit = demo_turns(task, "fix")
    command = json.loads(fix_turn["tool_calls"][0]["function"]["arguments"])["command"]
    assert command == apply_command(task.gold_patch) and "\nindex " not in command
    assert command.startswith("git apply <<'CODEAGENT_PATCH_'\n")  # a marker the patch does not hold
    assert submit["tool_calls"][0]["function"]["name"] == "submit"
    subprocess.run(["git", "checkout", "-q", fix.parent], cwd=repo, check=True)
    subprocess.run(["bash", "-c", apply_command(gold)], cwd=repo, check=True)
    assert "return a + b" in (repo / "calc.py").read_text()
    look = json.loads(demo_turns(task, "look")[0]["tool_calls"][0]["function"]["arguments"])["command"]
    assert look == "git status --short"
