"""`codeagent train grpo --dry-run`: the memory one device needs for a recipe, estimated from the
model's shape, the recipe and its device layout (one GPU, or an accelerate config: DDP, DeepSpeed
ZeRO-1/2/3 with or without offload, FSDP), before anything is loaded; a recipe that cannot fit is
refused with the knob to turn.

The estimate (bytes per device), written out so it can be checked and argued with. N = processes.
Training phase:
- weights: the frozen base, parameters x dtype bytes; / N under ZeRO-3 and FSDP full sharding; 0 on
  the device with ZeRO-3 parameter offload;
- LoRA: trainable parameters r x (in + out) per targeted linear layer: an fp32 weight (/ N under ZeRO-3
  and FSDP full sharding), its fp32 gradient (/ N under ZeRO-2, ZeRO-3 and FSDP) and the optimizer
  state (Adam: 2 more fp32 values, SGD: none; / N under every ZeRO stage and FSDP; 0 with optimizer
  offload);
- gather buffer: under ZeRO-3 / FSDP full sharding, the weights of the layers being used and
  prefetched, counted as 2 decoder layers;
- activations (16-bit; counts per token, I = intermediate size, H = hidden size): with gradient
  checkpointing, each layer's input kept (H x 2 bytes per layer) plus the layer being recomputed in the
  backward: ~(11 I + 38 H + 10 Q) bytes (Q = heads x head dim), counted from what autograd saves (the
  MLP's gate, up, SiLU and product outputs and the down projection's LoRA input cast back to 16 bits:
  5 x 2I; fp32 RMSNorm inputs, each LoRA input cast to fp32 and back: ~30 H; the query, its RoPE, the
  attention output and its LoRA cast: ~10 Q) plus the gradients flowing through it; without
  checkpointing, that for every layer;
- logits: none at full size. TRL's GRPOTrainer always patches a fused LM head in (trl add_fused_lm_head,
  whatever the loss or entropy settings): only the scored (completion) positions go through the head, in
  tiles of 4,096 tokens x 32,768 vocabulary entries (16 bits, one buffer, folded into fp32 running
  log-sum-exp statistics), so the head holds one tile plus the scored hidden states (16 bits) and their
  gradient (fp32). It peaks at another moment than the recomputed layer: a measured phase counts the
  larger (PHASE_TERMS), the training total adds both (a margin of the head's size, ~0.5 GiB at 16k);
- vLLM (colocated): `vllm_gpu_memory_utilization` of the device, in both phases;
- async GRPO (`rollout.asynchronous`): the copies of the policy the rollouts sample from while the trainer
  steps (train/grpo/versions.py: buffer_batches + 1, each the whole base + the LoRA weights in fp32), their KV
  cache (as below, one prompt cache per copy) and prefill: in the training phase, since both run at once.
Weight-sync phase (vLLM under ZeRO-3): TRL merges the adapter into vLLM's weights before every generation
batch, gathering the whole model at once on every device (trl VLLMGeneration.sync_weights with PEFT), beside
the colocated engine: whole weights + LoRA state + vLLM. Under other layouts the weights are whole already.
Generation phase (transformers generation, not async: the batched engine of models/batching.py runs in the
training process):
- weights: the whole base on every device (ZeRO-3 gathers them for the rollouts: train/grpo/rollouts.py
  `generation_weights`), plus the LoRA state above;
- KV cache: rollout.workers conversations x sequence x layers x 2 (keys, values) x kv heads x head dim
  x dtype bytes, plus the engine's prompt cache at its bound (DEFAULT_KV_CACHE_BYTES);
- prefill: one layer's activations for every conversation's prompt at once (workers x prompt tokens x
  (4 x hidden + 3 x intermediate) x dtype bytes); the logits of the last position only.
Total: the larger phase, plus overhead: 2 GiB (CUDA context, NCCL) + 10% (allocator fragmentation).
Sequence = the first prompt (`--prompt-tokens`) + max_completion_length.
What was measured: bench/gpu_grpo_step.py on one H100 80GB (2026-11-26, torch 2.11, transformers 5.24,
trl 1.16, peft 0.21; bench/results/gpu_grpo_step_h100_run1.json): Qwen3-8B and Qwen2.5-Coder-7B, bf16,
LoRA r64 on all 7 projections, checkpointing, one 16,384-token sequence per micro-step (2,048 prompt),
phases load / old logprobs / forward+backward / optimizer step, peak torch.cuda.max_memory_allocated;
the activation counts above were checked against it (every phase within 2%: tests/train/test_train_memory.py).
The no-gradient logprobs pass peaks in an MLP: the layer's input, residual and normed input, the LoRA
input in fp32, and four I-wide tensors at once: (8 I + 10 H) bytes per token, beside autocast's cached
16-bit copies of the fp32 LoRA weights (trainable x 2 bytes, kept until the forward ends). Not measured:
other models or shapes, batch > 1, ZeRO/FSDP layouts, vLLM, the generation phase, async GRPO, overhead.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ...models.batching import DEFAULT_KV_CACHE_BYTES
from .. import TrainError
from ..recipe import Recipe

GiB = 1 << 30
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "auto": 2}
# Shapes of common bases, for hub ids that cannot be read here (no hub access): their config.json values.
KNOWN_SHAPES = {
    "Qwen/Qwen2.5-Coder-7B-Instruct": dict(hidden_size=3584, num_hidden_layers=28, intermediate_size=18944,
                                           num_attention_heads=28, num_key_value_heads=4, vocab_size=152064,
                                           tie_word_embeddings=False),
    "Qwen/Qwen3-8B": dict(hidden_size=4096, num_hidden_layers=36, intermediate_size=12288, num_attention_heads=32,
                          num_key_value_heads=8, vocab_size=151936, tie_word_embeddings=False, head_dim=128),
    "Qwen/Qwen3-32B": dict(hidden_size=5120, num_hidden_layers=64, intermediate_size=25600, num_attention_heads=64,
                           num_key_value_heads=8, vocab_size=151936, tie_word_embeddings=False, head_dim=128),
    "meta-llama/Llama-3.1-8B-Instruct": dict(hidden_size=4096, num_hidden_layers=32, intermediate_size=14336,
                                             num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
                                             tie_word_embeddings=False),
}
KNOWN_SHAPES["Qwen/Qwen2.5-7B-Instruct"] = KNOWN_SHAPES["Qwen/Qwen2.5-Coder-7B-Instruct"]
# TRL's fused LM head (trl/kernels/chunked_logprob.py): tokens x vocabulary entries per projection tile.
FUSED_HEAD_TILE = (4096, 32768)
STRATEGIES = ("single", "ddp", "zero1", "zero2", "zero3", "fsdp", "fsdp-grad-op")


@dataclass
class Shape:
    hidden: int
    layers: int
    intermediate: int
    heads: int
    kv_heads: int
    vocab: int
    head_dim: int
    tied: bool

    def linears(self) -> dict[str, tuple[int, int]]:
        """(in, out) of each linear layer of one decoder layer, by its usual name."""
        h, kv = self.hidden, self.kv_heads * self.head_dim
        q = self.heads * self.head_dim
        return {"q_proj": (h, q), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (q, h),
                "gate_proj": (h, self.intermediate), "up_proj": (h, self.intermediate),
                "down_proj": (self.intermediate, h)}

    def layer_parameters(self) -> int:
        return sum(a * b for a, b in self.linears().values())

    def parameters(self) -> int:
        return self.layers * self.layer_parameters() + self.vocab * self.hidden * (1 if self.tied else 2)


@dataclass
class Layout:
    """How the training processes hold the model: `devices` processes (one per GPU) and a strategy."""

    devices: int = 1
    strategy: str = "single"
    offload_params: bool = False
    offload_optimizer: bool = False
    source: str = "one device"

    def divisor(self, what: str) -> int:
        """Over how many devices `what` (weights, master, grads, optimizer) is split."""
        sharded = {"weights": ("zero3", "fsdp"), "master": ("zero3", "fsdp"),
                   "grads": ("zero2", "zero3", "fsdp", "fsdp-grad-op"),
                   "optimizer": ("zero1", "zero2", "zero3", "fsdp", "fsdp-grad-op")}[what]
        return self.devices if self.strategy in sharded else 1

    def describe(self) -> str:
        offload = [name for name, on in (("parameters", self.offload_params), ("optimizer", self.offload_optimizer))
                   if on]
        text = f"{self.devices} device(s), {self.strategy}"
        return text + (f", {' and '.join(offload)} offloaded to CPU" if offload else "") + f" ({self.source})"


def layout_from_accelerate(path: str | Path) -> Layout:
    """The layout an accelerate config file launches: processes, DeepSpeed ZeRO stage and offload, FSDP."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as error:
        raise TrainError(f"cannot read the accelerate config {path}: {error}") from None
    if not isinstance(data, dict):
        raise TrainError(f"the accelerate config {path} is not a mapping")
    devices = int(data.get("num_processes") or 1)
    kind = str(data.get("distributed_type") or "NO").upper()
    if kind == "DEEPSPEED":
        ds = data.get("deepspeed_config") or {}
        stage = int(ds.get("zero_stage", 0) or 0)
        return Layout(devices, f"zero{stage}" if stage else "ddp",
                      offload_params=str(ds.get("offload_param_device", "none")).lower() not in ("none", ""),
                      offload_optimizer=str(ds.get("offload_optimizer_device", "none")).lower() not in ("none", ""),
                      source=str(path))
    if kind == "FSDP":
        fsdp = data.get("fsdp_config") or {}
        strategy = str(fsdp.get("fsdp_sharding_strategy", fsdp.get("fsdp_reshard_after_forward", "FULL_SHARD")))
        grad_op = strategy.upper() in ("SHARD_GRAD_OP", "2", "FALSE")
        no_shard = strategy.upper() in ("NO_SHARD", "3")
        return Layout(devices, "ddp" if no_shard else "fsdp-grad-op" if grad_op else "fsdp",
                      offload_params=bool(fsdp.get("fsdp_offload_params", False)), source=str(path))
    return Layout(devices, "ddp" if devices > 1 else "single", source=str(path))


