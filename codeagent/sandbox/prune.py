"""Remove sandboxes left behind by a process that died (kill -9, power loss).

An owner is judged only on its own host: a Docker engine may be shared by hosts (a cluster), and a
pid says nothing about a process on another machine. Sandboxes of other hosts are left alone unless
`--all`; those of an earlier boot of this host are dead.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Literal

from ..private_dirs import host_identity, remove_dead_owners
from ..private_dirs import owner_alive as pid_alive
from . import tree_cache
from .engine import docker_client
from .iodir import prune_io_dirs
from .labels import HOST_LABEL, LABEL, owner_label
from .workspace import trees_dir
from .workspace_image import WORKSPACE_IMAGE

Verdict = Literal["alive", "dead", "other host"]


@dataclass
class Pruned:
    containers: int = 0
    images: int = 0
    other_hosts: int = 0  # sandboxes left alone: their owner is on another host
    trees: int = 0  # host copies of trees removed from the cache


def owner_alive(owner: str) -> bool:
    """Whether a `codeagent.owner` label (hostname:pid) names a live process of this host."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    return pid_alive(int(pid))


def judge(labels: dict[str, str]) -> Verdict:
    owner = labels.get("codeagent.owner", "")
    identity = labels.get(HOST_LABEL)
    if identity is None:  # made before the host label: the hostname is all there is
        if owner.rpartition(":")[0] != socket.gethostname():
            return "other host"
    else:
        machine, _, boot = identity.rpartition("/")
        mine, _, my_boot = host_identity().rpartition("/")
        if machine != mine:
            return "other host"
        if boot != my_boot:
            return "dead"  # its owner ran in an earlier boot of this machine
    return "alive" if owner_alive(owner) else "dead"


def remove_own() -> int:
    """Remove the sandbox containers this process made (an interrupted run's leftovers)."""
    client = docker_client()
    containers = client.containers.list(all=True, filters={"label": [LABEL, f"codeagent.owner={owner_label()}"]})
    for container in containers:
        container.remove(force=True)
    return len(containers)


def prune(include_live: bool = False, images: bool = False) -> Pruned:
    """Remove what killed processes left (their helpers, such as a local Ray, first; their folders:
    io dirs, navigation mirrors, grading scratch), the sandbox containers of dead owners of this host
    (all, with include_live) and their service networks, and the cached host copies of trees no one
    uses; with `images`, the cached workspace images too."""
    result = Pruned()
    remove_dead_owners()
    result.containers, result.other_hosts, mounted = remove_sandboxes(include_live)
    prune_io_dirs(mounted)
    result.trees = tree_cache.clear(trees_dir())
    if images:
        client = docker_client()
        for image in client.images.list(name=WORKSPACE_IMAGE):
            client.images.remove(image.id, force=True)
            result.images += 1
    return result


def remove_sandboxes(include_live: bool = False) -> tuple[int, int, set[str]]:
    """Sandbox containers of dead owners of this host (all, with include_live) and their service
    networks: how many went, how many of other hosts were left, and what the kept ones mount."""
    from docker.errors import APIError, NotFound

    client = docker_client()
    removed = other_hosts = 0
    mounted: set[str] = set()
    for container in client.containers.list(all=True, filters={"label": LABEL}, ignore_removed=True):
        verdict = judge(container.labels)
        if not include_live and verdict != "dead":
            mounted.update(mount.get("Source", "") for mount in container.attrs.get("Mounts") or [])
            other_hosts += verdict == "other host"
            continue
        try:
            container.remove(force=True)
        except NotFound:  # removed meanwhile (its owner closing it, another prune)
            continue
        removed += 1
    for network in client.networks.list(filters={"label": LABEL}):  # the task environments' service networks
        if include_live or judge(network.attrs.get("Labels") or {}) == "dead":
            try:
                network.remove()
            except APIError:  # still in use by a container of a live owner
                continue
    return removed, other_hosts, mounted
