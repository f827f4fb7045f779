"""A list to choose one entry from with the arrow keys: /resume's saved sessions, /candidates'
candidates. Enter chooses (the screen returns the entry's key), Esc closes it (None)."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option


class PickScreen(ModalScreen[str | None]):
    DEFAULT_CSS = """
    PickScreen { align: center middle; }
    PickScreen > #dialog {
        width: 100%; max-width: 120; height: auto; max-height: 100%;
        border: round $accent; background: $surface; padding: 0 1;
    }
    PickScreen #title { text-style: bold; }
    PickScreen #columns { color: $text-muted; margin: 1 0 0 1; }
    PickScreen OptionList { height: auto; max-height: 20; border: none; padding: 0; }
    PickScreen #hint { color: $text-muted; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "close")]

    def __init__(self, title: str, columns: str, rows: list[tuple[str, str]], hint: str):
        """`rows`: (key, line); the key is what Enter returns."""
        super().__init__()
        self.title_text, self.columns, self.rows, self.hint = title, columns, rows, hint

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Content(self.title_text), id="title")
            yield Static(Content(self.columns), id="columns")
            yield OptionList(*(Option(Text(line, no_wrap=True, overflow="ellipsis"), id=key)
                               for key, line in self.rows), id="choices")
            yield Static(Content(self.hint), id="hint")

    def on_mount(self) -> None:
        choices = self.query_one(OptionList)
        choices.highlighted = 0
        choices.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option.id)

    def action_close(self) -> None:
        self.dismiss(None)
