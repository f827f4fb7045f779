"""The sandbox's image for a user's repository: `sandbox.image` when set, else the repository's
toolchain (harness/env_toolchain.py), said in one line before the sandbox starts."""

from __future__ import annotations

from collections.abc import Callable

from ..config import Config
from ..harness.env_toolchain import Environment, resolve
from ..sandbox import RepoSnapshot, snapshot


def repository_environment(snap: RepoSnapshot, image: str | None, say: Callable[[str], None]) -> Environment:
    environment = resolve(snap, image, log=say)
    say(environment.line)
    return environment


def with_repository_environment(config: Config, repo: str, commit: str | None,
                                say: Callable[[str], None]) -> Config:
    """`config` whose sandbox.image is the repository's environment (the same config for a local sandbox)."""
    if config.sandbox.kind != "docker":
        return config
    image = repository_environment(snapshot(repo, commit), config.sandbox.image, say).image
    if image == config.sandbox.image:
        return config
    return config.model_copy(update={"sandbox": config.sandbox.model_copy(update={"image": image})})
