"""The record of one agent run. Bump SCHEMA_VERSION on any incompatible change."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel, Field

SCHEMA_VERSION = 1


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def new_trajectory_id(created: datetime | None = None) -> str:
    """Sortable by creation time, unique without coordination."""
    created = created or utc_now()
    return f"{created:%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:8]}"


class ToolCallStats(BaseModel):
    id: str
    name: str
    exit_code: int | None = None
    timed_out: bool = False
    seconds: float | None = None
    output_chars: int | None = None


class Step(BaseModel):
    index: int = 0
    started: datetime | None = None
    ended: datetime | None = None
    model_seconds: float = 0.0
    tool_seconds: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    finish_reason: str | None = None
    format_error: str | None = None
    token_ids: list[int] | None = None  # completion tokens exactly as generated
    logprobs: list[float] | None = None
    prompt_token_ids: list[int] | None = None
    tool_calls: list[ToolCallStats] = Field(default_factory=list)
    # Where this step's messages (its assistant turn, then observations) sit in messages;
    # filled in when the store folds its records.
    first_message: int = 0
    message_count: int = 0


class Totals(BaseModel):
    steps: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None  # None when no step reported a price
    wall_seconds: float | None = None


# Fields an update record may set; everything else is fixed at creation or folded from steps.
UPDATABLE_FIELDS = ("patch", "exit_status", "exit_message", "wall_seconds", "model", "api_base")
# Verification fields that hold integrity flags: `distrust` is what every grader records from
# harness/grading/integrity.reasons() (whatever that rule flags: test infrastructure touched, masked failures,
# a tampered test run...); the others are a grade report's raw flags, when one is recorded whole.
INTEGRITY_FIELDS = ("distrust", "touches_test_infrastructure", "masked_failures", "integrity_flags")


class Trajectory(BaseModel):
    schema_version: int = SCHEMA_VERSION
    id: str
    created: datetime = Field(default_factory=utc_now)
    # A task as a plain dict: repo, base_commit, problem_statement, instance_id, grading fields.
    task: dict[str, Any] = Field(default_factory=dict)
    config: dict[str, Any] = Field(default_factory=dict)
    model: str = ""
    # The model's server (never its key): a resumed session continues with this model there. An update
    # record changes both when the session switched models (/model). "" for none; None in records written
    # before it was kept (then config.model.api_base says).
    api_base: str | None = None
    sampling: dict[str, Any] = Field(default_factory=dict)
    tools: list[dict[str, Any]] = Field(default_factory=list)  # the tool specs the model was given
    messages: list[dict[str, Any]] = Field(default_factory=list)
    steps: list[Step] = Field(default_factory=list)
    # The diff's bytes as UTF-8 with surrogateescape (codeagent.patches): lone surrogates
    # U+DC80..U+DCFF stand for bytes that are not UTF-8, written \udcXX in JSON. Read with json.loads.
    patch: str | None = None
    exit_status: str | None = None
    exit_message: str | None = None
    verification: dict[str, Any] = Field(default_factory=dict)  # by the harness; "resolved": bool
    rewards: dict[str, Any] = Field(default_factory=dict)
    group_id: str | None = None  # candidates sampled for the same task share it
    candidate_index: int | None = None
    # A subagent's run (agent/subagents.py): the run that started it and the step of that run whose tool
    # call did. Optional fields added without a version bump: older records read as None.
    parent_id: str | None = None
    parent_step: int | None = None
    # A GRPO rollout's: the version of the policy weights that sampled it (optimizer steps taken when they
    # were published to the rollout workers; train/grpo/async_rollouts.py). None for every other run.
    policy_version: int | None = None
    # Test-time scaling beyond side-by-side samples (scaling/evolve.py, scaling/search.py): the method, the
    # run's round (evolution) or expansion (search), and its parents: the runs whose patches and feedback its
    # prompt showed (evolution), or the one run whose first `branch_messages` messages it started from (a
    # search branch). Its verifier scores are in `verification["scores"]`. Optional, added without a version
    # bump (older records read as None / []; older readers ignore them): nothing else changes meaning.
    tts: str | None = None
    round: int | None = None
    parents: list[str] = Field(default_factory=list)
    branch_messages: int | None = None
    totals: Totals = Field(default_factory=Totals)

    @property
    def instance_id(self) -> str | None:
        return self.task.get("instance_id")

    @property
    def task_key(self) -> str:
        """What identifies 'the same task' across trajectories."""
        return str(
            self.instance_id
            or self.task.get("id")
            or (self.task.get("repo"), self.task.get("base_commit"), self.task.get("problem_statement"))
        )

    @property
    def model_api_base(self) -> str | None:
        """The server of the session's model, also for records written before `api_base` was kept."""
        if self.api_base is not None:
            return self.api_base or None
        settings = self.config.get("model") if isinstance(self.config, dict) else None
        value = settings.get("api_base") if isinstance(settings, dict) else None
        return value if isinstance(value, str) and value else None

    @property
    def resolved(self) -> bool | None:
        value = self.verification.get("resolved")
        return value if isinstance(value, bool) else None

    @property
    def integrity_flags(self) -> list[str]:
        """Why the grade of this run cannot be trusted (empty: nothing flagged). A flagged run is no
        positive training example unless the user allows it (`--allow-flagged`, data.allow_flagged)."""
        flags: list[str] = []
        for name in INTEGRITY_FIELDS:
            value = self.verification.get(name)
            if isinstance(value, (list, tuple, dict)):
                flags += [str(item) for item in value if str(item) not in flags]
            elif value:
                flags.append(f"{name}: {value}")
        return flags

    def compute_totals(self, wall_seconds: float | None = None) -> Totals:
        costs = [step.cost for step in self.steps if step.cost is not None]
        ends = [step.ended for step in self.steps if step.ended is not None]
        if wall_seconds is None and ends:
            wall_seconds = (max(ends) - self.created).total_seconds()
        self.totals = Totals(
            steps=len(self.steps),
            prompt_tokens=sum(step.prompt_tokens for step in self.steps),
            completion_tokens=sum(step.completion_tokens for step in self.steps),
            cost=sum(costs) if costs else None,
            wall_seconds=wall_seconds,
        )
        return self.totals

    def step_messages(self, step: Step) -> list[dict[str, Any]]:
        return self.messages[step.first_message : step.first_message + step.message_count]
