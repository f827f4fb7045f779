"""One agent run of a test-time scaling method, charged to the shared budget and recorded with its lineage.

    runner = Runner(task, config, sandbox_factory, build_model, budget, events, method="search")
    runs = runner.run([Plan(index=0), Plan(index=1, prefix=messages, patch=patch, parents=[source])])

A `Plan` says how a run starts: from the issue (sampling, round 0), from the issue with a prompt of its
own (evolution: the best candidates so far and their feedback), or from the first messages of another
run with that run's patch at that point restored in a fresh sandbox (a search branch). Every run is a
trajectory of the method's group, its header saying its method, round and parents (trajectory/schema.py).
A run that fails becomes a candidate with an empty patch and its error: it never sinks the others.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..config import Config
from ..events import Event, EventBus, PatchChanged
from ..sandbox.restore import restore_patch
from ..task import Task
from .budget import Budget, Metered
from .candidates import ModelFactory, SandboxFactory, candidate_config
from .types import Candidate

if TYPE_CHECKING:
    from ..sandbox import Sandbox

ACCOUNT_CHARS = 600  # of the agent's last words, kept for summaries and feedback


@dataclass
class Plan:
    index: int  # the candidate's number in its group
    round: int | None = None
    parents: list[Candidate] = field(default_factory=list)
    prefix: list[dict] | None = None  # a branch: the messages it starts from (parents[0]'s)
    patch: str = ""  # a branch: the patch at that point, restored before the run
    prompt: Callable[[Sandbox], str] | None = None  # the first user message, given the sandbox (evolution)


@dataclass
class Run:
    candidate: Candidate
    patches: dict[int, str] = field(default_factory=dict)  # step index -> the patch after it (steps that changed it)
    start_patch: str = ""


class Runner:
    def __init__(self, task: Task, config: Config, sandbox_factory: SandboxFactory, build_model: ModelFactory,
                 budget: Budget, events: EventBus, *, method: str = "sample", group_id: str | None = None,
                 localization: str = ""):
        self.task, self.config, self.sandbox_factory = task, config, sandbox_factory
        self.build_model, self.budget, self.events = build_model, budget, events
        self.method, self.localization = method, localization
        self.group_id = group_id or f"group-{uuid.uuid4().hex[:12]}"

    def run(self, plans: list[Plan]) -> list[Run]:
        """The plans' runs, at most scaling.max_parallel at once, in the plans' order. Each was already
        let start by the budget (`Budget.allow`): each tells it when it ends."""
        if not plans:
            return []
        with ThreadPoolExecutor(max(1, min(self.config.scaling.max_parallel, len(plans)))) as pool:
            return list(pool.map(self.one, plans))

    def one(self, plan: Plan) -> Run:
        from ..agent.loop import Agent, RunOptions

        own = candidate_config(self.config, plan.index)
        sampling = {"temperature": own.model.temperature, "seed": own.model.seed}
        patches: dict[int, str] = {}
        bus = EventBus(self.events.emit, _patch_recorder(patches))
        model: Metered | None = None
        lineage = {"tts": self.method, "round": plan.round,
                   "parents": [p.trajectory_id for p in plan.parents if p.trajectory_id],
                   "branch_messages": len(plan.prefix) if plan.prefix else None}
        try:
            model = Metered(self.build_model(own.model.name or ""), self.budget)
            with self.sandbox_factory() as sandbox:
                if plan.patch:
                    restore_patch(sandbox, plan.patch)
                prompt = plan.prompt(sandbox) if plan.prompt else None
                result = Agent(model, own, events=bus).run(self.task, sandbox, RunOptions(
                    localization=self.localization, group_id=self.group_id, candidate_index=plan.index,
                    instance_prompt=prompt, prefix=plan.prefix, lineage=lineage))
            candidate = Candidate(instance_id=self.task.instance_id, index=plan.index, patch=result.patch,
                                  trajectory_id=result.trajectory_id, exit_status=result.exit_status, model=model.name,
                                  sampling=sampling, details={"cost": result.cost, "steps": result.steps,
                                                              "account": _account(self.config, result.trajectory_id)})
        except Exception as exc:  # isolated: the others go on
            candidate = Candidate(instance_id=self.task.instance_id, index=plan.index, patch="", exit_status="error",
                                  model=own.model.name, sampling=sampling,
                                  details={"error": f"{type(exc).__name__}: {exc}", "discarded": "the run failed"})
        finally:
            self.budget.done(model.metered_tokens if model is not None else 0)
        candidate.round, candidate.parents = plan.round, [p.index for p in plan.parents]
        candidate.tokens = model.metered_tokens if model is not None else 0
        candidate.details["spent_after"] = self.budget.spent_tokens  # for anytime curves (bench/)
        return Run(candidate, patches, plan.patch)


def _patch_recorder(patches: dict[int, str]) -> Callable[[Event], None]:
    def record(event: Event) -> None:
        if isinstance(event, PatchChanged):
            patches[event.step] = event.patch
    return record


def _account(config: Config, trajectory_id: str) -> str:
    """The agent's last words in its run (what it says it did), for summaries and feedback."""
    from ..trajectory.store import TrajectoryError, TrajectoryStore

    try:
        trajectory = TrajectoryStore(config.trajectory_root()).load(trajectory_id)
    except (TrajectoryError, OSError):
        return ""
    said = [m.get("content") for m in trajectory.messages if m.get("role") == "assistant"]
    last = next((text for text in reversed(said) if isinstance(text, str) and text.strip()), "")
    return last.strip()[:ACCOUNT_CHARS]
