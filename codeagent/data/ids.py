"""An instance id as a folder name: a batch keeps each instance's files under instances/<folder>,
so a data set whose ids would share a folder is refused when it is read. A git object id, in full."""

from __future__ import annotations

import re
from collections.abc import Iterable

UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
OBJECT_ID = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")  # a git object id in full: SHA-1 or SHA-256


def instance_folder(instance_id: str) -> str:
    """The folder name of an instance under instances/: its id with unsafe characters as `_`."""
    name = UNSAFE.sub("_", instance_id)
    return name if name.strip(".") else "_" + name  # "", "." and ".." are no folder of their own


def check_distinct_folders(instance_ids: Iterable[str]) -> None:
    """Two ids that give one folder (equal after `_` replaces their unsafe characters, or but for
    case, on a case-insensitive disk) would share a prediction and a report: a ValueError names both."""
    seen: dict[str, str] = {}
    for instance_id in instance_ids:
        key = instance_folder(instance_id).lower()
        other = seen.setdefault(key, instance_id)
        if other != instance_id:
            raise ValueError(f"instances {other!r} and {instance_id!r} would share one output folder "
                             f"(instances/{instance_folder(instance_id)}): rename one of them in the dataset")
