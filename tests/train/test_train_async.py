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
    from codeagent.train.grpo.buffer import Group
    from codeagent.train.grpo.rollouts import Rollout

    return Group(name, [Rollout(name, policy_version=version) for version in versions])


def test_the_buffer_drops_groups_staler_than_max_staleness():
    """A group is as old as its oldest member; the trainer takes fresh ones in order and counts the drops;
    the workers may not run further ahead than the capacity."""
    from codeagent.train.grpo.buffer import SampleBuffer

    buffer = SampleBuffer(capacity=3, max_staleness=1)
    buffer.publish(2)  # the trainer is at version 2
    assert all(buffer.reserve() for _ in range(3))
    assert not buffer.has_room()  # full: a producer waits
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


def test_a_group_starts_only_when_its_version_is_fresh_enough_for_the_step_that_takes_it():
    """max_staleness 0: nothing is sampled for a step before that step's weights are published (no group is
    made to be dropped); max_staleness 1: the workers run exactly one batch ahead."""
    from codeagent.train.grpo.buffer import SampleBuffer

    buffer = SampleBuffer(capacity=4, max_staleness=0, groups_per_batch=2)
    assert buffer.reserve() and buffer.reserve()  # step 0's two groups, sampled by version 0
    assert not buffer.has_room()  # the next group would be taken at step 1: it waits for version 1
    buffer.put(_group("a", 0, 0))
    buffer.put(_group("b", 0, 0))
    taken = buffer.take(2, version=0)
    assert len(taken.groups) == 2 and not taken.dropped and not buffer.has_room()
    buffer.publish(1)
    assert buffer.reserve() and buffer.reserve() and not buffer.has_room()

    ahead = SampleBuffer(capacity=8, max_staleness=1, groups_per_batch=2)
    assert all(ahead.reserve() for _ in range(4)) and not ahead.has_room()  # steps 0 and 1 from version 0
    ahead.publish(1)
    assert ahead.reserve() and ahead.reserve() and not ahead.has_room()  # step 2 from version 1
    resumed = SampleBuffer(capacity=8, max_staleness=0, groups_per_batch=2)
    resumed.start_at(5)  # resuming at step 5: version 5 samples step 5, and no further
    assert resumed.reserve() and resumed.reserve() and not resumed.has_room()


def test_behaviour_weights_truncate_or_mask_and_measure_the_mismatch():
    import torch

    from codeagent.train.grpo.offpolicy import behaviour_weights

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


def test_with_max_staleness_0_nothing_is_dropped_and_a_broken_weight_sync_is_an_error(tiny):
    """The producer, the buffer and the versions together, with scripted rollouts (no Docker), max_staleness 0
    and room for three batches: the workers sample step 0's groups with version 0 and wait; at step 1 without
    a publish the trainer refuses to go on (the sync broke: sampling the old policy would go unseen); once
    version 1 is published, step 1's groups are sampled by it and none is dropped (before, the workers ran
    ahead with version 0 and every such group was dropped)."""
    from types import SimpleNamespace

    import torch

    from codeagent.task import Task
    from codeagent.train.grpo.async_rollouts import AsyncRollouts
    from codeagent.train.grpo.rollouts import Rollout, Rollouts
    from codeagent.train.grpo.versions import PolicyVersions
    from codeagent.train.recipe import load_recipe
    from codeagent.train.sequences import TokenSequence

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
        assert producer.buffer.dropped_total == 0 and producer.history[-1]["dropped_stale_groups"] == 0
        assert [version for version, _ in seen[:4]] == [0, 0, 1, 1]
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

    from codeagent.train.grpo.offpolicy import trainer_class
    from codeagent.train.modeling import lora_config, trl_args
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

    from codeagent.train.grpo.offpolicy import trainer_class
    from codeagent.train.modeling import lora_config, trl_args
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

    from codeagent.train.grpo.versions import PolicyVersions

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
    from codeagent.train.grpo import trainer as grpo
    from codeagent.train.recipe import load_recipe

    run = load_recipe("grpo-tiny-async", [f"model.base={tiny}", "rollout.generation=vllm"])
    with pytest.raises(TrainError, match="versioned copies"):
        grpo._use_vllm(run)
    from codeagent.train.grpo.offpolicy import check_correction

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


