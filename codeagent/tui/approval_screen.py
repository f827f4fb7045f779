"""The approval dialog: the command or the edit's diff; allow once, always, or deny with a reason."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from ..run.session import ApprovalRequest, Decision
from ..visible import visible
from .diff_panel import diff_content


class ApprovalScreen(ModalScreen[Decision]):
    DEFAULT_CSS = """
    ApprovalScreen { align: center middle; }
    ApprovalScreen > #dialog {
        width: 100%; max-width: 110; height: auto; max-height: 100%;
        border: round $warning; background: $surface; padding: 0 1;
    }
    ApprovalScreen #title { text-style: bold; color: $warning; }
    ApprovalScreen #body { height: auto; max-height: 16; margin: 1 0; padding: 0 1; background: $background; }
    ApprovalScreen #always-label { margin: 0 0 1 0; }
    ApprovalScreen #buttons { height: auto; }
    ApprovalScreen #buttons Button { margin: 0 1 0 0; }
    ApprovalScreen #reason { display: none; margin: 1 0 0 0; }
    ApprovalScreen #reason.-shown { display: block; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "once", "allow once"),
        Binding("a", "always", "always allow"),
        Binding("n", "deny", "deny"),
        Binding("escape", "dismiss_denied", "deny"),
        Binding("ctrl+c", "interrupt", "interrupt", priority=True),
    ]

    def __init__(self, request: ApprovalRequest):
        super().__init__()
        self.request = request
        self._answered = False
        self._asking_reason = False

    def compose(self) -> ComposeResult:
        request = self.request
        with Vertical(id="dialog"):
            yield Static(Content(visible(request.title)), id="title")
            with VerticalScroll(id="body"):
                if request.body_language == "diff":
                    yield Static(diff_content(request.body, dark=self.app.current_theme.dark))
                elif request.body_language == "bash":
                    yield Static(Content.styled(visible(request.body), "bold"))
                else:
                    yield Static(Content(visible(request.body)))
            if request.always_label:
                scope = "Always allows, in this repository (/rules lists them): " if request.saved \
                    else "Always allows, this session: "
                yield Static(Content.assemble((scope, "dim"), visible(request.always_label)), id="always-label")
            with Horizontal(id="buttons"):
                yield Button(Content("Allow once [y]"), id="once", variant="success", compact=True)
                if request.always_label:
                    yield Button(Content("Always [a]"), id="always", variant="primary", compact=True)
                yield Button(Content("Deny… [n]"), id="deny", variant="error", compact=True)
            yield Input(placeholder="Why not? (goes back to the model; Enter to send, Esc for no reason)", id="reason")

    def on_mount(self) -> None:
        self.query_one("#once", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        getattr(self, f"action_{event.button.id}")()

    def answer(self, decision: Decision) -> None:
        if not self._answered:  # one answer, even when keys arrive faster than the screen changes
            self._answered = True
            self.dismiss(decision)

    def action_once(self) -> None:
        if not self._asking_reason:
            self.answer(Decision("once"))

    def action_always(self) -> None:
        if self.request.always_label and not self._asking_reason:
            self.answer(Decision("always"))

    def action_deny(self) -> None:
        self._asking_reason = True  # from now on Enter sends the reason, never "allow"
        for button in self.query(Button):
            button.disabled = True
        reason = self.query_one("#reason", Input)
        reason.add_class("-shown")
        reason.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.answer(Decision("deny", event.value.strip()))

    def action_dismiss_denied(self) -> None:
        self.answer(Decision("deny", self.query_one("#reason", Input).value.strip()))

    def action_interrupt(self) -> None:
        self.app.action_interrupt()  # type: ignore[attr-defined]  # CodeagentApp's: denies this request and closes the dialog
