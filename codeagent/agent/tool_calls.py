"""The tool calls of one reply (mixed into Agent, agent/loop.py): the per-reply and per-run call limits,
who permits a call (plan mode, PreToolUse hooks, the user's approver), subagent calls started together,
and the PostToolUse hook on the result."""

from __future__ import annotations

import threading
from typing import Any

from ..config import Config
from ..models import ToolCall
from ..tools.base import ToolContext
from ..tools.registry import ToolRegistry
from . import hook_points
from .modes import PLAN, refusal
from .run_types import Approver, RunState
from .subagents import Subagents


class ToolCalling:
    """Running a reply's tool calls for an Agent."""

    config: Config
    tools: ToolRegistry
    approver: Approver | None
    mode: str
    only_tools: frozenset[str] | None
    _hooks: Any
    _interrupted: threading.Event
    _subagents: Subagents | None

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