def recipe_layout(recipe: Recipe) -> Layout:
    """The recipe's own layout: its `distributed.accelerate_config` (relative to the recipe's folder), or one device."""
    name = recipe.distributed.accelerate_config
    if not name:
        return Layout()
    path = Path(name).expanduser()
    if not path.is_absolute() and recipe.source:
        path = Path(recipe.source).parent / path
    return layout_from_accelerate(path)


def model_shape(base: str) -> Shape:
    path = Path(base).expanduser() / "config.json"
    if path.is_file():
        config: dict[str, Any] = json.loads(path.read_text())
    elif base in KNOWN_SHAPES:
        config = KNOWN_SHAPES[base]
    else:
        raise TrainError(f"cannot estimate memory for {base!r}: no config.json there and not a known base "
                         f"({', '.join(sorted(KNOWN_SHAPES))}); give a local model directory")
    config = config.get("text_config", config)
    heads = config["num_attention_heads"]
    return Shape(hidden=config["hidden_size"], layers=config["num_hidden_layers"],
                 intermediate=config["intermediate_size"], heads=heads,
                 kv_heads=config.get("num_key_value_heads") or heads, vocab=config["vocab_size"],
                 head_dim=config.get("head_dim") or config["hidden_size"] // heads,
                 tied=bool(config.get("tie_word_embeddings", False)))


