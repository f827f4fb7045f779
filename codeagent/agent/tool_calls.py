"""The tool calls of one reply, run by the Agent's ToolCaller: the per-reply and per-run call limits, who
permits a call (plan mode, PreToolUse hooks, the user's approver), subagent calls started together, the
PostToolUse hook on the result, and each call's observation, events and statistics for the step's record."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from ..config import Config
from ..events import Observed, ToolCalled
from ..hooks import Hooks
from ..models import ToolCall
from ..tools.base import ToolContext, ToolResult
from ..tools.registry import ToolRegistry
from . import hook_points
from .modes import PLAN, refusal
from .prompts import render
from .run_types import Approver, RunState
from .step_record import StepRecord, ToolStat
from .subagents import Subagents


class ToolCaller:
    """Runs a reply's tool calls for an Agent. `mode` and `only_tools` say which tools may run (the Agent
    switches them between steps); `hooks` and `subagents` are the running run's."""

    def __init__(self, tools: ToolRegistry, config: Config, approver: Approver | None,
                 interrupted: threading.Event, interrupt: Callable[[], None], hooks: Hooks):
        self.tools = tools
        self.config = config
        self.approver = approver
        self.interrupted = interrupted
        self.interrupt = interrupt  # stops the run (the command in flight is killed too)
        self.hooks: Any = hooks
        self.mode: str = config.agent.mode  # plan: read-only tools only (modes.py)
        self.only_tools: frozenset[str] | None = None  # a custom command's allowed-tools, for its turn (the TUI)
        self.subagents: Subagents | None = None

    def run_calls(self, calls: list[ToolCall], context: ToolContext, state: RunState, record: StepRecord,
                  emit: Callable) -> tuple[list[dict], bool]:
        """Run the reply's calls in order: (their tool messages, whether one submitted). Every call gets an
        answer (the transcript stays valid), also the ones not run."""
        messages: list[dict] = []
        submitted = False
        early = self._start_subagents(calls, context, state, record.index)
        for number, call in enumerate(calls, 1):
            skipped = "Not run: the solution was already submitted." if submitted else \
                self._over_call_limits(state, number)
            if skipped:
                messages.append(tool_message(call, skipped))
                continue
            state.tool_calls += 1
            result = self._observed(call, context, early.get(call.id), record, emit)
            submitted = result.submitted
            state.edited |= not self.tools.read_only(call.name)
            messages.append(tool_message(call, render("observation", self.config.agent.prompts_dir, result=result)))
        return messages, submitted

    def _observed(self, call: ToolCall, context: ToolContext, early, record: StepRecord, emit: Callable) -> ToolResult:
        """One call run, told as events and counted in the step's record."""
        emit(ToolCalled(step=record.index, call_id=call.id, tool=call.name, arguments=call.arguments))
        approval = ("", "")
        called = time.monotonic()
        try:
            result, approval = self._call_tool(call, context, early)
        except KeyboardInterrupt:  # Ctrl-C in a headless run: the step is kept, then the run ends
            self.interrupt()  # the command in flight is killed too
            result = ToolResult("Interrupted by the user while it ran.", error=True)
        interrupted = self.interrupted.is_set()
        if interrupted and not result.seconds:  # it ran until the interrupt: that long, not 0 s
            result.seconds = time.monotonic() - called
        record.tool_seconds += result.seconds
        record.tool_calls.append(ToolStat(call.id, call.name, result.exit_code, result.timed_out, result.seconds,
                                          len(result.output)))
        emit(Observed(step=record.index, call_id=call.id, tool=call.name, output=result.output,
                      exit_code=result.exit_code, error=result.error, timed_out=result.timed_out,
                      seconds=result.seconds, interrupted=interrupted, approval=approval[0],
                      approval_source=approval[1]))
        return result

    def _over_call_limits(self, state: RunState, number: int) -> str | None:
        """Why the reply's `number`th call is not run, if it is not: each call costs the host
        (an edit keeps the file's last version in memory), and a reply may hold any number."""
        limits = self.config.limits
        if number > limits.max_tool_calls_per_reply:
            return (f"Not run: a reply may make at most {limits.max_tool_calls_per_reply} tool calls and this "
                    f"was call {number}. Make fewer calls per reply.")
        if state.tool_calls >= limits.max_tool_calls:
            return f"Not run: the run's limit of {limits.max_tool_calls} tool calls is reached; the run ends."
        return None

    def _start_subagents(self, calls: list[ToolCall], context: ToolContext, state: RunState, index: int) -> dict:
        """The subagent calls a reply starts with run at the same time: each is permitted first (in order, as
        `_call_tool` would), then the permitted ones start in threads (the loop waits for each in turn, so no
        later call of the reply runs before they are done). {call id: (future or refusal, approval,
        hook)} for `_call_tool` to finish; {} when there are fewer than two."""
        from concurrent.futures import Future, ThreadPoolExecutor

        runner = self.subagents
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
            return hook_points.after_tool(self.hooks, call.name, call.arguments, call.id, result), approval
        refused, approval, _hook = self._permit(call)
        if refused is not None:
            return refused, approval
        result = self.tools.call(call.name, call.arguments, context)
        return hook_points.after_tool(self.hooks, call.name, call.arguments, call.id, result), approval

    def _permit(self, call: ToolCall):
        """(None, approval, hook) when the call may run, else (the refusal as a result, approval, hook)."""
        if self.interrupted.is_set():
            return ToolResult("Not run: the user interrupted the run.", error=True), ("", ""), None
        if refused := refusal(self.tools, self.mode, call.name, call.arguments, self.only_tools):
            return ToolResult(refused, error=True), ("reject", "mode"), None
        vouched = self.mode == PLAN and not self.tools.opt_in(call.name)  # plan check: read-only, not asked
        hook = self.hooks.pre_tool_use(call.name, call.arguments, call.id)  # hooks.py: allow | deny | ask
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


def tool_message(call: ToolCall, content: str) -> dict:
    return {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": content}
