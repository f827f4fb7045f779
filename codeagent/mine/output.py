"""The rows a mining run writes: SWE-bench's fields (what `eval grade --dataset FILE` reads), the
environment and provenance; dedupe, decontamination (a date, the instances of named benchmarks) and the
held-out split by date."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .. import __version__, patches
from ..task import Task


def row(task: Task, commit: str, source: str, validation, statement: dict[str, Any] | None = None) -> dict[str, Any]:
    """A kept task as a SWE-bench row: the gold patch with the held files the tests needed, if any."""
    held = task.held or {}
    gold = (task.gold_patch or "") + (held.get("patch", "") if getattr(validation, "held_added", None) else "")
    out: dict[str, Any] = {
        "instance_id": task.instance_id, "repo": task.swebench_repo, "base_commit": task.base_commit,
        "patch": gold, "test_patch": task.test_patch, "problem_statement": task.problem_statement,
        "hints_text": "", "FAIL_TO_PASS": validation.fail_to_pass, "PASS_TO_PASS": validation.pass_to_pass,
        "created_at": utc(str(task.created_at)), "version": task.version,
    }
    if task.environment_setup_commit:
        out["environment_setup_commit"] = task.environment_setup_commit
    if task.environment is not None:
        out["environment"] = task.environment
    out["provenance"] = {"repository": source, "commit": commit, "codeagent_version": __version__,
                         "validation": {"runs": validation.runs, "flaky": validation.flaky, "grades": validation.grades,
                                        "layers_built": validation.layers_built}}
    for key in ("unit", "head", "dropped_files"):  # a pull request's head; the docs and vendored files left out
        if value := getattr(task, key):
            out["provenance"][key] = value
    if getattr(validation, "held_added", None):
        out["provenance"]["held_added"] = validation.held_added  # lockfiles/generated files the tests needed
    if statement:
        out["provenance"]["statement"] = statement
    if task.setup is not None:  # what the set-up agent found (already in the environment) and which model
        out["provenance"]["setup"] = task.setup
    return out


def when(text: str) -> datetime:
    """A date or an ISO 8601 time as an aware datetime (a bare date: midnight UTC)."""
    moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def utc(text: str) -> str:
    """An ISO 8601 time in UTC as SWE-bench writes it (2023-04-08T18:18:31Z)."""
    return when(text).astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Exclusions:
    """The instances of named benchmarks: by instance id, by (repo, base commit) and by gold patch."""

    ids: set[str] = field(default_factory=set)
    bases: set[tuple[str, str]] = field(default_factory=set)
    patches: set[str] = field(default_factory=set)

    def match(self, repo: str, instance_id: str, base_commit: str | None, gold_patch: str | None) -> bool:
        return (instance_id in self.ids or (repo, base_commit or "") in self.bases
                or (gold_patch is not None and normalized_digest(gold_patch) in self.patches))


def normalized_digest(patch: str) -> str:
    """What two copies of one change share: its changed lines, whatever the context and index lines."""
    changed = [line for diff in patches.parse(patch) for hunk in diff.hunks for line in hunk.lines
               if line[:1] in "+-"]
    return patches.digest("\n".join(changed))


def read_exclusions(path: Path) -> Exclusions:
    """A benchmark's rows (.json array or .jsonl) or a text file of instance ids, one a line."""
    text = path.read_text(encoding="utf-8")
    found = Exclusions()
    rows: list[Any]
    try:
        rows = json.loads(text) if path.suffix == ".json" else [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError:
        rows = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    for item in rows:
        if isinstance(item, str):
            found.ids.add(item)
        elif isinstance(item, dict):
            found.ids.add(str(item.get("instance_id", "")))
            if item.get("repo") and item.get("base_commit"):
                found.bases.add((str(item["repo"]), str(item["base_commit"])))
            if isinstance(item.get("patch"), str) and item["patch"]:
                found.patches.add(normalized_digest(item["patch"]))
    found.ids.discard("")
    return found


def dedupe(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows without repeats: one per instance id and one per change (a change merged twice)."""
    seen_ids, seen_patches, out = set(), set(), []
    for item in rows:
        digest = normalized_digest(item["patch"])
        if item["instance_id"] in seen_ids or digest in seen_patches:
            continue
        seen_ids.add(item["instance_id"])
        seen_patches.add(digest)
        out.append(item)
    return out


def split(rows: list[dict[str, Any]], split_date: str) -> list[dict[str, Any]]:
    """Each row with `split`: test when created at or after `split_date` (held out), else train."""
    cut = when(split_date)
    return [{**item, "split": "test" if when(item["created_at"]) >= cut else "train"} for item in rows]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    """All of `rows`, or the file as it was (written aside, then renamed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.writelines(json.dumps(item, ensure_ascii=False) + "\n" for item in rows)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
