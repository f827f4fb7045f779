"""What the viewer shows, as plain data: run summaries and filters, one run as a timeline, a group of
candidates, an eval output folder's report, a training folder's curves. Trajectories are read only
through the store (codeagent.trajectory); eval folders through the runner's per-instance files."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from .. import patches
from ..evals.batch import summarize
from ..evals.runner import InstanceState, error_report, is_error
from ..trajectory import Trajectory, TrajectoryFilter, TrajectoryStore


class QueryError(ValueError):
    """A filter the viewer cannot apply (said to the user, 400)."""


def reward_of(trajectory: Trajectory) -> float | None:
    """The run's reward: `total` when graded for training, else `resolved` (toy grading), else none."""
    for key in ("total", "resolved"):
        value = trajectory.rewards.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
    return None


def task_label(trajectory: Trajectory) -> str:
    """A dataset's task by its instance id; a `solve` session (no grading info: its id is only the folder's
    name and a hash) by its issue's first line."""
    task = trajectory.task
    graded = task.get("FAIL_TO_PASS") or task.get("test_patch") or task.get("test_command")
    extra = task.get("extra") if isinstance(task.get("extra"), dict) else {}
    lines = str(extra.get("title") or task.get("problem_statement") or "").strip().splitlines()
    if trajectory.instance_id and (graded or not lines):
        return str(trajectory.instance_id)
    lines = lines or str(task.get("repo") or "").strip().splitlines()
    return lines[0][:80] if lines else "-"


def summary(trajectory: Trajectory) -> dict[str, Any]:
    totals = trajectory.totals
    return {
        "id": trajectory.id, "created": trajectory.created.isoformat(), "task": task_label(trajectory),
        "model": trajectory.model, "status": trajectory.exit_status, "resolved": trajectory.resolved,
        "reward": reward_of(trajectory), "steps": totals.steps, "cost": totals.cost,
        "prompt_tokens": totals.prompt_tokens, "completion_tokens": totals.completion_tokens,
        "group_id": trajectory.group_id, "candidate_index": trajectory.candidate_index,
        "parent_id": trajectory.parent_id, "parent_step": trajectory.parent_step,  # a subagent's run
    }


@dataclass
class RunQuery:
    """The runs page's filters: task (substring or shell wildcards), model (substring), status (exact),
    reward at least / at most, created on or after / on or before a date (YYYY-MM-DD)."""

    task: str = ""
    model: str = ""
    status: str = ""
    min_reward: float | None = None
    max_reward: float | None = None
    since: date | None = None
    until: date | None = None

    @classmethod
    def from_params(cls, params) -> RunQuery:
        def number(name: str) -> float | None:
            text = (params.get(name) or "").strip()
            if not text:
                return None
            try:
                value = float(text)
            except ValueError:
                raise QueryError(f"{name}: not a number: {text[:40]!r}") from None
            if not math.isfinite(value):
                raise QueryError(f"{name}: not a finite number")
            return value

        def day(name: str) -> date | None:
            text = (params.get(name) or "").strip()
            if not text:
                return None
            try:
                return date.fromisoformat(text)
            except ValueError:
                raise QueryError(f"{name}: not a date (YYYY-MM-DD): {text[:40]!r}") from None

        return cls(task=(params.get("task") or "").strip(), model=(params.get("model") or "").strip(),
                   status=(params.get("status") or "").strip(), min_reward=number("min_reward"),
                   max_reward=number("max_reward"), since=day("since"), until=day("until"))

    def store_filter(self) -> TrajectoryFilter:
        return TrajectoryFilter(model=self.model or None, exit_status=self.status or None)

    def matches(self, trajectory: Trajectory) -> bool:
        if self.task:
            label = f"{task_label(trajectory)} {trajectory.instance_id or ''}"
            wildcard = any(char in self.task for char in "*?[")
            if wildcard and not TrajectoryFilter(instance=self.task).matches(trajectory):
                return False
            if not wildcard and self.task.lower() not in label.lower():
                return False
        reward = reward_of(trajectory)
        if self.min_reward is not None and (reward is None or reward < self.min_reward):
            return False
        if self.max_reward is not None and (reward is None or reward > self.max_reward):
            return False
        created = trajectory.created.date()
        if self.since is not None and created < self.since:
            return False
        return self.until is None or created <= self.until


def list_runs(store: TrajectoryStore, query: RunQuery | None = None) -> list[dict[str, Any]]:
    """Summaries of the runs that pass the filters, newest first."""
    query = query or RunQuery()
    runs = [summary(t) for t in store.iter(query.store_filter()) if query.matches(t)]
    return sorted(runs, key=lambda run: run["id"], reverse=True)


