"""Offline selection: re-run the selection policies over stored candidates whose outcomes are known.

    codeagent eval select --candidates candidates.jsonl [--policy vote --policy hybrid] [--json out.json]

The file holds one Candidate per line (JSON, codeagent.scaling.types.Candidate) with `resolved`
set; they are grouped by instance_id. For each policy the report gives Best@N (how many instances'
selected candidate resolves) against:

- Pass@N: some candidate resolves (the oracle: what a perfect selector would get),
- Pass@1: the mean over all candidates of resolving (one sample, no selection),
- random: the expected Best@N of picking uniformly among the usable candidates;

and the share of the gap between Pass@1 and Pass@N each policy closes ((Best@N - Pass@1) / (Pass@N - Pass@1)).
`tournament` needs a judge (`pair_judge`, and `issues` for it to read); without one it is the hybrid order.

A candidate whose outcome is unknown (`resolved` null) counts as not resolving, and is reported.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .selection import POLICIES, select
from .types import Candidate

DEFAULT_POLICIES = ("vote", "judge", "tests", "hybrid", "random")


def load_candidates(path: str | Path) -> dict[str, list[Candidate]]:
    """instance_id -> its candidates (by index), from a JSONL file of Candidates."""
    groups: dict[str, list[Candidate]] = {}
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            candidate = Candidate.model_validate(json.loads(line))  # json.loads: a patch's \udcXX escapes
        except ValueError as exc:
            raise ValueError(f"{path}: line {number} is not a Candidate: {str(exc).splitlines()[0]}") from None
        groups.setdefault(candidate.instance_id, []).append(candidate)
    for instance, items in groups.items():
        indices = [c.index for c in items]
        if len(set(indices)) != len(indices):
            raise ValueError(f"{path}: instance {instance} has repeated candidate indices {sorted(indices)}")
        items.sort(key=lambda c: c.index)
    return groups


def write_candidates(path: str | Path, groups: dict[str, list[Candidate]]) -> None:
    with open(path, "w", encoding="utf-8") as out:
        for items in groups.values():
            for candidate in items:
                out.write(json.dumps(candidate.model_dump(mode="json")) + "\n")  # odd patch bytes as \udcXX


def evaluate(groups: dict[str, list[Candidate]], policies: Sequence[str] = DEFAULT_POLICIES, *,
             seed: int = 0, readers: dict[str, Callable] | None = None, issues: dict[str, str] | None = None,
             **options: Any) -> dict[str, Any]:
    """Best@N per policy against Pass@N, Pass@1 and the random expectation (see the module docstring),
    and the share of the Pass@1 -> Pass@N gap each policy closes.

    `readers`: instance_id -> read(path) of its base tree, for full normalization (else the stored
    details["normalized"] keys, else the diff text). `issues`: instance_id -> its problem statement (what a
    tournament's judge reads). `options` go to `select` (top_k, stages, pair_judge)."""
    unknown_policies = [p for p in policies if p not in POLICIES]
    if unknown_policies:
        raise ValueError(f"unknown policy {unknown_policies}; choose from {', '.join(POLICIES)}")
    instances = []
    totals = {policy: 0 for policy in policies}
    pass_n = pass_1 = expected_random = 0.0
    unknown = 0
    for instance_id, candidates in groups.items():
        outcome = {c.index: bool(c.resolved) for c in candidates}
        unknown += sum(c.resolved is None for c in candidates)
        read = (readers or {}).get(instance_id)
        row: dict[str, Any] = {"instance_id": instance_id, "candidates": len(candidates),
                               "resolving": sum(outcome.values()), "pass_at_n": any(outcome.values()),
                               "pass_at_1": sum(outcome.values()) / len(candidates) if candidates else 0.0,
                               "policies": {}}
        first = None
        for policy in policies:
            selection = select(candidates, policy, read=read, seed=seed, issue=(issues or {}).get(instance_id, ""),
                               **options)
            if first is None:
                first = selection
            won = selection.chosen is not None and outcome.get(selection.chosen, False)
            totals[policy] += won
            row["policies"][policy] = {"chosen": selection.chosen, "resolved": won, "why": selection.why}
        usable = [index for index in first.ranking if index in first.votes] if first else []
        row["usable"] = len(usable)
        row["classes"] = round(sum(1 / first.votes[i] for i in usable)) if first else 0
        row["random"] = sum(outcome[i] for i in usable) / len(usable) if usable else 0.0
        pass_n += row["pass_at_n"]
        pass_1 += row["pass_at_1"]
        expected_random += row["random"]
        instances.append(row)
    count = len(instances)

    def rate(value: float) -> float:
        return round(value / count, 4) if count else 0.0

    return {
        "instances": count,
        "candidates": sum(len(c) for c in groups.values()),
        "unknown_outcomes": unknown,
        "pass_at_n": {"count": int(pass_n), "rate": rate(pass_n)},
        "pass_at_1": rate(pass_1),
        "random_expected": {"count": round(expected_random, 2), "rate": rate(expected_random)},
        "policies": {policy: {"best_at_n": totals[policy], "rate": rate(totals[policy]),
                              "of_pass_at_n": round(totals[policy] / pass_n, 4) if pass_n else 0.0,
                              "of_gap": round((totals[policy] - pass_1) / (pass_n - pass_1), 4)
                              if pass_n > pass_1 else 0.0}
                     for policy in policies},
        "per_instance": instances,
        "seed": seed,
    }


def print_report(result: dict[str, Any], console=None, *, per_instance: bool = False) -> None:
    """A rich table of the numbers `evaluate` returns."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    n = result["instances"]
    table = Table(title=f"Selection over {n} instances, {result['candidates']} candidates")
    table.add_column("policy")
    table.add_column("Best@N", justify="right")
    table.add_column("rate", justify="right")
    table.add_column("of Pass@N", justify="right")
    table.add_column("of the gap", justify="right")
    for policy, row in result["policies"].items():
        table.add_row(policy, f"{row['best_at_n']}/{n}", f"{100 * row['rate']:.1f}%", f"{100 * row['of_pass_at_n']:.1f}%",
                      f"{100 * row.get('of_gap', 0.0):.1f}%")
    table.add_section()
    table.add_row("random (expected)", f"{result['random_expected']['count']:.2f}/{n}",
                  f"{100 * result['random_expected']['rate']:.1f}%", "")
    table.add_row("Pass@1", "", f"{100 * result['pass_at_1']:.1f}%", "")
    table.add_row("Pass@N (oracle)", f"{result['pass_at_n']['count']}/{n}", f"{100 * result['pass_at_n']['rate']:.1f}%",
                  "100.0%")
    console.print(table)
    if result.get("unknown_outcomes"):
        console.print(f"[yellow]{result['unknown_outcomes']} candidate(s) with an unknown outcome count as not resolving")
    if per_instance:
        detail = Table(title="Per instance")
        detail.add_column("instance")
        detail.add_column("resolving", justify="right")
        for policy in result["policies"]:
            detail.add_column(policy, justify="center")
        for row in result["per_instance"]:
            marks = ["✓" if row["policies"][p]["resolved"] else "✗" for p in result["policies"]]
            detail.add_row(row["instance_id"], f"{row['resolving']}/{row['candidates']}", *marks)
        console.print(detail)