def lora_parameters(shape: Shape, recipe: Recipe) -> int:
    targets = recipe.lora.target_modules
    linears = shape.linears()
    chosen = linears if targets == "all-linear" else {n: v for n, v in linears.items() if n in targets}
    return shape.layers * sum(recipe.lora.r * (a + b) for a, b in chosen.values())


def transformers_generation(recipe: Recipe) -> bool:
    """Rollouts generated in the training process by transformers: asked for, or async GRPO (which samples
    from versioned copies of the policy, never from vLLM: train/grpo/trainer.py)."""
    return recipe.rollout.generation == "transformers" or recipe.rollout.asynchronous


def policy_copies(recipe: Recipe) -> int:
    """Copies of the policy async GRPO keeps (train/grpo/versions.py): the current one, plus one per generation
    batch that may still be sampling from an older version (rollout.buffer_batches, default max_staleness + 1).
    A retired copy is kept as a spare and reused, so this is how many exist at once."""
    settings = recipe.rollout
    return (settings.buffer_batches or settings.max_staleness + 1) + 1 if settings.asynchronous else 0


def estimate(recipe: Recipe, *, device_gib: float = 80.0, prompt_tokens: int = 4096, devices: int = 1,
             sharded: bool = False, layout: Layout | None = None) -> dict[str, float]:
    """GiB per device, by component (see the module docstring), each phase's total and the total.
    `layout`: the device layout (default: the recipe's accelerate config; `devices`/`sharded` say
    N devices under ZeRO-3, kept for the command's --devices/--sharded)."""
    if layout is None:
        layout = Layout(devices, "zero3" if sharded else ("ddp" if devices > 1 else "single"),
                        source="--devices/--sharded") if (devices > 1 or sharded) else recipe_layout(recipe)
    if layout.strategy not in STRATEGIES:
        raise TrainError(f"unknown layout {layout.strategy!r}; one of {', '.join(STRATEGIES)}")
    shape = model_shape(recipe.model.base)
    t = recipe.trainer
    batch = int(t.get("per_device_train_batch_size", 8))
    sequence = prompt_tokens + int(t.get("max_completion_length", 512))
    width = DTYPE_BYTES.get(recipe.model.dtype, 2)
    full_weights = shape.parameters() * width
    weights = 0.0 if layout.offload_params else full_weights / layout.divisor("weights")
    optimizer_values = 0 if str(t.get("optim", "adamw")).startswith("sgd") else 2
    trainable = lora_parameters(shape, recipe)
    master = 0.0 if layout.offload_params else trainable * 4 / layout.divisor("master")
    optimizer = 0.0 if layout.offload_optimizer else trainable * 4 * optimizer_values / layout.divisor("optimizer")
    lora = master + trainable * 4 / layout.divisor("grads") + optimizer
    gather = 2 * shape.layer_parameters() * width if layout.divisor("weights") > 1 or layout.offload_params else 0
    checkpointing = t.get("gradient_checkpointing", t.get("activation_checkpointing", True))
    tokens, scale = batch * sequence, width / 2  # the per-token counts are for 16-bit activations
    one_layer = tokens * (11 * shape.intermediate + 38 * shape.hidden + 10 * shape.heads * shape.head_dim) * scale
    kept = tokens * shape.hidden * width * shape.layers if checkpointing else 0
    activations = kept + one_layer if checkpointing else one_layer * shape.layers
    scored = batch * int(t.get("max_completion_length", 512))
    logits = min(scored, FUSED_HEAD_TILE[0]) * FUSED_HEAD_TILE[1] * width + scored * shape.hidden * (width + 4)
    vllm = 0.0
    if not transformers_generation(recipe) and t.get("vllm_mode", "colocate") == "colocate":
        vllm = float(t.get("vllm_gpu_memory_utilization", 0.3)) * device_gib * GiB
    parts = {"weights": weights, "lora+optimizer": lora, "gather buffer": gather, "activations": activations,
             "logits": logits, "vllm": vllm}
    # Finer terms, not summed again: what each measured phase of bench/gpu_grpo_step.py holds (PHASE_TERMS).
    detail = {"lora weights": master, "lora grads": trainable * 4 / layout.divisor("grads"),
              "optimizer state": optimizer,
              "logprobs activations": tokens * (8 * shape.intermediate + 10 * shape.hidden) * scale,
              "autocast copies": trainable * width if width < 4 else 0.0,
              "kept layer inputs": kept, "layer activations": activations - kept}
    generation: dict[str, float] = {}
    rows = max(1, recipe.rollout.workers)
    token_bytes = shape.layers * 2 * shape.kv_heads * shape.head_dim * width
    prefill = rows * prompt_tokens * (4 * shape.hidden + 3 * shape.intermediate) * width
    copies = policy_copies(recipe)
    if copies:
        # Async: the rollouts sample from copies of the policy (whole base + LoRA each) while the trainer
        # steps, so their KV cache (and each copy's prompt cache) is there during training, not in a phase of its own.
        parts.update({"policy copies": copies * (full_weights + trainable * 4),
                      "kv cache": rows * sequence * token_bytes + copies * DEFAULT_KV_CACHE_BYTES, "prefill": prefill})
    elif transformers_generation(recipe):
        generation = {"weights (gathered)": full_weights, "lora state": lora,
                      "kv cache": rows * sequence * token_bytes + DEFAULT_KV_CACHE_BYTES, "prefill": prefill}
    elif layout.strategy == "zero3":
        # vLLM's weight sync (TRL's VLLMGeneration.sync_weights, every step): with PEFT under ZeRO-3 the whole
        # model is gathered at once on every device to merge the adapter into it, beside the colocated engine.
        generation = {"weights (sync gather)": full_weights, "lora state": lora, "vllm": vllm}
    training_total, generation_total = sum(parts.values()), sum(generation.values())
    peak = max(training_total, generation_total)
    parts.update(generation)
    parts["overhead"] = 2 * GiB + 0.1 * peak
    result = {name: value / GiB for name, value in {**parts, **detail}.items()}
    result["training"] = (training_total + parts["overhead"]) / GiB
    result["generation"] = (generation_total + parts["overhead"]) / GiB if generation else 0.0
    result["total"] = max(result["training"], result["generation"])
    result.update(device=device_gib, sequence=sequence, batch=batch, parameters_b=shape.parameters() / 1e9,
                  checkpointing=bool(checkpointing), devices=layout.devices,
                  weights_sharded=layout.divisor("weights") > 1, policy_copies=copies, model=full_weights / GiB)
    result["layout"] = layout.describe()  # type: ignore[assignment]
    result["strategy"] = layout.strategy  # type: ignore[assignment]
    return result


