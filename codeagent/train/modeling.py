"""The model side of a training run: load the base model (and an adapter to continue), LoRA settings,
TRL config, checkpoints and resume, running out of memory, and the saved adapter with its card."""

from __future__ import annotations

import json
import logging
import platform
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from . import TrainError
from .recipe import Recipe, trl_config_class

log = logging.getLogger(__name__)

ADAPTER_DIR = "adapter"
CARD_FILE = "README.md"


def load_base(recipe: Recipe, args=None):
    """(model, tokenizer) for training: the base model, with recipe.model.adapter loaded trainable.

    `args`: the run's TRL config, made first and alive while the model loads. Under DeepSpeed ZeRO-3 (an
    accelerate config with zero3_init_flag) making it registers the DeepSpeed config with transformers, and
    `from_pretrained` then builds the model inside `deepspeed.zero.Init`: each rank holds its shard of every
    weight from the start. Loaded before it, every rank would first hold the whole model in host memory
    (8 ranks x 15 GB for a 7B model, 8 x 61 GB for 32B) before the trainer shards it. The config is checked
    to be that one: a model loaded under another ZeRO-3 config (or none) would be refused later."""
    from ..models.errors import ModelConfigError
    from ..models.hf import check_model_path, resolve_base

    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as error:
        raise TrainError(f"training needs torch and transformers ({error}); pip install 'codeagent[train]'") from None
    if recipe.cpu_threads:
        torch.set_num_threads(recipe.cpu_threads)
    spec = recipe.model
    base, adapter_in_base = resolve_base(spec.base)
    adapter = spec.adapter or adapter_in_base
    try:
        check_model_path(base)
    except ModelConfigError as error:
        raise TrainError(f"model.base: {error}") from None
    if adapter and not (Path(adapter).expanduser() / "adapter_config.json").is_file():
        raise TrainError(f"model.adapter: no PEFT adapter at {adapter} (adapter_config.json is missing)")
    dtype = spec.dtype if spec.dtype == "auto" else getattr(torch, spec.dtype, None)
    if dtype is None:
        raise TrainError(f"model.dtype {spec.dtype!r} is not a torch dtype (auto, float32, bfloat16, float16)")
    options: dict[str, Any] = {"dtype": dtype, "trust_remote_code": spec.trust_remote_code}
    if spec.attn_implementation:
        options["attn_implementation"] = spec.attn_implementation
    tokenizer_source = adapter if adapter and (Path(adapter) / "tokenizer_config.json").is_file() else base
    if args is not None:
        check_sharded_load(args)
    try:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_source, trust_remote_code=spec.trust_remote_code)
        model = AutoModelForCausalLM.from_pretrained(base, **options)
    except OSError as error:
        raise TrainError(
            f"cannot load the base model {base!r}: {error}. Give a local directory (save_pretrained output) "
            "or a hub id that can be downloaded from this machine"
        ) from None
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if adapter:
        from peft import PeftModel

        check_adapter_lora(recipe, Path(adapter).expanduser())
        model = PeftModel.from_pretrained(model, adapter, is_trainable=True)
        set_lora_dropout(model, recipe.lora.dropout)
    return model, tokenizer


def check_sharded_load(args) -> None:
    """Under a ZeRO-3 config with zero3_init_flag, transformers must see it while the model loads (it then
    builds the model inside deepspeed.zero.Init): refused otherwise, so a whole load per rank cannot pass unseen."""
    plugin = getattr(args, "deepspeed_plugin", None)
    if plugin is None or getattr(plugin, "zero_stage", None) != 3 or not getattr(plugin, "zero3_init_flag", False):
        return
    from transformers.integrations import is_deepspeed_zero3_enabled

    if not is_deepspeed_zero3_enabled():
        raise TrainError("the run's DeepSpeed config is ZeRO-3 with zero3_init_flag, but transformers does not see "
                         "it while the model loads: every rank would hold the whole model first")


