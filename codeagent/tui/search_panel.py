"""Evolution's rounds and the search's branches as they grow: one line per candidate (its round, what it
came from, its value and scores, its change), the budget spent, what the last round did; then the one
selected. It follows the scaling methods' SearchProgress events and SelectionMade, and shows itself at
the first of them. Ctrl-C stops the method (the runs in flight finish, then one is selected); `/candidates
pick N` chooses another candidate afterwards.
"""

from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual.widgets import Static

from ..events import Event, SelectionMade
from ..run.session import SamplingStarted
from ..scaling.progress import SearchProgress

SHOWN = 8  # candidates listed (the best by value); the rest are counted


class SearchPanel(Static):
    DEFAULT_CSS = """
    SearchPanel { height: auto; max-height: 14; display: none; border-top: hkey $panel; padding: 0 1; }
    SearchPanel.-shown { display: block; }
    """

    def __init__(self, **options):
        super().__init__("", **options)
        self.progress: SearchProgress | None = None
        self.chosen: int | None = None
        self.why = ""

    def follow(self, event: Event) -> None:
        if isinstance(event, SamplingStarted):  # a new task's candidates: the last one's panel goes
            self.reset()
            return
        if isinstance(event, SearchProgress):
            if event.method == "sample":
                return  # side-by-side sampling: the candidates panel shows it all
            self.progress = event
            self.add_class("-shown")
        elif isinstance(event, SelectionMade) and self.progress is not None:
            self.chosen, self.why = event.chosen, event.why
        else:
            return
        self.update(Group(*self.lines()))

    def lines(self) -> list[Text]:
        progress = self.progress
        if progress is None:
            return []
        budget = progress.budget
        limit = budget.get("tokens") or budget.get("steps") or budget.get("runs")
        unit = "tokens" if budget.get("tokens") else "model calls" if budget.get("steps") else "runs"
        spent = {"tokens": budget.get("spent_tokens"), "model calls": budget.get("spent_steps"),
                 "runs": budget.get("started")}[unit]
        state = "stopped" if progress.done else f"round {progress.round}" if progress.method == "evolve" else \
            f"wave {progress.round}"
        head = Text(f"{progress.method} · {state} · {len(progress.nodes)} candidate(s) · budget {spent}/{limit} {unit}",
                    style="bold")
        lines = [head]
        best = sorted(progress.nodes, key=lambda node: (-node["value"], node["index"]))
        for node in best[:SHOWN]:
            lines.append(_line(node, self.chosen))
        if len(best) > SHOWN:
            lines.append(Text(f"… {len(best) - SHOWN} more (/candidates lists them all)", style="dim"))
        lines.append(Text(progress.note, style="dim"))
        if self.why:
            lines.append(Text(f"selected: {self.why}", style="dim"))
        elif not progress.done:
            lines.append(Text("Ctrl-C stops (the runs in flight finish, then one is selected) · /candidates pick N "
                              "afterwards chooses another · /candidates more goes on", style="dim"))
        return lines

    def reset(self) -> None:
        self.progress, self.chosen, self.why = None, None, ""
        self.remove_class("-shown")
        self.update("")


def _line(node: dict, chosen: int | None) -> Text:
    text = Text(f"#{node['index']}", style="bold")
    if node.get("round") is not None:
        text.append(f" r{node['round']}", style="cyan")
    if node.get("parents"):
        text.append(" ← " + ",".join(str(parent) for parent in node["parents"]), style="cyan")
    text.append(f" · value {node['value']:.2f}")
    scores = node.get("scores") or {}
    if scores:
        text.append(" · " + " ".join(f"{name}={value:.2f}" for name, value in sorted(scores.items())), style="dim")
    style = "green" if node.get("status") == "submitted" else "red"
    text.append(f" · {node.get('status') or '?'}", style=style)
    text.append(f" · {node.get('change', '')}", style="dim")
    if node.get("inherited"):
        text.append(" · resubmitted its start", style="dim")
    if chosen is not None and node["index"] == chosen:
        text.append("  ← selected", style="bold green")
    return text
