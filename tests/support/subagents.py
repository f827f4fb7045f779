"""Scripts for a parent agent and its subagents: turns that call several tools, and one model that routes
each request to the parent's script or to its sub-task's."""

from __future__ import annotations

import itertools
import json

from codeagent.models import ScriptedModel

_ids = itertools.count(1)


def call(name: str, **arguments) -> tuple[str, dict]:
    return name, arguments


def reply(*calls: tuple[str, dict], text: str = "") -> dict:
    return {"role": "assistant", "content": text, "tool_calls": [
        {"id": f"call_{next(_ids)}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
        for name, arguments in calls]}


class Routed:
    """One model for the parent and its subagents: the parent's script, and one script per sub-task
    (a subagent's first user message is its task). Subagents may call it from several threads."""

    name = "scripted"

    def __init__(self, parent: list, children: dict[str, list]):
        self.parent = ScriptedModel(parent)
        self.children = {task: ScriptedModel(turns) for task, turns in children.items()}
        self.tools_offered: dict[str, list[str]] = {}

    def complete(self, messages, tools, sampling):
        if "subagent of codeagent" in messages[0]["content"]:
            task = messages[1]["content"]
            self.tools_offered[task] = [spec["function"]["name"] for spec in tools]
            return self.children[task].complete(messages, tools, sampling)
        return self.parent.complete(messages, tools, sampling)
