"""The sandbox containers and workspace images of this test run on the shared Docker engine."""

from __future__ import annotations

import os


def images_of_this_run(client) -> list:
    from codeagent.sandbox.docker import RUN_LABEL, RUN_LABEL_ENV, WORKSPACE_IMAGE

    return client.images.list(name=WORKSPACE_IMAGE, filters={"label": f"{RUN_LABEL}={os.environ[RUN_LABEL_ENV]}"})


def sandbox_containers() -> set[str]:
    from codeagent.sandbox.docker import LABEL
    from codeagent.sandbox.engine import docker_client

    return {c.id for c in docker_client().containers.list(all=True, filters={"label": LABEL}, ignore_removed=True)}


def leaked_containers(before: set[str]) -> set[str]:
    """New sandbox containers of this test run owned by this process or by a process that has died (a
    CLI the test ran). Containers of other live processes, such as a benchmark running beside, or of
    other test runs on the same engine are not ours."""
    import socket

    from codeagent.sandbox.docker import LABEL, RUN_LABEL, RUN_LABEL_ENV
    from codeagent.sandbox.engine import docker_client
    from codeagent.sandbox.prune import owner_alive

    me = f"{socket.gethostname()}:{os.getpid()}"
    leaked = set()
    ours = f"{RUN_LABEL}={os.environ[RUN_LABEL_ENV]}"
    for container in docker_client().containers.list(all=True, filters={"label": [LABEL, ours]}, ignore_removed=True):
        owner = container.labels.get("codeagent.owner", "")
        if container.id not in before and owner and (owner == me or not owner_alive(owner)):
            leaked.add(container.id)
    return leaked
