"""Held-out splits that do not leak: whole repositories go to one side, chosen by a seeded hash
(the same tasks and seed always give the same split, whatever their order)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from .select import task_repo


def split_tasks(tasks: Sequence[Any], held_out: float | int, *, seed: int = 0,
                group: Callable[[Any], str] | None = task_repo) -> tuple[list[Any], list[Any]]:
    """(train, held_out): `held_out` is a fraction (0 < f < 1) or a count of tasks; whole groups
    (repositories by default; group=None: single tasks) are held out until at least that many are."""
    count = len(tasks)
    wanted = round(held_out * count) if isinstance(held_out, float) and 0 < held_out < 1 else int(held_out)
    if not 0 < wanted < count:
        raise ValueError(f"held_out={held_out} leaves no task on one side of {count}")
    key = group or (lambda task: task.instance_id)
    groups: dict[str, list[Any]] = {}
    for task in tasks:
        groups.setdefault(key(task), []).append(task)
    order = sorted(groups, key=lambda name: hashlib.sha256(f"{seed}\0{name}".encode()).hexdigest())
    chosen: set[str] = set()
    taken = 0
    for name in order:
        if taken >= wanted:
            break
        if taken + len(groups[name]) >= count:
            continue  # would leave nothing to train on
        chosen.add(name)
        taken += len(groups[name])
    if not chosen:
        raise ValueError(f"held_out={held_out}: one group holds every task; pass group=None to split by task")
    train = [task for task in tasks if key(task) not in chosen]
    held = [task for task in tasks if key(task) in chosen]
    return train, held
