"""The spec models: one layer of a spec (EnvSpec), a Python our images provide, a resolved spec
and its image keys (sha256 of sorted JSON, stable across runs and machines)."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

SCHEMA = 1  # bump when the meaning of a key field changes: every image tag changes with it
COMMON_FILE = "_common.yaml"


class SpecError(ValueError):
    """No spec, or a malformed one; the message says which file or task and what to do."""


def task_mapping(raw: Any, instance_id: str, field: str) -> dict[str, Any]:
    """A task's own config field (a mapping, or its JSON text) as a mapping; SpecError naming the task otherwise."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as err:
            raise SpecError(f"task {instance_id}: {field} is not valid JSON: {err}") from None
    if not isinstance(raw, dict):
        raise SpecError(f"task {instance_id}: {field} must be a mapping, got {type(raw).__name__}")
    return raw


def _str_list(value: Any) -> Any:
    if isinstance(value, str):
        return [value]
    return value


class Service(BaseModel):
    """A sidecar the tests talk to (a local httpbin for requests), on an internal network (layers/services.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z][a-z0-9-]{0,30}$")
    hosts: list[str] = Field(min_length=1)
    pip_packages: list[str] = Field(default_factory=list)
    command: list[str] = Field(min_length=1)
    port: int = Field(ge=1, le=65535)
    tls_command: list[str] | None = None  # run beside `command`, serving TLS with the image's certificate
    tls_port: int | None = Field(default=None, ge=1, le=65535)
    # CA bundles the tests read instead of the environment variables (a vendored cacert.pem), relative
    # to /testbed or absolute, globs allowed: the test CA is appended to those that exist.
    ca_files: list[Annotated[str, Field(pattern=r"^[\w./*-]+$")]] = Field(default_factory=list)
    suite: str | None = None  # the base image's Debian suite (default: the default base)


class EnvSpec(BaseModel):
    """One layer of a spec. Every field is optional: an unset field leaves the layer below it."""

    model_config = ConfigDict(extra="forbid")

    python: str | None = None
    python_min: str | None = None
    system_packages: list[str] | None = None
    extra_system_packages: list[str] | None = None  # added to system_packages (repo-specific ones)
    requirements: list[str] | None = None
    pip_packages: list[str] | None = None
    pre_install: list[str] | None = None
    install: list[str] | None = None
    # The version's dependencies in a layer its instances share (layers/python_env.py _deps_layer): the
    # repository at the task's environment_setup_commit through pre_install and install, the project
    # then uninstalled and its tree removed. Each instance is still built on the env layer alone, then
    # written over that one: its layer holds only what differs.
    deps_layer: bool | None = None
    env: dict[str, str] | None = None
    test_env: dict[str, str] | None = None
    pre_test: list[str] | None = None
    test_cmd: str | None = None
    log_parser: str | None = None
    directives: Literal["paths", "django"] | None = None
    test_timeout: int | None = None
    cpus: float | None = None
    services: list[Service] | None = None  # sidecars the tests reach by host name (layers/services.py)

    @field_validator("python", "python_min", mode="before")
    @classmethod
    def _version_text(cls, value: Any) -> Any:
        if isinstance(value, float):
            raise ValueError(f"Python version {value!r} must be a string (quote it: \"3.10\" is not 3.1)")  # noqa: TRY004 (pydantic wants ValueError)
        if isinstance(value, str) and not re.fullmatch(r"\d+\.\d+", value):
            raise ValueError(f"Python version {value!r} must look like \"3.9\"")
        return value

    @field_validator("system_packages", "extra_system_packages", "requirements", "pre_install",
                     "install", "pre_test", mode="before")
    @classmethod
    def _lists(cls, value: Any) -> Any:
        return _str_list(value)

    @field_validator("env", "test_env", mode="before")
    @classmethod
    def _env_text(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {str(k): str(v) for k, v in value.items()}
        return value

    def fields_set(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in type(self).model_fields if getattr(self, name) is not None}


class PythonImage(BaseModel):
    """A Python our images can provide: the Debian suite whose python3 it is, or an image to pull."""

    model_config = ConfigDict(extra="forbid")

    python: str
    suite: str
    pull: str | None = None
    debian_packages: list[str] = Field(default_factory=list)
    # Not the suite's python3: `uv python install` fetches it (python-build-standalone) on top of
    # the suite. Only offered when downloads are allowed (the network reaches them).
    download: bool = False

    @property
    def version(self) -> tuple[int, int]:
        return _version(self.python)


class ResolvedSpec(BaseModel):
    """Everything needed to build a task's environment and run its tests."""

    repo: str  # owner/name
    version: str | None
    instance_id: str
    base_commit: str | None
    environment_setup_commit: str | None
    python_requested: str
    python_used: str
    fallback: bool
    suite: str
    pull: str | None
    python_download: bool  # python_used is fetched with `uv python install`, not the suite's python3
    python_debian_packages: list[str]
    system_packages: list[str]
    requirements: list[str]
    requirements_commit: str | None  # where `requirements` are read: environment_setup_commit or base
    pip_packages: list[str]
    pre_install: list[str]
    install: list[str]
    deps_commit: str | None  # where the deps layer installs the dependencies from (deps_layer), else None
    env: dict[str, str]
    test_env: dict[str, str]
    pre_test: list[str]
    test_cmd: str
    log_parser: str
    directives: Literal["paths", "django"]
    test_timeout: int
    cpus: float | None
    services: list[Service] = Field(default_factory=list)
    layers: list[str]  # where each layer came from, lowest first
    notes: list[str] = Field(default_factory=list)  # what a task's config asked that we cannot do

    def env_payload(self) -> dict[str, Any]:
        """What defines the env image (not the repository's install, not the test command)."""
        return {
            "schema": SCHEMA,
            "suite": self.suite,
            "python": self.python_used,
            # Only when set: the keys of every image built before this field existed stay valid.
            **({"python_download": "uv"} if self.python_download else {}),
            "python_debian_packages": sorted(set(self.python_debian_packages)),
            "system_packages": sorted(set(self.system_packages)),
            # Requirement files are read from the repository: their source is part of the env.
            "requirements": ({"repo": self.repo, "commit": self.requirements_commit, "files": self.requirements}
                             if self.requirements else None),
            "pip_packages": list(self.pip_packages),  # order kept: one pip command, but be safe
            "env": dict(sorted(self.env.items())),
        }

    def instance_payload(self) -> dict[str, Any]:
        return {
            "env": self.env_key(),
            "repo": self.repo,
            "base_commit": self.base_commit,
            "pre_install": list(self.pre_install),
            "install": list(self.install),
            # Only when set: the keys of every instance built before this field existed stay valid.
            **({"deps_commit": self.deps_commit} if self.deps_commit else {}),
        }

    def env_key(self) -> str:
        return _digest(self.env_payload())

    def instance_key(self) -> str:
        return _digest(self.instance_payload())


def _digest(payload: dict[str, Any]) -> str:
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _version(text: str) -> tuple[int, int]:
    major, minor = text.split(".")[:2]
    return int(major), int(minor)
