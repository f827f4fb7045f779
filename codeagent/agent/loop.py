"""The agent loop: render prompts, ask the model, run the tools, observe; stop on submit or a limit.

Every step is appended to the trajectory store as it completes, so a crash or Ctrl-C loses at
most the step in flight. Control flow uses one small exception, `Stop`.

Here: the Agent and a run's lifecycle (prompts, skills, hooks, the inbox, limits, the final patch). One
step is in agent/step.py, a reply's tool calls in agent/tool_calls.py, the run's types in
agent/run_types.py.
"""

from __future__ import annotations

import contextlib
import queue
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from .. import patches
from ..config import Config, repository_trusted, user_config_folder
from ..events import EventBus, Finished, RunStarted
from ..hooks import Hooks
from ..models import Model, ModelError, Sampling
from ..sandbox import PatchTooLarge, Sandbox, SandboxError
from ..sandbox.workspace import environment_note
from ..status import ExitStatus
from ..task import Task
from ..tools.base import ToolContext, ToolSettings
from ..tools.mcp import mcp_tools
from ..tools.registry import ToolRegistry
from ..tools.skill import Skill, find_skills, skill_roots
from ..trajectory.schema import Trajectory
from ..trajectory.store import TrajectoryStore
from . import hook_points
from .instructions import read_instructions
from .modes import switch_messages
from .prompts import render
from .run_types import Approval, Approver, RunResult, RunState, Stop, last_reply_text
from .step import Stepping
from .subagents import Subagents

# the names other modules import from here (run_types holds them)
__all__ = ["Agent", "Approval", "Approver", "RunResult", "Stop", "enabled_tools"]


