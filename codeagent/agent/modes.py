"""The agent's work mode: `normal` (every tool) or `plan` (ask/plan: reading only).

Which tools plan mode offers is data in tools/*.yaml: a tool whose spec says `read_only: true`
(unless `plan: false`, as submit's), and a tool that can write whose `plan:` names a check that
lets only its reading calls through (the editor's `view`, read-only shell commands). The conversation
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
    return [spec for spec in tools.specs(plan=mode == PLAN) if only is None or _name(spec) in only]


def refusal(tools: ToolRegistry, mode: str, name: str, arguments: dict | None = None,
            only: frozenset[str] | None = None) -> str | None:
    """Why a call is not run in this mode (a tool this turn's command does not allow, a tool or a call plan
    mode does not offer), or None."""
    if only is not None and name not in only:
        return f"Not run: this turn's command allows only the tools {', '.join(sorted(only))}."
    if mode != PLAN:
        return None
    why = tools.plan_refusal(name, arguments or {})
    if why is None:
        return None
    return (f"Not run: plan mode is on, so nothing may be changed: {why} Read, search and explain or plan in "
            "plain text instead; the user switches plan mode off to let you act.")


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
