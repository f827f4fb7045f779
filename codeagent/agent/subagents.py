"""Subagents: a sub-task handed to a fresh agent run in its own sandbox, a copy of the current state.

The copy is made from the parent's patch, not its files: a new sandbox on the same workspace image
(`fresh()`), the parent's diff applied there and committed as the new `codeagent-base`, so the
subagent's `diff()` is its own change against the parent's state at hand-off. Nothing is shared or
mounted: two subagents never see each other's edits, and the parent's files change only when the
parent applies a subagent's patch (`apply`, a later call). What is not in the diff (installed
packages, processes, files the patch leaves out) is not copied.

A subagent has its own conversation (prompts/subagent.j2), its own steps taken from the run's
subagent budget, read-only (plan mode) or full tools, no MCP servers (they act on the host), and at
the last allowed depth no `subagent` tool. Its trajectory names the parent run and step.
"""

from __future__ import annotations

import shlex
import threading
import time
from dataclasses import dataclass
from typing import Any

from ..config import McpSettings
from ..events import EventBus, ModelOutput, SubagentFinished, SubagentStarted
from ..models import model_from_settings
from ..patches import encode
from ..patches.parse import files as changed_files
from ..sandbox import SandboxError
from ..sandbox.workspace import BASE_TAG
from ..task import Task
from ..tools.base import ToolContext, ToolResult
from .run_types import ParentRun, RunOptions

_COMMIT = ("git add -A && git -c user.name=codeagent -c user.email=codeagent@localhost commit -q --no-verify "
           f"--allow-empty -m 'codeagent: the parent run at hand-off' && git tag -f {BASE_TAG} >/dev/null")


@dataclass
class Outcome:
    name: str
    report: str
    patch: str
    exit_status: str
    steps: int
    cost: float
    trajectory_id: str


