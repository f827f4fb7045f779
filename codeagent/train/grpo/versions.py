"""Versioned copies of the policy that async GRPO's rollout workers sample from (async_rollouts.py).

The trainer publishes its weights after every optimizer step under a version (the optimizer steps taken).
Each rollout leases the version current when it starts and samples its whole run from that copy, however
many steps the trainer takes meanwhile: a sample is never a mix of two policies, and the version it
records is the one that produced it. A copy nobody samples from any more and that is no longer current is
retired: its engine is closed and its weights are kept as a spare, overwritten by a later publish with
only the tensors the optimizer changes (the LoRA adapter), not the whole model.

This is the local (transformers) sampler: copies in the trainer's memory, fine for the tiny CPU models
of the tests and the benchmark. vllm_server.py's ServedVersions is the same contract on a vLLM server,
one LoRA adapter per version (what TRL's async trainer does).
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


@dataclass
class _Snapshot:
    version: int
    model: Any
    policy: Any  # the Model protocol around `model` (HFModel), with its own batching engine
    users: int = 0


class PolicyVersions:
    """`make_policy(model)` wraps a copy of the weights into something the agent loop can call."""

    def __init__(self, make_policy: Callable[[Any], Any]):
        self.make_policy = make_policy
        self._lock = threading.Lock()
        self._current: _Snapshot | None = None
        self._spares: list[Any] = []
        self.published: list[int] = []  # every version published, in order

    @property
    def version(self) -> int | None:
        with self._lock:
            return self._current.version if self._current else None

    def publish(self, model, version: int) -> None:
        """A copy of `model`'s weights as they are now becomes the version new rollouts sample from.
        Called by the trainer between optimizer steps (the weights do not move while they are copied)."""
        snapshot = self._snapshot(model, version)
        with self._lock:
            old, self._current = self._current, snapshot
            self.published.append(version)
            retire = old is not None and old.users == 0
        if retire and old is not None:
            self._retire(old)

    def _snapshot(self, model, version: int) -> _Snapshot:
        import torch

        with self._lock:
            spare = self._spares.pop() if self._spares else None
        with torch.no_grad():
            if spare is None:
                spare = copy.deepcopy(model)
                spare.eval()
                spare.requires_grad_(False)
            else:
                trained = {name: p for name, p in model.named_parameters() if p.requires_grad}
                for name, param in spare.named_parameters():
                    if name in trained:
                        param.copy_(trained[name])
        return _Snapshot(version, spare, self.make_policy(spare))

    @contextmanager
    def lease(self):
        """(policy, version) of the current copy, held until the block ends."""
        with self._lock:
            snapshot = self._current
            if snapshot is None:
                raise RuntimeError("no policy version published yet")
            snapshot.users += 1
        try:
            yield snapshot.policy, snapshot.version
        finally:
            with self._lock:
                snapshot.users -= 1
                retire = snapshot.users == 0 and snapshot is not self._current
            if retire:
                self._retire(snapshot)

    def _retire(self, snapshot: _Snapshot) -> None:
        close = getattr(snapshot.policy, "close", None)
        if close is not None:
            close()
        self._release(snapshot)

    def _release(self, snapshot: _Snapshot) -> None:
        """What a retired copy leaves: here its weights, kept as the spare the next publish overwrites."""
        with self._lock:
            self._spares.append(snapshot.model)

    def close(self) -> None:
        with self._lock:
            current, self._current = self._current, None
            self._spares.clear()
        if current is not None and current.users == 0:
            close = getattr(current.policy, "close", None)
            if close is not None:
                close()
