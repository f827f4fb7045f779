"""Pick one candidate out of N: majority vote, a judge, tests, a hybrid of them, or chance.

    select(candidates, "hybrid", read=reader)      # -> Selection(chosen=..., ranking=..., votes=..., why=...)

Policies (every one ranks usable candidates first; a discarded one is chosen only when nothing else is):

- `vote`: the largest class of equivalent patches (normalize.py, votes.py); ties go to the candidate most
  similar to the others (a soft vote, `similarity.similarity`), then to the class seen first, and
  within a class the lowest index wins.
- `judge`: the highest `scores["judge"]`; ties by votes, then similarity, then index.
- `tests`: the highest `scores["regression"]`, then `scores["reproduction"]`; ties by votes, then
  similarity, then index.
- `hybrid` (after R2E-Gym): the judge's top `top_k` (when judge scores exist), ranked by regression,
  then reproduction, then the judge again, then votes, then similarity, then index. `stages`
  reorders or drops the verifier steps.
- `random`: a seeded shuffle of the usable candidates (a baseline for comparison).
- `tournament`: a knock-out of the distinct patches, seeded by the hybrid order, each match judged by
  `pair_judge` reading the issue and both candidates' summaries (tournament.py); undecided matches go
  to the better seed, so that without a judge it is the hybrid order.

Similarity: exactly equivalent patches are rare among different-but-right ones, so each candidate
also gets its mean similarity to the other usable candidates (changed scopes and changed tokens:
right patches tend to change the same functions alike, wrong ones go wrong in different ways).
With `soft_votes=False` that step is left out.

A verifier no candidate has a score for is skipped (and `why` says so); a usable candidate without
a score that others have ranks below every scored one on that step. Votes come from the candidates'
stored `details["normalized"]` keys, from `groups` when given, or are computed: with `read` (the
base tree) by full normalization, else from the diff text alone.
"""

from __future__ import annotations

import random as _random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..patches.base import Reader
from .similarity import diff_features, similarity
from .types import Candidate, Selection
from .votes import annotate

if TYPE_CHECKING:
    from .tournament import PairJudge

POLICIES = ("vote", "judge", "tests", "hybrid", "random", "tournament")
HYBRID_STAGES = ("regression", "reproduction", "judge")
MISSING = -1.0  # a score a candidate lacks, where others have one


class SelectionError(ValueError):
    pass


