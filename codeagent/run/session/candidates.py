"""The session's candidates: the first turn samples N of them (each in its own sandbox), the verifiers
score them and one is selected; `/candidates pick N` makes another one the session's run, `/candidates more`
has the method go on from where it stopped with another budget. Runs on the session's thread."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from ...events import SelectionMade
from ..solve import write_patch_file
from .events import Resumed, SamplingStarted

if TYPE_CHECKING:
    from .parts import SessionParts


def run_candidates(session: SessionParts, more: bool = False) -> None:
    """Sample the candidates (each in its own sandbox, without asking: the sandboxes are the
    guard), verify and select one; follow-ups then continue the selected one. `more` (/candidates more):
    the method goes on from where it stopped with another budget, and one is selected among them all."""
    from ...scaling.budget import Budget
    from ..solve import solve as solve_task

    state, model = session.state, session.model
    scaling = session.config.scaling
    frontier = state.frontier if more else None
    if more and (frontier is None or state.task is None or model is None):
        session.notice("/candidates more: no candidates to go on from in this task (it goes on from a run of "
                       "several candidates: --candidates N, --tts evolve or search).", "warning")
        return
    if frontier is not None and frontier.method != scaling.tts:
        session.notice(f"/candidates more: the candidates came from {frontier.method!r}, the method is now "
                       f"{scaling.tts!r}; set it back to go on.", "warning")
        return
    assert state.task is not None and model is not None  # turn.solve: samples only with a model
    budget = Budget.from_settings(scaling)
    count = budget.runs or scaling.candidates
    what = {"sample": f"Sampling {count} candidates in parallel sandboxes",
            "evolve": "Evolving candidates in rounds (each round sees the best so far)",
            "search": "Searching a tree of runs (branches restart from promising states)"}[scaling.tts]
    if frontier is not None:
        what = (f"Going on from the {len(frontier.pool)} candidates so far with another budget: "
                + what[0].lower() + what[1:])
    session.notice(f"{what}; they run without asking for approval. The verifiers score them and one is selected "
                   "(the panels show each). Ctrl-C stops: the runs in flight finish, then one is selected.")
    session.emit(SamplingStarted(count=count))
    state.scaling = True
    done = threading.Event()
    threading.Thread(target=_stop_on_interrupt, args=(session.worker.stop, done, budget), daemon=True,
                     name="codeagent-scaling-stop").start()
    try:
        outcome = solve_task(state.task, session.config, model, session.agent.events, replay=session.replay,
                             budget=budget, more_of=frontier)
    finally:
        done.set()
        state.scaling = False
    result = outcome.result
    state.candidates = {c.index: c for c in outcome.scaling.candidates} if outcome.scaling else {}
    state.frontier = outcome.scaling.frontier if outcome.scaling else None
    count = len(state.candidates) or count
    state.last_status = result.exit_status
    if not result.trajectory_id:
        session.notice(f"No candidate is usable: {result.message}. Send a message to try again.", "error")
        state.task = None
        return
    trajectory = session.store.load(result.trajectory_id)
    state.set_run(trajectory.id, str(session.store.path_for(trajectory.id)))
    state.stats.steps = trajectory.totals.steps  # tokens and cost: all the candidates'
    state.history.reset(result.patch)
    session.emit(Resumed(run_id=trajectory.id, trajectory=trajectory))  # the transcript shows the selected one
    index = trajectory.candidate_index or 0  # numbered from 0, as in the panel and the selection's reasons
    session.notice(f"Selected candidate {index} (of {count}, numbered from 0): {result.message}\n"
                   "Review it with /diff, /apply it, or type a follow-up to continue it (in a new sandbox). "
                   "/candidates shows each candidate's patch; /candidates pick N chooses another; /candidates more "
                   "goes on with another budget.", "success")


def _stop_on_interrupt(interrupted: threading.Event, done: threading.Event, budget) -> None:
    """The user's Ctrl-C (the worker's stop) stops the method: no new run starts."""
    while not done.wait(0.2):
        if interrupted.is_set():
            budget.stop("stopped by the user")
            return


def pick(session: SessionParts, index: int) -> None:
    """`/candidates pick N`: candidate N becomes the session's run: its patch is what /diff shows and
    /apply applies, and a follow-up continues its conversation (in a new sandbox with its patch)."""
    state = session.state
    candidate = state.candidates.get(index)
    if candidate is None:
        numbers = ", ".join(str(number) for number in sorted(state.candidates)) or "none"
        session.notice(f"/candidates pick {index}: no such candidate (candidates: {numbers}).", "warning")
        return
    if not candidate.trajectory_id or not candidate.patch.strip():
        session.notice(f"/candidates pick {index}: candidate {index} has no patch ({candidate.exit_status or 'failed'})"
                       "; choose another.", "warning")
        return
    trajectory = session.store.load(candidate.trajectory_id)
    session.slot.drop("none")  # the next turn opens a sandbox with this patch
    state.set_run(trajectory.id, str(session.store.path_for(trajectory.id)))
    state.stats.steps = trajectory.totals.steps
    state.history.reset(candidate.patch)
    state.compaction = None  # /apply keeps what it last wrote: the next one writes the difference
    state.last_status = trajectory.exit_status
    try:
        if session.patch_file:
            write_patch_file(session.patch_file, candidate.patch)
    except OSError:
        pass
    session.emit(Resumed(run_id=trajectory.id, trajectory=trajectory))
    session.emit(SelectionMade(policy="user", chosen=index, why=f"candidate {index}: picked by you (/candidates pick "
                               f"{index}) over the policy's choice"))
    session.notice(f"Candidate {index} is now the chosen patch: /diff shows it, /apply applies it, and a follow-up "
                   "continues it.", "success")
