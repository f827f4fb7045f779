"""GRPO objective options that TRL's GRPOTrainer does not offer, as recipe options (train/grpo/trainer.py wires them).

- Leave-one-out baseline (`rewards.baseline: leave_one_out`, RLOO; DeepSWE uses it): each sample's reward
  minus the mean of the OTHER scored members of its group, instead of the group mean. With n scored members
  that is exactly n/(n-1) times TRL's (reward - group mean), so TRL's advantages are rescaled per group
  (after its std scaling, when `trainer.scale_rewards` asks for it). A group with one scored member has no
  baseline: advantage 0. Infrastructure failures (reward None) are not members. Under Adam a constant
  rescaling hardly moves the update; what changes is the weight of groups with infrastructure failures
  (fewer scored members) against whole ones, and the balance against the KL term and gradient clipping.
- DAPO dynamic sampling that refills the batch (`rollout.dynamic_sampling: N`): a group whose rewards are all
  equal carries no signal; it is replaced by a group of another task, newly sampled, for up to N extra
  generation rounds per step. Each step's refills go to metrics.jsonl (event `dynamic_sampling`); every
  generation round also writes its own `rollouts` record.

GSPO (`trainer.importance_sampling_level: sequence`) and CISPO (`trainer.loss_type: cispo`) are TRL's own
and pass through `trainer:` as they are.
"""

from __future__ import annotations

import random
from typing import Any


def leave_one_out_factors(scored: list[bool], group_size: int) -> list[float]:
    """Per sample, n/(n-1) for a scored member of a group with n >= 2 scored members (consecutive runs of
    `group_size` samples, TRL's order), else 0: the factor that turns (reward - group mean) into
    (reward - mean of the others)."""
    if group_size < 1 or len(scored) % group_size:
        raise ValueError(f"{len(scored)} samples do not make groups of {group_size}")
    factors = []
    for start in range(0, len(scored), group_size):
        group = scored[start:start + group_size]
        n = sum(group)
        factors += [n / (n - 1) if flag and n >= 2 else 0.0 for flag in group]
    return factors


def leave_one_out_class(base: Any) -> Any:
    """`base` (GRPOTrainer or a subclass) with the leave-one-out baseline."""
    import torch

    class LeaveOneOutTrainer(base):
        def _generate_and_score_completions(self, inputs):
            output = super()._generate_and_score_completions(inputs)
            fields = [f"reward_{name}" for name in self.reward_func_names]
            scored = [any(row.get(field) is not None for field in fields) for row in inputs]
            everyone, start = scored, 0
            if self.accelerator.num_processes > 1:  # a group may be split over ranks: judge it whole
                from accelerate.utils import gather_object

                parts = gather_object([scored])
                everyone = [flag for part in parts for flag in part]
                start = sum(len(part) for part in parts[: self.accelerator.process_index])
            factors = leave_one_out_factors(everyone, self.num_generations)[start:start + len(scored)]
            advantages = output["advantages"]
            scale = torch.tensor(factors, dtype=advantages.dtype, device=advantages.device)
            output["advantages"] = advantages * (scale if advantages.dim() == 1 else scale.unsqueeze(1))
            return output

    return LeaveOneOutTrainer


def uniform_groups(totals: list[float | None], group_size: int) -> list[int]:
    """Indices of the groups (consecutive runs of `group_size`) whose scored totals are all equal; None is an
    infrastructure failure, not a member. A group with nothing scored is not refilled (nothing was learnt
    about it)."""
    chosen = []
    for index, start in enumerate(range(0, len(totals), group_size)):
        scored = {round(float(value), 9) for value in totals[start:start + group_size] if value is not None}
        if len(scored) == 1:
            chosen.append(index)
    return chosen


class DynamicSampling:
    """TRL's rollout_func: `rollouts` (rollouts.Rollouts), refilling uniform groups (see the module docstring).
    Replacement tasks come from a seeded shuffle of the tasks, skipping those in the step's batch."""

    def __init__(self, rollouts, tasks: list, *, rounds: int, group_size: int, seed: int = 0):
        from .rewards import active

        self.rollouts, self.rounds, self.group_size = rollouts, rounds, group_size
        self.weights = dict(active(rollouts.recipe.rewards))
        self.order = [task.instance_id for task in tasks]
        random.Random(seed).shuffle(self.order)
        self.position = 0
        self.on_record = None  # called with each step's record (metrics.jsonl)
        self.history: list[dict[str, Any]] = []

    def __call__(self, prompts: list, trainer) -> dict[str, list]:
        out = self.rollouts(prompts, trainer)
        record: dict[str, Any] = {"event": "dynamic_sampling", "step": getattr(getattr(trainer, "state", None), "global_step", None),
                  "groups": len(prompts) // self.group_size, "uniform_groups": 0, "rounds": 0,
                  "replaced_groups": 0, "extra_rollouts": 0}
        taken = {str(prompt) for prompt in prompts}
        for round_ in range(self.rounds + 1):
            uniform = uniform_groups(self.totals(out), self.group_size)
            if round_ == 0:
                record["uniform_groups"] = len(uniform)
            if not uniform or round_ == self.rounds:
                break
            replacements = [self.next_task(taken) for _ in uniform]
            fresh = self.rollouts([task for task in replacements for _ in range(self.group_size)], trainer)
            for slot, group in enumerate(uniform):
                rows = range(group * self.group_size, (group + 1) * self.group_size)
                for key, values in out.items():
                    for offset, row in enumerate(rows):
                        values[row] = fresh[key][slot * self.group_size + offset]
            record["rounds"] += 1
            record["replaced_groups"] += len(uniform)
            record["extra_rollouts"] += len(uniform) * self.group_size
        record["uniform_groups_left"] = len(uniform_groups(self.totals(out), self.group_size))
        self.history.append(record)
        if self.on_record is not None:
            self.on_record(record)
        return out

    def totals(self, out: dict[str, list]) -> list[float | None]:
        """Each row's weighted total reward, None for an infrastructure failure (every component None)."""
        weights = self.weights
        rows = len(out["completion_ids"])
        totals: list[float | None] = []
        for row in range(rows):
            values = {name: out[f"reward_{name}"][row] for name in weights}
            if all(value is None for value in values.values()):
                totals.append(None)
            else:
                totals.append(sum(weight * (values[name] or 0.0) for name, weight in weights.items()))
        return totals

    def next_task(self, taken: set[str]) -> str:
        """The next task of the shuffled order not yet in this step's batch (any, once all are)."""
        for _ in range(len(self.order)):
            task = self.order[self.position % len(self.order)]
            self.position += 1
            if task not in taken:
                taken.add(task)
                return task
        task = self.order[self.position % len(self.order)]
        self.position += 1
        return task
