"""Datasets from the trajectory store, and tasks for online RL.

SFT: resolved trajectories (by default), filtered by reward, exit status, length, repository,
instance and model; one pre-tokenized row per trajectory, `assistant_masks` = 1 on exactly the
tokens the assistant wrote (tool outputs and prompts masked). A run the grader flagged
(Trajectory.integrity_flags) is never one of them unless data.allow_flagged.
DPO: pairs from the same task, a resolved trajectory chosen and an unresolved one rejected (a flagged
run counts as rejected unless data.allow_flagged); the prompt is their shared beginning, and the masks cover the assistant tokens of each continuation.
RL: tasks from any source codeagent.data reads (SWE-bench and the other formats, dataset names, toy).

Rows go through Hugging Face `datasets`. When nothing is left, the error says what the store holds
and which filter removed it, instead of an empty training run.
"""

from __future__ import annotations

import fnmatch
import functools
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import TrainError
from .recipe import DataSection
from .sequences import (
    NotTokenExact,
    TokenSequence,
    training_template,
    trajectory_sequence,
)


@dataclass
class Selection:
    trajectories: list[Any]
    store: str
    total: int = 0
    dropped: Counter = field(default_factory=Counter)  # reason -> count

    def summary(self) -> str:
        reasons = ", ".join(f"{count} {reason}" for reason, count in self.dropped.most_common()) or "none"
        return f"{len(self.trajectories)} of {self.total} trajectories in {self.store} kept (dropped: {reasons})"


def open_store(data: DataSection):
    """The trajectory store, or the exported dataset `data.dataset` read as one."""
    from ..trajectory.store import TrajectoryStore

    if data.dataset:
        return ExportedDataset(data.dataset)
    return TrajectoryStore(data.store)


