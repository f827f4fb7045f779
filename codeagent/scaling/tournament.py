"""Tournament selection: every candidate summarised, a knock-out of pairwise matches, a judge for each.

    select(candidates, "tournament", pair_judge=ModelPairJudge(model), issue=task.problem_statement)

Candidates that wrote the same patch (once normalized) enter as one, with their votes in their summary
(summaries.py: how the run ended, what it changes, what the verifiers said, the agent's last words, the
patch). Entrants are seeded by the hybrid order (verifiers, votes, similarity). Each round pairs the best
seed left with the worst (the best has a bye when their number is odd); the judge reads the issue and
both summaries (prompts/tournament.j2) and names the better one; who is shown first alternates from match
to match, so that a judge that favours a position favours each seed alike. A match the judge does not
decide (no judge, a reply without a readable A or B, a failed call) goes to the better seed: with no
model judge the tournament is the hybrid order. The champion is chosen; the others rank by the round
they lost in, then by seed; a class's other members follow its entrant.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Protocol

from ..agent.prompts import render
from ..models import Model, ModelError, Sampling
from .summaries import summary
from .types import Candidate

_ANSWER = re.compile(r"(?<![A-Za-z])([AB])(?![A-Za-z])")


class PairJudge(Protocol):
    def prefer(self, issue: str, first: str, second: str) -> tuple[int | None, str]:
        """(0: the first summary's candidate is better, 1: the second's, None: undecided; how it was read)."""
        ...


def read_preference(text: str) -> tuple[int | None, str]:
    """The judge's answer: the first standalone capital A or B in its reply."""
    found = _ANSWER.search(text)
    if found is None:
        return None, f"no A or B in the judge's reply {text.strip()[:60]!r}"
    return (0 if found.group(1) == "A" else 1), f"the judge answered {found.group(1)}"


class ModelPairJudge:
    """A model reads the issue and two summaries and answers A or B (greedy, a few tokens)."""

    def __init__(self, model: Model, *, prompts_dir: str | None = None, max_tokens: int = 8):
        self.model, self.prompts_dir, self.max_tokens = model, prompts_dir, max_tokens

    def prefer(self, issue: str, first: str, second: str) -> tuple[int | None, str]:
        prompt = render("tournament", self.prompts_dir, issue=issue.strip(), first=first, second=second)
        try:
            reply = self.model.complete([{"role": "user", "content": prompt}], [],
                                        Sampling(temperature=0.0, max_tokens=self.max_tokens))
        except ModelError as exc:
            return None, f"the judge failed: {exc}"
        return read_preference(reply.content)


def knockout(entrants: Sequence[Candidate], votes: dict[int, int], judge: PairJudge | None,
             issue: str) -> tuple[list[int], list[dict[str, Any]]]:
    """The entrants (best seed first) played off: (their indices, the champion first; the matches)."""
    seed = {c.index: position for position, c in enumerate(entrants)}
    summaries = {c.index: summary(c, votes.get(c.index)) for c in entrants}
    alive = list(entrants)
    lost_in: dict[int, int] = {}
    matches: list[dict[str, Any]] = []
    round_ = 0
    while len(alive) > 1:
        survivors = alive[:1] if len(alive) % 2 else []
        playing = alive[1:] if len(alive) % 2 else alive
        for number in range(len(playing) // 2):
            better, worse = playing[number], playing[-1 - number]
            first, second = (better, worse) if (len(matches) % 2 == 0) else (worse, better)
            verdict, how = judge.prefer(issue, summaries[first.index], summaries[second.index]) if judge \
                else (None, "no judge")
            winner = better if verdict is None else (first, second)[verdict]
            loser = worse if winner is better else better
            lost_in[loser.index] = round_
            survivors.append(winner)
            matches.append({"round": round_, "first": first.index, "second": second.index, "winner": winner.index,
                            "decided_by": "seed" if verdict is None else "judge", "how": how})
        alive = sorted(survivors, key=lambda c: seed[c.index])
        round_ += 1
    rest = sorted(lost_in, key=lambda index: (-lost_in[index], seed[index]))
    return [alive[0].index, *rest] if alive else [], matches


def describe(champion: int, entrants: int, matches: list[dict[str, Any]]) -> str:
    if not matches:
        return f"candidate {champion} is the only distinct patch: no match was played"
    judged = sum(match["decided_by"] == "judge" for match in matches)
    final = matches[-1]
    beaten = final["second"] if final["winner"] == final["first"] else final["first"]
    return (f"candidate {champion} won the knock-out of {entrants} distinct patches ({len(matches)} matches, {judged} "
            f"decided by the judge, {len(matches) - judged} by the seeding); the final against candidate {beaten}: "
            f"{final['how']}")