class Agent(Stepping):
    def __init__(self, model: Model, config: Config, *, tools: ToolRegistry | None = None,
                 events: EventBus | None = None, store: TrajectoryStore | None = None,
                 approver: Approver | None = None, warn: Callable[[str], None] | None = None):
        self.model = model
        self.warn = warn or partial(print, file=sys.stderr)  # one-line notices: an MCP server left out...
        self.config = config
        self.tools = tools or ToolRegistry(config.agent.tools or None, enabled=enabled_tools(config))
        self.events = events or EventBus()
        self.store = store or TrajectoryStore(config.trajectory_root())
        self.approver = approver
        self.inbox: queue.Queue[str] = queue.Queue()  # follow-up instructions, read before each step
        self.context: ToolContext | None = None  # the running run's tools (edit history: /undo)
        self._interrupted = threading.Event()
        self._sandbox: Sandbox | None = None
        self._deadline = float("inf")  # time.monotonic() at which the running run's max_seconds are up
        self._instructions = ""  # the repository's AGENTS.md files (instructions.py), for the system prompt
        self.mode = config.agent.mode  # plan: read-only tools only (modes.py); the TUI switches it between steps
        self.interactive = False  # a user answers (TUI, headless solve): a plain reply ends the run as `answered`
        self.fresh_sandbox = False  # the caller's word: the sandbox is its snapshot as made (no patch in it yet)
        self._hooks = Hooks(config.hooks, warn=self.warn)
        self.keep_tools_open = False  # MCP servers: True keeps them from the first run until close()
        self._open_tools: contextlib.ExitStack | None = None
        self._tools_lock = threading.Lock()
        self.mcp: Any = None  # the open MCP servers (McpServers) while `open_tools` keeps them: their prompts
        self._skill_tool = self.tools.tools.get("skill")  # offered only while there are skills
        self.skills: list[Skill] = []
        self.only_tools: frozenset[str] | None = None  # a custom command's allowed-tools, for its turn (the TUI)
        self.depth = 0  # a subagent's: 1 (subagents.py)
        self.parent_run: tuple[str, int] | None = None  # a subagent's: (the parent's run id, its step)
        self.role = "system"  # the system prompt's template: "subagent" for a subagent
        self._subagents: Subagents | None = None

    def interrupt(self) -> None:
        """Stop the running step (from another thread): the command in flight is killed and the
        run ends as `interrupted`, its trajectory saved; `run(resume=...)` can continue it."""
        self._interrupted.set()
        if self._sandbox is not None and hasattr(self._sandbox, "interrupt"):
            self._sandbox.interrupt()
        if self._subagents is not None:
            self._subagents.interrupt()

    def run(self, task: Task, sandbox: Sandbox, **options) -> RunResult:
        """Run until submit or a limit; the configured MCP servers' tools are there while it runs
        (with `keep_tools_open`, from the first run until `close()`: a session's turns share them)."""
        with contextlib.ExitStack() as per_run:
            if self.keep_tools_open:
                self.open_tools()
            elif self._open_tools is None:
                per_run.enter_context(mcp_tools(self.tools, self.config.mcp, self.warn,
                                                cancelled=self._interrupted.is_set))
            return self._run(task, sandbox, **options)

    def open_tools(self):
        """Start the MCP servers now, if not yet, and keep them until `close()` (a session lists their
        prompts before its first turn). Their McpServers, or None when none is configured."""
        with self._tools_lock:
            if self._open_tools is None:
                self._open_tools = contextlib.ExitStack()
                self.mcp = self._open_tools.enter_context(
                    mcp_tools(self.tools, self.config.mcp, self.warn, cancelled=self._interrupted.is_set))
            return self.mcp

    def close(self) -> None:
        """Close what `keep_tools_open` kept (MCP servers)."""
        with self._tools_lock:
            if self._open_tools is not None:
                self._open_tools.close()
                self._open_tools, self.mcp = None, None

    def _run(self, task: Task, sandbox: Sandbox, *, localization: str = "", group_id: str | None = None,
             candidate_index: int | None = None, replay: bool = False, resume: Trajectory | None = None,
             follow_up: str | None = None, instance_prompt: str | None = None, prefix: list[dict] | None = None,
             lineage: dict | None = None) -> RunResult:
        """Run until submit or a limit. With `resume`, continue that trajectory's conversation (the
        caller gives a sandbox in which its patch is applied) with `follow_up` as the next user turn.
        `instance_prompt` replaces the rendered first user message (other jobs than a fix: tests...).
        `prefix`: a new trajectory that starts from these messages of another run (a search branch; the
        caller gives a sandbox in the state they left); `lineage`: header fields saying how the run relates
        to others (tts, round, parents, branch_messages)."""
        config = self.config
        started = time.monotonic()
        self._deadline = started + config.limits.max_seconds
        self._interrupted.clear()
        self._sandbox = sandbox
        sampling = Sampling(temperature=config.model.temperature, top_p=config.model.top_p,
                            max_tokens=config.model.max_tokens, seed=config.model.seed)
        self._instructions = read_instructions(sandbox)  # kept in the context, even when it is elided
        self._load_skills(task)
        if resume is None:
            messages = [dict(m) for m in prefix] if prefix else self._initial_messages(task, sandbox, localization)
            if instance_prompt is not None and not prefix:
                messages[-1] = {"role": "user", "content": instance_prompt}
            writer = self.store.create(task=task.model_dump(exclude_none=True), config=config.recorded(),
                                       model=self.model.name, api_base=_api_base(self.model),
                                       sampling=sampling.model_dump(exclude_none=True),
                                       tools=self.tools.specs(), messages=messages, group_id=group_id,
                                       candidate_index=candidate_index, on_error=self.warn,
                                       parent_id=self.parent_run[0] if self.parent_run else None,
                                       parent_step=self.parent_run[1] if self.parent_run else None, **(lineage or {}))
        else:
            messages = list(resume.messages)
            writer = self.store.open(resume.id, on_error=self.warn)
            if (resume.model, resume.model_api_base or "") != (self.model.name, _api_base(self.model)):
                writer.update(model=self.model.name, api_base=_api_base(self.model))  # /model: resume goes on with it
        if follow_up:
            self.inbox.put(follow_up)
        run_id = writer.id
        self._hooks = Hooks(config.hooks, session_id=run_id, transcript_path=str(writer.path), warn=self.warn)
        emit = lambda event: self.events.emit(_stamped(event, run_id))  # noqa: E731
        provider = getattr(self.model, "provider", "")
        emit(RunStarted(task_id=task.instance_id, model=self.model.name, sandbox=sandbox.kind, replay=replay,
                        provider=provider if isinstance(provider, str) else "", candidate_index=candidate_index))
        context = ToolContext(sandbox=sandbox, issue=task.problem_statement, settings=ToolSettings(
            command_timeout=config.limits.command_timeout, observation_chars=config.agent.observation_chars,
            review_on_submit=config.agent.review_on_submit, patch_exclude=config.patch_exclude(),
            max_patch_bytes=config.limits.max_patch_bytes,
            deadline=self._deadline, web_fetch=config.web_fetch))
        context.state["skills"] = {skill.name: skill for skill in self.skills}
        self._subagents = Subagents(self, task, run_id, emit) if "subagent" in self.tools.tools else None
        context.state["subagents"] = self._subagents
        self.context = context
        earlier = len(resume.steps) if resume else sum(m.get("role") == "assistant" for m in prefix or [])
        state = RunState(steps=earlier, cost=(resume.totals.cost or 0.0) if resume else 0.0,
                          patch=(resume.patch or "") if resume else "")
        status, message = ExitStatus.INTERRUPTED, ""
        earlier = len(messages)  # the replies of this run come after these
        try:
            if resume is None and not prefix:
                self._start_hooks(instance_prompt or task.problem_statement, messages, writer)
            while True:
                self._check_limits(state, started)
                self._read_inbox(messages, writer)
                self._step(state, messages, sampling, context, writer, emit)
        except Stop as stop:
            status, message = stop.status, stop.message
        except KeyboardInterrupt:
            status, message = ExitStatus.INTERRUPTED, "interrupted by the user"
        except ModelError as exc:
            status, message = ExitStatus.MODEL_ERROR, f"{type(exc).__name__}: {exc}"
        except SandboxError as exc:
            status, message = ExitStatus.SANDBOX_ERROR, f"{type(exc).__name__}: {exc}"
        finally:
            self._sandbox = None
            context.close()
            try:  # a fresh sandbox in which no tool ran has no change: it need not be asked (a question's answer
                # is not kept waiting for a diff)
                untouched = self.fresh_sandbox and resume is None and state.tool_calls == 0
                patch = "" if untouched else self._final_patch(sandbox, context, state)
                too_large = patches.too_large(patch, config.limits.max_patch_bytes)
            except PatchTooLarge as exc:  # never read out of the sandbox
                patch, too_large = "", str(exc)
            if too_large:  # never store a cut patch: it would apply wrongly
                patch, status, message = "", ExitStatus.PATCH_TOO_LARGE, f"{too_large} (the run ended as {status})"
            elif self.interactive and status == ExitStatus.SUBMITTED and not patch.strip():  # for the user (and
                # CI), "fixed" and "did nothing" differ; a batch's harness grades the empty patch as it is
                status, message = ExitStatus.EMPTY_SUBMISSION, "the agent submitted without changing any file"
            seconds = time.monotonic() - started
            writer.update(patch=patch, exit_status=status, exit_message=message, wall_seconds=seconds)
            writer.close()
        answer = last_reply_text(messages[earlier:])
        emit(Finished(exit_status=status, message=message, patch=patch, steps=state.steps, cost=state.cost,
                      seconds=seconds, trajectory_id=run_id, trajectory_path=str(writer.path), answer=answer))
        return RunResult(status, message, patch, state.steps, state.cost, seconds, run_id, str(writer.path),
                         writer.lost or "", answer)

    # -- pieces --------------------------------------------------------------------------------

    def _initial_messages(self, task: Task, sandbox: Sandbox, localization: str) -> list[dict]:
        agent = self.config.agent
        values = dict(workdir=sandbox.workdir, network=self.config.sandbox.network, scratch_dir=agent.scratch_dir,
                      environment=environment_note(sandbox))  # the image's toolchains and test command
        system = render(self.role, agent.prompts_dir, instructions=self._instructions, interactive=self.interactive,
                        mode=self.mode, skills=self.skills, **values)
        instance = render("instance", agent.prompts_dir, problem_statement=task.problem_statement,
                          hints_text=task.hints_text, localization=localization, **values)
        return [{"role": "system", "content": system}, {"role": "user", "content": instance}]

    def _load_skills(self, task: Task) -> None:
        """The user's skills and a trusted repository's (tools/skill.py), for a session a user follows (a
        batch run's prompt stays the dataset's). The `skill` tool is offered only while there are some."""
        self.skills = []
        if self.interactive and self._skill_tool is not None:
            roots = skill_roots(user_config_folder() / "skills", task.repo,
                                repository_trusted(self.config, task.repo))
            self.skills = find_skills(roots, self._say_once)
        if self.skills and self._skill_tool is not None:
            self.tools.add(self._skill_tool)
        else:
            self.tools.remove("skill")

    def _say_once(self, text: str) -> None:
        """A notice about the skills, said in a session's first turn and not at every turn again."""
        said = self.__dict__.setdefault("_said", set())
        if text not in said:
            said.add(text)
            self.warn(text)

    def _start_hooks(self, prompt: str, messages: list[dict], writer) -> None:
        """SessionStart, then UserPromptSubmit for the first prompt (hooks.py)."""
        prompts_dir = self.config.agent.prompts_dir
        added = hook_points.context_messages("SessionStart", self._hooks.session_start("startup"), prompts_dir)
        blocked, more = hook_points.prompt_submitted(self._hooks, prompt, prompts_dir)
        if blocked is not None:
            raise Stop(ExitStatus.INTERRUPTED, f"a UserPromptSubmit hook blocked the prompt: {blocked}")
        if added + more:
            messages.extend(added + more)
            writer.append_messages(added + more)

    def _read_inbox(self, messages: list[dict], writer) -> None:
        arrived = switch_messages(messages, self.mode, self.config.agent.prompts_dir)  # plan mode on or off
        while not self.inbox.empty():
            prompt = self.inbox.get_nowait()
            blocked, more = hook_points.prompt_submitted(self._hooks, prompt, self.config.agent.prompts_dir)
            if blocked is not None:
                self.warn(f"a UserPromptSubmit hook blocked the message: {blocked}")
                continue
            arrived += [{"role": "user", "content": prompt}, *more]
        if arrived:
            messages.extend(arrived)
            writer.append_messages(arrived)

    def _check_limits(self, state: RunState, started: float) -> None:
        if self._interrupted.is_set():
            raise Stop(ExitStatus.INTERRUPTED, "interrupted by the user")
        limits = self.config.limits
        if state.steps >= limits.max_steps:
            raise Stop(ExitStatus.MAX_STEPS, f"reached the limit of {limits.max_steps} steps")
        if state.cost >= limits.max_cost:
            raise Stop(ExitStatus.MAX_COST, f"spent ${state.cost:.4f}, the limit is ${limits.max_cost:.2f}")
        if time.monotonic() - started >= limits.max_seconds:
            raise Stop(ExitStatus.MAX_TIME, f"ran for more than {limits.max_seconds:g}s")
        if state.tool_calls >= limits.max_tool_calls:
            raise Stop(ExitStatus.MAX_TOOL_CALLS, f"made {state.tool_calls} tool calls, the limit of this run")

    @staticmethod
    def _final_patch(sandbox: Sandbox, context: ToolContext, state: RunState) -> str:
        recover = getattr(sandbox, "recover", None)  # restarts processes; the files are kept
        for attempt in range(2):
            try:
                return sandbox.diff(exclude=context.settings.patch_exclude,
                                    max_bytes=context.settings.max_patch_bytes)
            except PatchTooLarge:
                raise
            except (SandboxError, OSError):
                if attempt or recover is None:
                    break
                try:
                    recover()
                except (SandboxError, OSError):
                    break
        return state.patch  # the sandbox is gone: the last patch seen is the best we have


def enabled_tools(config: Config) -> set[str]:
    """The opt-in tools (`opt_in: true` in tools/*.yaml) the user's config turns on."""
    return ({"web_fetch"} if config.web_fetch.allow else set()) | ({"subagent"} if config.agent.subagents else set())


def _api_base(model: Model) -> str:
    """The model's server as a session keeps it ("" for a provider's own); never a key."""
    value = getattr(model, "api_base", None)
    return value if isinstance(value, str) else ""


def _stamped(event, run_id: str):
    event.run_id = run_id
    return event

