"""The adapter saved under DeepSpeed ZeRO-3 (train/modeling.py save_adapter): every rank holds only a shard
of each LoRA tensor, so the save gathers them first. Two ways: real DeepSpeed (its CPU accelerator, one
process, gloo), when the package is installed (the `deepspeed` extra, in the lock and the set-up: a source
build, CPU ops only); and always, a stand-in of ZeRO-3's partitioned parameters (each parameter's data
emptied, `deepspeed.zero.GatheredParameters` putting it back while gathered) around the real PEFT model. And
the model loaded sharded under ZeRO-3 (the TRL config made first), with real DeepSpeed."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from types import ModuleType, SimpleNamespace

import pytest


def lora_model(path):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    # init_lora_weights=False: lora_B random, not zeros, so that an emptied or zeroed tensor shows
    return get_peft_model(AutoModelForCausalLM.from_pretrained(str(path)),
                          LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False))


def saved_tensors(adapter) -> dict:
    from safetensors.torch import load_file

    return load_file(str(adapter / "adapter_model.safetensors"))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from codeagent.train.tiny import build_tiny

    return build_tiny(tmp_path_factory.mktemp("tiny-zero3"), vocab_size=512)


def zero3_accelerator():
    """What TRL's DistributedBackend and save_adapter read of an accelerator prepared with ZeRO-3."""
    state = SimpleNamespace(deepspeed_plugin=SimpleNamespace(zero_stage=3), fsdp_plugin=None)
    return SimpleNamespace(state=state, num_processes=1, is_main_process=True,
                           unwrap_model=lambda wrapped: getattr(wrapped, "module", wrapped))


def test_the_adapter_saved_under_a_stand_in_zero3_holds_the_whole_tensors(tiny, tmp_path, monkeypatch):
    import torch
    from transformers import AutoTokenizer

    from codeagent.train.modeling import save_adapter
    from codeagent.train.recipe import load_recipe

    model = lora_model(tiny)
    whole = {name: param.data.clone() for name, param in model.named_parameters()}
    for param in model.parameters():  # partitioned: this rank's shard of a 1-rank world is still "elsewhere"
        param.data = torch.empty(0, dtype=param.dtype)
    named = {id(param): name for name, param in model.named_parameters()}
    zero = ModuleType("deepspeed.zero")

    class GatheredParameters:
        def __init__(self, params, *args, **kwargs):
            self.params = list(params)

        def __enter__(self):
            for param in self.params:
                param.data = whole[named[id(param)]].clone()

        def __exit__(self, *exc):
            for param in self.params:
                param.data = torch.empty(0, dtype=param.dtype)

    zero.GatheredParameters = GatheredParameters
    monkeypatch.setitem(sys.modules, "deepspeed", SimpleNamespace(zero=zero))
    recipe = load_recipe("grpo-tiny", [f"model.base={tiny}", f"output_dir={tmp_path}"])
    trainer = SimpleNamespace(accelerator=zero3_accelerator(), model=SimpleNamespace(module=model))
    adapter = save_adapter(trainer, AutoTokenizer.from_pretrained(str(tiny)), recipe, {}, {})
    saved = saved_tensors(adapter)
    lora = {name: tensor for name, tensor in whole.items() if "lora_" in name}
    assert len(saved) == len(lora) > 0
    for name, tensor in saved.items():
        original = lora[name.replace(".weight", ".default.weight")]
        assert tensor.numel() > 0 and torch.equal(tensor, original)
    assert all(param.numel() == 0 for param in model.parameters())  # partitioned again after the save


SCRIPT = """
import sys, torch, deepspeed
from types import SimpleNamespace
from transformers import AutoTokenizer
from codeagent.train.modeling import save_adapter
from codeagent.train.recipe import load_recipe
from tests.train.test_train_zero3_save import lora_model, saved_tensors, zero3_accelerator

tiny, out = sys.argv[1], sys.argv[2]
deepspeed.init_distributed(dist_backend="gloo")
model = lora_model(tiny)
whole = {name: param.detach().clone() for name, param in model.named_parameters() if "lora_" in name}
config = {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3},
          "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "torch_adam": True}}}
engine, *_ = deepspeed.initialize(model=model, config=config,
                                  model_parameters=[p for p in model.parameters() if p.requires_grad])
shards = [param.numel() for name, param in engine.module.named_parameters() if "lora_" in name]
assert shards and not any(shards), shards  # ZeRO-3 partitioned the LoRA tensors away from the module
recipe = load_recipe("grpo-tiny", [f"model.base={tiny}", f"output_dir={out}"])
trainer = SimpleNamespace(accelerator=zero3_accelerator(), model=engine)
saved = saved_tensors(save_adapter(trainer, AutoTokenizer.from_pretrained(tiny), recipe, {}, {}))
assert len(saved) == len(whole), (len(saved), len(whole))
for name, tensor in saved.items():
    assert tensor.numel() > 0 and torch.equal(tensor, whole[name.replace(".weight", ".default.weight")]), name
print("saved", len(saved), "tensors,", sum(t.numel() for t in saved.values()), "values")
"""


@pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="deepspeed is not installed")
@pytest.mark.timeout(1500)  # ~1.5 min on a quiet 2-core box; 12 min measured on a loaded one
def test_the_adapter_saved_under_real_deepspeed_zero3_on_cpu_is_not_empty(tiny, tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29531",
           "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT), str(tiny), str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=1400)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "saved" in done.stdout


SHARDED_LOAD = """
import sys
from codeagent.train.grpo import trainer as grpo
from codeagent.train.recipe import load_recipe

tiny, out = sys.argv[1], sys.argv[2]
recipe = load_recipe("grpo-tiny", [f"model.base={tiny}", f"output_dir={out}", "trainer.num_generations=2",
                                   "trainer.per_device_train_batch_size=2"])
trainer, *_ = grpo.build_trainer(recipe, tasks=[])
model = trainer.accelerator.unwrap_model(trainer.model)
base = [param for name, param in model.named_parameters() if "lora_" not in name]
partitioned = [param for param in base if hasattr(param, "ds_id") and param.numel() == 0]
print("base weights", len(base), "partitioned at load", len(partitioned),
      "whole sizes", sum(getattr(param, "ds_numel", 0) for param in base))
assert base and len(partitioned) == len(base), (len(base), len(partitioned))
"""


@pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="deepspeed is not installed")
@pytest.mark.timeout(1500)
def test_under_zero3_the_base_model_is_loaded_sharded_before_the_trainer_exists(tiny, tmp_path):
    """What `accelerate launch --config_file train/accelerate/deepspeed-zero3.yaml` sets (DeepSpeed, ZeRO-3,
    zero3_init_flag), one process on DeepSpeed's CPU accelerator: grpo.build_trainer makes the TRL config before
    the model, so the model is built inside deepspeed.zero.Init and every base weight is a partition from the
    start (loaded first, each rank held the whole model in host memory until the trainer sharded it)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0",
           "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29533",
           "ACCELERATE_USE_DEEPSPEED": "true", "ACCELERATE_DEEPSPEED_ZERO_STAGE": "3",
           "ACCELERATE_DEEPSPEED_ZERO3_INIT": "true", "ACCELERATE_MIXED_PRECISION": "no",
           "TRL_EXPERIMENTAL_SILENCE": "1",
           "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(SHARDED_LOAD), str(tiny), str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=1400, cwd=root)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert "partitioned at load" in done.stdout
