"""`eval grade|run --prebuild`: build every instance image the batch needs before any instance is
graded or run, so a build failure shows at the start and no instance waits on a build mid-batch.
Locally: here, one task after another. On Ray: one task pinned to each node that offers sandbox
slots, building them all on that node's own engine (no registry assumed; the node-level lock in
harness makes a layer wanted twice on one node be built once)."""

from __future__ import annotations

from typing import Any

from ..task import Task


def build_images(task_data: list[dict]) -> dict[str, Any]:
    """Build what is missing of each task's images here: the layers built, and each task's error."""
    from ..harness.env_images import image_source

    built: list[str] = []
    errors: dict[str, str] = {}
    for data in task_data:
        task = Task.model_validate(data)
        try:
            built += image_source(task).prepare()
        except Exception as error:  # that instance fails when it is graded, as it would have without this
            errors[task.instance_id] = f"{type(error).__name__}: {str(error).splitlines()[0][:300] if str(error) else ''}"
    return {"built": built, "errors": errors}


def prebuild(tasks: list[Task], executor) -> list[dict[str, Any]]:
    """One result per node (a single one for a local executor); see build_images."""
    data = [task.model_dump() for task in tasks]
    on_every_node = getattr(executor, "on_every_node", None)
    if on_every_node is not None:
        return on_every_node(build_images, data)
    return [build_images(data)]
