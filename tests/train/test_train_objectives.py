"""GRPO objective options (train/grpo/objectives.py, rewards.py): the leave-one-out baseline computed on known
groups through TRL's own advantage code, DAPO dynamic sampling that refills uniform groups, G-RA step rewards
averaged, GSPO and CISPO reaching TRL, the 7B recipes' batch. CPU only, no Docker: a tiny model built offline."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from codeagent.train import TrainError
from tests.support.trajectories import edit_test_submit

ROOT = Path(__file__).parent.resolve().parent.parent


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    import torch

    from codeagent.train.tiny import build_tiny

    torch.set_num_threads(1)
    return build_tiny(tmp_path_factory.mktemp("tiny-model"), vocab_size=512)


def test_leave_one_out_factors_by_hand():
    from codeagent.train.grpo.objectives import leave_one_out_factors

    # groups of 4: all scored (4/3); one infrastructure failure (3 scored: 3/2, the failure 0); one scored (no baseline)
    scored = [True] * 4 + [True, True, False, True] + [False, True, False, False]
    assert leave_one_out_factors(scored, 4) == pytest.approx([4 / 3] * 4 + [1.5, 1.5, 0, 1.5] + [0] * 4)
    with pytest.raises(ValueError):
        leave_one_out_factors([True] * 3, 2)


def _advantages(tiny: Path, tmp_path: Path, rewards: list[float | None], *overrides: str) -> list[float]:
    """The advantages TRL's GRPOTrainer (with the recipe's objective options) computes for one generation batch
    whose rewards are `rewards` (groups of 4, in order)."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer

    from codeagent.train.grpo import trainer as grpo
    from codeagent.train.modeling import lora_config, trl_args
    from codeagent.train.recipe import load_recipe

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    tokenizer = AutoTokenizer.from_pretrained(tiny)
    run = load_recipe("grpo-tiny", [f"model.base={tiny}", f"output_dir={tmp_path}", "trainer.num_generations=4",
                                    f"trainer.per_device_train_batch_size={len(rewards)}", *overrides])

    def rollout(prompts, trainer):
        return {"prompt_ids": [[5, 6]] * len(prompts), "completion_ids": [[7, 8]] * len(prompts),
                "logprobs": [[-1.0, -1.0]] * len(prompts), "reward_resolved": list(rewards)}

    def resolved(prompts, completions, reward_resolved, **_):
        return reward_resolved

    trainer_class, rollout_func = grpo._objectives(run, GRPOTrainer, rollout, [])
    trainer = trainer_class(model=AutoModelForCausalLM.from_pretrained(tiny), reward_funcs=[resolved],
                            args=trl_args(run, temperature=1.0), processing_class=tokenizer,
                            train_dataset=Dataset.from_list([{"prompt": "t"}] * len(rewards)),
                            rollout_func=rollout_func, peft_config=lora_config(run))
    output = trainer._generate_and_score_completions([{"prompt": "t"} for _ in rewards])
    return output["advantages"].tolist()


def test_leave_one_out_baseline_gives_each_sample_its_reward_minus_the_mean_of_the_others(tiny, tmp_path):
    """Group [1, 0, 0, 0]: 1 - 0 = 1, 0 - 1/3; group [1, 1, 0, infrastructure failure]: 1 - 1/2 twice, 0 - 1,
    the failure 0 (TRL's group mean would give 3/4, -1/4 and 1/3, 1/3, -2/3)."""
    rewards = [1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, None]
    plain = _advantages(tiny, tmp_path / "mean", rewards, "trainer.scale_rewards=none")
    assert plain == pytest.approx([0.75, -0.25, -0.25, -0.25, 1 / 3, 1 / 3, -2 / 3, 0.0], abs=1e-6)
    loo = _advantages(tiny, tmp_path / "loo", rewards, "trainer.scale_rewards=none", "rewards.baseline=leave_one_out")
    assert loo == pytest.approx([1.0, -1 / 3, -1 / 3, -1 / 3, 0.5, 0.5, -1.0, 0.0], abs=1e-6)


