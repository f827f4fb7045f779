"""Test-time scaling at equal generated-token budgets on a real model: the GRPO-trained tiny model of
bench/grpo_learns.py on the held-out `verbs` tasks (CPU, Docker sandboxes, graded by the hidden tests).

    python bench/tts_budget.py --work DIR [--seeds 0 1 2] [--runs 8] [--tasks 32] [--concurrency 2]

DIR is a `bench/grpo_learns.py --work DIR --keep` folder: DIR/seed-N/grpo/adapter is seed N's policy (trained
once per seed, before this benchmark; the seeds are the ones grpo_learns.py has always used). Per seed:

1. Sampling: `--runs` agent runs per task from the issue (codeagent.scaling, `tts=sample`, one at a time),
   each charged to a budget by its generated tokens. One run's cost (`unit`) is the mean over them all.
   The judge (scaling/judge.py, the same model) scores each distinct patch, its tokens recorded; the
   tournament (scaling/tournament.py, the same model as its pairwise judge) is played over every prefix
   of the samples, its tokens recorded.
2. Evolution (`tts=evolve`, population 2, parents 2) and tree search (`tts=search`, one expansion a wave,
   exploration 1.0), each one run per task with a budget of `runs` x unit tokens.
3. Every distinct patch is graded in a fresh sandbox by the hidden tests.

Then, at each budget B (1, 2, 4, 8 x unit), each method's pick, with everything it generated counted:
- pass@1: the mean solve rate of single samples;
- best-of-N (hybrid, today's verifier with its judge): the longest prefix of the samples whose run tokens
  plus the judge's tokens for their distinct patches fit B, selected by `hybrid`;
- best-of-N (votes): the longest prefix whose run tokens fit B, selected by `hybrid` without the judge (the
  regression tests, which the toy repository does not have, then votes, then similarity);
- tournament: the longest prefix whose run tokens plus its tournament's judge tokens fit B;
- evolve / search: the candidates the method had finished within B (a method's choices up to B do not
  depend on the budget beyond it), selected by `hybrid` without the judge.
A prefix has one run at least: a method always makes one.

Writes DIR/tts/seed-N/tasks/*.json (resumable), bench/results/tts_budget.{json,md,png} (--results).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BUDGETS = (1, 2, 4, 8)
METHODS = ("pass@1", "best-of-N (hybrid + judge)", "best-of-N (votes)", "tournament", "evolve", "search",
           "oracle (any sample)")
SELECTIONS = ("best-of-N (hybrid + judge)", "best-of-N (votes)", "tournament")  # pick among the same samples
_LOCK = threading.Lock()


def log(text: str) -> None:
    with _LOCK:
        print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def digest(patch: str) -> str:
    return hashlib.sha256(patch.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def base_config(store: Path, **scaling):
    from codeagent.train.toy import toy_config

    # every run at the temperature the policy was trained and evaluated at (the default schedule starts at 0.0:
    # greedy, this policy writes a broken tool call)
    return toy_config(trajectories_dir=str(store), limits={"max_seconds": 300},
                      scaling={"max_parallel": 1, "verifiers": ["regression"], "policy": "hybrid",
                               "temperatures": [1.0], **scaling})


def factory(task):
    from codeagent.sandbox import open_sandbox, snapshot

    snap = snapshot(task.repo, task.base_commit)
    return lambda: open_sandbox(snap)


def hide(task):
    """The task as the agent and the verifiers get it: no hidden test, no gold patch, and no test command (it
    names the hidden test file; the toy repositories have no test of their own for the regression verifier)."""
    return task.model_copy(update={"test_patch": None, "gold_patch": None, "test_command": None})


class PairCache:
    """The tournament's model judge, each distinct match asked once (greedy: the same answer every time),
    its tokens kept so that every tournament is charged all of its own matches."""

    def __init__(self, model):
        from codeagent.scaling.budget import Budget, Metered
        from codeagent.scaling.tournament import ModelPairJudge

        self.metered = Metered(model, Budget())
        self.judge = ModelPairJudge(self.metered)
        self.known: dict[tuple[str, str, str], tuple[int | None, str, int]] = {}
        self.lock = threading.Lock()

    def for_one_tournament(self):
        cache, spent = self, [0]

        class Judge:
            def prefer(self, issue, first, second):
                key = (issue, first, second)
                with cache.lock:
                    hit = cache.known.get(key)
                if hit is None:
                    before = cache.metered.metered_tokens
                    verdict, how = cache.judge.prefer(issue, first, second)
                    hit = (verdict, how, cache.metered.metered_tokens - before)
                    with cache.lock:
                        cache.known[key] = hit
                spent[0] += hit[2]
                return hit[0], hit[1]

        return Judge(), spent


def sample_task(task, policy, store: Path, runs: int, pairs: PairCache) -> dict:
    from codeagent.sandbox.pool import WarmPool
    from codeagent.scaling.budget import Budget, Metered
    from codeagent.scaling.judge import judge
    from codeagent.scaling.pipeline import scale
    from codeagent.scaling.selection import select
    from codeagent.scaling.types import Candidate

    hidden = hide(task)
    config = base_config(store, candidates=runs)
    with WarmPool(factory(task), ready=1) as sandboxes:  # the next sandbox starts while the model writes
        result = scale(hidden, config, sandboxes, model_factory=lambda name: policy)
    candidates = sorted(result.candidates, key=lambda c: c.index)
    judged: dict[str, dict] = {}
    for candidate in candidates:
        if candidate.usable and digest(candidate.patch) not in judged:
            metered = Metered(policy, Budget())
            probe = Candidate(instance_id=task.instance_id, index=0, patch=candidate.patch)
            judge(metered, task.problem_statement, [probe], prompts_dir=config.agent.prompts_dir)
            judged[digest(candidate.patch)] = {"score": probe.scores.get("judge"), "tokens": metered.metered_tokens,
                                               "said": probe.details.get("judge", "")}
    tournaments = []
    for k in range(1, len(candidates) + 1):
        pair_judge, spent = pairs.for_one_tournament()
        selection = select(candidates[:k], "tournament", pair_judge=pair_judge, issue=task.problem_statement)
        tournaments.append({"k": k, "chosen": selection.chosen, "tokens": spent[0],
                            "judged": sum(m["decided_by"] == "judge" for m in selection.matches),
                            "matches": len(selection.matches)})
    return {"candidates": [c.model_dump(mode="json") for c in candidates], "judge": judged,
            "tournaments": tournaments}


def method_task(task, policy, store: Path, method: str, budget: int) -> dict:
    from codeagent.sandbox.pool import WarmPool
    from codeagent.scaling.pipeline import scale

    hidden = hide(task)
    extra = {"population": 2, "parents": 2} if method == "evolve" else {"exploration": 1.0}
    config = base_config(store, tts=method, budget_tokens=budget, **extra)
    with WarmPool(factory(task), ready=1) as sandboxes:
        result = scale(hidden, config, sandboxes, model_factory=lambda name: policy)
    return {"candidates": [c.model_dump(mode="json") for c in sorted(result.candidates, key=lambda c: c.index)],
            "budget": result.budget}


def grade_all(task, patches: set[str], known: dict[str, bool]) -> dict[str, bool]:
    from codeagent.harness.env_grade import grade_in_sandbox
    from codeagent.sandbox import open_sandbox

    for patch in sorted(patches):
        key = digest(patch)
        if key in known:
            continue
        if not patch.strip():
            known[key] = False
            continue
        with open_sandbox(task.repo, task.base_commit) as box:
            known[key] = grade_in_sandbox(box, task, patch).get("outcome") == "resolved"
    return known


# ------------------------------------------------------------------------------------------ analysis

def picks(record: dict, unit: float) -> dict[str, dict[int, bool]]:
    """method -> budget multiple -> whether its pick resolves (pass@1: the mean of the samples)."""
    from codeagent.scaling.methods import choosable
    from codeagent.scaling.selection import select
    from codeagent.scaling.types import Candidate

    resolved = record["resolved"]
    truth = lambda c: bool(resolved.get(digest(c.patch), False)) if c.usable else False  # noqa: E731
    samples = [Candidate.model_validate(c) for c in record["sample"]["candidates"]]
    judged = record["sample"]["judge"]
    out: dict[str, dict[int, float]] = {m: {} for m in METHODS}
    cumulative = []
    total = 0
    for c in samples:
        total += c.tokens or 0
        cumulative.append(total)

    def longest(cost, budget: float) -> int:
        """The most samples (one at least) whose cost(n) fits the budget."""
        return max([n for n in range(1, len(samples) + 1) if cost(n) <= budget] or [1])

    def judge_tokens(n: int) -> int:
        seen = {digest(c.patch) for c in samples[:n] if c.usable}
        return sum(judged[d]["tokens"] for d in seen if d in judged)

    def with_judge(n: int) -> list[Candidate]:
        out_ = []
        for c in samples[:n]:
            copy = c.model_copy(deep=True)
            score = judged.get(digest(c.patch), {}).get("score")
            if c.usable and score is not None:
                copy.scores["judge"] = score
            out_.append(copy)
        return out_

    def chosen_resolves(candidates: list[Candidate], selection) -> bool:
        chosen = next((c for c in candidates if c.index == selection.chosen), None)
        return truth(chosen) if chosen is not None else False

    tours = record["sample"]["tournaments"]
    for multiple in BUDGETS:
        budget = multiple * unit
        out["pass@1"][multiple] = sum(truth(c) for c in samples) / len(samples)
        n = longest(lambda n: cumulative[n - 1] + judge_tokens(n), budget)
        pool = with_judge(n)
        out["best-of-N (hybrid + judge)"][multiple] = chosen_resolves(pool, select(pool, "hybrid"))
        n = longest(lambda n: cumulative[n - 1], budget)
        out["best-of-N (votes)"][multiple] = chosen_resolves(samples[:n], select(samples[:n], "hybrid"))
        out["oracle (any sample)"][multiple] = any(truth(c) for c in samples[:n])  # pass@n: what a selection can reach
        n = longest(lambda n: cumulative[n - 1] + tours[n - 1]["tokens"], budget)
        chosen = tours[n - 1]["chosen"]
        out["tournament"][multiple] = truth(samples[chosen]) if chosen is not None else False
        for method in ("evolve", "search"):
            made = [Candidate.model_validate(c) for c in record[method]["candidates"]]
            within = [c for i, c in enumerate(made) if i == 0 or c.details.get("spent_after", 0) <= budget]
            within = choosable(within)
            out[method][multiple] = chosen_resolves(within, select(within, "hybrid"))
    return out


def summarize(seeds: dict[int, dict]) -> dict:
    """Per seed and method: the mean over tasks at each budget; then the mean over seeds."""
    table: dict[str, dict] = {}
    for seed, data in seeds.items():
        for method in METHODS:
            for multiple in BUDGETS:
                values = [data["picks"][task][method][multiple] for task in data["picks"]]
                table.setdefault(method, {}).setdefault(multiple, {})[seed] = sum(values) / len(values)
    return table


def markdown(report: dict) -> str:
    table = report["table"]
    seeds = report["seeds"]
    lines = ["# Test-time scaling at equal token budgets (bench/tts_budget.py)", "",
             f"Produced by `{report['command']}` on {report['date']} ({report['host']}). The GRPO-trained tiny model "
             f"of bench/grpo_learns.py (seeds {', '.join(map(str, seeds))}, trained once each before this run), "
             f"{report['tasks']} held-out `verbs` tasks, temperature {report['temperature']}, Docker sandboxes, graded "
             "by the hidden tests. A budget is a multiple of one run's generated tokens (the mean of the samples: "
             + ", ".join(f"seed {s} {seeds[s]['unit']:.1f}" for s in seeds) + " tokens); every token every model "
             "call of a method generated counts (runs, the judge, the tournament's matches).", "",
             "Solve rate (mean over the seeds; each seed's in brackets):", "",
             "| method | " + " | ".join(f"{b}x" for b in BUDGETS) + " |", "|---|" + "---|" * len(BUDGETS)]
    for method in METHODS:
        cells = []
        for multiple in BUDGETS:
            per_seed = table[method][multiple]
            mean = sum(per_seed.values()) / len(per_seed)
            cells.append(f"{mean:.3f} ({', '.join(f'{per_seed[s]:.2f}' for s in sorted(per_seed))})")
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    def mean(method: str, multiple: int) -> float:
        return sum(table[method][multiple].values()) / len(table[method][multiple])

    lines += ["", "The oracle row is pass@n over the samples that fit the budget (some sample resolves): the most a "
              "selection among them can reach. The share of the pass@1 -> oracle gap each selection closes:"]
    for multiple in BUDGETS:
        gap = mean("oracle (any sample)", multiple) - mean("pass@1", multiple)
        shares = ", ".join(f"{method} {(mean(method, multiple) - mean('pass@1', multiple)) / gap:+.2f}"
                           for method in SELECTIONS) if gap > 0 else "no gap"
        lines.append(f"- {multiple}x: {shares}")
    lines += ["", "Where the tokens went (per task, mean over tasks and seeds): "
              + "; ".join(f"{k} {v:.1f}" for k, v in report["costs"].items()), ""]
    return "\n".join(lines) + "\n"


def plot(report: dict, path: Path) -> None:
    try:
        import matplotlib
    except ImportError:
        log("no plot: matplotlib is not installed (pip install 'codeagent[bench]')")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.5), dpi=120)
    for method in METHODS:
        rows = report["table"][method]
        means = [sum(rows[b].values()) / len(rows[b]) for b in BUDGETS]
        low = [means[i] - min(rows[b].values()) for i, b in enumerate(BUDGETS)]
        high = [max(rows[b].values()) - means[i] for i, b in enumerate(BUDGETS)]
        axes.errorbar(BUDGETS, means, yerr=[low, high], marker="o", capsize=3, label=method,
                      linestyle="--" if method in ("pass@1", "oracle (any sample)") else "-")
    axes.set_xscale("log", base=2)
    axes.set_xticks(BUDGETS, [f"{b}x" for b in BUDGETS])
    axes.set_xlabel("budget: generated tokens, in multiples of one run")
    axes.set_ylabel("solve rate (held-out verbs tasks)")
    axes.set_ylim(0, 1)
    axes.grid(alpha=0.3)
    axes.set_title(f"Test-time scaling, GRPO tiny model, {len(report['seeds'])} seeds (bars: min-max over seeds)",
                   fontsize=9)
    axes.legend(fontsize=8, loc="lower right")
    figure.tight_layout()
    figure.savefig(path)


# --------------------------------------------------------------------------------------------- driver

def run_seed(seed: int, args, held_out) -> dict:
    import torch

    from codeagent.models.hf import HFModel

    torch.manual_seed(seed)
    root = args.work / "tts" / f"seed-{seed}"
    folder = root / "tasks"
    folder.mkdir(parents=True, exist_ok=True)
    adapter = args.work / f"seed-{seed}" / "grpo" / "adapter"
    policy = HFModel.load(str(adapter), max_new_tokens=48)
    pairs = PairCache(policy)
    started = time.monotonic()

    def path(task) -> Path:
        return folder / f"{task.instance_id}.json"

    def load(task) -> dict:
        return json.loads(path(task).read_text()) if path(task).is_file() else {}

    def save(task, record: dict) -> None:
        temporary = path(task).with_suffix(".tmp")
        temporary.write_text(json.dumps(record))
        os.replace(temporary, path(task))

    def sampled(task) -> None:
        record = load(task)
        if "sample" not in record:
            record["sample"] = sample_task(task, policy, root / "trajectories", args.runs, pairs)
            save(task, record)
            log(f"seed {seed} {task.instance_id}: sampled")

    try:
        with ThreadPoolExecutor(args.concurrency) as pool:
            list(pool.map(sampled, held_out))
        runs = [c for task in held_out for c in load(task)["sample"]["candidates"]]
        unit = sum(c["tokens"] or 0 for c in runs) / len(runs)
        budget = math.floor(args.runs * unit)
        log(f"seed {seed}: one run generates {unit:.1f} tokens on average; evolve and search get {budget}")

        def methods(task) -> None:
            record = load(task)
            for method in ("evolve", "search"):
                if method not in record:
                    record[method] = method_task(task, policy, root / "trajectories", method, budget)
                    save(task, record)
            patches = {c["patch"] for part in ("sample", "evolve", "search") for c in record[part]["candidates"]}
            record["resolved"] = grade_all(task, patches, record.get("resolved", {}))
            save(task, record)
            log(f"seed {seed} {task.instance_id}: evolved, searched, graded")

        with ThreadPoolExecutor(args.concurrency) as pool:
            list(pool.map(methods, held_out))
    finally:
        policy.close()
    records = {task.instance_id: load(task) for task in held_out}
    costs = {"sample runs": 0.0, "judge": 0.0, "tournament (all samples)": 0.0, "evolve": 0.0, "search": 0.0}
    for record in records.values():
        costs["sample runs"] += sum(c["tokens"] or 0 for c in record["sample"]["candidates"])
        costs["judge"] += sum(j["tokens"] for j in record["sample"]["judge"].values())
        costs["tournament (all samples)"] += record["sample"]["tournaments"][-1]["tokens"]
        costs["evolve"] += record["evolve"]["budget"]["spent_tokens"]
        costs["search"] += record["search"]["budget"]["spent_tokens"]
    return {"unit": unit, "budget": budget, "seconds": round(time.monotonic() - started, 1),
            "picks": {task_id: picks(record, unit) for task_id, record in records.items()},
            "costs": {k: v / len(records) for k, v in costs.items()},
            "tournament_judged": sum(t["judged"] for r in records.values() for t in r["sample"]["tournaments"]),
            "tournament_matches": sum(t["matches"] for r in records.values() for t in r["sample"]["tournaments"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True, help="a bench/grpo_learns.py --keep work folder")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--runs", type=int, default=8, help="samples per task; evolve and search get runs x unit")
    parser.add_argument("--tasks", type=int, default=None, help="the first N held-out tasks (default: all)")
    parser.add_argument("--concurrency", type=int, default=2, help="tasks at once")
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results" / "tts_budget.md")
    args = parser.parse_args()
    import logging
    import warnings

    logging.basicConfig(level=logging.ERROR)
    warnings.filterwarnings("ignore")
    import torch

    torch.set_num_threads(1)
    from codeagent.data.toy import verbs_tasks

    held_out = verbs_tasks("held_out")[: args.tasks]
    report: dict = {"command": "python bench/tts_budget.py " + " ".join(sys.argv[1:]),
                    "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                    "host": f"{os.cpu_count()} CPUs, load {' '.join(f'{v:.1f}' for v in os.getloadavg())} at start",
                    "tasks": len(held_out), "temperature": 1.0, "seeds": {}}
    for seed in args.seeds:
        log(f"seed {seed}")
        report["seeds"][seed] = run_seed(seed, args, held_out)
    report["table"] = summarize(report["seeds"])
    per_seed = list(report["seeds"].values())
    report["costs"] = {k: sum(s["costs"][k] for s in per_seed) / len(per_seed) for k in per_seed[0]["costs"]}
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.with_suffix(".json").write_text(json.dumps(report, indent=1))
    args.results.write_text(markdown(report))
    plot(report, args.results.with_suffix(".png"))
    print(markdown(report))


if __name__ == "__main__":
    main()
