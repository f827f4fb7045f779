"""A saved session's conversation as ACP session updates (`session/load` replays it to the editor), as the
TUI shows a resumed one: the issue, then each message and tool call with its output. Which ACP session is
which trajectory is kept in the trajectory store (`acp-sessions/`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from acp import helpers

from ..trajectory.schema import Trajectory
from .updates import Translator, _clip, tool_kind, tool_title

INDEX = "acp-sessions"


def remember(store_root: Path, session_id: str, trajectory_id: str) -> None:
    """The ACP session `session_id` is the trajectory `trajectory_id` (written once the run exists)."""
    folder = Path(store_root) / INDEX
    folder.mkdir(parents=True, exist_ok=True)
    (folder / _name(session_id)).write_text(trajectory_id, encoding="utf-8")


def recall(store_root: Path, session_id: str) -> str:
    """The trajectory of an ACP session; a trajectory id given as the session id is taken as it is."""
    try:
        return (Path(store_root) / INDEX / _name(session_id)).read_text(encoding="utf-8").strip()
    except OSError:
        return session_id


def _name(session_id: str) -> str:
    return "".join(char for char in session_id if char.isalnum() or char in "-_")[:128] or "_"


def replay(trajectory: Trajectory, translate: Translator) -> list:
    """The updates that show `trajectory`'s conversation again."""
    task = trajectory.task or {}
    updates: list = [helpers.update_user_message_text(str(task.get("problem_statement", "")).strip())]
    outputs = {message.get("tool_call_id"): message.get("content") for message in trajectory.messages
               if message.get("role") == "tool"}
    for message in trajectory.messages[2:]:  # after the system prompt and the rendered issue
        role, text = message.get("role"), _text(message.get("content"))
        if role == "user" and text:
            updates.append(helpers.update_user_message_text(text))
        elif role == "assistant":
            if text:
                updates.append(helpers.update_agent_message_text(text))
            updates += [update for call in message.get("tool_calls") or []
                        for update in _tool_call(call, _text(outputs.get(call.get("id"))), translate)]
    return updates


def _tool_call(call: dict, output: str, translate: Translator) -> list:
    function = call.get("function") or {}
    name = str(function.get("name") or "?")
    try:
        arguments: Any = json.loads(function.get("arguments") or "{}")
    except ValueError:
        arguments = {}
    arguments = arguments if isinstance(arguments, dict) else {}
    call_id = str(call.get("id") or "")
    shown = translate.shown(arguments) if name == "editor" else None
    return [helpers.start_tool_call(call_id, tool_title(name, arguments), kind=tool_kind(name, arguments),
                                    status="completed", raw_input=arguments,
                                    locations=[{"path": str(shown)}] if shown else None),
            helpers.update_tool_call(call_id, status="completed",
                                     content=[helpers.tool_content(helpers.text_block(_clip(output)))] if output else None)]


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict)).strip()
    return str(content or "").strip()
