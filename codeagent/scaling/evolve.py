"""Evolution (after Satori-SWE's EvoScale): generation in rounds, each conditioned on the best of the last.

Round 0 samples `scaling.population` runs from the issue. Each later round's runs are shown the issue and
the `scaling.parents` best distinct candidates so far, each with its patch and what the verifiers said of
it (prompts/evolve.j2), and write a solution of their own from the original code. The best are ranked by
the configured selection policy over every candidate so far, so a parent stays until a better one comes
(the hybrid order stands in for the tournament here: a tournament every round would spend the budget on
judging). A round's candidates record their parents (Candidate.parents, the trajectory's `parents`).

It stops when the budget is spent (the last round may be smaller), when the user stops it, or when
`scaling.agree` independent candidates agree on a patch that passes (methods.agreement). Given its frontier
back with a new budget, it goes on with its next round, parents chosen among every candidate so far.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..agent.prompts import render
from .methods import Frontier, Scaling, agreement, independent, key
from .runs import Plan
from .selection import select
from .summaries import PATCH_CHARS, feedback
from .types import Candidate

if TYPE_CHECKING:
    from ..sandbox import Sandbox


def evolve(scaling: Scaling, frontier: Frontier) -> None:
    settings = scaling.config.scaling
    pool = frontier.pool
    while granted := scaling.budget.allow(settings.population):
        round_ = frontier.round
        parents = elites(pool, settings.parents, settings.policy, settings.top_k) if round_ else []
        prompt = evolution_prompt(scaling, parents, pool) if parents else None
        plans = [Plan(index=len(pool) + i, round=round_, parents=parents, prompt=prompt) for i in range(granted)]
        new = [run.candidate for run in scaling.runner.run(plans)]
        scaling.verify(new)
        pool += new
        why = agreement(pool, settings.agree)
        shown = ", ".join(str(parent.index) for parent in parents)
        scaling.progress(round_, why or (f"round {round_}: {len(new)} run(s) shown candidates {shown}" if parents
                                         else f"round {round_}: {len(new)} run(s) from the issue"), pool)
        frontier.round += 1
        if why:
            break


def elites(pool: list[Candidate], count: int, policy: str, top_k: int | None = 3) -> list[Candidate]:
    """The `count` best candidates with distinct patches, by `policy`'s ranking (hybrid for the tournament)."""
    usable = [c for c in pool if c.usable]
    if not usable:
        return []
    ranking = select(usable, policy if policy != "tournament" else "hybrid", top_k=top_k).ranking
    by_index = {c.index: c for c in usable}
    chosen: list[Candidate] = []
    seen: set = set()
    for index in ranking:
        candidate = by_index.get(index)
        if candidate is None or key(candidate) in seen:
            continue
        seen.add(key(candidate))
        chosen.append(candidate)
        if len(chosen) == count:
            break
    return chosen


def evolution_prompt(scaling: Scaling, parents: list[Candidate], pool: list[Candidate]) -> Callable[[Sandbox], str]:
    """The first user message of a later round's runs: the instance prompt as usual, then the parents."""
    task, config = scaling.task, scaling.config
    votes = Counter(key(c) for c in independent(pool))
    per_parent = max(500, PATCH_CHARS // max(1, len(parents)))
    attempts = [{"number": number, "feedback": feedback(parent, votes.get(key(parent), 0)),
                 "patch": _cut(parent.patch, per_parent)} for number, parent in enumerate(parents, 1)]

    def render_for(sandbox: Sandbox) -> str:
        instance = render("instance", config.agent.prompts_dir, problem_statement=task.problem_statement,
                          hints_text=task.hints_text, localization=scaling.runner.localization,
                          workdir=sandbox.workdir, network=config.sandbox.network, scratch_dir=config.agent.scratch_dir)
        return render("evolve", config.agent.prompts_dir, instance=instance, attempts=attempts)

    return render_for


def _cut(patch: str, limit: int) -> str:
    from ..tools.text import truncate_middle

    return truncate_middle(patch.strip(), limit)
