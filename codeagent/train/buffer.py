"""The sample buffer between async GRPO's rollout workers and the trainer.

Finished groups (all rollouts of one task, scored) wait here until the trainer takes them. A group is as
old as its oldest member: staleness = the trainer's version now - the oldest policy_version in it. The
trainer takes groups in the order they finished and drops (and counts) every group staler than
`max_staleness`; a group is the unit because its members' advantages are relative to each other.
`capacity` bounds how many groups the workers may have started and not yet handed over, so they run at
most that far ahead of the trainer.
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
    def __init__(self, capacity: int, max_staleness: int):
        if capacity < 1 or max_staleness < 0:
            raise ValueError("capacity >= 1 and max_staleness >= 0")
        self.capacity = capacity
        self.max_staleness = max_staleness
        self._ready: deque[Group] = deque()
        self._reserved = 0  # groups started or finished, not yet taken or dropped
        self._cond = threading.Condition()
        self._closed = False
        self.dropped_total = 0

    def reserve(self, stop: Callable[[], bool] = lambda: False) -> bool:
        """Wait for room to start one more group; False once the buffer is closed or `stop()` is true."""
        with self._cond:
            while self._reserved >= self.capacity and not self._closed and not stop():
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
        return Taken(taken, dropped, [version - g.version for g in taken], time.monotonic() - started)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._ready)
