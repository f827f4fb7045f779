"""Periodic evaluation during GRPO on tasks never trained on (`data.held_out`): every
`rollout.eval_every` optimizer steps, `rollout.eval_samples` agent runs per held-out task with the
current policy, graded like training rollouts; pass@1 and pass@k (k = eval_samples) go to
metrics.jsonl as `held_out_eval` records. Runs that failed for infrastructure reasons are left out
of the counts (and counted).

With several training processes the runs are spread over the ranks (rank r takes every r-th of them, each
on its own generation engine) and their results gathered to the main process, which writes the record: the
evaluation takes 1/N of the time instead of N-1 ranks waiting while the main one runs them all."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from math import comb
from typing import Any


def pass_at_k(samples: int, correct: int, k: int) -> float:
    """The unbiased estimator of pass@k from `samples` runs of which `correct` passed (Chen et al. 2021):
    1 - C(n - c, k) / C(n, k); with fewer than k runs, whether any passed."""
    if samples < k:
        return 1.0 if correct else 0.0
    return 1.0 - comb(samples - correct, k) / comb(samples, k)


@dataclass
class Outcome:
    """What the summary needs of one evaluation run (small enough to gather from every rank)."""

    instance_id: str
    infra_failure: str | None
    rewards: dict[str, Any]


def summarize(results: list, samples: int) -> dict[str, Any]:
    by_task: dict[str, list] = {}
    for result in results:
        by_task.setdefault(result.instance_id, []).append(result)
    rows = []
    for runs in by_task.values():
        scored = [run for run in runs if not run.infra_failure]
        passed = sum(1 for run in scored if run.rewards.get("resolved") == 1.0)
        rows.append((len(scored), passed, [float(run.rewards.get("total") or 0.0) for run in scored]))
    graded = [row for row in rows if row[0]]
    totals = [value for row in graded for value in row[2]]
    return {"tasks": len(by_task), "samples": samples,
            "pass@1": sum(pass_at_k(n, c, 1) for n, c, _ in graded) / max(1, len(graded)),
            f"pass@{samples}": sum(pass_at_k(n, c, samples) for n, c, _ in graded) / max(1, len(graded)),
            "reward_mean": sum(totals) / max(1, len(totals)),
            "infra_failures": sum(1 for result in results if result.infra_failure)}


class HeldOutEvaluation:
    """A transformers callback (`.callback`) that runs the evaluation; `trainer` is set once built."""

    def __init__(self, rollouts, tasks: list, *, every: int, samples: int, write):
        from transformers import TrainerCallback

        self.rollouts, self.tasks, self.every, self.samples, self.write = rollouts, tasks, every, samples, write
        self.trainer = None
        self.history: list[dict[str, Any]] = []
        outer = self

        class _Callback(TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):
                if outer.every and state.global_step % outer.every == 0:
                    outer.run(state.global_step)  # every rank: its share of the runs, then the gather

        self.callback = _Callback()

    def run(self, step: int) -> dict[str, Any] | None:
        """This rank's share of the runs; on the main process, the summary of all of them (None elsewhere)."""
        accelerator = getattr(self.trainer, "accelerator", None)
        processes = int(getattr(accelerator, "num_processes", 1) or 1)
        rank = int(getattr(accelerator, "process_index", 0) or 0)
        jobs = [(task, index) for task in self.tasks for index in range(self.samples)][rank::processes]
        workers = max(1, min(self.rollouts.recipe.rollout.workers, len(jobs)))
        results: list = []
        with self.rollouts.generation(self.trainer) as policy:  # every rank: a collective under ZeRO-3
            if jobs:
                with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="held-out") as pool:
                    results = list(pool.map(
                        lambda job: self.rollouts.run_one(job[0], policy,
                                                          f"eval-{self.rollouts.run_id}-s{step}-{job[0].instance_id}",
                                                          job[1]), jobs))
        outcomes = [Outcome(r.instance_id, r.infra_failure, dict(r.rewards)) for r in results]
        if processes > 1:
            from accelerate.utils import gather_object

            outcomes = [Outcome(*fields) for part in gather_object([[(o.instance_id, o.infra_failure, o.rewards)
                                                                     for o in outcomes]]) for fields in part]
            if rank != 0:
                return None
        summary = {"step": step, "processes": processes, **summarize(outcomes, self.samples)}
        self.history.append(summary)
        self.write({"event": "held_out_eval", **summary})
        return summary
