"""The patch against the base commit, syntax-highlighted, updated as the agent edits; and one patch
in full over the conversation (PatchScreen: a candidate's)."""

from __future__ import annotations

from typing import ClassVar

from pygments.lexers import get_lexer_for_filename
from pygments.util import ClassNotFound
from rich.style import Style
from rich.syntax import Syntax
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from .. import patches
from ..patches import for_display
from ..run.printers import patch_stats
from ..visible import visible

HEADERS = ("diff --git", "index ", "--- ", "+++ ", "new file", "deleted file", "similarity", "rename ", "Binary files",
           "old mode", "new mode")
# Changed lines get a tint of their own, chosen for the theme's background (dark or light); their
# code is coloured by its file's language with Rich's ANSI themes, which terminals adapt to both.
TINTS = {True: {"+": "on #173b24", "-": "on #4a1c20"}, False: {"+": "on #dcf5e3", "-": "on #fbe0e0"}}
MARKERS = {"+": "bold green", "-": "bold red", " ": "dim"}
MAX_HIGHLIGHTED = 400  # columns of a line that are highlighted; the rest is shown plain


def diff_content(patch: str, dark: bool = True) -> Content:
    """A unified diff: file headers bold, hunk headers cyan, each added (+) and removed (-) line
    tinted, and the code of every line coloured as its file's language (by its name)."""
    theme = Syntax.get_theme("ansi_dark" if dark else "ansi_light")
    text = Text()
    lexer = None
    for line in visible(for_display(patch)).splitlines():  # bytes that are not UTF-8 show as U+FFFD
        if line.startswith("diff --git"):
            files = patches.files(line)
            lexer = _lexer(files[-1]) if files else None
        if line.startswith(HEADERS):
            text.append(line + "\n", "bold")
        elif line.startswith("@@"):
            text.append(line + "\n", "cyan")
        elif line[:1] in MARKERS:
            tint = TINTS[dark].get(line[0], "")
            text.append(line[0], f"{MARKERS[line[0]]} {tint}".strip())
            _code(text, line[1:], lexer, theme, tint)
            text.append("\n", tint)
        else:
            text.append(line + "\n")
    return Content.from_rich_text(text)


def _lexer(path: str):
    try:
        return get_lexer_for_filename(path, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


def _code(text: Text, code: str, lexer, theme, tint: str) -> None:
    if lexer is None or len(code) > MAX_HIGHLIGHTED:
        text.append(code, tint or None)
        return
    base = Style.parse(tint) if tint else Style()
    for token, value in lexer.get_tokens(code):
        text.append(value.rstrip("\n"), base + theme.get_style_for_token(token))


class DiffPanel(VerticalScroll):
    DEFAULT_CSS = """
    DiffPanel {
        width: 50%;
        height: 1fr;
        border-left: vkey $panel;
        padding: 0 1;
        display: none;
        scrollbar-size-vertical: 1;
    }
    DiffPanel.-shown { display: block; }
    DiffPanel > .header { color: $text-muted; text-style: bold; }
    """

    def __init__(self, **options):
        super().__init__(**options)
        self.patch = ""
        self.applied = ""
        self._header = Static(Content("Patch: no changes yet"), classes="header")
        self._body = Static("")

    def compose(self):
        yield self._header
        yield self._body

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda theme: self.update_patch(self.patch))

    def update_patch(self, patch: str, applied: str | None = None) -> None:
        """`applied`: where the patch is in the user's tree (run/session/summary.py's applied_state)."""
        self.patch = patch
        self.applied = self.applied if applied is None else applied
        if not patch.strip():
            self._header.update(Content("Patch: no changes yet"))
            self._body.update("")
            return
        self._show_header()
        self._body.update(diff_content(patch, dark=self.app.current_theme.dark))

    def show_applied(self, applied: str) -> None:
        """The header says anew where the patch is in the user's tree (after /apply: already there)."""
        if applied != self.applied:
            self.applied = applied
            if self.patch.strip():
                self._show_header()

    def _show_header(self) -> None:
        added, removed, files = patch_stats(self.patch)
        state = {"": "", "not applied": ""}.get(self.applied, f" · {self.applied}")
        if self.applied.startswith("applied to "):
            state += " (already in your files)"
        elif self.applied.startswith("changed since"):
            state += ": /apply writes the rest"
        self._header.update(Content(f"Patch against the base commit · {files} file(s) · +{added} -{removed}{state}"))


class PatchScreen(ModalScreen[None]):
    """One patch in full, over the conversation (a candidate's, from /candidates); Esc closes it."""

    DEFAULT_CSS = """
    PatchScreen { align: center middle; }
    PatchScreen > #dialog { width: 100%; max-width: 140; height: 100%; border: round $accent;
                            background: $surface; padding: 0 1; }
    PatchScreen #title { text-style: bold; }
    PatchScreen #hint { color: $text-muted; }
    PatchScreen VerticalScroll { height: 1fr; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q", "close", "close")]

    def __init__(self, title: str, patch: str, hint: str):
        super().__init__()
        self.title_text, self.patch, self.hint = title, patch, hint

    def compose(self):
        added, removed, files = patch_stats(self.patch)
        with Vertical(id="dialog"):
            yield Static(Content(f"{self.title_text} · {files} file(s) · +{added} -{removed}"), id="title")
            with VerticalScroll():
                yield Static(diff_content(self.patch, dark=self.app.current_theme.dark) if self.patch.strip()
                             else Content("(no changes)"))
            yield Static(Content(self.hint), id="hint")

    def action_close(self) -> None:
        self.dismiss(None)