def content_text(content: Any) -> str:
    """A message's content as text (a list of parts: its text parts, images named)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                parts.append(str(part.get("text") or ""))
            elif isinstance(part, dict) and part.get("type") in ("image_url", "image"):
                parts.append("[image]")
            else:
                parts.append(json.dumps(part, default=str))
        return "\n".join(parts)
    return json.dumps(content, default=str)


def _tool_calls(message: dict[str, Any]) -> list[dict[str, Any]]:
    calls = []
    for call in message.get("tool_calls") or []:
        if not isinstance(call, dict):
            continue
        function = call.get("function") or {}
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
            except ValueError:
                pass
        elif arguments is not None:
            arguments = json.dumps(arguments, indent=2, ensure_ascii=False, default=str)
        calls.append({"id": str(call.get("id") or ""), "name": str(function.get("name") or "?"),
                      "arguments": arguments or "", "summary": call_summary(function.get("arguments"))})
    return calls


def call_summary(arguments: Any, chars: int = 120) -> str:
    """A tool call in one line, for its row: a command's first line, an edit's command and path, else its
    arguments as compact JSON."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return arguments[:chars]
    if not isinstance(arguments, dict):
        return ""
    if isinstance(arguments.get("command"), str) and "path" not in arguments:
        lines = arguments["command"].strip().splitlines()
        text = "$ " + (lines[0] if lines else "") + (" …" if len(lines) > 1 else "")
    elif "path" in arguments:
        text = " ".join(str(arguments[key]) for key in ("command", "path") if arguments.get(key))
    else:
        text = json.dumps(arguments, ensure_ascii=False, default=str)
    return text if len(text) <= chars else text[:chars - 1] + "…"


def _message(message: dict[str, Any]) -> dict[str, Any]:
    return {"role": str(message.get("role") or "?"), "text": content_text(message.get("content")),
            "tool_calls": _tool_calls(message), "tool_call_id": str(message.get("tool_call_id") or "")}


def timeline(trajectory: Trajectory) -> list[dict[str, Any]]:
    """The run in order: messages outside any step (system, task, follow-ups) and steps, each step with its
    reply, its tool calls paired with their outputs and stats, tokens, cost, and token ids/logprobs."""
    by_first = {step.first_message: step for step in trajectory.steps if step.message_count}
    entries: list[dict[str, Any]] = []
    index = 0
    messages = trajectory.messages
    while index < len(messages):
        step = by_first.get(index)
        if step is None:
            entries.append({"kind": "message", **_message(messages[index])})
            index += 1
            continue
        own = [_message(m) for m in trajectory.step_messages(step)]
        reply = own[0] if own and own[0]["role"] == "assistant" else None
        outputs = {m["tool_call_id"]: m["text"] for m in own if m["role"] == "tool" and m["tool_call_id"]}
        stats = {call.id: call for call in step.tool_calls}
        calls = []
        for call in reply["tool_calls"] if reply else []:
            stat = stats.get(call["id"])
            calls.append({**call, "output": outputs.pop(call["id"], None),
                          "exit_code": stat.exit_code if stat else None, "timed_out": bool(stat and stat.timed_out),
                          "seconds": stat.seconds if stat else None})
        rest = [m for m in own[1 if reply else 0:] if not (m["role"] == "tool" and m["tool_call_id"] in
                                                            {c["id"] for c in calls})]
        tokens = None
        if step.token_ids or step.logprobs:
            ids, logprobs = step.token_ids or [], step.logprobs or []
            tokens = [{"id": ids[i] if i < len(ids) else None, "logprob": logprobs[i] if i < len(logprobs) else None}
                      for i in range(max(len(ids), len(logprobs)))]
        entries.append({
            "kind": "step", "index": step.index, "reply": reply["text"] if reply else "", "calls": calls,
            "messages": rest, "prompt_tokens": step.prompt_tokens, "completion_tokens": step.completion_tokens,
            "cost": step.cost, "model_seconds": step.model_seconds, "tool_seconds": step.tool_seconds,
            "finish_reason": step.finish_reason, "format_error": step.format_error, "tokens": tokens,
            "prompt_token_count": len(step.prompt_token_ids) if step.prompt_token_ids else None,
        })
        index += max(step.message_count, 1)
    for step in trajectory.steps:  # a step with no messages (a model error) still shows
        if not step.message_count:
            entries.append({"kind": "step", "index": step.index, "reply": "", "calls": [], "messages": [],
                            "prompt_tokens": step.prompt_tokens, "completion_tokens": step.completion_tokens,
                            "cost": step.cost, "model_seconds": step.model_seconds,
                            "tool_seconds": step.tool_seconds, "finish_reason": step.finish_reason,
                            "format_error": step.format_error, "tokens": None, "prompt_token_count": None})
    return entries


