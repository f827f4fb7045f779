"""scripts/gpu_check.py, the first thing to run when a GPU is lent, run end to end in its dry mode on CPU: every
stage runs its code path (the GRPO step through codeagent's generation path with the per-token correction,
two policy versions sampling with their own weights, the memory phases of bench/gpu_grpo_step.py) with the
CPU stand-ins it names, and one table comes out. Nothing here touches a GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.timeout(1200)
def test_the_gpu_check_runs_end_to_end_in_its_dry_mode(tmp_path):
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "CUDA_VISIBLE_DEVICES": "",
           "PYTHON": sys.executable}
    run = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh"), str(tmp_path / "out"), "--dry"],
                         capture_output=True, text=True, env=env, timeout=1100, cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    results = json.loads((tmp_path / "out" / "gpu_check.json").read_text())
    stages = results["stages"]
    assert results["dry"] and list(stages) == ["environment", "grpo step through the engine",
                                               "versions and adapter sync", "memory phases"]
    assert all(entry["status"] == "ok" for entry in stages.values()), stages
    step = stages["grpo step through the engine"]
    assert "CPU stand-in" in step["route"] and step["step1_tokens"].split("/")[0] == step["step1_tokens"].split("/")[1]
    assert step["step0_mismatch_kl"] < 1e-6 and step["step1_masked_fraction"] == 0.0
    versions = stages["versions and adapter sync"]
    assert versions["published"] == [0, 1] and versions["v1_gap_own"] < 1e-4 < versions["v1_gap_to_v0_weights"]
    assert {"load", "logprobs", "forward+backward", "optimizer step"} <= set(stages["memory phases"])
    table = (tmp_path / "out" / "gpu_check.txt").read_text()
    assert table.startswith("stage") and "nothing here measured a GPU" in table and table in run.stdout + "\n"