def select(candidates: Sequence[Candidate], policy: str = "hybrid", *, read: Reader | None = None,
           groups: dict[str, list[int]] | None = None, seed: int = 0, top_k: int | None = 3,
           stages: Sequence[str] = HYBRID_STAGES, soft_votes: bool = True, pair_judge: PairJudge | None = None,
           issue: str = "") -> Selection:
    """Choose one of `candidates` by `policy` (see the module docstring). Candidates are not modified.

    `read`: the base tree, for normalization (votes and discarding). `groups`: precomputed classes
    (key -> candidate indices). `seed`: for `random`. `top_k`, `stages`: for `hybrid` (and the
    tournament's seeding). `soft_votes`: break ties on votes by similarity to the other candidates.
    `pair_judge`, `issue`: for `tournament`.
    """
    if policy not in POLICIES:
        raise SelectionError(f"unknown selection policy {policy!r}; choose one of {', '.join(POLICIES)}")
    pool = _annotated(candidates, read, groups)
    usable = [c for c in pool if c.usable]
    discarded = [c for c in pool if not c.usable]
    classes = _classes(usable, groups)
    votes = {c.index: sum(1 for other in usable if classes[other.index] == classes[c.index]) for c in usable}
    if not usable:
        reasons = sorted({str(c.details.get("discarded") or "empty patch") for c in discarded})
        return Selection(policy=policy, chosen=None, ranking=[c.index for c in pool], votes={},
                         why=f"no usable candidate: all {len(pool)} were discarded ({'; '.join(reasons)})")

    if policy == "tournament":
        order = select(pool, "hybrid", groups=groups, top_k=top_k, stages=stages, soft_votes=soft_votes).ranking
        return _tournament(pool, order, classes, votes, pair_judge, issue)

    if policy == "random":
        ranked = sorted(usable, key=lambda c: c.index)
        _random.Random(seed).shuffle(ranked)
        why = f"candidate {ranked[0].index} was drawn at random (seed {seed}) from {len(usable)} usable candidates"
        return _selection(policy, ranked, discarded, votes, why)

    note = ""
    closeness = _closeness(usable) if soft_votes else {}
    soft = [("similarity", lambda c: closeness[c.index])] if soft_votes else []

    steps: list[tuple[str, Callable[..., float]]]
    if policy == "vote":
        first: dict = {}
        for c in sorted(usable, key=lambda c: c.index):
            first.setdefault(classes[c.index], c.index)
        steps = [
            ("votes", lambda c: votes[c.index]), *soft, ("the earliest class", lambda c: -first[classes[c.index]])]
    elif policy == "judge":
        steps, note = _present(usable, ["judge"])
        steps += [("votes", lambda c: votes[c.index]), *soft]
    elif policy == "tests":
        steps, note = _present(usable, ["regression", "reproduction"])
        steps += [("votes", lambda c: votes[c.index]), *soft]
    else:  # hybrid
        unknown = [stage for stage in stages if stage not in HYBRID_STAGES]
        if unknown:
            raise SelectionError(f"unknown hybrid stage(s) {unknown}; choose from {', '.join(HYBRID_STAGES)}")
        steps, note = _present(usable, list(stages))
        steps += [("votes", lambda c: votes[c.index]), *soft]
        judged = any("judge" in c.scores for c in usable)
        if judged and top_k and top_k < len(usable):
            by_judge = sorted(usable, key=lambda c: (-_score(c, "judge"), -votes[c.index], c.index))
            shortlisted, rest = by_judge[:top_k], by_judge[top_k:]
            ranked = _rank(shortlisted, steps) + _rank(rest, steps)
            why = _why(ranked[0], shortlisted, steps, votes, classes, note,
                       prefix=f"among the judge's top {top_k} of {len(usable)}")
            return _selection(policy, ranked, discarded, votes, why)

    ranked = _rank(usable, steps)
    return _selection(policy, ranked, discarded, votes, _why(ranked[0], usable, steps, votes, classes, note))


# ----------------------------------------------------------------------------------------- pieces

def _annotated(candidates: Sequence[Candidate], read: Reader | None,
               groups: dict[str, list[int]] | None) -> list[Candidate]:
    pool = [c.model_copy(deep=True) for c in candidates]
    indices = [c.index for c in pool]
    if len(set(indices)) != len(indices):
        raise SelectionError(f"candidate indices must be unique, got {indices}")
    if groups is not None:
        return pool
    if read is not None or not all(c.details.get("normalized") for c in pool if c.usable):
        annotate(pool, read)
    return pool


def _classes(usable: list[Candidate], groups: dict[str, list[int]] | None) -> dict[int, Any]:
    """candidate index -> its class key (a candidate in no class is a class of its own)."""
    key_of: dict[int, Any] = {}
    if groups is not None:
        for key, members in groups.items():
            for index in members:
                key_of[index] = key
    else:
        for c in usable:
            key_of[c.index] = c.details.get("normalized")
    return {c.index: key_of.get(c.index) if key_of.get(c.index) is not None else ("alone", c.index)
            for c in usable}


def _closeness(usable: list[Candidate]) -> dict[int, float]:
    """candidate index -> its mean similarity to the other usable candidates (rounded, so that
    float noise never decides)."""
    features = {c.index: c.details.get("features") or diff_features(c.patch) for c in usable}
    out = {}
    for c in usable:
        others = [similarity(features[c.index], features[o.index]) for o in usable if o.index != c.index]
        out[c.index] = round(sum(others) / len(others), 6) if others else 0.0
    return out


