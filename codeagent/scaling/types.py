"""What test-time scaling passes around: candidates, their verifier scores, and a selection."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class Candidate(BaseModel):
    """One sampled solution of a task."""

    instance_id: str
    index: int  # position in its group
    patch: str
    trajectory_id: str | None = None
    exit_status: str | None = None
    model: str | None = None
    sampling: dict[str, Any] = Field(default_factory=dict)  # temperature, seed... it was sampled with
    # verifier name -> score in [0, 1] (higher is better); a verifier that did not run is absent
    scores: dict[str, float] = Field(default_factory=dict)
    details: dict[str, Any] = Field(default_factory=dict)  # what each verifier saw (tests broken, judge text...)
    resolved: bool | None = None  # the true outcome, when known (eval, offline selection)
    # Where it came from under evolution or search (methods.py): its round (0: from the issue alone) and the
    # candidates it was conditioned on (evolution) or branched from (search: one); the generated tokens it cost.
    round: int | None = None
    parents: list[int] = Field(default_factory=list)
    tokens: int | None = None

    @property
    def usable(self) -> bool:
        return bool(self.patch.strip()) and not self.details.get("discarded")


class Selection(BaseModel):
    policy: str
    chosen: int | None  # candidate index; None when no candidate is usable
    ranking: list[int] = Field(default_factory=list)  # best first
    votes: dict[int, int] = Field(default_factory=dict)  # candidate index -> size of its equivalence class
    why: str = ""
    matches: list[dict[str, Any]] = Field(default_factory=list)  # a tournament's: who played whom, who won, how