def check_adapter_lora(recipe: Recipe, adapter: Path) -> None:
    """A continued adapter keeps its shape (rank, alpha, target modules): a recipe's `lora:` that asks
    for another one is refused, not silently ignored. Dropout is a training setting: the recipe's applies."""
    try:
        saved = json.loads((adapter / "adapter_config.json").read_text())
    except (OSError, ValueError) as error:
        raise TrainError(f"model.adapter: cannot read {adapter}/adapter_config.json: {error}") from None
    asked = recipe.lora
    conflicts = []
    if "r" in asked.model_fields_set and saved.get("r") != asked.r:
        conflicts.append(f"r={asked.r} (the adapter has r={saved.get('r')})")
    if "alpha" in asked.model_fields_set and saved.get("lora_alpha") != asked.alpha:
        conflicts.append(f"alpha={asked.alpha} (the adapter has alpha={saved.get('lora_alpha')})")
    targets, theirs = asked.target_modules, saved.get("target_modules")
    if ("target_modules" in asked.model_fields_set and isinstance(targets, list) and isinstance(theirs, (list, str))
            and sorted(targets) != sorted([theirs] if isinstance(theirs, str) else theirs)):
        conflicts.append(f"target_modules={sorted(targets)} (the adapter has {theirs})")
    if conflicts:
        raise TrainError(
            f"the recipe's lora: asks for {', '.join(conflicts)}, but model.adapter {adapter} is continued as it "
            "was trained: a trained adapter's shape cannot change. Set lora: to the adapter's values (or leave "
            "r/alpha/target_modules out), or start a new adapter (model.adapter=null)")


def set_lora_dropout(model, p: float) -> int:
    """Set the dropout of every LoRA layer (and the saved config) to `p`; returns how many layers."""
    import torch

    count = 0
    for module in model.modules():
        layers = getattr(module, "lora_dropout", None)
        if isinstance(layers, torch.nn.ModuleDict):
            for name in list(layers.keys()):
                layers[name] = torch.nn.Dropout(p=p) if p > 0 else torch.nn.Identity()
                count += 1
    for config in (getattr(model, "peft_config", None) or {}).values():
        if hasattr(config, "lora_dropout"):
            config.lora_dropout = p
    return count


def lora_config(recipe: Recipe):
    """The PEFT LoRA config, or None when the model already carries a trainable adapter."""
    from peft import LoraConfig

    lora = recipe.lora
    return LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                      target_modules=lora.target_modules, modules_to_save=lora.modules_to_save,
                      task_type="CAUSAL_LM", bias="none")


def peft_config_for(model, recipe: Recipe):
    from peft import PeftModel

    return None if isinstance(model, PeftModel) else lora_config(recipe)


def trl_args(recipe: Recipe, **fixed: Any):
    """TRL's config for the method: codeagent's defaults < the recipe's `trainer` < what the run must set."""
    import dataclasses

    import torch

    config_class = trl_config_class(recipe.method)
    fields = {field.name for field in dataclasses.fields(config_class)}
    defaults: dict[str, Any] = {"logging_steps": 1, "save_steps": 50, "report_to": "none", "save_total_limit": 3}
    if not torch.cuda.is_available():
        defaults["bf16"] = False  # TRL defaults to bf16, which a CPU cannot train in
    values = {**defaults, **recipe.trainer, **fixed, "output_dir": recipe.output_dir, "seed": recipe.seed,
              "ddp_timeout": recipe.distributed.timeout_seconds}  # the process group's timeout (transformers)
    # transformers 5 renamed gradient_checkpointing to activation_checkpointing; recipes may use either.
    for old, new in (("gradient_checkpointing", "activation_checkpointing"),
                     ("gradient_checkpointing_kwargs", "activation_checkpointing_kwargs")):
        if new in fields and old in values:
            values.setdefault(new, values.pop(old))
    try:
        return config_class(**values)
    except (ValueError, TypeError) as error:
        raise TrainError(f"the trainer settings are not valid for TRL: {error}") from None


def checkpoint_to_resume(recipe: Recipe) -> str | None:
    """`resume: auto` -> the last checkpoint in output_dir, if any; a path -> that checkpoint; false -> None."""
    from transformers.trainer_utils import get_last_checkpoint

    resume = recipe.resume
    if resume is False or resume in ("false", "no", "never"):
        return None
    if isinstance(resume, str) and resume not in ("auto", "true", "yes"):
        if not Path(resume).is_dir():
            raise TrainError(f"resume: no checkpoint directory at {resume}")
        return resume
    output = Path(recipe.output_dir)
    last = get_last_checkpoint(str(output)) if output.is_dir() else None
    if resume is True and last is None:
        raise TrainError(f"resume=true but {output} holds no checkpoint-* directory to resume from")
    return last


