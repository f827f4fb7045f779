"""What a scaling method tells its watchers after each round (evolution) or wave of expansions (search),
and at the end: the candidates so far with their round, parents, value and status, and the budget.
The TUI's search panel (tui/search_panel.py), the headless printer and `--json` follow it."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..events import Event


@dataclass
class SearchProgress(Event):
    kind: str = field(init=False, default="search_progress")
    method: str = ""  # sample | evolve | search
    round: int = 0  # evolution: the round just verified; search and sampling: the wave
    note: str = ""  # what this round did, or why the method stopped
    nodes: list = field(default_factory=list)  # per candidate: index, round, parents, status, value, scores, changed
    budget: dict = field(default_factory=dict)  # Budget.snapshot()
    done: bool = False  # the method has stopped: selection comes next
