"""One GRPO optimizer step of a random-weight 7B/8B model on 16k-token multi-turn sequences, phase by
phase, with the peak GPU memory of each phase beside what `codeagent train grpo --dry-run` predicts.

On one H100 with no internet (torch, transformers, peft, accelerate there; the rest from bench/gpu_wheels.txt):

    bash bench/gpu_wheels.sh    # here, with PyPI: the wheels into .whl/
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl &&
    PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 python3 bench/gpu_grpo_step.py --out $OUT

(.whl/ is ignored by git: carry it to the GPU machine.) --models picks some, --budget bounds the seconds
per model (phases stop early, saying so), --group and --sequence change the shape; or, several models
and shapes in one invocation, repeat --run MODEL:GROUP:SEQUENCE[:BUDGET] (e.g. --run Qwen3-8B:2:32768
--run Qwen3-32B:2:8192:240; results keyed "Qwen3-8B 2x32768"). First an unmeasured warm-up (the first
model's architecture, tiny, on the device: CUDA context, cuBLAS, TRL's Triton kernels compiled), so the
first measured model's tokens/s is not the one that pays for it (--no-warmup skips it).

On CPU, in seconds (tests/train/test_gpu_script.py): python bench/gpu_grpo_step.py --tiny --out DIR

For each model (Qwen3-8B, Qwen2.5-Coder-7B-Instruct by default; Qwen3-32B: their config.json values in
bench/data/model_configs/):
- load: the bf16 model built from its config with random weights on the device (no download, no
  tokenizer from the hub), wrapped by TRL's GRPOTrainer with the LoRA of train/grpo-qwen7b.yaml and
  gradient checkpointing, its TRL config made by codeagent's trl_args from that recipe;
- logprobs: the old (proximal) per-token logprobs of every sequence of the group, no gradient (beta 0:
  no reference model), as train/grpo/offpolicy.py computes them (TRL's _get_per_token_logps_and_entropies);
- forward+backward: TRL's own GRPO loss (_compute_loss, dapo) on each sequence, one per micro-step as
  the recipe accumulates them, and its backward; tokens/s over the whole group;
- optimizer step: the optimizer TRL builds (create_optimizer), gradient clipping, step.
The sequences are scripted token ids shaped as a rollout returns them: a first prompt, then assistant
turns and tool observations chained by sequences.chain_steps (the observations masked out of the loss).
Each phase records torch.cuda.max_memory_allocated (the peak reset before it) and, from
codeagent.train.grpo.memory.estimate for the same recipe and shape, the terms that predict that phase
(memory.PHASE_TERMS) and their sum. Results go to OUT/gpu_grpo_step.json after every phase (a crash
keeps what was measured), the log to OUT/gpu_grpo_step.log; a table is printed last.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
CONFIGS = HERE / "data" / "model_configs"
MODELS = {"Qwen3-8B": "Qwen3-8B.json", "Qwen2.5-Coder-7B": "Qwen2.5-Coder-7B-Instruct.json",
          "Qwen3-32B": "Qwen3-32B.json"}
DEFAULT_MODELS = ("Qwen3-8B", "Qwen2.5-Coder-7B")
# --tiny: the same architectures scaled down, so that CPU runs the whole script in seconds.
TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            head_dim=16, vocab_size=2048, bos_token_id=1, eos_token_id=2)
GiB = 1 << 30


class Log:
    def __init__(self, path: Path):
        self.handle = path.open("a")

    def __call__(self, *parts) -> None:
        line = " ".join(str(p) for p in parts)
        print(line, flush=True)
        self.handle.write(line + "\n")
        self.handle.flush()


def scripted_steps(prompt: int, total: int, turn: int, observation: int, vocab: int, seed: int) -> list[dict]:
    """Recorded steps (what the local backend stores per model call) of one multi-turn run: a first prompt
    of `prompt` tokens, then assistant turns of `turn` tokens each followed by an observation of `observation`
    tokens (tool output and template glue), `total` tokens in all."""
    import random

    rng = random.Random(seed)

    def ids(n: int) -> list[int]:
        return [rng.randrange(16, vocab) for _ in range(n)]

    steps, context = [], ids(prompt)
    while True:
        room = total - len(context)
        reply = ids(min(turn, room))
        steps.append({"prompt_token_ids": list(context), "token_ids": reply,
                      "logprobs": [-1.0] * len(reply), "finish_reason": "stop"})
        context = context + reply
        room = total - len(context)
        if room <= 0:
            return steps
        context = context + ids(min(observation, room - 1))  # at least one token of the next reply


def model_config(name: str, tiny: bool) -> dict:
    config = json.loads((CONFIGS / MODELS[name]).read_text())
    if tiny:
        config.update(TINY)
    return config


def load_recipe_for(config_dir: Path, completion: int, group: int, cuda: bool, out_dir: Path):
    from codeagent.train.recipe import load_recipe

    overrides = [f"model.base={config_dir}", "model.adapter=null", f"model.dtype={'bfloat16' if cuda else 'float32'}",
                 "rollout.generation=transformers", f"trainer.max_completion_length={completion}",
                 f"trainer.num_generations={group}", f"trainer.gradient_accumulation_steps={group}",
                 "trainer.per_device_train_batch_size=1", f"trainer.bf16={'true' if cuda else 'false'}",
                 "trainer.save_steps=1000000", f"output_dir={out_dir}"]
    return load_recipe("grpo-qwen7b", overrides, method="grpo")


def build_model(config: dict, device: str, dtype):
    """The model with random weights, made on the device (initialized there: no host copy of 16 GB)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.for_model(**{k: v for k, v in config.items() if k not in ("architectures", "torch_dtype")})
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    return model


