"""Models that answer from a script: recorded trajectories (replay) and test scripts."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .errors import ReplayExhausted
from .text_protocol import response_from_text
from .types import (
    ModelResponse,
    Sampling,
    Usage,
    response_from_message,
    tool_names,
)


class ReplayModel:
    """Plays back the assistant turns of a recorded trajectory, in order."""

    def __init__(self, trajectory: Any, name: str | None = None):
        from ..trajectory.schema import Trajectory

        if isinstance(trajectory, (str, Path)):
            from ..trajectory.store import load_trajectory_file

            trajectory = load_trajectory_file(trajectory)
        elif isinstance(trajectory, dict):
            trajectory = Trajectory.model_validate(trajectory)
        self.trajectory = trajectory
        self.name = name or f"replay:{trajectory.model or trajectory.id}"
        self.turns = _recorded_turns(trajectory)
        self.calls: list[list[dict]] = []

    @classmethod
    def from_spec(cls, target: str, **_: Any) -> ReplayModel:
        """`replay:PATH` (a trajectory file) or `replay:ID` (a trajectory in the default store)."""
        if Path(target).expanduser().exists():
            return cls(Path(target).expanduser())
        from ..trajectory.store import TrajectoryStore

        return cls(TrajectoryStore().load(target))

    def complete(self, messages: list[dict], tools: list[dict], sampling: Sampling) -> ModelResponse:
        self.calls.append(copy.deepcopy(messages))
        index = len(self.calls) - 1
        if index >= len(self.turns):
            raise ReplayExhausted(
                f"{self.name}: asked for turn {index + 1} but trajectory {self.trajectory.id} "
                f"recorded only {len(self.turns)} assistant turns"
            )
        return self.turns[index].model_copy(deep=True)


def _recorded_turns(trajectory) -> list[ModelResponse]:
    turns = []
    if trajectory.steps:
        for step in trajectory.steps:
            assistant = next(
                (m for m in trajectory.step_messages(step) if m.get("role") == "assistant"), None
            )
            if assistant is None:
                continue
            response = response_from_message(
                assistant,
                usage=Usage(
                    prompt_tokens=step.prompt_tokens,
                    completion_tokens=step.completion_tokens,
                    cost=step.cost,
                ),
                finish_reason=step.finish_reason,
                token_ids=step.token_ids,
                logprobs=step.logprobs,
                prompt_token_ids=step.prompt_token_ids,
            )
            response.format_error = step.format_error  # as recorded, not re-derived
            turns.append(response)
        return turns
    return [response_from_message(m) for m in trajectory.messages if m.get("role") == "assistant"]


Turn = dict | str | ModelResponse | Callable[[list[dict]], dict | str | ModelResponse]


class ScriptedModel:
    """A model for tests. Each turn is an assistant message dict, a reply in the text protocol
    (str), a ModelResponse, or a callable that gets the messages and returns one of those."""

    def __init__(self, turns: Sequence[Turn], name: str = "scripted", cost_per_turn: float | None = None):
        self.name = name
        self.turns = list(turns)
        self.cost_per_turn = cost_per_turn
        self.calls: list[list[dict]] = []

    def complete(self, messages: list[dict], tools: list[dict], sampling: Sampling) -> ModelResponse:
        self.calls.append(copy.deepcopy(messages))
        index = len(self.calls) - 1
        if index >= len(self.turns):
            raise ReplayExhausted(
                f"{self.name}: asked for turn {index + 1} but the script has {len(self.turns)}"
            )
        turn = self.turns[index]
        if callable(turn):
            turn = turn(copy.deepcopy(messages))
        known = tool_names(tools)
        usage = Usage(
            prompt_tokens=sum(len(str(m.get("content") or "")) for m in messages) // 4,
            cost=self.cost_per_turn,
        )
        if isinstance(turn, ModelResponse):
            return turn
        if isinstance(turn, str):
            response = response_from_text(turn, known, usage=usage)
        elif isinstance(turn, dict):
            response = response_from_message(turn, known, usage=usage)
        else:
            raise TypeError(f"script turn {index + 1} is a {type(turn).__name__}, not a dict or str")
        response.usage.completion_tokens = len(response.content) // 4
        return response