# The terms that predict each phase of one GRPO step as bench/gpu_grpo_step.py measures it
# (torch.cuda.max_memory_allocated, so without the overhead term). "a|b": the larger of a and b, which peak at
# different moments (a layer, or the fused LM head). The first step's forward+backward holds no optimizer state yet.
PHASE_TERMS = {
    "load": ("weights", "lora weights"),
    "logprobs": ("weights", "lora weights", "gather buffer", "autocast copies", "logprobs activations|logits"),
    "forward+backward": ("weights", "lora weights", "lora grads", "gather buffer", "kept layer inputs",
                         "layer activations|logits"),
    "optimizer step": ("weights", "lora weights", "lora grads", "optimizer state"),
}


def phase_prediction(values: dict, phase: str) -> dict:
    """{"predicted_gib": the sum of the phase's terms, "predicted_terms": each term} for an `estimate` result."""
    terms = {name: max(float(values[part]) for part in name.split("|")) for name in PHASE_TERMS[phase]}
    return {"predicted_gib": sum(terms.values()), "predicted_terms": terms}

ADVICE = {
    "logits": "lower trainer.per_device_train_batch_size (raise gradient_accumulation_steps to keep the batch) "
              "or trainer.max_completion_length",
    "activations": "set trainer.gradient_checkpointing=true, or lower trainer.max_completion_length",
    "activations (checkpointed)": "lower trainer.per_device_train_batch_size or trainer.max_completion_length",
    "weights": "shard the model (ZeRO-3 / FSDP: distributed.accelerate_config: accelerate/deepspeed-zero3.yaml) "
               "or use a smaller model.base",
    "vllm": "lower trainer.vllm_gpu_memory_utilization, or run vLLM as a server on its own GPU (vllm_mode=server)",
    "lora+optimizer": "lower lora.r, target fewer modules, use optim=sgd, or shard it (ZeRO-1/2/3)",
    "gather buffer": "use fewer, larger devices (ZeRO-3 gathers two layers at a time)",
    "weights (gathered)": "generate with vLLM (rollout.generation: vllm): transformers generation gathers the "
                          "whole model on every device",
    "kv cache": "lower rollout.workers (conversations decoding at once per device) or trainer.max_completion_length",
    "prefill": "lower rollout.workers or the prompt length",
    "policy copies": "lower rollout.max_staleness or rollout.buffer_batches (async GRPO keeps a whole copy of the "
                     "model per policy version in use)",
    "weights (sync gather)": "ZeRO-3 gathers the whole model on every device to merge the LoRA adapter into vLLM "
                             "each step, however many devices: a smaller model.base, or a vLLM server on its own "
                             "GPUs (vllm_mode: server) so no engine shares the device with the gather",
}


