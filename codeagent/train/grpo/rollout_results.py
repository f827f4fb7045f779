"""What GRPO rollouts give back: one `Rollout` per agent run, and for TRL the batch of them
(`RolloutBatch`): token sequences and rewards (`to_trl`), the groups and those without signal
(`uniform_group_members`), and a summary per generation batch."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..sequences import TokenSequence


@dataclass
class Rollout:
    instance_id: str
    trajectory_id: str | None = None
    exit_status: str = "not_run"
    rewards: dict[str, Any] = field(default_factory=dict)
    sequence: TokenSequence | None = None
    masked: str | None = None  # why the run is left out of the loss
    grade: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    infra_failure: str | None = None  # not the policy's doing: reward None, left out
    policy_version: int | None = None  # the policy weights that sampled it (async GRPO: async_rollouts.py)


# Exit statuses and grading outcomes that say the machinery failed, not the policy.
INFRA_EXIT_STATUSES = ("sandbox_error",)
INFRA_OUTCOMES = ("harness_error",)


def infrastructure_failure(exit_status: str | None, outcome: str | None, grade: dict[str, Any] | None = None) -> str | None:
    """Why a finished rollout cannot be scored (None when it can). A log in none of its parser's formats
    (`log_format_unknown`) is scored, as a failure: the policy can cause it (a patch that deletes go.mod
    stops the tests from running), and left out it would be a way to dodge a failing reward. A task whose
    environment never prints a readable log then gives a uniform group: no signal, no harm."""
    if exit_status in INFRA_EXIT_STATUSES:
        return f"infrastructure failure: exit status {exit_status}"
    if outcome in INFRA_OUTCOMES and not (grade or {}).get("log_format_unknown"):
        return f"infrastructure failure: grading outcome {outcome}"
    return None


class RolloutBatch:
    """The output half of `Rollouts` (rollouts.py): needs `recipe`, `tokenizer` and `components`."""

    recipe: Any
    tokenizer: Any
    components: list[str]

    def to_trl(self, rollouts: list[Rollout], uniform: set[int] | None = None) -> dict[str, list]:
        """`uniform`: the members of uniform groups (uniform_group_members), worked out here if not given."""
        filler = self.tokenizer.eos_token_id
        if uniform is None:
            uniform = set(self.uniform_group_members(rollouts))
        dropped = uniform if self.recipe.rollout.drop_uniform_groups else set()
        out: dict[str, list] = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": [],
                                "trajectory_id": [], **{f"reward_{name}": [] for name in self.components}}
        for index, rollout in enumerate(rollouts):
            sequence = rollout.sequence or TokenSequence([filler], [filler], [0], [0.0])
            mask = [0] * len(sequence.mask) if rollout.masked or index in dropped else list(sequence.mask)
            out["prompt_ids"].append(list(sequence.prompt_ids))
            out["completion_ids"].append(list(sequence.completion_ids))
            out["logprobs"].append(list(sequence.logprobs))
            out["env_mask"].append(mask)
            out["trajectory_id"].append(rollout.trajectory_id or "")
            for name in self.components:
                value = None if rollout.infra_failure else rollout.rewards.get(name, 0.0)
                out[f"reward_{name}"].append(None if value is None else float(value))
        return out

    def groups(self, rollouts: list) -> list[list[int]]:
        """Indices of each GRPO group: TRL hands prompts repeated num_generations times in a row (items
        with an `instance_id`: rollouts, or the entries of uniform_group_members)."""
        size = int(self.recipe.trainer.get("num_generations", 8))
        if size < 1 or len(rollouts) % size:
            by_task: dict[str, list[int]] = {}
            for index, rollout in enumerate(rollouts):
                by_task.setdefault(rollout.instance_id, []).append(index)
            return list(by_task.values())
        return [list(range(start, start + size)) for start in range(0, len(rollouts), size)]

    def uniform_group_members(self, rollouts: list[Rollout], trainer=None) -> list[int]:
        """Members (indices into `rollouts`) of groups whose scored totals are all equal (no signal);
        infra failures aside. With several processes a group may be split over ranks (TRL hands each
        rank a slice of the global batch): every rank's rewards are gathered first and each group is
        judged whole (a collective: every rank calls it once per rollout batch)."""
        entries = [_Scored(r.instance_id, None if r.infra_failure else r.rewards.get("total")) for r in rollouts]
        entries, offset = _all_ranks(entries, getattr(trainer, "accelerator", None))
        members = []
        for group in self.groups(entries):
            scored = [total for i in group if (total := entries[i].total) is not None]
            if scored and len({round(float(value), 9) for value in scored}) == 1:
                members += [i - offset for i in group if 0 <= i - offset < len(rollouts)]
        return members

    def summarize(self, rollouts: list[Rollout], step: int, seconds: float,
                  uniform: set[int] | None = None) -> dict[str, Any]:
        scored = [r for r in rollouts if not r.infra_failure]
        totals = [float(r.rewards.get("total") or 0.0) for r in scored]
        groups = self.groups(rollouts)
        if uniform is None:
            uniform = set(self.uniform_group_members(rollouts))
        summary = {
            "step": step, "rollouts": len(rollouts), "seconds": round(seconds, 2),
            "reward_mean": sum(totals) / max(1, len(totals)),
            "rewards": [None if r.infra_failure else r.rewards.get("total") for r in rollouts],
            "resolved_rate": sum(float(r.rewards.get("resolved") or 0.0) for r in scored) / max(1, len(scored)),
            "masked": sum(1 for r in rollouts if r.masked),
            "infra_failures": len(rollouts) - len(scored),
            # graded runs whose test log the harness's judge did not believe (harness/grading/judge/): reward 0
            "tampered": sum(1 for r in scored if r.grade.get("tamper_evidence")),
            "groups": len(groups),
            "uniform_groups": sum(1 for group in groups if group and group[0] in uniform),
            "uniform_groups_dropped": self.recipe.rollout.drop_uniform_groups,
            "mask_reasons": sorted({r.masked for r in rollouts if r.masked}),
            "exit_statuses": {s: sum(1 for r in rollouts if r.exit_status == s) for s in {r.exit_status for r in rollouts}},
            "per_task": {},
            "trajectory_ids": [r.trajectory_id for r in rollouts],
        }
        for rollout in rollouts:
            entry = summary["per_task"].setdefault(rollout.instance_id, [])
            entry.append(None if rollout.infra_failure else float(rollout.rewards.get("total") or 0.0))
        return summary


@dataclass
class _Scored:
    instance_id: str
    total: float | None  # None: an infrastructure failure


def _all_ranks(entries: list[_Scored], accelerator) -> tuple[list[_Scored], int]:
    """Every rank's entries in TRL's global order (rank 0's slice first), and where this rank's begin."""
    processes = int(getattr(accelerator, "num_processes", 1) or 1) if accelerator is not None else 1
    if processes <= 1:
        return entries, 0
    from accelerate.utils import gather_object

    parts = gather_object([[(e.instance_id, e.total) for e in entries]])  # one list per rank
    offset = sum(len(part) for part in parts[: int(accelerator.process_index)])
    return [_Scored(name, total) for part in parts for name, total in part], offset
