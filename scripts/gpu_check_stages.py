"""The stages of scripts/gpu_check.py, each a function (context) -> figures dict; raising fails the stage.

`context.dry` (no GPU, or --dry): the same code with the CPU stand-ins named in each stage's `route` (the
batched transformers engine where vLLM would sample, local policy copies where `vllm serve` would hold the
versions, bench/gpu_grpo_step.py --tiny for the memory phases). What ran says so in the table.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
GiB = 1 << 30


class Skipped(Exception):
    """The stage cannot run on this machine (what is missing is the message)."""


def environment(context) -> dict:
    import torch

    info: dict = {"python": sys.version.split()[0], "torch": torch.__version__, "cuda": torch.cuda.is_available(),
                  "route": "dry (CPU)" if context.dry else "GPU"}
    for module in ("transformers", "trl", "peft", "accelerate", "vllm", "deepspeed", "flash_attn"):
        spec = importlib.util.find_spec(module)
        info[module] = (getattr(__import__(module), "__version__", "present") if spec else "missing")
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
        info["gpu_gib"] = round(torch.cuda.get_device_properties(0).total_memory / GiB, 1)
    if not context.dry and not torch.cuda.is_available():
        raise RuntimeError("no CUDA device: run with --dry for the CPU stand-ins")
    return info


def tiny_model(context) -> Path:
    """A tiny Qwen3-style model built offline (head_dim 32: vLLM's attention has kernels for it)."""
    path = context.out / "tiny-model"
    if not (path / "config.json").is_file():
        from codeagent.train.tiny import build_tiny

        build_tiny(path, vocab_size=512, head_dim=32)
    return path


def _recipe(context, name: str, *overrides: str):
    from codeagent.train.recipe import load_recipe

    dtype = "float32" if context.dry else "bfloat16"
    return load_recipe(name, [f"model.base={tiny_model(context)}", f"model.dtype={dtype}",
                              f"output_dir={context.out / name}", "trainer.num_generations=4",
                              "trainer.per_device_train_batch_size=4", "trainer.save_steps=100", *overrides])


def _sample(policy, prompts: list[list[int]], tokens: int, seed: int) -> list[tuple[list[int], list[float]]]:
    """Each prompt sampled once by the policy's engine, concurrently (the engine batches them)."""
    results: list = [None] * len(prompts)

    def one(index: int) -> None:
        ids, logprobs, _ = policy.generator.generate(prompts[index], max_new_tokens=tokens, temperature=1.0,
                                                     top_p=None, seed=seed + index, stop_ids=set())
        results[index] = (list(ids), list(logprobs))

    threads = [threading.Thread(target=one, args=(index,)) for index in range(len(prompts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def grpo_through_the_engine(context) -> dict:
    """TRL's colocated vLLM (dry: the batched transformers engine) samples every completion of two GRPO steps,
    through codeagent's generation path (Rollouts.generation: the weight sync, VLLMGenerator); the loss corrects
    per token. After the first optimizer step the engine must sample with the new weights: a sync that never
    arrives shows as a mismatch at step 1 (test_train_async.py measured 0.074 for one)."""
    from codeagent.train.grpo import trainer as grpo

    route = "transformers" if context.dry else "vllm"
    recipe = _recipe(context, "grpo-tiny", f"rollout.generation={route}", "trainer.max_steps=2",
                     "trainer.vllm_mode=colocate", "trainer.vllm_gpu_memory_utilization=0.2",
                     "trainer.vllm_max_model_length=1024", "trainer.learning_rate=0.5")
    if route == "vllm" and importlib.util.find_spec("vllm") is None:
        raise Skipped("vllm is not installed here (pip install -c requirements/gpu-lock.txt 'codeagent[vllm]')")
    from datasets import Dataset

    trainer, tokenizer, rollouts, _ = grpo.build_trainer(recipe, tasks=[])
    trainer.train_dataset = Dataset.from_list([{"prompt": "check"}] * 8)  # the prompts are the rollout's own
    prompts = [[5, 6, 7, 8 + index] for index in range(2)]
    stats: list[dict] = []
    trainer.on_batch = stats.append
    calls = {"n": 0}

    def rollout(batch, trainer_):
        with rollouts.generation(trainer_) as policy:
            engine = type(policy.generator).__name__
            samples = _sample(policy, [prompts[i // 4] for i in range(len(batch))], 48, seed=100 * calls["n"])
        calls["n"] += 1
        context.note["engine"] = engine
        return {"prompt_ids": [prompts[i // 4] for i in range(len(batch))],
                "completion_ids": [ids for ids, _ in samples], "logprobs": [lp for _, lp in samples],
                "env_mask": [[1] * len(ids) for ids, _ in samples],
                # something to learn that differs within a group: an even first token
                "reward_resolved": [float(ids[0] % 2 == 0) if ids else 0.0 for ids, _ in samples]}

    trainer.rollout_func = rollout
    trainer.train()
    if len(stats) != 2:
        raise RuntimeError(f"expected 2 corrected batches, got {len(stats)}")
    figures = {"route": route + (" (colocated)" if route == "vllm" else " (CPU stand-in for vLLM)"),
               "engine": context.note.get("engine")}
    for step, batch in enumerate(stats):
        figures[f"step{step}_mismatch_kl"] = batch["mismatch_kl"]
        figures[f"step{step}_logp_gap_max"] = batch["mismatch_logp_abs_max"]
        figures[f"step{step}_masked_fraction"] = batch["is_masked_fraction"]
        figures[f"step{step}_tokens"] = f"{batch['loss_tokens']}/{batch['tokens']}"
        if batch["loss_tokens"] != batch["tokens"] or not batch["tokens"]:
            raise RuntimeError(f"step {step}: tokens left the loss: {batch}")
    limit = 1e-6 if context.dry else 5e-3  # float32 engine = trainer; bf16 vLLM vs trainer
    if stats[1]["mismatch_kl"] > max(limit, 10 * stats[0]["mismatch_kl"]):
        raise RuntimeError(f"step 1 samples do not come from step 1's weights (mismatch {stats[1]['mismatch_kl']:.2e} "
                           f"against {stats[0]['mismatch_kl']:.2e} at step 0): the weight sync did not arrive")
    return figures


def _own_logprobs(model, prompt: list[int], ids: list[int]) -> list[float]:
    import torch

    device = next(model.parameters()).device
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + ids], device=device)).logits[0, len(prompt) - 1:-1].float()
    return torch.log_softmax(logits, -1)[torch.arange(len(ids)), torch.tensor(ids)].tolist()


def versions_and_adapter_sync(context) -> dict:
    """Async GRPO's two policy versions at once: version 0 published, a rollout leases it, the adapter moves,
    version 1 is published; each version samples with its own weights (`vllm serve` with an adapter per version;
    dry: local copies on the transformers engine): the sampler's logprobs are its own version's, not the other's."""
    import torch
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM

    from codeagent.train.grpo.versions import PolicyVersions
    from codeagent.train.modeling import lora_config

    recipe = _recipe(context, "grpo-tiny-async-served" if not context.dry else "grpo-tiny-async",
                     "rollout.vllm_server_args=[]", "rollout.vllm_max_model_len=1024")
    device = "cpu" if context.dry else "cuda"
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(recipe.model.base, dtype=torch.float32).to(device),
                           lora_config(recipe))
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(recipe.model.base)
    if context.dry:
        from codeagent.models.hf import HFModel

        versions = PolicyVersions(lambda copy: HFModel(copy, tokenizer, name="policy"))
        route = "local copies, transformers engine (CPU stand-in for vllm serve)"
    else:
        if importlib.util.find_spec("vllm") is None:
            raise Skipped("vllm is not installed here")
        from codeagent.train.grpo.vllm_server import served_versions

        rollouts = SimpleNamespace(recipe=recipe, tokenizer=tokenizer)
        versions = served_versions(rollouts)
        route = "vllm serve, a LoRA adapter per version"
    prompt = [5, 6, 7, 8, 9]
    adapter = {name: param for name, param in model.named_parameters() if "lora_" in name}
    try:
        versions.publish(model, 0)
        version0 = {name: param.detach().clone() for name, param in adapter.items()}
        with versions.lease() as (policy0, _):
            with torch.no_grad():  # one "optimizer step": the adapter moves
                for name, param in adapter.items():
                    param.add_(torch.randn_like(param) * (0.5 if "lora_B" in name else 0.0))
            versions.publish(model, 1)
            with versions.lease() as (policy1, _):  # both versions sample, each leased
                [(ids0, sampled0)] = _sample(policy0, [prompt], 32, seed=1)
                [(ids1, sampled1)] = _sample(policy1, [prompt], 32, seed=2)
        own1 = _own_logprobs(model, prompt, ids1)
        with torch.no_grad():  # back to version 0's weights, to score with them
            for name, param in adapter.items():
                param.copy_(version0[name])
        own0, other = _own_logprobs(model, prompt, ids0), _own_logprobs(model, prompt, ids1)
    finally:
        versions.close()
    gap0 = max(abs(a - b) for a, b in zip(sampled0, own0))
    gap_own = max(abs(a - b) for a, b in zip(sampled1, own1))
    gap_other = max(abs(a - b) for a, b in zip(sampled1, other))
    figures = {"route": route, "v0_gap_own": gap0, "v1_gap_own": gap_own, "v1_gap_to_v0_weights": gap_other,
               "published": versions.published}
    tolerance = 1e-4 if context.dry else 5e-2
    if max(gap0, gap_own) > tolerance or gap_other < 4 * max(gap_own, tolerance / 10):
        raise RuntimeError(f"a version does not sample with its own weights: {figures}")
    return figures


def memory_phases(context) -> dict:
    """bench/gpu_grpo_step.py: one GRPO step of a random-weight 8B model at 16k tokens (dry: the tiny configs),
    each phase's peak memory beside the estimator's terms for it."""
    out = context.out / "memory"
    command = [sys.executable, str(ROOT / "bench" / "gpu_grpo_step.py"), "--out", str(out)]
    command += ["--tiny", "--models", "Qwen3-8B", "--no-warmup"] if context.dry else \
        ["--run", "Qwen3-8B:2:16384:150", "--device-gib", str(context.device_gib)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           **({"CUDA_VISIBLE_DEVICES": ""} if context.dry else {})}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=context.budget)
    results = json.loads((out / "gpu_grpo_step.json").read_text())
    figures: dict = {"route": "tiny configs on CPU" if context.dry else "Qwen3-8B, 2 x 16,384 tokens"}
    for name, record in results["models"].items():
        if record.get("error"):
            raise RuntimeError(f"{name}: {record['error']}")
        for phase in record["phases"]:
            peak, predicted = phase.get("max_allocated_gib"), phase.get("predicted_gib")
            ratio = peak / predicted if peak and predicted else math.nan
            figures[phase["phase"]] = (f"{peak:.2f} of {predicted:.2f} GiB predicted ({ratio:.2f})" if peak
                                       else f"predicted {predicted:.2f} GiB (CPU: no peak measured)")
    if done.returncode:
        raise RuntimeError(f"gpu_grpo_step.py exited {done.returncode}: {done.stderr[-500:]}")
    return figures


STAGES = {"environment": environment, "grpo step through the engine": grpo_through_the_engine,
          "versions and adapter sync": versions_and_adapter_sync, "memory phases": memory_phases}
