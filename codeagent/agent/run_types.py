"""What an agent run passes around and gives back: `Stop` (the one exception of its control flow), a tool
call's `Approval` and the `Approver` that gives it, the run's counters (`RunState`) and its `RunResult`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..status import ExitStatus


class Stop(Exception):
    def __init__(self, status: ExitStatus, message: str = ""):
        super().__init__(message or status)
        self.status, self.message = status, message


@dataclass
class Approval:
    allowed: bool
    reason: str = ""  # for a denial: goes back to the model
    source: str = "user"  # "config": the approval mode or a remembered rule allowed it without asking


# Asked before each tool call runs (the TUI's approval modes); None means every call is allowed.
Approver = Callable[..., Approval]  # (call) or (call, force=True): a hook wants the user asked


@dataclass
class RunResult:
    exit_status: ExitStatus | str  # a selected candidate's status comes back from its trajectory as text
    message: str
    patch: str
    steps: int
    cost: float
    seconds: float
    trajectory_id: str
    trajectory_path: str
    record_lost: str = ""  # why the trajectory could not be (fully) written; the patch is here all the same
    answer: str = ""  # the text of the run's last reply (`answered`: the agent's answer or plan)


def last_reply_text(messages: list[dict]) -> str:
    """The text of the last assistant message ("" when there is none, or it has no text)."""
    from ..models.tokens import message_text

    for message in reversed(messages):
        if message.get("role") == "assistant":
            return message_text(message.get("content")).strip()
    return ""


@dataclass
class RunState:
    steps: int = 0
    cost: float = 0.0
    format_errors: int = 0
    tool_calls: int = 0  # run in this run (a resumed run counts again from 0)
    edited: bool = False
    patch: str = ""