def test_leave_one_out_keeps_trls_std_scaling(tiny, tmp_path):
    """With scale_rewards=group the leave-one-out advantage is divided by the group's std as TRL's is:
    group [1, 0, 0, 0] (std 0.5, unbiased) -> (1 - 0) / 0.5 = 2 and (0 - 1/3) / 0.5."""
    loo = _advantages(tiny, tmp_path, [1.0, 0.0, 0.0, 0.0], "trainer.scale_rewards=group",
                      "rewards.baseline=leave_one_out")
    assert loo == pytest.approx([2.0, -2 / 3, -2 / 3, -2 / 3], rel=1e-3)


class _Scripted:
    """A stand-in for rollouts.Rollouts: each task's group gets the rewards of its next script entry."""

    def __init__(self, scripts: dict[str, list[list[float | None]]]):
        from codeagent.train.recipe import load_recipe

        self.recipe = load_recipe("grpo-tiny", ["model.base=unused", "trainer.num_generations=2"])
        self.scripts = {task: list(groups) for task, groups in scripts.items()}
        self.calls: list[list[str]] = []

    def __call__(self, prompts, trainer):
        self.calls.append(list(prompts))
        rewards = []
        for start in range(0, len(prompts), 2):
            rewards += self.scripts[prompts[start]].pop(0)
        return {"prompt_ids": [[1]] * len(prompts), "completion_ids": [[2]] * len(prompts),
                "logprobs": [[0.0]] * len(prompts), "env_mask": [[1]] * len(prompts),
                "trajectory_id": [f"{p}-{i}" for i, p in enumerate(prompts)], "reward_resolved": rewards}


def _task(name):
    return SimpleNamespace(instance_id=name)


def test_dynamic_sampling_refills_uniform_groups_with_new_groups_and_counts_them():
    """Batch: a (all 0, uniform) and b (1, 0). Round 1 replaces a by another task (c: again uniform), round 2 by
    the next (d: 1, 0). Groups with infrastructure failures only are not refilled; at the limit of rounds what
    is still uniform stays."""
    from codeagent.train.grpo.objectives import DynamicSampling

    scripted = _Scripted({"a": [[0.0, 0.0]], "b": [[1.0, 0.0]], "c": [[1.0, 1.0]], "d": [[0.0, 1.0]]})
    tasks = [_task(name) for name in "abcd"]
    refill = DynamicSampling(scripted, tasks, rounds=2, group_size=2, seed=0)
    refill.order = ["a", "b", "c", "d"]  # the seeded shuffle, made plain for the test
    records = []
    refill.on_record = records.append
    out = refill(["a", "a", "b", "b"], trainer=None)
    assert scripted.calls == [["a", "a", "b", "b"], ["c", "c"], ["d", "d"]]
    assert out["reward_resolved"] == [0.0, 1.0, 1.0, 0.0]
    assert out["trajectory_id"] == ["d-0", "d-1", "b-2", "b-3"]
    assert records == [{"event": "dynamic_sampling", "step": None, "groups": 2, "uniform_groups": 1, "rounds": 2,
                        "replaced_groups": 2, "extra_rollouts": 4, "uniform_groups_left": 0}]

    stuck = DynamicSampling(_Scripted({"a": [[0.0, 0.0]], "b": [[None, None]], "c": [[1.0, 1.0]]}),
                            tasks[:3], rounds=1, group_size=2)
    stuck.order = ["a", "b", "c"]
    out = stuck(["a", "a", "b", "b"], trainer=None)
    assert out["reward_resolved"] == [1.0, 1.0, None, None]
    assert stuck.history[0]["rounds"] == 1 and stuck.history[0]["uniform_groups_left"] == 1


def test_dynamic_sampling_is_refused_with_async_rollouts(tiny):
    from codeagent.train.grpo import trainer as grpo
    from codeagent.train.recipe import load_recipe

    run = load_recipe("grpo-tiny-async", [f"model.base={tiny}", "rollout.dynamic_sampling=2"])
    with pytest.raises(TrainError, match="dynamic_sampling"):
        grpo._objectives(run, object, None, [])
    with pytest.raises(TrainError, match="dynamic_sampling"):
        load_recipe("grpo-tiny", [f"model.base={tiny}", "rollout.dynamic_sampling=-1"])


