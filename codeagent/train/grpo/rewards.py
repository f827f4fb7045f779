"""Rewards for online RL, configurable and combinable (recipe section `rewards`).

- resolved (outcome, the default): 1.0 when the harness grades the patch resolved, else 0.0.
- similarity (SWE-RL, Wei et al. 2025): each file's change is written as a unified diff with its
  context lines (3 by default, what `git diff` writes); for every file either patch changes, the
  predicted and the gold change are compared with difflib's SequenceMatcher ratio (0 when one side
  does not change the file); the reward is the mean over those files. A malformed answer, i.e. here
  an empty patch or one in which no file change can be read, gets -1.
- steps (G-RA, gated reward accumulation, Sun et al. 2025): each step earns an immediate reward (the mean of the chosen
  signals: a well-formed reply, tool calls that succeeded, an edit made, tests run); these step
  rewards are accumulated into the return (averaged over the steps by default, which a long run cannot
  inflate; summed with `steps_aggregate: sum`, G-RA's accumulation, which pays a policy for padding its
  runs with steps) only when the outcome reward reaches the gate `steps_gate`; otherwise they contribute
  nothing. Process rewards thus refine runs that succeeded and never pay for a failed one. The per-step
  values are kept, per step, on the trajectory (`step_rewards`); TRL's loss takes one number per
  sequence, so the gated mean (or sum) is what trains.

An infrastructure failure (a rollout that crashed, a harness error while grading) has no reward at
all: None, which TRL (1.x) leaves out of the loss, never a 0 the policy would be punished with.

A patch that touches test infrastructure the grading relies on (a conftest.py, test settings, test
files: codeagent/harness/grading/integrity.py), or whose grade passes a listed test the log also reports
failing, earns 0 on every component unless `test_infrastructure` is "allow": a conftest hook that
turns failures into passes is graded resolved officially, and a policy would learn it.

Each component is given to TRL as its own reward function (so TRL logs each), weighted by the recipe;
the weighted sum is also written to the trajectory as `total`.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from typing import Any

from ... import patches
from ..recipe import RewardsSection

COMPONENTS = ("resolved", "similarity", "steps")
MALFORMED = -1.0  # SWE-RL's reward for an answer that is not a usable patch
_TEST_COMMAND = re.compile(r"\b(pytest|unittest|tox|nox|manage\.py test|runtests|make test|npm test|go test)\b")
# Shell commands that write files: an edit made through bash counts as an edit.
_WRITES = re.compile(
    r"(?:^|[;&|(\s])(?:sed\s+(?:-\w*\s+)*-i|perl\s+(?:-\w*\s+)*-\w*i|tee\b|patch\b|git\s+apply\b|"
    r"mv\b|cp\b|rm\b|touch\b|truncate\b|dd\b)"
    r"|[^<>&0-9]>{1,2}\s*(?!&|/dev/null)[^\s&|;]"
    r"|\bopen\([^)]{0,200}['\"][wa]\+?b?['\"]|write_text\(|write_bytes\(")
WRITE_SCAN_CHARS = 20_000  # a command is the model's text: scan a bounded prefix


def file_changes(patch: str) -> dict[str, str]:
    """file -> its change as unified-diff text (hunk headers, context, removed and added lines)."""
    files: dict[str, str] = {}
    for diff in patches.parse(patch or ""):
        name = diff.new or diff.old or ""
        lines = []
        for hunk in diff.hunks:
            lines.append(f"@@ -{hunk.old_start},{hunk.old_count} +{hunk.new_start},{hunk.new_count} @@")
            lines += [line.rstrip("\n") for line in hunk.lines]
        files[name] = files.get(name, "") + "\n".join(lines)
    return files


def patch_similarity(patch: str | None, gold: str | None) -> float | None:
    """SWE-RL's similarity reward in [-1, 1]: -1 for an empty or unreadable patch, else the mean over
    the files either patch changes of SequenceMatcher(pred, gold).ratio() (0 for a file only one
    side changes). None when there is no gold patch to compare with."""
    if not gold or not gold.strip():
        return None
    ours = file_changes(patch or "") if patch and patch.strip() else {}
    if not any(ours.values()):
        return MALFORMED
    theirs = file_changes(gold)
    names = sorted(set(ours) | set(theirs))
    total = 0.0
    for name in names:
        a, b = ours.get(name, ""), theirs.get(name, "")
        total += difflib.SequenceMatcher(None, a, b, autojunk=False).ratio() if a and b else 0.0
    return total / len(names)


def writes_files(command: str) -> bool:
    """Whether a shell command (as the model wrote it) writes files: sed -i, redirections, tee,
    patch/git apply, mv/cp/rm, a Python one-liner that opens a file for writing..."""
    return bool(_WRITES.search((command or "")[:WRITE_SCAN_CHARS]))


def _arguments(call: dict) -> str:
    return str((call.get("function") or {}).get("arguments", ""))


def _command(call: dict) -> str:
    """The shell command of a bash call (its arguments are JSON text, or already a dict)."""
    arguments = (call.get("function") or {}).get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return arguments
    return str(arguments.get("command", "")) if isinstance(arguments, dict) else str(arguments or "")


def step_rewards(trajectory, signals: Sequence[str]) -> list[float]:
    """The immediate reward of each step: the mean of the chosen signals, in [0, 1]."""
    if not signals:
        return [0.0 for _ in trajectory.steps]
    edited_any = bool((trajectory.patch or "").strip())
    scores = []
    for step in trajectory.steps:
        values = []
        calls = step.tool_calls
        requested = [call for message in trajectory.step_messages(step) for call in message.get("tool_calls") or []]
        if "well_formed" in signals:
            values.append(0.0 if step.format_error else 1.0)
        if "tool_ok" in signals:
            values.append(1.0 if calls and all(c.exit_code in (None, 0) and not c.timed_out for c in calls) else 0.0)
        if "edited" in signals:
            edits = any(c.name == "editor" for c in calls) or any(
                (call.get("function") or {}).get("name") == "bash" and writes_files(_command(call))
                for call in requested)
            values.append(1.0 if edited_any and edits else 0.0)
        if "tested" in signals:
            values.append(1.0 if any(_TEST_COMMAND.search(_arguments(call)) for call in requested) else 0.0)
        scores.append(sum(values) / len(values))
    return scores


def gated_steps(step_values: list[float], outcome: float, gate: float) -> list[float]:
    """G-RA: the step rewards count (as they are) only when the outcome reward reaches the gate."""
    return list(step_values) if outcome >= gate else [0.0 for _ in step_values]


def aggregate(step_values: list[float], how: str = "mean") -> float:
    """The steps' share of the return: their sum (G-RA's accumulation) or their mean (0 with no steps)."""
    if how == "mean":
        return sum(step_values) / len(step_values) if step_values else 0.0
    return sum(step_values)


def compute(trajectory, *, resolved: bool, gold_patch: str | None, weights: RewardsSection,
            distrust: list[str] | tuple[str, ...] = ()) -> dict[str, Any]:
    """Every component, the gate, the per-step rewards and the weighted total. `distrust`: why the
    grade cannot count (harness.integrity.reasons: test infrastructure the patch touches, failures
    the log masks)."""
    if distrust and weights.test_infrastructure == "zero":
        return {"resolved": 0.0, "similarity": 0.0, "steps": 0.0, "steps_ungated": 0.0, "total": 0.0,
                "zeroed_test_infrastructure": 1.0}
    outcome = 1.0 if resolved else 0.0
    similarity = patch_similarity(trajectory.patch, gold_patch) if weights.similarity else 0.0
    raw = step_rewards(trajectory, weights.step_signals) if weights.steps else []
    gated = gated_steps(raw, outcome, weights.steps_gate)
    steps = aggregate(gated, weights.steps_aggregate)
    total = weights.resolved * outcome + weights.similarity * (similarity or 0.0) + weights.steps * steps
    result: dict[str, Any] = {"resolved": outcome,
                              "similarity": None if similarity is None else round(similarity, 6),
                              "steps": round(steps, 6), "steps_ungated": round(aggregate(raw, weights.steps_aggregate), 6),
                              "total": round(total, 6)}
    if weights.steps:
        result["step_rewards"] = [round(value, 6) for value in gated]
    return result


def active(weights: RewardsSection) -> list[tuple[str, float]]:
    """(component, weight) for the components with a nonzero weight, in a fixed order."""
    chosen = [(name, float(getattr(weights, name))) for name in COMPONENTS if getattr(weights, name)]
    if not chosen:
        raise ValueError("every reward weight is 0: set rewards.resolved, rewards.similarity or rewards.steps")
    return chosen


def reward_function(name: str):
    """A TRL reward function that reads the component `name` computed during the rollout."""
    def reward(prompts, completions, **kwargs):
        return [float(value) if value is not None else None for value in kwargs[f"reward_{name}"]]

    reward.__name__ = name
    return reward