def _score(candidate: Candidate, name: str) -> float:
    value = candidate.scores.get(name)
    return MISSING if value is None else float(value)


def _present(usable: list[Candidate], names: list[str]) -> tuple[list[tuple[str, Callable[..., float]]], str]:
    """Ranking steps for the verifiers that scored at least one usable candidate; a note on the others."""
    steps, missing = [], []
    for name in names:
        if any(name in c.scores for c in usable):
            steps.append((name, lambda c, name=name: _score(c, name)))
        else:
            missing.append(name)
    note = f" ({', '.join(missing)} did not run)" if missing else ""
    return steps, note


def _rank(items: list[Candidate], steps: list[tuple[str, Callable[[Candidate], float]]]) -> list[Candidate]:
    return sorted(items, key=lambda c: (*(-fn(c) for _, fn in steps), c.index))


def _fmt(value: float) -> str:
    if value == MISSING:
        return "none"
    return str(int(value)) if float(value).is_integer() else f"{value:.2f}"


def _why(winner: Candidate, field: list[Candidate], steps, votes: dict[int, int], classes: dict[int, Any],
         note: str, prefix: str = "") -> str:
    """One sentence: the first step on which the winner beats the best different answer."""
    where = f" {prefix}" if prefix else ""
    others = [c for c in field if classes[c.index] != classes[winner.index]]
    if not others:
        if len(field) == 1:
            return f"candidate {winner.index} is the only usable candidate{where}{note}"
        return (f"candidate {winner.index}: all {len(field)} usable candidates{where} are the same patch once "
                f"normalized, and it has the lowest index{note}")
    runner = _rank(others, steps)[0]
    for position, (name, fn) in enumerate(steps):
        mine, theirs = fn(winner), fn(runner)
        if mine != theirs:
            if name == "the earliest class":
                tied = ", ".join(n for n, _ in steps[:position])
                return (f"candidate {winner.index} ties with candidate {runner.index} on {tied} and was sampled "
                        f"first{where}{note}")
            what = {"votes": "the most votes", "similarity": "the highest similarity to the other candidates"}.get(
                name, f"the highest {name} score")
            before = [n for n, _ in steps[:position]]
            tie = f", after a tie on {', '.join(before)}" if before else ""
            return (f"candidate {winner.index} has {what} ({_fmt(mine)} vs {_fmt(theirs)} for "
                    f"candidate {runner.index}){where}{tie}{note}")
    return (f"candidate {winner.index} ties with candidate {runner.index} on "
            f"{', '.join(name for name, _ in steps)} and has the lower index{where}{note}")


def _tournament(pool: list[Candidate], order: list[int], classes: dict[int, Any], votes: dict[int, int],
                judge: PairJudge | None, issue: str) -> Selection:
    """The knock-out over one entrant per class (the first in the hybrid order), then each class's others."""
    from .tournament import describe, knockout

    by_index = {c.index: c for c in pool}
    members: dict[Any, list[int]] = {}
    for index in order:
        if index in votes:
            members.setdefault(classes[index], []).append(index)
    entrants = [by_index[indices[0]] for indices in members.values()]
    played, matches = knockout(entrants, votes, judge, issue)
    ranking = [index for entrant in played for index in members[classes[entrant]]]
    ranking += [index for index in order if index not in votes]
    return Selection(policy="tournament", chosen=played[0], ranking=ranking, votes=votes, matches=matches,
                     why=describe(played[0], len(entrants), matches))


def _selection(policy: str, ranked: list[Candidate], discarded: list[Candidate], votes: dict[int, int],
               why: str) -> Selection:
    ranking = [c.index for c in ranked] + [c.index for c in sorted(discarded, key=lambda c: c.index)]
    return Selection(policy=policy, chosen=ranked[0].index, ranking=ranking, votes=votes, why=why)
