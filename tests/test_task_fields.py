"""What the harness reads of a task beyond SWE-bench's fields are typed fields of Task (task.py's EXTRA_FIELDS),
still stored under "extra" as before: a row -> Task -> row keeps every key; other keys stay in `extra`; a
value of the wrong type is refused with the field's name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from codeagent.data import formats, swebench
from codeagent.data.errors import TaskFormatError
from codeagent.data.loaders import load_tasks
from codeagent.task import EXTRA_FIELDS, Task

ROOT = Path(__file__).resolve().parent.parent
SWEBENCH_FIELDS = {"problem_statement", "base_commit", "instance_id", "hints_text", "test_patch", "FAIL_TO_PASS",
                   "PASS_TO_PASS", "version", "environment_setup_commit"}
ROW_FILES = [*sorted((ROOT / "evals" / "mined").glob("*.jsonl")),
             *sorted((ROOT / "tests" / "data" / "language_tasks").glob("*/task.jsonl")),
             ROOT / "evals" / "swebench" / "lite.dev.jsonl.gz"]


def _rows(path: Path) -> list[dict]:
    return swebench.load_rows(str(path)) if path.name.endswith(".gz") else formats.read_rows(path)


@pytest.mark.parametrize("path", ROW_FILES, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_a_swebench_row_keeps_every_key_through_a_task(path):
    rows = _rows(path)
    assert rows
    for row in rows:
        task = Task.from_swebench(row)
        dumped = task.model_dump()
        rebuilt = {"repo": dumped["extra"].pop("swebench_repo"), "patch": dumped["gold_patch"],
                   **{key: dumped[key] for key in SWEBENCH_FIELDS if key in row}, **dumped["extra"]}
        for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):  # SWE-bench may ship them as JSON text
            if isinstance(row.get(key), str):
                rebuilt[key] = json.dumps(rebuilt[key])
        assert rebuilt == row
        assert Task.model_validate(task.model_dump()) == task


def test_the_harness_keys_are_typed_fields_and_others_stay_in_extra():
    row = json.loads((ROOT / "evals" / "mined" / "google__uuid.jsonl").read_text().splitlines()[0])
    task = Task.from_swebench({**row, "something_else": [1, 2]})
    assert task.swebench_repo == row["repo"] and task.created_at == row["created_at"]
    assert task.environment == row["environment"] and task.provenance == row["provenance"]
    assert task.extra == {"something_else": [1, 2]}
    assert not set(task.extra) & set(EXTRA_FIELDS)

    smith = formats.swe_smith_task({"instance_id": "o__calc.1a2b3c4d.lm_modify__x", "repo": "o/calc", "patch": "P",
                                    "image_name": "img", "problem_statement": "p", "FAIL_TO_PASS": ["t.py::a"]}, "row")
    assert (smith.task_format, smith.log_parser, smith.bug_patch, smith.swebench_repo) == \
        ("swe-smith", "swe-smith", "P", "o/calc")
    assert smith.extra == {"workdir": "/testbed", "conda_env": "testbed"}
    toy = load_tasks("toy:1")[0]
    assert toy.log_parser == "pytest" and toy.toy_operator == toy.model_dump()["extra"]["toy_operator"]


def test_a_stored_task_reads_back_the_same_and_writes_the_same():
    """A trajectory's task (model_dump(exclude_none=True)) and a worker's (model_dump()) as before: the typed
    keys under "extra", a None given kept as given."""
    stored = {"repo": "/r", "problem_statement": "p", "instance_id": "i",
              "extra": {"swebench_repo": None, "task_format": "r2e-gym", "expected_output": {"t::a": "PASSED"},
                        "workdir": "/testbed"}}
    task = Task(**stored)
    assert (task.swebench_repo, task.task_format, task.expected_output) == (None, "r2e-gym", {"t::a": "PASSED"})
    assert task.extra == {"workdir": "/testbed"}
    assert task.model_dump(exclude_none=True) == {**stored, "hints_text": "", "FAIL_TO_PASS": [], "PASS_TO_PASS": []}
    assert json.loads(task.model_dump_json())["extra"] == stored["extra"]
    assert Task(repo="/r", problem_statement="p").model_dump()["extra"] == {}


def test_a_copy_with_an_extra_update_sets_the_typed_fields():
    task = Task(repo="/r", problem_statement="p", instance_id="i", extra={"workdir": "/w"})
    copied = task.model_copy(update={"extra": {**task.extra, "images": {"source": "prebuilt"}, "title": "t"}})
    assert copied.images == {"source": "prebuilt"} and copied.extra == {"workdir": "/w", "title": "t"}
    assert copied.model_dump()["extra"] == {"images": {"source": "prebuilt"}, "workdir": "/w", "title": "t"}


def test_a_value_of_the_wrong_type_is_refused_with_its_name(tmp_path):
    with pytest.raises(ValidationError, match="log_parser"):
        Task(repo="/r", problem_statement="p", extra={"log_parser": 5})
    with pytest.raises(ValidationError, match="environment"):
        Task(repo="/r", problem_statement="p", extra={"environment": ["go"]})
    with pytest.raises(ValidationError, match="given both as a field and in extra"):
        Task(repo="/r", problem_statement="p", log_parser="pytest", extra={"log_parser": "go"})
    rows = tmp_path / "smith.jsonl"
    rows.write_text(json.dumps({"instance_id": "o__calc.1a2b3c4d.x", "repo": "o/calc", "patch": "P", "image_name": "img",
                                "problem_statement": "p", "FAIL_TO_PASS": ["t.py::a"], "expected_output": "all"}) + "\n")
    with pytest.raises(TaskFormatError, match=r"smith.jsonl: task 1: field 'expected_output': Input should be a valid dict"):
        load_tasks(rows, "swe-smith")
