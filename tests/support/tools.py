"""The tool schemas a test offers a model: a shell and a submit, as the agent's own are shaped."""

from __future__ import annotations

BASH = {"type": "function", "function": {"name": "bash", "description": "Run a command.",
                                         "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                                                        "required": ["command"]}}}
SUBMIT = {"type": "function", "function": {"name": "submit", "description": "Finish.",
                                           "parameters": {"type": "object", "properties": {}}}}
TOOLS = [BASH, SUBMIT]


def closed(tool: dict) -> dict:
    """The schema with `additionalProperties: false`, as strict clients send it."""
    function = tool["function"]
    return {**tool, "function": {**function, "parameters": {**function["parameters"], "additionalProperties": False}}}
