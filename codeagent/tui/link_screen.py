"""A link in the model's text opens only after the user has seen where it goes, and only http(s):
a `file:`, `javascript:` or custom-scheme link could start a program or read a local file."""

from __future__ import annotations

from typing import ClassVar
from urllib.parse import urlsplit

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from ..visible import visible

OPENABLE_SCHEMES = ("http", "https")


def openable(url: str) -> bool:
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return False
    return parts.scheme.lower() in OPENABLE_SCHEMES and bool(parts.netloc)


class LinkScreen(ModalScreen[bool]):
    """Shows the whole URL; True: open it in the browser."""

    DEFAULT_CSS = """
    LinkScreen { align: center middle; }
    LinkScreen > #dialog { width: 100%; max-width: 100; height: auto; border: round $warning;
                           background: $surface; padding: 0 1; }
    LinkScreen #title { text-style: bold; color: $warning; margin: 0 0 1 0; }
    LinkScreen #buttons { height: auto; margin: 1 0 0 0; }
    LinkScreen #buttons Button { margin: 0 1 0 0; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("o", "open", "open"),
        Binding("n,escape", "cancel", "cancel"),
    ]

    def __init__(self, url: str):
        super().__init__()
        self.url = url

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Content("Open this link in your browser?"), id="title")
            yield Static(Content.styled(visible(self.url), "bold"), id="url")
            with Horizontal(id="buttons"):
                yield Button(Content("Open [o]"), id="open", variant="warning", compact=True)
                yield Button(Content("Cancel [n]"), id="cancel", variant="primary", compact=True)

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "open")

    def action_open(self) -> None:
        self.dismiss(True)

    def action_cancel(self) -> None:
        self.dismiss(False)
