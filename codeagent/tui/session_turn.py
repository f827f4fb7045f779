"""One turn of a session's agent: one run, or (first turn, several candidates configured) N runs,
then the selected one; the only place that decides it. Runs on the session's thread; `session` is
the Session (not imported: it imports this)."""

from __future__ import annotations

from ..config import Config
from ..events import SelectionMade
from ..models import ModelError
from ..run.solve import preflight, samples_candidates, write_patch_file
from ..sandbox import SandboxError
from ..status import ExitStatus
from ..task import Task
from .session_compact import view
from .session_events import Resumed, SamplingStarted


def solve(session) -> None:
    if session.model is not None and samples_candidates(session.config):
        run_candidates(session)
    else:
        run_agent(session)  # without a model it says how to choose one; the task waits


def run_candidates(session) -> None:
    """Sample the candidates (each in its own sandbox, without asking: the sandboxes are the
    guard), verify and select one; follow-ups then continue the selected one."""
    from ..run.solve import solve as solve_task

    count = session.config.scaling.candidates
    session.notice(f"Sampling {count} candidates in parallel sandboxes; they run without asking for approval. "
                   "The verifiers then score them and one is selected (the panel shows each).")
    session.emit(SamplingStarted(count=count))
    session.scaling = True
    try:
        outcome = solve_task(session.task, session.config, session.model, session.agent.events, replay=session.replay)
    finally:
        session.scaling = False
    result = outcome.result
    session.candidates = {c.index: c for c in outcome.scaling.candidates} if outcome.scaling else {}
    session.last_status = result.exit_status
    if not result.trajectory_id:
        session.notice(f"No candidate is usable: {result.message}. Send a message to try again.", "error")
        session.task = None
        return
    trajectory = session.store.load(result.trajectory_id)
    session.trajectory_id, session.trajectory_path = trajectory.id, str(session.store.path_for(trajectory.id))
    session.stats.steps = trajectory.totals.steps  # tokens and cost: all the candidates'
    session.history.reset(result.patch)
    session.emit(Resumed(run_id=trajectory.id, trajectory=trajectory))  # the transcript shows the selected one
    index = trajectory.candidate_index or 0  # numbered from 0, as in the panel and the selection's reasons
    session.notice(f"Selected candidate {index} (of {count}, numbered from 0): {result.message}\n"
                   "Review it with /diff, /apply it, or type a follow-up to continue it (in a new sandbox). "
                   "/candidates shows each candidate's patch; /candidates pick N chooses another.", "success")


def pick(session, index: int) -> None:
    """`/candidates pick N`: candidate N becomes the session's run: its patch is what /diff shows and
    /apply applies, and a follow-up continues its conversation (in a new sandbox with its patch)."""
    candidate = session.candidates.get(index)
    if candidate is None:
        numbers = ", ".join(str(number) for number in sorted(session.candidates)) or "none"
        session.notice(f"/candidates pick {index}: no such candidate (candidates: {numbers}).", "warning")
        return
    if not candidate.trajectory_id or not candidate.patch.strip():
        session.notice(f"/candidates pick {index}: candidate {index} has no patch ({candidate.exit_status or 'failed'})"
                       "; choose another.", "warning")
        return
    trajectory = session.store.load(candidate.trajectory_id)
    session.slot.drop("none")  # the next turn opens a sandbox with this patch
    session.trajectory_id, session.trajectory_path = trajectory.id, str(session.store.path_for(trajectory.id))
    session.stats.steps = trajectory.totals.steps
    session.history.reset(candidate.patch)
    session.compaction = None  # /apply keeps what it last wrote: the next one writes the difference
    session.last_status = trajectory.exit_status
    try:
        write_patch_file(session.patch_file, candidate.patch)
    except OSError:
        pass
    session.emit(Resumed(run_id=trajectory.id, trajectory=trajectory))
    session.emit(SelectionMade(policy="user", chosen=index, why=f"candidate {index}: picked by you (/candidates pick "
                               f"{index}) over the policy's choice"))
    session.notice(f"Candidate {index} is now the chosen patch: /diff shows it, /apply applies it, and a follow-up "
                   "continues it.", "success")


def run_agent(session, follow_up: str | None = None) -> None:
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
    if session.slot.sandbox is None:
        session.slot.open(session.task, session.patch)
    session.ran_agent = True
    resume = session.store.load(session.trajectory_id) if session.trajectory_id else None
    if resume is not None:
        resume = view(session, resume)  # after /compact: the summary, not the whole conversation
    localization = "" if resume else localize(session, session.task)  # the first turn's hint
    if session.notes:
        follow_up = "\n\n".join(session.notes + ([follow_up] if follow_up else []))
        session.notes = []
    session.agent.config = turn_config(session)
    try:
        result = session.agent.run(session.task, session.slot.sandbox, localization=localization, replay=session.replay,
                                   resume=resume, follow_up=follow_up)
    except Exception as exc:  # escaped the agent (e.g. the engine lost the container): start afresh
        session.last_status = ExitStatus.SANDBOX_ERROR
        session.slot.drop("failed")
        if isinstance(exc, SandboxError):
            raise
        raise SandboxError(f"{type(exc).__name__}: {exc}") from exc
    session.trajectory_id, session.trajectory_path = result.trajectory_id, result.trajectory_path
    session.last_status = result.exit_status
    try:
        write_patch_file(session.patch_file, result.patch)
    except OSError:
        pass
    if result.exit_status == ExitStatus.SANDBOX_ERROR:
        session.slot.drop("failed")


def turn_config(session) -> Config:
    base = session.config.limits
    limits = base.model_copy(update={"max_steps": session.stats.steps + base.max_steps,
                             "max_cost": session.stats.cost + base.max_cost})
    return session.config.model_copy(update={"limits": limits})


def localize(session, task: Task) -> str:
    from ..run.solve import localization_hint

    try:
        return localization_hint(task, session.config)
    except Exception:  # a hint, not a requirement
        return ""
