"""Whether a GRPO recipe can run on a layout at all, before memory is counted: one rule per route that the
run itself enforces (each check is called where the run meets it, and all of them by `train grpo --dry-run`,
so the dry run never says "fits" for a configuration the run would refuse).

Each function returns why not (a message naming the knob), or None.
"""

from __future__ import annotations

from ..recipe import Recipe, cispo_cap


def vllm_route(mode: str, processes: int, tensor_parallel: int = 1, sleep_mode: bool = False) -> str | None:
    """Synchronous GRPO's agent rollouts through TRL's vLLM (generation.VLLMGenerator): ranks run different
    numbers of turns, so no generation step may be collective across them."""
    if mode == "server" and processes > 1:
        return (f"vLLM server mode with {processes} training processes is not supported for agent rollouts: "
                "TRL's generation step is collective (every rank must join each call) and ranks run different "
                "numbers of turns, so it would hang. Use vllm_mode: colocate (one engine per rank), or one process")
    if mode == "colocate" and tensor_parallel > 1:
        return ("vLLM colocate mode with vllm_tensor_parallel_size > 1 is not supported for agent rollouts: each "
                "generate call all-gathers over the tensor-parallel group, which would hang when ranks run "
                "different numbers of turns. Use vllm_tensor_parallel_size: 1")
    if sleep_mode:
        return ("vLLM sleep mode is not supported for agent rollouts (the engine is used between TRL's own "
                "generation steps): set vllm_enable_sleep_mode: false")
    return None


def top_p_convention(top_p: float | None, route: str) -> str | None:
    """The trainer's logprobs are log-softmax(logits / temperature) over the whole vocabulary, before top-p, as
    the transformers engine records them (models/batching.py). vLLM's, TRL's colocated engine and `vllm serve`
    alike (`processed_logprobs`), are taken after top-p, renormalized over the nucleus: with top_p < 1 every
    token's ratio would be off by the nucleus's mass, a bias the correction would then amplify."""
    if top_p is None or float(top_p) >= 1.0 or route == "transformers":
        return None
    return (f"rollout.top_p={top_p} with {route} sampling: vLLM's logprobs are taken after top-p (renormalized "
            "over the nucleus) while the trainer's are over the whole vocabulary, so the importance ratio of "
            "every token would be off by the nucleus's mass. Leave rollout.top_p unset (1.0), or sample with "
            "rollout.generation: transformers (whose logprobs are the trainer's convention)")


def one_process(what: str, processes: int) -> str | None:
    if processes <= 1:
        return None
    reasons = {
        "asynchronous": "rollout.asynchronous runs in one training process for now (its rollout workers and policy "
                        "copies live in it); launch without accelerate's multi-process configs",
        "dynamic_sampling": "rollout.dynamic_sampling runs in one training process for now (each rank holds part of "
                            "a group, and ranks would refill different numbers of groups); set it to 0",
    }
    return reasons[what]


def transformers_route(strategy: str, processes: int, gather: bool) -> str | None:
    """Transformers generation on several processes: the weights must be whole on each rank while it generates
    (generation.generation_weights)."""
    if processes <= 1:
        return None
    if strategy == "zero3" and not gather:
        return ("ZeRO-3 with ds3_gather_for_generation: false cannot run agent rollouts on several processes: every "
                "forward pass would gather weights collectively while ranks run different numbers of turns (a "
                "hang). Set trainer.ds3_gather_for_generation: true, or use vLLM")
    if strategy.startswith("fsdp"):
        return ("FSDP cannot run agent rollouts with transformers generation on several processes: its forward "
                "passes gather weights collectively while ranks run different numbers of turns (a hang). Use "
                "DeepSpeed ZeRO-3 (train/accelerate/deepspeed-zero3.yaml), whose weights are gathered once per "
                "rollout batch, or vLLM generation")
    return None


def sampling_route(recipe: Recipe, *, gpu: bool = True) -> str:
    """How the rollouts would sample on a machine with a GPU and vLLM installed: `transformers`, `vllm` (TRL's
    engine) or `vllm serve` (async GRPO's served versions)."""
    settings = recipe.rollout
    if settings.asynchronous:
        return "vllm serve" if settings.served else "transformers"
    if settings.generation == "vllm" or (settings.generation == "auto" and gpu):
        return "vllm"
    return "transformers"


def problems(recipe: Recipe, *, processes: int, strategy: str) -> list[str]:
    """Every reason the recipe cannot run with `processes` training processes under `strategy` (memory.Layout's)."""
    trainer = recipe.trainer
    route = sampling_route(recipe)
    found = [cispo_cap(trainer), top_p_convention(recipe.rollout.top_p, route)]
    if route == "vllm":
        found.append(vllm_route(str(trainer.get("vllm_mode", "colocate")), processes,
                                int(trainer.get("vllm_tensor_parallel_size", 1) or 1),
                                bool(trainer.get("vllm_enable_sleep_mode", False))))
    elif not recipe.rollout.asynchronous:
        found.append(transformers_route(strategy, processes, bool(trainer.get("ds3_gather_for_generation", True))))
    if recipe.rollout.asynchronous:
        found.append(one_process("asynchronous", processes))
    if recipe.rollout.dynamic_sampling:
        found.append(one_process("dynamic_sampling", processes))
    return [problem for problem in found if problem]
