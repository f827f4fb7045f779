"""What a session has spent so far: steps, tokens and cost, counted from the agent's events."""

from __future__ import annotations

from dataclasses import dataclass

from ...events import Event, ModelOutput, StepStarted
from ...trajectory.schema import Totals


@dataclass
class Stats:
    steps: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    context: int = 0  # tokens the conversation takes in the model's window: the last call's prompt and reply

    @classmethod
    def from_totals(cls, totals: Totals) -> Stats:
        return cls(totals.steps, totals.prompt_tokens, totals.completion_tokens, totals.cost or 0.0)

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def observe(self, event: Event) -> None:
        """Count one event. Steps: the furthest step started, so that candidates sampled side by
        side count as long as the longest of them."""
        if isinstance(event, StepStarted):
            self.steps = max(self.steps, event.step + 1)
        elif isinstance(event, ModelOutput):
            self.prompt_tokens += event.prompt_tokens or 0
            self.completion_tokens += event.completion_tokens or 0
            self.cost += event.cost or 0.0
            self.context = (event.prompt_tokens or 0) + (event.completion_tokens or 0) or self.context
