"""The toy task family's training side: the agent config for toy runs, scripted demonstrations run
through the real agent loop and sandbox (graded by the hidden tests), and the toy model. The tasks
themselves are a task source: data/toy.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from ..assets import asset_path
from ..data.toy import family, toy_tasks
from ..nested import deep_merge

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


def toy_config(**overrides: Any):
    """The codeagent Config for toy runs (evals/toy/agent.yaml, prompts resolved to the bundled folder)."""
    from ..config import Config

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

    from ..agent.loop import Agent
    from ..harness.env_grade import grade_in_sandbox
    from ..models import ScriptedModel
    from ..sandbox import open_sandbox
    from ..trajectory.store import TrajectoryStore

    store = TrajectoryStore(store_dir)
    config = toy_config()
    tasks = tasks or toy_tasks()
    jobs = [(task, operator) for task in tasks
            for operator in (operators_per_task or {}).get(task.instance_id, candidates or family()["candidates"])]

    def record(job) -> str:
        task, operator = job
        text = command.format(operator=operator, verb=task.toy_verb) if command else None
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
        right = task.toy_operator
        chosen[task.instance_id] = [candidates[seen.get(right, 0) % len(candidates)]]
        seen[right] = seen.get(right, 0) + 1
    return chosen


def toy_corpus(store_dir: str | Path | None = None) -> list[str]:
    """Text for a toy model's tokenizer: the default corpus plus the toy conversations as rendered."""
    from ..models.hf import template_messages
    from ..trajectory.store import TrajectoryStore
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
