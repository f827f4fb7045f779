"""A run in flight (`ActiveRun`: what the Agent's steps read and write) and the pieces of a step that need
no Agent: the tool context a run starts with, the model's output and the patch as events, the final patch."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..config import Config
from ..events import Event, ModelOutput, PatchChanged
from ..models import Sampling
from ..sandbox import PatchTooLarge, Sandbox, SandboxError
from ..task import Task
from ..tools.base import ToolContext, ToolSettings
from ..tools.skill import Skill
from ..trajectory.store import TrajectoryWriter
from .run_types import RunOptions, RunState
from .step_record import StepRecord


@dataclass
class ActiveRun:
    task: Task
    sandbox: Sandbox
    options: RunOptions
    messages: list[dict]  # the conversation so far
    sampling: Sampling
    context: ToolContext  # the run's tools' state (edit history, skills, subagents)
    writer: TrajectoryWriter
    emit: Callable[[Event], None]  # an event of this run (stamped with its id)
    state: RunState
    started: float  # time.monotonic()
    earlier_messages: int = 0  # the replies of this run come after these


def first_state(options: RunOptions) -> RunState:
    """The counters a run starts from: a resumed run's steps, cost and patch; a branch's replies as steps."""
    resume = options.resume
    if resume is not None:
        return RunState(steps=len(resume.steps), cost=resume.totals.cost or 0.0, patch=resume.patch or "")
    return RunState(steps=sum(m.get("role") == "assistant" for m in options.prefix or []))


def tool_context(sandbox: Sandbox, task: Task, config: Config, deadline: float, skills: list[Skill]) -> ToolContext:
    context = ToolContext(sandbox=sandbox, issue=task.problem_statement, settings=ToolSettings(
        command_timeout=config.limits.command_timeout, observation_chars=config.agent.observation_chars,
        review_on_submit=config.agent.review_on_submit, patch_exclude=config.patch_exclude(),
        max_patch_bytes=config.limits.max_patch_bytes, deadline=deadline, web_fetch=config.web_fetch))
    context.state["skills"] = {skill.name: skill for skill in skills}
    return context


def emit_model_output(emit: Callable[[Event], None], record: StepRecord) -> None:
    response, usage = record.response, record.response.usage
    emit(ModelOutput(step=record.index, text=response.content,
                     tool_calls=[call.model_dump() for call in response.tool_calls],
                     format_error=record.format_error, cost=usage.cost, prompt_tokens=usage.prompt_tokens,
                     completion_tokens=usage.completion_tokens, started=record.asked_at,
                     response_model=_answered_by(response), finish_reason=response.finish_reason or ""))


def emit_patch(state: RunState, context: ToolContext, index: int, emit: Callable[[Event], None]) -> None:
    state.edited = False
    try:
        patch = context.sandbox.diff(exclude=context.settings.patch_exclude,
                                     max_bytes=context.settings.max_patch_bytes)
    except PatchTooLarge:
        return  # the final patch says so; nothing that large is read or shown
    if patch != state.patch:
        state.patch = patch
        emit(PatchChanged(step=index, patch=patch))


def final_patch(sandbox: Sandbox, context: ToolContext, state: RunState) -> str:
    recover = getattr(sandbox, "recover", None)  # restarts processes; the files are kept
    for attempt in range(2):
        try:
            return sandbox.diff(exclude=context.settings.patch_exclude, max_bytes=context.settings.max_patch_bytes)
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


def _answered_by(response) -> str:
    """The model that answered as its server names it (an OpenAI-style reply's `model`), "" when not told."""
    named = (response.raw or {}).get("model") if isinstance(response.raw, dict) else None
    return named if isinstance(named, str) else ""
