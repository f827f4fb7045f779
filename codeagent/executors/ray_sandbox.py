"""A sandbox on a Ray worker node, driven from here: the agent (and the policy being trained) stay on
this machine, the container runs on the node's own Docker engine, and each Sandbox call is one call
to a Ray actor that holds it. The actor takes one sandbox slot (ray_executor.SANDBOX_RESOURCE) of
its node; a node that dies turns every later call into SandboxDead, which a rollout records as a
failed (masked) run.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from ..sandbox.errors import SandboxDead
from .ray_executor import SANDBOX_RESOURCE, RayExecutor


class _Host:
    """The actor: opens the sandbox on its node and runs what the driver asks of it."""

    def __init__(self, opener: Callable[[], AbstractContextManager]):
        self._context: AbstractContextManager | None = opener()
        self.box = self._context.__enter__()

    def info(self) -> tuple[str, str, str, int]:
        import os

        import ray

        return self.box.kind, self.box.workdir, ray.get_runtime_context().get_node_id(), os.getpid()

    def call(self, method: str, args: tuple, kwargs: dict) -> Any:
        if method not in REMOTE_METHODS:
            raise AttributeError(method)
        return getattr(self.box, method)(*args, **kwargs)

    def close(self) -> None:
        if self._context is not None:
            context, self._context = self._context, None
            context.__exit__(None, None, None)


REMOTE_METHODS = frozenset({"run", "read_file", "write_file", "list_dir", "diff", "interrupt"})


class RaySandbox:
    """The Sandbox protocol over a Ray actor. `opener()` runs on the node and returns a context
    manager whose `__enter__` gives the sandbox (a DockerSandbox, a harness environment's box)."""

    def __init__(self, opener: Callable[[], AbstractContextManager], *, address: str | None = None,
                 resource: str = SANDBOX_RESOURCE):
        ray = RayExecutor(address, resource=resource).connect()
        self._ray = ray
        # two calls at once: `interrupt` must reach the box while a `run` is going
        host = ray.remote(_Host).options(num_cpus=0, resources={resource: 1}, max_concurrency=2, max_restarts=0)
        self._actor = host.remote(opener)
        kind, self.workdir, self.node, self.host_pid = self._get(self._actor.info.remote())
        self.kind = f"ray-{kind}"

    def _get(self, ref):
        ray = self._ray
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as exc:  # the sandbox's own error, as it was raised there
            cause = getattr(exc, "cause", None)
            raise (cause if isinstance(cause, BaseException) else exc.as_instanceof_cause()) from None
        except ray.exceptions.RayError as exc:  # the actor, its worker or its node died
            raise SandboxDead(f"the sandbox's Ray node is gone: {str(exc).splitlines()[0][:300]}") from None

    def _call(self, method: str, *args, **kwargs):
        return self._get(self._actor.call.remote(method, args, kwargs))

    def run(self, command: str, timeout: float | None = None):
        return self._call("run", command, timeout)

    def read_file(self, path: str, max_bytes: int | None = None) -> bytes:
        return self._call("read_file", path, max_bytes)

    def write_file(self, path: str, data: bytes | str, mode: int | None = None) -> None:
        return self._call("write_file", path, data, mode)

    def list_dir(self, path: str = "."):
        return self._call("list_dir", path)

    def diff(self, exclude: list[str] | None = None, max_bytes: int | None = None) -> str:
        return self._call("diff", exclude, max_bytes)

    def interrupt(self) -> None:
        self._actor.call.remote("interrupt", (), {})  # not waited for: it must not block on the run

    def close(self) -> None:
        actor, self._actor = getattr(self, "_actor", None), None
        if actor is None:
            return
        try:
            self._ray.get(actor.close.remote())
        except self._ray.exceptions.RayError:
            pass  # the node is gone, and its container with it (or `sandbox prune` finds it)
        finally:
            self._ray.kill(actor)

    def __enter__(self) -> RaySandbox:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


class open_docker:
    """A picklable opener: a DockerSandbox on `repo` at `commit` (path, mirror or URL as the node sees it)."""

    def __init__(self, repo: str, commit: str | None = None, **options):
        self.repo, self.commit, self.options = repo, commit, options

    def __call__(self) -> AbstractContextManager:
        from ..sandbox import open_sandbox

        return open_sandbox(self.repo, self.commit, kind="docker", **self.options)
