"""The memory estimator (`train grpo --dry-run`, codeagent/train/grpo/memory.py) on the way to 32B: the full-model
gather of vLLM's weight sync under ZeRO-3, async GRPO's policy copies, a colocated engine too small for the
model, Qwen3-32B's shape and the layout it fits, and the per-phase terms the GPU script compares with."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codeagent.models.batching import DEFAULT_KV_CACHE_BYTES
from codeagent.train import TrainError
from codeagent.train.grpo.memory import (
    PHASE_TERMS,
    GiB,
    Layout,
    check_fits,
    estimate,
    phase_prediction,
    report,
)
from codeagent.train.recipe import load_recipe

WEIGHTS = (2 * 36864 + 64000) * 2  # the 2-layer model below in bf16 (tests/train/test_train_hygiene.py computes it)
LORA = 2 * 2 * (64 + 64)  # r=2 on q_proj of 2 layers: 512 trainable parameters
ZERO3 = Layout(4, "zero3", source="test")


@pytest.fixture
def small(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({
        "hidden_size": 64, "num_hidden_layers": 2, "intermediate_size": 128, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 1000, "tie_word_embeddings": True}))

    def recipe(*overrides: str):
        return load_recipe("grpo-tiny", [f"model.base={tmp_path}", "model.dtype=bfloat16", "lora.r=2",
                                         "lora.target_modules=[q_proj]", "trainer.per_device_train_batch_size=1",
                                         "trainer.max_completion_length=100", "trainer.optim=adamw_torch",
                                         *overrides])
    return recipe


def test_vllm_weight_sync_under_zero3_gathers_the_whole_model_beside_the_engine(small):
    recipe = small("rollout.generation=vllm", "trainer.vllm_gpu_memory_utilization=0.25")
    values = estimate(recipe, prompt_tokens=28, layout=ZERO3, device_gib=1.0)
    assert values["weights"] * GiB == pytest.approx(WEIGHTS / 4)
    assert values["weights (sync gather)"] * GiB == pytest.approx(WEIGHTS)  # whole, not a quarter
    vllm = 0.25 * GiB
    assert values["generation"] * GiB == pytest.approx(WEIGHTS + LORA * 16 / 4 + vllm + values["overhead"] * GiB)
    assert "weight sync (vLLM" in report(values)
    ddp = estimate(recipe, prompt_tokens=28, layout=Layout(4, "ddp"), device_gib=1.0)
    assert "weights (sync gather)" not in ddp and ddp["generation"] == 0  # the weights are whole already


def test_async_grpo_counts_its_policy_copies_and_their_cache_in_the_training_phase(small):
    values = estimate(small("rollout.asynchronous=true", "rollout.workers=3"), prompt_tokens=28)
    assert values["policy_copies"] == 3  # current + max_staleness (1) + 1 generation batches in flight
    assert values["policy copies"] * GiB == pytest.approx(3 * (WEIGHTS + LORA * 4))
    # 3 conversations x 128 tokens x 2 layers x (keys, values) x 2 kv heads x 16 dims x 2 bytes; a prompt cache per copy
    assert values["kv cache"] * GiB == pytest.approx(3 * 128 * 2 * 2 * 2 * 16 * 2 + 3 * DEFAULT_KV_CACHE_BYTES)
    assert values["generation"] == 0 and values["vllm"] == 0  # async samples with transformers, during training
    summed = sum(values[name] for name in ("weights", "lora+optimizer", "gather buffer", "activations", "logits",
                                           "policy copies", "kv cache", "prefill"))
    assert values["training"] == pytest.approx(summed + values["overhead"])
    assert "3 copies of the policy" in report(values)
    more = estimate(small("rollout.asynchronous=true", "rollout.buffer_batches=4"), prompt_tokens=28)
    assert more["policy_copies"] == 5
    stale = estimate(small("rollout.asynchronous=true", "rollout.max_staleness=30"), prompt_tokens=28, device_gib=40)
    assert stale["policy_copies"] == 32  # 32 engines, each with its prompt cache: 64 GiB
    with pytest.raises(TrainError, match="training is the peak.*kv cache .*policy copies .*lower rollout.max_staleness"):
        check_fits(stale)


def test_qwen3_32b_memory_on_eight_gpus_fits_only_with_a_vllm_server_which_sync_grpo_refuses():
    """The memory alone fits with vLLM on a server; the route itself (several training processes talking to one
    server) is refused by the run and so by the dry run (tests/train/test_train_routes.py)."""
    from codeagent.train.grpo import runnable

    base = ["model.base=Qwen/Qwen3-32B", "model.adapter=null", "trainer.max_completion_length=12288"]
    served_recipe = load_recipe("grpo-qwen7b-8gpu", [*base, "trainer.vllm_mode=server"])
    served = estimate(served_recipe)
    assert served["parameters_b"] == pytest.approx(32.76, abs=0.01)
    assert served["weights (sync gather)"] > 60 and served["total"] <= 80  # the sync is the peak, and it fits
    check_fits(served)
    assert "server mode with 8 training processes" in runnable.problems(served_recipe, processes=8, strategy="zero3")[0]
    with pytest.raises(TrainError, match="colocated vLLM engine gets 24.0 GiB .* weights alone are 61.0 GiB"):
        check_fits(estimate(load_recipe("grpo-qwen7b-8gpu", base)))
    with pytest.raises(TrainError, match="weights \\(61.0 GiB\\): shard the model"):
        check_fits(estimate(load_recipe("grpo-qwen7b-8gpu", [*base, "trainer.vllm_mode=server"]),
                            layout=Layout(8, "ddp")))


def test_each_measured_phase_is_predicted_by_named_terms(small):
    values = estimate(small(), prompt_tokens=28)
    for phase, names in PHASE_TERMS.items():
        prediction = phase_prediction(values, phase)
        assert list(prediction["predicted_terms"]) == list(names)
        assert prediction["predicted_gib"] == pytest.approx(
            sum(max(values[part] for part in name.split("|")) for name in names))
    # the finer LoRA terms add up to the reported lora+optimizer
    assert values["lora weights"] + values["lora grads"] + values["optimizer state"] == pytest.approx(
        values["lora+optimizer"])
    assert values["lora weights"] * GiB == pytest.approx(LORA * 4)


RESULTS = Path(__file__).parent.resolve().parent.parent / "bench" / "results"
# run1 (G=4 x 16k, two models) is what the estimator was calibrated on; run2 (other shapes and Qwen3-32B,
# run after the calibration was committed) is the held-out check of it.
MEASURED = RESULTS / "gpu_grpo_step_h100_run1.json"
HELD_OUT = RESULTS / "gpu_grpo_step_h100_run2.json"


def measured_recipe(tmp_path, name: str, config: dict, record: dict):
    """The recipe bench/gpu_grpo_step.py measured with (its load_recipe_for), for the model's config."""
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    shape = record["recipe"]
    return load_recipe("grpo-qwen7b", [f"model.base={folder}", "model.adapter=null", "model.dtype=bfloat16",
                                       "rollout.generation=transformers",
                                       f"trainer.max_completion_length={shape['max_completion_length']}",
                                       f"trainer.num_generations={shape['group']}",
                                       "trainer.per_device_train_batch_size=1", "trainer.bf16=true"], method="grpo")


