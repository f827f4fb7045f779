"""Test-time scaling end to end: a method makes candidates under the budget, the verifiers score them, a
policy chooses.

    method (sample | evolve | search: methods.py; each verifies as it goes) -> [serial retry of failed
    samples] -> scores saved on each trajectory -> select (a policy, or the tournament with a judge)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from ..config import Config
from ..events import CandidateScored, EventBus, SelectionMade
from ..sandbox.restore import restore_patch
from ..task import Task
from ..trajectory.store import TrajectoryError, TrajectoryStore
from .budget import Budget, Metered
from .candidates import ModelFactory, SandboxFactory, default_model_factory
from .types import Candidate, Selection
from .verifying import _has_environment, _test_command, regression_by_command  # noqa: F401 - tests import them here

log = logging.getLogger(__name__)


@dataclass
class ScalingResult:
    candidates: list[Candidate]
    selection: Selection
    budget: dict[str, Any] = field(default_factory=dict)  # Budget.snapshot() at the end
    frontier: Any = None  # methods.Frontier: give it back to `scale` (resume=) to go on with a new budget

    @property
    def chosen(self) -> Candidate | None:
        return next((c for c in self.candidates if c.index == self.selection.chosen), None)


def scale(task: Task, config: Config, sandbox_factory: SandboxFactory, *, events: EventBus | None = None,
          model_factory: ModelFactory | None = None, localization: str = "",
          budget: Budget | None = None, resume: Any = None) -> ScalingResult:
    """Candidates by config.scaling.tts under `budget` (default: from config.scaling; `Budget.stop` from
    another thread ends the method early), verified, one selected by config.scaling.policy. `resume`: an
    earlier result's frontier, which the method goes on from (its candidates are selected among too)."""
    from ..patches.base import git_reader
    from ..sandbox.workspace import snapshot
    from .evolve import evolve
    from .methods import Frontier, Scaling, choosable, sample, values
    from .runs import Runner
    from .search import search
    from .selection import select
    from .verifying import Verifier

    events = events or EventBus()
    budget = budget or Budget.from_settings(config.scaling)
    plain = model_factory or default_model_factory(config)

    def build_model(name: str):  # the verifiers' and judges' calls are charged to the budget too
        return Metered(plain(name), budget)

    runner = Runner(task, config, sandbox_factory, plain, budget, events, method=config.scaling.tts,
                    localization=localization)
    scaling = Scaling(task, config, runner, Verifier(task, config, sandbox_factory, build_model), budget, events)
    frontier = resume or Frontier(config.scaling.tts)
    if frontier.method != config.scaling.tts:
        raise ValueError(f"cannot go on with {config.scaling.tts!r} from where {frontier.method!r} stopped")
    known = len(frontier.pool)
    {"sample": sample, "evolve": evolve, "search": search}[config.scaling.tts](scaling, frontier)
    candidates, new = frontier.pool, frontier.pool[known:]
    scaling.finished(candidates)
    if config.scaling.tts == "sample":
        for _attempt in range(max(0, config.scaling.attempts - 1)):
            if not retry_failed(task, config, new, sandbox_factory, build_model, events):
                break
    worth = values(candidates)
    store = TrajectoryStore(config.trajectory_root())
    for candidate in candidates:
        if candidate.trajectory_id:  # all of them: the votes of the earlier ones moved with the new
            try:
                store.add_verification(candidate.trajectory_id, {"scores": candidate.scores, "value": worth[candidate.index],
                                                                 "verifier_details": candidate.details})
            except (TrajectoryError, OSError) as error:  # the store cannot hold it: the scores still select
                log.warning("the scores of candidate %s are not recorded: %s", candidate.index, error)
        events.emit(CandidateScored(run_id=candidate.trajectory_id or "", index=candidate.index,
                                    exit_status=candidate.exit_status or "", patch=candidate.patch,
                                    scores=candidate.scores, details=_short(candidate.details)))
    snap = snapshot(task.repo, task.base_commit)  # the base files, to normalize patches for votes
    pair_judge = None
    if config.scaling.policy == "tournament" and "judge" in config.scaling.verifiers:
        from .tournament import ModelPairJudge

        pair_judge = ModelPairJudge(build_model(config.scaling.judge_model or config.model.name or ""),
                                    prompts_dir=config.agent.prompts_dir)
    selection = select(choosable(candidates), config.scaling.policy, read=git_reader(snap.git_dir, snap.commit),
                       top_k=config.scaling.top_k, pair_judge=pair_judge, issue=task.problem_statement)
    events.emit(SelectionMade(policy=selection.policy, chosen=selection.chosen, ranking=selection.ranking,
                              votes=selection.votes, why=selection.why))
    return ScalingResult(candidates, selection, budget.snapshot(), frontier)


def verify(task: Task, config: Config, candidates: list[Candidate], sandbox_factory: SandboxFactory,
           build_model: ModelFactory) -> None:
    """Run the configured verifiers; each writes scores[name] and details[name] on the candidates."""
    from .verifying import Verifier

    Verifier(task, config, sandbox_factory, build_model)(candidates)


def retry_failed(task: Task, config: Config, candidates: list[Candidate], sandbox_factory: SandboxFactory,
                 build_model: ModelFactory, events: EventBus) -> bool:
    """Serial scaling: a candidate whose verification failed continues its own trajectory once more
    with the failure as feedback, then is verified again. False when nothing was retried."""
    from ..agent.loop import Agent, RunOptions
    from .candidates import candidate_config

    store = TrajectoryStore(config.trajectory_root())
    retried = []
    for candidate in candidates:
        feedback = _failure_feedback(candidate)
        if not feedback or not candidate.trajectory_id:
            continue
        own = candidate_config(config, candidate.index)
        with sandbox_factory() as sandbox:
            restore_patch(sandbox, candidate.patch)
            result = Agent(build_model(own.model.name or ""), own, events=events).run(
                task, sandbox, RunOptions(resume=store.load(candidate.trajectory_id), follow_up=feedback))
        candidate.patch, candidate.exit_status = result.patch, result.exit_status
        candidate.details["attempts"] = candidate.details.get("attempts", 1) + 1
        candidate.scores.clear()
        retried.append(candidate)
    if retried:
        verify(task, config, retried, sandbox_factory, build_model)
    return bool(retried)


def _failure_feedback(candidate: Candidate) -> str | None:
    problems = []
    if candidate.scores.get("regression", 1.0) < 1.0:
        broken = candidate.details.get("regression", {}).get("broken", [])
        problems.append(f"your change breaks tests that passed before: {', '.join(broken[:10])}")
    if candidate.scores.get("reproduction", 1.0) < 1.0:
        problems.append(f"a test reproducing the issue still fails with your change: "
                        f"{candidate.details.get('reproduction', '')}")
    if not problems:
        return None
    return "Verification of your patch failed: " + "; ".join(problems) + ". Fix it, check it, and submit again."


def _short(details: dict) -> dict:
    return {key: (value if len(str(value)) < 500 else str(value)[:500] + "...") for key, value in details.items()}
