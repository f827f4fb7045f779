"""codeagent's events as ACP session updates. Runs on the session's thread, so that an edit's file can be
read from the sandbox before and after it ran (the editor shows the diff)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from acp import helpers

from ..events import Event, ModelDelta, ModelOutput, Observed, ToolCalled
from ..run.session import Notice
from ..run.session.approval import EDIT_COMMANDS, _edit_path, classify
from .editor_files import host_path

OUTPUT_LIMIT = 20_000  # characters of a tool's output shown in the editor (the model saw all of it)
KINDS = {"bash": "execute", "web_fetch": "fetch", "search": "search", "find_file": "search", "submit": "other"}


def tool_kind(tool: str, arguments: dict[str, Any]) -> str:
    if tool == "editor":
        return "edit" if arguments.get("command") in EDIT_COMMANDS else "read"
    if tool in KINDS:
        return KINDS[tool]
    return "read" if classify(tool, arguments) == "read" else "other"


def tool_title(tool: str, arguments: dict[str, Any]) -> str:
    if tool == "bash":
        return str(arguments.get("command", "")).strip().splitlines()[0][:200] if arguments.get("command") else "bash"
    if tool == "editor":
        return f"{arguments.get('command', 'editor')} {_edit_path(arguments)}"
    return tool


class Translator:
    """One session's events -> updates. `read_file(path) -> bytes` reads the sandbox (OSError: none);
    `root`: the user's folder, where the editor shows an edited file; `workdir()`: the sandbox's folder for
    it. A path outside `root` (the model's `/etc/...`, `../../x`) is shown neither as a location nor a diff."""

    def __init__(self, root: str, read_file, workdir=lambda: "/testbed"):
        self.root = Path(root)
        self.read_file = read_file
        self.workdir = workdir
        self._streamed_steps: set[int] = set()  # steps whose text came as deltas
        self.last_call = ""  # the latest tool call's id (an approval asked is about it)
        self._before: dict[str, tuple[str, Path, str | None]] = {}  # an edit's path, where the editor shows
        # it and the file before it ran, by call id

    def __call__(self, event: Event) -> list:
        if isinstance(event, ModelDelta) and event.text:
            self._streamed_steps.add(event.step)
            return [helpers.update_agent_message_text(event.text)]
        if isinstance(event, ModelOutput) and event.text and event.step not in self._streamed_steps:
            return [helpers.update_agent_message_text(event.text)]  # a model that does not stream
        if isinstance(event, ToolCalled):
            self.last_call = event.call_id
            kind = tool_kind(event.tool, event.arguments)
            locations = None
            shown = self.shown(event.arguments) if event.tool == "editor" else None
            if shown is not None:
                path = _edit_path(event.arguments, self.workdir())
                locations = [{"path": str(shown)}]
                if kind == "edit":
                    self._before[event.call_id] = (path, shown, self._read(path))
            return [helpers.start_tool_call(event.call_id, tool_title(event.tool, event.arguments), kind=kind,
                                            status="pending", raw_input=event.arguments, locations=locations)]
        if isinstance(event, Observed):
            content = [helpers.tool_content(helpers.text_block(_clip(event.output)))] if event.output else []
            if event.call_id in self._before:
                content += self._diff(event, *self._before.pop(event.call_id))
            status = "failed" if event.error or event.interrupted or event.timed_out else "completed"
            return [helpers.update_tool_call(event.call_id, status=status, content=content,
                                             raw_output={"exit_code": event.exit_code, "approval": event.approval})]
        if isinstance(event, Notice) and event.text:  # what the TUI would say: problems as the reply, news aside
            if event.level in ("warning", "error"):
                return [helpers.update_agent_message_text(f"\n[{event.level}] {event.text}\n")]
            return [helpers.update_agent_thought_text(event.text + "\n")]
        return []

    def shown(self, arguments: dict[str, Any]) -> Path | None:
        """Where the editor shows an editor call's file (None: no path, or one outside the folder)."""
        path = arguments.get("path")
        return host_path(self.root, self.workdir(), path) if isinstance(path, str) and path else None

    def _diff(self, event: Observed, path: str, shown: Path, old: str | None) -> list:
        if event.error:
            return []
        new = self._read(path)
        if new is None or new == old:
            return []
        return [helpers.tool_diff_content(str(shown), new, old)]

    def _read(self, path: str) -> str | None:
        try:
            return self.read_file(path).decode("utf-8")
        except (OSError, UnicodeDecodeError, ValueError):
            return None


def _clip(text: str) -> str:
    return text if len(text) <= OUTPUT_LIMIT else text[:OUTPUT_LIMIT] + f"\n… ({len(text) - OUTPUT_LIMIT} more characters)"
