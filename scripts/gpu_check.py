"""The first thing to run when a GPU is lent: every GPU path of the trainer that one GPU can exercise, in
minutes, one table at the end.

    bash scripts/gpu_check.sh OUT            # on the GPU machine (installs the carried wheels first, if any)
    python scripts/gpu_check.py --out OUT    # the same, in a Python that has torch, transformers, trl, peft
    python scripts/gpu_check.py --dry --out OUT   # on CPU: the same stages with CPU stand-ins (tests run it)

Stages (scripts/gpu_check_stages.py), each ok / skipped (what is missing) / FAILED (why), with its figures:
- environment: versions (torch, CUDA, vLLM, DeepSpeed, FlashAttention), the GPU;
- grpo step through the engine: two GRPO steps whose completions TRL's colocated vLLM samples through
  codeagent's generation path, the per-token correction measuring the engine/trainer gap; the second step's
  samples must come from the first step's weights (the weight sync);
- versions and adapter sync: async GRPO's two policy versions at once on `vllm serve`, a LoRA adapter each,
  each sampling with its own weights;
- memory phases: bench/gpu_grpo_step.py, one GRPO step of Qwen3-8B (random weights) at 2 x 16k tokens, each
  phase's peak memory beside the estimator's prediction.
--dry swaps vLLM for the batched transformers engine and local policy copies, and the 8B model for tiny
configs; the table says which ran. Results: OUT/gpu_check.json (after every stage) and OUT/gpu_check.txt.
Exit 0 when no stage failed (a skipped stage is not a failure: the table says what to install).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_check_stages import STAGES, Skipped  # noqa: E402


def table(results: dict) -> str:
    lines = [f"{'stage':<28} {'status':<8} {'seconds':>8}  figures"]
    for name, entry in results["stages"].items():
        figures = {k: v for k, v in entry.items() if k not in ("status", "seconds", "error", "trace")}
        text = entry.get("error") or ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
                                               for k, v in figures.items())
        lines.append(f"{name:<28} {entry['status']:<8} {entry['seconds']:>8.1f}  {text}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--dry", action="store_true", help="CPU stand-ins for the GPU parts (no GPU needed)")
    parser.add_argument("--only", action="append", default=[], choices=list(STAGES), help="run these stages only")
    parser.add_argument("--budget", type=float, default=420.0, help="seconds the memory stage may take")
    parser.add_argument("--device-gib", type=float, default=80.0, help="the device the estimator predicts for")
    args = parser.parse_args(argv)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    dry = args.dry or not torch.cuda.is_available()
    if dry:
        torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    args.out.mkdir(parents=True, exist_ok=True)
    context = SimpleNamespace(out=args.out.resolve(), dry=dry, budget=args.budget, device_gib=args.device_gib, note={})
    results: dict = {"dry": dry, "asked_dry": args.dry, "started": time.strftime("%Y-%m-%d %H:%M:%S"), "stages": {}}
    path = args.out / "gpu_check.json"
    for name, stage in STAGES.items():
        if args.only and name not in args.only:
            continue
        started = time.monotonic()
        try:
            entry = {"status": "ok", **stage(context)}
        except Skipped as why:
            entry = {"status": "skipped", "error": str(why)}
        except Exception as error:  # the next stages still run: one table says everything
            entry = {"status": "FAILED", "error": f"{type(error).__name__}: {str(error)[:300]}",
                     "trace": traceback.format_exc()[-4000:]}
        entry["seconds"] = round(time.monotonic() - started, 1)
        results["stages"][name] = entry
        path.write_text(json.dumps(results, indent=1, default=str))
        print(f"[gpu-check] {name}: {entry['status']} ({entry['seconds']} s)", file=sys.stderr, flush=True)
    text = table(results)
    if dry:
        text += "\n(dry: CPU stand-ins for vLLM and the GPU; nothing here measured a GPU)"
    (args.out / "gpu_check.txt").write_text(text + "\n")
    print(text)
    return 1 if any(entry["status"] == "FAILED" for entry in results["stages"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