def diff_lines(patch: str | None) -> list[tuple[str, str]]:
    """(kind, text) per line of a unified diff: add, del, hunk, meta or context."""
    if not patch:
        return []
    lines = []
    for line in patches.for_display(patch).splitlines():
        if line.startswith(("diff --git", "index ", "--- ", "+++ ", "new file", "deleted file", "similarity",
                            "rename ", "old mode", "new mode", "Binary files")):
            kind = "meta"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = "context"
        lines.append((kind, line))
    return lines


def candidates(store: TrajectoryStore, group_id: str) -> list[dict[str, Any]]:
    """The runs of one group (candidates sampled for one task), by index, with their verifier scores."""
    runs = sorted(store.iter(TrajectoryFilter(group_id=group_id)),
                  key=lambda t: (t.candidate_index is None, t.candidate_index or 0, t.id))
    rows = []
    for trajectory in runs:
        scores = trajectory.verification.get("scores")
        rows.append({**summary(trajectory),
                     "scores": {str(k): v for k, v in scores.items()} if isinstance(scores, dict) else {},
                     "discarded": bool((trajectory.verification.get("verifier_details") or {}).get("discarded"))
                     if isinstance(trajectory.verification.get("verifier_details"), dict) else False,
                     "diff": diff_lines(trajectory.patch)})
    return rows


def eval_report(folder: Path) -> dict[str, Any]:
    """An eval output folder (codeagent eval ...): every instance's report (or why it has none), resolved
    by repository, failures with their reason, and cost."""
    root = folder / "instances"
    if not root.is_dir():
        raise FileNotFoundError(f"{folder} is not an eval output folder (no instances/ in it)")
    rows = []
    for path in sorted(p for p in root.iterdir() if p.is_dir()):
        state = InstanceState(path)
        report = state.report() or state.error()
        if not isinstance(report, dict) or not isinstance(report.get("instance_id"), str):
            report = error_report(path.name, "no report: the run did not finish this instance")
        rows.append(report)
    totals = summarize(rows)
    costs = [r["cost"] for r in rows if isinstance(r.get("cost"), (int, float))]
    failures = [{"instance_id": r["instance_id"], "outcome": str(r.get("outcome") or ("error" if is_error(r) else "?")),
                 "reason": str(r.get("reason") or r.get("exit_status") or ""),
                 "trajectory_id": r.get("trajectory_id") if isinstance(r.get("trajectory_id"), str) else None}
                for r in rows if not r.get("resolved")]
    return {"folder": str(folder), "instances": totals["instances"], "resolved": totals["resolved"],
            "resolved_percent": totals["resolved_percent"], "errors": totals["errors"],
            "per_repo": totals["per_repo"], "outcomes": totals["outcomes"], "failures": failures,
            "cost": round(sum(costs), 6) if costs else None}


# metrics.jsonl keys per curve: the first one a record has counts (TRL's GRPO names, then ours).
CURVES = {
    "reward": ("reward", "rewards/total/mean", "train/reward"),
    "kl": ("kl", "train/kl"),
    "mismatch": ("sampling/sampling_logp_difference/mean", "mismatch", "logprob_mismatch"),
    "loss": ("loss", "train/loss"),
}


def training_curves(folder: Path) -> dict[str, Any]:
    """Per-step series of reward, KL and the generation/training logprob mismatch from metrics.jsonl."""
    path = folder / "metrics.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"no metrics.jsonl in {folder}")
    series: dict[str, list[tuple[float, float]]] = {name: [] for name in CURVES}
    skipped = 0
    for line in path.read_text(errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            skipped += 1
            continue
        step = record.get("step") if isinstance(record, dict) else None
        if not isinstance(step, (int, float)) or isinstance(step, bool):
            continue
        for name, keys in CURVES.items():
            for key in keys:
                value = record.get(key)
                if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                    series[name].append((float(step), float(value)))
                    break
    return {"folder": str(folder), "skipped_lines": skipped,
            "curves": {name: chart(points) for name, points in series.items() if points}}


def chart(points: list[tuple[float, float]], width: int = 640, height: int = 180, pad: int = 36) -> dict[str, Any]:
    """An SVG polyline's points for `points` (x: step, y: value), with the axis ranges to label it."""
    xs, ys = [x for x, _ in points], [y for _, y in points]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    xspan, yspan = (x1 - x0) or 1.0, (y1 - y0) or 1.0
    scaled = [(pad + (x - x0) / xspan * (width - 2 * pad), height - pad - (y - y0) / yspan * (height - 2 * pad))
              for x, y in points]
    return {"width": width, "height": height, "pad": pad, "points": " ".join(f"{x:.1f},{y:.1f}" for x, y in scaled),
            "x_min": x0, "x_max": x1, "y_min": y0, "y_max": y1, "last": ys[-1], "count": len(points)}
