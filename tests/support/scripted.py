"""Turns for the scripted model (codeagent.models.ScriptedModel): an assistant message that calls one tool or
answers in plain text, and the calc repository the TUI and session tests fix."""

from __future__ import annotations

import itertools
import json

from codeagent.models import ScriptedModel

_ids = itertools.count(1)
FILES = {"calc.py": "def add(a, b):\n    return a - b\n", "README.md": "calc\n"}


def call(name: str, text: str = "", /, **arguments) -> dict:
    """The assistant says `text` and calls tool `name` with `arguments` (`text=` as a keyword is an argument)."""
    return {"role": "assistant", "content": text, "tool_calls": [
        {"id": f"call_{next(_ids)}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def fix_add(text: str = "") -> dict:
    return call("editor", text, command="str_replace", path="calc.py", old_str="a - b", new_str="a + b")


def answer(text: str) -> dict:
    return {"role": "assistant", "content": text}


def native_call(call_id: str, name: str, arguments: dict) -> dict:
    """A tool call as an assistant message holds it (OpenAI's format)."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


class BySeed(ScriptedModel):
    """Candidates differ by their sampling seed: each seed plays its own script (None: follow-ups)."""

    def __init__(self, scripts):
        super().__init__([])
        self.scripts = scripts

    def complete(self, messages, tools, sampling):
        self.turns = self.scripts[sampling.seed]
        return super().complete(messages, tools, sampling)