def report(values: dict) -> str:
    lines = [f"estimated memory per device ({values['parameters_b']:.2f}B parameters, batch {values['batch']}, "
             f"sequence {values['sequence']} tokens; {values['layout']}):"]
    training = ["weights", "lora+optimizer", "gather buffer", "activations", "logits", "vllm"]
    if values["policy_copies"]:
        training += ["policy copies", "kv cache", "prefill"]
    lines.append("  training" + (f" (async: rollouts sample from {values['policy_copies']} copies of the policy "
                                 "meanwhile):" if values["policy_copies"] else ":"))
    lines += [f"    {name:<21} {values[name]:8.1f} GiB" for name in (*training, "overhead")]
    lines.append(f"    {'subtotal':<21} {values['training']:8.1f} GiB")
    if values["generation"]:
        if "weights (sync gather)" in values:
            lines.append("  weight sync (vLLM, the adapter merged into its weights every step):")
            names: tuple[str, ...] = ("weights (sync gather)", "lora state", "vllm", "overhead")
        else:
            lines.append("  generation (transformers, in the training process):")
            names = ("weights (gathered)", "lora state", "kv cache", "prefill", "overhead")
        lines += [f"    {name:<21} {values[name]:8.1f} GiB" for name in names]
        lines.append(f"    {'subtotal':<21} {values['generation']:8.1f} GiB")
    lines.append(f"  {'total (peak)':<21} {values['total']:8.1f} GiB of {values['device']:.0f} GiB")
    lines.append("  (an estimate from the model's shape, the recipe and its layout; its training phase checked on one "
                 "H100 with 7B/8B models at 16k tokens on one device: the rest not measured on a GPU)")
    return "\n".join(lines)


