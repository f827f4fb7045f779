"""The test-time scaling methods behind one signature, `method(scaling, frontier)`, all under one budget:

    sample   N runs side by side from the issue (best-of-N; the budget says how many)
    evolve   rounds, each conditioned on the best candidates of the rounds before (evolve.py)
    search   a tree over trajectories, expanded from promising states (search.py)

Each method verifies its candidates as they come (`Scaling.verify`: the configured verifiers), tells
its progress (`SearchProgress`) and stops when the budget is spent, when the user stops it
(`Budget.stop`), or early when `scaling.agree` independent candidates agree on a patch that passes.
Selection (selection.py, tournament.py) then picks one among all of them.

A method grows a `Frontier` (its candidates, the next round, search's tree) and can be given it back with a
new budget to go on where it stopped (`/candidates more`): sampling samples more, evolution runs its next
rounds from the best so far, search expands the same tree.

`values` is the common scalar every method and the progress report use: the mean of a candidate's
verifier scores and the share of independent candidates that wrote the same patch.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..config import Config
from ..events import EventBus
from ..task import Task
from .budget import Budget
from .normalize import diff_key
from .progress import SearchProgress
from .runs import Plan, Runner
from .summaries import diff_stat
from .types import Candidate

VERDICTS = ("regression", "reproduction", "judge")
PASSING = ("regression", "reproduction")  # a candidate that agreement counts passes these (where they ran)


@dataclass
class Scaling:
    """What a method works with."""

    task: Task
    config: Config
    runner: Runner
    verify: Callable[[list[Candidate]], None]
    budget: Budget
    events: EventBus

    def finished(self, pool: list[Candidate]) -> None:
        """The method has stopped: the last progress report says why."""
        why = self.budget.exhausted or agreement(pool, self.config.scaling.agree) or "done"
        self.progress(-1, f"{self.runner.method} stopped: {why}; {len(pool)} candidate(s)", pool, done=True)

    def progress(self, round_: int, note: str, pool: list[Candidate], done: bool = False) -> None:
        worth = values(pool)
        nodes = [{"index": c.index, "round": c.round, "parents": c.parents, "status": c.exit_status or "",
                  "value": worth[c.index], "scores": dict(c.scores), "tokens": c.tokens,
                  "change": diff_stat(c.patch), "inherited": bool(c.details.get("inherited")),
                  "trajectory_id": c.trajectory_id or ""} for c in pool]
        self.events.emit(SearchProgress(method=self.runner.method, round=round_, note=note, nodes=nodes,
                                        budget=self.budget.snapshot(), done=done))


@dataclass
class Frontier:
    """Where a method is: its candidates so far, its next round (or wave), and search's tree of states."""

    method: str
    pool: list[Candidate] = field(default_factory=list)
    round: int = 0
    tree: list[Any] = field(default_factory=list)


def key(candidate: Candidate) -> str | None:
    """The class of its patch: the normalized key when votes computed one, else the diff text's."""
    return candidate.details.get("normalized") or diff_key(candidate.patch)


def independent(pool: list[Candidate]) -> list[Candidate]:
    """Usable candidates that decided their own patch (a search branch that only resubmitted the patch it
    started from did not: it would vote twice)."""
    return [c for c in pool if c.usable and not c.details.get("inherited")]


def values(pool: list[Candidate]) -> dict[int, float]:
    """candidate index -> the mean of its verifier scores and its share of the independent votes (0 for a
    candidate with no usable patch)."""
    voters = independent(pool)
    counts = Counter(key(c) for c in voters)
    out = {}
    for candidate in pool:
        if not candidate.usable:
            out[candidate.index] = 0.0
            continue
        parts = [float(candidate.scores[name]) for name in VERDICTS if name in candidate.scores]
        share = counts.get(key(candidate), 0) / len(voters) if voters else 0.0
        out[candidate.index] = round(sum(parts + [share]) / (len(parts) + 1), 4)
    return out


def agreement(pool: list[Candidate], need: int) -> str:
    """Why to stop early: `need` independent candidates wrote one patch and it passes the tests that ran
    ("" when they do not, or `need` is 0)."""
    if need <= 0:
        return ""
    passing = [c for c in independent(pool) if all(c.scores.get(name, 1.0) >= 1.0 for name in PASSING)]
    counts = Counter(key(c) for c in passing)
    if counts and (most := max(counts.values())) >= need:
        return f"{most} independent candidates agree on one patch that passes the verifiers"
    return ""


def sample(scaling: Scaling, frontier: Frontier) -> None:
    """Best-of-N: runs from the issue, max_parallel at a time, while the budget lasts. Verified once at the
    end (the harness picks the relevant tests from all the new patches), or after each wave when early
    stopping on agreement is on."""
    pool, known = frontier.pool, len(frontier.pool)
    agree = scaling.config.scaling.agree
    while granted := scaling.budget.allow(scaling.config.scaling.max_parallel):
        new = [run.candidate for run in scaling.runner.run([Plan(index=len(pool) + i) for i in range(granted)])]
        pool += new
        if agree:
            scaling.verify(new)
        why = agreement(pool, agree)
        scaling.progress(frontier.round, why or f"{len(new)} run(s) sampled", pool)
        frontier.round += 1
        if why:
            break
    if not agree:
        scaling.verify(pool[known:])


def choosable(pool: list[Candidate]) -> list[Candidate]:
    """The candidates selection chooses among: all but a search branch's resubmission of a patch that an
    independent candidate also wrote (it would be a second vote for it)."""
    decided = {key(c) for c in independent(pool)}
    return [c for c in pool if not (c.details.get("inherited") and key(c) in decided)]