class MetricsFile:
    """A transformers callback appending every log record (loss, rewards, lr...) to metrics.jsonl."""

    def __init__(self, path: Path):
        from transformers import TrainerCallback

        self.path = path
        outer = self

        class _Callback(TrainerCallback):
            def on_log(self, args, state, control, logs=None, **kwargs):
                if logs and state.is_world_process_zero:
                    outer.write({"step": state.global_step, **logs})

        self.callback = _Callback()

    def write(self, record: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as handle:
            handle.write(json.dumps({"time": time.time(), **record}, default=str) + "\n")


def is_out_of_memory(error: BaseException) -> bool:
    import torch

    if isinstance(error, (MemoryError, torch.OutOfMemoryError)):
        return True
    text = str(error).lower()
    return isinstance(error, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text
                                                or "cannot allocate memory" in text)


def memory_advice(recipe: Recipe) -> str:
    t = recipe.trainer
    batch = t.get("per_device_train_batch_size", 8)
    parts = [f"lower trainer.per_device_train_batch_size (now {batch}) and raise "
             f"trainer.gradient_accumulation_steps (now {t.get('gradient_accumulation_steps', 1)}) to keep the "
             "effective batch"]
    if recipe.method == "grpo":
        parts.append(f"lower trainer.max_completion_length (now {t.get('max_completion_length', 512)}) or "
                     f"trainer.num_generations (now {t.get('num_generations', 8)})")
    else:
        parts.append(f"lower trainer.max_length (now {t.get('max_length', 1024)})")
    if not t.get("gradient_checkpointing", t.get("activation_checkpointing", True)):
        parts.append("set trainer.gradient_checkpointing=true")
    parts.append("or lower lora.r / use a smaller model.base")
    return "; ".join(parts)


@contextmanager
def training_errors(recipe: Recipe):
    """Out-of-memory becomes a TrainError that says what to lower."""
    try:
        yield
    except Exception as error:
        if is_out_of_memory(error):
            raise TrainError(f"ran out of memory while training ({type(error).__name__}: "
                             f"{str(error).splitlines()[0][:200]}): {memory_advice(recipe)}") from error
        raise


def train(trainer, recipe: Recipe, metrics: MetricsFile) -> dict:
    """Run (or resume) training; returns the final metrics."""
    checkpoint = checkpoint_to_resume(recipe)
    if checkpoint:
        log.info("resuming from %s", checkpoint)
        metrics.write({"event": "resumed", "checkpoint": checkpoint})
    with training_errors(recipe):
        result = trainer.train(resume_from_checkpoint=checkpoint)
    final = dict(result.metrics or {})
    final["global_step"] = result.global_step
    if checkpoint:
        final["resumed_from"] = checkpoint
    return final


def gathered_adapter_state(trainer, model) -> dict | None:
    """The adapter's tensors, whole, under DeepSpeed ZeRO-3, where each rank holds only a shard of every
    parameter and PEFT alone would save empty tensors; None elsewhere (PEFT reads them itself). Every
    rank must call it: the gather is a collective."""
    accelerator = getattr(trainer, "accelerator", None)
    if accelerator is None or not hasattr(accelerator, "state"):
        return None
    from peft import get_peft_model_state_dict
    from trl.distributed import DistributedBackend

    backend = DistributedBackend(accelerator)
    if not backend.is_zero3:
        return None
    params = [param for name, param in model.named_parameters() if "lora_" in name or param.requires_grad]
    with backend.gather_params(params):
        return {name: tensor.detach().clone().cpu() for name, tensor in get_peft_model_state_dict(model).items()}


def save_adapter(trainer, tokenizer, recipe: Recipe, data_summary: dict, metrics: dict) -> Path:
    """The adapter, the tokenizer, the recipe, the data it saw, and a card that says all of that."""
    out = Path(recipe.output_dir) / ADAPTER_DIR
    out.mkdir(parents=True, exist_ok=True)
    model = trainer.accelerator.unwrap_model(trainer.model) if hasattr(trainer, "accelerator") else trainer.model
    state = gathered_adapter_state(trainer, model)  # every rank: a collective under ZeRO-3
    if not getattr(getattr(trainer, "accelerator", None), "is_main_process", True):
        return out  # one writer
    model.save_pretrained(str(out), **({} if state is None else {"state_dict": state}))
    tokenizer.save_pretrained(str(out))
    (out / "recipe.yaml").write_text(yaml.safe_dump(recipe.dump(), sort_keys=False))
    (out / "training_data.json").write_text(json.dumps(data_summary, indent=2, default=str))
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2, default=str))
    (out / CARD_FILE).write_text(model_card(recipe, data_summary, metrics))
    return out


