"""Each candidate run's progress, exit status, verifier scores, and the one selected.

Candidates are told apart by the `run_id` every event carries. The panel follows RunStarted (with
the candidate's index), StepStarted and Finished of each run, then the scaling module's
CandidateScored (index, exit status, verifier scores) and SelectionMade (the chosen index and why:
which score or tie-break decided, or that the user picked it). One line per candidate:
`running step k`, `done`, then `scored`. With one candidate (no scaling) it is one line per run of
the session.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.console import Group
from rich.text import Text
from textual.widgets import Static

from ..events import (
    CandidateScored,
    Event,
    Finished,
    RunStarted,
    SelectionMade,
    StepStarted,
)
from ..run.printers import counted
from ..status import ExitStatus


@dataclass
class Candidate:
    run_id: str
    index: int
    steps: int = 0
    phase: str = "running"  # running | done | scored
    status: str = "running"
    scores: dict[str, float] = field(default_factory=dict)
    selected: bool = False

    def line(self) -> Text:
        text = Text(f"candidate {self.index}", style="bold")
        if self.phase == "running":
            text.append(f" · running step {max(self.steps, 1)}", style="yellow")
        else:
            style = "green" if self.status == ExitStatus.SUBMITTED else "red"
            text.append(f" · {self.phase}: ", style="dim")
            text.append(self.status, style=style)
            text.append(f" · {counted(self.steps, 'step')}", style="dim")
        if self.scores:
            text.append(" · " + " ".join(f"{name}={value:.2f}" if isinstance(value, (int, float)) else f"{name}={value}"
                                         for name, value in self.scores.items()))
        if self.selected:
            text.append("  ← selected", style="bold green")
        text.append(f"  ({self.run_id[-8:]})", style="dim")
        return text


class CandidatesPanel(Static):
    DEFAULT_CSS = """
    CandidatesPanel { height: auto; max-height: 10; display: none; border-top: hkey $panel; padding: 0 1; }
    CandidatesPanel.-shown { display: block; }
    """

    def __init__(self, **options):
        super().__init__("", **options)
        self.candidates: dict[str, Candidate] = {}
        self.why = ""

    def follow(self, event: Event) -> None:
        if isinstance(event, SelectionMade):
            for candidate in self.candidates.values():
                candidate.selected = event.chosen is not None and candidate.index == event.chosen
            self.why = event.why
            self.refresh_table()
            return
        run_id = event.run_id
        if not run_id:
            return
        candidate = self.candidates.get(run_id)
        if candidate is None:
            if not isinstance(event, (RunStarted, CandidateScored)):
                return
            candidate = self.candidates[run_id] = Candidate(run_id, len(self.candidates))
        if isinstance(event, RunStarted):
            candidate.phase = candidate.status = "running"
            if event.candidate_index is not None:  # candidates run side by side: arrival order is not theirs
                candidate.index = event.candidate_index
        elif isinstance(event, StepStarted):
            candidate.steps = event.step + 1
        elif isinstance(event, Finished):
            candidate.phase, candidate.status = "done", event.exit_status
        elif isinstance(event, CandidateScored):
            candidate.index = event.index
            candidate.phase = "scored"
            candidate.status = event.exit_status or candidate.status
            candidate.scores.update(event.scores)
        self.refresh_table()

    def number(self, run_id: str) -> int | str:
        """A run's candidate number (from 0, as the selection's reasons and the trajectories count)."""
        candidate = self.candidates.get(run_id)
        return candidate.index if candidate is not None else "?"

    def refresh_table(self) -> None:
        lines = [candidate.line() for candidate in sorted(self.candidates.values(), key=lambda c: c.index)]
        if self.why:
            lines.append(Text(f"selected: {self.why}", style="dim"))
        self.update(Group(*lines))

    def reset(self) -> None:
        self.candidates.clear()
        self.why = ""
        self.update("")
