"""The resumable record of a mining run, next to its output: one JSON line per candidate done (kept, with
its row, or skipped, with the reason), appended and fsynced as each finishes. Killed (even with -9) and
started again with the same command, a run skips every commit recorded kept or skipped: nothing is validated
twice and nothing done is lost; a line cut by the kill is ignored (that candidate is simply done again), and
one recorded as interrupted (the run was stopped while it ran) is validated again."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

KEPT, SKIPPED, INTERRUPTED = "kept", "skipped", "interrupted"  # interrupted: not done (the next run validates it)


def state_path(output: Path) -> Path:
    return output.with_name(output.name + ".state.jsonl")


class MiningState:
    def __init__(self, output: Path):
        self.path = state_path(output)
        self.records: dict[str, dict[str, Any]] = {}
        if self.path.is_file():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue  # the last line, cut by a kill
                if isinstance(record, dict) and isinstance(record.get("commit"), str):
                    self.records[record["commit"]] = record

    def done(self, commit: str) -> bool:
        return commit in self.records and self.records[commit].get("status") != INTERRUPTED

    def add(self, record: dict[str, Any]) -> None:
        """Append one record durably (written and fsynced before this returns)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(record, ensure_ascii=False) + "\n"
        with open(self.path, "a+b") as handle:
            handle.seek(0, os.SEEK_END)
            if handle.tell():  # a line cut by a kill must not swallow this one
                handle.seek(-1, os.SEEK_END)
                if handle.read(1) != b"\n":
                    handle.write(b"\n")
            handle.write(line.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        self.records[record["commit"]] = record

    def kept(self) -> list[dict[str, Any]]:
        return [record["row"] for record in self.records.values() if record.get("status") == KEPT]

    def interrupted(self) -> list[str]:
        return [commit for commit, record in self.records.items() if record.get("status") == INTERRUPTED]

    def skipped(self) -> list[dict[str, Any]]:
        return [record for record in self.records.values() if record.get("status") == SKIPPED]