def _versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in ("torch", "transformers", "trl", "peft", "datasets", "accelerate"):
        try:
            versions[name] = __import__(name).__version__
        except Exception:
            pass
    try:
        from .. import __version__

        versions["codeagent"] = __version__
    except Exception:
        pass
    return versions


def model_card(recipe: Recipe, data: dict, metrics: dict) -> str:
    lora = recipe.lora
    data_lines = {k: v for k, v in data.items() if k not in ("trajectory_ids", "pairs", "rollout_ids")}
    ids = data.get("trajectory_ids") or [pair[0] for pair in data.get("pairs", [])]
    front = {"base_model": recipe.model.base, "library_name": "peft",
             "tags": ["codeagent", recipe.method, "lora", "trl"]}
    recipe_yaml = yaml.safe_dump(recipe.dump(), sort_keys=False).rstrip()
    metric_lines = "\n".join(f"| {k} | {v} |" for k, v in metrics.items() if isinstance(v, (int, float, str)))
    return f"""---
{yaml.safe_dump(front, sort_keys=False).rstrip()}
---

# codeagent {recipe.method.upper()} adapter

{recipe.description or 'A LoRA adapter trained by `codeagent train`.'}

- **Method:** {recipe.method} (TRL), LoRA r={lora.r}, alpha={lora.alpha}, dropout={lora.dropout}, targets {lora.target_modules}
- **Base model:** `{recipe.model.base}`{f" (continued from adapter `{recipe.model.adapter}`)" if recipe.model.adapter else ""}
- **Recipe:** `{recipe.source or '(built in code)'}` (full text below and in `recipe.yaml`)
- **Made:** {datetime.now(timezone.utc).isoformat(timespec='seconds')}
- **Versions:** {', '.join(f'{k} {v}' for k, v in _versions().items())}

## Data

```json
{json.dumps(data_lines, indent=2, default=str)}
```

{len(ids)} trajectory ids are listed in `training_data.json`.

## Final metrics

| metric | value |
|---|---|
{metric_lines}

## Use

```
codeagent serve --model {recipe.model.base} --adapter PATH_TO_THIS_DIR
codeagent solve --model hf:PATH_TO_THIS_DIR ...
```

## Recipe

```yaml
{recipe_yaml}
```
"""


def run_trainer(build_trainer, recipe: Recipe, *, callbacks=(), store=None) -> Path:
    """Build a trainer with `build_trainer(recipe, callbacks=, store=)`, train, save the adapter and
    its card; returns the adapter's directory."""
    from .data import save_summary

    metrics = MetricsFile(Path(recipe.output_dir) / "metrics.jsonl")
    trainer, tokenizer, summary = build_trainer(recipe, callbacks=[metrics.callback, *callbacks], store=store)
    save_summary(summary, Path(recipe.output_dir) / "training_data.json")
    final = train(trainer, recipe, metrics)
    return save_adapter(trainer, tokenizer, recipe, summary, final)


def merge_adapter(adapter: str | Path, output_dir: str | Path) -> Path:
    """The base model with `adapter` folded into its weights, saved with the tokenizer to `output_dir`:
    a plain model that a new adapter can be trained on (e.g. GRPO on top of an SFT adapter with
    other LoRA targets) or that a server without LoRA support can load."""
    from ..models.errors import ModelConfigError
    from ..models.hf import load_model_and_tokenizer, resolve_base

    adapter = Path(adapter).expanduser()
    if not (adapter / "adapter_config.json").is_file():
        raise TrainError(f"no PEFT adapter at {adapter} (adapter_config.json is missing)")
    output_dir = Path(output_dir).expanduser()
    if output_dir.resolve() == adapter.resolve():
        raise TrainError(f"the merged model must go to another directory than the adapter ({adapter})")
    try:
        base, _ = resolve_base(str(adapter))
        model, tokenizer = load_model_and_tokenizer(base, str(adapter), merge=True, device="cpu")
    except ModelConfigError as error:
        raise TrainError(str(error)) from None
    output_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(output_dir)
    tokenizer.save_pretrained(output_dir)
    return output_dir
