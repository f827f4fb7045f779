"""The Textual app: wires the widgets to a `Session` (run/session/). No agent logic lives here.

The session works in its own thread; its events cross to the UI as messages (`post_message` is
thread-safe), so the model and the tools never block the screen. session_view.py shows each event
in its widget; slash_commands.py runs the slash commands.
"""

from __future__ import annotations

import threading
import time
from typing import ClassVar

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.content import Content
from textual.message import Message

from ..events import Event
from ..run.session import ApprovalRequest, Decision, Session
from ..run.session.approval import next_mode
from ..run.session.message import completer, prepare, repo_files
from ..run.session.slash import parse
from ..run.session.summary import applied_state
from ..task import Task
from .approval_screen import ApprovalScreen
from .candidates import CandidatesPanel
from .completion_menu import CompletionMenu
from .diff_panel import DiffPanel
from .prompt import PromptInput
from .search_panel import SearchPanel
from .session_view import SessionView
from .slash_commands import SlashCommands
from .status_bar import StatusBar
from .transcript import Transcript

DOUBLE_PRESS_SECONDS = 2.0
WIDE = 110  # columns from which the patch is shown beside the transcript


class SessionEvent(Message):
    """An event of the session (or of its agent), posted from the session's thread."""

    def __init__(self, event: Event):
        super().__init__()
        self.event = event


class ApprovalAsked(Message):
    def __init__(self, request: ApprovalRequest):
        super().__init__()
        self.request = request


