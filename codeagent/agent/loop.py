"""The agent loop: render prompts, ask the model, run the tools, observe; stop on submit or a limit.

Every step is appended to the trajectory store as it completes, so a crash or Ctrl-C loses at
most the step in flight. Control flow uses one small exception, `Stop`.
"""

from __future__ import annotations

import contextlib
import queue
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import partial
from typing import Any

from .. import patches
from ..config import Config, repository_trusted, user_config_folder
from ..events import EventBus, Finished, ModelOutput, Observed, PatchChanged, RunStarted, StepStarted, ToolCalled
from ..hooks import Hooks
from ..models import ContextWindowExceeded, Model, ModelError, Sampling, ToolCall
from ..models.cancel import Cancelled, call_cancellable
from ..sandbox import PatchTooLarge, Sandbox, SandboxError
from ..status import ExitStatus
from ..task import Task
from ..tools.base import ToolContext, ToolSettings
from ..tools.mcp import mcp_tools
from ..tools.registry import ToolRegistry
from ..tools.skill import Skill, find_skills, skill_roots
from ..trajectory.schema import Trajectory
from ..trajectory.store import TrajectoryStore
from . import hook_points
from .history import estimate_tokens, fit_messages
from .images import inline
from .instructions import read_instructions
from .model_progress import model_progress
from .modes import PLAN, offered_specs, refusal, switch_messages
from .prompts import render
from .subagents import Subagents


class Stop(Exception):
    def __init__(self, status: ExitStatus, message: str = ""):
        super().__init__(message or status)
        self.status, self.message = status, message


@dataclass
class Approval:
    allowed: bool
    reason: str = ""  # for a denial: goes back to the model
    source: str = "user"  # "config": the approval mode or a remembered rule allowed it without asking


# Asked before each tool call runs (the TUI's approval modes); None means every call is allowed.
Approver = Callable[..., Approval]  # (call) or (call, force=True): a hook wants the user asked


@dataclass
class RunResult:
    exit_status: ExitStatus | str  # a selected candidate's status comes back from its trajectory as text
    message: str
    patch: str
    steps: int
    cost: float
    seconds: float
    trajectory_id: str
    trajectory_path: str
    record_lost: str = ""  # why the trajectory could not be (fully) written; the patch is here all the same


