"""One line at the bottom: what runs, the model, step, tokens, cost, sandbox and approval mode."""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len
from textual.content import Content
from textual.widgets import Static

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
SANDBOX_STYLES = {"ready": "green", "starting": "yellow", "failed": "red", "none": "dim", "closed": "dim"}
MODE_STYLES = {"suggest": "green", "auto-edit": "yellow", "full-auto": "red"}


def tokens(count: int) -> str:
    return f"{count / 1000:.1f}k" if count >= 1000 else str(count)


def status_line(status: dict[str, Any], frame: int = 0, width: int = 80) -> Content:
    """Fits `width` columns: from 100 on with labels, and key hints when there is room. A long model
    name is elided in its middle (down to MODEL_ROOM) before the hints go, then the labels."""
    room = width - 2  # the bar's padding
    model = "REPLAY" if status.get("replay") else status["model"]
    layouts = [(True, True, MODEL_ROOM, True), (True, False, MODEL_ROOM, True)] if width >= LABELS_FROM else []
    layouts += [(False, False, 12, True), (False, False, 12, False)]  # at last the context meter goes too
    for labels, hints, least, context in layouts:
        parts = _parts(status, frame, labels, hints, context)
        space = room - sum(cell_len(text) for text, _ in parts)
        if space >= min(cell_len(model), least) or not context:
            break
    parts.insert(2 if labels else 1, (_elide(model, space), "bold"))  # after the state
    return Content.assemble(*parts)


LABELS_FROM = 100  # columns
MODEL_ROOM = 24  # the least a long model name keeps before the key hints and labels go


def _parts(status: dict[str, Any], frame: int, labels: bool, hints: bool, context: bool = True) -> list[tuple[str, str]]:
    separator = (" │ " if labels else " · ", "dim")
    spinner = SPINNER[frame % len(SPINNER)]
    if status.get("waiting"):  # an approval dialog is open: the agent waits on the user, not the other way
        state = [("⏸ waiting for you", "bold magenta"), separator] if labels else [("⏸ ", "bold magenta")]
    elif status["busy"]:
        state = [(f"{spinner} working", "bold yellow"), separator] if labels else [(f"{spinner} ", "bold yellow")]
    else:
        state = [("● idle", "dim"), separator] if labels else [("● ", "dim")]
    sandbox = status["sandbox"]
    parts = [*state, separator, (f"step {status['steps']}", ""), separator, (f"{tokens(status['tokens'])} tok", ""),
             *(_context(status, separator, hints) if context else []),
             separator, (f"${status['cost']:.4f}", ""), separator, ("sandbox ", "dim"),
             (sandbox, SANDBOX_STYLES.get(sandbox, "")), separator, (status["mode"], MODE_STYLES.get(status["mode"], ""))]
    if status.get("plan"):  # read-only tools (/plan, ctrl+t)
        parts += [separator, ("PLAN", "bold magenta")]
    if hints:
        parts += [separator, ("/help · shift+tab mode · ctrl+c stop", "dim")]
    return parts


def _context(status: dict[str, Any], separator: tuple[str, str], wide: bool) -> list[tuple[str, str]]:
    """How much of the model's context window the conversation takes (model.context_tokens): in
    tokens where there is room, else as a share."""
    used, limit = status.get("context") or 0, status.get("context_limit") or 0
    if not limit or not used:
        return []
    share = used / limit
    style = "bold red" if share >= 0.9 else ("yellow" if share >= 0.7 else "")
    text = f"ctx {tokens(used)}/{limit / 1000:g}k" if wide else f"ctx {share:.0%}"
    return [separator, (text, style)]


def _elide(name: str, room: int) -> str:
    """`name` within `room` cells, its middle left out: the provider's start and the model's end stay."""
    if cell_len(name) <= room:
        return name
    room = max(room, 4)
    head = room // 3
    tail = room - head - 1
    return name[:head] + "…" + name[len(name) - tail:]


class StatusBar(Static):
    DEFAULT_CSS = """
    StatusBar { dock: bottom; height: 1; padding: 0 1; background: $panel; }
    """

    def __init__(self, **options):
        super().__init__("", **options)
        self._frame = 0
        self._status: dict[str, Any] | None = None

    def on_mount(self) -> None:
        self.set_interval(0.1, self._tick)

    def show(self, status: dict[str, Any]) -> None:
        self._status = status
        self.update(status_line(status, self._frame, self.outer_size.width or 80))

    def _tick(self) -> None:
        if self._status is not None and self._status["busy"] and not self._status.get("waiting"):
            self._frame += 1
            self.show(self._status)

    def on_resize(self) -> None:
        if self._status is not None:
            self.show(self._status)
