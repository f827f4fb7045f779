"""Append-only JSONL store: one file per trajectory, one record per line.

Records: a header, then step / messages / update / verification / rewards records. Each record is
written with a single write() of one whole line, then fsync'd, so a crash loses at most the record
being written and never damages the ones before it. Loading folds the records into a Trajectory
and skips (with a warning naming file and line) any line that is not a complete record
(trajectory/reading.py).
"""

from __future__ import annotations

import fnmatch
import json
import logging
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from .. import patches
from ..private_dirs import ensure_private
from .errors import TrajectoryError
from .reading import fold_records, load_trajectory_file
from .schema import (
    UPDATABLE_FIELDS,
    Step,
    Trajectory,
    new_trajectory_id,
    utc_now,
)

# the names other modules import from here (errors and reading hold them)
__all__ = ["DEFAULT_DIR_ENV", "HEADER_FIELDS", "TrajectoryError", "TrajectoryFilter", "TrajectoryStore",
           "TrajectoryWriter", "default_store_dir", "dumps_record", "load_trajectory_file"]

log = logging.getLogger(__name__)

DEFAULT_DIR_ENV = "CODEAGENT_TRAJECTORY_DIR"
_SAFE_ID = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]*$")
# Header fields; steps, updates and later records fill in the rest.
HEADER_FIELDS = (
    "schema_version", "id", "created", "task", "config", "model", "api_base", "sampling", "tools",
    "messages", "group_id", "candidate_index", "parent_id", "parent_step", "policy_version",
    "tts", "round", "parents", "branch_messages",
)


def default_store_dir() -> Path:
    return Path(os.environ.get(DEFAULT_DIR_ENV) or Path.home() / ".codeagent" / "trajectories")


def _json_default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (set, tuple)):
        return list(value)
    if isinstance(value, bytes):
        return patches.decode(value)
    return str(value)  # never lose a step over one odd value


def dumps_record(record: dict[str, Any]) -> str:
    """One JSON line. Text stays readable; a string holding undecodable bytes (lone surrogates,
    see codeagent.patches) makes the record ASCII with \\udcXX escapes, which json.loads restores."""
    try:
        line = json.dumps(record, ensure_ascii=False, default=_json_default)
        line.encode("utf-8")
    except UnicodeEncodeError:
        line = json.dumps(record, ensure_ascii=True, default=_json_default)
    return line


def _append_line(fd: int, record: dict[str, Any]) -> None:
    data = (dumps_record(record) + "\n").encode()
    view = memoryview(data)
    while view:  # a regular file takes the whole buffer at once; loop only for safety
        written = os.write(fd, view)
        view = view[written:]
    os.fsync(fd)


