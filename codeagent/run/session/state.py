"""What a session holds between turns: its task, its run, what it spent, its patch and their history.

One object, typed, owned by the Session and changed only on the session's thread (the jobs in
turn.py, candidates.py, patch.py, compact.py and jobs.py); the clients read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .patch_history import PatchHistory
from .stats import Stats

if TYPE_CHECKING:
    from ...scaling.methods import Frontier
    from ...scaling.types import Candidate
    from ...task import Task


@dataclass
class Compaction:
    """/compact's view of a run's conversation (compact.py)."""

    trajectory_id: str
    upto: int  # the trajectory's messages it replaces (those before this index)
    messages: list[dict]


@dataclass
class SessionState:
    task: Task | None = None  # None until the first message (or after /clear)
    trajectory_id: str | None = None  # the session's run: what a follow-up continues
    trajectory_path: str | None = None
    last_status: str | None = None  # how the last turn ended (an ExitStatus)
    stats: Stats = field(default_factory=Stats)
    history: PatchHistory = field(default_factory=PatchHistory)  # the patch after each change: /undo
    notes: list[str] = field(default_factory=list)  # told to the model with the next message (e.g. an undo)
    applied: tuple[str, str] | None = None  # where /apply (or write-through) last wrote, and which patch
    resumed_patch: str | None = None  # a reopened session's patch: perhaps applied in an earlier process
    compaction: Compaction | None = None  # /compact's view of the conversation
    write_through: bool = False  # each change goes to the user's working tree as it is made
    scaling: bool = False  # sampling several candidates (config.scaling.candidates > 1), first turn only
    candidate_runs: set[str] = field(default_factory=set)  # their run ids (a client shows one of them live)
    candidates: dict[int, Candidate] = field(default_factory=dict)  # index -> scored candidate (patch, scores)
    frontier: Frontier | None = None  # where the candidates' method stopped (scaling.methods.Frontier): /candidates more
    ran_agent: bool = False  # the job in flight ran the agent (a queued message may then continue it)

    @property
    def patch(self) -> str:
        return self.history.current

    def reset(self, stats: Stats | None = None, patch: str = "") -> None:
        """A new task or a reopened one: its counts, its patch (nothing to undo), no notes."""
        self.stats, self.notes = stats or Stats(), []
        self.applied = None
        self.resumed_patch = patch or None
        self.compaction = None
        self.history.reset(patch)

    def set_run(self, trajectory_id: str | None, path: str | None) -> None:
        self.trajectory_id, self.trajectory_path = trajectory_id, path
