"""The glue from the session's events to the widgets: each event type to the widget that shows it.

While candidates are sampled, one of them is shown live in the transcript (the candidates panel
follows them all) until the selection; from then on the selected run is shown.
"""

from __future__ import annotations

from collections.abc import Callable

from ..events import (
    Event,
    Finished,
    ModelDelta,
    ModelOutput,
    ModelRetry,
    ModelWaiting,
    Observed,
    PatchChanged,
    RunStarted,
    SelectionMade,
    SubagentFinished,
    SubagentStarted,
    ToolCalled,
)
from ..run.printers import counted
from ..run.session import Notice, Resumed, SamplingStarted, Session
from .candidates import CandidatesPanel
from .transcript import Transcript


class SessionView:
    def __init__(self, session: Session, transcript: Transcript, candidates: CandidatesPanel,
                 set_patch: Callable[[str], None], alert: Callable[[str], None]):
        self.session = session
        self.transcript = transcript
        self.candidates = candidates
        self.set_patch = set_patch
        self.alert = alert
        self.live_candidate: str | None = None
        self.sampling = False  # candidates run and none is selected yet: only the live one is shown
        self.resume_follow_up: str | None = None  # shown after a resumed conversation

    def reset(self) -> None:
        self.live_candidate, self.sampling = None, False

    def show(self, event: Event) -> None:
        self.candidates.follow(event)
        if isinstance(event, SamplingStarted):
            self.sampling, self.live_candidate = True, None
        elif isinstance(event, SelectionMade):  # from here on the selected run is shown: its patch, its follow-ups
            self.sampling = False
        elif self.sampling and event.run_id in self.session.state.candidate_runs and not self._is_live(event):
            return
        self._show(event)

    def _is_live(self, event: Event) -> bool:
        """Whether a candidate's event is shown: the first candidate heard from is, but not its end."""
        if self.live_candidate is None:
            self.live_candidate = event.run_id
            number = self.candidates.number(event.run_id)
            self.transcript.add_notice(f"Showing candidate {number} live; the panel below follows them all.")
        return event.run_id == self.live_candidate and not isinstance(event, Finished)

    def _show(self, event: Event) -> None:
        transcript = self.transcript
        match event:
            case RunStarted():
                transcript.show_run_started(event)
            case ModelOutput():
                transcript.show_model_output(event)
            case ModelWaiting() | ModelDelta() | ModelRetry():
                transcript.show_progress(event)
            case ToolCalled():
                transcript.show_tool_called(event)
            case Observed():
                transcript.show_observed(event)
            case PatchChanged():
                self.set_patch(event.patch)
            case Finished():
                self.set_patch(event.patch)
                transcript.show_finished(event)
                self.alert(f"The run ended: {event.exit_status}.")
            case SubagentStarted():  # nested work: a line when it starts, one when it ends
                transcript.add_notice(f"  ↳ subagent {event.name} ({event.tools}) started: {event.task.strip()[:200]}")
            case SubagentFinished():
                transcript.add_notice(f"  ↳ subagent {event.name} finished: {event.exit_status}, {counted(event.steps, 'step')}, "
                                      f"{event.patch_lines} patch lines (trajectory {event.trajectory_id})")
            case Notice():
                transcript.add_notice(event.text, event.level)
            case Resumed():
                transcript.reset()
                transcript.show_history(event.trajectory)
                self.set_patch(event.trajectory.patch or "")
                if self.resume_follow_up:
                    transcript.add_user(self.resume_follow_up)
                    self.resume_follow_up = None
