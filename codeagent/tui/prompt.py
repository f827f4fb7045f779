"""The input box: Enter sends; Ctrl-J (or Shift+Enter where the terminal tells it apart, or a
backslash before Enter) starts a new line; pasted text keeps its lines. Up on an empty box brings
back the previous messages. After `@`, the rest of a repository path is suggested (dim); Right or
Tab takes it. A popup (completion_menu.py) lists the commands that match a typed `/word` and the
paths that match an `@mention`: Up/Down move in it, Enter or Tab take an entry, Esc closes it."""

from __future__ import annotations

import re
from collections.abc import Callable

from textual import events
from textual.message import Message
from textual.widgets import TextArea

from .completion_menu import CompletionMenu, Entry, command_entries, path_entries

NEWLINE_KEYS = {"ctrl+j", "shift+enter", "alt+enter"}
_MENTION_AT_CURSOR = re.compile(r"(?:^|\s)@(\S*)$")
_COMMAND_WORD = re.compile(r"/[A-Za-z0-9_:-]*")  # custom (a:b) and MCP (mcp__s__p) names too


class PromptInput(TextArea):
    DEFAULT_CSS = """
    PromptInput { height: auto; min-height: 3; max-height: 10; border: round $primary 60%; padding: 0 1; }
    PromptInput:focus { border: round $primary; }
    """

    class Submitted(Message):
        def __init__(self, text: str):
            super().__init__()
            self.text = text

    def __init__(self, **options):
        super().__init__(soft_wrap=True, tab_behavior="focus", show_line_numbers=False,
                         highlight_cursor_line=False, **options)
        self.sent: list[str] = []
        self._recall = 0
        self.complete_path: Callable[[str], str] | None = None  # `@prefix` -> what completes it
        self.list_paths: Callable[[], list[str]] | None = None  # the repository's paths, for the popup
        # more slash commands for the popup (name, arguments, what): custom commands, MCP prompts
        self.list_commands: Callable[[], list[tuple[str, str, str]]] | None = None
        self.menu: CompletionMenu | None = None
        self._replaced = ((0, 0), (0, 0))  # what the menu's entry replaces
        self._moved = False  # the user chose an entry with the arrows

    def update_suggestion(self) -> None:
        row, column = self.cursor_location
        before = self.document.get_line(row)[:column]
        match = _MENTION_AT_CURSOR.search(before)
        self.suggestion = self.complete_path(match.group(1)) if match and self.complete_path else ""
        self._offer(row, column, before, match)

    def _offer(self, row: int, column: int, before: str, match: re.Match | None) -> None:
        if self.menu is None:
            return
        entries: list[Entry] = []
        if row == 0 and _COMMAND_WORD.fullmatch(self.text):  # `/mo`, nothing else in the box
            try:
                extra = self.list_commands() if self.list_commands is not None else []
            except Exception:  # a hint while typing: never an error
                extra = []
            entries = command_entries(self.text, extra)
            self._replaced = ((0, 0), self.document.end)
        elif match and self.list_paths is not None:
            try:
                entries = path_entries(match.group(1), self.list_paths())
            except Exception:  # a hint while typing: never an error
                entries = []
            self._replaced = ((row, column - len(match.group(1)) - 1), (row, column))
            if [entry.value for entry in entries] == ["@" + match.group(1)]:
                entries = []  # typed in full
        if [entry.value for entry in entries] != [entry.value for entry in self.menu.entries]:
            self._moved = False
        self.menu.offer(entries)

    def _take(self, entry: Entry) -> None:
        start, end = self._replaced
        self.replace(entry.value, start, end)
        assert self.menu is not None  # only the open popup's entries are taken
        self.menu.hide()

    def _menu_key(self, key: str) -> bool:
        """A key the open popup takes: True when it was handled here."""
        menu = self.menu
        assert menu is not None  # called only while the popup is open
        if key in ("up", "down"):
            menu.move(-1 if key == "up" else 1)
            self._moved = True
            return True
        if key == "escape":
            menu.hide()
            return True
        entry = menu.chosen
        if key not in ("tab", "enter") or entry is None:
            return False
        if entry.kind == "command" and key == "enter":
            typed = self.text.strip().lower()
            if not self._moved and any(other.value.strip() == typed for other in menu.entries):
                menu.hide()
                return False  # `/mode` typed in full: Enter sends it
            self._take(entry)
            return entry.value.endswith(" ")  # a command without arguments is sent at once
        self._take(entry)
        return True

    async def _on_key(self, event: events.Key) -> None:
        if self.menu is not None and self.menu.shown and self._menu_key(event.key):
            event.stop()
            event.prevent_default()
            return
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            if self.text.endswith("\\") and self.cursor_location == self.document.end:
                self.action_delete_left()
                self.insert("\n")
                return
            text = self.text.strip()
            if text:
                self.sent.append(text)
                self._recall = 0
                self.clear()
                if self.menu is not None:
                    self.menu.hide()
                self.post_message(self.Submitted(text))
            return
        if event.key == "tab" and self.suggestion:
            event.stop()
            event.prevent_default()
            self.insert(self.suggestion)
            return
        if event.key in NEWLINE_KEYS:
            event.stop()
            event.prevent_default()
            self.insert("\n")
            return
        if event.key == "up" and self.sent and (not self.text or self._recall) and self.cursor_location[0] == 0:
            event.stop()
            event.prevent_default()
            self._recall = min(self._recall + 1, len(self.sent))
            self.load_text(self.sent[-self._recall])
            self.move_cursor(self.document.end)
            return
        self._recall = 0  # editing a recalled message makes it a new one
        await super()._on_key(event)
