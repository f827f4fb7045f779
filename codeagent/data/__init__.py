"""Task sources: every data set format read into codeagent's Task through one registry, one
selection function, and held-out splits. evals/ and train/ both take their tasks from here.

    loaders.py   FORMATS (one entry per format: SWE-bench, SWE-Gym, SWE-smith, R2E-Gym, SWE-bench
                 Multilingual, Multi-SWE-bench, SWE-PolyBench, toy) and
                 `load_tasks(source, format="auto", instance_ids=, regex=, repo=, slice=)`
    select.py    `select_tasks` (ids, regex, repository, slice) and `parse_slice`
    swebench.py  SWE-bench data sets: named ones (evals/datasets.yaml), the hub, files; every row checked
    formats.py   the rows of SWE-Gym, SWE-smith and R2E-Gym into Task; `reverse_patch`
    multilingual.py  the rows of SWE-bench Multilingual, Multi-SWE-bench and SWE-PolyBench into Task
    toy.py       the toy task families (evals/toy/), generated
    split.py     deterministic held-out splits, by repository so no repository is on both sides
    ids.py       instance ids as folder names (two that would share one are refused)
    provenance.py  a mined task at the repository it was mined from (its provenance.repository)
    errors.py    DatasetError, TaskFormatError
"""

from .errors import DatasetError, TaskFormatError
from .formats import read_rows, reverse_patch
from .loaders import FORMATS, TaskFormat, detect_format, format_of, load_tasks
from .select import parse_slice, select_tasks, task_repo
from .split import split_tasks

__all__ = ["FORMATS", "DatasetError", "TaskFormat", "TaskFormatError", "detect_format", "format_of", "load_tasks",
           "parse_slice", "read_rows", "reverse_patch", "select_tasks", "split_tasks", "task_repo"]