def reward(completions, **_):
    return [0.0 for _ in completions]


def build_trainer(model, recipe, vocab: int):
    from datasets import Dataset
    from datasets.table import InMemoryTable
    from trl import GRPOTrainer

    from codeagent.train.modeling import peft_config_for, trl_args
    from codeagent.train.tiny import build_tokenizer

    tokenizer = build_tokenizer(["def f(x):\n    return x + 1\n"], vocab_size=300)  # ids are scripted; TRL wants one
    args = trl_args(recipe, temperature=recipe.rollout.temperature, reward_weights=[1.0], disable_dropout=True)
    # Never iterated (no generation). Given a fingerprint: computing one pickles pyarrow types, which fails with
    # the older pyarrow a GPU machine may have (datasets 5.2 wants >= 24; 21 fails there).
    rows = [{"prompt": "task"} for _ in range(int(recipe.trainer["num_generations"]))]
    dataset = Dataset(InMemoryTable.from_pylist(rows), fingerprint="gpu-grpo-step")
    trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=args, train_dataset=dataset,
                          processing_class=tokenizer, peft_config=peft_config_for(model, recipe))
    if args.activation_checkpointing:  # what Trainer.train() does before its first step
        options = dict(args.activation_checkpointing_kwargs or {})
        every, offload = options.pop("every_n_layers", 1), options.pop("offload", False)
        trainer.model.activation_checkpointing_enable(activation_checkpointing_kwargs=options or None,
                                                      every_n_layers=every, offload=offload)
    trainer.current_gradient_accumulation_steps = args.gradient_accumulation_steps  # set by train() too
    return trainer


