"""The config's layers merged into a Config: defaults < user file < project file (only what it may set
while the repository is untrusted, config/trust.py) < --config file < command-line flags (`--set` pairs
and the commands' own flags). Every layer is checked as it is merged, so an error names its file."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ..nested import Conflict, deep_merge, put
from .files import PROJECT_FILE, read_config_file, user_config_path
from .settings import Config, ConfigError
from .trust import repository_part, repository_trusted, trusted


def load_config(repo: str | Path | None = None, config_file: str | Path | None = None,
                overrides: dict[str, Any] | None = None, *, trust: bool = False,
                warn: Callable[[str], None] | None = None) -> Config:
    """trust: the user trusts `repo` (--trust). Settings an untrusted project file may not set are
    left out and `warn` (default: stderr) gets one line naming them."""
    config, project, ignored = _load(repo, config_file, overrides, trust)
    if ignored:
        (warn or _to_stderr)(
            f"warning: ignoring {', '.join(ignored)} from {project}: only a trusted repository may set "
            f"{'it' if len(ignored) == 1 else 'them'} (pass --trust, or add the repository to trusted_projects "
            f"in {user_config_path()})")
    if trust and repo is not None and Path(repo).is_dir() and not repository_trusted(config, repo):
        config.trusted_projects.append(str(Path(repo).resolve()))  # what the repository's folders are read by
    return config


def untrusted_settings(repo: str | Path | None, config_file: str | Path | None = None,
                       overrides: dict[str, Any] | None = None) -> list[str]:
    """The project file's settings that need trust and would be ignored now ([]: nothing to ask)."""
    return _load(repo, config_file, overrides, trust=False)[2]


def _load(repo, config_file, overrides, trust) -> tuple[Config, Path | None, list[str]]:
    user = [(str(path), read_config_file(path)) for path in [user_config_path()] if path.is_file()]
    later = []
    if config_file is not None:
        path = Path(config_file)
        if not path.is_file():
            raise ConfigError(f"config file {config_file} does not exist")
        later.append((str(path), read_config_file(path)))
    later.append(("the command line", overrides or {}))
    merged: dict[str, Any] = {}
    for source, layer in user:
        _merge_checked(merged, layer, source)
    project = Path(repo) / PROJECT_FILE if repo is not None and Path(repo).is_dir() else None
    ignored: list[str] = []
    if project is not None and project.is_file():
        layer = read_config_file(project)
        _merge_checked(dict(merged), layer, str(project))  # errors name the file even for ignored keys
        if not trust and not trusted(Path(repo), [data for _, data in user + later]):
            layer, ignored = repository_part(merged, layer)
        _merge_checked(merged, layer, str(project))
    for source, layer in later:
        _merge_checked(merged, layer, source)
    return Config.model_validate(merged), project, ignored


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr)


def parse_overrides(pairs: list[str]) -> dict[str, Any]:
    """`section.key=value` pairs (values parsed as YAML) into a nested dict."""
    result: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        parts = key.strip().split(".")
        if not sep or not all(parts):
            raise ConfigError(f"--set {pair!r} is not of the form section.key=value")
        try:
            put(result, parts, yaml.safe_load(raw))
        except Conflict as conflict:
            raise ConfigError(f"--set {pair!r}: {conflict.part} is given a value and keys at once") from None
        except yaml.YAMLError:
            raise ConfigError(f"--set {pair!r}: the value is not valid YAML (quote it)") from None
    return result


def flag_overrides(settings: list[str], **flags: Any) -> dict[str, Any]:
    """`--set` pairs plus the command's own flags ({"model.name": value, ...}; None means unset)."""
    overrides = parse_overrides(settings)
    for dotted, value in flags.items():
        if value is None or value == "":
            continue
        section, _, key = dotted.partition("__")
        overrides.setdefault(section, {})[key] = value
    return overrides


def _merge_checked(into: dict[str, Any], layer: dict[str, Any], source: str) -> None:
    try:
        Config.model_validate(deep_merge(dict(into), layer))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg'].removeprefix('Value error, ')}"
                             for e in exc.errors())
        raise ConfigError(f"{source}: {problems}") from None
    deep_merge(into, layer)
