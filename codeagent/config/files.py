"""Where the config files are (the user's, a repository's), and reading one as a mapping of sections."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from .settings import ConfigError

PROJECT_FILE = ".codeagent.yaml"


def user_config_path() -> Path:
    return Path(os.environ.get("CODEAGENT_CONFIG") or os.path.expanduser("~/.config/codeagent/config.yaml"))


def user_config_folder() -> Path:
    """The folder of the user's config file: its commands/ and skills/ are the user's own."""
    return user_config_path().parent


def read_config_file(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except UnicodeDecodeError:
        raise ConfigError(f"config file {path} is not UTF-8 text") from None
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        problem = str(exc).replace("\n", " ")
        raise ConfigError(f"config file {path} is not valid YAML: {problem}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping of sections, not {type(data).__name__}")
    return data

