"""The sandbox a task's agent works in, for every front end that runs an agent on a task (`eval run`,
GRPO rollouts): one decision tree, here.

- `kind: local`: the task's repository in a local sandbox (no isolation; explicit opt-in).
- a task in pulled images: a container of its agent image (the hidden tests taken out).
- `environment: harness`: a container of the task's instance image, opened as its task environment
  opens it (with its declared services when `services`).
- otherwise: the repository on the configured base image.

`open_agent_sandbox(..., on_node=...)` opens that same sandbox on another machine (a Ray node:
`on_node(opener)` runs `opener` there and drives the sandbox from here).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from ..task import Task
from .env_images import Phase, image_source
from .grading.task_env import TaskEnvironment


@dataclass
class AgentSandboxes:
    """How a task's agent sandboxes are opened (image and tree decided once): `open()` a context
    manager of a fresh one; `start`, a function that starts one for a warm pool or candidates, None
    where the sandbox is more than one container (declared services hold a network for as long as the
    sandbox lives, which a pool that hands sandboxes out and forgets them cannot hold)."""

    open: Callable[[], AbstractContextManager[Any]]
    start: Callable[[], Any] | None


def agent_sandboxes(task: Task, *, environment: str = "harness", kind: str = "docker", limits=None,
                    base_image: str | None = None, registry: str | None = None, services: bool = True,
                    log_dir: Path | None = None, phase: Phase | None = None) -> AgentSandboxes:
    """The agent's sandboxes for `task` (see the module docstring). `registry`: the mirror pulled images
    come through; `log_dir`/`phase`: where image builds log, what is going on."""
    from ..sandbox import open_sandbox

    if kind == "local":
        opener = partial(open_sandbox, task.repo, task.base_commit, kind="local")
        return AgentSandboxes(opener, None)
    source = image_source(task, registry)
    if not source.pulled and environment != "harness":
        from ..sandbox.workspace import snapshot

        start = partial(open_sandbox, snapshot(task.repo, task.base_commit), kind="docker", limits=limits,
                        image=base_image)
        return AgentSandboxes(start, start)
    image, snap = source.agent_image(log_dir, phase)
    if services and source.services:
        return AgentSandboxes(partial(_environment_box, source.task, image, source.services, limits), None)
    start = partial(_start, source.task, image, snap, limits, source.pulled)
    return AgentSandboxes(start, start)


def _start(task: Task, image: str, snap, limits, pulled: bool):
    from ..sandbox.docker import DockerSandbox

    box = DockerSandbox(snap, prepared_image=image, limits=limits)
    if pulled:
        return box
    try:
        TaskEnvironment(task, box=box).open()  # what the environment does to its own sandbox
    except BaseException:
        box.close()
        raise
    return box


@contextmanager
def _environment_box(task: Task, image: str, services, limits) -> Iterator[Any]:
    with TaskEnvironment(task, image, services=services, limits=limits) as env:
        yield env.box


@contextmanager
def open_agent_sandbox(task: Task, *, on_node: Callable[[Callable[[], Any]], Any] | None = None,
                       **options) -> Iterator[Any]:
    """A fresh agent sandbox (agent_sandboxes' options); `on_node`: opened there instead."""
    if on_node is not None:
        with on_node(partial(open_agent_sandbox, task, **options)) as box:
            yield box
        return
    with agent_sandboxes(task, **options).open() as box:
        yield box
