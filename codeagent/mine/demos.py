"""Scripted demonstrations of mined tasks, the data that lets a small model start learning on them.

A policy that cannot write a tool call gets nothing from GRPO: every reply is a format error, so
compact filtering masks every run and every reward is 0 (no advantage). Measured on a mined task with
the tiny random model: 4/4 runs masked ("exit status format_errors"), grad_norm 0. So the model first
learns the format by SFT on these demonstrations (a tokenizer trained on them too: `codeagent train
tiny --toy-store`), then GRPO chooses between what they show.

Per task, two runs of the real agent loop in the task's own environment (the harness's agent
sandbox), each graded by the harness as a rollout is and written to the store with its verification
and reward: `fix`, the gold patch applied with one bash command, then submit (it resolves), and
`look`, a command that changes nothing, then submit (it does not). SFT on both (data.resolved=null)
gives a policy that writes both about equally often: GRPO then has a choice with a reward on it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

KINDS = ("fix", "look")
LOOK = "git status --short"


def apply_command(patch: str) -> str:
    """One bash command that applies `patch` in the repository (a quoted here-document: no expansion).
    The `index` lines go: git apply does not need them, and 80 hexadecimal digits are the hardest text
    of the patch for a small model to learn to write."""
    patch = "".join(line for line in patch.splitlines(keepends=True) if not line.startswith("index "))
    marker = "CODEAGENT_PATCH"
    while marker in patch:
        marker += "_"
    return f"git apply <<'{marker}'\n{patch if patch.endswith(chr(10)) else patch + chr(10)}{marker}"


def demo_turns(task, kind: str) -> list[dict[str, Any]]:
    """The assistant turns of one demonstration (OpenAI messages): one bash call, then submit."""
    command = apply_command(task.gold_patch or "") if kind == "fix" else LOOK
    return [
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": command})}}]},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_2", "type": "function", "function": {"name": "submit", "arguments": "{}"}}]},
    ]


def record_demonstrations(tasks: list, store_dir: str | Path, config, *, kinds: tuple[str, ...] = KINDS,
                          grading_dir: Path | None = None) -> list[dict[str, Any]]:
    """Run, grade and store each demonstration (see the module docstring); one record per run:
    instance_id, kind, trajectory_id, outcome."""
    from ..agent.loop import Agent
    from ..harness.env_grade import grade_patch
    from ..harness.env_sandbox import open_agent_sandbox
    from ..models import ScriptedModel
    from ..sandbox import Limits
    from ..trajectory.store import TrajectoryStore

    store = TrajectoryStore(store_dir)
    records = []
    for task in tasks:
        hidden = task.model_copy(update={"test_patch": None, "gold_patch": None})  # what a rollout sees
        for kind in kinds:
            agent = Agent(ScriptedModel(demo_turns(task, kind), name=f"scripted-mined-{kind}"), config, store=store)
            with open_agent_sandbox(task, environment="harness", kind=config.sandbox.kind,
                                    limits=Limits.from_settings(config.sandbox)) as box:
                result = agent.run(hidden, box)
            folder = Path(grading_dir or Path(store_dir) / "grading") / (result.trajectory_id or f"{task.instance_id}-{kind}")
            report = grade_patch(task, result.patch, folder)
            resolved = report.get("outcome") == "resolved"
            store.add_verification(result.trajectory_id, {"resolved": resolved, "outcome": report.get("outcome"),
                                                          "demonstration": kind})
            store.add_rewards(result.trajectory_id, {"resolved": 1.0 if resolved else 0.0})
            records.append({"instance_id": task.instance_id, "kind": kind, "trajectory_id": result.trajectory_id,
                            "outcome": report.get("outcome")})
    return records
