"""The spec files in evals/environments/swebench/: read and validated into a SpecLibrary."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from ...assets import asset_dir
from .model import COMMON_FILE, EnvSpec, PythonImage, SpecError


class RepoSpecs(BaseModel):
    """One repository file: `repo`, `defaults`, `versions` (version -> layer, with `on_python`)."""

    repo: str
    path: str
    defaults: EnvSpec
    defaults_on_python: dict[str, EnvSpec]
    versions: dict[str, EnvSpec]
    versions_on_python: dict[str, dict[str, EnvSpec]]


class SpecLibrary(BaseModel):
    folder: str
    pythons: list[PythonImage]
    common: EnvSpec
    repos: dict[str, RepoSpecs]
    shared_system_packages: list[str] = []  # asked by some repositories only: a layer of their own
    system_exclude: list[str] = []  # dpkg path-exclude globs for every package the environments install

    def versions(self, repo: str) -> list[str]:
        return list(self.repos[repo].versions) if repo in self.repos else []


def spec_dir() -> Path:
    return asset_dir("evals") / "environments" / "swebench"


def _layer(data: Any, where: str) -> tuple[EnvSpec, dict[str, EnvSpec]]:
    """A layer and its `on_python` sub-layers."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SpecError(f"{where}: expected a mapping of spec fields, got {type(data).__name__}")
    data = dict(data)
    on_python = data.pop("on_python", None) or {}
    if not isinstance(on_python, dict):
        raise SpecError(f"{where}: on_python must map a Python version (a string) to spec fields")
    try:
        layer = EnvSpec.model_validate(data)
        subs = {}
        for python, sub in on_python.items():
            if not isinstance(python, str):
                raise SpecError(f"{where}: on_python key {python!r} must be a quoted string like \"3.9\"")
            subs[python] = EnvSpec.model_validate(sub or {})
    except ValidationError as err:
        raise SpecError(f"{where}: {err}") from None
    return layer, subs


def read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise SpecError(f"{path}: not valid YAML: {err}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a mapping at the top level")
    return data


def load_library(folder: Path | str | None = None) -> SpecLibrary:
    """Read every spec file in `folder` (default: the shipped evals/environments/swebench/)."""
    return _load_library(str(Path(folder) if folder else spec_dir()))


@functools.lru_cache(maxsize=8)
def _load_library(folder: str) -> SpecLibrary:
    root = Path(folder)
    common_path = root / COMMON_FILE
    if not common_path.is_file():
        raise SpecError(f"{common_path} is missing: it holds the Python table and the common defaults")
    common = read_yaml(common_path)
    try:
        pythons = [PythonImage.model_validate(entry) for entry in common.get("pythons") or []]
    except ValidationError as err:
        raise SpecError(f"{common_path}: pythons: {err}") from None
    if not pythons:
        raise SpecError(f"{common_path}: `pythons` lists no interpreter")
    common_layer, _ = _layer(common.get("defaults"), f"{common_path}: defaults")
    shared, exclude = common.get("shared_system_packages") or [], common.get("system_exclude") or []
    for key, value in (("shared_system_packages", shared), ("system_exclude", exclude)):
        if not isinstance(value, list) or not all(isinstance(item, str) and item.strip() for item in value):
            raise SpecError(f"{common_path}: {key} must be a list of strings")

    repos: dict[str, RepoSpecs] = {}
    for path in sorted(root.glob("*.yaml")):
        if path.name.startswith("_"):
            continue
        data = read_yaml(path)
        unknown = [key for key in data if key not in ("repo", "defaults", "versions") and not str(key).startswith("x-")]
        if unknown:
            raise SpecError(f"{path}: unknown top-level key(s) {unknown}; expected repo, defaults, versions "
                            "(and x-* for YAML anchors)")
        repo = data.get("repo")
        if not isinstance(repo, str) or "/" not in repo:
            raise SpecError(f"{path}: `repo` must be owner/name")
        if repo in repos:
            raise SpecError(f"{path}: repo {repo} is already described by {repos[repo].path}")
        defaults, defaults_on = _layer(data.get("defaults"), f"{path}: defaults")
        versions: dict[str, EnvSpec] = {}
        versions_on: dict[str, dict[str, EnvSpec]] = {}
        for version, layer in (data.get("versions") or {}).items():
            if not isinstance(version, str):
                raise SpecError(f"{path}: version {version!r} must be a quoted string (\"3.10\", not 3.10)")
            versions[version], versions_on[version] = _layer(layer, f"{path}: versions.{version}")
        repos[repo] = RepoSpecs(repo=repo, path=str(path), defaults=defaults, defaults_on_python=defaults_on,
                                versions=versions, versions_on_python=versions_on)
    return SpecLibrary(folder=str(root), pythons=pythons, common=common_layer, repos=repos,
                       shared_system_packages=shared, system_exclude=exclude)
