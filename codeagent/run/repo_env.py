"""The sandbox's image for a user's repository (harness/env_toolchain.py): its devcontainer when the
user trusts the repository, else `sandbox.image` when set, else its toolchain, said in one line before
the sandbox starts."""

from __future__ import annotations

from collections.abc import Callable

from ..config import Config, repository_trusted
from ..harness.env_toolchain import Environment, resolve
from ..sandbox import RepoSnapshot, snapshot


def repository_environment(snap: RepoSnapshot, config: Config, say: Callable[[str], None]) -> Environment:
    """The environment of the repository at `snap` under `config` (its sandbox.image, whether the
    user trusts the repository: trusted_projects, or --trust), said with `say`."""
    environment = resolve(snap, config.sandbox.image, log=say, trusted=repository_trusted(config, snap.source))
    say(environment.line)
    return environment


def with_repository_environment(config: Config, repo: str, commit: str | None,
                                say: Callable[[str], None]) -> Config:
    """`config` whose sandbox.image is the repository's environment (the same config for a local sandbox)."""
    if config.sandbox.kind != "docker":
        return config
    image = repository_environment(snapshot(repo, commit), config, say).image
    if image == config.sandbox.image:
        return config
    return config.model_copy(update={"sandbox": config.sandbox.model_copy(update={"image": image})})