def test_gra_step_rewards_averaged_not_summed():
    """The trajectory of test_gra_accumulates...: steps 0.75, 0.5, 0.5; averaged 1.75 / 3 whatever the length."""
    from codeagent.train.grpo import rewards
    from codeagent.train.recipe import load_recipe

    weights = load_recipe("grpo-tiny", ["model.base=unused", "rewards.steps=0.5", "rewards.steps_aggregate=mean",
                                        "rewards.step_signals=[well_formed, tool_ok, edited, tested]"]).rewards
    won = rewards.compute(edit_test_submit(), resolved=True, gold_patch=None, weights=weights)
    assert won["step_rewards"] == [0.75, 0.5, 0.5] and won["steps"] == pytest.approx(1.75 / 3, abs=1e-6)
    assert won["total"] == pytest.approx(1.0 + 0.5 * 1.75 / 3, abs=1e-6)
    lost = rewards.compute(edit_test_submit(), resolved=False, gold_patch=None, weights=weights)
    assert lost["steps"] == 0.0 and lost["steps_ungated"] == pytest.approx(1.75 / 3, abs=1e-6)


def test_gspo_and_cispo_reach_trl_and_take_a_step_with_leave_one_out(tiny, tmp_path):
    """GSPO (sequence-level importance ratio) and CISPO are TRL's own options, set under `trainer:`; a batch
    is scored with each, the leave-one-out baseline on top."""
    from codeagent.train.modeling import trl_args
    from codeagent.train.recipe import load_recipe

    for options in (["trainer.importance_sampling_level=sequence", "trainer.loss_type=grpo"],
                    ["trainer.loss_type=cispo", "trainer.epsilon_high=5.0"]):
        run = load_recipe("grpo-tiny", [f"model.base={tiny}", *options])
        args = trl_args(run, temperature=1.0)
        assert (args.importance_sampling_level, args.loss_type) in (("sequence", "grpo"), ("token", "cispo"))
        advantages = _advantages(tiny, tmp_path / options[0], [1.0, 0.0, 0.0, 0.0], *options,
                                 "trainer.scale_rewards=none", "rewards.baseline=leave_one_out")
        assert advantages == pytest.approx([1.0, -1 / 3, -1 / 3, -1 / 3], abs=1e-6)


@pytest.mark.parametrize("name", ["grpo-qwen7b", "grpo-qwen7b-8gpu"])
def test_the_7b_recipes_take_32_tasks_x_8_rollouts_per_optimizer_step(name):
    from codeagent.train.recipe import load_recipe

    run = load_recipe(name)
    processes = 1
    if run.distributed.accelerate_config:
        config = yaml.safe_load((ROOT / "train" / run.distributed.accelerate_config).read_text())
        processes = int(config["num_processes"])
    trainer = run.trainer
    per_step = trainer["per_device_train_batch_size"] * trainer["gradient_accumulation_steps"] * processes
    assert trainer["num_generations"] >= 8 and per_step // trainer["num_generations"] >= 32


def test_the_recipe_options_build_the_trainer_and_rollout_function(tiny, tmp_path):
    """What `codeagent train grpo` builds from the recipe: the leave-one-out trainer, the refilling rollouts."""
    from codeagent.train.grpo import trainer as grpo
    from codeagent.train.grpo.objectives import DynamicSampling
    from codeagent.train.recipe import load_recipe

    run = load_recipe("grpo-tiny", [f"model.base={tiny}", f"output_dir={tmp_path}", "rewards.baseline=leave_one_out",
                                    "rollout.dynamic_sampling=3", "trainer.num_generations=2",
                                    "trainer.per_device_train_batch_size=2"])
    trainer, _, rollouts, _ = grpo.build_trainer(run, tasks=[])
    assert type(trainer).__name__ == "LeaveOneOutTrainer"
    assert isinstance(trainer.rollout_func, DynamicSampling) and trainer.rollout_func.rollouts is rollouts
    assert (trainer.rollout_func.rounds, trainer.rollout_func.group_size) == (3, 2)
