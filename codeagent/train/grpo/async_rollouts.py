"""Async GRPO: rollout workers keep sampling while the trainer steps (`rollout.asynchronous: true`).

The contract is TRL's experimental async GRPO's (a rollout worker that produces scored samples tagged
with the policy version that made them, a buffer, max_staleness, the version bumped at every weight
sync), built around codeagent's agent rollouts and TRL's GRPOTrainer:

- a producer thread starts groups (num_generations rollouts of one task, tasks in a seeded order) as long
  as the buffer has room (`rollout.buffer_batches` generation batches ahead) and the current version will
  still be fresh enough when the group is taken (buffer.py: with max_staleness 0 nothing is sampled for a
  step before its weights are published, so nothing is dropped); each rollout is a real agent
  run (Rollouts.run_one) that leases the current policy version (versions.py), samples its whole run from
  it and records it: `policy_version` in the trajectory's header and in the sample;
- the trainer publishes its weights after every optimizer step as version = optimizer steps taken;
- TRL's rollout_func (this object) takes the next finished groups from the buffer (buffer.py), dropping
  those staler than `rollout.max_staleness` (counted and logged), and hands them to TRL with the
  behaviour logprobs recorded at sampling, which the loss uses (offpolicy.py);
- one `async_step` record per batch in metrics.jsonl: versions, staleness, stale groups dropped, reward
  statistics, uniform groups, infrastructure failures, mismatch_kl and is_masked_fraction.

TRL's own `trl.experimental.async_grpo` is not used: its loss forward runs a FlashAttention-3 kernel
fetched from the Hugging Face hub (GPU only), it generates through a vLLM server only and syncs weights
over NCCL, builds its own model from a path (no adapter to continue from), and its loss has no
importance-sampling correction for stale samples.

One training process only (refused with more); generation through transformers on versioned copies of
the policy, or (`rollout.served: true`) through a `vllm serve` process with one LoRA adapter per version
(vllm_server.py).
"""

from __future__ import annotations

import itertools
import logging
import random
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .. import TrainError
from .buffer import Group, SampleBuffer
from .offpolicy import STATISTICS
from .rollouts import Rollout, Rollouts
from .versions import PolicyVersions

log = logging.getLogger(__name__)


class VersionedStore:
    """The rollout store, with every run started through it recording the policy version that samples it."""

    def __init__(self, store, version: int):
        self._store, self.version = store, version

    def create(self, **header):
        return self._store.create(**header, policy_version=self.version)

    def __getattr__(self, name):
        return getattr(self._store, name)


def task_order(tasks: list, seed: int):
    """Every task once per pass, each pass in a new seeded order."""
    rng = random.Random(seed)
    while True:
        shuffled = list(tasks)
        rng.shuffle(shuffled)
        yield from shuffled


