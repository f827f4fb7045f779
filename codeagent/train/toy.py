"""The toy task family (evals/toy/): data in, Tasks, agent config and scripted demonstrations out.

One small repository whose function computes the wrong thing; each task states the expected result,
and the fix is one of a few candidate edits of the same line. Hidden tests come in each task's
test_patch, applied only when grading. Nothing here is a fake: demonstrations run through the real
agent loop and sandbox, and grading runs the tests.
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

from codeagent.assets import asset_path
from codeagent.nested import deep_merge

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
    from codeagent.sandbox.workspace import cache_dir

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
    from codeagent.task import Task

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


# The demonstrations restate the requested operation with the operator they use (`set -- VERB=OP`)
# and the edit takes the operator from that word (`${1#*=}`): the operator is written once, right
# after the verb, where the verb is the current token, and only that choice is left to the rewards (the
# demonstrations pick the operator at random). With `echo VERB=OP; sed ...OP...` the policy had to
# copy its operator into the sed, and 25% of its seds differed from the operator it announced
# (measured), so a right choice scored 0 one time in four. `=OP;` is one token of its own: with
# `echo VERB OP`, ` -` was also the token of `sed -i`, and the policy went on with `i 's|%|...`
# after it. With the operator six tokens after the verb (`echo VERB; sed ...OP...`), GRPO moved every
# prompt's choice the same way and collapsed to one operator (measured). `*.py`: the edit names no
# file, so a held-out task's unseen module name never has to be copied.
VERBS_EDIT = 'set -- {verb}={operator}; sed -i "s|%|${{1#*=}}|" *.py'


def verbs_tasks(split: str | None = None) -> list:
    """The `verbs` family (evals/toy/verbs.yaml): the right edit depends on the verb in the issue.
    `split`: "train" or "held_out" for one side (module and function names differ between them)."""
    from codeagent.task import Task

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


def toy_config(**overrides: Any):
    """The codeagent Config for toy runs (evals/toy/agent.yaml, prompts resolved to the bundled folder)."""
    from codeagent.config import Config

    data = yaml.safe_load(asset_path("evals", "toy", "agent.yaml").read_text())
    data["agent"]["prompts_dir"] = str(asset_path("evals", "toy", "prompts"))
    return Config.model_validate(deep_merge(data, overrides))


def edit_command(operator: str) -> str:
    """The bash command of the candidate edit that puts `operator` in place of the wrong one."""
    return f"sed -i 's|%|{operator}|' {family()['path']}"


def demo_turns(operator: str, command: str | None = None) -> list[dict]:
    """A scripted solution that applies `operator` (with `command` if given): an edit, then submit
    (OpenAI assistant messages)."""
    edit = {"command": command or edit_command(operator)}
    return [
        {"role": "assistant", "content": "",
         "tool_calls": [{"id": "call_1", "type": "function",
                         "function": {"name": "bash", "arguments": json.dumps(edit)}}]},
        {"role": "assistant", "content": "",
         "tool_calls": [{"id": "call_2", "type": "function", "function": {"name": "submit", "arguments": "{}"}}]},
    ]


def record_demonstrations(store_dir: str | Path, operators_per_task: dict[str, list[str]] | None = None,
                          tasks: list | None = None, *, candidates: list[str] | None = None,
                          command: str | None = None, workers: int = 1) -> list[str]:
    """Run scripted solutions through the real agent and sandbox, grade them with the hidden tests,
    and write them (with verification and rewards) to the store. By default every candidate edit of
    every task: one demonstration in four is right. `command`: the edit's bash command, a template
    taking {operator} and {verb} (the task's `toy_verb`). `workers`: sandboxes at once. The ids come
    back in the order of the tasks and their operators."""
    from concurrent.futures import ThreadPoolExecutor

    from codeagent.agent.loop import Agent
    from codeagent.models import ScriptedModel
    from codeagent.sandbox import open_sandbox
    from codeagent.trajectory.store import TrajectoryStore

    from ..harness.env_grade import grade_in_sandbox

    store = TrajectoryStore(store_dir)
    config = toy_config()
    tasks = tasks or toy_tasks()
    jobs = [(task, operator) for task in tasks
            for operator in (operators_per_task or {}).get(task.instance_id, candidates or family()["candidates"])]

    def record(job) -> str:
        task, operator = job
        text = command.format(operator=operator, verb=task.extra.get("toy_verb")) if command else None
        model = ScriptedModel(demo_turns(operator, text), name=f"scripted-toy-{operator}")
        agent = Agent(model, config, store=store)
        hidden = task.model_copy(update={"test_patch": None, "gold_patch": None})
        with open_sandbox(task.repo, task.base_commit) as box:
            result = agent.run(hidden, box)
        with open_sandbox(task.repo, task.base_commit) as fresh:  # graded as rollouts are: the patch alone
            report = grade_in_sandbox(fresh, task, patch=result.patch)
        resolved = report.get("outcome") == "resolved"
        store.add_verification(result.trajectory_id, {"resolved": resolved, "outcome": report.get("outcome")})
        store.add_rewards(result.trajectory_id, {"resolved": 1.0 if resolved else 0.0})
        return result.trajectory_id

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return list(pool.map(record, jobs))


def balanced_operators(tasks: list, candidates: list[str]) -> dict[str, list[str]]:
    """One candidate edit per task, spread so that every (right operator, edit) pair is demonstrated
    equally often: the edit tells nothing about the issue, one demonstration in four is right."""
    seen: dict[str, int] = {}
    chosen = {}
    for task in tasks:
        right = task.extra["toy_operator"]
        chosen[task.instance_id] = [candidates[seen.get(right, 0) % len(candidates)]]
        seen[right] = seen.get(right, 0) + 1
    return chosen


def toy_corpus(store_dir: str | Path | None = None) -> list[str]:
    """Text for a toy model's tokenizer: the default corpus plus the toy conversations as rendered."""
    from codeagent.trajectory.store import TrajectoryStore

    from ..models.hf import template_messages
    from .tiny import build_tokenizer, default_corpus

    texts = default_corpus() + [asset_path("evals", "toy", "family.yaml").read_text()]
    if store_dir is not None:
        renderer = build_tokenizer(texts, vocab_size=300)
        for trajectory in TrajectoryStore(store_dir).iter():
            texts.append(renderer.apply_chat_template(template_messages(trajectory.messages),
                                                      tools=trajectory.tools, tokenize=False))
    return texts


def build_toy_model(output_dir: str | Path, store_dir: str | Path | None = None, *, vocab_size: int = 2048,
                    seed: int = 0, word_boundaries: bool = False, **overrides: Any) -> Path:
    """A tiny random model whose tokenizer was trained on the toy family's conversations. By default
    merging across word boundaries (the toy's boilerplate becomes a few tokens: short sequences on
    CPU); that also merges each issue's words with its task-specific neighbours (`scale must `,
    `e must add `), so a word the policy must read is a different token in every task: a family
    whose fix depends on the issue's words needs `word_boundaries=True`."""
    from .tiny import build_tiny

    return build_tiny(output_dir, toy_corpus(store_dir), vocab_size=vocab_size, seed=seed,
                      word_boundaries=word_boundaries, **overrides)
