"""The session's own events, beside the agent's: what it tells the user, and when to look again; and
what became of a message the user sent (`Submitted`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ...events import Event


@dataclass
class Notice(Event):
    """Something the session says to the user (level: info, success, warning, error)."""

    kind: str = field(init=False, default="notice")
    text: str = ""
    level: str = "info"


@dataclass
class SessionChanged(Event):
    """The session's state changed (busy, sandbox, mode, model): read `Session.status()` again."""

    kind: str = field(init=False, default="session_changed")


@dataclass
class Resumed(Event):
    """A saved trajectory was reopened: the UI shows its conversation."""

    kind: str = field(init=False, default="resumed")
    trajectory: Any = None


@dataclass
class SamplingStarted(Event):
    """Several candidates start: the UI shows one live until SelectionMade names the chosen one."""

    kind: str = field(init=False, default="sampling_started")
    count: int = 0


class Submitted(str, Enum):
    """What `Session.submit` (or `send_prompt`) did with the user's message."""

    STARTED = "started"  # the first message: the task starts
    CONTINUED = "continued"  # a follow-up after a turn: the next turn starts
    QUEUED = "queued"  # the agent runs: it reads the message before its next step
    BUSY = "busy"  # not taken: the agent runs (an MCP prompt waits for it to stop)
    IGNORED = "ignored"  # an empty message
    CLOSED = "closed"  # the session is closed

    @property
    def accepted(self) -> bool:
        return self in (Submitted.STARTED, Submitted.CONTINUED, Submitted.QUEUED)
