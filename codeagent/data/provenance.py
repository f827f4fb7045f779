"""Where a mined task's repository is: the row's `provenance.repository` (`codeagent tasks mine` records
the path or URL it read the history from), used when no mirror folder is given (--repos, data.repos)."""

from __future__ import annotations

from pathlib import Path

from ..task import Task
from .errors import DatasetError
from .ids import OBJECT_ID


def at_provenance(task: Task) -> Task:
    """The task at the repository it was mined from (a local path, checked, or a URL); a task without
    provenance as it is (its GitHub URL)."""
    provenance = task.provenance
    source = provenance.get("repository") if isinstance(provenance, dict) else None
    if not isinstance(source, str) or not source:
        return task
    for name in ("base_commit", "environment_setup_commit"):  # the miner writes full ids only
        value = getattr(task, name)
        if value is not None and not OBJECT_ID.fullmatch(value):
            raise DatasetError(f"{task.instance_id}: {name} is not a git object id: {value[:80]!r} "
                               "(a mined row names its commits by their full ids)")
    if "://" not in source and not source.startswith("git@"):
        path = Path(source).expanduser()
        if not path.exists():
            raise DatasetError(f"{task.instance_id}: the repository it was mined from, {source} (provenance.repository), "
                               f"is not here: give a folder of mirrors (eval: --repos DIR, train: data.repos=DIR) "
                               f"with DIR/{task.swebench_repo or 'owner/name'} a clone or mirror of it")
        source = str(path)
    return task.model_copy(update={"repo": source})
