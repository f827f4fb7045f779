"""Configuration: defaults < user file < project file < --config file < command-line flags.

User file: ~/.config/codeagent/config.yaml (or $CODEAGENT_CONFIG). Project file: .codeagent.yaml
at the repository root. Unknown keys are errors that name the file and the key.

The project file is the repository's word, not the user's: until the user trusts the repository
(`--trust`, `trusted_projects` in the user file, or the TUI's question) it may set only the keys in
REPOSITORY_MAY_SET; the others are ignored with a warning.

One job per module (every public name is imported from here):
    settings.py   the sections and `Config` (pydantic, unknown keys refused), ConfigError
    files.py      where the config files are, and reading one
    loading.py    the layers merged into a Config; `--set` and flag overrides
    trust.py      what an untrusted repository may set; trusting a repository
    redact.py     secrets in MCP servers' args and URLs hidden for the trajectory
"""

from __future__ import annotations

from .files import PROJECT_FILE, user_config_folder, user_config_path
from .loading import flag_overrides, load_config, parse_overrides, untrusted_settings
from .redact import HIDDEN, hide_secret_args, hide_secret_url
from .settings import (
    AgentSettings,
    Config,
    ConfigError,
    DockerSize,
    HookCommand,
    HookMatcher,
    HookSettings,
    ImageSettings,
    LimitSettings,
    McpServer,
    McpSettings,
    ModelSettings,
    Positive,
    SandboxSettings,
    ScalingSettings,
    WebFetchSettings,
)
from .trust import REPOSITORY_MAY_SET, repository_trusted, trust_project

__all__ = [
    "HIDDEN", "PROJECT_FILE", "REPOSITORY_MAY_SET", "AgentSettings", "Config", "ConfigError", "DockerSize",
    "HookCommand", "HookMatcher", "HookSettings", "ImageSettings", "LimitSettings", "McpServer", "McpSettings",
    "ModelSettings", "Positive", "SandboxSettings", "ScalingSettings", "WebFetchSettings", "flag_overrides",
    "hide_secret_args", "hide_secret_url", "load_config", "parse_overrides", "repository_trusted", "trust_project",
    "untrusted_settings", "user_config_folder", "user_config_path",
]
