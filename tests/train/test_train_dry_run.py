"""`train sft|dpo --dry-run` through the real CLI: what would be trained (recipe, model, data counts,
output), nothing trained; the tiny recipes say to build the tiny model first when it is missing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.tools import SUBMIT

TOOLS = [SUBMIT]


def train(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "codeagent.cli", "train", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=600, env={**os.environ, "CODEAGENT_TRAJECTORY_DIR": str(cwd / "elsewhere")})


def make_store(root: Path) -> Path:
    """Three graded runs: task-1 resolved once and not once (a DPO pair), task-2 resolved."""
    from codeagent.trajectory.store import TrajectoryStore

    store = TrajectoryStore(root)
    for task, resolved in ((1, True), (1, False), (2, True)):
        messages = [{"role": "system", "content": "You fix bugs."}, {"role": "user", "content": f"Fix bug {task}."}]
        with store.create(task={"instance_id": f"task-{task}", "repo": "o/r"}, model="scripted", tools=TOOLS,
                          messages=messages) as writer:
            call = {"id": "c1", "type": "function", "function": {"name": "submit", "arguments": "{}"}}
            writer.append_step({"finish_reason": "stop"}, [
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "name": "submit", "content": "Submitted."}])
            writer.update(exit_status="submitted", patch="diff --git a/x b/x\n")
            writer.add_verification({"resolved": resolved})
    return root


def test_dry_run_says_what_would_be_trained_and_trains_nothing(tmp_path):
    store = make_store(tmp_path / "store")
    missing = train("sft", "-c", "sft-tiny", "--dry-run", f"data.store={store}", cwd=tmp_path)
    assert missing.returncode == 3, missing.stderr
    assert "run `codeagent train tiny runs/tiny-model` first" in missing.stderr
    assert "data: 2 of 3 trajectories" in missing.stdout  # the rest is still said
    grpo = train("grpo", "-c", "grpo-tiny", "--dry-run", cwd=tmp_path)
    assert grpo.returncode == 3 and "run `codeagent train tiny runs/tiny-model` first" in grpo.stderr, grpo.stderr

    built = subprocess.run([sys.executable, "-m", "codeagent.cli", "train", "tiny", "runs/tiny-model"],
                           capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert built.returncode == 0, built.stderr
    sft = train("sft", "-c", "sft-tiny", "--dry-run", f"data.store={store}", cwd=tmp_path)
    assert sft.returncode == 0, sft.stderr
    assert "recipe: sft" in sft.stdout and "model: runs/tiny-model (local directory)" in sft.stdout
    assert "data: 2 of 3 trajectories" in sft.stdout and "up to 2 training rows" in sft.stdout
    assert "trainer: max_steps 8" in sft.stdout and "output: runs/sft-tiny/adapter" in sft.stdout
    assert "nothing trained" in sft.stderr
    dpo = train("dpo", "-c", "dpo-tiny", "--dry-run", f"data.store={store}", cwd=tmp_path)
    assert dpo.returncode == 0, dpo.stderr
    assert "1 of 2 graded task(s) have a resolved and an unresolved run: up to 1 preference pair(s)" in dpo.stdout
    assert not (tmp_path / "runs" / "sft-tiny").exists() and not (tmp_path / "runs" / "dpo-tiny").exists()
    empty = train("dpo", "-c", "dpo-tiny", "--dry-run", f"data.store={tmp_path / 'none'}", cwd=tmp_path)
    assert empty.returncode == 3 and "no trajectories in" in empty.stderr