class Phases:
    """Runs phases, each with its peak memory, seconds and the estimator's prediction; saves as it goes."""

    def __init__(self, record: dict, save, log, device: str, estimate: dict | None):
        self.record, self.save, self.log, self.device, self.estimate = record, save, log, device, estimate

    def run(self, name: str, body) -> bool:
        import torch

        from codeagent.train.grpo.memory import phase_prediction

        entry: dict = {"phase": name}
        self.record["phases"].append(entry)
        cuda = self.device == "cuda"
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        ok = True
        try:
            entry.update(body() or {})
        except Exception as error:
            ok = False
            entry["error"] = f"{type(error).__name__}: {str(error)[:500]}"
            self.log(f"  {name}: FAILED {entry['error']}")
            self.log(traceback.format_exc()[-3000:])
        if cuda:
            torch.cuda.synchronize()
            entry["max_allocated_gib"] = torch.cuda.max_memory_allocated() / GiB
            entry["max_reserved_gib"] = torch.cuda.max_memory_reserved() / GiB
            entry["allocated_after_gib"] = torch.cuda.memory_allocated() / GiB
        entry["seconds"] = time.perf_counter() - start
        if self.estimate is not None:
            entry.update(phase_prediction(self.estimate, name))
        self.save()
        shown = {k: (round(v, 2) if isinstance(v, float) else v) for k, v in entry.items() if k != "predicted_terms"}
        self.log(f"  {name}: {shown}")
        return ok


