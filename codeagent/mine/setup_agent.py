"""The set-up agent: when a candidate's environment does not let its tests run (the build failed, or no
test ran in any run), a model explores the repository in a sandbox, installs what the tests need, and
writes what it found to SETUP_FILE, a JSON object of environment keys. The finding is data: it goes
into the task's environment (and its provenance), the candidate is validated again with it, and
grading never needs the model again (SWE-Factory's and SWE-bench-Live's set-up agents do this job).

Only for the generic Python environment here: a SWE-bench spec repository has its spec file, and
another language its toolchain's environment.
"""

from __future__ import annotations

import json
from typing import Any

from ..patches import parse
from ..task import Task
from .candidates import Skip

SETUP_FILE = "codeagent-setup.json"
KEYS = ("pip_packages", "install", "system_packages")  # what a finding may set (lists of strings)
REPAIRABLE = ("environment:", "no test results in any run", "no test passed in any run", "the tests do not build")  # the validation skips the agent may repair


def setup_config(**overrides: Any):
    """The set-up agent's config: bash and submit, room to explore and install."""
    from ..config import Config

    return Config.model_validate({"agent": {"tools": ["bash", "submit"], "localize": False},
                                  "limits": {"max_steps": 40, "command_timeout": 600}, **overrides})


def repairable(task: Task, reason: str) -> bool:
    environment = task.environment
    return (isinstance(environment, dict) and "language" not in environment and task.setup is None
            and reason.startswith(REPAIRABLE))


def setup_prompt(task: Task, reason: str) -> str:
    from jinja2 import Environment, StrictUndefined

    from ..assets import asset_path

    tests = sorted({diff.new or diff.old or "" for diff in parse(task.test_patch or "")} - {""})
    template = Environment(undefined=StrictUndefined, keep_trailing_newline=True).from_string(
        asset_path("prompts", "mine", "setup_environment.j2").read_text())
    return template.render(environment=json.dumps(task.environment, indent=2), reason=reason,
                           tests=", ".join(tests) or "(none named)", file=SETUP_FILE)


def finding(patch: str) -> dict[str, list[str]]:
    """The set-up the agent wrote (SETUP_FILE in its patch), checked; Skip when there is none or it is malformed."""
    for diff in parse(patch or ""):
        if diff.new == SETUP_FILE:
            text = "".join(line[1:] for hunk in diff.hunks for line in hunk.lines if line.startswith("+"))
            break
    else:
        raise Skip(f"set-up agent: it wrote no {SETUP_FILE}")
    try:
        data = json.loads(text)
    except ValueError as error:
        raise Skip(f"set-up agent: {SETUP_FILE} is not JSON ({error})") from None
    if not isinstance(data, dict) or not data or set(data) - set(KEYS) or not all(
            isinstance(value, list) and all(isinstance(item, str) and item.strip() for item in value) for value in data.values()):
        raise Skip(f"set-up agent: {SETUP_FILE} must be an object of {', '.join(KEYS)}, each a list of strings: {text[:200]!r}")
    return data


def with_setup(task: Task, found: dict[str, list[str]], model: str) -> Task:
    """The task with the finding in its environment (added to what it had) and in `setup`."""
    environment: dict[str, Any] = dict(task.environment) if isinstance(task.environment, dict) else {}
    for key, values in found.items():
        environment[key] = list(dict.fromkeys([*(environment.get(key) or []), *values]))
    return task.model_copy(update={"environment": environment, "setup": {"model": model, "found": found}})


def find_setup(task: Task, reason: str, model, config) -> Task:
    """Run the set-up agent on `task` (its repository at the base commit, in a sandbox of the base image)
    and return the task with what it found; Skip when it found nothing usable."""
    from ..agent.loop import Agent
    from ..sandbox import open_sandbox
    from ..sandbox.workspace import snapshot

    job = task.model_copy(update={"problem_statement": setup_prompt(task, reason), "test_patch": None,
                                  "gold_patch": None, "instance_id": f"{task.instance_id}-setup"})
    agent = Agent(model, config, warn=lambda line: None)
    with open_sandbox(snapshot(task.repo, task.base_commit), kind="docker", image=config.sandbox.image) as box:
        result = agent.run(job, box)
    return with_setup(task, finding(result.patch or ""), getattr(model, "name", str(model)))