class CodeagentApp(SlashCommands):
    TITLE = "codeagent"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (WIDE, "-wide")]
    CSS = """
    #main { height: 1fr; }
    ToastRack { dock: top; align: right top; margin-bottom: 0; }  /* notices at the top: the input box stays free */
    Transcript.-hidden { display: none; }
    Screen.-narrow DiffPanel { width: 1fr; border-left: none; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+c", "interrupt", "interrupt", priority=True, show=False),
        Binding("ctrl+q", "quit", "quit", priority=True, show=False),
        Binding("shift+tab", "cycle_mode", "approval mode", priority=True, show=False),
        Binding("ctrl+t", "toggle_plan", "plan mode", priority=True, show=False),
        Binding("escape", "escape", "back", show=False),
    ]

    def __init__(self, session: Session, *, task: Task | None = None, resume: str | None = None,
                 follow_up: str | None = None):
        super().__init__()
        self.session = session
        session.connect(emit=self._from_session, ask=self._ask)
        self._start_task = task
        self._start_resume = resume
        self._start_follow_up = follow_up
        self._diff_choice: bool | None = None  # None: shown when wide and there is a patch
        self._last_ctrl_c = 0.0
        self._quitting = False
        self._quit_code = 0
        # Kept, not queried: while a dialog is open, queries would search the dialog's screen.
        self.transcript = Transcript(id="transcript")
        self.diff = DiffPanel(id="diff")
        self.candidates = CandidatesPanel(id="candidates")
        self.search = SearchPanel(id="search")  # evolution's rounds, the search's branches
        self.prompt = PromptInput(id="prompt", placeholder="Describe the issue to solve · Enter sends · /help")
        self.prompt.complete_path = completer(session)  # @path mentions
        self.menu = CompletionMenu(id="menu")  # commands and paths as they are typed
        self.prompt.menu = self.menu
        self.prompt.list_paths = lambda: repo_files(session).paths
        self.prompt.list_commands = lambda: [*((command.name, command.argument_hint, command.description)
                                                for command in self._custom_commands()), *session.mcp_prompts()]
        self.status_bar = StatusBar(id="status")
        self.view = SessionView(session, self.transcript, self.candidates, self._set_patch, self._alert)

    # -- layout --------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        with Horizontal(id="main"):
            yield self.transcript
            yield self.diff
        yield self.candidates
        yield self.search
        yield self.menu
        yield self.prompt
        yield self.status_bar

    def on_mount(self) -> None:
        session = self.session
        self._welcome = self.transcript.add_welcome(self._welcome_text())
        if session.model is None:
            self.transcript.add_notice("No model is configured: choose one with /model NAME (e.g. /model gpt-4o), "
                                       "or set model.name in ~/.config/codeagent/config.yaml.", "warning")
        saved = session.policy.saved
        if saved is not None and saved.problem:
            self.transcript.add_notice(saved.problem, "warning")
        if session.config.scaling.candidates > 1 or session.config.scaling.tts != "sample":
            self.candidates.add_class("-shown")
        self._refresh_status()
        self.prompt.focus()
        problem = None if self._start_resume or self._start_task else session.repo_problem()
        if problem:  # said now, not after the issue is typed
            self.transcript.add_notice(f"{problem}.\nFix that (or quit and start codeagent in another folder), "
                                       "then describe the issue.", "error")
        if self._start_resume is not None:
            self._command_resume(self._start_resume, self._start_follow_up)
        elif self._start_task is not None:
            self.transcript.add_user(self._start_task.problem_statement.strip())
            self.session.start(self._start_task)

    # -- from the session's thread -------------------------------------------------------------

    def _from_session(self, event: Event) -> None:
        self.post_message(SessionEvent(event))

    def _ask(self, request: ApprovalRequest) -> None:
        self.post_message(ApprovalAsked(request))

    def on_session_event(self, message: SessionEvent) -> None:
        event = message.event
        try:
            self.search.follow(event)
            self.view.show(event)
        except Exception as exc:  # a display bug must not take the session down with it
            self.transcript.add_notice(f"(could not show a {event.kind} event: {type(exc).__name__}: {exc})", "error")
        self._refresh_status()

    def on_approval_asked(self, message: ApprovalAsked) -> None:
        request = message.request
        if request.answered or self._quitting:
            return
        self._alert(f"Waiting for you: {request.title}")
        self._refresh_status()

        def answered(decision: Decision | None) -> None:
            request.answer(decision or Decision("deny"))
            self._refresh_status()

        self.push_screen(ApprovalScreen(request), answered)

    def _alert(self, text: str) -> None:
        """The terminal's bell and a notification: the user may be looking at another window."""
        self.bell()
        self.notify(text, timeout=4)

    # -- the user ------------------------------------------------------------------------------

    def on_prompt_input_submitted(self, message: PromptInput.Submitted) -> None:
        text = message.text
        command = parse(text)
        if command is not None:
            self._run_command(command, text)
            return
        if text.startswith("//"):
            text = text[1:]
        if self.diff.has_class("-shown") and not self._wide():  # back from the patch to the conversation
            self._diff_choice = None
            self._layout_diff()
        message = prepare(text, self.session, self.transcript.add_notice)  # @path mentions, pasted images
        if message is not None:  # a custom command's allowed-tools held for its turn only: all tools again
            outcome = self.session.submit(message, only_tools=None)
            if outcome.accepted:
                self.transcript.add_user(text, queued=outcome == "queued")
        self._refresh_status()

    # -- actions -------------------------------------------------------------------------------

    def action_interrupt(self) -> None:
        now = time.monotonic()
        if now - self._last_ctrl_c < DOUBLE_PRESS_SECONDS:
            self._quit_code = 130  # interrupted, as the exit codes in docs/solve.md say (/quit is 0)
            self.action_quit()
            return
        self._last_ctrl_c = now
        if self.session.interrupt():
            if isinstance(self.screen, ApprovalScreen):
                self.screen.answer(Decision("deny", "the user interrupted the run"))
            self.transcript.add_notice("Interrupting the running step… (Ctrl-C again to quit)", "warning")
        else:
            self.transcript.add_notice("Press Ctrl-C again to quit.")

    def action_quit(self) -> None:  # type: ignore[override]  # Textual runs a plain action as well
        if self._quitting:
            return
        self._quitting = True
        self.transcript.add_notice("Stopping the agent and removing the sandbox…")

        def clean_up() -> None:
            try:
                self.session.close()
            finally:
                try:
                    self.call_from_thread(self.exit, None, self._quit_code)
                except RuntimeError:  # the app has already gone
                    pass

        threading.Thread(target=clean_up, name="codeagent-quit", daemon=True).start()

    def action_cycle_mode(self) -> None:
        self.session.set_mode(next_mode(self.session.mode))
        self.notify(f"Approval mode: {self.session.mode}", timeout=2)
        self._refresh_status()

    def action_toggle_plan(self) -> None:
        self._command_plan("")
        self._refresh_status()

    def on_key(self, event: events.Key) -> None:
        """Typing while a tool call or the transcript has the focus goes to the input (Enter there
        still expands a tool call)."""
        if event.is_printable and self.screen is self.screen_stack[0] and self.focused is not self.prompt:
            event.stop()
            self.prompt.focus()
            self.prompt.insert(event.character or "")  # printable: never None

    def action_escape(self) -> None:
        if self.diff.has_class("-shown") and not self._wide():
            self._diff_choice = False
            self._layout_diff()
        self.prompt.focus()

    # -- helpers -------------------------------------------------------------------------------

    def _set_patch(self, patch: str) -> None:
        self.diff.update_patch(patch, applied_state(self.session))
        self._layout_diff()

    def _layout_diff(self, width: int | None = None) -> None:
        wide = self._wide(width)
        shown = self._diff_choice if self._diff_choice is not None else (wide and bool(self.diff.patch.strip()))
        self.diff.set_class(shown, "-shown")
        self.transcript.set_class(shown and not wide, "-hidden")

    def _wide(self, width: int | None = None) -> bool:
        return (width or self.size.width) >= WIDE

    def on_resize(self, event: events.Resize) -> None:
        self._layout_diff(event.size.width)  # self.size is still the old one here
        if self.transcript.is_vertical_scroll_end:  # the end stays in view whatever the new line breaks
            self.call_after_refresh(self.transcript.scroll_end, animate=False, immediate=True)

    def _welcome_text(self) -> str:
        session = self.session
        return (f"codeagent · {session.repo} · model {session.model_name} · {session.mode} mode\n"
                "Describe the issue to solve and press Enter; while the agent works you can send more. "
                "/help lists the commands.")

    def _refresh_status(self) -> None:
        self.status_bar.show(self.session.status())
        self.diff.show_applied(applied_state(self.session))  # after /apply: the patch is in the user's files
        if self._welcome.is_attached:  # the header says the mode and model of now, not of the start
            self._welcome.update(Content(self._welcome_text()))