@pytest.mark.parametrize("measured", [MEASURED, HELD_OUT], ids=["calibration run", "held-out run"])
def test_every_phase_measured_on_an_h100_is_predicted_within_ten_percent(tmp_path, measured):
    results = json.loads(measured.read_text())
    configs = Path(__file__).parent.resolve().parent.parent / "bench" / "data" / "model_configs"
    files = {"Qwen3-8B": "Qwen3-8B.json", "Qwen2.5-Coder-7B": "Qwen2.5-Coder-7B-Instruct.json",
             "Qwen3-32B": "Qwen3-32B.json"}
    assert not results["tiny"] and results["models"]
    for run, record in results["models"].items():
        name = run.split(" ")[0]  # run2's keys name the shape too: "Qwen3-8B 2x32768"
        config = json.loads((configs / files[name]).read_text())
        values = estimate(measured_recipe(tmp_path, run.replace(" ", "_"), config, record),
                          prompt_tokens=record["recipe"]["prompt_tokens"])
        phases = {phase["phase"]: phase for phase in record["phases"]}
        assert list(phases) == list(PHASE_TERMS)
        for phase, entry in phases.items():
            predicted = phase_prediction(values, phase)["predicted_gib"]
            assert predicted == pytest.approx(entry["max_allocated_gib"], rel=0.10), (run, phase, predicted)
