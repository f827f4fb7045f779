"""Remove sandboxes left behind by a process that died (kill -9, power loss)."""

from __future__ import annotations

import socket

from ..private_dirs import owner_alive as pid_alive
from .docker import LABEL, WORKSPACE_IMAGE
from .engine import docker_client
from .iodir import prune_io_dirs


def owner_alive(owner: str) -> bool:
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    return pid_alive(int(pid))


def remove_own() -> int:
    """Remove the sandbox containers this process made (an interrupted run's leftovers)."""
    from .docker import owner_label

    client = docker_client()
    containers = client.containers.list(all=True, filters={"label": [LABEL, f"codeagent.owner={owner_label()}"]})
    for container in containers:
        container.remove(force=True)
    return len(containers)


def prune(include_live: bool = False, images: bool = False) -> tuple[int, int]:
    """Remove sandbox containers of dead owners (all, with include_live), their service networks
    and the host-side io directories they leave behind; with `images`, the cached workspace images too."""
    from docker.errors import APIError

    client = docker_client()
    removed = 0
    mounted = set()
    for container in client.containers.list(all=True, filters={"label": LABEL}):
        if not include_live and owner_alive(container.labels.get("codeagent.owner", "")):
            mounted.update(mount.get("Source", "") for mount in container.attrs.get("Mounts") or [])
            continue
        container.remove(force=True)
        removed += 1
    for network in client.networks.list(filters={"label": LABEL}):  # the task environments' service networks
        if include_live or not owner_alive(network.attrs.get("Labels", {}).get("codeagent.owner", "")):
            try:
                network.remove()
            except APIError:  # still in use by a container of a live owner
                continue
    prune_io_dirs(mounted)
    removed_images = 0
    if images:
        for image in client.images.list(name=WORKSPACE_IMAGE):
            client.images.remove(image.id, force=True)
            removed_images += 1
    return removed, removed_images
