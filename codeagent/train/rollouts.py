"""GRPO rollouts: real agent runs in sandboxes, with the policy being trained, token-exact.

TRL calls `Rollouts.__call__(prompts, trainer)` with each task's prompt repeated num_generations
times. Each element becomes one agent run (the same loop as `codeagent solve`) in its own sandbox,
with the trainer's current model generating through the local backend (or TRL's vLLM engine on GPU);
the run is written to the trajectory store, graded by the harness, rewarded, and turned into one
training sequence from the *recorded* token ids: the first prompt, then every completion as sampled,
with the observation tokens in between masked out (env_mask = 0).

Compact filtering: a run that hit a limit (steps, time, cost, unusable replies in a row) or broke,
a reply cut at max_tokens, or a sequence longer than max_completion_length keeps its reward (the
group baseline stays honest) but is masked out of the loss entirely (`rollout.mask_exit_statuses`,
`rollout.mask_truncated`). Masking the unusable-reply limit matters on small models: a garbled run
with a large negative advantage otherwise pushes down, through shared weights, the very tokens of
the tool-call format (measured on the toy benchmark: one such update wiped the format out).

Infrastructure failures (the rollout crashed, the sandbox broke, the harness could not grade) are not
the policy's doing: their rewards are None (TRL leaves them out of the group baseline and the loss),
they are masked, and counted per step (`infra_failures`). A group whose scored rewards are all equal
carries no signal (its advantages are 0): counted (`uniform_groups`), and with
`rollout.drop_uniform_groups` masked out so it does not dilute the loss's token normalization.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codeagent.models.batching import BatchingFront
from codeagent.models.errors import ContextWindowExceeded

from . import TrainError
from .recipe import Recipe
from .sequences import NotTokenExact, TokenSequence, chain_steps

log = logging.getLogger(__name__)


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


# Exit statuses and grading outcomes that say the machinery failed, not the policy.
INFRA_EXIT_STATUSES = ("sandbox_error",)
INFRA_OUTCOMES = ("harness_error",)


def infrastructure_failure(exit_status: str | None, outcome: str | None) -> str | None:
    """Why a finished rollout cannot be scored (None when it can)."""
    if exit_status in INFRA_EXIT_STATUSES:
        return f"infrastructure failure: exit status {exit_status}"
    if outcome in INFRA_OUTCOMES:
        return f"infrastructure failure: grading outcome {outcome}"
    return None


# -- sandboxes and grading ---------------------------------------------------------------------------

def _harness_spec(task):
    from codeagent.harness.specs import spec_for

    return spec_for(task)


@contextmanager
def open_task_sandbox(task, config, environment: str, executor: str = "local", ray_address: str | None = None):
    """The sandbox a rollout runs in: the task's harness environment (its instance image and
    declared services), or the base image. `executor: ray`: that sandbox, on a Ray worker node."""
    from codeagent.sandbox import Limits, open_sandbox

    if executor == "ray":
        from functools import partial

        from codeagent.evals.ray_sandbox import RaySandbox

        with RaySandbox(partial(open_task_sandbox, task, config, environment), address=ray_address) as box:
            yield box
        return
    if config.sandbox.kind == "local":
        with open_sandbox(task.repo, task.base_commit, kind="local") as box:
            yield box
        return
    limits = Limits.from_settings(config.sandbox)
    from codeagent.harness.prebuilt import agent_sandbox, is_prebuilt

    if is_prebuilt(task):  # SWE-Gym/SWE-smith/R2E-Gym tasks, official images: the task's pulled image
        with agent_sandbox(task, limits, config.images.registry) as box:
            yield box
        return
    if environment == "harness":
        from codeagent.harness.environment import task_images
        from codeagent.harness.task_env import TaskEnvironment

        spec = _harness_spec(task)
        with TaskEnvironment(task, task_images(task, spec).instance, services=spec.services, limits=limits) as env:
            yield env.box
        return
    with open_sandbox(task.repo, task.base_commit, kind="docker", limits=limits, image=config.sandbox.image) as box:
        yield box


def warm_sandbox_factory(task, config, environment: str):
    """A function that starts the sandbox open_task_sandbox would open, for a warm pool (sandbox/pool.py);
    None where that sandbox is more than one container: a harness environment with declared services
    holds a service network for as long as its sandbox lives, which a pool that hands sandboxes out
    and forgets them cannot hold. (Ray rollouts are not pooled either: their sandbox is on a worker node.)"""
    from functools import partial

    from codeagent.sandbox import Limits, open_sandbox, snapshot

    if config.sandbox.kind != "docker":
        return None
    limits = Limits.from_settings(config.sandbox)
    from codeagent.harness.prebuilt import agent_sandbox, is_prebuilt

    if is_prebuilt(task):
        return partial(agent_sandbox, task, limits, config.images.registry)
    snap = snapshot(task.repo, task.base_commit)  # once for the task: every sandbox starts from it
    if environment != "harness":
        return partial(open_sandbox, snap, kind="docker", limits=limits, image=config.sandbox.image)
    from codeagent.harness.environment import task_images
    from codeagent.harness.task_env import TaskEnvironment

    spec = _harness_spec(task)
    if spec.services:
        return None
    image = task_images(task, spec).instance

    def start():
        box = open_sandbox(snap, kind="docker", prepared_image=image, limits=limits)
        try:
            TaskEnvironment(task, box=box).open()  # what the environment does to its own sandbox
        except BaseException:
            box.close()
            raise
        return box

    return start


def grade_in_sandbox(box, task, *, harness_spec=None, patch: str | None = None) -> dict[str, Any]:
    """The harness's grading (the run's patch applied, the hidden tests reset and applied, run, the log
    parsed and graded, the test infrastructure the patch touches flagged: harness/integrity.py) in `box`:
    a FRESH sandbox of the rollout's environment, never the one the run worked in. Nothing the model
    left behind there reaches the tests: shell functions, aliases, exported variables, its working
    directory, processes it left running, files it wrote outside the repository (a wrapper on PATH, a
    sitecustomize.py); only its patch comes across, as text."""
    from codeagent.harness.grading import Outcome, not_run
    from codeagent.harness.task_env import TaskEnvironment, apply_for_grading

    f2p, p2p = task.FAIL_TO_PASS, task.PASS_TO_PASS
    if harness_spec is not None:
        from codeagent.harness.directives import test_command

        command, parser, timeout = test_command(task, harness_spec), harness_spec.log_parser, harness_spec.test_timeout
    else:
        if not task.test_command:
            raise TrainError(f"task {task.instance_id} has no test_command to grade with in the sandbox")
        command, parser, timeout = task.test_command, task.extra.get("log_parser", "pytest"), 300
    env = TaskEnvironment(task, box=box, services=harness_spec.services if harness_spec is not None else ())
    report: dict[str, Any] = {}
    try:
        env.open()
        graded = apply_for_grading(env, task, patch or "", report)
        if graded is None:
            graded = env.grade(env.run_tests(command, timeout), parser)
    except Exception as error:  # a broken sandbox is a harness error for this rollout, not a crash
        graded = not_run(Outcome.HARNESS_ERROR, f2p, p2p, reason=f"{type(error).__name__}: {error}")
    return {**report, **_report(graded)}


def _report(graded) -> dict[str, Any]:
    data = graded.model_dump(mode="json")
    data["outcome"] = graded.outcome.value
    return data


# -- the rollout function ----------------------------------------------------------------------------

class Rollouts:
    """TRL's rollout_func for codeagent: see the module docstring."""

    def __init__(self, recipe: Recipe, tasks: list, tokenizer, config, store, *, run_id: str | None = None):
        from codeagent.harness import prebuilt

        from . import rewards

        self.recipe = recipe
        # tasks in prebuilt images are pulled through the configured mirror (config images.registry)
        tasks = prebuilt.mark(list(tasks), registry=config.images.registry if config is not None else None)
        self.tasks = {task.instance_id: task for task in tasks}
        self.tokenizer = tokenizer
        self.config = config
        self.store = store
        self.run_id = run_id or uuid.uuid4().hex[:8]
        self.components = [name for name, _ in rewards.active(recipe.rewards)]
        self.max_length = int(recipe.trainer.get("max_completion_length", 512))
        self.history: list[dict[str, Any]] = []  # one summary per call (per generation batch)
        self.on_summary = None  # called with each summary (e.g. to write metrics)
        self.on_eval = None  # called with each held-out evaluation record
        self.evaluation: Any = None  # the HeldOutEvaluation, when the recipe asks for one
        self._calls = 0
        self._prepared: set[str] = set()
        self._prepare_lock = threading.Lock()

    # TRL calls this
    def __call__(self, prompts: list, trainer) -> dict[str, list]:
        started = time.monotonic()
        step = getattr(getattr(trainer, "state", None), "global_step", self._calls)
        self._calls += 1
        jobs = []
        for index, prompt in enumerate(prompts):
            task = self._task_for(prompt)
            jobs.append((task, f"grpo-{self.run_id}-s{step}-{task.instance_id}", index))
        self._prepare_environments([task for task, _, _ in jobs])
        workers = max(1, min(self.recipe.rollout.workers, len(jobs)))
        pools = self._warm_pools([task for task, _, _ in jobs], workers)
        try:
            with self.generation(trainer) as policy:  # its engine batches the turns of all the runs below
                with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rollout") as pool:
                    results = list(pool.map(
                        lambda job: self.run_one(job[0], policy, job[1], job[2], pools.get(job[0].instance_id)), jobs))
        finally:
            for warm in pools.values():  # removes the sandboxes nobody took
                warm.close()
        uniform = set(self.uniform_group_members(results, trainer))  # every rank: a collective with several
        summary = self.summarize(results, step, time.monotonic() - started, uniform=uniform)
        self.history.append(summary)
        if self.on_summary is not None:
            self.on_summary(summary)
        log.info("rollouts at step %s: mean reward %.3f, resolved %.2f, masked %d/%d, infrastructure failures %d, "
                 "uniform groups %d/%d, %.1fs", step, summary["reward_mean"], summary["resolved_rate"], summary["masked"],
                 len(results), summary["infra_failures"], summary["uniform_groups"], summary["groups"], summary["seconds"])
        return self.to_trl(results, uniform=uniform)

    @contextmanager
    def generation(self, trainer):
        """The policy for this process's rollouts (`policy`), with the trainer's weights whole for as long as
        they run (`generation_weights`); its engine is closed at the end."""
        sync_vllm_weights(trainer)
        with generation_weights(trainer) as model:
            policy = self.policy(trainer, model)
            try:
                yield policy
            finally:
                policy.close()

    def policy(self, trainer, model=None):
        """The model being trained, behind the Model protocol (generation in eval mode, no grad), on the
        batched engine: transformers (models/batching.py) or TRL's vLLM (VLLMGenerator). `model`: the
        trainer's model already unwrapped and gathered (see `generation`)."""
        from codeagent.models.hf import HFModel

        if model is None:
            model = trainer.accelerator.unwrap_model(trainer.model) if hasattr(trainer, "accelerator") else trainer.model
        generator = None
        if getattr(trainer, "use_vllm", False):
            generator = VLLMGenerator(trainer)
        # vLLM's context: a prompt over it is told to the agent (which elides and asks again) before any call
        return HFModel(model, self.tokenizer, name=f"policy:{self.recipe.model.base}",
                       generator=generator, context_tokens=getattr(generator, "max_model_len", None),
                       max_new_tokens=self.recipe.rollout.max_tokens)

    def _task_for(self, prompt):
        key = prompt if isinstance(prompt, str) else str(prompt)
        task = self.tasks.get(key)
        if task is None:
            raise TrainError(f"the rollout prompt {key[:80]!r} names no known task")
        return task

    def _prepare_environments(self, tasks: list) -> None:
        """Build each task's harness images once, before rollouts run in parallel."""
        if self.recipe.rollout.environment != "harness" and self.recipe.rollout.grader != "harness":
            return
        from codeagent.harness.environment import task_images
        from codeagent.harness.prebuilt import is_prebuilt, prepare

        with self._prepare_lock:
            for task in tasks:
                if task.instance_id not in self._prepared:
                    if is_prebuilt(task):
                        prepare(task)
                    else:
                        task_images(task, _harness_spec(task))
                    self._prepared.add(task.instance_id)

    def _warm_pools(self, tasks: list, workers: int) -> dict[str, Any]:
        """Per task, a warm pool of its sandboxes (at most one per rollout of it), `rollout.warm_sandboxes`
        started ahead in all. Only for the local executor and tasks without services (see
        warm_sandbox_factory); the others open their sandbox in run_one, as they always did."""
        from codeagent.sandbox.pool import WarmPool

        settings = self.recipe.rollout
        warm = workers if settings.warm_sandboxes is None else settings.warm_sandboxes
        counts: dict[str, int] = {}
        for task in tasks:
            counts[task.instance_id] = counts.get(task.instance_id, 0) + 1
        if warm <= 0 or settings.executor != "local":
            return {}
        ready = -(-warm // len(counts))  # shared among the step's tasks, at least one each
        pools: dict[str, Any] = {}
        try:
            for instance_id, count in counts.items():
                task = self.tasks[instance_id]
                try:
                    factory = warm_sandbox_factory(task, self.config, settings.environment)
                except Exception as error:  # run_one opens it the usual way, and says what is wrong
                    log.warning("no warm sandboxes for %s: %s: %s", instance_id, type(error).__name__, error)
                    continue
                if factory is not None:  # the sandbox grader takes a second, fresh sandbox per rollout
                    taken = count * (2 if self._grader(task) == "sandbox" else 1)
                    pools[instance_id] = WarmPool(factory, ready=min(ready, taken), limit=taken)
        except BaseException:
            for pool in pools.values():
                pool.close()
            raise
        return pools

    def _grader(self, task) -> str:
        """A prebuilt task's hidden tests are not in its agent's image: it is graded in its grading image."""
        return "harness" if task.extra.get("images") else self.recipe.rollout.grader

    def _sandbox(self, task, pool):
        if pool is not None:
            return pool()  # a started sandbox; closing it (the with below) removes it
        return open_task_sandbox(task, self.config, self.recipe.rollout.environment, self.recipe.rollout.executor,
                                 self.recipe.rollout.ray_address)

    def run_one(self, task, policy, group_id: str, index: int, pool=None) -> Rollout:
        from codeagent.agent.loop import Agent
        from codeagent.harness import integrity

        from . import rewards

        started = time.monotonic()
        rollout = Rollout(task.instance_id)
        grader = self._grader(task)
        hidden = task.model_copy(update={"test_patch": None, "gold_patch": None})  # the agent never sees them
        agent = Agent(policy, self.config, store=self.store)
        try:
            with self._sandbox(task, pool) as box:
                result = agent.run(hidden, box, group_id=group_id, candidate_index=index)
                rollout.trajectory_id, rollout.exit_status = result.trajectory_id, result.exit_status
            if grader == "sandbox":  # a fresh sandbox of the same environment: only the patch comes across
                spec = _harness_spec(task) if self.recipe.rollout.environment == "harness" else None
                with self._sandbox(task, pool) as fresh:
                    rollout.grade = grade_in_sandbox(fresh, task, harness_spec=spec, patch=result.patch)
            if grader == "harness":
                folder = Path(self.recipe.output_dir) / "grading" / (rollout.trajectory_id or f"{group_id}-{index}")
                rollout.grade = self._grade(task, result.patch, folder)
        except Exception as error:  # a rollout that breaks is left out (reward None), not a dead training run
            log.warning("rollout of %s failed: %s: %s", task.instance_id, type(error).__name__, error)
            return self._infra_failure(rollout, f"rollout failed: {type(error).__name__}: {error}", started)
        trajectory = self.store.load(rollout.trajectory_id)
        _release_conversation(policy, trajectory.steps)
        outcome = rollout.grade.get("outcome")
        failure = infrastructure_failure(trajectory.exit_status, outcome)
        if failure:
            self.store.add_verification(rollout.trajectory_id, {"outcome": outcome, "grader": self.recipe.rollout.grader,
                                                                "infrastructure_failure": failure})
            return self._infra_failure(rollout, failure, started)
        resolved = outcome == "resolved"
        distrust = integrity.reasons(rollout.grade)
        rollout.rewards = rewards.compute(trajectory, resolved=resolved, gold_patch=task.gold_patch,
                                          weights=self.recipe.rewards, distrust=distrust)
        self.store.add_verification(rollout.trajectory_id, {"resolved": resolved, "outcome": outcome,
                                                            "grader": self.recipe.rollout.grader,
                                                            "distrust": distrust})
        self.store.add_rewards(rollout.trajectory_id, rollout.rewards)
        rollout.sequence, rollout.masked = self._sequence(trajectory)
        rollout.seconds = time.monotonic() - started
        return rollout

    def _infra_failure(self, rollout: Rollout, why: str, started: float) -> Rollout:
        rollout.masked = why
        rollout.infra_failure = why
        rollout.rewards = {name: None for name in (*self.components, "total")}
        rollout.seconds = time.monotonic() - started
        return rollout

    def _grade(self, task, patch: str, folder: Path) -> dict[str, Any]:
        """The harness grade, here or (executor: ray) as a Ray task whose files come back to `folder`."""
        from codeagent.evals.batch import grade_shipped, grade_task

        if self.recipe.rollout.executor != "ray":
            return grade_task(task, patch, folder)
        from codeagent.evals.ray_executor import RayExecutor
        from codeagent.evals.runner import write_shipped_files

        executor = RayExecutor(self.recipe.rollout.ray_address)
        [(_, shipped, error)] = list(executor.map_unordered(grade_shipped, [(task.model_dump(), patch)]))
        if error is not None:
            raise error
        write_shipped_files(folder, shipped["files"])
        return {**shipped["report"], "executor": shipped.get("executor")}

    def _sequence(self, trajectory) -> tuple[TokenSequence | None, str | None]:
        """The training sequence from the recorded ids, and why it is masked (compact filtering), if it is."""
        try:
            sequence = chain_steps(trajectory.steps)
        except NotTokenExact as error:
            return None, f"not token-exact: {error}"
        settings = self.recipe.rollout
        masked = None
        if trajectory.exit_status in settings.mask_exit_statuses:
            masked = f"exit status {trajectory.exit_status}"
        elif settings.mask_truncated and sequence.truncated_steps:
            masked = f"{sequence.truncated_steps} reply(ies) cut at max_tokens"
        if len(sequence.completion_ids) > self.max_length:
            cut = self.max_length
            sequence.completion_ids, sequence.mask = sequence.completion_ids[:cut], sequence.mask[:cut]
            sequence.logprobs = sequence.logprobs[:cut]
            if settings.mask_truncated or masked is None:
                masked = masked or f"longer than max_completion_length={self.max_length}"
        return sequence, masked

    # -- output --------------------------------------------------------------------------------------

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
        summary: dict[str, Any] = {
            "step": step, "rollouts": len(rollouts), "seconds": round(seconds, 2),
            "reward_mean": sum(totals) / max(1, len(totals)),
            "rewards": [None if r.infra_failure else r.rewards.get("total") for r in rollouts],
            "resolved_rate": sum(float(r.rewards.get("resolved") or 0.0) for r in scored) / max(1, len(scored)),
            "masked": sum(1 for r in rollouts if r.masked),
            "infra_failures": len(rollouts) - len(scored),
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


def sync_vllm_weights(trainer) -> None:
    """vLLM generates with the weights of the current step: TRL syncs them before it calls the rollout
    function at a new step, but the held-out evaluation runs after the optimizer step, outside it; this
    does the same sync, under the same condition (TRL's `_last_loaded_step`), so it is never done twice.
    Every rank comes here (the sync gathers weights collectively under ZeRO-3)."""
    if not getattr(trainer, "use_vllm", False):
        return
    step = getattr(getattr(trainer, "state", None), "global_step", None)
    if step is None or getattr(trainer, "_last_loaded_step", None) == step:
        return
    trainer.vllm_generation.sync_weights()
    trainer._last_loaded_step = step


@contextmanager
def generation_weights(trainer):
    """The trainer's model, unwrapped, with all its weights on this process while the rollouts generate.

    Under DeepSpeed ZeRO-3 every rank holds a shard of each weight and a forward pass all-gathers each
    layer's weights from every rank: a collective that all ranks must enter in step, while agent runs on
    different ranks take different numbers of turns of different lengths: it would hang. So the weights
    are gathered once for the whole generation batch (TRL's `unwrap_model_for_generation` with
    `gather_deepspeed3_params`, as its own GRPO generation does: DeepSpeed's GatheredParameters, with the
    ZeRO-3 forward hooks removed), after which every forward is local to the rank. The gather is the one
    collective here, entered once per rollout call by every rank. Refused, with the knob named: ZeRO-3
    with `ds3_gather_for_generation: false` and FSDP, with more than one process (their forward passes
    stay collective). vLLM generation needs none of this (its engine has its own copy of the weights,
    synced by TRL). Gradient checkpointing is switched off while generating (TRL's helper does it).
    Only the single-process path runs here (no GPU, no deepspeed package): the ZeRO-3 path is tested
    against a stand-in accelerator state and a stand-in deepspeed module, never on GPUs."""
    if not hasattr(trainer, "accelerator") or getattr(trainer, "use_vllm", False):
        yield None
        return
    from trl.distributed import DistributedBackend
    from trl.models import unwrap_model_for_generation

    accelerator = trainer.accelerator
    backend = DistributedBackend(accelerator)
    args = getattr(trainer, "args", None)
    gather = bool(getattr(args, "ds3_gather_for_generation", True))
    processes = int(getattr(accelerator, "num_processes", 1) or 1)
    if processes > 1 and backend.is_zero3 and not gather:
        raise TrainError("ZeRO-3 with ds3_gather_for_generation: false cannot run agent rollouts on several "
                         "processes: every forward pass would gather weights collectively while ranks run different "
                         "numbers of turns (a hang). Set trainer.ds3_gather_for_generation: true, or use vLLM")
    if processes > 1 and backend.is_fsdp:
        raise TrainError("FSDP cannot run agent rollouts with transformers generation on several processes: its "
                         "forward passes gather weights collectively while ranks run different numbers of turns (a "
                         "hang). Use DeepSpeed ZeRO-3 (train/accelerate/deepspeed-zero3.yaml), whose weights are "
                         "gathered once per rollout batch, or vLLM generation")
    wrapped = getattr(trainer, "model_wrapped", None) or trainer.model
    with unwrap_model_for_generation(wrapped, accelerator, gather_deepspeed3_params=gather,
                                     gradient_checkpointing_kwargs=getattr(args, "gradient_checkpointing_kwargs",
                                                                           None)) as model:
        yield model


class VLLMGenerator(BatchingFront):
    """Generation through TRL's vLLM engine (`use_vllm=True`; TRL syncs the LoRA weights into it before
    each rollout batch), batched like the transformers engine: concurrent agent turns are gathered
    (models/batching.py) and sent to vLLM in one call, each with its own max_tokens (the per-turn
    limit), temperature, top_p, seed and stop tokens.

    It does not go through TRL's `VLLMGeneration.generate`: that is a collective step (server mode
    gathers every rank's prompts and broadcasts the results; colocate mode with tensor parallelism
    all-gathers over the TP group) which all ranks must enter the same number of times, while agent
    runs on different ranks take different numbers of turns: with more than one rank it would hang.
    Instead: colocate mode calls this rank's own engine (`llm.generate`, no collective), and server
    mode calls the server from this process, which TRL only connects on the main process, so server
    mode is refused with more than one process, as is colocate mode with tensor_parallel_size > 1.
    Needs a GPU and the `vllm` package; this project's CI has neither (tests drive it with a stand-in
    engine)."""

    def __init__(self, trainer, *, max_batch: int = 256):
        super().__init__(max_batch=max_batch, name="vllm")
        self.vllm = trainer.vllm_generation
        self.mode = getattr(self.vllm, "mode", "colocate")
        processes = int(getattr(getattr(trainer, "accelerator", None), "num_processes", 1) or 1)
        if self.mode == "server" and processes > 1:
            raise TrainError(
                f"vLLM server mode with {processes} training processes is not supported for agent rollouts: "
                "TRL's generation step is collective (every rank must join each call) and ranks run different "
                "numbers of turns, so it would hang. Use vllm_mode: colocate (one engine per rank), or one process")
        if self.mode == "colocate" and int(getattr(self.vllm, "tensor_parallel_size", 1) or 1) > 1:
            raise TrainError(
                "vLLM colocate mode with vllm_tensor_parallel_size > 1 is not supported for agent rollouts: each "
                "generate call all-gathers over the tensor-parallel group, which would hang when ranks run "
                "different numbers of turns. Use vllm_tensor_parallel_size: 1")
        if getattr(self.vllm, "enable_sleep_mode", False):
            raise TrainError("vLLM sleep mode is not supported for agent rollouts (the engine is used between "
                             "TRL's own generation steps): set vllm_enable_sleep_mode: false")
        self.max_model_len = _max_model_len(self.vllm)
        # the rank's own GPU: the worker thread would otherwise make its CUDA context on GPU 0 (torch's
        # current device is per thread), on every rank
        device = getattr(getattr(trainer, "accelerator", None), "device", None)
        self.cuda_device = device if getattr(device, "type", None) == "cuda" else None

    def run_batch(self, requests) -> None:
        if self.cuda_device is not None:
            import torch

            torch.cuda.set_device(self.cuda_device)
        requests = [request for request in requests if self._fits(request)]
        if not requests:
            return
        if self.mode == "server":
            self._run_server(requests)
        else:
            self._run_colocate(requests)

    def _fits(self, request) -> bool:
        """A prompt vLLM would refuse (not shorter than max_model_len) fails its own turn only, not the
        batch's; the others' limits are cut to the room left."""
        if not self.max_model_len:
            return True
        room = self.max_model_len - len(request.prompt_ids)
        if room < 1:
            request.error = ContextWindowExceeded(
                f"vllm: the prompt has {len(request.prompt_ids)} tokens; vLLM's max_model_len is {self.max_model_len}")
            return False
        request.max_new_tokens = min(request.max_new_tokens, room)
        return True

    def _run_colocate(self, requests) -> None:
        from vllm import SamplingParams

        params = [SamplingParams(n=1, temperature=r.temperature, top_p=r.top_p or 1.0, max_tokens=r.max_new_tokens,
                                 seed=r.seed, logprobs=0, stop_token_ids=sorted(r.stop_ids)) for r in requests]
        outputs = self.vllm.llm.generate([{"prompt_token_ids": r.prompt_ids} for r in requests],
                                         sampling_params=params, use_tqdm=False)
        for request, output in zip(requests, outputs, strict=True):
            sample = output.outputs[0]
            ids = list(sample.token_ids)
            values = [float(entry[token].logprob) for token, entry in zip(ids, sample.logprobs or [])]
            _fill(request, ids, values)

    def _run_server(self, requests) -> None:
        groups: dict[tuple, list] = {}
        for request in requests:  # the client takes one set of sampling settings per call
            groups.setdefault((request.temperature, request.top_p or 1.0), []).append(request)
        for (temperature, top_p), group in groups.items():
            output = self.vllm.vllm_client.generate(
                prompts=[r.prompt_ids for r in group], n=1, temperature=temperature, top_p=top_p,
                max_tokens=max(r.max_new_tokens for r in group), logprobs=0)
            for request, ids, values in zip(group, output["completion_ids"], output["logprobs"], strict=True):
                values = [float(v[0]) if isinstance(v, (list, tuple)) else float(v) for v in values]
                _fill(request, list(ids), values)


def _max_model_len(vllm) -> int | None:
    """The engine's context length: TRL's vllm_max_model_length, else what vLLM derived from the model."""
    length = getattr(vllm, "max_model_length", None)
    if not length:
        engine = getattr(getattr(vllm, "llm", None), "llm_engine", None)
        config = getattr(engine, "model_config", None) or getattr(getattr(engine, "vllm_config", None),
                                                                  "model_config", None)
        length = getattr(config, "max_model_len", None)
    return int(length) if isinstance(length, int) and length > 0 else None


def _release_conversation(policy, steps) -> None:
    """The run is over: the engine's prompt cache lets go of its conversation's KV."""
    release = getattr(policy, "release", None)
    last = next((step for step in reversed(steps) if getattr(step, "token_ids", None)), None)
    if release is not None and last is not None and last.prompt_token_ids:
        release(list(last.prompt_token_ids) + list(last.token_ids))


def _fill(request, ids: list[int], logprobs: list[float]) -> None:
    """A request's result from what the engine sampled, cut at its own limit and first stop token (a
    prefix of a sample is what sampling with that limit or stop would have produced)."""
    end = min(len(ids), request.max_new_tokens)
    stop = next((i for i, token in enumerate(ids[:end]) if token in request.stop_ids), None)
    if stop is not None:
        end = stop + 1
    request.ids, request.logprobs = ids[:end], logprobs[:end]
    request.stopped = stop is not None
