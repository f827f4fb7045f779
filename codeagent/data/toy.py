"""The toy task family (evals/toy/): one small repository whose function computes the wrong thing;
each task states the expected result, and the fix is one of a few candidate edits of the same line.
Hidden tests come in each task's test_patch, applied only when grading. The `verbs` family: the
right edit depends on the verb in the issue (its train and held-out sides differ in names).
(The scripted demonstrations and the toy model are train/toy.py's.)
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml

from ..assets import asset_path

FIXED_IDENTITY = {
    "GIT_AUTHOR_NAME": "codeagent", "GIT_AUTHOR_EMAIL": "toy@codeagent",
    "GIT_COMMITTER_NAME": "codeagent", "GIT_COMMITTER_EMAIL": "toy@codeagent",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
}
OPERATORS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "//": lambda a, b: a // b,
             "%": lambda a, b: a % b}


@functools.lru_cache(maxsize=4)
def family(name: str = "family") -> dict[str, Any]:
    """A toy family's data: evals/toy/family.yaml (the default), or evals/toy/NAME.yaml."""
    return yaml.safe_load(asset_path("evals", "toy", f"{name}.yaml").read_text())


def toy_repo(files: dict[str, str] | None = None, name: str | None = None) -> Path:
    """A repository of `files` (default: the default family's) as a one-commit git repo, made once
    per content, in the cache."""
    from ..sandbox.workspace import cache_dir

    files = files if files is not None else family()["files"]
    digest = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:12]
    target = cache_dir() / "toy" / f"{name or family()['name']}-{digest}"
    if (target / ".git").is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".toy-", dir=target.parent))
    try:
        for name, text in files.items():
            (staging / name).parent.mkdir(parents=True, exist_ok=True)
            (staging / name).write_text(text)
        env = {**os.environ, **FIXED_IDENTITY}
        for cmd in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"],
                    ["git", "commit", "-q", "--no-verify", "-m", "toy repository"]):
            subprocess.run(cmd, cwd=staging, env=env, check=True, capture_output=True)
        try:
            os.replace(staging, target)
        except OSError:
            if not (target / ".git").is_dir():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _new_file_patch(path: str, text: str) -> str:
    lines = text.splitlines()
    body = "".join(f"+{line}\n" for line in lines)
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
            f"@@ -0,0 +1,{len(lines)} @@\n{body}")


def _edit_patch(path: str, old: str, new: str) -> str:
    return (f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n"
            f"@@ -1,2 +1,2 @@\n def combine(a, b):\n-{old}\n+{new}\n")


def fixed_line(operator: str) -> str:
    return family()["buggy_line"].replace("%", operator)


def toy_tasks(count: int | None = None) -> list:
    """The family's tasks (the first `count`), each with hidden tests and its gold patch."""
    from ..task import Task

    spec = family()
    repo = str(toy_repo())
    tasks = []
    for item in spec["tasks"][:count]:
        a, b, operator = item["a"], item["b"], item["operator"]
        results = {op: fn(a, b) for op, fn in OPERATORS.items()}
        if list(results.values()).count(results[operator]) > 1:
            raise ValueError(f"toy task {item['id']}: another candidate also gives {results[operator]}")
        test = ("from calc import combine\n\n\n"
                f"def test_combine():\n    assert combine({a}, {b}) == {results[operator]}\n")
        tasks.append(Task(
            repo=repo, instance_id=item["id"], problem_statement=item["problem_statement"],
            test_patch=_new_file_patch(spec["test_file"], test), test_command=spec["test_command"],
            FAIL_TO_PASS=[f"{spec['test_file']}::test_combine"], PASS_TO_PASS=[],
            gold_patch=_edit_patch(spec["path"], spec["buggy_line"], fixed_line(item["operator"])),
            extra={"log_parser": "pytest", "toy_operator": item["operator"]},
        ))
    return tasks


def verbs_tasks(split: str | None = None) -> list:
    """The `verbs` family (evals/toy/verbs.yaml): the right edit depends on the verb in the issue.
    `split`: "train" or "held_out" for one side (module and function names differ between them)."""
    from ..task import Task

    spec = family("verbs")
    tasks = []
    for item in spec["tasks"]:
        if split is not None and item["split"] != split:
            continue
        a, b, operator, func = item["a"], item["b"], item["operator"], item["func"]
        module, instance_id = item.get("module", func), f"verbs-{func}"
        buggy = spec["buggy_operator"]
        results = {op: OPERATORS[op](a, b) for op in (*spec["candidates"], buggy)}
        if list(results.values()).count(results[operator]) > 1:
            raise ValueError(f"toy task {instance_id}: another candidate also gives {results[operator]}")
        source = spec["source"].replace("{func}", func)
        path = f"{module}.py"
        repo = toy_repo({path: source}, name=f"verbs-{module}")
        test = (f"from {module} import {func}\n\n\n"
                f"def test_{func}():\n    assert {func}({a}, {b}) == {results[operator]}\n")
        lines = source.splitlines()
        gold = (f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1,2 +1,2 @@\n {lines[0]}\n"
                f"-{lines[1]}\n+{lines[1].replace(buggy, operator)}\n")
        statement = spec["statement"].format(func=func, a=a, b=b, wrong=results[buggy], right=results[operator],
                                             verb=spec["verbs"][operator])
        tasks.append(Task(
            repo=str(repo), instance_id=instance_id, problem_statement=statement,
            test_patch=_new_file_patch("tests/test_hidden.py", test), test_command=spec["test_command"],
            FAIL_TO_PASS=[f"tests/test_hidden.py::test_{func}"], PASS_TO_PASS=[], gold_patch=gold,
            extra={"log_parser": "pytest", "toy_operator": operator, "toy_split": item["split"],
                   "toy_verb": spec["verbs"][operator]},
        ))
    return tasks
