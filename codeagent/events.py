"""What happened during a run, as a stream of small records that any consumer can follow.

The headless printer, the JSON-lines printer, the trajectory logger and the TUI all subscribe to
the same `EventBus`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Event:
    kind: str = field(init=False, default="event")
    run_id: str = ""
    time: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RunStarted(Event):
    kind: str = field(init=False, default="run_started")
    task_id: str = ""
    model: str = ""
    sandbox: str = ""
    replay: bool = False
    candidate_index: int | None = None  # one of several candidates (test-time scaling)
    provider: str = ""  # where the model's calls go (openai, anthropic, hosted_vllm...), "" when not known


@dataclass
class StepStarted(Event):
    kind: str = field(init=False, default="step_started")
    step: int = 0


@dataclass
class ModelOutput(Event):
    kind: str = field(init=False, default="model_output")
    step: int = 0
    text: str = ""
    tool_calls: list[dict] = field(default_factory=list)
    format_error: str | None = None
    cost: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    started: float = 0.0  # time.time() when the model was asked (`time`: when its reply was complete)
    response_model: str = ""  # the model that answered, as its server named it ("" when not told)
    finish_reason: str = ""


@dataclass
class ModelDelta(Event):
    """A piece of the reply as it forms: `text`, or for the `tool_index`-th tool call (`call_id`, `tool`
    with its first piece) a piece of its JSON `arguments`. The step's model_output has the whole reply."""

    kind: str = field(init=False, default="model_delta")
    step: int = 0
    text: str = ""
    tool_index: int | None = None
    call_id: str = ""
    tool: str = ""
    arguments: str = ""


@dataclass
class ModelWaiting(Event):
    """No token of the step's reply yet after `seconds` (once a second)."""

    kind: str = field(init=False, default="model_waiting")
    step: int = 0
    seconds: int = 0


@dataclass
class ModelRetry(Event):
    """The model call failed (`reason`) and is tried again in `wait` seconds; a reply streamed so far is void."""

    kind: str = field(init=False, default="model_retry")
    step: int = 0
    attempt: int = 0
    retries: int = 0
    reason: str = ""
    wait: float = 0.0


# Progress within a step, not a record of it: `--json` prints these only when asked (--json-deltas).
PROGRESS_KINDS = frozenset({"model_delta", "model_waiting"})


@dataclass
class ToolCalled(Event):
    kind: str = field(init=False, default="tool_called")
    step: int = 0
    call_id: str = ""
    tool: str = ""
    arguments: dict = field(default_factory=dict)


@dataclass
class Observed(Event):
    kind: str = field(init=False, default="observation")
    step: int = 0
    call_id: str = ""
    tool: str = ""
    output: str = ""
    exit_code: int | None = None
    error: bool = False
    timed_out: bool = False
    seconds: float = 0.0
    interrupted: bool = False  # the user interrupted the call: its exit code says nothing
    approval: str = ""  # "accept" or "reject" when someone decided whether it ran; "" when nobody had to
    approval_source: str = ""  # who: "user", "config" (the approval mode, a rule), "hook" or "mode" (plan mode)


@dataclass
class PatchChanged(Event):
    kind: str = field(init=False, default="patch_changed")
    step: int = 0
    patch: str = ""


@dataclass
class Finished(Event):
    kind: str = field(init=False, default="finished")
    exit_status: str = ""
    message: str = ""
    patch: str = ""
    steps: int = 0
    cost: float = 0.0
    seconds: float = 0.0
    trajectory_id: str = ""
    trajectory_path: str = ""
    answer: str = ""  # the text of the run's last reply: the answer (or plan) of a run that ended `answered`


@dataclass
class SubagentStarted(Event):
    """The run handed a sub-task to a subagent (agent/subagents.py) from the tool call `call_id`."""
    kind: str = field(init=False, default="subagent_started")
    step: int = 0
    call_id: str = ""
    name: str = ""  # sub-1, sub-2...: what the parent passes to `apply`
    task: str = ""
    tools: str = "full"
    model: str = ""


@dataclass
class SubagentFinished(Event):
    kind: str = field(init=False, default="subagent_finished")
    step: int = 0
    call_id: str = ""
    name: str = ""
    exit_status: str = ""
    steps: int = 0
    cost: float = 0.0
    patch_lines: int = 0
    trajectory_id: str = ""


@dataclass
class CandidateScored(Event):
    """A candidate of test-time scaling finished and was verified (run_id: its trajectory)."""

    kind: str = field(init=False, default="candidate_scored")
    index: int = 0
    exit_status: str = ""
    patch: str = ""
    scores: dict = field(default_factory=dict)
    details: dict = field(default_factory=dict)


@dataclass
class SelectionMade(Event):
    kind: str = field(init=False, default="selection_made")
    policy: str = ""
    chosen: int | None = None
    ranking: list = field(default_factory=list)
    votes: dict = field(default_factory=dict)
    why: str = ""


Subscriber = Callable[[Event], None]


class EventBus:
    def __init__(self, *subscribers: Subscriber):
        self._subscribers = list(subscribers)

    def subscribe(self, subscriber: Subscriber) -> None:
        self._subscribers.append(subscriber)

    def emit(self, event: Event) -> None:
        for subscriber in self._subscribers:
            subscriber(event)
