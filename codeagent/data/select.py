"""Which tasks of a source a run takes: by instance ids, a regex on the ids, repositories, then a
slice. The one selection function of `eval grade|run`, `eval select` and training's tasks."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..task import Task
from .errors import DatasetError


def parse_slice(text: str | slice) -> slice:
    """`10:20`, `:5`, `100:`, `::2` -> a slice."""
    if isinstance(text, slice):
        return text
    parts = str(text).strip().split(":")
    if len(parts) not in (2, 3):
        raise DatasetError(f"bad slice {text!r}: write start:stop[:step], like 10:20 or :5")
    try:
        values = [int(part) if part.strip() else None for part in parts]
    except ValueError:
        raise DatasetError(f"bad slice {text!r}: start, stop and step must be integers") from None
    if len(values) == 3 and values[2] == 0:
        raise DatasetError(f"bad slice {text!r}: step cannot be 0")
    return slice(*values)


def task_repo(task: Task) -> str:
    """A task's repository as its data set names it (owner/name for SWE-bench), else where it comes from."""
    return task.swebench_repo or task.repo


def select_tasks(tasks: Sequence[Task], *, instance_ids: Sequence[str] | None = None, regex: str | None = None,
                 repo: str | Sequence[str] | None = None, slice: str | slice | None = None) -> list[Task]:
    """Filter by instance ids, a regex searched in instance_id, repository (the data set's name for
    it, or the task's repo), then slice. Tasks keep the source's order. Unknown instance ids, a
    repository with no task and a selection that matches nothing raise a DatasetError."""
    selected = list(tasks)
    if instance_ids:
        wanted = list(dict.fromkeys(instance_ids))
        known = {task.instance_id for task in tasks}
        unknown = [instance for instance in wanted if instance not in known]
        if unknown:
            raise DatasetError(f"{len(unknown)} instance id(s) not in the dataset: {', '.join(unknown[:5])}"
                               + (" ..." if len(unknown) > 5 else ""))
        keep = set(wanted)
        selected = [task for task in selected if task.instance_id in keep]
    if regex:
        try:
            pattern = re.compile(regex)
        except re.error as exc:
            raise DatasetError(f"bad instance regex {regex!r}: {exc}") from None
        selected = [task for task in selected if pattern.search(task.instance_id)]
    if repo:
        repos = {repo} if isinstance(repo, str) else set(repo)
        if not any(repos & {task_repo(task), task.repo} for task in tasks):
            raise DatasetError(f"no instance of {', '.join(sorted(repos))} in the dataset; "
                               f"its repos: {', '.join(sorted({task_repo(task) for task in tasks}))}")
        selected = [task for task in selected if repos & {task_repo(task), task.repo}]
    if slice is not None:
        selected = selected[parse_slice(slice)]
    if not selected and tasks:
        raise DatasetError("the selection matched no instance")
    return selected
