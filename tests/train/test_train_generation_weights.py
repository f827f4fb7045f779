"""The rollout policy's weights under distributed training (train/grpo/rollouts.py `generation_weights`):
under DeepSpeed ZeRO-3 they are gathered once, around the whole generation batch (TRL's
unwrap_model_for_generation), so every forward pass is local to the rank; the setups whose forward
passes stay collective are refused with the knob named. No GPU and no deepspeed package here: a stand-in
accelerator state says "ZeRO-3, 2 processes" and a stand-in `deepspeed` module records the gather; the
model, the engine and the generation are real (the tiny offline model)."""

from __future__ import annotations

import sys
import threading
from types import ModuleType, SimpleNamespace

import pytest


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    import torch

    from codeagent.models.hf import HFModel
    from codeagent.train.tiny import build_tiny

    torch.set_num_threads(1)
    return HFModel.load(str(build_tiny(tmp_path_factory.mktemp("tiny-gather"), vocab_size=512)))


class StandInDeepSpeed:
    """`deepspeed.zero.GatheredParameters` that records when it is entered and left, and with what."""

    def __init__(self):
        self.gathered = threading.Event()
        self.entered: list[int] = []
        self.left = 0

    def module(self) -> ModuleType:
        outer = self
        module, zero = ModuleType("deepspeed"), ModuleType("deepspeed.zero")

        class GatheredParameters:
            def __init__(self, params, *args, **kwargs):
                self.params = list(params)

            def __enter__(self):
                outer.entered.append(len(self.params))
                outer.gathered.set()

            def __exit__(self, *exc):
                outer.gathered.clear()
                outer.left += 1

        zero.GatheredParameters = GatheredParameters
        module.zero = zero
        return module


def zero3_trainer(model, *, processes: int = 2, gather: bool = True, fsdp_version=None):
    """What generation_weights reads of a TRL trainer prepared by accelerate with DeepSpeed ZeRO-3 (no
    optimizer yet: TRL's hook removal then has nothing to do, as before the first training step)."""
    state = SimpleNamespace(deepspeed_plugin=None if fsdp_version else SimpleNamespace(zero_stage=3),
                            fsdp_plugin=SimpleNamespace(fsdp_version=fsdp_version) if fsdp_version else None)
    engine = SimpleNamespace(module=model, parameters=model.parameters)
    accelerator = SimpleNamespace(state=state, num_processes=processes, unwrap_model=lambda wrapped: wrapped.module)
    return SimpleNamespace(accelerator=accelerator, model=engine, model_wrapped=engine, use_vllm=False,
                           args=SimpleNamespace(ds3_gather_for_generation=gather, gradient_checkpointing_kwargs=None))


def rollouts(tmp_path):
    from codeagent.train.grpo.rollouts import Rollouts
    from codeagent.train.recipe import load_recipe

    recipe = load_recipe("grpo-tiny", ["model.base=unused", f"output_dir={tmp_path}"])
    return Rollouts(recipe, [], tokenizer=None, config=None, store=None)


def test_zero3_rollouts_generate_with_the_weights_gathered_once_for_the_whole_batch(tiny, tmp_path, monkeypatch):
    from codeagent.models.types import Sampling

    deepspeed = StandInDeepSpeed()
    monkeypatch.setitem(sys.modules, "deepspeed", deepspeed.module())
    model = tiny.model
    model.gradient_checkpointing_enable()
    forwards: list[bool] = []
    hook = model.register_forward_pre_hook(lambda module, args: forwards.append(deepspeed.gathered.is_set()))
    runner = rollouts(tmp_path)
    runner.tokenizer = tiny.tokenizer
    try:
        with runner.generation(zero3_trainer(model)) as policy:
            assert policy.model is model and not model.is_gradient_checkpointing  # unwrapped; checkpointing off
            replies = []
            threads = [threading.Thread(target=lambda i=i: replies.append(policy.complete(
                [{"role": "user", "content": f"fix bug {i}" * (i + 1)}], [], Sampling(temperature=0, max_tokens=3 + i))))
                for i in range(3)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        assert len(replies) == 3 and all(reply.token_ids for reply in replies)
    finally:
        hook.remove()
    assert deepspeed.entered == [len(list(model.parameters()))] and deepspeed.left == 1  # once, every weight
    assert forwards and all(forwards)  # every forward pass ran with the weights gathered
    assert model.is_gradient_checkpointing  # restored for training
    model.gradient_checkpointing_disable()


@pytest.mark.parametrize("trainer_options, knob", [
    (dict(gather=False), "ds3_gather_for_generation: true"),
    (dict(fsdp_version=1), "DeepSpeed ZeRO-3"),
    (dict(fsdp_version=2), "DeepSpeed ZeRO-3"),
])
def test_setups_whose_forward_passes_stay_collective_are_refused(tiny, tmp_path, trainer_options, knob):
    from codeagent.train import TrainError

    runner = rollouts(tmp_path)
    runner.tokenizer = tiny.tokenizer
    with pytest.raises(TrainError, match=knob):
        with runner.generation(zero3_trainer(tiny.model, **trainer_options)):
            pass
    with runner.generation(zero3_trainer(tiny.model, processes=1, **trainer_options)) as policy:
        assert policy.model is tiny.model  # one process: nothing to wait for
