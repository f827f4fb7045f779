"""The sample buffer between async GRPO's rollout workers and the trainer.

Finished groups (all rollouts of one task, scored) wait here until the trainer takes them. A group is as
old as its oldest member: staleness = the trainer's version now - the oldest policy_version in it. The
trainer takes groups in the order they finished and drops (and counts) every group staler than
`max_staleness`; a group is the unit because its members' advantages are relative to each other.
`capacity` bounds how many groups the workers may have started and not yet handed over, so they run at
most that far ahead of the trainer.

A group is started only when it will be fresh enough where it is going to be taken: counting the groups
taken so far and those started ahead of it, it falls in the batch of step (taken + started) //
groups_per_batch, and it may start once the published version is no more than max_staleness behind that
step (AReaL's bound on the samples made ahead). With max_staleness 0 the workers wait for each step's
weights before sampling for it (synchronous, nothing wasted); with 1 they run one batch ahead. Only a group
that finishes out of order (a slow rollout, taken at a later step than planned) can still be dropped.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Group:
    instance_id: str
    rollouts: list[Any]  # Rollout objects (rollouts.py), each with its policy_version
    finished: float = field(default_factory=time.monotonic)

    @property
    def version(self) -> int:
        return min(r.policy_version for r in self.rollouts)


@dataclass
class Taken:
    groups: list[Group]
    dropped: list[Group]  # staler than max_staleness, left out
    staleness: list[int]  # of each group taken
    waited: float  # seconds the trainer waited for them


class SampleBuffer:
    def __init__(self, capacity: int, max_staleness: int, groups_per_batch: int = 1):
        if capacity < 1 or max_staleness < 0 or groups_per_batch < 1:
            raise ValueError("capacity >= 1, max_staleness >= 0 and groups_per_batch >= 1")
        self.capacity = capacity
        self.max_staleness = max_staleness
        self.groups_per_batch = groups_per_batch
        self.version = 0  # the policy version new groups are sampled by (published by the trainer)
        self.taken_total = 0
        self._ready: deque[Group] = deque()
        self._reserved = 0  # groups started or finished, not yet taken or dropped
        self._cond = threading.Condition()
        self._closed = False
        self.dropped_total = 0

    def start_at(self, step: int) -> None:
        """The trainer's first step (after a resume, the one it resumes at): the batches before it are taken."""
        with self._cond:
            self.taken_total = max(self.taken_total, step * self.groups_per_batch)
            self.version = max(self.version, step)
            self._cond.notify_all()

    def publish(self, version: int) -> None:
        """A new policy version: groups for the steps it is fresh enough for may start."""
        with self._cond:
            self.version = max(self.version, version)
            self._cond.notify_all()

    def _room(self) -> bool:
        step = (self.taken_total + self._reserved) // self.groups_per_batch  # where the next group will be taken
        return self._reserved < self.capacity and step - self.version <= self.max_staleness

    def has_room(self) -> bool:
        with self._cond:
            return self._room()

    def reserve(self, stop: Callable[[], bool] = lambda: False) -> bool:
        """Wait for room to start one more group (the capacity, and a version fresh enough for the step that
        will take it); False once the buffer is closed or `stop()` is true."""
        with self._cond:
            while not self._room() and not self._closed and not stop():
                self._cond.wait(0.5)
            if self._closed or stop():
                return False
            self._reserved += 1
            return True

    def release(self) -> None:
        """A reserved group that will never be put (its producer gave up)."""
        with self._cond:
            self._reserved -= 1
            self._cond.notify_all()

    def put(self, group: Group) -> None:
        with self._cond:
            self._ready.append(group)
            self._cond.notify_all()

    def take(self, count: int, version: int, alive: Callable[[], None] = lambda: None) -> Taken:
        """`count` groups no staler than max_staleness at trainer version `version`, oldest first, the stale
        ones dropped on the way. `alive()` is called while waiting; it raises when the producer is dead."""
        started = time.monotonic()
        taken: list[Group] = []
        dropped: list[Group] = []
        with self._cond:
            while len(taken) < count:
                while not self._ready:
                    if self._closed:
                        raise RuntimeError("the sample buffer was closed")
                    self._cond.wait(1.0)
                    alive()
                group = self._ready.popleft()
                self._reserved -= 1
                self._cond.notify_all()  # room for the producer
                if version - group.version > self.max_staleness:
                    dropped.append(group)
                    self.dropped_total += 1
                else:
                    taken.append(group)
                    self.taken_total += 1
        return Taken(taken, dropped, [version - g.version for g in taken], time.monotonic() - started)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._ready)
