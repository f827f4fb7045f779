"""The input box: Enter sends; Ctrl-J (or Shift+Enter where the terminal tells it apart, or a
backslash before Enter) starts a new line; pasted text keeps its lines. Up on an empty box brings
back the previous messages."""

from __future__ import annotations

from textual import events
from textual.message import Message
from textual.widgets import TextArea

NEWLINE_KEYS = {"ctrl+j", "shift+enter", "alt+enter"}


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

    async def _on_key(self, event: events.Key) -> None:
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
                self.post_message(self.Submitted(text))
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
