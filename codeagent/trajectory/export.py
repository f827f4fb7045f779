"""Export trajectories: raw JSONL, and SFT / DPO datasets built with Hugging Face `datasets`.

Dataset rows keep messages in OpenAI chat format with tool-call arguments as JSON strings (what
the model wrote, and a type Arrow can store for every tool), and the tool specs as a JSON string
in the `tools` column: json.loads it before handing it to a chat template.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .schema import Trajectory
from .store import dumps_record

Predicate = Callable[[Trajectory], bool]


class ExportError(Exception):
    pass


def _atomic_write_text(path: Path, write: Callable[[Any], None]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False)
    try:
        with handle:
            write(handle)
        os.replace(handle.name, path)
    except BaseException:
        os.unlink(handle.name)
        raise


def to_jsonl(trajectories: Iterable[Trajectory], path: str | Path) -> int:
    """Full trajectories, one JSON object per line. Needs no extra package."""
    count = 0

    def write(handle) -> None:
        nonlocal count
        for trajectory in trajectories:
            handle.write(dumps_record(trajectory.model_dump(mode="json")) + "\n")
            count += 1

    _atomic_write_text(Path(path), write)
    return count


def normalize_message(message: dict[str, Any]) -> dict[str, Any]:
    """The OpenAI chat fields a training chat template reads, with stable types."""
    out: dict[str, Any] = {"role": message.get("role"), "content": message.get("content") or ""}
    if message.get("tool_calls"):
        out["tool_calls"] = [
            {
                "id": call.get("id"),
                "type": "function",
                "function": {
                    "name": (call.get("function") or {}).get("name"),
                    "arguments": _arguments_text((call.get("function") or {}).get("arguments")),
                },
            }
            for call in message["tool_calls"]
        ]
    for key in ("tool_call_id", "name"):
        if message.get(key):
            out[key] = message[key]
    return out


def _arguments_text(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments if arguments is not None else {})


def _reward(trajectory: Trajectory) -> float | None:
    numeric = [v for v in trajectory.rewards.values() if isinstance(v, (int, float))]
    return float(numeric[0]) if len(numeric) == 1 else None


def sft_rows(
    trajectories: Iterable[Trajectory],
    *,
    require_resolved: bool = True,
    where: Predicate | None = None,
    allow_flagged: bool = False,
) -> list[dict[str, Any]]:
    """One row per trajectory: the whole conversation; by default resolved trajectories only, and
    never one the grader flagged (Trajectory.integrity_flags: a hack is no example to learn from)
    unless `allow_flagged`; such a row keeps its flags in the `flags` column."""
    rows = []
    for trajectory in trajectories:
        if require_resolved and trajectory.resolved is not True:
            continue
        if trajectory.integrity_flags and not allow_flagged:
            continue
        if where is not None and not where(trajectory):
            continue
        rows.append(
            {
                "id": trajectory.id,
                "instance_id": trajectory.instance_id,
                "model": trajectory.model,
                "messages": [normalize_message(m) for m in trajectory.messages],
                "tools": json.dumps(trajectory.tools),
                "resolved": trajectory.resolved,
                "reward": _reward(trajectory),
                "flags": trajectory.integrity_flags,
            }
        )
    return rows


def preferred(trajectory: Trajectory, allow_flagged: bool = False) -> bool:
    """A DPO winner: resolved, and not flagged by the grader unless that is allowed (a flagged run
    goes with the losers: a clean fix is preferred to it)."""
    return bool(trajectory.resolved) and (allow_flagged or not trajectory.integrity_flags)


def _common_prefix(a: list[dict], b: list[dict]) -> int:
    length = 0
    while length < min(len(a), len(b)) and a[length] == b[length]:
        length += 1
    return length


def sibling_key(trajectory: Trajectory) -> tuple | None:
    """What runs that started from the same state share (None outside a group): their group, their parents
    and the prefix they started from. Siblings are a search's branches from one node, an evolution round's
    runs (shown the same parents), the runs sampled from the issue alone."""
    if trajectory.group_id is None:
        return None
    return trajectory.group_id, tuple(trajectory.parents), trajectory.branch_messages


def _value(trajectory: Trajectory) -> float | None:
    value = trajectory.verification.get("value")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def dpo_rows(
    trajectories: Iterable[Trajectory], *, max_pairs_per_task: int | None = None, allow_flagged: bool = False,
    siblings: bool = False, prefer: str = "resolved",
) -> list[dict[str, Any]]:
    """Preference pairs within each task: a resolved trajectory (chosen) against an unresolved
    one (rejected); a flagged one is never chosen unless `allow_flagged` (see `preferred`). The
    prompt is the messages both share; chosen/rejected are what follows.

    `siblings`: pairs only within runs that started from the same state (`sibling_key`: a search branch's
    prompt is its whole prefix, so the pair says which continuation of that state was better). `prefer`:
    "resolved" (the grade, as above) or "value" (the verifiers' value test-time scaling recorded,
    `verification["value"]`: the higher is chosen; for runs nobody graded)."""
    if prefer not in ("resolved", "value"):
        raise ExportError(f"unknown preference {prefer!r}: resolved or value")
    by_task: dict[Any, list[Trajectory]] = defaultdict(list)
    for trajectory in trajectories:
        known = trajectory.resolved is not None if prefer == "resolved" else _value(trajectory) is not None
        key = sibling_key(trajectory) if siblings else trajectory.task_key
        if known and key is not None:
            by_task[key].append(trajectory)
    rows = []
    for group in by_task.values():
        if prefer == "resolved":
            winners = [t for t in group if preferred(t, allow_flagged)]
            pairs = [(winner, loser) for winner in winners for loser in group if not preferred(loser, allow_flagged)]
        else:
            pairs = [(a, b) for a in group for b in group if (_value(a) or 0.0) > (_value(b) or 0.0)
                     and (allow_flagged or not a.integrity_flags)]
        if max_pairs_per_task is not None:
            pairs = pairs[:max_pairs_per_task]
        for chosen, rejected in pairs:
            chosen_messages = [normalize_message(m) for m in chosen.messages]
            rejected_messages = [normalize_message(m) for m in rejected.messages]
            shared = _common_prefix(chosen_messages, rejected_messages)
            if shared == 0 or shared in (len(chosen_messages), len(rejected_messages)):
                continue  # no common prompt, or one run is a prefix of the other: no preference
            row = {
                "prompt": chosen_messages[:shared],
                "chosen": chosen_messages[shared:],
                "rejected": rejected_messages[shared:],
                "tools": json.dumps(chosen.tools),
                "instance_id": chosen.instance_id,
                "chosen_id": chosen.id,
                "rejected_id": rejected.id,
            }
            if siblings:
                row["group_id"] = chosen.group_id
            rows.append(row)
    return rows


def _datasets():
    try:
        import datasets
    except ImportError as error:
        raise ExportError(
            "exporting sft/dpo datasets needs the Hugging Face `datasets` package: "
            "pip install 'codeagent[train]'"
        ) from error
    return datasets


def save_rows(rows: list[dict[str, Any]], path: str | Path) -> Path:
    """Save rows as a `datasets.Dataset`: .jsonl/.json -> JSON lines, .parquet -> Parquet,
    anything else -> a `save_to_disk` directory."""
    datasets = _datasets()
    path = Path(path)
    with _quiet(datasets):
        dataset = datasets.Dataset.from_list(rows)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix in (".jsonl", ".json"):
            dataset.to_json(str(path), lines=True, force_ascii=False)
        elif path.suffix == ".parquet":
            dataset.to_parquet(str(path))
        else:
            dataset.save_to_disk(str(path))
    return path


@contextmanager
def _quiet(datasets):
    """No progress bars of the library's own: the CLI says what it exported in one line."""
    from datasets.utils import are_progress_bars_disabled

    was_disabled = are_progress_bars_disabled()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        if not was_disabled:
            datasets.enable_progress_bars()


def to_sft(trajectories: Iterable[Trajectory], path: str | Path, **options: Any) -> int:
    _datasets()  # fail before the work when the package is missing
    rows = sft_rows(trajectories, **options)
    if rows:
        save_rows(rows, path)
    return len(rows)


def to_dpo(trajectories: Iterable[Trajectory], path: str | Path, **options: Any) -> int:
    _datasets()
    rows = dpo_rows(trajectories, **options)
    if rows:
        save_rows(rows, path)
    return len(rows)
