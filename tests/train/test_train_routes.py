"""What a GRPO recipe may ask for, and what the dry run says about it (train/grpo/runnable.py, recipe_notes.py):
CISPO's cap, top-p only where both sides take logprobs the same way, averaged step rewards by default, the
dry run refusing what the run refuses (32B on 8 GPUs with a vLLM server), recipe comments generated from the
estimator, and the held-out evaluation spread over the ranks. CPU only."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from codeagent.train import TrainError

ROOT = Path(__file__).parent.resolve().parent.parent


def dry_run(*args: str) -> SimpleNamespace:
    """`codeagent train grpo --dry-run ARGS`, in process (click's runner): exit code, stdout, stderr."""
    from click.testing import CliRunner

    from codeagent.cli.train_commands import train_group

    result = CliRunner().invoke(train_group, ["grpo", "--dry-run", *args])
    return SimpleNamespace(returncode=result.exit_code, stdout=result.stdout, stderr=result.stderr)


def test_cispo_takes_epsilon_high_as_its_cap_and_a_dapo_sized_one_is_refused():
    """TRL clamps CISPO's per-token weight at epsilon_high itself: the DAPO value 0.28 every recipe ships
    would clip every token (on-policy ratio 1 included), so it is refused with the value to use."""
    from codeagent.train.recipe import load_recipe

    for name in ("grpo-tiny", "grpo-qwen7b", "grpo-qwen7b-8gpu"):
        with pytest.raises(TrainError, match="cap of each token's importance weight.*e.g. 5.0"):
            load_recipe(name, ["model.base=unused", "trainer.loss_type=cispo"])
    assert load_recipe("grpo-tiny", ["model.base=unused", "trainer.loss_type=cispo",
                                     "trainer.epsilon_high=5.0"]).trainer["epsilon_high"] == 5.0


def test_gated_step_rewards_are_averaged_by_default():
    """A run cannot earn more step reward by being longer unless the recipe asks for G-RA's sum."""
    from codeagent.train.grpo import rewards
    from codeagent.train.recipe import RewardsSection
    from tests.support.trajectories import edit_test_submit

    weights = RewardsSection(steps=1.0, step_signals=["well_formed", "tool_ok", "edited", "tested"])
    assert weights.steps_aggregate == "mean"
    won = rewards.compute(edit_test_submit(), resolved=True, gold_patch=None, weights=weights)
    assert won["steps"] == pytest.approx(sum(won["step_rewards"]) / len(won["step_rewards"]), abs=1e-6)
    assert won["steps"] <= 1.0 < sum(won["step_rewards"])
    summed = rewards.compute(edit_test_submit(), resolved=True, gold_patch=None,
                             weights=RewardsSection(steps=1.0, steps_aggregate="sum",
                                                    step_signals=["well_formed", "tool_ok", "edited", "tested"]))
    assert summed["steps"] == pytest.approx(sum(won["step_rewards"]), abs=1e-6)


def test_top_p_needs_the_same_logprob_convention_on_both_sides():
    """The transformers engine records log-softmax(logits / T) before top-p, what the trainer computes; vLLM's
    logprobs come after top-p, so top_p < 1 is refused on its routes and allowed on the transformers one."""
    import torch

    from codeagent.models.token_sampling import pick_token
    from codeagent.train.grpo import runnable
    from codeagent.train.recipe import load_recipe

    logits = torch.tensor([2.0, 1.5, 0.1, -1.0, -3.0])
    for seed in range(8):
        token, logprob = pick_token(logits, 0.7, 0.5, torch.Generator().manual_seed(seed))
        assert logprob == pytest.approx(float(torch.log_softmax(logits / 0.7, -1)[token]), abs=1e-6)
    assert runnable.top_p_convention(0.9, "transformers") is None and runnable.top_p_convention(None, "vllm") is None
    for route in ("vllm", "vllm serve"):
        assert "after top-p" in runnable.top_p_convention(0.9, route)
    served = load_recipe("grpo-tiny-async-served", ["model.base=unused", "rollout.top_p=0.9"])
    from codeagent.train.grpo import trainer as grpo

    with pytest.raises(TrainError, match="after top-p"):
        grpo.build_trainer(served, tasks=[])
    problems = runnable.problems(load_recipe("grpo-qwen7b", ["rollout.top_p=0.95"]), processes=1, strategy="single")
    assert any("after top-p" in problem for problem in problems)


def test_the_dry_run_refuses_32b_on_eight_gpus_with_a_vllm_server_and_says_why():
    """Memory alone fits (70 of 80 GiB), but synchronous GRPO refuses vLLM's server mode with several training
    processes: the dry run must not say "fits" for a run that would be refused at its first step. Colocated,
    the engine cannot hold the weights. The 7B recipes still fit."""
    base = ["-c", "grpo-qwen7b-8gpu", "model.base=Qwen/Qwen3-32B", "model.adapter=null"]
    served = dry_run(*base, "trainer.vllm_mode=server")
    assert served.returncode == 3, served.stdout + served.stderr
    assert "cannot run on 8 device(s), zero3" in served.stderr
    assert "vLLM server mode with 8 training processes is not supported" in served.stderr
    assert "fits" not in served.stderr.splitlines()
    colocated = dry_run(*base)
    assert colocated.returncode == 3 and "weights alone are 61.0 GiB" in colocated.stderr
    for name in ("grpo-qwen7b", "grpo-qwen7b-8gpu"):
        done = dry_run("-c", name)
        assert done.returncode == 0 and "fits" in done.stderr.splitlines(), done.stderr


def test_the_dry_run_refuses_what_each_route_refuses():
    from codeagent.train.grpo import runnable
    from codeagent.train.recipe import load_recipe

    def problems(*overrides, processes=8, strategy="zero3"):
        return runnable.problems(load_recipe("grpo-qwen7b-8gpu", list(overrides)), processes=processes,
                                 strategy=strategy)

    assert problems() == []
    assert "tensor_parallel_size > 1" in problems("trainer.vllm_tensor_parallel_size=2")[0]
    assert "sleep mode" in problems("trainer.vllm_enable_sleep_mode=true")[0]
    assert "dynamic_sampling runs in one training process" in problems("rollout.dynamic_sampling=2")[0]
    assert "ds3_gather_for_generation" in problems("rollout.generation=transformers",
                                                   "trainer.ds3_gather_for_generation=false")[0]
    assert "FSDP" in problems("rollout.generation=transformers", strategy="fsdp")[0]
    assert "asynchronous runs in one training process" in problems("rollout.asynchronous=true",
                                                                   "rollout.generation=transformers")[0]
    assert problems("trainer.vllm_mode=server", processes=1, strategy="single") == []


def test_the_gpu_recipes_memory_notes_are_the_estimators():
    """Each GPU recipe's leading comment holds the dry run's figures, generated (recipe_notes.py), and no other
    memory figure: the 8-GPU recipe once said ~73 GiB where the estimator said 47."""
    from codeagent.train import recipe_notes

    assert recipe_notes.outdated(ROOT / "train") == []
    for name in recipe_notes.NOTES:
        text = (ROOT / "train" / f"{name}.yaml").read_text()
        start, end = text.index(recipe_notes.BEGIN.split("{name}")[0]), text.index(recipe_notes.END)
        outside = text[:start] + text[end:]
        assert not re.search(r"~\s*\d+(\.\d+)?\s*(GiB|GB)", outside), name
        assert re.search(r"~\d+ of 80 GiB", text[start:end]), name


def test_the_held_out_evaluation_is_spread_over_the_ranks(monkeypatch):
    """Two ranks: each runs every other held-out run on its own engine, the main process gathers the outcomes
    and writes the one record; the other rank writes nothing and returns None."""
    import accelerate.utils

    from codeagent.train.grpo.heldout import HeldOutEvaluation
    from codeagent.train.grpo.rollouts import Rollout

    tasks = [SimpleNamespace(instance_id=name) for name in ("a", "b", "c")]
    ran: dict[int, list] = {0: [], 1: []}

    class Rollouts:
        recipe = SimpleNamespace(rollout=SimpleNamespace(workers=2))
        run_id = "r"

        def __init__(self, rank):
            self.rank = rank

        def generation(self, trainer):
            from contextlib import nullcontext

            return nullcontext("policy")

        def run_one(self, task, policy, group_id, index):
            ran[self.rank].append((task.instance_id, index))
            value = 1.0 if task.instance_id == "a" else 0.0
            return Rollout(task.instance_id, rewards={"resolved": value, "total": value})

    parts: dict[int, list] = {}

    def gather_on(rank):  # accelerate's gather_object as rank `rank` sees it: every rank's part, in rank order
        def gather(local):
            parts[rank] = local[0]
            return [parts.get(0, []), parts.get(1, [])]
        return gather

    written: list[dict] = []
    summaries = {}
    for rank in (1, 0):  # rank 1 first, so that rank 0's gather has both parts
        monkeypatch.setattr(accelerate.utils, "gather_object", gather_on(rank))
        evaluation = HeldOutEvaluation(Rollouts(rank), tasks, every=1, samples=2, write=written.append)
        evaluation.trainer = SimpleNamespace(accelerator=SimpleNamespace(num_processes=2, process_index=rank))
        summaries[rank] = evaluation.run(step=3)
    assert sorted(ran[0] + ran[1]) == [(t, i) for t in "abc" for i in range(2)] and len(ran[0]) == len(ran[1]) == 3
    assert summaries[1] is None and len(written) == 1
    assert summaries[0]["tasks"] == 3 and summaries[0]["pass@1"] == pytest.approx(1 / 3)
    assert summaries[0]["processes"] == 2 and written[0]["event"] == "held_out_eval"