class Agent:
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
             follow_up: str | None = None, instance_prompt: str | None = None) -> RunResult:
        """Run until submit or a limit. With `resume`, continue that trajectory's conversation (the
        caller gives a sandbox in which its patch is applied) with `follow_up` as the next user turn.
        `instance_prompt` replaces the rendered first user message (other jobs than a fix: tests...)."""
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
            messages = self._initial_messages(task, sandbox, localization)
            if instance_prompt is not None:
                messages[-1] = {"role": "user", "content": instance_prompt}
            writer = self.store.create(task=task.model_dump(exclude_none=True), config=config.recorded(),
                                       model=self.model.name, api_base=_api_base(self.model),
                                       sampling=sampling.model_dump(exclude_none=True),
                                       tools=self.tools.specs(), messages=messages, group_id=group_id,
                                       candidate_index=candidate_index, on_error=self.warn,
                                       parent_id=self.parent_run[0] if self.parent_run else None,
                                       parent_step=self.parent_run[1] if self.parent_run else None)
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
        state = _RunState(steps=len(resume.steps) if resume else 0, cost=(resume.totals.cost or 0.0) if resume else 0.0,
                          patch=(resume.patch or "") if resume else "")
        status, message = ExitStatus.INTERRUPTED, ""
        try:
            if resume is None:
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
            try:
                patch = self._final_patch(sandbox, context, state)
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
        emit(Finished(exit_status=status, message=message, patch=patch, steps=state.steps, cost=state.cost,
                      seconds=seconds, trajectory_id=run_id, trajectory_path=str(writer.path)))
        return RunResult(status, message, patch, state.steps, state.cost, seconds, run_id, str(writer.path),
                         writer.lost or "")

    # -- pieces --------------------------------------------------------------------------------

    def _initial_messages(self, task: Task, sandbox: Sandbox, localization: str) -> list[dict]:
        agent = self.config.agent
        values = dict(workdir=sandbox.workdir, network=self.config.sandbox.network, scratch_dir=agent.scratch_dir)
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

    def _check_limits(self, state: _RunState, started: float) -> None:
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

    def _step(self, state, messages, sampling, context, writer, emit) -> None:
        index = state.steps
        state.steps += 1
        emit(StepStarted(step=index))
        step_started = _now()
        model_started, asked_at = time.monotonic(), time.time()
        with model_progress(emit, index):
            response = self._complete(messages, sampling)
        model_seconds = time.monotonic() - model_started
        state.cost += response.usage.cost or 0.0
        answered = (self.interactive or self.mode == PLAN) and not response.format_error and not response.tool_calls
        error = None if answered else response.format_error or (None if response.tool_calls else "the reply has no tool call")
        emit(ModelOutput(step=index, text=response.content,
                         tool_calls=[call.model_dump() for call in response.tool_calls],
                         format_error=error, cost=response.usage.cost,
                         prompt_tokens=response.usage.prompt_tokens, completion_tokens=response.usage.completion_tokens,
                         started=asked_at, response_model=_answered_by(response), finish_reason=response.finish_reason or ""))
        new_messages = [response.to_message()]
        tool_stats, tool_seconds, submitted = [], 0.0, False
        if error:
            state.format_errors += 1
            limit = self.config.limits.max_format_errors
            new_messages.append({"role": "user", "content": render(
                "format_error", self.config.agent.prompts_dir, error=error, count=state.format_errors,
                limit=limit, native_tools=self.config.model.native_tools)})
        else:
            state.format_errors = 0
            early = self._start_subagents(response.tool_calls, context, state, index)
            for number, call in enumerate(response.tool_calls, 1):
                if submitted:  # keep the transcript valid: every call gets an answer
                    new_messages.append(_tool_message(call, "Not run: the solution was already submitted."))
                    continue
                if skipped := self._over_call_limits(state, number):
                    new_messages.append(_tool_message(call, skipped))
                    continue
                state.tool_calls += 1
                emit(ToolCalled(step=index, call_id=call.id, tool=call.name, arguments=call.arguments))
                approval = ("", "")
                try:
                    result, approval = self._call_tool(call, context, early.get(call.id))
                except KeyboardInterrupt:  # Ctrl-C in a headless run: the step is kept, then the run ends
                    from ..tools.base import ToolResult

                    self.interrupt()  # the command in flight is killed too
                    result = ToolResult("Interrupted by the user while it ran.", error=True)
                interrupted = self._interrupted.is_set()
                tool_seconds += result.seconds
                submitted = result.submitted
                state.edited |= not self.tools.read_only(call.name)
                observation = render("observation", self.config.agent.prompts_dir, result=result)
                new_messages.append(_tool_message(call, observation))
                tool_stats.append({"id": call.id, "name": call.name, "exit_code": result.exit_code,
                                   "timed_out": result.timed_out, "seconds": round(result.seconds, 4),
                                   "output_chars": len(result.output)})
                emit(Observed(step=index, call_id=call.id, tool=call.name, output=result.output,
                              exit_code=result.exit_code, error=result.error, timed_out=result.timed_out,
                              seconds=result.seconds, interrupted=interrupted, approval=approval[0],
                              approval_source=approval[1]))
        if self._subagents is not None:
            state.cost += self._subagents.take_cost()
        messages.extend(new_messages)
        writer.append_step({
            "index": index, "started": step_started, "ended": _now(), "model_seconds": round(model_seconds, 4),
            "tool_seconds": round(tool_seconds, 4), "prompt_tokens": response.usage.prompt_tokens,
            "completion_tokens": response.usage.completion_tokens, "cost": response.usage.cost,
            "finish_reason": response.finish_reason, "format_error": error, "token_ids": response.token_ids,
            "logprobs": response.logprobs, "prompt_token_ids": response.prompt_token_ids, "tool_calls": tool_stats,
        }, new_messages)
        if state.edited and not submitted and not self._interrupted.is_set():  # the final patch is read after the kill
            self._emit_patch(state, context, index, emit)
        if error and state.format_errors >= self.config.limits.max_format_errors:
            raise Stop(ExitStatus.FORMAT_ERRORS, f"{state.format_errors} unusable replies in a row; the last: {error}")
        if submitted and not self._stop_hook_continues(messages, writer):
            raise Stop(ExitStatus.SUBMITTED, "the agent submitted its patch")
        if answered:
            raise Stop(ExitStatus.ANSWERED, "the agent answered; waiting for the user")
        if self._interrupted.is_set():
            raise Stop(ExitStatus.INTERRUPTED, "interrupted by the user")

    def _over_call_limits(self, state: _RunState, number: int) -> str | None:
        """Why the reply's `number`th call is not run, if it is not: each call costs the host
        (an edit keeps the file's last version in memory), and a reply may hold any number."""
        limits = self.config.limits
        if number > limits.max_tool_calls_per_reply:
            return (f"Not run: a reply may make at most {limits.max_tool_calls_per_reply} tool calls and this "
                    f"was call {number}. Make fewer calls per reply.")
        if state.tool_calls >= limits.max_tool_calls:
            return f"Not run: the run's limit of {limits.max_tool_calls} tool calls is reached; the run ends."
        return None

    def _start_subagents(self, calls: list[ToolCall], context: ToolContext, state: _RunState, index: int) -> dict:
        """The subagent calls a reply starts with run at the same time: each is permitted first (in order, as
        `_call_tool` would), then the permitted ones start in threads (the loop waits for each in turn, so no
        later call of the reply runs before they are done). {call id: (future or refusal, approval,
        hook)} for `_call_tool` to finish; {} when there are fewer than two."""
        from concurrent.futures import Future, ThreadPoolExecutor

        runner = self._subagents
        if runner is None:
            return {}
        limits = self.config.limits
        runner.step, runner.parent_steps_left = index, limits.max_steps - state.steps
        runner.cost_left = limits.max_cost - state.cost
        chosen = []  # the reply's leading subagent calls: each copies the state before any other call runs
        for number, call in enumerate(calls, 1):
            if call.name != "subagent" or "apply" in call.arguments or number > limits.max_tool_calls_per_reply or \
                    state.tool_calls + number > limits.max_tool_calls:
                break
            chosen.append(call)
        if len(chosen) < 2:
            return {}
        started = {}
        pool = ThreadPoolExecutor(len(chosen), thread_name_prefix="subagent")
        for call in chosen:
            refused, approval, hook = self._permit(call)
            if refused is not None:
                future: Future = Future()
                future.set_result(refused)
            else:
                future = pool.submit(self.tools.call, call.name, call.arguments, context)
            started[call.id] = (future, approval, hook)
        pool.shutdown(wait=False)
        return started

    def _call_tool(self, call: ToolCall, context: ToolContext, early=None):
        """The call's result, and whether it was allowed to run and by whom: ("accept" or "reject", "user",
        "config", "hook" or "mode"), or ("", "") when no one had to decide. `early`: the call was permitted and
        started already (_start_subagents)."""
        if early is not None:
            future, approval, hook = early
            result = future.result()
            if approval[0] == "reject" or (hook is not None and hook.block):
                return result, approval
            return hook_points.after_tool(self._hooks, call.name, call.arguments, call.id, result), approval
        refused, approval, _hook = self._permit(call)
        if refused is not None:
            return refused, approval
        result = self.tools.call(call.name, call.arguments, context)
        return hook_points.after_tool(self._hooks, call.name, call.arguments, call.id, result), approval

    def _permit(self, call: ToolCall):
        """(None, approval, hook) when the call may run, else (the refusal as a result, approval, hook)."""
        from ..tools.base import ToolResult

        if self._interrupted.is_set():
            return ToolResult("Not run: the user interrupted the run.", error=True), ("", ""), None
        if refused := refusal(self.tools, self.mode, call.name, call.arguments, self.only_tools):
            return ToolResult(refused, error=True), ("reject", "mode"), None
        vouched = self.mode == PLAN and not self.tools.opt_in(call.name)  # plan check: read-only, not asked
        hook = self._hooks.pre_tool_use(call.name, call.arguments, call.id)  # hooks.py: allow | deny | ask
        if hook.block:
            return ToolResult(f"A PreToolUse hook blocked this call: {hook.reason}", error=True), ("reject", "hook"), hook
        if hook.decision == "ask" and self.approver is None:
            return ToolResult("Not run: a PreToolUse hook wants the user to approve this call, and no one is "
                              f"there to approve it. {hook.reason}".rstrip(), error=True), ("reject", "hook"), hook
        approval = ("accept", "hook") if hook.decision == "allow" else ("", "")
        if self.approver is not None and hook.decision != "allow" and (not vouched or hook.decision == "ask"):
            decided = self.approver(call, force=True) if hook.decision == "ask" else self.approver(call)
            if not decided.allowed:
                reason = f" Their reason: {decided.reason}" if decided.reason else ""
                return (ToolResult(f"The user did not allow this call.{reason}", error=True), ("reject", decided.source),
                        hook)
            approval = ("accept", decided.source)
        return None, approval, hook

    def _stop_hook_continues(self, messages: list[dict], writer) -> bool:
        """Stop hooks (hooks.py) may keep the run going after a submit: their reason is the next prompt."""
        message = hook_points.stop_message(self._hooks, self.config.agent.prompts_dir)
        if message is not None:
            messages.append(message)
            writer.append_messages([message])
        return message is not None

    def _complete(self, messages: list[dict], sampling: Sampling):
        count = getattr(self.model, "count_tokens", estimate_tokens)
        reserve = self.config.model.max_tokens or 4096
        budget = max(1024, self.config.model.context_tokens - reserve)
        for _attempt in range(3):
            fitted = inline(fit_messages(messages, budget, count, keep=self._instructions), self.store.root)
            try:
                return self._ask_model(partial(self.model.complete, fitted, offered_specs(self.tools, self.mode, self.only_tools), sampling))
            except ContextWindowExceeded:
                budget = int(budget * 0.7)  # our estimate was optimistic: fit tighter and ask again
        raise Stop(ExitStatus.MODEL_ERROR, "the conversation does not fit the model's context window even when elided")

    def _ask_model(self, complete):
        """A remote model's call is waited on, not sat in: an interrupt or the run's time limit ends the
        run within a poll even while the server hangs (the call is abandoned). In-process models (no
        `remote`) are called directly: their generation is bounded by max_tokens, and abandoning it
        would leave it running on the weights."""
        if not getattr(self.model, "remote", False):
            return complete()

        def stop_reason() -> str | None:
            if self._interrupted.is_set():
                return ExitStatus.INTERRUPTED
            return ExitStatus.MAX_TIME if time.monotonic() >= self._deadline else None

        try:
            return call_cancellable(complete, stop_reason)
        except Cancelled as cancelled:
            if cancelled.reason == ExitStatus.INTERRUPTED:
                raise Stop(ExitStatus.INTERRUPTED, "interrupted by the user while the model was answering") from None
            raise Stop(ExitStatus.MAX_TIME, f"ran for more than {self.config.limits.max_seconds:g}s "
                                   "(the model call in flight was abandoned)") from None

    def _emit_patch(self, state, context: ToolContext, index: int, emit) -> None:
        state.edited = False
        try:
            patch = context.sandbox.diff(exclude=context.settings.patch_exclude,
                                         max_bytes=context.settings.max_patch_bytes)
        except PatchTooLarge:
            return  # the final patch says so; nothing that large is read or shown
        if patch != state.patch:
            state.patch = patch
            emit(PatchChanged(step=index, patch=patch))

    @staticmethod
    def _final_patch(sandbox: Sandbox, context: ToolContext, state: _RunState) -> str:
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


@dataclass
class _RunState:
    steps: int = 0
    cost: float = 0.0
    format_errors: int = 0
    tool_calls: int = 0  # run in this run (a resumed run counts again from 0)
    edited: bool = False
    patch: str = ""


def enabled_tools(config: Config) -> set[str]:
    """The opt-in tools (`opt_in: true` in tools/*.yaml) the user's config turns on."""
    return ({"web_fetch"} if config.web_fetch.allow else set()) | ({"subagent"} if config.agent.subagents else set())


def _api_base(model: Model) -> str:
    """The model's server as a session keeps it ("" for a provider's own); never a key."""
    value = getattr(model, "api_base", None)
    return value if isinstance(value, str) else ""


def _answered_by(response) -> str:
    """The model that answered as its server names it (an OpenAI-style reply's `model`), "" when not told."""
    named = (response.raw or {}).get("model") if isinstance(response.raw, dict) else None
    return named if isinstance(named, str) else ""


def _tool_message(call, content: str) -> dict:
    return {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": content}


def _stamped(event, run_id: str):
    event.run_id = run_id
    return event


def _now() -> datetime:
    return datetime.now(timezone.utc)
