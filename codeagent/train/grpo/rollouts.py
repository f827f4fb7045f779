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
from pathlib import Path
from typing import Any

from .. import TrainError
from ..recipe import Recipe
from ..sequences import NotTokenExact, TokenSequence, chain_steps
from .generation import VLLMGenerator, generation_weights, release_conversation, sync_vllm_weights
from .rollout_results import Rollout, RolloutBatch, infrastructure_failure

log = logging.getLogger(__name__)


class Rollouts(RolloutBatch):
    """TRL's rollout_func for codeagent: see the module docstring."""

    def __init__(self, recipe: Recipe, tasks: list, tokenizer, config, store, *, run_id: str | None = None):
        from ...harness import prebuilt
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
        self.evaluation = None  # the HeldOutEvaluation, when the recipe asks for one
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
        from ...models.hf import HFModel

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
        """Build each task's harness images once, before rollouts run in parallel. Not with the Ray executor:
        images are built where the sandboxes run, on the Ray nodes (their sandboxes and grades build them)."""
        settings = self.recipe.rollout
        if settings.executor == "ray" or (settings.environment != "harness" and settings.grader != "harness"):
            return
        from ...harness.env_images import image_source

        with self._prepare_lock:
            for task in tasks:
                if task.instance_id not in self._prepared:
                    image_source(task).prepare()
                    self._prepared.add(task.instance_id)

    def _warm_pools(self, tasks: list, workers: int) -> dict[str, Any]:
        """Per task, a warm pool of its sandboxes (at most one per rollout of it), `rollout.warm_sandboxes`
        started ahead in all. Only for the local executor and sandboxes a pool can hold (harness/env_sandbox.py);
        the others open their sandbox in run_one."""
        from ...sandbox.pool import WarmPool

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
                    factory = self._sandboxes(task).start
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
        """A task whose hidden tests are not in its agent's image (a pulled one) is graded in its grading image."""
        from ...harness.env_images import image_source

        return self.recipe.rollout.grader if image_source(task).sandbox_grades else "harness"

    def _sandbox_options(self) -> dict[str, Any]:
        from ...sandbox import Limits

        sandbox = self.config.sandbox
        return {"environment": self.recipe.rollout.environment, "kind": sandbox.kind,
                "limits": Limits.from_settings(sandbox), "base_image": sandbox.image,
                "registry": self.config.images.registry}

    def _sandboxes(self, task):
        from ...harness.env_sandbox import agent_sandboxes

        return agent_sandboxes(task, **self._sandbox_options())

    def _sandbox(self, task, pool):
        """The task's agent sandbox (harness/env_sandbox.py): from its warm pool, or opened now (executor:
        ray, on a Ray worker node)."""
        from ...harness.env_sandbox import open_agent_sandbox

        if pool is not None:
            return pool()  # a started sandbox; closing it (the with below) removes it
        on_node = None
        if self.recipe.rollout.executor == "ray":
            from functools import partial

            from ...executors.ray_sandbox import RaySandbox

            on_node = partial(RaySandbox, address=self.recipe.rollout.ray_address)
        return open_agent_sandbox(task, on_node=on_node, **self._sandbox_options())

    def run_one(self, task, policy, group_id: str, index: int, pool=None, store=None) -> Rollout:
        from ...agent.loop import Agent, RunOptions
        from ...harness import integrity
        from ...harness.env_grade import grade_in_sandbox
        from . import rewards

        started = time.monotonic()
        rollout = Rollout(task.instance_id)
        grader = self._grader(task)
        hidden = task.model_copy(update={"test_patch": None, "gold_patch": None})  # the agent never sees them
        agent = Agent(policy, self.config, store=store or self.store)  # store: async GRPO's, records the version
        try:
            with self._sandbox(task, pool) as box:
                result = agent.run(hidden, box, RunOptions(group_id=group_id, candidate_index=index))
                rollout.trajectory_id, rollout.exit_status = result.trajectory_id, result.exit_status
            if grader == "sandbox":  # a fresh sandbox of the same environment: only the patch comes across
                with self._sandbox(task, pool) as fresh:
                    rollout.grade = grade_in_sandbox(fresh, task, result.patch,
                                                     harness=self.recipe.rollout.environment == "harness")
            if grader == "harness":
                folder = Path(self.recipe.output_dir) / "grading" / (rollout.trajectory_id or f"{group_id}-{index}")
                rollout.grade = self._grade(task, result.patch, folder)
        except Exception as error:  # a rollout that breaks is left out (reward None), not a dead training run
            log.warning("rollout of %s failed: %s: %s", task.instance_id, type(error).__name__, error)
            return self._infra_failure(rollout, f"rollout failed: {type(error).__name__}: {error}", started)
        trajectory = self.store.load(rollout.trajectory_id)
        release_conversation(policy, trajectory.steps)
        outcome = rollout.grade.get("outcome")
        failure = infrastructure_failure(trajectory.exit_status, outcome, rollout.grade)
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
        from ...harness.env_grade import grade_patch, grade_shipped, say

        if self.recipe.rollout.executor != "ray":
            return grade_patch(task, patch, folder, progress=lambda line: say(task.instance_id, line))
        from ...executors.ray_executor import RayExecutor
        from ...executors.shipped import write_shipped_files

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
