"""Connect to the Docker engine, with one clear error when none answers."""

from __future__ import annotations

import functools
import os

from .errors import DockerUnavailable

ENGINE_HELP = (
    "Start the engine (`sudo systemctl start docker`, or `sudo dockerd &`), or install it with "
    "`bash scripts/setup.sh`. Without Docker, `--sandbox local` runs commands on this machine "
    "with no isolation."
)


@functools.lru_cache(maxsize=1)
def docker_client():
    """The shared Docker SDK client; raises DockerUnavailable if no engine answers."""
    try:
        import docker
        from docker.errors import DockerException
    except ImportError as exc:  # pragma: no cover - docker is a core dependency
        raise DockerUnavailable(f"the `docker` Python package is missing ({exc}); reinstall codeagent") from exc
    where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except DockerException as exc:
        raise DockerUnavailable(f"No Docker engine answers at {where}: {_reason(exc)}. {ENGINE_HELP}") from exc
    return client


def _reason(exc: Exception) -> str:
    text = str(exc)
    if "No such file or directory" in text or "FileNotFoundError" in text:
        return "the socket does not exist (the engine is not running)"
    if "Permission denied" in text:
        return "permission denied on the socket (add yourself to the `docker` group, or run as root)"
    if "Connection refused" in text:
        return "connection refused"
    return text.splitlines()[0][:300] if text else type(exc).__name__


def exec_exit_code(exec_id: str, tries: int = 50) -> int | None:
    """The exit code of a finished `docker exec` (the engine records it a moment after the stream
    ends, hence the short wait); None if it cannot be had."""
    import time

    try:
        for _ in range(tries):
            info = docker_client().api.exec_inspect(exec_id)
            if not info.get("Running"):
                return info.get("ExitCode")
            time.sleep(0.01)
    except Exception:
        pass
    return None