def phase_is_training(values: dict) -> bool:
    return values["generation"] <= values["training"]


def check_fits(values: dict) -> None:
    if 0 < values["vllm"] < values["model"]:
        raise TrainError(f"the colocated vLLM engine gets {values['vllm']:.1f} GiB (vllm_gpu_memory_utilization) but "
                         f"the model's weights alone are {values['model']:.1f} GiB: each rank's engine holds the whole "
                         "model (tensor parallel 1, the one colocate mode agent rollouts run in). Run vLLM as a server "
                         "on its own GPUs (vllm_mode: server), or use a smaller model.base")
    if values["total"] <= values["device"]:
        return
    if not phase_is_training(values):
        names: tuple[str, ...] = ("weights (gathered)", "kv cache", "prefill", "weights (sync gather)", "vllm")
    else:
        names = ("logits", "activations", "weights", "vllm", "lora+optimizer", "gather buffer", "policy copies",
                 "kv cache")
    names = tuple(name for name in names if name in values)
    biggest = sorted(names, key=lambda name: values[name], reverse=True)[:2]
    if phase_is_training(values) and values["devices"] > 1 and not values["weights_sharded"] \
            and "weights" not in biggest:
        biggest.append("weights")  # several devices, each with the whole model: sharding is the knob

    def advice_for(name: str) -> str:
        return ADVICE["activations (checkpointed)" if name == "activations" and values["checkpointing"] else name]

    phase = "training" if phase_is_training(values) else "weight sync" if "weights (sync gather)" in values \
        else "generation"
    advice = "; ".join(f"{name} ({values[name]:.1f} GiB): {advice_for(name)}" for name in biggest)
    raise TrainError(f"the recipe needs about {values['total']:.0f} GiB per device ({phase} is the peak; "
                     f"{values['layout']}), more than the {values['device']:.0f} GiB there: {advice}")
