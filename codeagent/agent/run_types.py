"""What an agent run is given, passes around and gives back: how it starts (`RunOptions`), `Stop` (the one
exception of its control flow), a tool call's `Approval` and the `Approver` that gives it, the run's counters
(`RunState`) and its `RunResult`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..status import ExitStatus

if TYPE_CHECKING:
    from ..trajectory.schema import Trajectory


@dataclass(frozen=True)
class RunOptions:
    """How one run of `Agent.run` starts (every field has the default of a plain batch run)."""

    localization: str = ""  # ranked candidate files for the first prompt
    group_id: str | None = None  # the trajectory's group (candidates of one task, a GRPO group)
    candidate_index: int | None = None
    replay: bool = False  # the model is a recording: said in the run's first event
    # continue this trajectory's conversation (the caller gives a sandbox in which its patch is applied),
    # with `follow_up` as the next user turn
    resume: Trajectory | None = None
    follow_up: str | None = None
    instance_prompt: str | None = None  # replaces the rendered first user message (other jobs than a fix)
    # a new trajectory that starts from these messages of another run (a search branch; the caller gives a
    # sandbox in the state they left)
    prefix: list[dict] | None = None
    lineage: dict | None = None  # header fields saying how the run relates to others (tts, round, parents...)
    # the caller's word: the sandbox is its snapshot as made (no patch in it yet), so a run in which no tool
    # ran has no change and the sandbox need not be asked for one
    fresh_sandbox: bool = False


@dataclass(frozen=True)
class ParentRun:
    """A subagent's parent: its run id, the step that started the subagent, and the subagent's depth."""

    run_id: str
    step: int
    depth: int = 1


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
