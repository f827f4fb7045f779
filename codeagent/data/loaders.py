"""The one way in for tasks: every format is one entry of FORMATS, and `load_tasks` reads any source.

    load_tasks("lite", repo="psf/requests")          a SWE-bench data set by name (evals/datasets.yaml)
    load_tasks("hf:princeton-nlp/SWE-bench:dev")      any SWE-bench data set on the Hugging Face hub
    load_tasks("smith.jsonl")                         a file: its format told by its first row
    load_tasks("gym.jsonl", "swe-gym")                a file in a format named
    load_tasks("toy:4")                               a family of generated tasks (NAME or NAME:COUNT)

A new format is one more entry: how to tell its rows (`detect`, for "auto") and how one row becomes a
Task (`to_task`); a source read whole (SWE-bench's named data sets, a generated family) gives `read`. Selection (instance ids, regex,
repository, slice) is select.py's, applied here when asked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..task import Task
from . import formats, multilingual, swebench
from .errors import DatasetError, TaskFormatError
from .select import select_tasks


@dataclass(frozen=True)
class TaskFormat:
    name: str
    about: str
    to_task: Callable[[dict[str, Any], str], Task] | None = None  # one row (and where it is, for errors) -> a Task
    detect: Callable[[dict[str, Any]], bool] | None = None  # does a row look like this format ("auto")
    read: Callable[[str], list[Task]] | None = None  # a source read whole: a data set by name, a family


def _swebench(source: str) -> list[Task]:
    return [_checked(f"{source}: row {number}", Task.from_swebench, row)
            for number, row in enumerate(swebench.load_rows(source), 1)]


def _checked(where: str, make: Callable[..., Task], *args: Any) -> Task:
    """The task `make(*args)` builds; a field of the wrong type (a typed key of extra too) is a TaskFormatError
    that names the row and the field."""
    try:
        return make(*args)
    except ValidationError as error:
        fields = {str(problem["loc"][0]) if problem["loc"] else "row": problem["msg"] for problem in error.errors()}
        raise TaskFormatError(f"{where}: " + "; ".join(f"field {name!r}: {why}" for name, why in fields.items())) from None


def _toy(source: str) -> list[Task]:
    from .toy import toy_tasks

    count = source.partition(":")[2]
    if count and not count.isdigit():
        raise DatasetError(f"bad task source {source!r}: write toy or toy:COUNT")
    return toy_tasks(int(count) if count else None)


FORMATS: dict[str, TaskFormat] = {entry.name: entry for entry in (
    TaskFormat("swebench", "SWE-bench rows, every field checked: a name in evals/datasets.yaml, hf:ID[:SPLIT], "
                           "or a .json/.jsonl (maybe .gz), .parquet or .csv file", read=_swebench),
    TaskFormat("swe-gym", "SWE-Gym rows: SWE-bench's fields, run in SWE-Gym's prebuilt images",
               to_task=formats.swe_gym_task),
    TaskFormat("swe-smith", "SWE-smith rows: a bug patch on a mirror repository, in its image",
               to_task=formats.swe_smith_task, detect=formats.is_swe_smith),
    TaskFormat("r2e-gym", "R2E-Gym rows: the repository inside its image, graded against expected test statuses",
               to_task=formats.r2e_gym_task, detect=formats.is_r2e_gym),
    TaskFormat("swebench-multilingual", "SWE-bench Multilingual rows: SWE-bench's fields; the version picks the "
                                        "repository's spec in evals/environments/languages/",
               to_task=multilingual.swebench_multilingual_task, detect=multilingual.is_swebench_multilingual),
    TaskFormat("multi-swe-bench", "Multi-SWE-bench rows: a pull request (org, repo, number, base, fix_patch) and "
                                  "its f2p/s2p/n2p/p2p test maps",
               to_task=multilingual.multi_swe_bench_task, detect=multilingual.is_multi_swe_bench),
    TaskFormat("swe-polybench", "SWE-PolyBench rows: Java, JavaScript, TypeScript or Python, with F2P/P2P and "
                                "the test command",
               to_task=multilingual.polybench_task, detect=multilingual.is_polybench),
    TaskFormat("toy", "the toy family (evals/toy/), generated: toy or toy:COUNT", read=_toy),
)}
ROW_FILES = (".json", ".jsonl", ".parquet")  # what formats.read_rows reads; SWE-bench reads more (swebench.py)


def format_of(name: str) -> TaskFormat:
    """The registry entry `name`; an unknown name is a TaskFormatError that names the known ones."""
    try:
        return FORMATS[name]
    except KeyError:
        raise TaskFormatError(f"unknown task format {name!r}; use auto or one of {', '.join(FORMATS)}") from None


def detect_format(row: dict[str, Any]) -> str:
    """The format a row is in, from its fields (SWE-Gym rows look like SWE-bench rows: name it)."""
    return next((entry.name for entry in FORMATS.values() if entry.detect and entry.detect(row)), "swebench")


def load_tasks(source: str | Path, format: str = "auto", *, instance_ids: list[str] | None = None,
               regex: str | None = None, repo: str | list[str] | None = None,
               slice: str | slice | None = None) -> list[Task]:
    """The tasks of `source` (a family, a data set name, hf:ID, or a file) in `format` (auto: told
    from the source), then the selection, if any. Instance ids must be distinct."""
    if format != "auto":
        format_of(format)
    tasks = _load(str(source), format)
    if instance_ids or regex or repo or slice is not None:
        tasks = select_tasks(tasks, instance_ids=instance_ids, regex=regex, repo=repo, slice=slice)
    return tasks


def _load(source: str, format: str) -> list[Task]:
    family = FORMATS.get(source.partition(":")[0])
    if family is not None and family.to_task is None and family.read and format in ("auto", family.name):
        return family.read(source)  # generated tasks: NAME or NAME:COUNT
    if format != "swebench":
        rows = _row_file(source, format)
        kind = format if format != "auto" else detect_format(rows[0]) if rows else "swebench"
        if kind != "swebench":
            return _tasks(rows, format_of(kind), source)
    return _swebench(source)


def _row_file(source: str, format: str) -> list[dict[str, Any]]:
    """The rows of a file another format than SWE-bench's may be in ([] where only SWE-bench's reader applies)."""
    path = Path(source).expanduser()
    if format == "auto" and (not path.is_file() or path.suffix not in ROW_FILES):
        return []
    return formats.read_rows(path)


def _tasks(rows: list[dict[str, Any]], entry: TaskFormat, source: str) -> list[Task]:
    if entry.to_task is None:
        raise TaskFormatError(f"{source}: {entry.name} is not a format of task files")
    tasks: list[Task] = []
    seen: dict[str, int] = {}
    for number, row in enumerate(rows, 1):
        where = f"{source}: task {number}"
        task = _checked(where, entry.to_task, row, where)
        if task.instance_id in seen:
            raise TaskFormatError(f"{source}: task {number}: instance {task.instance_id} appears twice "
                                  f"(also task {seen[task.instance_id]})")
        seen[task.instance_id] = number
        tasks.append(task)
    return tasks
