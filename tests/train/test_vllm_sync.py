"""Trainer -> vLLM weights: TRL's merged sync, the one mode (`rollout.vllm_weights: adapter` was removed),
and when it runs. vLLM is not installed here and there is no GPU: a stand-in engine records what it is
given."""

from __future__ import annotations

import sys
import threading
from types import ModuleType, SimpleNamespace

import pytest


class StandInLLM:
    """Records every generate call; answers 3 tokens per prompt. Like vLLM, a prompt not shorter than
    max_model_len fails the whole call."""

    def __init__(self, max_model_len: int | None = None):
        self.calls: list[dict] = []
        self.max_model_len = max_model_len

    def generate(self, prompts, sampling_params, use_tqdm):
        for prompt in prompts:
            if self.max_model_len and len(prompt["prompt_token_ids"]) >= self.max_model_len:
                raise ValueError(f"The decoder prompt (length {len(prompt['prompt_token_ids'])}) is longer than "
                                 f"the maximum model length of {self.max_model_len}")
        self.calls.append({"prompts": len(prompts), "max_tokens": [p.max_tokens for p in sampling_params]})
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
    from codeagent.train.grpo.rollouts import Rollouts
    from codeagent.train.recipe import load_recipe

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
    from codeagent.train.grpo.trainer import _use_vllm
    from codeagent.train.recipe import load_recipe

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the message is for machines without one (or without vllm)")
    recipe = load_recipe("grpo-tiny", ["model.base=unused", f"output_dir={tmp_path}", "rollout.generation=vllm"])
    with pytest.raises(TrainError) as raised:
        _use_vllm(recipe)
    assert "pip install 'codeagent[vllm]'" in str(raised.value) and "(pip install vllm)" not in str(raised.value)


def stand_in_vllm_module() -> ModuleType:
    module = ModuleType("vllm")
    module.SamplingParams = lambda **kwargs: SimpleNamespace(**kwargs)
    return module


def vllm_trainer(llm, device=None, max_model_length=None):
    vllm = SimpleNamespace(mode="colocate", llm=llm, tensor_parallel_size=1, enable_sleep_mode=False,
                           max_model_length=max_model_length)
    return SimpleNamespace(use_vllm=True, vllm_generation=vllm,
                           accelerator=SimpleNamespace(num_processes=2, process_index=1, device=device))


def test_an_over_long_prompt_fails_its_own_turn_not_its_batchs(monkeypatch):
    """vLLM refuses a whole generate call when one prompt is not shorter than max_model_len: the
    generator checks each turn first, fails only that one (ContextWindowExceeded, which the agent loop
    answers by eliding the conversation) and cuts the others' limits to the room left."""
    from codeagent.models.batching import Request
    from codeagent.models.errors import ContextWindowExceeded
    from codeagent.train.grpo.generation import VLLMGenerator

    monkeypatch.setitem(sys.modules, "vllm", stand_in_vllm_module())
    llm = StandInLLM(max_model_len=10)
    generator = VLLMGenerator(vllm_trainer(llm, max_model_length=10))
    requests = [Request(list(range(length)), 20, 1.0, None, 1, {99}) for length in (3, 12, 10, 6)]
    generator.run_batch(requests)
    assert llm.calls == [{"prompts": 2, "max_tokens": [7, 4]}]
    assert [request.ids for request in requests] == [[4, 5, 6], [], [], [4, 5, 6][:4]]
    for request in requests[1:3]:
        assert isinstance(request.error, ContextWindowExceeded) and "max_model_len is 10" in str(request.error)
    assert requests[0].error is None and requests[3].error is None


def test_the_policy_knows_vllms_context_length_and_the_engine_thread_uses_the_ranks_gpu(tmp_path, monkeypatch):
    """torch's current CUDA device is per thread: the vLLM worker thread sets the rank's own before its
    first call (else ranks >= 1 make contexts on GPU 0). No GPU here: set_device is recorded."""
    import torch

    from codeagent.train.grpo.rollouts import Rollouts
    from codeagent.train.recipe import load_recipe

    devices = []
    monkeypatch.setattr(torch.cuda, "set_device",
                        lambda device: devices.append((str(device), threading.current_thread().name)))
    engine = SimpleNamespace(model_config=SimpleNamespace(max_model_len=64))
    llm = StandInLLM(max_model_len=64)
    llm.llm_engine = engine  # what vLLM derived from the model (TRL's vllm_max_model_length unset)
    trainer = vllm_trainer(llm, device=torch.device("cuda", 1))
    tokenizer = SimpleNamespace(chat_template="x", eos_token_id=2, eos_token="</s>")
    runner = Rollouts(load_recipe("grpo-tiny", ["model.base=unused", f"output_dir={tmp_path}"]), [],
                      tokenizer=tokenizer, config=None, store=None)
    policy = runner.policy(trainer, model=torch.nn.Linear(1, 1))
    monkeypatch.setitem(sys.modules, "vllm", stand_in_vllm_module())  # only now: libraries probe for vllm
    try:
        assert policy.context_tokens == 64
        assert policy.generator.generate([1, 2], max_new_tokens=3, temperature=1.0, top_p=None, seed=1,
                                         stop_ids={99}) == ([4, 5, 6], [-0.25] * 3, False)
    finally:
        policy.close()
    assert devices == [("cuda:1", "vllm-engine")]
