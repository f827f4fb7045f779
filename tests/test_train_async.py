"""Async GRPO: versioned rollouts, the sample buffer's max_staleness, the off-policy correction, and the
tiny async recipe trained on CPU through the agent loop in Docker (train/grpo-tiny-async.yaml)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from codeagent.train import TrainError


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    import torch

    from codeagent.train.tiny import build_tiny

    torch.set_num_threads(1)
    return build_tiny(tmp_path_factory.mktemp("tiny-model"), vocab_size=512)


def _group(name: str, *versions: int):
    from codeagent.train.buffer import Group
    from codeagent.train.rollouts import Rollout

    return Group(name, [Rollout(name, policy_version=version) for version in versions])


def test_the_buffer_drops_groups_staler_than_max_staleness():
    """A group is as old as its oldest member; the trainer takes fresh ones in order and counts the drops;
    the workers may not run further ahead than the capacity."""
    from codeagent.train.buffer import SampleBuffer

    buffer = SampleBuffer(capacity=3, max_staleness=1)
    assert all(buffer.reserve() for _ in range(3))
    assert not buffer.reserve(stop=lambda: True)  # full: a producer waits (here told to stop)
    for group in (_group("a", 0, 0), _group("b", 2, 0), _group("c", 2, 1)):
        buffer.put(group)
    taken = buffer.take(1, version=2)
    assert [g.instance_id for g in taken.groups] == ["c"] and taken.staleness == [1]
    assert [g.instance_id for g in taken.dropped] == ["a", "b"] and buffer.dropped_total == 2
    assert buffer.reserve() and len(buffer) == 0  # room again

    def dead():
        raise TrainError("the rollout workers stopped")

    with pytest.raises(TrainError, match="workers stopped"):
        buffer.take(1, version=2, alive=dead)


def test_behaviour_weights_truncate_or_mask_and_measure_the_mismatch():
    import torch

    from codeagent.train.offpolicy import behaviour_weights

    behaviour = torch.tensor([[-1.0, -1.0, -1.0, -1.0, -5.0]])
    proximal = torch.tensor([[-1.0, 0.0, -2.0, -1.1, 3.0]])  # ratios 1, e, 1/e, e^-0.1; the last is padding
    mask = torch.tensor([[1, 1, 1, 1, 0]])
    ratios = [1.0, math.e, math.exp(-1), math.exp(-0.1)]
    weights, dropped, stats = behaviour_weights(proximal, behaviour, mask, mode="token_truncate", cap=2.0)
    assert weights[0].tolist() == pytest.approx([1.0, 2.0, math.exp(-1), math.exp(-0.1), 0.0])
    assert stats["is_masked_fraction"] == pytest.approx(0.25) and stats["tokens"] == stats["loss_tokens"] == 4
    assert not dropped.any()  # truncated tokens stay in the loss
    expected_kl = sum(r - 1 - math.log(r) for r in ratios) / 4
    assert stats["mismatch_kl"] == pytest.approx(expected_kl)
    weights, dropped, stats = behaviour_weights(proximal, behaviour, mask, mode="token_mask", cap=2.0)
    assert weights[0].tolist() == pytest.approx([1.0, 0.0, 0.0, math.exp(-0.1), 0.0])
    assert stats["is_masked_fraction"] == pytest.approx(0.5) and stats["loss_tokens"] == 2
    assert dropped[0].tolist() == [False, True, True, False, False]  # masked tokens leave the loss's normaliser
    weights, _, stats = behaviour_weights(behaviour, behaviour, mask, mode="none")
    assert weights[0].tolist() == [1.0, 1.0, 1.0, 1.0, 0.0] and stats["mismatch_kl"] == 0.0


def test_workers_run_ahead_and_a_broken_weight_sync_is_an_error(tiny):
    """The producer, the buffer and the versions together, with scripted rollouts (no Docker): the workers
    fill the buffer ahead with version 0; at step 1 without a publish the trainer refuses to go on (the
    sync broke: sampling the old policy would go unseen); once published, the version-0 groups are dropped
    and what is handed to TRL was sampled by version 1."""
    from types import SimpleNamespace

    import torch

    from codeagent.task import Task
    from codeagent.train.async_rollouts import AsyncRollouts
    from codeagent.train.recipe import load_recipe
    from codeagent.train.rollouts import Rollout, Rollouts
    from codeagent.train.sequences import TokenSequence
    from codeagent.train.versions import PolicyVersions

    run = load_recipe("grpo-tiny-async", [f"model.base={tiny}", "trainer.num_generations=2",
                                          "trainer.per_device_train_batch_size=2", "rollout.max_staleness=0",
                                          "rollout.buffer_batches=3", "rollout.workers=2"])
    rollouts = Rollouts(run, [], tokenizer=SimpleNamespace(eos_token_id=2), config=None, store=None)
    task = Task(instance_id="t1", repo="/nowhere", problem_statement="fix")
    seen = []

    def run_one(task, policy, group_id, index, pool=None, store=None):
        seen.append((store.version, policy))
        return Rollout(task.instance_id, trajectory_id=f"{group_id}-{index}", rewards={"resolved": 0.0, "total": 0.0},
                       sequence=TokenSequence([1], [5], [1], [-0.5]))

    rollouts.run_one, rollouts._prepare_environments = run_one, lambda tasks: None
    producer = AsyncRollouts(rollouts, [task])
    producer.versions = PolicyVersions(lambda model: ("policy", id(model)))
    trainer = SimpleNamespace(state=SimpleNamespace(global_step=0), model=torch.nn.Linear(1, 1))
    try:
        assert producer(["t1", "t1"], trainer)["policy_version"] == [0, 0]
        trainer.state.global_step = 1
        with pytest.raises(TrainError, match="never published"):
            producer(["t1", "t1"], trainer)
        producer.publish(trainer.model, 1)
        output = producer(["t1", "t1"], trainer)
        assert output["policy_version"] == [1, 1] and output["completion_ids"] == [[5], [5]]
        record = producer.history[-1]
        assert record["dropped_stale_groups"] >= 1 and record["dropped_versions"] == [0]
        assert all(version in (0, 1) for version, _ in seen)
    finally:
        producer.close()


@pytest.mark.parametrize("mode", ["token_mask", "token_truncate"])
def test_the_loss_weighs_tokens_by_the_logprobs_recorded_at_sampling(tiny, tmp_path, mode):
    """A real GRPO step of the async trainer on scripted samples whose recorded (behaviour) logprobs say the
    sampler gave every token probability 1: the trainer's ratio to it is far below 1/cap on every token,
    so token_mask leaves them all out of the loss (the adapter does not move) while token_truncate keeps
    them, weighted (it moves); both measure the mismatch."""
    import os

    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from codeagent.train.modeling import lora_config, trl_args
    from codeagent.train.offpolicy import trainer_class
    from codeagent.train.recipe import load_recipe

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    tokenizer = AutoTokenizer.from_pretrained(tiny)
    prompt = tokenizer("<|im_start|>user\nFix it<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
    good = tokenizer("<tool_call>submit</tool_call>", add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    bad = tokenizer("No.", add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]

    def rollout(prompts, trainer):
        completions = [good if i % 2 == 0 else bad for i in range(len(prompts))]
        return {"prompt_ids": [prompt] * len(prompts), "completion_ids": completions,
                "logprobs": [[0.0] * len(c) for c in completions], "is_good": [i % 2 == 0 for i in range(len(prompts))]}

    def reward(prompts, completions, is_good, **_):
        return [1.0 if flag else 0.0 for flag in is_good]

    recipe_ = load_recipe("grpo-tiny-async", [f"model.base={tiny}", f"output_dir={tmp_path}", "trainer.max_steps=1",
                                              "trainer.num_generations=2", "trainer.per_device_train_batch_size=2"])
    trainer = trainer_class()(model=AutoModelForCausalLM.from_pretrained(tiny), reward_funcs=[reward],
                              args=trl_args(recipe_, temperature=1.0), processing_class=tokenizer,
                              train_dataset=Dataset.from_list([{"prompt": "fix"}] * 4), rollout_func=rollout,
                              peft_config=lora_config(recipe_))
    stats = []
    trainer.off_policy_mode, trainer.off_policy_cap, trainer.on_batch = mode, 2.0, stats.append
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    trainer.train()
    moved = any(not torch.equal(p, before[n]) for n, p in trainer.model.named_parameters() if p.requires_grad)
    assert len(stats) == 1 and stats[0]["tokens"] == len(good) + len(bad)
    assert stats[0]["mismatch_kl"] > 1.0 and stats[0]["is_ratio_mean"] < 0.5
    if mode == "token_mask":
        assert stats[0]["is_masked_fraction"] == 1.0 and not moved
    else:
        assert stats[0]["is_masked_fraction"] == 0.0 and moved


def test_a_sampler_stuck_on_the_initial_policy_shows_in_mismatch_kl(tiny, tmp_path):
    """The bug class of a weight sync that never arrives: every batch's logprobs come from the initial policy
    while the trainer moves on. mismatch_kl is ~0 at the first step and grows with every step after."""
    import os

    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from codeagent.train.modeling import lora_config, trl_args
    from codeagent.train.offpolicy import trainer_class
    from codeagent.train.recipe import load_recipe

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    tokenizer = AutoTokenizer.from_pretrained(tiny)
    prompt = tokenizer("<|im_start|>user\nFix it<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
    good = tokenizer("<tool_call>submit</tool_call>", add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    bad = tokenizer("No.", add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    initial = AutoModelForCausalLM.from_pretrained(tiny)

    def logprobs(completion):  # the initial policy's, at temperature 1 (a LoRA adapter starts as a no-op)
        ids = torch.tensor([prompt + completion])
        with torch.no_grad():
            logp = torch.log_softmax(initial(input_ids=ids).logits[0, len(prompt) - 1:-1].float(), -1)
        return logp[torch.arange(len(completion)), torch.tensor(completion)].tolist()

    stale = {tuple(good): logprobs(good), tuple(bad): logprobs(bad)}

    def rollout(prompts, trainer):
        completions = [good if i % 2 == 0 else bad for i in range(len(prompts))]
        return {"prompt_ids": [prompt] * len(prompts), "completion_ids": completions,
                "logprobs": [stale[tuple(c)] for c in completions], "is_good": [i % 2 == 0 for i in range(len(prompts))]}

    def reward(prompts, completions, is_good, **_):
        return [1.0 if flag else 0.0 for flag in is_good]

    recipe_ = load_recipe("grpo-tiny-async", [f"model.base={tiny}", f"output_dir={tmp_path}", "trainer.max_steps=3",
                                              "trainer.num_generations=2", "trainer.per_device_train_batch_size=2"])
    trainer = trainer_class()(model=AutoModelForCausalLM.from_pretrained(tiny), reward_funcs=[reward],
                              args=trl_args(recipe_, temperature=1.0), processing_class=tokenizer,
                              train_dataset=Dataset.from_list([{"prompt": "fix"}] * 6), rollout_func=rollout,
                              peft_config=lora_config(recipe_))
    stats = []
    trainer.off_policy_mode, trainer.on_batch = "none", stats.append
    trainer.train()
    kl = [s["mismatch_kl"] for s in stats]
    assert len(kl) == 3 and kl[0] < 1e-6 < kl[1] < kl[2], kl


def test_a_rollout_samples_from_the_version_it_leased():
    """Publishing a new version does not touch the copy a running rollout samples from; a copy nobody uses
    any more is closed and its weights reused, overwritten with the trained tensors only."""
    import torch

    from codeagent.train.versions import PolicyVersions

    class Policy:
        def __init__(self, model):
            self.model, self.closed = model, False

        def close(self):
            self.closed = True

    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2))
    model[0].requires_grad_(False)  # the frozen base; model[1] is what training changes
    versions = PolicyVersions(Policy)
    versions.publish(model, 0)
    with versions.lease() as (policy0, version):
        assert version == 0
        with torch.no_grad():
            model[1].weight.add_(1.0)
        versions.publish(model, 1)
        assert not torch.equal(policy0.model[1].weight, model[1].weight) and not policy0.closed
        with versions.lease() as (policy1, version1):
            assert version1 == 1 and torch.equal(policy1.model[1].weight, model[1].weight)
    assert policy0.closed and not policy1.closed and versions.published == [0, 1]
    with torch.no_grad():
        model[1].weight.add_(1.0)
    versions.publish(model, 2)  # into the retired copy of version 0
    with versions.lease() as (policy2, version2):
        assert version2 == 2 and policy2.model is policy0.model
        assert torch.equal(policy2.model[1].weight, model[1].weight)
    versions.close()
    assert policy1.closed and policy2.closed


def test_async_mode_refuses_what_it_cannot_do(tiny):
    from codeagent.train import grpo
    from codeagent.train.recipe import load_recipe

    run = load_recipe("grpo-tiny-async", [f"model.base={tiny}", "rollout.generation=vllm"])
    with pytest.raises(TrainError, match="versioned copies"):
        grpo._use_vllm(run)
    from codeagent.train.offpolicy import check_correction

    assert "loss_type=vespo" in check_correction("vespo", "token_truncate")  # every path: test_train_offpolicy.py
    with pytest.raises(TrainError, match="max_staleness"):
        load_recipe("grpo-tiny-async", [f"model.base={tiny}", "rollout.max_staleness=-1"])


def test_objective_options_reach_trl_as_recipe_options(tiny):
    """Dr.GRPO (DeepSWE's objective): no std scaling of the rewards and the dr_grpo loss, set in the recipe."""
    from codeagent.train.modeling import trl_args
    from codeagent.train.recipe import load_recipe

    run = load_recipe("grpo-tiny-async", [f"model.base={tiny}", "trainer.scale_rewards=none",
                                          "trainer.loss_type=dr_grpo"])
    args = trl_args(run, temperature=1.0)
    assert args.scale_rewards == "none" and args.loss_type == "dr_grpo"


def test_async_tiny_recipe_trains_with_versioned_rollouts_in_docker(tiny, tmp_path, no_leaks):
    """train/grpo-tiny-async.yaml on CPU with the Docker toy tasks. One worker runs the rollouts in order and
    two batches may be started ahead, so the second group starts while the trainer is still on version 0;
    with max_staleness 0 it is dropped at step 1, and what step 1 trains was sampled by version 1. Every
    rollout's trajectory records its version; metrics.jsonl has a record per step; at step 0 the sampler is
    the trainer, so the mismatch the loss measures is ~0 (the recorded logprobs are the trainer's)."""
    from codeagent.train import grpo
    from codeagent.train.recipe import load_recipe
    from codeagent.trajectory.store import TrajectoryStore

    out, rollouts_dir = tmp_path / "out", tmp_path / "rollouts"
    run = load_recipe("grpo-tiny-async", [
        f"model.base={tiny}", f"output_dir={out}", "data.tasks=toy:2", f"rollout.store={rollouts_dir}",
        "trainer.num_generations=2", "trainer.per_device_train_batch_size=2", "trainer.max_steps=2",
        "rollout.workers=1", "rollout.max_staleness=0", "rollout.buffer_batches=2", "rollout.max_tokens=16",
        "rollout.set={limits.max_steps: 2}",
        # a random model's runs hit limits: keep them in the loss, so there are tokens to measure
        "rollout.mask_truncated=false", "rollout.mask_exit_statuses=[]"])
    adapter = grpo.run(run)
    assert (adapter / "adapter_model.safetensors").is_file()

    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if r.get("event") == "async_step"]
    assert [r["step"] for r in steps] == [0, 1], records
    first, second = steps
    assert first["policy_versions"] == [0] and first["staleness_max"] == 0 and first["dropped_stale_groups"] == 0
    assert second["policy_versions"] == [1] and second["dropped_stale_groups"] >= 1
    assert second["dropped_versions"] == [0] and second["dropped_stale_samples"] == 2 * second["dropped_stale_groups"]
    for record in steps:
        for key in ("reward_mean", "reward_std", "uniform_groups", "infra_failures", "is_masked_fraction"):
            assert key in record, key
        assert record["trained_tokens"] > 0 and record["mismatch_kl"] >= 0.0
    assert first["mismatch_kl"] < 1e-4 and first["is_masked_fraction"] == 0.0, first
    trl_logs = [r for r in records if "off_policy/mismatch_kl" in r]
    assert len(trl_logs) == 2

    store = TrajectoryStore(rollouts_dir)
    trajectories = [store.load(i) for i in store.ids()]
    assert len(trajectories) >= 6 and all(t.policy_version in (0, 1) for t in trajectories)
    trained = json.loads((out / "training_data.json").read_text())
    assert len(trained["rollout_ids"]) == 4
    by_id = {t.id: t for t in trajectories}
    assert [by_id[i].policy_version for i in trained["rollout_ids"]] == [0, 0, 1, 1]
    assert trained["async"]["published_versions"][:2] == [0, 1] and trained["async"]["dropped_stale_groups"] >= 1
