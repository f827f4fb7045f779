"""Remove sandboxes left behind by a process that died (kill -9, power loss)."""

from __future__ import annotations

import os
import socket

from .docker import LABEL, WORKSPACE_IMAGE
from .engine import docker_client


def owner_alive(owner: str) -> bool:
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def prune(include_live: bool = False, images: bool = False) -> tuple[int, int]:
    client = docker_client()
    removed = 0
    for container in client.containers.list(all=True, filters={"label": LABEL}):
        if not include_live and owner_alive(container.labels.get("codeagent.owner", "")):
            continue
        container.remove(force=True)
        removed += 1
    removed_images = 0
    if images:
        for image in client.images.list(name=WORKSPACE_IMAGE):
            client.images.remove(image.id, force=True)
            removed_images += 1
    return removed, removed_images
