"""Batch work as Ray tasks on a cluster: one task per instance, each on some node's own Docker engine.

Ray is an optional extra (`codeagent[ray]`), imported only when this executor is used.

Each node says how many sandboxes it can hold with a custom resource (SANDBOX_RESOURCE); every task
asks for one unit of it, so Ray never puts more than K sandboxes on one node's Docker daemon.
Start a worker node with:

    ray start --address HEAD:6379 --resources "$(python -m codeagent.executors.ray_executor resources)"

A task whose worker process or node dies is run again elsewhere by Ray (`max_retries`, bounded); a
task that raised is not retried (it is recorded as that instance's error, and a rerun retries it).
Tasks return plain data; the driver (batch.py) writes it into the batch directory: no shared
filesystem is assumed.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any

SANDBOX_RESOURCE = "codeagent_sandbox"
CPUS_PER_SANDBOX = 2.0
MEMORY_PER_SANDBOX = 4 * 1024**3  # bytes: the sandbox's limit is 8g, most test runs use far less


class RayUnavailable(RuntimeError):
    """Ray is missing, unreachable, or the cluster offers no sandbox slots (one line to show)."""


def node_slots(cpus: float | None = None, memory: int | None = None, *, cpus_per_sandbox: float = CPUS_PER_SANDBOX,
               memory_per_sandbox: int = MEMORY_PER_SANDBOX) -> int:
    """How many sandboxes this node's Docker engine takes at once: the tighter of CPUs and memory
    (CODEAGENT_SANDBOX_SLOTS overrides)."""
    override = os.environ.get("CODEAGENT_SANDBOX_SLOTS")
    if override:
        return max(0, int(override))
    cpus = (os.cpu_count() or 1) if cpus is None else cpus
    if memory is None:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return max(1, min(int(cpus // cpus_per_sandbox), int(memory // memory_per_sandbox)))


def node_resources(slots: int | None = None) -> dict[str, float]:
    """The custom resources a worker node advertises (`ray start --resources`)."""
    return {SANDBOX_RESOURCE: float(node_slots() if slots is None else slots)}


class RayExecutor:
    """`map_unordered` over Ray tasks. `address`: a running cluster ("auto", "ray://...", host:port);
    None starts a one-node Ray on this machine with `slots` sandboxes. `ships_results` tells the batch
    code to send work that returns its results rather than writing them to a local directory."""

    ships_results = True

    def __init__(self, address: str | None = None, *, slots: int | None = None, max_retries: int | None = None,
                 resource: str = SANDBOX_RESOURCE, per_task: float = 1.0):
        self.address, self.slots = address, slots
        self.max_retries = int(os.environ.get("CODEAGENT_RAY_MAX_RETRIES", "3")) if max_retries is None else max_retries
        self.resource, self.per_task = resource, per_task

    def connect(self):
        try:
            import ray
        except ImportError:
            raise RayUnavailable("--executor ray needs Ray: pip install 'codeagent[ray]'") from None
        if not ray.is_initialized():
            try:
                if self.address:
                    private_token_file(create=False)
                    ray.init(address=self.address, log_to_driver=True, logging_level="WARNING")
                else:  # a one-node cluster on this machine, its slots from its CPUs and memory
                    start_local_ray(ray, node_resources(self.slots))
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise RayUnavailable(f"cannot connect to Ray at {self.address or 'a new local cluster'}: "
                                     f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
        if ray.cluster_resources().get(self.resource, 0) < self.per_task:
            raise RayUnavailable(f"the Ray cluster has no {self.resource!r} resource: start each worker node with "
                                 f"--resources '{json.dumps({self.resource: 4})}' (its sandbox slots)")
        return ray

    def map_unordered(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[tuple[Any, Any, BaseException | None]]:
        ray = self.connect()
        # num_cpus=0: the sandbox slots are the limit (a task mostly waits on its node's Docker engine)
        remote = ray.remote(_on_node).options(num_cpus=0, resources={self.resource: self.per_task},
                                              max_retries=self.max_retries, retry_exceptions=False)
        pending = {remote.remote(fn, item): item for item in items}  # Ray queues what has no slot yet
        try:
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    item = pending.pop(ref)
                    try:
                        result, error = ray.get(ref), None
                    except ray.exceptions.RayTaskError as exc:  # fn raised: its own exception, not Ray's wrapper
                        result, error = None, exc.as_instanceof_cause()
                    except ray.exceptions.RayError as exc:  # retries exhausted (node or worker died), cancelled...
                        result, error = None, exc
                    yield item, result, error
        finally:  # the driver stops (Ctrl-C, an error): running tasks unwind and remove their sandboxes
            for ref in pending:
                ray.cancel(ref)


    def on_every_node(self, fn: Callable[[Any], Any], item: Any) -> list[Any]:
        """`fn(item)` once on each live node that offers sandbox slots (a node lost meanwhile: its
        entry is {"node", "error"}), e.g. to build a batch's images on every node first."""
        ray = self.connect()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        nodes = [node["NodeID"] for node in ray.nodes()
                 if node.get("Alive") and node.get("Resources", {}).get(self.resource, 0) >= self.per_task]
        refs = [(node, ray.remote(_on_node).options(
            num_cpus=0, resources={self.resource: self.per_task}, max_retries=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote(fn, item)) for node in nodes]
        results = []
        for node, ref in refs:
            try:
                results.append(ray.get(ref))
            except ray.exceptions.RayTaskError as exc:
                results.append({"node": node, "error": str(exc.as_instanceof_cause()).splitlines()[0][:300]})
            except ray.exceptions.RayError as exc:
                results.append({"node": node, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"})
        return results


def private_token_file(*, create: bool) -> None:
    """Ray's token (~/.ray/auth_token, its default place) readable by this user only: made so before
    Ray would write it with the umask's 0644 (create: a local cluster makes one when there is none)."""
    if os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return  # the user keeps it elsewhere
    import secrets
    from pathlib import Path

    path = Path.home() / ".ray" / "auth_token"
    if create and not path.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another driver just made it
            pass
        else:
            with os.fdopen(fd, "w") as handle:
                handle.write(secrets.token_hex(32))  # as Ray's own generator: 256 random bits
    if path.exists() and path.stat().st_uid == os.getuid():
        path.chmod(0o600)


def start_local_ray(ray, resources: dict[str, float]) -> None:
    """A one-node Ray that only this machine can reach: every daemon, agent, worker and metrics
    endpoint on 127.0.0.1. Its files live in a private folder of this process, and a watchdog
    (ray_watchdog.py) stops what is left of it and removes the sandboxes its workers held as soon as
    this process ends, however it ends (the agents outlive a killed driver). Should the watchdog be
    killed too, the next local start or `sandbox prune` does it."""
    from ray._private import ray_constants

    from ..private_dirs import make_private_dir, remove_dead_owners
    from ..sandbox.prune import remove_sandboxes
    from . import ray_watchdog

    if remove_dead_owners("ray"):  # a local Ray of a driver that was killed
        remove_sandboxes()
    private_token_file(create=True)
    temp_dir = make_private_dir("ray", helpers=True)
    ray_watchdog.start(temp_dir)  # before Ray starts: a driver killed from now on takes it along
    # Ray turns a loopback node address into the machine's reachable one unless it believes it is on a
    # single-machine platform; say so while it starts (its processes inherit the variable).
    saved, os.environ[ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR] = (
        os.environ.get(ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR), "0")
    cluster, ray_constants.ENABLE_RAY_CLUSTER = ray_constants.ENABLE_RAY_CLUSTER, False
    try:
        ray.init(resources=resources, include_dashboard=False, dashboard_host="127.0.0.1",
                 _node_ip_address="127.0.0.1", _temp_dir=str(temp_dir), logging_level="WARNING")
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = cluster
        if saved is None:
            os.environ.pop(ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR, None)
        else:
            os.environ[ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR] = saved


def _on_node(fn: Callable[[Any], Any], item: Any) -> Any:
    """Runs on the worker node: `fn(item)`, and where it ran (for the report)."""
    import socket

    import ray

    result = fn(item)
    if isinstance(result, dict):
        result = {**result, "executor": {"kind": "ray", "node": ray.get_runtime_context().get_node_id(),
                                         "host": socket.gethostname()}}
    return result


def main(argv: list[str]) -> int:
    if argv[:1] == ["resources"]:
        print(json.dumps(node_resources(int(argv[1]) if len(argv) > 1 else None)))
        return 0
    print("usage: python -m codeagent.executors.ray_executor resources [SLOTS]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
