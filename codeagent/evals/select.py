"""`codeagent eval select`'s work (its command: cli/eval_commands.py): re-run selection over stored candidates
with known outcomes, Best@N per policy against Pass@N. A user's mistake raises SelectError with what to fix."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


class SelectError(ValueError):
    """Input that cannot be selected over (a bad file, a missing repository...): the message says which."""


def select_report(candidates_file: str, policies: Sequence[str], *, seed: int = 0, top_k: int = 3,
                  dataset: str | None = None, judge_model: str | None = None, repos: str | None = None,
                  per_instance: bool = False, json_out: str | None = None) -> dict[str, Any]:
    """Print the report (and write it as JSON to `json_out`); returns the numbers."""
    from ..scaling.offline import DEFAULT_POLICIES, evaluate, load_candidates, print_report

    try:
        groups = load_candidates(candidates_file)
    except ValueError as exc:
        raise SelectError(str(exc)) from None
    if not groups:
        raise SelectError(f"{candidates_file} holds no candidate")
    readers, issues, pair_judge = None, None, None
    if dataset:
        tasks = _tasks(dataset, list(groups))
        issues = {task.instance_id: task.problem_statement for task in tasks}
        readers = _readers(tasks, repos) if repos else None
    if judge_model:
        pair_judge = _pair_judge(judge_model)
    result = evaluate(groups, policies or DEFAULT_POLICIES, seed=seed, readers=readers, top_k=top_k, issues=issues,
                      pair_judge=pair_judge)
    print_report(result, per_instance=per_instance)
    if json_out:
        Path(json_out).write_text(json.dumps(result, indent=2))
    return result


def _tasks(dataset: str, instance_ids: list[str]) -> list:
    from ..data import DatasetError, load_tasks

    try:
        return load_tasks(dataset, instance_ids=instance_ids)
    except DatasetError as exc:
        raise SelectError(str(exc)) from None


def _pair_judge(spec: str):
    from ..models import ModelConfigError, make_model
    from ..scaling.tournament import ModelPairJudge

    try:
        return ModelPairJudge(make_model(spec))
    except ModelConfigError as exc:
        raise SelectError(str(exc)) from None


def _readers(tasks: list, repos: str) -> dict[str, Callable]:
    from ..data import DatasetError
    from ..data.swebench import repo_under
    from ..patches.base import git_reader

    readers = {}
    for task in tasks:
        try:
            path = repo_under(repos, task.swebench_repo, task.instance_id)
        except DatasetError as exc:
            raise SelectError(str(exc)) from None
        if not path.exists():
            raise SelectError(f"{task.instance_id}: no repository at {path}")
        readers[task.instance_id] = git_reader(_git_dir(path), task.base_commit or "HEAD")
    return readers


def _git_dir(path: Path) -> Path:
    import subprocess

    proc = subprocess.run(["git", "-C", str(path), "rev-parse", "--absolute-git-dir"], capture_output=True, text=True)
    return Path(proc.stdout.strip()) if proc.returncode == 0 else path