def run_model(name: str, args, record: dict, save, log) -> None:
    import torch

    from codeagent.train.grpo.memory import estimate
    from codeagent.train.sequences import chain_steps

    cuda = args.device == "cuda"
    if cuda:  # what an earlier model left (each phase's peak includes it)
        record["allocated_at_start_gib"] = torch.cuda.memory_allocated() / GiB
    config = model_config(name, args.tiny)
    started = time.monotonic()
    over = lambda: time.monotonic() - started > args.budget  # noqa: E731
    work = Path(tempfile.mkdtemp(prefix=f"gpu-grpo-{name}-"))
    (work / "config.json").write_text(json.dumps(config))
    prompt = args.prompt_tokens
    completion = args.sequence - prompt
    recipe = load_recipe_for(work, completion, args.group, cuda, work / "run")
    record["recipe"] = {"lora_r": recipe.lora.r, "targets": recipe.lora.target_modules,
                        "loss_type": recipe.trainer.get("loss_type"), "group": args.group, "sequence": args.sequence,
                        "prompt_tokens": prompt, "max_completion_length": completion}
    values = None
    try:
        values = estimate(recipe, prompt_tokens=prompt, device_gib=args.device_gib)
        record["estimate"] = dict(values)
    except Exception as error:  # measure anyway
        record["estimate_error"] = f"{type(error).__name__}: {error}"
        log(f"  estimate FAILED: {record['estimate_error']}")
    phases = Phases(record, save, log, args.device, values)
    dtype = torch.bfloat16 if cuda else torch.float32
    state: dict = {}

    def load():
        model = build_model(config, args.device, dtype)
        state["trainer"] = trainer = build_trainer(model, recipe, config["vocab_size"])
        state["model"] = trainer.model
        params = sum(p.numel() for p in trainer.model.parameters())
        trainable = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
        return {"parameters": params, "trainable": trainable,
                "activation_checkpointing": bool(getattr(trainer.model, "is_activation_checkpointing", False)),
                "model_device": str(next(trainer.model.parameters()).device)}

    if not phases.run("load", load):
        return
    trainer, model = state["trainer"], state["model"]
    sequences = [chain_steps(scripted_steps(prompt, args.sequence, args.turn, args.observation,
                                            config["vocab_size"], seed)) for seed in range(args.group)]
    device = next(model.parameters()).device
    batches = []
    for index, sequence in enumerate(sequences):
        tensor = lambda values: torch.tensor([values], device=device)  # noqa: E731
        batches.append({"prompt_ids": tensor(sequence.prompt_ids),
                        "prompt_mask": torch.ones(1, len(sequence.prompt_ids), device=device, dtype=torch.long),
                        "completion_ids": tensor(sequence.completion_ids),
                        "completion_mask": torch.ones(1, len(sequence.completion_ids), device=device, dtype=torch.long),
                        "tool_mask": tensor(sequence.mask),
                        "advantages": torch.tensor([1.0 if index % 2 else -1.0], device=device)})
    written = sum(sum(s.mask) for s in sequences)
    for batch in batches:
        batch["num_items_in_batch"] = torch.tensor(float(written), device=device)
    record["sequences"] = {"count": len(sequences), "tokens_each": [len(s) for s in sequences],
                           "model_written_tokens": written,
                           "observation_tokens": sum(len(s.mask) - sum(s.mask) for s in sequences)}

    def logprobs():
        from trl.models.utils import disable_gradient_checkpointing

        done, tokens = 0, 0
        start = time.perf_counter()
        with torch.no_grad(), disable_gradient_checkpointing(model, trainer.args.gradient_checkpointing_kwargs):
            for batch in batches:
                if over():
                    break
                ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
                attention = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
                logps, _, _ = trainer._get_per_token_logps_and_entropies(
                    model, ids, attention, batch["completion_ids"].size(1), batch_size=1)
                batch["old_per_token_logps"] = logps
                done += 1
                tokens += ids.size(1)
        if cuda:
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        result = {"sequences_done": done, "tokens": tokens, "tokens_per_s": tokens / seconds if seconds else 0.0}
        if done < len(batches):
            result["stopped"] = "time budget"
        return result

    phases.run("logprobs", logprobs)

    def forward_backward():
        model.train()
        done, tokens, losses = 0, 0, []
        start = time.perf_counter()
        for batch in batches:
            if over():
                break
            loss = trainer._compute_loss(model, batch)
            trainer.accelerator.backward(loss)
            losses.append(float(loss.detach()))
            done += 1
            tokens += batch["prompt_ids"].size(1) + batch["completion_ids"].size(1)
        if not done:
            raise TimeoutError("the time budget ran out before the first sequence (no optimizer step without gradients)")
        if cuda:
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        grads = [p.grad for p in model.parameters() if p.requires_grad]
        result = {"sequences_done": done, "tokens": tokens, "tokens_per_s": tokens / seconds if seconds else 0.0,
                  "losses": losses, "grads_finite": all(g is not None and bool(torch.isfinite(g).all()) for g in grads),
                  "grads_nonzero": any(g is not None and bool(g.abs().sum() > 0) for g in grads)}
        if done < len(batches):
            result["stopped"] = "time budget"
        return result

    if not phases.run("forward+backward", forward_backward):
        return

    def optimizer_step():
        optimizer = trainer.create_optimizer()
        norm = trainer.accelerator.clip_grad_norm_(model.parameters(), trainer.args.max_grad_norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return {"optimizer": type(optimizer).__name__, "grad_norm": float(norm)}

    phases.run("optimizer step", optimizer_step)
    record["model_seconds"] = time.monotonic() - started


def environment(device: str) -> dict:
    import torch

    info: dict = {"python": sys.version.split()[0], "device": device}
    for module in ("torch", "transformers", "trl", "peft", "accelerate", "datasets"):
        try:
            info[module] = __import__(module).__version__
        except Exception as error:
            info[module] = f"missing: {error}"
    if device == "cuda":
        info["gpu"] = torch.cuda.get_device_name(0)
        info["gpu_total_gib"] = torch.cuda.get_device_properties(0).total_memory / GiB
    return info


def table(results: dict) -> str:
    lines = [f"{'model':<18} {'phase':<17} {'peak GiB':>9} {'pred GiB':>9} {'ratio':>6} {'s':>7} {'tok/s':>8}  note"]
    for name, record in results["models"].items():
        for phase in record.get("phases", []):
            peak, pred = phase.get("max_allocated_gib"), phase.get("predicted_gib")
            ratio = f"{peak / pred:6.2f}" if peak and pred else "     -"
            note = phase.get("error") or phase.get("stopped") or ""
            lines.append(f"{name:<18} {phase['phase']:<17} {peak if peak is not None else float('nan'):9.2f} "
                         f"{pred if pred is not None else float('nan'):9.2f} {ratio} {phase['seconds']:7.1f} "
                         f"{phase.get('tokens_per_s', 0.0):8.0f}  {note[:60]}")
        if record.get("error"):
            lines.append(f"{name:<18} FAILED: {record['error'][:100]}")
    return "\n".join(lines)


def shape_of(text: str, args) -> argparse.Namespace:
    """One run: MODEL[:GROUP[:SEQUENCE[:BUDGET]]], the rest from the command line's defaults."""
    model, *rest = text.split(":")
    if model not in MODELS or len(rest) > 3:
        raise SystemExit(f"bad run {text!r}: MODEL[:GROUP[:SEQUENCE[:BUDGET]]], MODEL one of {', '.join(MODELS)}")
    group = int(rest[0]) if rest else args.group or (2 if args.tiny else 4)
    sequence = int(rest[1]) if len(rest) > 1 else args.sequence or (512 if args.tiny else 16384)
    budget = float(rest[2]) if len(rest) > 2 else args.budget
    if group < 2:
        raise SystemExit(f"bad run {text!r}: GRPO needs a group of at least 2 completions")
    # One rollout's shape: a first prompt (system, tools, task), then turns of reply + tool output.
    turn, observation = (32, 64) if args.tiny else (256, 768)
    return argparse.Namespace(model=model, group=group, sequence=sequence, budget=budget, prompt_tokens=sequence // 8,
                              turn=turn, observation=observation, tiny=args.tiny, device=args.device,
                              device_gib=args.device_gib)


def run_one(run, record: dict, save, log) -> None:
    import torch

    try:
        run_model(run.model, run, record, save, log)
    except Exception as error:
        record["error"] = f"{type(error).__name__}: {str(error)[:500]}"
        log(f"  FAILED {record['error']}")
        log(traceback.format_exc()[-3000:])
    finally:
        gc.collect()
        if run.device == "cuda":
            torch.cuda.empty_cache()
    save()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder for gpu_grpo_step.json and gpu_grpo_step.log")
    parser.add_argument("--tiny", action="store_true", help="scaled-down configs and 512-token sequences (CPU test)")
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS), help=f"comma-separated, of {', '.join(MODELS)}")
    parser.add_argument("--run", action="append", default=[], metavar="MODEL:GROUP:SEQUENCE[:BUDGET]",
                        help="one model at one shape (repeatable, in order; replaces --models/--group/--sequence)")
    parser.add_argument("--device", default="auto", choices=("auto", "cuda", "cpu"))
    parser.add_argument("--group", type=int, default=None, help="completions per group (default 4; --tiny 2)")
    parser.add_argument("--sequence", type=int, default=None, help="tokens per sequence (default 16384; --tiny 512)")
    parser.add_argument("--budget", type=float, default=150.0, help="seconds per model before phases stop early")
    parser.add_argument("--device-gib", type=float, default=80.0)
    parser.add_argument("--no-warmup", dest="warmup", action="store_false",
                        help="skip the unmeasured tiny run first (CUDA context, cuBLAS, TRL's Triton kernels)")
    args = parser.parse_args(argv)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = Log(out / "gpu_grpo_step.log")
    import torch

    args.device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    runs = [shape_of(text, args) for text in args.run] or [
        shape_of(name.strip(), args) for name in args.models.split(",") if name.strip()]
    results: dict = {"environment": environment(args.device), "tiny": args.tiny, "models": {}}
    path = out / "gpu_grpo_step.json"

    def save() -> None:
        temp = path.with_suffix(".tmp")
        temp.write_text(json.dumps(results, indent=1, default=str))
        temp.replace(path)

    log("environment:", results["environment"])
    save()
    if args.warmup:  # unmeasured: the first measured model would pay for compiling and initialising otherwise
        warm = argparse.Namespace(**{**vars(runs[0]), "tiny": True, "group": 2, "sequence": 512, "budget": 120.0})
        warm.prompt_tokens, warm.turn, warm.observation = 64, 32, 64
        results["warmup"] = {"phases": []}
        log(f"warm-up ({warm.model}, tiny):")
        run_one(warm, results["warmup"], save, log)
    for run in runs:
        key = run.model if not args.run else f"{run.model} {run.group}x{run.sequence}"
        results["models"][key] = record = {"phases": []}
        log(f"{key}:")
        run_one(run, record, save, log)
    text = table(results)
    log(text)
    failed = any(r.get("error") or any(p.get("error") for p in r.get("phases", [])) for r in results["models"].values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