class TrajectoryWriter:
    """Appends records to one trajectory file. Not shared between processes.

    With `on_error`, a write the file system refuses (a full disk, a store made read-only) does not
    raise: `on_error` hears why, once, and the writer records nothing more (`lost` says why). An agent
    run goes on and keeps its patch; its record is incomplete (a cut last line is skipped on load)."""

    def __init__(self, path: Path, trajectory_id: str, next_step: int = 0, *, create: bool = False,
                 on_error: Callable[[str], None] | None = None):
        self.path = path
        self.id = trajectory_id
        self._next_step = next_step
        self._on_error = on_error
        self.lost: str | None = None
        self._fd: int | None = None
        flags = os.O_WRONLY | os.O_APPEND | (os.O_CREAT | os.O_EXCL if create else 0)
        try:
            self._fd = os.open(path, flags, 0o600)
            if not create and path.stat().st_size:
                with path.open("rb") as handle:
                    handle.seek(-1, os.SEEK_END)
                    if handle.read(1) != b"\n":  # a write was cut short: start on a fresh line
                        os.write(self._fd, b"\n")
        except FileExistsError:
            raise
        except OSError as error:
            self._lose(error)

    def _lose(self, error: OSError) -> None:
        if self._on_error is None:
            self.close()
            raise error
        self.lost = f"{error.strerror or error} ({self.path})"
        try:
            self.close()
        except OSError:
            pass
        self._on_error(f"the trajectory cannot be written: {self.lost}; the run goes on, unrecorded")

    def _append(self, kind: str, **payload: Any) -> None:
        if self.lost is not None:
            return
        if self._fd is None:
            raise TrajectoryError(f"trajectory {self.id} writer is closed")
        try:
            _append_line(self._fd, {"record": kind, "time": utc_now().isoformat(), **payload})
        except OSError as error:
            self._lose(error)

    def append_step(self, step: Step | dict[str, Any], messages: list[dict[str, Any]]) -> Step:
        """Record one step: its stats and the messages it added (assistant turn + observations)."""
        if isinstance(step, dict):
            step = Step(**{"index": self._next_step, **step})
        self._next_step = step.index + 1
        self._append(
            "step",
            step=step.model_dump(mode="json", exclude={"first_message", "message_count"}),
            messages=list(messages),
        )
        return step

    def append_messages(self, messages: list[dict[str, Any]]) -> None:
        """Messages outside any step (e.g. a user follow-up in an interactive session)."""
        self._append("messages", messages=list(messages))

    def update(self, **fields: Any) -> None:
        unknown = set(fields) - set(UPDATABLE_FIELDS)
        if unknown:
            raise TrajectoryError(
                f"cannot update {sorted(unknown)}; updatable fields: {', '.join(UPDATABLE_FIELDS)}"
            )
        self._append("update", fields=fields)

    def add_verification(self, results: dict[str, Any]) -> None:
        self._append("verification", results=results)

    def add_rewards(self, rewards: dict[str, Any]) -> None:
        self._append("rewards", rewards=rewards)

    def close(self) -> None:
        fd, self._fd = getattr(self, "_fd", None), None
        if fd is not None:
            os.close(fd)

    def __enter__(self) -> TrajectoryWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()


@dataclass
class TrajectoryFilter:
    instance: str | None = None  # instance id, shell-style wildcards allowed
    model: str | None = None  # substring of the model name
    exit_status: str | None = None
    resolved: bool | None = None
    group_id: str | None = None

    def matches(self, trajectory: Trajectory) -> bool:
        if self.instance and not fnmatch.fnmatchcase(trajectory.instance_id or "", self.instance):
            return False
        if self.model and self.model not in trajectory.model:
            return False
        if self.exit_status and trajectory.exit_status != self.exit_status:
            return False
        if self.resolved is not None and trajectory.resolved is not self.resolved:
            return False
        if self.group_id and trajectory.group_id != self.group_id:
            return False
        return True


