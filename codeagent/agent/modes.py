"""The agent's work mode: `normal` (every tool) or `plan` (ask/plan: read-only tools only).

Which tools plan mode offers is data: a tool whose spec says `read_only: true`. The conversation
is told about the mode where it changes (a message from prompts/mode.j2), so a switch keeps the
same conversation going and the model knows what it may do now.
"""

from __future__ import annotations

import re

from ..models.tokens import message_text
from ..tools.registry import ToolRegistry
from .prompts import render

NORMAL, PLAN = "normal", "plan"
MODES = (NORMAL, PLAN)
_MARK = re.compile(r"^\[(normal|plan) mode\]", re.MULTILINE)  # what prompts/mode.j2 and system.j2 start it with


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}: one of {', '.join(MODES)}")
    return mode


def offered_specs(tools: ToolRegistry, mode: str, only: frozenset[str] | None = None) -> list[dict]:
    """The tool specs the model is given in this mode (`only`: a custom command's allowed-tools)."""
    specs = [spec for spec in tools.specs() if only is None or _name(spec) in only]
    if mode != PLAN:
        return specs
    return [spec for spec in specs if tools.read_only(_name(spec))]


def refusal(tools: ToolRegistry, mode: str, name: str, only: frozenset[str] | None = None) -> str | None:
    """Why a call is not run in this mode (the model asked for a tool it was not offered), or None."""
    if only is not None and name not in only:
        return f"Not run: this turn's command allows only the tools {', '.join(sorted(only))}."
    if mode == PLAN and not tools.read_only(name):
        return (f"Not run: plan mode is on, so only read-only tools are offered and `{name}` changes files or runs "
                "commands. Explain or plan in plain text instead; the user switches plan mode off to let you act.")
    return None


def told_mode(messages: list[dict]) -> str:
    """The mode the conversation was last told about (none: normal)."""
    for message in reversed(messages):
        if message.get("role") in ("system", "user"):
            found = _MARK.findall(message_text(message.get("content")))
            if found:
                return found[-1]
    return NORMAL


def switch_messages(messages: list[dict], mode: str, prompts_dir: str | None) -> list[dict]:
    """A user message telling the model the mode changed, when it did (else none)."""
    if told_mode(messages) == mode:
        return []
    return [{"role": "user", "content": render("mode", prompts_dir, plan=mode == PLAN)}]


def _name(spec: dict) -> str:
    function = spec.get("function", spec)
    return str(function.get("name", ""))
