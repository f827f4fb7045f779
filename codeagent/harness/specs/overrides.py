"""A task's own install config (ours or SWE-bench / SWE-rebench field names) as a spec layer."""

from __future__ import annotations

import re
import shlex
from typing import Any

from ...task import Task
from .files import _layer
from .model import EnvSpec, _str_list, task_mapping

_PARSER_PREFIX = "parse_log_"


def task_override(task: Task) -> tuple[EnvSpec | None, list[str]]:
    """The task's own install config as a layer, and notes on what in it we cannot honour."""
    raw = task.install_config if task.install_config is not None else task.environment
    if raw is None:
        return None, []
    return _normalize_override(task_mapping(raw, task.instance_id, "install_config"), task.instance_id)


def _normalize_override(raw: dict[str, Any], instance_id: str) -> tuple[EnvSpec, list[str]]:
    out: dict[str, Any] = {}
    notes: list[str] = []
    own = set(EnvSpec.model_fields)
    conda_packages: list[str] = []
    for key, value in raw.items():
        if value is None:
            continue
        if key in ("packages",):  # SWE-bench: "requirements.txt" | "environment.yml" | conda packages
            text = str(value).strip()
            if text == "requirements.txt":
                out.setdefault("requirements", raw.get("reqs_path") or ["requirements.txt"])
            elif text == "environment.yml":
                notes.append("packages: environment.yml needs conda, which these images do not have; "
                             "list its packages as pip_packages instead")
            elif text:
                conda_packages = shlex.split(text)
        elif key == "reqs_path":
            out["requirements"] = value
        elif key == "env_yml_path":
            notes.append("env_yml_path ignored: conda environments are not supported")
        elif key == "eval_commands":
            test_env, pre_test = _split_exports(_str_list(value))
            if test_env:
                out["test_env"] = {**out.get("test_env", {}), **test_env}
            if pre_test:
                out["pre_test"] = pre_test
        elif key in ("env_vars_test",):
            out["test_env"] = {**out.get("test_env", {}), **value}
        elif key in ("env_vars",):
            out["env"] = value
        elif key == "nano_cpus":
            out["cpus"] = float(value) / 1e9
        elif key in ("apt-pkgs", "apt_packages"):
            out["extra_system_packages"] = _str_list(value)
        elif key == "test_cmd" and isinstance(value, list):
            out["test_cmd"] = "; ".join(value)
        elif key == "log_parser" and isinstance(value, str):
            out["log_parser"] = value.removeprefix(_PARSER_PREFIX)
        elif key == "pip_packages" and isinstance(value, str):
            out["pip_packages"] = shlex.split(value)
        elif key in ("no_use_env", "execute_test_as_nonroot"):
            if value:
                notes.append(f"{key} ignored")
        elif key in own or key == "on_python":
            out[key] = value
        else:
            notes.append(f"unknown install_config key {key!r} ignored")
    if conda_packages:
        out["pip_packages"] = conda_packages + list(out.get("pip_packages") or [])
    layer, on_python = _layer(out, f"task {instance_id}: install_config")
    if on_python:
        notes.append("on_python in a task's install_config is ignored")
    return layer, notes


def _split_exports(commands: list[str]) -> tuple[dict[str, str], list[str]]:
    """`export A=b` lines become test_env; the other commands stay commands."""
    env: dict[str, str] = {}
    rest: list[str] = []
    for command in commands:
        match = re.fullmatch(r"\s*export\s+([A-Za-z_][A-Za-z0-9_]*)=(.*)", command)
        if match:
            try:
                words = shlex.split(match.group(2))
            except ValueError:
                words = []
            if len(words) == 1 or match.group(2) == "":
                env[match.group(1)] = words[0] if words else ""
                continue
        rest.append(command)
    return env, rest
