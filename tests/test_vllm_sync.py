"""Trainer -> vLLM weights: TRL's merged sync, the one mode (`rollout.vllm_weights: adapter` was removed),
and when it runs. vLLM is not installed here and there is no GPU: a stand-in engine records what it is
given."""

from __future__ import annotations

from types import SimpleNamespace

import pytest


class StandInLLM:
    """Records every generate call; answers 3 tokens per prompt."""

    def __init__(self):
        self.calls: list[dict] = []

    def generate(self, prompts, sampling_params, use_tqdm):
        self.calls.append({"prompts": len(prompts)})
        sample = SimpleNamespace(token_ids=[4, 5, 6], logprobs=[{t: SimpleNamespace(logprob=-0.25)} for t in (4, 5, 6)])
        return [SimpleNamespace(outputs=[sample]) for _ in prompts]


def test_the_removed_adapter_weight_sync_is_refused_naming_the_mode_that_exists(tmp_path):
    """TRL 1.16 builds its vLLM engine without LoRA (trl/generation/vllm_generation.py: no enable_lora), so
    hot-loading the adapter could never run: the recipe says so and names `merged`."""
    from codeagent.train import TrainError
    from codeagent.train.recipe import load_recipe

    base = ["model.base=unused", f"output_dir={tmp_path}", "rollout.generation=vllm"]
    with pytest.raises(TrainError, match=r"rollout\.vllm_weights: .*'adapter'.*the one that exists is 'merged'"):
        load_recipe("grpo-tiny", [*base, "rollout.vllm_weights=adapter"])
    assert load_recipe("grpo-tiny", [*base, "rollout.vllm_weights=merged"]).rollout.vllm_weights == "merged"


def test_held_out_evaluation_after_an_optimizer_step_generates_with_that_steps_weights(tmp_path):
    """TRL syncs vLLM before the rollout function at a new step; the held-out evaluation runs after the
    optimizer step, outside it: the policy's generation context syncs then, once per step, never twice."""
    from codeagent.train.recipe import load_recipe
    from codeagent.train.rollouts import Rollouts

    syncs = []
    vllm = SimpleNamespace(mode="colocate", llm=StandInLLM(), tensor_parallel_size=1, enable_sleep_mode=False,
                           sync_weights=lambda: syncs.append(trainer.state.global_step))
    trainer = SimpleNamespace(use_vllm=True, vllm_generation=vllm, state=SimpleNamespace(global_step=1),
                              _last_loaded_step=1, accelerator=SimpleNamespace(num_processes=1))
    tokenizer = SimpleNamespace(chat_template="x", eos_token_id=2, eos_token="</s>")
    runner = Rollouts(load_recipe("grpo-tiny", ["model.base=unused", f"output_dir={tmp_path}"]), [], tokenizer=tokenizer,
                      config=None, store=None)
    runner.policy = lambda trainer, model=None: SimpleNamespace(close=lambda: None)
    with runner.generation(trainer):  # TRL synced step 1 before the rollouts: nothing to do
        pass
    trainer.state.global_step = 2  # the optimizer stepped; the evaluation callback runs now
    for _ in range(2):
        with runner.generation(trainer):
            pass
    assert syncs == [2] and trainer._last_loaded_step == 2  # so TRL's own check skips it at the next rollouts


def test_asking_for_vllm_where_it_cannot_run_names_the_extra_whose_pins_agree(tmp_path):
    """`pip install vllm` takes a release that downgrades transformers below the project's range; the
    message names the `vllm` extra instead."""
    import torch

    from codeagent.train import TrainError
    from codeagent.train.grpo import _use_vllm
    from codeagent.train.recipe import load_recipe

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the message is for machines without one (or without vllm)")
    recipe = load_recipe("grpo-tiny", ["model.base=unused", f"output_dir={tmp_path}", "rollout.generation=vllm"])
    with pytest.raises(TrainError) as raised:
        _use_vllm(recipe)
    assert "pip install 'codeagent[vllm]'" in str(raised.value) and "(pip install vllm)" not in str(raised.value)
