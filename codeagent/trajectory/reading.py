"""Reading a trajectory back: a store file's records folded into a Trajectory (a line that is not a
complete record is skipped with a warning naming file and line), or a trajectory JSON / exported JSONL file."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .errors import TrajectoryError
from .schema import SCHEMA_VERSION, UPDATABLE_FIELDS, Step, Trajectory

log = logging.getLogger(__name__)


def _read_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    data = path.read_bytes()
    lines = data.split(b"\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        last = number == len(lines)  # no newline after it: the write was cut short
        try:
            record = json.loads(line)
            if not isinstance(record, dict):
                raise ValueError(f"a record must be a JSON object, got {type(record).__name__}")
        except ValueError as error:
            reason = "truncated last line (interrupted write)" if last else f"corrupt line ({error})"
            log.warning("%s:%d: skipped %s", path, number, reason)
            continue
        yield number, record


def fold_records(path: Path) -> Trajectory:
    """Build a Trajectory from a store file."""
    trajectory: Trajectory | None = None
    wall_seconds = None
    for number, record in _read_records(path):
        kind = record.get("record")
        where = f"{path}:{number}"
        try:
            if kind == "header":
                if trajectory is not None:
                    log.warning("%s: skipped a second header record", where)
                    continue
                header = record.get("trajectory") or {}
                version = header.get("schema_version", SCHEMA_VERSION)
                if version > SCHEMA_VERSION:
                    raise TrajectoryError(
                        f"{where}: written with trajectory schema {version}, this codeagent reads "
                        f"up to {SCHEMA_VERSION}; upgrade codeagent"
                    )
                trajectory = Trajectory(**header)
            elif trajectory is None:
                log.warning("%s: skipped a %s record that comes before the header", where, kind)
            elif kind == "step":
                messages = record.get("messages") or []
                step = Step(
                    **record["step"],
                    first_message=len(trajectory.messages),
                    message_count=len(messages),
                )
                trajectory.messages.extend(messages)
                trajectory.steps.append(step)
            elif kind == "messages":
                trajectory.messages.extend(record.get("messages") or [])
            elif kind == "update":
                fields = dict(record.get("fields") or {})
                wall_seconds = fields.pop("wall_seconds", wall_seconds)
                for name, value in fields.items():
                    if name in UPDATABLE_FIELDS:
                        setattr(trajectory, name, value)
            elif kind == "verification":
                trajectory.verification.update(record.get("results") or {})
            elif kind == "rewards":
                trajectory.rewards.update(record.get("rewards") or {})
            else:
                log.warning("%s: skipped a record of unknown type %r", where, kind)
        except (ValidationError, KeyError, TypeError) as error:
            log.warning("%s: skipped an invalid %s record: %s", where, kind, error)
    if trajectory is None:
        raise TrajectoryError(f"{path}: no valid header record; this is not a trajectory file")
    trajectory.compute_totals(wall_seconds)
    return trajectory


def load_trajectory_file(path: str | Path) -> Trajectory:
    """Read a store file, a trajectory JSON file, or an exported JSONL holding one trajectory."""
    path = Path(path)
    if not path.is_file():
        raise TrajectoryError(f"no trajectory file at {path}")
    with path.open("rb") as handle:
        first = handle.readline()
    try:
        first_record = json.loads(first)
    except ValueError:
        first_record = None
    if isinstance(first_record, dict) and "record" in first_record:
        return fold_records(path)
    # json.loads, not model_validate_json: a patch's undecodable bytes are \udcXX escapes,
    # which pydantic's strict JSON parser rejects.
    try:
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".json":
            return Trajectory.model_validate(json.loads(text))
        rows = [line for line in text.splitlines() if line.strip()]
        if len(rows) != 1:
            raise TrajectoryError(
                f"{path} holds {len(rows)} trajectories; pass a file holding exactly one"
            )
        return Trajectory.model_validate(json.loads(rows[0]))
    except (ValidationError, ValueError) as error:
        raise TrajectoryError(f"{path} is not a trajectory file: {error}") from error
