"""Batch runs that survive anything: per-instance state on disk, resumable, one failure isolated.

Layout of an output directory:
    instances/ID/prediction.json   the patch (written once, by atomic rename)
    instances/ID/report.json       the grade (written once, by atomic rename)
    instances/ID/error.json        why the last attempt at ID failed (removed once it has a report)
    instances/ID/test_output.txt   the raw test log
    instances/ID/.lock             held (flock) by the process working on ID
    predictions.jsonl              all predictions, SWE-bench format (rebuilt from the files above)
    summary.json

Kill the run at any moment (kill -9 included) and run the same command again: instances with a
report are skipped, instances with a prediction are only graded, the rest run from the start. The
lock keeps a straggling worker of the killed run and the new run off the same instance.

No instance vanishes: `reports()` has a row for every instance asked for; one that failed (or has
no report for any other reason) is an `error` row, counted in the summary and the exit status.
Patches are strs in codeagent.patches' representation; json.dumps escapes their odd bytes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..data.ids import instance_folder
from ..executors.shipped import write_shipped_files
from ..locks import file_lock
from .phases import PHASE_FILE


def write_json_atomic(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temporary, "w") as handle:
        json.dump(data, handle, indent=2, default=str)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


@dataclass
class InstanceState:
    root: Path

    @property
    def report_path(self) -> Path:
        return self.root / "report.json"

    @property
    def prediction_path(self) -> Path:
        return self.root / "prediction.json"

    def report(self) -> dict | None:
        return _read_json(self.report_path)

    def prediction(self) -> dict | None:
        return _read_json(self.prediction_path)

    @property
    def error_path(self) -> Path:
        return self.root / "error.json"

    def error(self) -> dict | None:
        return _read_json(self.error_path)


class BatchDir:
    def __init__(self, output: str | Path):
        self.root = Path(output)
        (self.root / "instances").mkdir(parents=True, exist_ok=True)

    def instance(self, instance_id: str) -> InstanceState:
        return InstanceState(self.root / "instances" / instance_folder(instance_id))

    def pending(self, instance_ids: Iterable[str]) -> list[str]:
        return [i for i in instance_ids if self.instance(i).report() is None]

    def reports(self, instance_ids: Iterable[str]) -> list[dict]:
        """One row per instance: its report, else an `error` row saying why there is none."""
        rows = []
        for instance_id in instance_ids:
            state = self.instance(instance_id)
            report = state.report()
            if report is None:
                failure = state.error() or {}
                report = error_report(instance_id, failure.get("reason") or "no report: the run did not finish "
                                                                           "this instance (run the command again)")
            rows.append(report)
        return rows

    def record_error(self, instance_id: str, reason: str) -> dict:
        report = error_report(instance_id, reason)
        write_json_atomic(self.instance(instance_id).error_path, report)
        return report

    def record_result(self, instance_id: str, report: dict, files: dict[str, bytes] | None = None) -> bool:
        """Write a result made elsewhere (another node): its files, then its report, once. False when
        the instance already has a report (a result that arrived twice): nothing is written."""
        state = self.instance(instance_id)
        with file_lock(state.root / ".lock"):
            if state.report() is not None:
                return False
            write_shipped_files(state.root, files or {}, RESERVED)
            write_json_atomic(state.report_path, report)
            state.error_path.unlink(missing_ok=True)
            return True

    def discard(self, instance_id: str) -> None:
        """Forget an instance's prediction and grade (kept aside as *.previous.json) so it is redone."""
        state = self.instance(instance_id)
        for path in (state.prediction_path, state.report_path):
            if path.exists():
                os.replace(path, path.with_name(path.stem + ".previous.json"))

    def write_predictions(self, instance_ids: Iterable[str]) -> Path:
        lines = [json.dumps(p) for p in (self.instance(i).prediction() for i in instance_ids) if p is not None]
        path = self.root / "predictions.jsonl"
        temporary = path.with_name(f".{path.name}.tmp")
        temporary.write_text("".join(line + "\n" for line in lines))
        os.replace(temporary, path)
        return path


def process_instance(state: InstanceState, produce: Callable[[], dict] | None, grade: Callable[[dict], dict]) -> dict:
    """The resumable unit: make the prediction unless there is one, then grade unless graded."""
    with file_lock(state.root / ".lock"):  # a straggler of a killed run and this one never overlap
        report = state.report()
        if report is not None:  # finished by another process while we waited for the lock
            return report
        prediction = state.prediction()
        if prediction is None:
            if produce is None:
                raise RuntimeError(f"no prediction for {state.root.name}")
            prediction = produce()
            write_json_atomic(state.prediction_path, prediction)
        report = grade(prediction)
        write_json_atomic(state.report_path, report)
        state.error_path.unlink(missing_ok=True)
        return report


RESERVED = {"report.json", "prediction.json", "error.json", ".lock", PHASE_FILE}  # no shipped file lands on these


ERROR_OUTCOMES = ("error", "harness_error")


def error_report(instance_id: str, reason: str) -> dict:
    return {"instance_id": instance_id, "resolved": False, "outcome": "error", "reason": reason}


def is_error(report: dict) -> bool:
    """An instance that was not judged: the run or the harness broke on it."""
    return report.get("outcome") in ERROR_OUTCOMES


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (json.JSONDecodeError, OSError):
        return None  # cannot be a finished record (those are renamed in whole): redo it
