"""How much of the Pass@1 -> Pass@N gap each selection policy closes on a candidate set of real patches
from different real systems for the same SWE-bench Lite instances.

    python bench/selection_gap.py [--candidates evals/selection/candidates.jsonl] [--judge-model SPEC --dataset F]

The candidates are bench/selection_real.py's (evals/selection/candidates.jsonl: every one graded in Docker by
the harness, the truth; regression scores and normalized classes recorded): the gold patch, leaderboard
systems' patches that the official harness judged resolving (10 systems), the gold patch of another instance
of the same repository (a real patch, not for this issue), synthetic near-misses (the gold truncated or with
one operator flipped) and the empty patch. Pools, each a row of the table:

- all: every candidate;
- real patches: gold, leaderboard, another instance's gold, empty (no synthetic near-miss);
- systems: leaderboard, another instance's gold, empty (no gold patch either).

Policies: vote, tests, hybrid (no judge: none was run on this set), tournament (its pairwise judge is
--judge-model when given; without one every match goes to the better seed, the hybrid order), random.
Gap closed = (Best@N - Pass@1) / (Pass@N - Pass@1), over instances. Writes bench/results/selection_gap.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

POLICIES = ("vote", "tests", "hybrid", "tournament", "random")
POOLS = {
    "all": lambda source: True,
    "real patches": lambda source: source in ("gold", "empty") or source.startswith(("leaderboard:", "other-gold:")),
    "systems": lambda source: source == "empty" or source.startswith(("leaderboard:", "other-gold:")),
}


def main() -> None:
    from codeagent.scaling.offline import evaluate, load_candidates

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=Path, default=ROOT / "evals" / "selection" / "candidates.jsonl")
    parser.add_argument("--judge-model", help="the tournament's judge (a model spec); needs --dataset for the issues")
    parser.add_argument("--dataset", help="the instances' dataset (their issues), for --judge-model")
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results" / "selection_gap.md")
    args = parser.parse_args()
    groups = load_candidates(args.candidates)
    options: dict = {}
    if args.judge_model:
        from codeagent.data import load_tasks
        from codeagent.models import make_model
        from codeagent.scaling.tournament import ModelPairJudge

        options["pair_judge"] = ModelPairJudge(make_model(args.judge_model))
        options["issues"] = {t.instance_id: t.problem_statement for t in load_tasks(args.dataset, instance_ids=list(groups))}
    results = {}
    for name, keep in POOLS.items():
        pool = {}
        for instance, candidates in groups.items():
            kept = [c for c in candidates if keep(str(c.sampling.get("source", "")))]
            if kept:
                pool[instance] = kept
        results[name] = evaluate(pool, POLICIES, seed=0, **options)
    judge = args.judge_model or "none (every match to the better seed: the hybrid order)"
    lines = ["# Selection on real patches from different systems: the share of the Pass@1 -> Pass@N gap closed", "",
             f"Produced by `python bench/selection_gap.py{' ' + ' '.join(sys.argv[1:]) if sys.argv[1:] else ''}` on "
             f"{time.strftime('%Y-%m-%d', time.gmtime())} from {args.candidates.relative_to(ROOT) if args.candidates.is_relative_to(ROOT) else args.candidates} "
             f"(bench/selection_real.py's candidates, each graded in Docker). Tournament judge: {judge}.", "",
             "| pool | instances | candidates | Pass@1 | Pass@N | " + " | ".join(POLICIES) + " | random (expected) |",
             "|---|---:|---:|---:|---:|" + "---:|" * (len(POLICIES) + 1)]
    for name, result in results.items():
        n = result["instances"]
        cells = [f"{result['policies'][p]['best_at_n']}/{n} ({100 * result['policies'][p]['of_gap']:.0f}%)"
                 for p in POLICIES]
        expected, pass_1, pass_n = result["random_expected"]["count"], result["pass_at_1"] * n, result["pass_at_n"]["count"]
        cells.append(f"{expected:.2f}/{n} ({100 * (expected - pass_1) / (pass_n - pass_1):.0f}%)" if pass_n > pass_1 else "")
        lines.append(f"| {name} | {n} | {result['candidates']} | {100 * result['pass_at_1']:.1f}% | "
                     f"{result['pass_at_n']['count']}/{n} | " + " | ".join(cells) + " |")
    lines += ["", "Each cell: Best@N (the share of the Pass@1 -> Pass@N gap it closes). `random` is one seeded draw; "
              "random (expected) is the mean over every draw."]
    text = "\n".join(lines) + "\n"
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(text)
    args.results.with_suffix(".json").write_text(json.dumps(
        {name: {k: v for k, v in r.items() if k != "per_instance"} for name, r in results.items()}, indent=1))
    print(text)


if __name__ == "__main__":
    main()
