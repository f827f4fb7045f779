"""Rows of the task formats of SWE-Gym, SWE-smith and R2E-Gym (and SWE-bench) into Task, one function
each (loaders.py registers them).

What each format holds (read from the projects' own code and data cards; facts, not their code):

- SWE-bench / SWE-Gym: one row per task with instance_id, repo (owner/name), base_commit, patch
  (the gold fix), test_patch, problem_statement, hints_text, version, FAIL_TO_PASS, PASS_TO_PASS
  (JSON lists), environment_setup_commit. SWE-Gym uses this format as it is; its prebuilt images are
  named `xingyaoww/sweb.eval.x86_64.<instance_id with "__" written "_s_">`, and its tests run as in
  SWE-bench (the per-repository specs pick the command).
- SWE-smith: instance_id (`owner__name.<commit8>.<bug kind>__<id>`), repo (`swesmith/owner__name.<commit8>`,
  a mirror on GitHub whose branch named after the instance holds the bug), patch (the diff that
  *introduces* the bug: the fix is its reverse), FAIL_TO_PASS, PASS_TO_PASS, image_name
  (`swesmith.x86_64.owner__name.<commit8>`, pulled as `jyangballin/<image_name with "__" written
  "_1776_">`), problem_statement. The repository sits in /testbed with a conda env `testbed`;
  Python profiles run `pytest --disable-warnings --color=no --tb=no --verbose` on the FAIL_TO_PASS files.
- R2E-Gym: repo_name, docker_image (the repository is already inside it, at /testbed, with its
  .venv), commit_hash, problem_statement, parsed_commit_content (the commit as JSON),
  expected_output_json (test name -> expected status). The hidden tests live in /r2e_tests in the
  image and `run_tests.sh` at the repository root runs them; a run is resolved when every test of
  the expected map has its expected status. R2E-Gym does not say which tests failed before the fix,
  so every test expected to pass is listed in FAIL_TO_PASS (the grade is the same: each must pass).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..task import Task
from .errors import TaskFormatError

SWE_GYM_IMAGE = "xingyaoww/sweb.eval.x86_64.{name}"
SWE_SMITH_REGISTRY = "jyangballin"
SWE_SMITH_TEST = "pytest --disable-warnings --color=no --tb=no --verbose"
R2E_TEST = "bash run_tests.sh"


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a .json (array), .jsonl or .parquet file."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise TaskFormatError(f"no task file at {path}")
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix == ".json":
            rows = json.loads(text)
        else:
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    except ValueError as error:
        raise TaskFormatError(f"{path}: not valid JSON ({error})") from None
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise TaskFormatError(f"{path}: expected a list of objects (one task each)")
    return rows


def is_r2e_gym(row: dict[str, Any]) -> bool:
    return "expected_output_json" in row and "docker_image" in row


def is_swe_smith(row: dict[str, Any]) -> bool:
    return "image_name" in row and str(row.get("repo", "")).startswith("swesmith/")


def _need(row: dict[str, Any], where: str, *fields: str) -> None:
    for name in fields:
        if not isinstance(row.get(name), str) or not row[name].strip():
            raise TaskFormatError(f"{where}: missing or empty field {name!r}")


def _tests(value: Any, where: str, name: str) -> list[str]:
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except ValueError:
            raise TaskFormatError(f"{where}: field {name!r} is not a JSON list") from None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise TaskFormatError(f"{where}: field {name!r} must be a list of test names")
    return value


def swe_gym_task(row: dict[str, Any], where: str) -> Task:
    """A SWE-Gym row: SWE-bench's fields, and its prebuilt image. (SWE-bench data sets themselves are
    read by swebench.py, which checks every field.)"""
    _need(row, where, "instance_id", "repo", "base_commit", "problem_statement")
    checked = {**row, "FAIL_TO_PASS": _tests(row.get("FAIL_TO_PASS", []), where, "FAIL_TO_PASS"),
               "PASS_TO_PASS": _tests(row.get("PASS_TO_PASS", []), where, "PASS_TO_PASS")}
    task = Task.from_swebench(checked)
    task.task_format = "swe-gym"
    task.docker_image = SWE_GYM_IMAGE.format(name=row["instance_id"].replace("__", "_s_"))
    return task


def swe_smith_task(row: dict[str, Any], where: str) -> Task:
    _need(row, where, "instance_id", "repo", "patch", "image_name", "problem_statement")
    f2p = _tests(row.get("FAIL_TO_PASS", []), where, "FAIL_TO_PASS")
    p2p = _tests(row.get("PASS_TO_PASS", []), where, "PASS_TO_PASS")
    files = sorted({name.split("::", 1)[0] for name in f2p})
    image = row["image_name"]
    if "/" not in image:
        image = f"{SWE_SMITH_REGISTRY}/{image.replace('__', '_1776_')}:latest"
    known = {"instance_id", "repo", "patch", "image_name", "problem_statement", "FAIL_TO_PASS", "PASS_TO_PASS",
             "base_commit"}
    return Task(repo=f"https://github.com/{row['repo']}.git", base_commit=row.get("base_commit") or row["instance_id"],
                instance_id=row["instance_id"], problem_statement=row["problem_statement"],
                FAIL_TO_PASS=f2p, PASS_TO_PASS=p2p, gold_patch=reverse_patch(row["patch"]),
                test_command=" ".join([SWE_SMITH_TEST, *files]),
                extra={"task_format": "swe-smith", "docker_image": image, "workdir": "/testbed",
                       "conda_env": "testbed", "log_parser": "swe-smith", "bug_patch": row["patch"],
                       "swebench_repo": row["repo"], **{k: v for k, v in row.items() if k not in known}})


def r2e_gym_task(row: dict[str, Any], where: str) -> Task:
    _need(row, where, "docker_image", "problem_statement", "expected_output_json")
    try:
        expected = json.loads(row["expected_output_json"])
    except ValueError:
        raise TaskFormatError(f"{where}: field 'expected_output_json' is not JSON") from None
    if not isinstance(expected, dict):
        raise TaskFormatError(f"{where}: field 'expected_output_json' must map test names to statuses")
    repo = row.get("repo_name") or row["docker_image"].split("/")[-1].split(":")[0].removesuffix("_final")
    commit = row.get("commit_hash") or row["docker_image"].rpartition(":")[2]
    known = {"docker_image", "problem_statement", "expected_output_json", "repo_name", "commit_hash"}
    return Task(repo=repo, base_commit=None, instance_id=row.get("instance_id") or f"{repo}__{commit[:12]}",
                problem_statement=row["problem_statement"],
                FAIL_TO_PASS=sorted(name for name, status in expected.items() if status == "PASSED"),
                test_command=R2E_TEST,
                extra={"task_format": "r2e-gym", "docker_image": row["docker_image"], "workdir": "/testbed",
                       "commit_hash": commit, "expected_output": expected, "log_parser": "pytest",
                       "hidden_tests_dir": "/r2e_tests", **{k: v for k, v in row.items() if k not in known}})


def reverse_patch(patch: str) -> str:
    """The unified diff that undoes `patch` (SWE-smith's fix is its bug patch reversed)."""
    out = []
    lines = patch.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("--- ") and index + 1 < len(lines) and lines[index + 1].startswith("+++ "):
            old, new = line[4:], lines[index + 1][4:]
            out += ["--- " + _swap_side(new, "b/", "a/"), "+++ " + _swap_side(old, "a/", "b/")]
            index += 2
            continue
        if line.startswith("diff --git "):
            parts = line[len("diff --git "):].split(" ")
            if len(parts) == 2:
                line = f"diff --git {_swap_side(parts[1], 'b/', 'a/')} {_swap_side(parts[0], 'a/', 'b/')}"
        elif line.startswith("new file mode"):
            line = "deleted file mode" + line[len("new file mode"):]
        elif line.startswith("deleted file mode"):
            line = "new file mode" + line[len("deleted file mode"):]
        elif line.startswith("@@ "):
            head, _, tail = line[3:].partition(" @@")
            minus, plus = head.split(" ")
            line = f"@@ -{plus[1:]} +{minus[1:]} @@{tail}"
        elif line.startswith("+"):
            line = "-" + line[1:]
        elif line.startswith("-"):
            line = "+" + line[1:]
        elif line.startswith("index ") and ".." in line:
            ids, _, mode = line[6:].partition(" ")
            before, after = ids.split("..", 1)
            line = f"index {after}..{before}" + (f" {mode}" if mode else "")
        out.append(line)
        index += 1
    return "\n".join(out) + ("\n" if patch.endswith("\n") else "")


def _swap_side(path: str, old: str, new: str) -> str:
    return new + path[len(old):] if path.startswith(old) else path
