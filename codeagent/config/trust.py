"""What an untrusted repository's .codeagent.yaml may set (REPOSITORY_MAY_SET), whether a repository is
trusted, and trusting one in the user's file."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal, cast

import yaml

from ..nested import deep_merge
from .files import read_config_file, user_config_path
from .settings import Config, ConfigError

# What an untrusted repository's .codeagent.yaml may set: how the work is done, never whom it talks
# to (model name, endpoint), where it runs or what it can reach (sandbox, mounts, network, image),
# what the host reads or writes (prompts_dir, trajectories_dir), how many runs it pays for
# (candidates, attempts, models), what is left out of the patch (patch_exclude, scratch_dir: "*.py" would
# drop the agent's fix in silence) or whom it trusts. Any key not listed, present or future, needs trust.
# "lower": the repository may tighten the limit the user has, not raise it.
REPOSITORY_MAY_SET: dict[str, Literal["any", "lower"]] = {
    "limits.max_steps": "lower",
    "limits.max_cost": "lower",
    "limits.max_seconds": "lower",
    "limits.max_format_errors": "any",
    "limits.command_timeout": "any",
    "limits.max_patch_bytes": "lower",
    "limits.max_tool_calls": "lower",
    "limits.max_tool_calls_per_reply": "lower",
    "model.temperature": "any",
    "model.top_p": "any",
    "model.max_tokens": "any",
    "model.seed": "any",
    "model.native_tools": "any",
    "model.context_tokens": "any",
    "agent.tools": "any",
    "agent.review_on_submit": "any",
    "agent.observation_chars": "any",
    "agent.localize": "any",
    "scaling.temperatures": "any",
    "scaling.seeds": "any",
    "scaling.verifiers": "any",
    "scaling.policy": "any",
    "scaling.top_k": "any",
    "scaling.test_command": "any",
}


def repository_trusted(config: Config, repo: str | Path | None) -> bool:
    """Whether `repo` is trusted: in trusted_projects (load_config adds it there for --trust)."""
    return repo is not None and Path(repo).is_dir() and trusted(Path(repo), [{"trusted_projects": config.trusted_projects}])


def trust_project(repo: str | Path) -> Path:
    """Add `repo` to trusted_projects in the user file; the rest of the file (comments too) stays."""
    path = user_config_path()
    entry = str(Path(repo).resolve())
    data = read_config_file(path) if path.is_file() else {}
    trusted = data.get("trusted_projects") or []
    if not isinstance(trusted, list):
        raise ConfigError(f"{path}: trusted_projects must be a list of paths")
    if entry in trusted:
        return path
    wanted = {**data, "trusted_projects": [*trusted, entry]}
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    item = "- " + yaml.safe_dump(entry, default_style="'").splitlines()[0] + "\n"
    if "trusted_projects" not in data:
        text += ("" if not text or text.endswith("\n") else "\n") + "trusted_projects:\n" + item
    else:  # an existing block list gets the entry at its end; anything else is written anew
        block = re.search(r"^trusted_projects:[ \t]*(#.*)?\n((?:[ \t]*-.*\n|[ \t]*#.*\n)*)", text, re.MULTILINE)
        indent = re.search(r"^([ \t]*)-", block[2], re.MULTILINE) if block else None
        text = text[:block.end()] + (indent[1] if indent else "") + item + text[block.end():] if block else ""
    try:
        edited = yaml.safe_load(text) == wanted
    except yaml.YAMLError:
        edited = False
    if not edited:
        text = yaml.safe_dump(wanted, sort_keys=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def trusted(repo: Path, layers: list[dict[str, Any]]) -> bool:
    here = repo.resolve()
    for layer in layers:
        for entry in layer.get("trusted_projects") or []:
            if isinstance(entry, str) and Path(os.path.expanduser(entry)).resolve() == here:
                return True
    return False


def repository_part(merged: dict[str, Any], layer: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The part of an untrusted project layer it may set, and the dotted keys left out."""
    before = Config.model_validate(merged)
    after = Config.model_validate(deep_merge(dict(merged), layer))
    kept: dict[str, Any] = {}
    ignored: list[str] = []
    for key, value in layer.items():
        leaves = value.items() if isinstance(value, dict) and key in Config.model_fields else [(None, value)]
        for leaf, leaf_value in leaves:
            dotted = key if leaf is None else f"{key}.{leaf}"
            rule = REPOSITORY_MAY_SET.get(dotted)
            if rule == "lower":
                section = key
                if getattr(getattr(after, section), cast(str, leaf)) > getattr(getattr(before, section), cast(str, leaf)):
                    rule = None
            if rule is None:
                ignored.append(dotted)
            elif leaf is None:
                kept[key] = leaf_value
            else:
                kept.setdefault(key, {})[leaf] = leaf_value
    return kept, ignored

