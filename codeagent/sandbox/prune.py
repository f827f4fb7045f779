"""Remove sandboxes left behind by a process that died (kill -9, power loss).

An owner is judged only on its own host: a Docker engine may be shared by hosts (a cluster), and a
pid says nothing about a process on another machine. Sandboxes of other hosts are left alone unless
`--all`; those of an earlier boot of this host are dead.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Literal

from ..private_dirs import host_identity
from ..private_dirs import owner_alive as pid_alive
from .docker import HOST_LABEL, LABEL, WORKSPACE_IMAGE
from .engine import docker_client
from .iodir import prune_io_dirs

Verdict = Literal["alive", "dead", "other host"]


@dataclass
class Pruned:
    containers: int = 0
    images: int = 0
    other_hosts: int = 0  # sandboxes left alone: their owner is on another host


def judge(labels: dict[str, str]) -> Verdict:
    host, _, pid = labels.get("codeagent.owner", "").rpartition(":")
    identity = labels.get(HOST_LABEL)
    if identity is None:  # made before the host label: the hostname is all there is
        if host != socket.gethostname():
            return "other host"
    else:
        machine, _, boot = identity.rpartition("/")
        mine, _, my_boot = host_identity().rpartition("/")
        if machine != mine:
            return "other host"
        if boot != my_boot:
            return "dead"  # its owner ran in an earlier boot of this machine
    if not pid.isdigit():
        return "dead"
    return "alive" if pid_alive(int(pid)) else "dead"


def owner_alive(owner: str) -> bool:
    """Whether a `codeagent.owner` label (hostname:pid) names a live process of this host."""
    return judge({"codeagent.owner": owner}) == "alive"


def prune(include_live: bool = False, images: bool = False) -> Pruned:
    """Remove sandbox containers of dead owners of this host (all, with include_live), their service
    networks and the host-side io directories they leave behind; with `images`, the cached workspace
    images too."""
    from docker.errors import APIError, NotFound

    client = docker_client()
    result = Pruned()
    mounted = set()
    for container in client.containers.list(all=True, filters={"label": LABEL}, ignore_removed=True):
        verdict = judge(container.labels)
        if not include_live and verdict != "dead":
            mounted.update(mount.get("Source", "") for mount in container.attrs.get("Mounts") or [])
            result.other_hosts += verdict == "other host"
            continue
        try:
            container.remove(force=True)
        except NotFound:  # removed meanwhile (its owner closing it, another prune)
            continue
        result.containers += 1
    for network in client.networks.list(filters={"label": LABEL}):  # the task environments' service networks
        if include_live or judge(network.attrs.get("Labels") or {}) == "dead":
            try:
                network.remove()
            except APIError:  # still in use by a container of a live owner
                continue
    prune_io_dirs(mounted)
    if images:
        for image in client.images.list(name=WORKSPACE_IMAGE):
            client.images.remove(image.id, force=True)
            result.images += 1
    return result