class AsyncRollouts:
    """TRL's rollout_func in async mode; see the module docstring."""

    def __init__(self, rollouts: Rollouts, tasks: list, *, seed: int = 0):
        if not tasks:
            raise TrainError("async GRPO has no tasks to roll out")
        recipe = rollouts.recipe
        settings = recipe.rollout
        self.rollouts = rollouts
        self.group_size = int(recipe.trainer.get("num_generations", 8))
        per_batch = int(recipe.trainer.get("per_device_train_batch_size", 8)) * int(
            recipe.trainer.get("steps_per_generation") or recipe.trainer.get("gradient_accumulation_steps", 1))
        if per_batch % self.group_size:
            raise TrainError(f"async GRPO hands TRL whole groups: the generation batch ({per_batch}) must be a "
                             f"multiple of trainer.num_generations ({self.group_size})")
        self.groups_per_batch = per_batch // self.group_size
        batches = settings.buffer_batches or settings.max_staleness + 1
        self.buffer = SampleBuffer(batches * self.groups_per_batch, settings.max_staleness, self.groups_per_batch)
        if settings.served:  # through `vllm serve`, an adapter per version
            from .vllm_server import served_versions

            self.versions: PolicyVersions = served_versions(rollouts)
        else:
            self.versions = PolicyVersions(lambda model: rollouts.policy(None, model))
        self.order = task_order(tasks, seed)
        self.workers = max(1, settings.workers)
        self.on_record = None  # called with each batch's async_step record
        self.history: list[dict[str, Any]] = []
        self._pool: ThreadPoolExecutor | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._pending: dict[str, Any] | None = None  # this batch's record, until the loss adds its statistics

    # -- the trainer's side ----------------------------------------------------------------------------

    @property
    def started(self) -> bool:
        return self._thread is not None

    def publish(self, model, version: int) -> None:
        self.versions.publish(model, version)
        self.buffer.publish(version)

    def start(self, model, version: int) -> None:
        if self._thread is not None:
            return
        self.buffer.start_at(version)
        self.publish(model, version)
        self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="rollout")
        self._thread = threading.Thread(target=self._produce, name="rollout-producer", daemon=True)
        self._thread.start()

    def __call__(self, prompts: list, trainer) -> dict[str, list]:
        """TRL asks for a batch of len(prompts) samples: the next fresh groups, whatever TRL's prompts are (the
        workers pick the tasks, ahead of the trainer)."""
        step = int(trainer.state.global_step)
        if not self.started:
            self.start(unwrapped(trainer), step)
        elif self.versions.version != step:  # the weight sync broke: fail now, not sample an old policy unseen
            raise TrainError(f"the trainer is at step {step} but the rollout workers sample version "
                             f"{self.versions.version}: the weights of this step were never published to them")
        if len(prompts) != self.groups_per_batch * self.group_size:
            raise TrainError(f"TRL asked for {len(prompts)} rollouts; async GRPO expected "
                             f"{self.groups_per_batch * self.group_size}")
        taken = self.buffer.take(self.groups_per_batch, step, alive=self._check)
        results = [rollout for group in taken.groups for rollout in group.rollouts]
        uniform = set(self.rollouts.uniform_group_members(results, trainer))
        summary = self.rollouts.summarize(results, step, taken.waited, uniform=uniform)
        record = self._record(step, taken, results, summary)
        self.rollouts.history.append(summary)
        self.history.append(record)
        self._pending = record
        for group in taken.dropped:
            log.info("dropped a stale group of %s: sampled by version %d, trainer at %d (max_staleness %d)",
                     group.instance_id, group.version, step, self.buffer.max_staleness)
        output = self.rollouts.to_trl(results, uniform=uniform)
        output["policy_version"] = [rollout.policy_version for rollout in results]
        return output

    def on_loss_statistics(self, stats: dict[str, Any]) -> None:
        """The loss's measure of the batch (offpolicy.py): completes the batch's record, which is written."""
        record, self._pending = self._pending, None
        if record is None:
            return
        record.update({key: stats[key] for key in STATISTICS})
        record["trained_tokens"], record["loss_tokens"] = stats["tokens"], stats["loss_tokens"]
        if self.on_record is not None:
            self.on_record(record)

    def _record(self, step: int, taken, results: list[Rollout], summary: dict[str, Any]) -> dict[str, Any]:
        scored = [float(r.rewards.get("total") or 0.0) for r in results if not r.infra_failure]
        versions = [r.policy_version for r in results]
        return {
            "event": "async_step", "step": step, "trainer_version": step,
            "policy_versions": sorted(set(versions)),
            "staleness_mean": statistics.fmean(taken.staleness) if taken.staleness else 0.0,
            "staleness_max": max(taken.staleness, default=0),
            "dropped_stale_groups": len(taken.dropped),
            "dropped_stale_samples": sum(len(group.rollouts) for group in taken.dropped),
            "dropped_stale_total": self.buffer.dropped_total,
            "dropped_versions": sorted({group.version for group in taken.dropped}),
            "max_staleness": self.buffer.max_staleness,
            "wait_seconds": round(taken.waited, 2), "buffer_ready": len(self.buffer),
            "rollouts": len(results), "reward_mean": summary["reward_mean"],
            "reward_std": statistics.pstdev(scored) if scored else 0.0,
            "reward_min": min(scored, default=0.0), "reward_max": max(scored, default=0.0),
            "resolved_rate": summary["resolved_rate"], "groups": summary["groups"],
            "uniform_groups": summary["uniform_groups"], "infra_failures": summary["infra_failures"],
            "tampered": summary["tampered"],
            "masked": summary["masked"], "exit_statuses": summary["exit_statuses"],
            "trajectory_ids": [r.trajectory_id for r in results],
        }

    def _check(self) -> None:
        if self._error is not None:
            raise TrainError(f"the rollout workers stopped: {type(self._error).__name__}: {self._error}")
        if self._thread is not None and not self._thread.is_alive() and not self._stop.is_set():
            raise TrainError("the rollout workers stopped")

    def close(self) -> None:
        """Stop starting rollouts; those running finish (their sandboxes are removed); copies released."""
        self._stop.set()
        self.buffer.close()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        if self._thread is not None:
            self._thread.join()
        self.versions.close()

    # -- the workers' side -----------------------------------------------------------------------------

    def _produce(self) -> None:
        try:
            for number in itertools.count():
                if not self.buffer.reserve(self._stop.is_set):
                    return
                task = next(self.order)
                self.rollouts._prepare_environments([task])  # images built once, before its sandboxes start
                self._start_group(task, number)
        except BaseException as error:  # the trainer's next take says so
            if not self._stop.is_set():
                self._error = error
                log.exception("the rollout producer stopped")

    def _start_group(self, task, number: int) -> None:
        group_id = f"grpo-{self.rollouts.run_id}-g{number}-{task.instance_id}"
        results: list[Rollout | None] = [None] * self.group_size
        lock = threading.Lock()

        def one(index: int) -> None:
            started = time.monotonic()
            try:
                with self.versions.lease() as (policy, version):
                    rollout = self.rollouts.run_one(task, policy, group_id, index,
                                                    store=VersionedStore(self.rollouts.store, version))
                    rollout.policy_version = version
            except Exception as error:  # run_one keeps its own failures; this is the lease's
                rollout = self.rollouts._infra_failure(Rollout(task.instance_id), f"rollout failed: {error}", started)
                rollout.policy_version = self.versions.version or 0
            with lock:
                results[index] = rollout
                done = all(result is not None for result in results)
            if done:
                self.buffer.put(Group(task.instance_id, list(results)))

        assert self._pool is not None
        try:
            for index in range(self.group_size):
                self._pool.submit(one, index)
        except RuntimeError:  # the pool is shut down: training is over
            self.buffer.release()


def unwrapped(trainer):
    return trainer.accelerator.unwrap_model(trainer.model) if hasattr(trainer, "accelerator") else trainer.model


def publish_callback(async_rollouts: AsyncRollouts, trainer=None):
    """The weight sync: after each optimizer step the trainer's weights become the next version; at the end
    of training the workers stop. Set `.trainer` on it once the trainer exists."""
    from transformers import TrainerCallback

    class _Publish(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if self.trainer is not None and async_rollouts.started:
                async_rollouts.publish(unwrapped(self.trainer), int(state.global_step))

        def on_train_end(self, args, state, control, **kwargs):
            async_rollouts.close()

    callback = _Publish()
    callback.trainer = trainer
    return callback
