"""The popup above the input box: the slash commands that match what is typed (`/mo` -> /model,
/mode), or the repository paths that match an `@mention`. The input box drives it (prompt.py):
Up and Down move, Enter or Tab take the highlighted entry, Esc closes it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from ..run.session.slash import COMMANDS

MAX_ENTRIES = 8


@dataclass
class Entry:
    value: str  # what replaces the typed word
    label: str
    kind: str  # command | path


def command_entries(typed: str, extra: Sequence[tuple[str, str, str]] = ()) -> list[Entry]:
    """`/mo` -> /model, /mode: the commands whose name starts with what follows the `/`, then the `extra`
    ones (name, arguments, what: custom commands, MCP servers' prompts)."""
    word = typed.removeprefix("/").lower()
    listed = [*((name, arguments, what) for name, (arguments, what) in COMMANDS.items()), *extra]
    return [Entry(f"/{name} " if arguments else f"/{name}", f"/{name} {arguments}".strip() + f"  {what}", "command")
            for name, arguments, what in listed if name.lower().startswith(word)]


def path_entries(prefix: str, paths: list[str]) -> list[Entry]:
    """The next folder or file under `prefix` first (as Tab completes one step at a time), then the
    files whose path holds what is typed anywhere (case does not matter)."""
    steps = sorted({prefix + rest.split("/", 1)[0] + ("/" if "/" in rest else "")
                    for rest in (path[len(prefix):] for path in paths if path.startswith(prefix) and path != prefix)})
    needle = prefix.lower()
    found = [path for path in paths if needle in path.lower() and path not in steps] if needle else []
    return [Entry(f"@{value}", value, "path") for value in [*steps, *found][:MAX_ENTRIES]]


class CompletionMenu(OptionList, can_focus=False):
    DEFAULT_CSS = """
    CompletionMenu { display: none; height: auto; max-height: 10; border: round $accent; padding: 0 1; }
    CompletionMenu.-shown { display: block; }
    """

    def __init__(self, **options):
        super().__init__(**options)
        self.entries: list[Entry] = []

    @property
    def shown(self) -> bool:
        return self.has_class("-shown")

    def offer(self, entries: list[Entry]) -> None:
        if [e.value for e in entries] == [e.value for e in self.entries] and self.shown == bool(entries):
            return
        self.entries = entries
        self.set_options([Option(Text(entry.label, no_wrap=True, overflow="ellipsis")) for entry in entries])
        if entries:
            self.highlighted = 0
        self.set_class(bool(entries), "-shown")

    def hide(self) -> None:
        self.offer([])

    def move(self, step: int) -> None:
        if self.entries:
            self.highlighted = ((self.highlighted or 0) + step) % len(self.entries)

    @property
    def chosen(self) -> Entry | None:
        return self.entries[self.highlighted] if self.entries and self.highlighted is not None else None
