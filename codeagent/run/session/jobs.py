"""The session's jobs on its background thread: start a task, a follow-up, an MCP prompt, resume, clear;
and `run_job`, which runs one of them, then the messages queued meanwhile, and says what went wrong."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...events import PatchChanged
from ...models.tokens import estimate_tokens
from ...sandbox import SandboxError, WorkspaceError, snapshot
from ...status import LIMITS, ExitStatus
from ...task import Task
from ..solve import start_from_working_tree
from . import turn
from .events import Resumed
from .patch import working_tree
from .stats import Stats

if TYPE_CHECKING:
    from .parts import SessionParts

CONTINUE_AFTER = (ExitStatus.SUBMITTED, ExitStatus.EMPTY_SUBMISSION, ExitStatus.ANSWERED, *LIMITS)  # a queued message then runs on its own


def run_job(session: SessionParts, work: Callable[..., None], args: tuple[Any, ...]) -> None:
    state, worker, agent = session.state, session.worker, session.agent
    state.ran_agent = False
    try:
        work(*args)
        # messages sent while this job ran and no agent read them (a sandbox starting, a run
        # that ended first): they start the next turn
        while (state.task is not None and not worker.closed and not worker.stop.is_set()
               and not agent.inbox.empty() and (not state.ran_agent or state.last_status in CONTINUE_AFTER)):
            session.notice("Continuing with your message.")
            state.ran_agent = False
            turn.run_agent(session)
            if not state.ran_agent:  # it could not run (no model...): it said why
                break
    except WorkspaceError as exc:  # the repository, not Docker
        session.slot.set_state("failed")
        session.notice(f"{exc}\nFix that, then send a message to try again.", "error")
    except SandboxError as exc:
        session.slot.set_state("failed")
        session.notice(f"The sandbox failed: {exc}\nFix that, then send a message to try again "
                       "(`codeagent sandbox build` makes the image; is Docker running?).", "error")
    except Exception as exc:  # a bug or an environment problem: say it, keep the client alive
        session.notice(f"{type(exc).__name__}: {exc}", "error")


def start(session: SessionParts, task: Task) -> None:
    started_from = None
    if session.apply_repo is not None:  # the user's own folder: start from what they see in it
        task, started_from = start_from_working_tree(task)
    snap = snapshot(task.repo, task.base_commit)
    state = session.state
    state.task = task.model_copy(update={"base_commit": snap.commit})  # resume finds the same base
    if started_from:
        session.notice(started_from[0].upper() + started_from[1:] + ".")
    state.set_run(None, None)
    state.reset()
    turn.solve(session)


def follow_up(session: SessionParts, text: str) -> None:
    turn.run_agent(session, text)


def send_prompt(session: SessionParts, command: str, argument: str) -> None:
    servers = session.agent.open_tools()
    try:
        if servers is None:
            raise ValueError("no MCP server is configured")
        text = servers.render_prompt(command, argument)
    except ValueError as exc:
        session.notice(f"/{command}: {exc}", "warning")
        return
    session.notice(f"/{command}: the server's prompt, sent as your message:\n{text}")
    if session.state.task is None:
        start(session, Task(repo=session.repo, problem_statement=text, base_commit=session.commit))
    else:
        turn.run_agent(session, text)


def resume(session: SessionParts, trajectory_id: str, follow_up: str | None) -> None:
    trajectory = session.store.load(trajectory_id)
    session.slot.drop("none")
    state = session.state
    state.task = Task(**trajectory.task)
    if session.apply_default:
        session.apply_repo = working_tree(state.task.repo)
    state.set_run(trajectory.id, str(session.store.path_for(trajectory.id)))
    state.reset(Stats.from_totals(trajectory.totals), trajectory.patch or "")
    state.stats.context = estimate_tokens(trajectory.messages)
    state.last_status = trajectory.exit_status
    session.emit(Resumed(run_id=trajectory.id, trajectory=trajectory))
    session.slot.open(state.task, trajectory.patch or "")
    session.notice(f"Resumed session {trajectory.id} in a new sandbox with its patch applied. "
                   "Type a message to continue it.", "success")
    if follow_up:
        turn.run_agent(session, follow_up)


def clear(session: SessionParts) -> None:
    state = session.state
    previous = state.trajectory_id
    session.slot.drop("none")
    state.task = state.last_status = None
    state.set_run(None, None)
    state.candidates = {}
    state.frontier = None
    state.reset()
    while not session.agent.inbox.empty():
        session.agent.inbox.get_nowait()
    session.emit(PatchChanged(patch=""))
    saved = f" The last session is saved: /resume {previous}" if previous else ""
    session.notice("Cleared. Describe the next issue." + saved)
