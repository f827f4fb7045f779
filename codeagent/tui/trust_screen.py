"""The question asked once per repository whose .codeagent.yaml sets what only a trusted one may."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import Button, Static


class TrustApp(App[bool | None]):
    """Returns True (trust and remember), False (ignore those settings this time) or None (quit)."""

    CSS = """
    Screen { align: center middle; }
    #dialog { width: 100%; max-width: 100; height: auto; border: round $warning; padding: 0 1; }
    #title { text-style: bold; color: $warning; margin: 0 0 1 0; }
    #buttons { height: auto; margin: 1 0 0 0; }
    #buttons Button { margin: 0 1 0 0; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("t", "trust", "trust"),
        Binding("n", "ignore", "not now"),
        Binding("escape", "ignore", "not now"),
        Binding("ctrl+c,ctrl+q", "quit_app", "quit", priority=True),
    ]

    def __init__(self, repo: str | Path, settings: list[str]):
        super().__init__()
        self.repo = str(repo)
        self.settings = settings

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Content("Do you trust this repository?"), id="title")
            yield Static(Content.assemble(
                "Its .codeagent.yaml in ", (self.repo, "bold"), " sets ", (", ".join(self.settings), "bold"),
                ". A repository you did not write can use these to send your API key to its own server "
                "or to run commands without the sandbox. Trusting it is remembered in your user config."))
            with Horizontal(id="buttons"):
                yield Button(Content("Trust [t]"), id="trust", variant="warning", compact=True)
                yield Button(Content("Not now: ignore them [n]"), id="ignore", variant="primary", compact=True)

    def on_mount(self) -> None:
        self.query_one("#ignore", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        getattr(self, f"action_{event.button.id}")()

    def action_trust(self) -> None:
        self.exit(True)

    def action_ignore(self) -> None:
        self.exit(False)

    def action_quit_app(self) -> None:
        self.exit(None)
