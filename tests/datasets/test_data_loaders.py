"""Task sources in one place (issue 20): one registry entry per format, one router that evals/ and
train/ both go through, one selection function. CPU only, no Docker."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from codeagent.data import FORMATS, DatasetError, TaskFormat, TaskFormatError, format_of, load_tasks, select_tasks
from codeagent.task import Task

SMITH = {"instance_id": "owner__calc.1a2b3c4d.bug__1", "repo": "swesmith/owner__calc.1a2b3c4d",
         "patch": "diff --git a/c.py b/c.py\n--- a/c.py\n+++ b/c.py\n@@ -1 +1 @@\n-a\n+b\n",
         "FAIL_TO_PASS": ["tests/test_c.py::test_a"], "PASS_TO_PASS": [],
         "image_name": "swesmith.x86_64.owner__calc.1a2b3c4d", "problem_statement": "a is b"}
SWEBENCH = {"instance_id": "psf__requests-1", "repo": "psf/requests", "base_commit": "abc123",
            "problem_statement": "p", "test_patch": "", "FAIL_TO_PASS": '["t::a"]', "PASS_TO_PASS": "[]"}


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_every_format_is_one_entry_of_the_registry():
    assert list(FORMATS) == ["swebench", "swe-gym", "swe-smith", "r2e-gym", "swebench-multilingual", "multi-swe-bench",
                             "swe-polybench", "toy"]
    for name, entry in FORMATS.items():
        assert isinstance(entry, TaskFormat) and entry.name == name and entry.about
        assert (entry.to_task is None) != (entry.read is None)  # rows one by one, or a source read whole


def test_an_unknown_format_is_a_clear_error_naming_the_known_ones(tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", [SMITH])
    for call in (lambda: format_of("swe-bench"), lambda: load_tasks(path, "swe-bench")):
        with pytest.raises(TaskFormatError, match="unknown task format 'swe-bench'; use auto or one of "
                                                  "swebench, swe-gym, swe-smith, r2e-gym, swebench-multilingual, "
                                                  "multi-swe-bench, swe-polybench, toy"):
            call()
    assert issubclass(TaskFormatError, DatasetError)  # evals/ and train/ catch one error for any source
    from pydantic import ValidationError

    from codeagent.train.recipe import DataSection

    with pytest.raises(ValidationError, match="unknown task format 'swe-bench'; use auto or one of swebench"):
        DataSection(tasks_format="swe-bench")


def test_a_new_format_is_one_entry(tmp_path, monkeypatch):
    """Registered once, a format is read by name and told apart by `auto`, by every caller of load_tasks."""
    def to_task(row: dict, where: str) -> Task:
        if "issue" not in row:
            raise TaskFormatError(f"{where}: missing field 'issue'")
        return Task(repo=row["repository"], instance_id=row["key"], problem_statement=row["issue"],
                    extra={"task_format": "mined"})

    monkeypatch.setitem(FORMATS, "mined", TaskFormat("mined", "mined tasks", to_task=to_task,
                                                     detect=lambda row: "key" in row and "repository" in row))
    path = write_jsonl(tmp_path / "mined.jsonl", [{"key": "m-1", "repository": "/r", "issue": "x"},
                                                  {"key": "m-2", "repository": "/r", "issue": "y"}])
    assert [t.instance_id for t in load_tasks(path)] == ["m-1", "m-2"]
    assert [t.instance_id for t in load_tasks(path, "mined", slice="1:")] == ["m-2"]
    with pytest.raises(TaskFormatError, match=r"bad.jsonl: task 1: missing field 'issue'"):
        load_tasks(write_jsonl(tmp_path / "bad.jsonl", [{"key": "m-1", "repository": "/r"}]), "mined")
    from codeagent.train.data import rl_tasks
    from codeagent.train.recipe import DataSection

    assert [t.instance_id for t in rl_tasks(DataSection(tasks=str(path), tasks_format="mined"))] == ["m-1", "m-2"]


def test_one_router_reads_every_kind_of_source(tmp_path):
    smith = load_tasks(write_jsonl(tmp_path / "smith.jsonl", [SMITH]))
    assert smith[0].task_format == "swe-smith"
    with (tmp_path / "bench.csv").open("w", newline="") as handle:  # SWE-bench rows: every field checked
        writer = csv.DictWriter(handle, fieldnames=list(SWEBENCH))
        writer.writeheader()
        writer.writerow(SWEBENCH)
    [task] = load_tasks(tmp_path / "bench.csv")
    assert task.swebench_repo == "psf/requests" and task.FAIL_TO_PASS == ["t::a"]
    assert [t.instance_id for t in load_tasks("toy:2")] == [t.instance_id for t in load_tasks("toy")][:2]
    with pytest.raises(DatasetError, match="bad task source 'toy:x'"):
        load_tasks("toy:x")
    with pytest.raises(DatasetError, match="unknown dataset 'nope'"):
        load_tasks("nope")


def test_one_selection_function_for_every_format():
    tasks = [Task(repo="https://github.com/swesmith/a.git", instance_id=f"a-{i}", problem_statement="p",
                  extra={"swebench_repo": "swesmith/a"}) for i in range(3)]
    tasks.append(Task(repo="aiohttp", instance_id="aiohttp__1", problem_statement="p"))  # R2E-Gym: no swebench_repo
    assert [t.instance_id for t in select_tasks(tasks, repo="swesmith/a", slice="1:")] == ["a-1", "a-2"]
    assert [t.instance_id for t in select_tasks(tasks, repo="aiohttp")] == ["aiohttp__1"]
    assert [t.instance_id for t in select_tasks(tasks, instance_ids=["a-2", "a-0"])] == ["a-0", "a-2"]
    with pytest.raises(DatasetError, match="not in the dataset: zz"):
        select_tasks(tasks, instance_ids=["a-0", "zz"])
    with pytest.raises(DatasetError, match="no instance of other/repo in the dataset; its repos: aiohttp, swesmith/a"):
        select_tasks(tasks, repo="other/repo")
    with pytest.raises(DatasetError, match="matched no instance"):
        select_tasks(tasks, regex="^b")


def test_grpo_and_eval_read_the_same_swebench_files(tmp_path):
    """On main, train's tasks went through a second router that read a SWE-bench .csv as JSON lines
    (a TrainError) while `eval` read it."""
    from codeagent.evals.tasks import eval_tasks
    from codeagent.train.data import rl_tasks
    from codeagent.train.recipe import DataSection

    path = tmp_path / "bench.csv"
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(SWEBENCH))
        writer.writeheader()
        writer.writerows({**SWEBENCH, "instance_id": f"psf__requests-{i}"} for i in range(3))
    mirror = tmp_path / "repos" / "psf" / "requests"
    mirror.mkdir(parents=True)
    trained = rl_tasks(DataSection(tasks=str(path), task_slice="1:", repos=str(tmp_path / "repos")))
    evaluated = eval_tasks(str(path), None, None, None, "1:", str(tmp_path / "repos"))
    assert [t.instance_id for t in trained] == [t.instance_id for t in evaluated] == ["psf__requests-1",
                                                                                      "psf__requests-2"]
    assert {t.repo for t in trained} == {t.repo for t in evaluated} == {str(mirror)}
