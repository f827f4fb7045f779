"""The policy's generation while rollouts run: the trainer's weights whole on each process
(`generation_weights`), vLLM's weights synced (`sync_vllm_weights`), and TRL's vLLM engine behind the
batched Model front (`VLLMGenerator`)."""

from __future__ import annotations

from contextlib import contextmanager

from ...models.batching import BatchingFront
from ...models.errors import ContextWindowExceeded
from .. import TrainError
from .runnable import transformers_route, vllm_route


def sync_vllm_weights(trainer) -> None:
    """vLLM generates with the weights of the current step: TRL syncs them before it calls the rollout
    function at a new step, but the held-out evaluation runs after the optimizer step, outside it; this
    does the same sync, under the same condition (TRL's `_last_loaded_step`), so it is never done twice.
    Every rank comes here (the sync gathers weights collectively under ZeRO-3)."""
    if not getattr(trainer, "use_vllm", False):
        return
    step = getattr(getattr(trainer, "state", None), "global_step", None)
    if step is None or getattr(trainer, "_last_loaded_step", None) == step:
        return
    trainer.vllm_generation.sync_weights()
    trainer._last_loaded_step = step


@contextmanager
def generation_weights(trainer):
    """The trainer's model, unwrapped, with all its weights on this process while the rollouts generate.

    Under DeepSpeed ZeRO-3 every rank holds a shard of each weight and a forward pass all-gathers each
    layer's weights from every rank: a collective that all ranks must enter in step, while agent runs on
    different ranks take different numbers of turns of different lengths: it would hang. So the weights
    are gathered once for the whole generation batch (TRL's `unwrap_model_for_generation` with
    `gather_deepspeed3_params`, as its own GRPO generation does: DeepSpeed's GatheredParameters, with the
    ZeRO-3 forward hooks removed), after which every forward is local to the rank. The gather is the one
    collective here, entered once per rollout call by every rank. Refused, with the knob named: ZeRO-3
    with `ds3_gather_for_generation: false` and FSDP, with more than one process (their forward passes
    stay collective). vLLM generation needs none of this (its engine has its own copy of the weights,
    synced by TRL). Gradient checkpointing is switched off while generating (TRL's helper does it).
    Only the single-process path runs here (no GPU, no deepspeed package): the ZeRO-3 path is tested
    against a stand-in accelerator state and a stand-in deepspeed module, never on GPUs."""
    if not hasattr(trainer, "accelerator") or getattr(trainer, "use_vllm", False):
        yield None
        return
    from trl.distributed import DistributedBackend
    from trl.models import unwrap_model_for_generation

    accelerator = trainer.accelerator
    backend = DistributedBackend(accelerator)
    args = getattr(trainer, "args", None)
    gather = bool(getattr(args, "ds3_gather_for_generation", True))
    processes = int(getattr(accelerator, "num_processes", 1) or 1)
    strategy = "zero3" if backend.is_zero3 else "fsdp" if backend.is_fsdp else "ddp"
    problem = transformers_route(strategy, processes, gather)
    if problem:
        raise TrainError(problem)
    wrapped = getattr(trainer, "model_wrapped", None) or trainer.model
    with unwrap_model_for_generation(wrapped, accelerator, gather_deepspeed3_params=gather,
                                     gradient_checkpointing_kwargs=getattr(args, "gradient_checkpointing_kwargs",
                                                                           None)) as model:
        yield model