def first_turn_tool_call(model_dir: Path, demos: Path, tasks: list) -> dict[str, float]:
    """{task: the policy's probability of opening its first turn with <tool_call>}, on the first prompt of a
    demonstration with the task's issue in place of the demonstrated one."""
    import torch

    from codeagent.models.hf import HFModel
    from codeagent.trajectory.store import TrajectoryStore

    policy = HFModel.load(str(model_dir))
    demo = next(iter(TrajectoryStore(demos).iter()))
    opening = policy.tokenizer.convert_tokens_to_ids("<tool_call>")
    found = {}
    for task in tasks:
        messages = [{**message, "content": str(message.get("content") or "").replace(
            demo.task["problem_statement"], task.problem_statement)} for message in demo.messages[:demo.steps[0].first_message]]
        with torch.no_grad():
            logits = policy.model(torch.tensor([policy.prompt_ids(messages, demo.tools)])).logits[0, -1]
        found[task.instance_id] = round(logits.softmax(-1)[opening].item(), 4)
    return found


@pytest.mark.timeout(1800)  # demonstrations, SFT and three async steps, each rollout a Docker run
def test_the_shipped_async_recipe_trains_sampled_tokens_with_versioned_rollouts_in_docker(tmp_path, no_leaks):
    """train/grpo-tiny-async.yaml as shipped (paths and the number of steps aside), from the start its chain makes
    (toy demonstrations, `train tiny --toy-store`, sft-tiny-toy, merged), on CPU with the Docker toy tasks.
    Every step trains tokens the policy sampled (from the random tiny model every run was masked: 0 tokens
    trained, mismatch_kl 0.0 over nothing) and the rewards of a group differ. The workers run one batch ahead
    (max_staleness 1): a later step trains groups of the version before, kept, with the gap between the two
    versions measured once the adapter has moved. Every trajectory records the version that sampled it."""
    import statistics

    import torch

    from codeagent.data.toy import toy_tasks
    from codeagent.train import sft
    from codeagent.train.grpo import trainer as grpo
    from codeagent.train.modeling import merge_adapter
    from codeagent.train.recipe import load_recipe
    from codeagent.train.toy import build_toy_model, record_demonstrations
    from codeagent.trajectory.store import TrajectoryStore

    torch.set_num_threads(1)
    demos = tmp_path / "demos"
    assert len(record_demonstrations(demos, tasks=toy_tasks(), workers=2)) == 4 * len(toy_tasks())
    base = build_toy_model(tmp_path / "tiny", demos, vocab_size=1024)
    adapter = sft.run(load_recipe("sft-tiny-toy", [f"model.base={base}", f"data.store={demos}",
                                                   f"output_dir={tmp_path / 'sft'}"]))
    merged = merge_adapter(adapter, tmp_path / "merged")
    # the policy opens the first turn of every task it will roll out on with a tool call (SFT-ed on the first
    # task alone it answered the others with bare JSON: every rollout a format error, nothing trained)
    opening = first_turn_tool_call(merged, demos, toy_tasks())
    assert min(opening.values()) > 0.5, opening

    out, rollouts_dir = tmp_path / "out", tmp_path / "rollouts"
    run = load_recipe("grpo-tiny-async", [f"model.base={merged}", f"output_dir={out}", f"rollout.store={rollouts_dir}",
                                          "trainer.max_steps=3"])
    assert (run.rollout.max_staleness, run.rollout.mask_exit_statuses != [], run.rollout.mask_truncated) == (1, True, True)
    grpo.run(run)

    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if r.get("event") == "async_step"]
    assert [r["step"] for r in steps] == [0, 1, 2], records
    for record in steps:
        assert record["trained_tokens"] > 0 and record["loss_tokens"] > 0, record  # the policy's own tokens
        assert record["masked"] < record["rollouts"] and record["infra_failures"] == 0, record
        assert record["staleness_max"] <= 1 and record["policy_versions"][0] >= record["step"] - 1, record
    assert steps[0]["policy_versions"] == [0] and steps[0]["mismatch_kl"] < 1e-4  # the sampler is the trainer
    assert any(r["reward_std"] > 0 for r in steps), steps  # rewards differ: something to learn
    assert sum(r["dropped_stale_groups"] for r in steps) == 0  # one batch ahead, never further
    for before, record in zip(steps, steps[1:]):
        if record["staleness_max"] == 1 and before["reward_std"] > 0:  # trained on the version before a real step
            assert record["mismatch_kl"] > 0, (before, record)
    corrections = [r for r in records if "off_policy/mismatch_kl" in r]
    assert len(corrections) == 3

    store = TrajectoryStore(rollouts_dir)
    trajectories = {t.id: t for t in (store.load(i) for i in store.ids())}
    trained = json.loads((out / "training_data.json").read_text())
    assert len(trained["rollout_ids"]) == 24
    versions = [trajectories[i].policy_version for i in trained["rollout_ids"]]
    assert versions[:8] == [0] * 8 and all(v in (step - 1, step) for step, v in zip([0] * 8 + [1] * 8 + [2] * 8, versions))
    assert statistics.fmean(t.rewards.get("resolved", 0.0) for t in trajectories.values()) > 0