class TrajectoryStore:
    def __init__(self, root: str | Path | None = None):
        self.root = Path(root).expanduser() if root else default_store_dir()

    def path_for(self, trajectory_id: str) -> Path:
        if not _SAFE_ID.match(trajectory_id):
            raise TrajectoryError(f"invalid trajectory id {trajectory_id!r}")
        return self.root / f"{trajectory_id}.jsonl"

    def create(self, *, on_error: Callable[[str], None] | None = None, **header: Any) -> TrajectoryWriter:
        """Start a trajectory. Keywords are Trajectory header fields: task, model, config,
        sampling, tools, messages (the initial ones), group_id, candidate_index, parent_id, parent_step (a
        subagent's), id, created.
        `on_error`: see TrajectoryWriter (a store that cannot be written to gives a writer that records
        nothing, instead of an error)."""
        unknown = set(header) - set(HEADER_FIELDS)
        if unknown:
            raise TrajectoryError(
                f"not header fields: {sorted(unknown)}; allowed: {', '.join(HEADER_FIELDS)}"
            )
        created = header.pop("created", None) or utc_now()
        trajectory_id = header.pop("id", None) or new_trajectory_id(created)
        trajectory = Trajectory(id=trajectory_id, created=created, **header)
        return self._start(trajectory, on_error)

    def _start(self, trajectory: Trajectory, on_error: Callable[[str], None] | None = None) -> TrajectoryWriter:
        path = self.path_for(trajectory.id)
        try:
            ensure_private(self.root)  # a trajectory holds the user's code, prompts and the model's answers
        except OSError:
            if on_error is None:
                raise  # else the writer finds the folder missing and says so
        try:
            writer = TrajectoryWriter(path, trajectory.id, create=True, on_error=on_error)
        except FileExistsError:
            raise TrajectoryError(f"trajectory {trajectory.id} already exists at {path}") from None
        header = trajectory.model_dump(mode="json", include=set(HEADER_FIELDS))
        writer._append("header", trajectory=header)
        return writer

    def save(self, trajectory: Trajectory) -> Path:
        """Write a whole trajectory (e.g. imported or rebuilt) as records."""
        with self._start(trajectory.model_copy(update={"messages": []})) as writer:
            cursor = 0
            for step in trajectory.steps:
                if step.first_message > cursor:
                    writer.append_messages(trajectory.messages[cursor : step.first_message])
                writer.append_step(step, trajectory.step_messages(step))
                cursor = step.first_message + step.message_count
            if cursor < len(trajectory.messages):
                writer.append_messages(trajectory.messages[cursor:])
            fields = {
                name: getattr(trajectory, name)
                for name in ("patch", "exit_status", "exit_message")
                if getattr(trajectory, name) is not None
            }
            if trajectory.totals.wall_seconds is not None:
                fields["wall_seconds"] = trajectory.totals.wall_seconds
            if fields:
                writer.update(**fields)
            if trajectory.verification:
                writer.add_verification(trajectory.verification)
            if trajectory.rewards:
                writer.add_rewards(trajectory.rewards)
        return self.path_for(trajectory.id)

    def ids(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(path.stem for path in self.root.glob("*.jsonl"))

    def resolve(self, id_or_prefix: str) -> str:
        ids = self.ids()
        if id_or_prefix in ids:
            return id_or_prefix
        matches = [trajectory_id for trajectory_id in ids if trajectory_id.startswith(id_or_prefix)]
        if not matches:
            raise TrajectoryError(f"no trajectory {id_or_prefix!r} in {self.root}")
        if len(matches) > 1:
            shown = ", ".join(matches[:5]) + (" ..." if len(matches) > 5 else "")
            raise TrajectoryError(
                f"{id_or_prefix!r} matches {len(matches)} trajectories ({shown}); give more characters"
            )
        return matches[0]

    def load(self, id_or_prefix: str) -> Trajectory:
        return fold_records(self.path_for(self.resolve(id_or_prefix)))

    def open(self, id_or_prefix: str, on_error: Callable[[str], None] | None = None) -> TrajectoryWriter:
        """A writer that appends to an existing trajectory (resume, late verification)."""
        trajectory = self.load(id_or_prefix)
        return TrajectoryWriter(self.path_for(trajectory.id), trajectory.id, len(trajectory.steps), on_error=on_error)

    def _appender(self, id_or_prefix: str) -> TrajectoryWriter:
        trajectory_id = self.resolve(id_or_prefix)
        return TrajectoryWriter(self.path_for(trajectory_id), trajectory_id)

    def add_verification(self, id_or_prefix: str, results: dict[str, Any]) -> None:
        """Merge harness results (e.g. {"resolved": True, ...}) into a trajectory."""
        with self._appender(id_or_prefix) as writer:
            writer.add_verification(results)

    def add_rewards(self, id_or_prefix: str, rewards: dict[str, Any]) -> None:
        with self._appender(id_or_prefix) as writer:
            writer.add_rewards(rewards)

    def iter(self, where: TrajectoryFilter | None = None) -> Iterator[Trajectory]:
        """Every readable trajectory, oldest first; unreadable files are reported and skipped."""
        for trajectory_id in self.ids():
            try:
                trajectory = fold_records(self.path_for(trajectory_id))
            except (TrajectoryError, OSError) as error:
                log.warning("skipped trajectory %s: %s", trajectory_id, error)
                continue
            if where is None or where.matches(trajectory):
                yield trajectory

    def list(self, where: TrajectoryFilter | None = None) -> list[Trajectory]:
        return list(self.iter(where))
