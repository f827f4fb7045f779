"""One turn of a session's agent: one run, or (first turn, several candidates configured) N runs,
then the selected one (candidates.py); the only place that decides it. Runs on the session's thread."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...agent.run_types import RunOptions
from ...config import Config
from ...models import ModelError
from ...sandbox import SandboxError
from ...status import ExitStatus
from ...task import Task
from ..solve import preflight, recorded_history, samples_candidates, write_patch_file
from . import candidates
from .compact import view

if TYPE_CHECKING:
    from .parts import SessionParts


def solve(session: SessionParts) -> None:
    if session.model is not None and samples_candidates(session.config):
        candidates.run_candidates(session)
    else:
        run_agent(session)  # without a model it says how to choose one; the task waits


def run_agent(session: SessionParts, follow_up: str | None = None) -> None:
    state = session.state
    if session.model is None:
        session.notice("No model is configured: choose one with /model NAME (e.g. /model gpt-4o, "
                       "/model anthropic/claude-sonnet-4-20250514, /model hosted_vllm/NAME with model.api_base "
                       "set), then send any message (e.g. “go”) to start.", "error")
        return
    if session.worker.stop.is_set():
        session.notice("Interrupted before the agent started. Type a message to start it.", "warning")
        if follow_up:
            session.agent.inbox.put(follow_up)
        return
    try:
        preflight(session.model)
    except ModelError as exc:  # no key, an unknown model, a server that is not there
        session.notice(f"{exc}\nFix that, or choose another model with /model NAME; then send a message.", "error")
        return
    assert state.task is not None
    if session.slot.sandbox is None:
        session.slot.open(state.task, state.patch)
    sandbox = session.slot.sandbox
    assert sandbox is not None  # open() made it, or raised
    state.ran_agent = True
    resume = session.store.load(state.trajectory_id) if state.trajectory_id else None
    if resume is not None:
        resume = view(state, resume)  # after /compact: the summary, not the whole conversation
    localization = "" if resume else localize(session, state.task)  # the first turn's hint
    if state.notes:
        follow_up = "\n\n".join(state.notes + ([follow_up] if follow_up else []))
        state.notes = []
    session.agent.use_config(turn_config(session))
    try:
        task = recorded_history(state.task, session.slot.history) if session.slot.history else state.task
        result = session.agent.run(task, sandbox, RunOptions(localization=localization, replay=session.replay,
                                                             resume=resume, follow_up=follow_up))
    except Exception as exc:  # escaped the agent (e.g. the engine lost the container): start afresh
        state.last_status = ExitStatus.SANDBOX_ERROR
        session.slot.drop("failed")
        if isinstance(exc, SandboxError):
            raise
        raise SandboxError(f"{type(exc).__name__}: {exc}") from exc
    state.set_run(result.trajectory_id, result.trajectory_path)
    state.last_status = result.exit_status
    try:
        if session.patch_file:
            write_patch_file(session.patch_file, result.patch)
    except OSError:
        pass
    if result.exit_status == ExitStatus.SANDBOX_ERROR:
        session.slot.drop("failed")


def turn_config(session: SessionParts) -> Config:
    base, stats = session.config.limits, session.state.stats
    limits = base.model_copy(update={"max_steps": stats.steps + base.max_steps,
                             "max_cost": stats.cost + base.max_cost})
    return session.config.model_copy(update={"limits": limits})


def localize(session: SessionParts, task: Task) -> str:
    from ..solve import localization_hint

    try:
        return localization_hint(task, session.config)
    except Exception:  # a hint, not a requirement
        return ""
