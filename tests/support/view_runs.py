"""Runs for `codeagent view` to show: a real replayed solve, and a run whose every text is markup."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from codeagent.trajectory import TrajectoryStore

SCRIPT = "<script>alert(1)</script>"


def replay_solve(store: Path) -> str:
    """A real run: the cart example's scripted model, on the local sandbox; its trajectory id."""
    env = {**os.environ, "CODEAGENT_TRAJECTORY_DIR": str(store), "CODEAGENT_CONFIG": str(store / "no-config.yaml")}
    proc = subprocess.run([sys.executable, "-m", "codeagent.cli", "solve", "--example", "cart", "--headless",
                           "--sandbox", "local"], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    [trajectory_id] = TrajectoryStore(store).ids()
    return trajectory_id


def write_hostile(store: TrajectoryStore, **header) -> str:
    """A run whose every text (task, reply, tool call, output, patch) is markup, written through the store."""
    header = {"task": {"instance_id": "evil__repo-1", "problem_statement": SCRIPT}, "model": f"scripted{SCRIPT}",
              "messages": [{"role": "system", "content": "be good"}, {"role": "user", "content": f"fix {SCRIPT}"}],
              **header}
    with store.create(**header) as writer:
        writer.append_step(
            {"prompt_tokens": 10, "completion_tokens": 3, "cost": 0.002, "token_ids": [101, 202, 303],
             "logprobs": [-0.125, -0.5, -2.0], "tool_calls": [{"id": "c1", "name": "bash", "exit_code": 0}]},
            [{"role": "assistant", "content": f"running {SCRIPT}",
              "tool_calls": [{"id": "c1", "type": "function",
                              "function": {"name": "bash", "arguments": json.dumps({"command": f"echo '{SCRIPT}'"})}}]},
             {"role": "tool", "tool_call_id": "c1", "content": f"{SCRIPT}\n<img src=x onerror=alert(2)>"}])
        writer.update(patch="diff --git a/x.html b/x.html\n--- a/x.html\n+++ b/x.html\n@@ -1 +1 @@\n-old\n"
                            f"+{SCRIPT}\udcff\n", exit_status="submitted")
        trajectory_id = writer.id
    return trajectory_id