class VLLMGenerator(BatchingFront):
    """Generation through TRL's vLLM engine (`use_vllm=True`; TRL syncs the LoRA weights into it before
    each rollout batch), batched like the transformers engine: concurrent agent turns are gathered
    (models/batching.py) and sent to vLLM in one call, each with its own max_tokens (the per-turn
    limit), temperature, top_p, seed and stop tokens.

    It does not go through TRL's `VLLMGeneration.generate`: that is a collective step (server mode
    gathers every rank's prompts and broadcasts the results; colocate mode with tensor parallelism
    all-gathers over the TP group) which all ranks must enter the same number of times, while agent
    runs on different ranks take different numbers of turns: with more than one rank it would hang.
    Instead: colocate mode calls this rank's own engine (`llm.generate`, no collective), and server
    mode calls the server from this process, which TRL only connects on the main process, so server
    mode is refused with more than one process, as is colocate mode with tensor_parallel_size > 1.
    Needs the `vllm` package and a GPU, or vLLM's CPU build (vllm_cpu.py), on which CI runs it for real
    (tests/train/test_vllm_cpu.py); tests/train/test_vllm_sync.py drives it with a stand-in engine."""

    def __init__(self, trainer, *, max_batch: int = 256):
        super().__init__(max_batch=max_batch, name="vllm")
        self.vllm = trainer.vllm_generation
        self.mode = getattr(self.vllm, "mode", "colocate")
        processes = int(getattr(getattr(trainer, "accelerator", None), "num_processes", 1) or 1)
        problem = vllm_route(self.mode, processes, int(getattr(self.vllm, "tensor_parallel_size", 1) or 1),
                             bool(getattr(self.vllm, "enable_sleep_mode", False)))
        if problem:
            raise TrainError(problem)
        self.max_model_len = _max_model_len(self.vllm)
        # the rank's own GPU: the worker thread would otherwise make its CUDA context on GPU 0 (torch's
        # current device is per thread), on every rank
        device = getattr(getattr(trainer, "accelerator", None), "device", None)
        self.cuda_device = device if getattr(device, "type", None) == "cuda" else None

    def run_batch(self, requests) -> None:
        if self.cuda_device is not None:
            import torch

            torch.cuda.set_device(self.cuda_device)
        requests = [request for request in requests if self._fits(request)]
        if not requests:
            return
        if self.mode == "server":
            self._run_server(requests)
        else:
            self._run_colocate(requests)

    def _fits(self, request) -> bool:
        """A prompt vLLM would refuse (not shorter than max_model_len) fails its own turn only, not the
        batch's; the others' limits are cut to the room left."""
        if not self.max_model_len:
            return True
        room = self.max_model_len - len(request.prompt_ids)
        if room < 1:
            request.error = ContextWindowExceeded(
                f"vllm: the prompt has {len(request.prompt_ids)} tokens; vLLM's max_model_len is {self.max_model_len}")
            return False
        request.max_new_tokens = min(request.max_new_tokens, room)
        return True

    def _run_colocate(self, requests) -> None:
        from vllm import SamplingParams

        params = [SamplingParams(n=1, temperature=r.temperature, top_p=r.top_p or 1.0, max_tokens=r.max_new_tokens,
                                 seed=r.seed, logprobs=0, stop_token_ids=sorted(r.stop_ids)) for r in requests]
        outputs = self.vllm.llm.generate([{"prompt_token_ids": r.prompt_ids} for r in requests],
                                         sampling_params=params, use_tqdm=False)
        for request, output in zip(requests, outputs, strict=True):
            sample = output.outputs[0]
            ids = list(sample.token_ids)
            values = [float(entry[token].logprob) for token, entry in zip(ids, sample.logprobs or [])]
            _fill(request, ids, values)

    def _run_server(self, requests) -> None:
        groups: dict[tuple, list] = {}
        for request in requests:  # the client takes one set of sampling settings per call
            groups.setdefault((request.temperature, request.top_p or 1.0), []).append(request)
        for (temperature, top_p), group in groups.items():
            output = self.vllm.vllm_client.generate(
                prompts=[r.prompt_ids for r in group], n=1, temperature=temperature, top_p=top_p,
                max_tokens=max(r.max_new_tokens for r in group), logprobs=0)
            for request, ids, values in zip(group, output["completion_ids"], output["logprobs"], strict=True):
                values = [float(v[0]) if isinstance(v, (list, tuple)) else float(v) for v in values]
                _fill(request, list(ids), values)


def _max_model_len(vllm) -> int | None:
    """The engine's context length: TRL's vllm_max_model_length, else what vLLM derived from the model."""
    length = getattr(vllm, "max_model_length", None)
    if not length:
        engine = getattr(getattr(vllm, "llm", None), "llm_engine", None)
        config = getattr(engine, "model_config", None) or getattr(getattr(engine, "vllm_config", None),
                                                                  "model_config", None)
        length = getattr(config, "max_model_len", None)
    return int(length) if isinstance(length, int) and length > 0 else None


def release_conversation(policy, steps) -> None:
    """The run is over: the engine's prompt cache lets go of its conversation's KV."""
    release = getattr(policy, "release", None)
    last = next((step for step in reversed(steps) if getattr(step, "token_ids", None)), None)
    if release is not None and last is not None and last.prompt_token_ids:
        release(list(last.prompt_token_ids) + list(last.token_ids))


def _fill(request, ids: list[int], logprobs: list[float]) -> None:
    """A request's result from what the engine sampled, cut at its own limit and first stop token (a
    prefix of a sample is what sampling with that limit or stop would have produced)."""
    end = min(len(ids), request.max_new_tokens)
    stop = next((i for i, token in enumerate(ids[:end]) if token in request.stop_ids), None)
    if stop is not None:
        end = stop + 1
    request.ids, request.logprobs = ids[:end], logprobs[:end]
    request.stopped = stop is not None
