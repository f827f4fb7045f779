"""What the session's jobs (jobs.py, turn.py, candidates.py, patch.py, compact.py) work with: its parts
and its state. `Session` (core.py) is one; they take it as this protocol, so they need not import
core.py, which imports them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ...agent.loop import Agent
from ...config import Config
from ...events import Event
from ...models import Model
from ...trajectory.store import TrajectoryStore
from .sandbox_slot import SandboxSlot
from .state import SessionState
from .worker import Worker


class SessionParts(Protocol):
    config: Config
    model: Model | None
    replay: bool
    repo: str
    commit: str | None
    store: TrajectoryStore
    agent: Agent
    worker: Worker
    slot: SandboxSlot
    state: SessionState
    apply_repo: str | None  # the user's working tree /apply writes to
    apply_default: bool  # a resumed task's own repository is it, when it is the user's
    emit: Callable[[Event], None]

    @property
    def patch_file(self) -> str | None: ...

    def notice(self, text: str, level: str = "info") -> None: ...
