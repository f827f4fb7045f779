"""One step of an agent run (mixed into Agent, agent/loop.py): ask the model (the history fitted to its
context window; a remote call waited on so that an interrupt or the time limit ends it), run the reply's
tool calls (agent/tool_calls.py), record the step, and raise `Stop` when the run is over."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timezone
from functools import partial

from ..events import ModelOutput, Observed, PatchChanged, StepStarted, ToolCalled
from ..models import ContextWindowExceeded, Model, Sampling
from ..models.cancel import Cancelled, call_cancellable
from ..sandbox import PatchTooLarge
from ..status import ExitStatus
from ..tools.base import ToolContext
from ..trajectory.store import TrajectoryStore
from . import hook_points
from .history import estimate_tokens, fit_messages
from .images import inline
from .model_progress import model_progress
from .modes import PLAN, offered_specs
from .prompts import render
from .run_types import Stop
from .tool_calls import ToolCalling


class Stepping(ToolCalling):
    """An Agent's step: model call, tool calls, the step's record."""

    model: Model
    store: TrajectoryStore
    interactive: bool
    _instructions: str
    _deadline: float
    interrupt: Callable[[], None]

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
                called = time.monotonic()
                try:
                    result, approval = self._call_tool(call, context, early.get(call.id))
                except KeyboardInterrupt:  # Ctrl-C in a headless run: the step is kept, then the run ends
                    from ..tools.base import ToolResult

                    self.interrupt()  # the command in flight is killed too
                    result = ToolResult("Interrupted by the user while it ran.", error=True)
                interrupted = self._interrupted.is_set()
                if interrupted and not result.seconds:  # it ran until the interrupt: that long, not 0 s
                    result.seconds = time.monotonic() - called
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
            fitted = inline(fit_messages(messages, budget, count, keep=self._instructions,
                                         upper_bound=getattr(self.model, "token_upper_bound", None)), self.store.root)
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


def _answered_by(response) -> str:
    """The model that answered as its server names it (an OpenAI-style reply's `model`), "" when not told."""
    named = (response.raw or {}).get("model") if isinstance(response.raw, dict) else None
    return named if isinstance(named, str) else ""


def _tool_message(call, content: str) -> dict:
    return {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": content}


def _now() -> datetime:
    return datetime.now(timezone.utc)