class Subagents:
    """One run's subagents: the `subagent` tool finds this in `context.state["subagents"]`."""

    def __init__(self, parent, task: Task, run_id: str, emit):
        self.parent, self.task, self.run_id, self.emit = parent, task, run_id, emit
        settings = parent.config.agent
        self.steps_left = settings.subagent_steps
        self._slots = threading.BoundedSemaphore(settings.subagent_parallel)
        self._lock = threading.Lock()
        self._reading = threading.Lock()  # the parent's shell runs one command at a time
        self._count = 0
        self._running: list = []
        self.done: dict[str, Outcome] = {}
        self.step = 0  # the parent's step in flight (the loop sets it)
        self.parent_steps_left = 0
        self.cost_left = float("inf")
        self._cost = 0.0  # spent since the parent last took it

    def take_cost(self) -> float:
        with self._lock:
            cost, self._cost = self._cost, 0.0
        return cost

    def interrupt(self) -> None:
        for agent in list(self._running):
            agent.interrupt()

    def run(self, context: ToolContext, description: str, tools: str = "full", max_steps: int | None = None) -> ToolResult:
        depth, limit = self.parent.depth, self.parent.config.agent.subagent_max_depth
        if depth >= limit:
            return ToolResult(f"Not run: subagents may be nested {limit} deep and this run is at depth {depth}.",
                              error=True)
        with self._lock:
            share = max(1, self.parent.config.agent.subagent_steps // self.parent.config.agent.subagent_parallel)
            granted = min(max_steps or share, self.steps_left, self.parent_steps_left)
            if granted < 1:
                return ToolResult("Not run: the steps left for subagents (or for this run) are spent; do the work "
                                  "yourself.", error=True)
            self.steps_left -= granted
            self._count += 1
            name = f"sub-{self._count}"
        step = self.step
        try:
            with self._slots:
                outcome = self._run(context, name, step, description, tools, granted)
        finally:
            with self._lock:
                used = self.done[name].steps if name in self.done else 0
                self.steps_left += max(0, granted - used)
        return ToolResult(_observation(outcome), error=outcome.exit_status in ("error", "sandbox_error", "model_error"))

    def _run(self, context: ToolContext, name: str, step: int, description: str, tools: str, steps: int) -> Outcome:
        config = self._child_config(tools, steps)
        self.emit(SubagentStarted(step=step, name=name, task=description, tools=tools,
                                  model=self.parent.config.agent.subagent_model or self.parent.model.name))
        said: list[str] = []
        bus = EventBus(lambda event: said.append(event.text) if isinstance(event, ModelOutput) and event.text else None)
        child = None
        try:  # isolated, like a candidate: whatever goes wrong is the subagent's outcome, never the parent's crash
            model = (model_from_settings(config.model, config.model.name) if self.parent.config.agent.subagent_model
                     else self.parent.model)
            child = type(self.parent)(model, config, events=bus, store=self.parent.store, warn=self.parent.warn,
                                      interactive=True,  # a plain reply (its report) ends its run
                                      parent=ParentRun(self.run_id, step, self.parent.depth + 1))
            task = self.task.model_copy(update={"problem_statement": description,
                                                "instance_id": f"{self.task.instance_id or 'task'}/{name}"})
            self._running.append(child)
            with self._reading:
                handoff = context.sandbox.diff(exclude=context.settings.patch_exclude,
                                               max_bytes=context.settings.max_patch_bytes)
            with fork(context.sandbox, handoff) as sandbox:
                if self.parent.interrupted():  # before its run began: it would not hear of it
                    raise InterruptedError("the run was interrupted before the subagent started")
                result = child.run(task, sandbox, RunOptions(instance_prompt=description))
            outcome = Outcome(name, said[-1] if said else "", "" if tools == "read_only" else result.patch,
                              str(result.exit_status), result.steps, result.cost, result.trajectory_id)
        except Exception as exc:
            status = "interrupted" if isinstance(exc, InterruptedError) else "error"
            outcome = Outcome(name, f"the subagent did not run: {type(exc).__name__}: {exc}", "", status, 0, 0.0, "")
        finally:
            if child in self._running:
                self._running.remove(child)
        with self._lock:
            self.done[name] = outcome
            self._cost += outcome.cost
        self.emit(SubagentFinished(step=step, name=name, exit_status=outcome.exit_status, steps=outcome.steps,
                                   cost=outcome.cost, patch_lines=outcome.patch.count("\n"),
                                   trajectory_id=outcome.trajectory_id))
        return outcome

    def _child_config(self, tools: str, steps: int):
        config = self.parent.config
        limits = config.limits.model_copy(update={
            "max_steps": steps,
            "max_seconds": max(1.0, self.parent.deadline - time.monotonic()),
            "max_cost": max(0.0, min(config.limits.max_cost, self.cost_left)),
        })
        agent = config.agent.model_copy(update={
            "mode": "plan" if tools == "read_only" else "normal", "review_on_submit": False, "write_through": False,
            "subagents": config.agent.subagents and self.parent.depth + 1 < config.agent.subagent_max_depth,
        })
        model = config.model.model_copy(update={"name": config.agent.subagent_model or config.model.name})
        return config.model_copy(update={"limits": limits, "agent": agent, "model": model, "mcp": McpSettings()})

    def apply(self, context: ToolContext, name: str) -> ToolResult:
        """Apply subagent `name`'s patch to the parent's files (`git apply`)."""
        outcome = self.done.get(name)
        if outcome is None:
            known = ", ".join(self.done) or "none has finished"
            return ToolResult(f"No finished subagent is called {name!r} ({known}).", error=True)
        if not outcome.patch.strip():
            return ToolResult(f"{name} changed nothing: there is nothing to apply.", error=True)
        path = f".git/codeagent-{name}.patch"
        workdir = shlex.quote(context.sandbox.workdir)
        context.sandbox.write_file(path, encode(outcome.patch))
        applied = context.sandbox.run(f"( cd {workdir} && git apply --binary --whitespace=nowarn {path}; "
                                      f"s=$?; rm -f {path}; exit $s )", timeout=context.settings.seconds_for(120))
        if applied.exit_code != 0:
            return ToolResult(f"{name}'s patch does not apply to your files as they are now (changed since the "
                              f"hand-off?):\n{applied.output.strip()[-2000:]}", error=True, exit_code=applied.exit_code)
        return ToolResult(f"Applied {name}'s patch to your files.", exit_code=0)


class fork:  # noqa: N801 - a context manager, used as `with fork(context) as sandbox`
    """A new sandbox on the parent's base holding `patch` (the parent's diff) as its base, closed on exit."""

    def __init__(self, parent, patch: str):
        self.parent, self.patch = parent, patch
        self.sandbox: Any = None

    def __enter__(self):
        fresh, patch = getattr(self.parent, "fresh", None), self.patch
        if fresh is None:
            raise SandboxError(f"a {self.parent.kind} sandbox cannot be copied for a subagent")
        self.sandbox = fresh()
        try:
            if patch.strip():
                path = ".git/codeagent-handoff.patch"
                self.sandbox.write_file(path, encode(patch))
                done = self.sandbox.run(f"( cd {shlex.quote(self.sandbox.workdir)} && git apply --binary "
                                        f"--whitespace=nowarn {path} && rm -f {path} && {_COMMIT} )", timeout=300)
                if done.exit_code != 0:
                    raise SandboxError(f"the parent's state did not apply in the copy: {done.output.strip()[-1000:]}")
        except BaseException:
            self.sandbox.close()
            raise
        return self.sandbox

    def __exit__(self, *exc_info):
        self.sandbox.close()


def _observation(outcome: Outcome) -> str:
    head = (f"Subagent {outcome.name} finished ({outcome.exit_status}, {outcome.steps} step{'' if outcome.steps == 1 else 's'}, "
            f"${outcome.cost:.4f}); its trajectory: {outcome.trajectory_id or 'none'}.")
    report = outcome.report.strip() or "(it gave no report)"
    if not outcome.patch.strip():
        return f"{head}\n\nIts report:\n{report}\n\nIt changed no file."
    files = ", ".join(changed_files(outcome.patch))
    return (f"{head}\n\nIts report:\n{report}\n\nIts patch against your files at hand-off{f' ({files})' if files else ''}"
            f", NOT applied: call subagent with apply: \"{outcome.name}\" to apply it to your files.\n\n{outcome.patch}")