class ExportedDataset:
    """What `codeagent traj export` wrote, read back as trajectories: `--format jsonl` (whole
    trajectories, token ids included) or `--format sft` (.jsonl, .parquet or a save_to_disk folder of
    chat rows: messages, tools as JSON text, resolved, reward; rendered with the chat template)."""

    def __init__(self, path: str):
        self.root = Path(path).expanduser()
        if not self.root.exists():
            raise TrainError(f"data.dataset: nothing at {self.root} (write it with codeagent traj export)")

    def _rows(self) -> list[dict]:
        if self.root.is_dir() or self.root.suffix == ".parquet":
            datasets = _datasets()
            loaded = (datasets.load_from_disk(str(self.root)) if self.root.is_dir()
                      else datasets.Dataset.from_parquet(str(self.root)))
            return list(loaded)
        rows = []
        for number, line in enumerate(self.root.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except ValueError as error:
                    raise TrainError(f"data.dataset: {self.root} line {number} is not JSON ({error})") from None
        return rows

    def iter(self):
        from ..trajectory.schema import Trajectory

        for number, row in enumerate(self._rows(), 1):
            try:
                if "schema_version" in row and "steps" in row:  # --format jsonl
                    yield Trajectory.model_validate(row)
                    continue
                tools = json.loads(row["tools"]) if isinstance(row.get("tools"), str) else row.get("tools") or []
                rewards = {"total": row["reward"]} if isinstance(row.get("reward"), (int, float)) else {}
                verification = {"resolved": row["resolved"]} if isinstance(row.get("resolved"), bool) else {}
                if row.get("flags"):  # exported with --allow-flagged: still flagged here
                    verification["distrust"] = [str(flag) for flag in row["flags"]]
                yield Trajectory(id=str(row.get("id") or f"row-{number}"), model=row.get("model") or "",
                                 task={"instance_id": row.get("instance_id")}, messages=list(row["messages"]),
                                 tools=tools, verification=verification, rewards=rewards, exit_status="submitted")
            except (KeyError, TypeError, ValueError) as error:
                raise TrainError(f"data.dataset: {self.root} row {number} is not an exported trajectory or "
                                 f"SFT row ({type(error).__name__}: {error})") from None


def _datasets():
    try:
        import datasets
    except ImportError as error:
        raise TrainError(f"training needs Hugging Face datasets ({error}); pip install 'codeagent[train]'") from None
    return datasets


def _repo_of(trajectory) -> str:
    task = trajectory.task or {}
    return str((task.get("extra") or {}).get("swebench_repo") or task.get("repo") or "")


def select(data: DataSection, *, require_resolved: bool | None, store=None, positives: bool = False) -> Selection:
    """Trajectories passing the data filters; `require_resolved` None means the filter `data.resolved`.
    `positives`: every one kept is trained on as an example to follow (SFT): flagged runs are left out
    unless data.allow_flagged."""
    store = store or open_store(data)
    wanted = data.resolved if require_resolved is None else require_resolved
    selection = Selection([], str(store.root))
    for trajectory in store.iter():
        selection.total += 1
        reason = _rejection(trajectory, data, wanted)
        if reason is None and positives and trajectory.integrity_flags and not data.allow_flagged:
            reason = "flagged by the grader (data.allow_flagged: true takes them)"
        if reason:
            selection.dropped[reason] += 1
        else:
            selection.trajectories.append(trajectory)
    return selection


def _rejection(trajectory, data: DataSection, resolved: bool | None) -> str | None:
    if resolved is not None and trajectory.resolved is not resolved:
        return "not verified as resolved" if resolved else "not verified as unresolved"
    if data.exit_status and trajectory.exit_status not in data.exit_status:
        return f"exit status not in {data.exit_status}"
    if data.min_reward is not None:
        reward = total_reward(trajectory)
        if reward is None or reward < data.min_reward:
            return f"reward below {data.min_reward}"
    if data.instance and not fnmatch.fnmatchcase(trajectory.instance_id or "", data.instance):
        return f"instance not matching {data.instance!r}"
    if data.repo and not fnmatch.fnmatchcase(_repo_of(trajectory), data.repo):
        return f"repository not matching {data.repo!r}"
    if data.model and data.model not in (trajectory.model or ""):
        return f"model not matching {data.model!r}"
    if not any(m.get("role") == "assistant" for m in trajectory.messages):
        return "no assistant turn"
    return None


def total_reward(trajectory) -> float | None:
    """The trajectory's reward: `total` if recorded, else the sum of its numeric rewards."""
    rewards = trajectory.rewards or {}
    if isinstance(rewards.get("total"), (int, float)):
        return float(rewards["total"])
    numeric = [float(v) for v in rewards.values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return sum(numeric) if numeric else None


def _nothing_left(selection: Selection, what: str, hint: str) -> TrainError:
    if selection.total == 0:
        return TrainError(f"no trajectories in {selection.store}: nothing to train on. Record runs first "
                          "(codeagent solve / codeagent eval run), or set data.store")
    return TrainError(f"no {what} to train on: {selection.summary()}. {hint}")


# -- SFT ---------------------------------------------------------------------------------------------

def sft_rows(data: DataSection, tokenizer, *, max_length: int | None = None, store=None) -> tuple[list[dict], dict]:
    """Pre-tokenized SFT rows (input_ids, assistant_masks) and a summary of what went in."""
    selection = select(data, require_resolved=None, store=store, positives=True)
    hint = ("SFT takes trajectories verified as resolved: grade them first (codeagent eval run records the "
            "verdict), or set data.resolved=null to train on every run" if data.resolved else
            "Loosen the data filters")
    if not selection.trajectories:
        raise _nothing_left(selection, "trajectories", hint)
    template = functools.cache(lambda: training_template(tokenizer))  # only if a run must be rendered
    rows, exact = [], 0
    limit = data.max_tokens or max_length
    for trajectory in selection.trajectories:
        try:
            sequence = trajectory_sequence(trajectory, tokenizer, token_exact=data.token_exact,
                                           chat_template=template)
        except NotTokenExact as error:
            selection.dropped[f"not token-exact ({error})"] += 1
            continue
        if limit and len(sequence) > limit:
            selection.dropped[f"longer than {limit} tokens"] += 1
            continue
        if 1 not in sequence.mask:
            selection.dropped["no assistant tokens"] += 1
            continue
        malformed = malformed_turns(trajectory)
        if data.max_format_errors is not None and malformed > data.max_format_errors:
            selection.dropped[f"more than {data.max_format_errors} malformed turn(s)"] += 1
            continue
        exact += _is_exact(trajectory, sequence)
        rows.append({"input_ids": sequence.input_ids, "assistant_masks": sequence.assistant_mask,
                     "trajectory_id": trajectory.id, "instance_id": trajectory.instance_id or ""})
    if not rows:
        selection.trajectories = []
        raise _nothing_left(selection, "sequences", "Raise data.max_tokens or loosen the filters")
    summary = {"store": selection.store, "rows": len(rows), "token_exact_rows": exact,
               "trajectories_seen": selection.total, "dropped": dict(selection.dropped),
               "trajectory_ids": [row["trajectory_id"] for row in rows]}
    return rows, summary


def malformed_turns(trajectory) -> int:
    """Assistant turns the agent could not use: a format error, or no tool call (every turn of the
    agent's must call a tool; a run ends by calling submit)."""
    if trajectory.steps:
        return sum(1 for step in trajectory.steps
                   if step.format_error or not any(m.get("role") == "assistant" and m.get("tool_calls")
                                                   for m in trajectory.step_messages(step)))
    return sum(1 for m in trajectory.messages if m.get("role") == "assistant" and not m.get("tool_calls"))


def _is_exact(trajectory, sequence: TokenSequence) -> int:
    steps = trajectory.steps
    return int(bool(steps) and steps[0].prompt_token_ids == sequence.prompt_ids)


# -- DPO ---------------------------------------------------------------------------------------------

def dpo_rows(data: DataSection, tokenizer, *, max_length: int | None = None, store=None) -> tuple[list[dict], dict]:
    """Pairs within each task: resolved (chosen) vs unresolved (rejected), pre-tokenized with masks."""
    # Both sides are needed: the `resolved` filter does not apply to DPO.
    selection = select(data.model_copy(update={"resolved": None}), require_resolved=None, store=store)
    by_task: dict[str, list[Any]] = defaultdict(list)
    for trajectory in selection.trajectories:
        if trajectory.resolved is not None:
            by_task[trajectory.task_key].append(trajectory)
    template = functools.cache(lambda: training_template(tokenizer))
    from ..trajectory.export import preferred

    rows: list = []
    skipped: Counter[str] = Counter()
    for group in by_task.values():
        winners = [t for t in group if preferred(t, data.allow_flagged)]  # a flagged run is never chosen
        losers = [t for t in group if not preferred(t, data.allow_flagged)]
        pairs = [(winner, loser) for winner in winners for loser in losers][: data.max_pairs_per_task or None]
        for chosen, rejected in pairs:
            try:
                a = trajectory_sequence(chosen, tokenizer, token_exact=data.token_exact, chat_template=template)
                b = trajectory_sequence(rejected, tokenizer, token_exact=data.token_exact, chat_template=template)
            except NotTokenExact:
                skipped["not token-exact"] += 1
                continue
            row = _pair_row(a, b)
            if row is None:
                skipped["no shared prompt"] += 1
                continue
            limit = data.max_tokens or max_length
            if limit and max(len(a), len(b)) > limit:
                skipped[f"longer than {limit} tokens"] += 1
                continue
            row.update(chosen_id=chosen.id, rejected_id=rejected.id, instance_id=chosen.instance_id or "")
            rows.append(row)
    if not rows:
        graded = sum(len(g) for g in by_task.values())
        raise TrainError(
            f"no preference pairs: DPO needs, for the same task, a resolved and an unresolved trajectory. "
            f"{selection.summary()}; {graded} of them graded, in {len(by_task)} task(s)"
            + (f"; pairs skipped: {dict(skipped)}" if skipped else "")
            + ". Sample several runs per task (codeagent eval run) and grade them")
    summary = {"store": selection.store, "rows": len(rows), "tasks": len(by_task), "skipped": dict(skipped),
               "pairs": [[row["chosen_id"], row["rejected_id"]] for row in rows]}
    return rows, summary


def _pair_row(chosen: TokenSequence, rejected: TokenSequence) -> dict | None:
    """The prompt is the longest common prefix of the two sequences (what both runs saw and wrote alike);
    chosen and rejected are what follows, each with its assistant mask."""
    a, b = chosen.input_ids, rejected.input_ids
    shared, limit = 0, min(len(a), len(b))
    while shared < limit and a[shared] == b[shared]:
        shared += 1
    mask_a, mask_b = chosen.assistant_mask[shared:], rejected.assistant_mask[shared:]
    if shared == 0 or 1 not in mask_a or 1 not in mask_b:
        return None
    return {"prompt_ids": a[:shared], "chosen_ids": a[shared:], "rejected_ids": b[shared:],
            "chosen_mask": mask_a, "rejected_mask": mask_b}


# -- RL tasks ----------------------------------------------------------------------------------------

def rl_tasks(data: DataSection, side: str | None = None) -> list[Any]:
    """The tasks online RL rolls out on: any source codeagent.data reads (`toy`, `toy:N`, a SWE-bench,
    SWE-Gym, SWE-smith or R2E-Gym file, a dataset name), `data.task_slice` of them. With
    `data.held_out`, one side of the split: `side`, else `data.split`."""
    if not data.tasks:
        raise TrainError("grpo needs tasks: set data.tasks to a SWE-bench-format file, a dataset name, or toy")
    from ..data import DatasetError, load_tasks, split_tasks, task_repo
    from ..data.provenance import at_provenance  # a mined task without data.repos: where it was mined

    try:
        tasks = load_tasks(data.tasks, data.tasks_format, slice=data.task_slice)
        tasks = [_from_mirror(task, Path(data.repos)) if data.repos else at_provenance(task) for task in tasks]
    except (DatasetError, OSError) as error:
        raise TrainError(f"cannot load the tasks {data.tasks!r}: {error}") from None
    if data.instance:
        tasks = [t for t in tasks if fnmatch.fnmatchcase(t.instance_id, data.instance)]
    if data.held_out and tasks:
        try:
            train, held = split_tasks(tasks, data.held_out, seed=data.split_seed,
                                      group=None if data.held_out_by == "task" else task_repo)
        except ValueError as error:
            raise TrainError(f"data.held_out: {error}" + ("; or set data.held_out_by=task"
                                                          if data.held_out_by == "repo" else "")) from None
        tasks = held if (side or data.split) == "held_out" else train
    if not tasks:
        raise TrainError(f"no tasks left from {data.tasks!r} after the filters")
    ids = [t.instance_id for t in tasks]
    duplicated = [i for i, n in Counter(ids).items() if n > 1]
    if duplicated:
        raise TrainError(f"tasks must have distinct instance ids; repeated: {', '.join(duplicated[:5])}")
    return tasks


def _from_mirror(task, repos: Path):
    """A SWE-bench task's repository from its mirror under data.repos (DIR/owner/name), where there is one.
    (Tasks of the other formats run in their images.)"""
    mirror = repos / str(task.swebench_repo)
    if (task.task_format or "swebench") != "swebench" or not mirror.exists():
        return task
    return task.model_copy(update={"repo": str(mirror)})


def to_dataset(rows: list[dict]):
    return _datasets().Dataset.from_list(rows)


def save_summary(summary: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=2, default=str))
