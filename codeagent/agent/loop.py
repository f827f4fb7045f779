"""The agent loop: render prompts, ask the model, run the tools, observe; stop on submit or a limit.

Every step is appended to the trajectory store as it completes, so a crash or Ctrl-C loses at
most the step in flight. Control flow uses one small exception, `Stop`.

Here: the Agent, a run's lifecycle (prompts, skills, hooks, the inbox, limits, the final patch) and its step.
The Agent owns its collaborators: the model call (agent/model_call.py), the tool caller (agent/tool_calls.py),
and a typed record per step (agent/step_record.py); a run in flight and its helpers are in agent/step.py, the
run's types (`RunOptions`, `RunResult`...) in agent/run_types.py.
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
from ..events import Event, EventBus, Finished, RunStarted, StepStarted
from ..hooks import Hooks
from ..models import Model, ModelError, ModelResponse, Sampling
from ..sandbox import PatchTooLarge, Sandbox, SandboxError
from ..sandbox.workspace import environment_note
from ..status import ExitStatus
from ..task import Task
from ..tools.mcp import mcp_tools
from ..tools.registry import ToolRegistry
from ..tools.skill import Skill, find_skills, skill_roots
from ..trajectory.store import TrajectoryStore, TrajectoryWriter
from . import hook_points
from .instructions import read_instructions
from .model_call import ModelCall
from .model_progress import model_progress
from .modes import PLAN, offered_specs, switch_messages
from .prompts import render
from .run_types import Approval, Approver, ParentRun, RunOptions, RunResult, Stop, last_reply_text
from .step import ActiveRun, emit_model_output, emit_patch, final_patch, first_state, tool_context
from .step_record import StepRecord, now
from .subagents import Subagents
from .tool_calls import ToolCaller

# the names other modules import from here (run_types holds them)
__all__ = ["Agent", "Approval", "Approver", "RunOptions", "RunResult", "Stop", "enabled_tools"]


class Agent:
    """One run at a time of the loop, with the collaborators it owns: the model call (`ModelCall`), the tool
    caller (`ToolCaller`) and, for each step, a `StepRecord` (agent/step.py). Callers configure it through the
    constructor and the methods below, never by writing its attributes."""

    def __init__(self, model: Model, config: Config, *, tools: ToolRegistry | None = None,
                 events: EventBus | None = None, store: TrajectoryStore | None = None,
                 approver: Approver | None = None, warn: Callable[[str], None] | None = None,
                 interactive: bool = False, keep_tools_open: bool = False, parent: ParentRun | None = None):
        self.warn = warn or partial(print, file=sys.stderr)  # one-line notices: an MCP server left out...
        self.config = config
        self.tools = tools or ToolRegistry(config.agent.tools or None, enabled=enabled_tools(config))
        self.events = events or EventBus()
        self.store = store or TrajectoryStore(config.trajectory_root())
        self.interactive = interactive  # a user answers (TUI, headless solve): a plain reply ends the run `answered`
        self.keep_tools_open = keep_tools_open  # MCP servers: True keeps them from the first run until close()
        self.parent = parent  # a subagent's parent run (subagents.py); None for a top-level run
        self.inbox: queue.Queue[str] = queue.Queue()  # follow-up instructions, read before each step
        self.mcp: Any = None  # the open MCP servers (McpServers) while `open_tools` keeps them: their prompts
        self.skills: list[Skill] = []
        self._interrupted = threading.Event()
        self._sandbox: Sandbox | None = None
        self._open_tools: contextlib.ExitStack | None = None
        self._tools_lock = threading.Lock()
        self._skill_tool = self.tools.tools.get("skill")  # offered only while there are skills
        self._said: set[str] = set()
        self.model_call = ModelCall(model, config, self.store.root, self._interrupted)
        self.tool_caller = ToolCaller(self.tools, config, approver, self._interrupted, self.interrupt,
                                      Hooks(config.hooks, warn=self.warn))

    # -- what callers read and switch -----------------------------------------------------------

    @property
    def model(self) -> Model:
        return self.model_call.model

    @property
    def mode(self) -> str:
        """normal, or plan (read-only tools, answers in text: modes.py)."""
        return self.tool_caller.mode

    @property
    def depth(self) -> int:
        return self.parent.depth if self.parent else 0

    @property
    def deadline(self) -> float:
        """time.monotonic() at which the running run's max_seconds are up."""
        return self.model_call.deadline

    def interrupted(self) -> bool:
        return self._interrupted.is_set()

    def use_model(self, model: Model) -> None:
        """Ask this model from the next step on (the session's /model)."""
        self.model_call.model = model

    def use_config(self, config: Config) -> None:
        """The settings of the next run (a session's turn: its limits grow with the turns)."""
        self.config = self.model_call.config = self.tool_caller.config = config

    def set_mode(self, mode: str) -> None:
        """normal or plan, from the next step on (told to the model then)."""
        self.tool_caller.mode = mode

    def offer_only(self, tools: frozenset[str] | None) -> None:
        """Offer only these tools from the next step on (a custom command's allowed-tools; None: all)."""
        self.tool_caller.only_tools = tools

    def interrupt(self) -> None:
        """Stop the running step (from another thread): the command in flight is killed and the
        run ends as `interrupted`, its trajectory saved; `run(resume=...)` can continue it."""
        self._interrupted.set()
        if self._sandbox is not None and hasattr(self._sandbox, "interrupt"):
            self._sandbox.interrupt()
        if self.tool_caller.subagents is not None:
            self.tool_caller.subagents.interrupt()

    # -- a run ----------------------------------------------------------------------------------

    def run(self, task: Task, sandbox: Sandbox, options: RunOptions | None = None) -> RunResult:
        """Run until submit or a limit; the configured MCP servers' tools are there while it runs
        (with `keep_tools_open`, from the first run until `close()`: a session's turns share them)."""
        with contextlib.ExitStack() as per_run:
            if self.keep_tools_open:
                self.open_tools()
            elif self._open_tools is None:
                per_run.enter_context(mcp_tools(self.tools, self.config.mcp, self.warn,
                                                cancelled=self._interrupted.is_set))
            return self._run(task, sandbox, options or RunOptions())

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

    def _run(self, task: Task, sandbox: Sandbox, options: RunOptions) -> RunResult:
        run = self._start(task, sandbox, options)
        status, message = ExitStatus.INTERRUPTED, ""
        try:
            if options.resume is None and not options.prefix:
                self._start_hooks(options.instance_prompt or task.problem_statement, run)
            while True:
                self._check_limits(run)
                self._read_inbox(run)
                self._step(run)
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
            run.context.close()
            status, message, patch, seconds = self._end(run, status, message)
        answer = last_reply_text(run.messages[run.earlier_messages:])
        run.emit(Finished(exit_status=status, message=message, patch=patch, steps=run.state.steps,
                          cost=run.state.cost, seconds=seconds, trajectory_id=run.writer.id,
                          trajectory_path=str(run.writer.path), answer=answer))
        return RunResult(status, message, patch, run.state.steps, run.state.cost, seconds, run.writer.id,
                         str(run.writer.path), run.writer.lost or "", answer)

    def _start(self, task: Task, sandbox: Sandbox, options: RunOptions) -> ActiveRun:
        """The run's record opened (a new trajectory, or the resumed one), its first messages, its tools."""
        config, started = self.config, time.monotonic()
        self.model_call.deadline = started + config.limits.max_seconds
        self._interrupted.clear()
        self._sandbox = sandbox
        sampling = Sampling(temperature=config.model.temperature, top_p=config.model.top_p,
                            max_tokens=config.model.max_tokens, seed=config.model.seed)
        self.model_call.keep = read_instructions(sandbox)  # kept in the context, even when it is elided
        self._load_skills(task)
        messages, writer = self._open_record(task, sandbox, sampling, options)
        if options.follow_up:
            self.inbox.put(options.follow_up)
        self.tool_caller.hooks = Hooks(config.hooks, session_id=writer.id, transcript_path=str(writer.path),
                                       warn=self.warn)
        emit = partial(_emit_stamped, self.events, writer.id)
        provider = getattr(self.model, "provider", "")
        emit(RunStarted(task_id=task.instance_id, model=self.model.name, sandbox=sandbox.kind, replay=options.replay,
                        provider=provider if isinstance(provider, str) else "",
                        candidate_index=options.candidate_index))
        context = tool_context(sandbox, task, config, self.model_call.deadline, self.skills)
        subagents = Subagents(self, task, writer.id, emit) if "subagent" in self.tools.tools else None
        self.tool_caller.subagents = context.state["subagents"] = subagents
        return ActiveRun(task, sandbox, options, messages, sampling, context, writer, emit,
                         first_state(options), started, earlier_messages=len(messages))

    def _open_record(self, task: Task, sandbox: Sandbox, sampling: Sampling,
                     options: RunOptions) -> tuple[list[dict], TrajectoryWriter]:
        if options.resume is not None:
            resume = options.resume
            writer = self.store.open(resume.id, on_error=self.warn)
            if (resume.model, resume.model_api_base or "") != (self.model.name, _api_base(self.model)):
                writer.update(model=self.model.name, api_base=_api_base(self.model))  # /model: resume goes on with it
            return list(resume.messages), writer
        prefix = options.prefix
        messages = [dict(m) for m in prefix] if prefix else self._initial_messages(task, sandbox, options.localization)
        if options.instance_prompt is not None and not prefix:
            messages[-1] = {"role": "user", "content": options.instance_prompt}
        parent = self.parent
        writer = self.store.create(task=task.model_dump(exclude_none=True), config=self.config.recorded(),
                                   model=self.model.name, api_base=_api_base(self.model),
                                   sampling=sampling.model_dump(exclude_none=True), tools=self.tools.specs(),
                                   messages=messages, group_id=options.group_id,
                                   candidate_index=options.candidate_index, on_error=self.warn,
                                   parent_id=parent.run_id if parent else None,
                                   parent_step=parent.step if parent else None, **(options.lineage or {}))
        return messages, writer

    def _end(self, run: ActiveRun, status: ExitStatus, message: str) -> tuple[ExitStatus, str, str, float]:
        """The run's final patch and status, written to its record, which is closed."""
        state, limits = run.state, self.config.limits
        try:  # a fresh sandbox in which no tool ran has no change: it need not be asked (a question's answer
            # is not kept waiting for a diff)
            untouched = run.options.fresh_sandbox and run.options.resume is None and state.tool_calls == 0
            patch = "" if untouched else final_patch(run.sandbox, run.context, state)
            too_large = patches.too_large(patch, limits.max_patch_bytes)
        except PatchTooLarge as exc:  # never read out of the sandbox
            patch, too_large = "", str(exc)
        if too_large:  # never store a cut patch: it would apply wrongly
            patch, status, message = "", ExitStatus.PATCH_TOO_LARGE, f"{too_large} (the run ended as {status})"
        elif self.interactive and status == ExitStatus.SUBMITTED and not patch.strip():  # for the user (and
            # CI), "fixed" and "did nothing" differ; a batch's harness grades the empty patch as it is
            status, message = ExitStatus.EMPTY_SUBMISSION, "the agent submitted without changing any file"
        seconds = time.monotonic() - run.started
        run.writer.update(patch=patch, exit_status=status, exit_message=message, wall_seconds=seconds)
        run.writer.close()
        return status, message, patch, seconds

    def _step(self, run: ActiveRun) -> None:
        """Ask the model, run the reply's tool calls, record the step; `Stop` when the run is over."""
        state, emit = run.state, run.emit
        record = StepRecord(index=state.steps)
        state.steps += 1
        emit(StepStarted(step=record.index))
        response = self._ask(run, record)
        answered = (self.interactive or self.mode == PLAN) and not response.format_error and not response.tool_calls
        error = record.format_error = None if answered else (
            response.format_error or (None if response.tool_calls else "the reply has no tool call"))
        emit_model_output(emit, record)
        new_messages, submitted = [response.to_message()], False
        if error:
            state.format_errors += 1
            new_messages.append(self._format_error_message(error, state.format_errors))
        else:
            state.format_errors = 0
            replies, submitted = self.tool_caller.run_calls(response.tool_calls, run.context, state, record, emit)
            new_messages += replies
        if self.tool_caller.subagents is not None:
            state.cost += self.tool_caller.subagents.take_cost()
        run.messages.extend(new_messages)
        run.writer.append_step(record.as_dict(ended=now()), new_messages)
        if state.edited and not submitted and not self._interrupted.is_set():  # the final patch is read after the kill
            emit_patch(state, run.context, record.index, emit)
        if error and state.format_errors >= self.config.limits.max_format_errors:
            raise Stop(ExitStatus.FORMAT_ERRORS, f"{state.format_errors} unusable replies in a row; the last: {error}")
        if submitted and not self._stop_hook_continues(run):
            raise Stop(ExitStatus.SUBMITTED, "the agent submitted its patch")
        if answered:
            raise Stop(ExitStatus.ANSWERED, "the agent answered; waiting for the user")
        if self._interrupted.is_set():
            raise Stop(ExitStatus.INTERRUPTED, "interrupted by the user")

    def _ask(self, run: ActiveRun, record: StepRecord) -> ModelResponse:
        """The step's model call (told as events while the reply forms), its time and cost counted."""
        model_started, record.asked_at = time.monotonic(), time.time()
        specs = offered_specs(self.tools, self.mode, self.tool_caller.only_tools)
        with model_progress(run.emit, record.index):
            record.response = self.model_call(run.messages, run.sampling, specs)
        record.model_seconds = time.monotonic() - model_started
        run.state.cost += record.response.usage.cost or 0.0
        return record.response

    def _format_error_message(self, error: str, count: int) -> dict:
        return {"role": "user", "content": render(
            "format_error", self.config.agent.prompts_dir, error=error, count=count,
            limit=self.config.limits.max_format_errors, native_tools=self.config.model.native_tools)}

    # -- pieces --------------------------------------------------------------------------------

    def _initial_messages(self, task: Task, sandbox: Sandbox, localization: str) -> list[dict]:
        agent = self.config.agent
        values = dict(workdir=sandbox.workdir, network=self.config.sandbox.network, scratch_dir=agent.scratch_dir,
                      environment=environment_note(sandbox))  # the image's toolchains and test command
        system = render("subagent" if self.parent else "system", agent.prompts_dir, instructions=self.model_call.keep,
                        interactive=self.interactive, mode=self.mode, skills=self.skills, **values)
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
        if text not in self._said:
            self._said.add(text)
            self.warn(text)

    def _start_hooks(self, prompt: str, run: ActiveRun) -> None:
        """SessionStart, then UserPromptSubmit for the first prompt (hooks.py)."""
        prompts_dir, hooks = self.config.agent.prompts_dir, self.tool_caller.hooks
        added = hook_points.context_messages("SessionStart", hooks.session_start("startup"), prompts_dir)
        blocked, more = hook_points.prompt_submitted(hooks, prompt, prompts_dir)
        if blocked is not None:
            raise Stop(ExitStatus.INTERRUPTED, f"a UserPromptSubmit hook blocked the prompt: {blocked}")
        if added + more:
            run.messages.extend(added + more)
            run.writer.append_messages(added + more)

    def _read_inbox(self, run: ActiveRun) -> None:
        arrived = switch_messages(run.messages, self.mode, self.config.agent.prompts_dir)  # plan mode on or off
        while not self.inbox.empty():
            prompt = self.inbox.get_nowait()
            blocked, more = hook_points.prompt_submitted(self.tool_caller.hooks, prompt, self.config.agent.prompts_dir)
            if blocked is not None:
                self.warn(f"a UserPromptSubmit hook blocked the message: {blocked}")
                continue
            arrived += [{"role": "user", "content": prompt}, *more]
        if arrived:
            run.messages.extend(arrived)
            run.writer.append_messages(arrived)

    def _stop_hook_continues(self, run: ActiveRun) -> bool:
        """Stop hooks (hooks.py) may keep the run going after a submit: their reason is the next prompt."""
        message = hook_points.stop_message(self.tool_caller.hooks, self.config.agent.prompts_dir)
        if message is not None:
            run.messages.append(message)
            run.writer.append_messages([message])
        return message is not None

    def _check_limits(self, run: ActiveRun) -> None:
        if self._interrupted.is_set():
            raise Stop(ExitStatus.INTERRUPTED, "interrupted by the user")
        limits, state = self.config.limits, run.state
        if state.steps >= limits.max_steps:
            raise Stop(ExitStatus.MAX_STEPS, f"reached the limit of {limits.max_steps} steps")
        if state.cost >= limits.max_cost:
            raise Stop(ExitStatus.MAX_COST, f"spent ${state.cost:.4f}, the limit is ${limits.max_cost:.2f}")
        if time.monotonic() - run.started >= limits.max_seconds:
            raise Stop(ExitStatus.MAX_TIME, f"ran for more than {limits.max_seconds:g}s")
        if state.tool_calls >= limits.max_tool_calls:
            raise Stop(ExitStatus.MAX_TOOL_CALLS, f"made {state.tool_calls} tool calls, the limit of this run")


def enabled_tools(config: Config) -> set[str]:
    """The opt-in tools (`opt_in: true` in tools/*.yaml) the user's config turns on."""
    return ({"web_fetch"} if config.web_fetch.allow else set()) | ({"subagent"} if config.agent.subagents else set())


def _api_base(model: Model) -> str:
    """The model's server as a session keeps it ("" for a provider's own); never a key."""
    value = getattr(model, "api_base", None)
    return value if isinstance(value, str) else ""


def _emit_stamped(events: EventBus, run_id: str, event: Event) -> None:
    event.run_id = run_id
    events.emit(event)

