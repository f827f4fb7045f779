"""The one knob every test-time scaling method shares: a budget of generated tokens and/or model calls.

    budget = Budget(tokens=2000)                # or steps=40, or runs=8 (what --candidates N means)
    model = Metered(model, budget)              # every reply's generated tokens are charged as they come
    while budget.allow(1): ... run ...          # a method starts runs while the budget lasts
    budget.stop("stopped by the user")          # the TUI's stop: no new run starts, the method selects

Every model call a method makes goes through `Metered`: the agent runs, the judge, a tournament's
matches, a reproduction test's writer. A run in flight is never cut: a method asks `allow` before it
starts runs, and `allow` lets one start when it is expected to fit (the runs in flight and it counted at
the mean cost of the finished runs); a run longer than the mean may end a little past the budget
(`spent_tokens` says by how much).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from ..models import Model, ModelResponse, Sampling

MAX_RUNS = 1000  # a token or step budget with runs that cost nothing (a script) still ends


@dataclass
class Budget:
    tokens: int | None = None  # generated tokens, every model call of the method
    steps: int | None = None  # model calls
    runs: int | None = None  # agent runs started
    spent_tokens: int = 0
    spent_steps: int = 0
    started: int = 0
    finished: int = 0
    finished_tokens: int = 0  # of the finished runs: the mean cost of a run
    stopped: str = ""  # why no run may start any more, when something other than the limits says so
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @classmethod
    def from_settings(cls, scaling: Any) -> Budget:
        """From the config's `scaling` section: budget_tokens / budget_steps, else `candidates` runs (for
        evolution or search with one candidate configured: two rounds of the population)."""
        tokens, steps = scaling.budget_tokens, scaling.budget_steps
        if tokens is None and steps is None:
            runs = scaling.candidates
            if runs == 1 and scaling.tts != "sample":
                runs = 2 * scaling.population
            return cls(runs=runs)
        return cls(tokens=tokens, steps=steps)

    def charge(self, tokens: int, steps: int = 1) -> None:
        with self._lock:
            self.spent_tokens += max(0, int(tokens))
            self.spent_steps += steps

    def allow(self, wanted: int) -> int:
        """How many of `wanted` new runs may start now (0: the budget is spent or stopped); those are
        counted as started."""
        with self._lock:
            granted = 0
            while granted < wanted and not self._why_not(granted):
                granted += 1
            self.started += granted
            return granted

    def done(self, tokens: int) -> None:
        """A run that `allow` let start has ended, having generated `tokens`."""
        with self._lock:
            self.finished += 1
            self.finished_tokens += max(0, int(tokens))

    def stop(self, why: str = "stopped by the user") -> None:
        with self._lock:
            self.stopped = self.stopped or why

    @property
    def exhausted(self) -> str:
        """Why no run may start now ("" while one may)."""
        with self._lock:
            return self._why_not(0)

    def _why_not(self, extra: int) -> str:
        """Why the next run (after `extra` more granted now) may not start; "" when it may. With a token
        limit, a run starts when it is expected to fit: the runs in flight and it counted at the mean cost
        of the finished ones (before any has finished, one runs at a time)."""
        started = self.started + extra
        in_flight = started - self.finished
        if self.stopped:
            return self.stopped
        if self.runs is not None and started >= self.runs:
            return f"the budget of {self.runs} runs is spent"
        if started >= MAX_RUNS:
            return f"{MAX_RUNS} runs started"
        if self.tokens is not None:
            mean = self.finished_tokens / self.finished if self.finished else 0.0
            if self.spent_tokens >= self.tokens or self.spent_tokens + (in_flight + 1) * mean > self.tokens:
                return f"the budget of {self.tokens} generated tokens is spent ({self.spent_tokens})"
            if in_flight and not self.finished:
                return "a run is in flight and no run's cost is known yet"
        if self.steps is not None and self.spent_steps + in_flight >= self.steps:
            return f"the budget of {self.steps} model calls is spent ({self.spent_steps})"
        return ""

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {"tokens": self.tokens, "steps": self.steps, "runs": self.runs, "spent_tokens": self.spent_tokens,
                    "spent_steps": self.spent_steps, "started": self.started, "finished": self.finished,
                    "stopped": self.stopped}


def reply_tokens(response: ModelResponse) -> int:
    """The tokens a reply generated: the backend's count, else its token ids, else an estimate from its
    text and tool calls (four characters a token; a scripted reply is never free)."""
    if response.usage.completion_tokens:
        return int(response.usage.completion_tokens)
    if response.token_ids:
        return len(response.token_ids)
    text = response.content + "".join(str(call.arguments) for call in response.tool_calls)
    return max(1, len(text) // 4)


class Metered:
    """A model whose every reply is charged to `budget` (and counted here: `metered_tokens`, `metered_calls`); everything
    else is the wrapped model's."""

    def __init__(self, model: Model, budget: Budget):
        self._model = model
        self._budget = budget
        self.metered_tokens = 0
        self.metered_calls = 0
        self._lock = threading.Lock()

    def complete(self, messages: list[dict], tools: list[dict], sampling: Sampling) -> ModelResponse:
        response = self._model.complete(messages, tools, sampling)
        tokens = reply_tokens(response)
        with self._lock:
            self.metered_tokens += tokens
            self.metered_calls += 1
        self._budget.charge(tokens)
        return response

    @property
    def wrapped(self) -> Model:
        return self._model

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)
