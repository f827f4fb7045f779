"""bench/gpu_grpo_step.py, the GPU measurement of one GRPO step, run on CPU with --tiny (scaled configs,
512-token sequences): every phase runs through TRL's loss and writes what the GPU run is read for; the
wheels it travels with are the project's locked versions."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from codeagent.train.grpo.memory import PHASE_TERMS
from tests.support.bench_scripts import load_bench_script

ROOT = Path(__file__).parent.resolve().parent.parent
SCRIPT = ROOT / "bench" / "gpu_grpo_step.py"


def load_script():
    return load_bench_script("gpu_grpo_step")


def test_scripted_rollout_is_chained_with_the_observations_masked():
    from codeagent.train.sequences import chain_steps

    script = load_script()
    steps = script.scripted_steps(64, 512, 32, 64, 2048, seed=1)
    sequence = chain_steps(steps)
    assert len(sequence) == 512 and len(sequence.prompt_ids) == 64
    written = sum(len(step["token_ids"]) for step in steps)
    assert sum(sequence.mask) == written and 0 < written < len(sequence.mask)  # observations are 0
    assert sequence.mask[:32] == [1] * 32 and sequence.mask[32:96] == [0] * 64


def test_tiny_run_measures_every_phase_beside_the_estimate(tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "PYTHONUNBUFFERED": "1", "CUDA_VISIBLE_DEVICES": ""}
    run = subprocess.run([sys.executable, str(SCRIPT), "--tiny", "--out", str(out)], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    results = json.loads((out / "gpu_grpo_step.json").read_text())
    assert results["tiny"] and results["environment"]["device"] == "cpu"
    assert set(results["models"]) == {"Qwen3-8B", "Qwen2.5-Coder-7B"}
    for name, record in results["models"].items():
        assert "error" not in record, (name, record["error"])
        phases = {phase["phase"]: phase for phase in record["phases"]}
        assert list(phases) == list(PHASE_TERMS)
        for phase, entry in phases.items():
            assert "error" not in entry, (name, phase, entry["error"])
            assert set(entry["predicted_terms"]) == set(PHASE_TERMS[phase])
            assert entry["predicted_gib"] > 0 and entry["seconds"] >= 0
        load = phases["load"]
        assert load["activation_checkpointing"] and 0 < load["trainable"] < load["parameters"]
        assert record["recipe"]["lora_r"] == 64 and record["recipe"]["group"] == 2
        assert record["sequences"]["tokens_each"] == [512, 512]
        assert 0 < record["sequences"]["model_written_tokens"] < 2 * (512 - 64)
        step = phases["forward+backward"]
        assert step["sequences_done"] == 2 and step["tokens"] == 1024 and step["tokens_per_s"] > 0
        assert step["grads_finite"] and step["grads_nonzero"]
        assert phases["optimizer step"]["grad_norm"] > 0
        assert record["estimate"]["parameters_b"] > 0 and record["estimate"]["sequence"] == 512
    log = (out / "gpu_grpo_step.log").read_text()
    assert "peak GiB" in log and "pred GiB" in log and "optimizer step" in log


def test_wheels_are_the_locked_versions():
    lock = {}
    for line in (ROOT / "requirements" / "lock.txt").read_text().splitlines():
        name, sep, version = line.partition("==")
        if sep:
            lock[re.sub(r"[-_.]+", "-", name.lower())] = version.strip()
    wheels = [line for line in (ROOT / "bench" / "gpu_wheels.txt").read_text().splitlines()
              if line.strip() and not line.startswith("#")]
    assert {"transformers", "trl", "datasets", "pydantic"} <= {w.split("==")[0] for w in wheels}
    for line in wheels:
        name, _, version = line.partition("==")
        assert lock[re.sub(r"[-_.]+", "-", name.lower())] == version, line
    assert "--no-deps --only-binary=:all: --python-version 3.12" in (ROOT / "bench" / "gpu_wheels.sh").read_text()


def test_several_models_and_shapes_in_one_run_after_a_warm_up(tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "PYTHONUNBUFFERED": "1", "CUDA_VISIBLE_DEVICES": ""}
    run = subprocess.run([sys.executable, str(SCRIPT), "--tiny", "--out", str(out), "--run", "Qwen3-32B:2:256",
                          "--run", "Qwen3-8B:2:384:100"], capture_output=True, text=True, env=env, cwd=tmp_path,
                         timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    results = json.loads((out / "gpu_grpo_step.json").read_text())
    assert [phase["phase"] for phase in results["warmup"]["phases"]] == list(PHASE_TERMS)  # first, not measured
    assert list(results["models"]) == ["Qwen3-32B 2x256", "Qwen3-8B 2x384"]
    for key, (group, sequence) in zip(results["models"], [(2, 256), (2, 384)]):
        record = results["models"][key]
        assert "error" not in record and record["recipe"]["group"] == group
        assert record["sequences"]["tokens_each"] == [sequence] * group
        assert record["recipe"]["prompt_tokens"] == sequence // 8
        assert all("error" not in phase for phase in record["phases"])
    assert results["models"]["Qwen3-32B 2x256"]["estimate"]["parameters_b"] > 0
    bad = subprocess.run([sys.executable, str(SCRIPT), "--tiny", "--out", str(out), "--run", "Qwen9:1"],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert bad.returncode != 0 and "MODEL[:GROUP[:SEQUENCE[:BUDGET]]]" in bad.stderr
