"""Load tool specs from the top-level tools/ folder and run calls against them.

A spec is YAML: name, description, JSON-schema parameters, and `implementation: module:function`.
Adding a tool is adding a file there (and its function): the agent loop does not change.
"""

from __future__ import annotations

import functools
import importlib
import time
from pathlib import Path

import yaml

from ..assets import asset_dir
from .base import PlanUse, Tool, ToolContext, ToolError, ToolResult


class ToolSpecError(ValueError):
    pass


def load_tool(path: Path) -> Tool:
    try:
        data = yaml.safe_load(path.read_text())
        module_name, _, function_name = data["implementation"].partition(":")
        function = getattr(importlib.import_module(module_name), function_name)
        read_only = _flag(data.get("read_only", False), "read_only")
        return Tool(name=data["name"], description=data["description"].strip(),
                    parameters=data.get("parameters") or {"type": "object", "properties": {}},
                    function=function, read_only=read_only, plan=_plan(data.get("plan"), read_only),
                    opt_in=_flag(data.get("opt_in", False), "opt_in"))
    except (KeyError, TypeError, ValueError, ImportError, AttributeError, yaml.YAMLError) as exc:
        raise ToolSpecError(f"bad tool spec {path}: {exc!r}") from exc


def _plan(value, read_only: bool) -> PlanUse | bool | None:
    """A spec's `plan:`: absent (plan mode offers the tool when it is read-only), false (never), or,
    for a tool that can write, {check: module:function, description, parameters?}."""
    if value is None or value is False:
        return value
    if value is True and read_only:
        return True
    if not isinstance(value, dict) or "check" not in value or "description" not in value:
        raise ValueError("plan must be false, or {check: module:function, description: ...} for a tool that "
                         "can write")
    module_name, _, function_name = value["check"].partition(":")
    return PlanUse(description=str(value["description"]).strip(), parameters=value.get("parameters"),
                   check=getattr(importlib.import_module(module_name), function_name))


def _flag(value, key: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{key} must be true or false, not {value!r}")
    return value


@functools.lru_cache(maxsize=8)
def read_only_tools(folder: Path | None = None) -> frozenset[str]:
    """The tools whose spec says `read_only: true` (they change no file)."""
    return frozenset(name for name, path in available_tools(folder).items() if load_tool(path).read_only)


def available_tools(folder: Path | None = None) -> dict[str, Path]:
    root = folder or asset_dir("tools")
    return {path.stem: path for path in sorted(root.glob("*.yaml"))}


class ToolRegistry:
    def __init__(self, names: list[str] | None = None, folder: Path | None = None,
                 enabled: frozenset[str] | set[str] = frozenset()):
        """`names` (default all) of the tools in `folder`; a spec with `opt_in: true` only when it is in
        `enabled` (the user's config turned it on), named or not."""
        specs = available_tools(folder)
        wanted = names or list(specs)
        unknown = [name for name in wanted if name not in specs]
        if unknown:
            raise ToolSpecError(f"unknown tool(s) {', '.join(unknown)}; available: {', '.join(specs)}")
        tools = (load_tool(specs[name]) for name in wanted)
        self.tools = {tool.name: tool for tool in tools if not tool.opt_in or tool.name in enabled}

    def add(self, tool: Tool) -> bool:
        """Add a tool from elsewhere (an MCP server's); False when the name is taken."""
        if tool.name in self.tools:
            return False
        self.tools[tool.name] = tool
        return True

    def remove(self, name: str) -> None:
        self.tools.pop(name, None)

    def specs(self, plan: bool = False) -> list[dict]:
        """Every tool's spec; with `plan`, those plan mode offers, as it offers them."""
        return [tool.spec(plan) for tool in self.tools.values() if not plan or tool.in_plan]

    def names(self) -> list[str]:
        return list(self.tools)

    def read_only(self, name: str) -> bool:
        """True for a tool whose spec says `read_only: true`; an unknown name is not."""
        tool = self.tools.get(name)
        return bool(tool and tool.read_only)

    def opt_in(self, name: str) -> bool:
        """True for a tool the user's config turned on (`opt_in: true`: web_fetch reaches the network from
        the host), which approval asks about even where plan mode found the call read-only."""
        tool = self.tools.get(name)
        return bool(tool and tool.opt_in)

    def plan_refusal(self, name: str, arguments: dict) -> str | None:
        """Why plan mode does not run this call, or None (a tool plan mode offers, a call its check passes)."""
        tool = self.tools.get(name)
        if tool is None or not tool.in_plan:
            return f"`{name}` is not offered in plan mode."
        return tool.plan.check(arguments) if isinstance(tool.plan, PlanUse) else None

    def call(self, name: str, arguments: dict, context: ToolContext) -> ToolResult:
        """Run one call. Bad calls come back as error results, never as exceptions."""
        tool = self.tools.get(name)
        if tool is None:
            return ToolResult(f"Unknown tool {name!r}. Available tools: {', '.join(self.tools)}.", error=True)
        problem = _validate(arguments, tool.parameters)
        if problem:
            return ToolResult(f"Invalid arguments for {name}: {problem}", error=True)
        started = time.monotonic()
        try:
            result = tool.function(context, **arguments)
        except ToolError as exc:
            result = ToolResult(str(exc), error=True)
        if isinstance(result, str):
            result = ToolResult(result)
        if not result.seconds:
            result.seconds = time.monotonic() - started
        return result


def _validate(arguments: dict, schema: dict) -> str | None:
    import jsonschema

    try:
        jsonschema.validate(arguments, schema)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(part) for part in exc.absolute_path)
        return f"{exc.message}" + (f" (at {where})" if where else "")
    return None
