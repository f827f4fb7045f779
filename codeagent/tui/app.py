"""The Textual app: wires the widgets to a `Session`. No agent logic lives here.

The session works in its own thread; its events cross to the UI as messages (`post_message` is
thread-safe), so the model and the tools never block the screen.
"""

from __future__ import annotations

import threading
import time
from typing import ClassVar

from textual import events
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.content import Content
from textual.message import Message

from ..events import Event
from ..models import ModelConfigError, ModelError
from ..run.commands import CustomCommand, custom_commands, find_command
from ..run.printers import patch_stats
from ..task import Task
from ..trajectory.store import TrajectoryError
from .approval import MODES, ApprovalRequest, Decision, next_mode
from .approval_rules import rules_command
from .approval_screen import ApprovalScreen
from .candidates import CandidatesPanel
from .commands import COMMANDS, SlashCommand, help_text, model_switch, parse, plan_mode, plan_notice, resolve
from .completion_menu import CompletionMenu
from .diff_panel import DiffPanel, PatchScreen
from .pick_screen import PickScreen
from .prompt import PromptInput
from .session import Session
from .session_text import SESSION_COLUMNS, session_row
from .status_bar import StatusBar
from .transcript import Transcript
from .user_message import completer, init_request, prepare, repo_files

DOUBLE_PRESS_SECONDS = 2.0
WIDE = 110  # columns from which the patch is shown beside the transcript


class SessionEvent(Message):
    """An event of the session (or of its agent), posted from the session's thread."""

    def __init__(self, event: Event):
        super().__init__()
        self.event = event


class ModelChecked(Message):
    """`/model`'s check of a model ended (from its thread): `error` is None when it can be used."""

    def __init__(self, model, error: str | None):
        super().__init__()
        self.model = model
        self.error = error


class ApprovalAsked(Message):
    def __init__(self, request: ApprovalRequest):
        super().__init__()
        self.request = request


class CodeagentApp(App[int]):
    TITLE = "codeagent"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (WIDE, "-wide")]
    CSS = """
    #main { height: 1fr; }
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
        session.emit = self._from_session
        session.approver.ask = self._ask
        self._start_task = task
        self._start_resume = resume
        self._start_follow_up = follow_up
        self._live_candidate: str | None = None
        self._sampling = False  # candidates run and none is selected yet: only the live one is shown
        self._resume_follow_up: str | None = None
        self._diff_choice: bool | None = None  # None: shown when wide and there is a patch
        self._last_ctrl_c = 0.0
        self._quitting = False
        # Kept, not queried: while a dialog is open, queries would search the dialog's screen.
        self.transcript = Transcript(id="transcript")
        self.diff = DiffPanel(id="diff")
        self.candidates = CandidatesPanel(id="candidates")
        self.prompt = PromptInput(id="prompt", placeholder="Describe the issue to solve · Enter sends · /help")
        self.prompt.complete_path = completer(session)  # @path mentions
        self.menu = CompletionMenu(id="menu")  # commands and paths as they are typed
        self.prompt.menu = self.menu
        self.prompt.list_paths = lambda: repo_files(session).paths
        self.prompt.list_commands = lambda: [*((command.name, command.argument_hint, command.description)
                                                for command in self._custom_commands()), *session.mcp_prompts()]
        self.status_bar = StatusBar(id="status")

    # -- layout --------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        with Horizontal(id="main"):
            yield self.transcript
            yield self.diff
        yield self.candidates
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
        if session.config.scaling.candidates > 1:
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
            self._show(event)
        except Exception as exc:  # a display bug must not take the session down with it
            self.transcript.add_notice(f"(could not show a {event.kind} event: {type(exc).__name__}: {exc})", "error")
        self._refresh_status()

    def _show(self, event: Event) -> None:
        transcript, kind = self.transcript, event.kind
        self.candidates.follow(event)
        if kind == "sampling_started":
            self._sampling, self._live_candidate = True, None
        elif kind == "selection_made":  # from here on the selected run is shown: its patch, its follow-ups
            self._sampling = False
        elif self._sampling and event.run_id in self.session.candidate_runs:  # one candidate is shown live
            if self._live_candidate is None:
                self._live_candidate = event.run_id
                number = self.candidates.number(event.run_id)
                transcript.add_notice(f"Showing candidate {number} live; the panel below follows them all.")
            if event.run_id != self._live_candidate or kind == "finished":
                return
        if kind == "run_started":
            transcript.show_run_started(event)
        elif kind == "model_output":
            transcript.show_model_output(event)
        elif kind in ("model_waiting", "model_delta", "model_retry"):
            transcript.show_progress(event)
        elif kind == "tool_called":
            transcript.show_tool_called(event)
        elif kind == "observation":
            transcript.show_observed(event)
        elif kind == "patch_changed":
            self._set_patch(event.patch)
        elif kind == "finished":
            self._set_patch(event.patch)
            transcript.show_finished(event)
            self._alert(f"The run ended: {event.exit_status}.")
        elif kind == "subagent_started":  # nested work: a line when it starts, one when it ends
            transcript.add_notice(f"  ↳ subagent {event.name} ({event.tools}) started: {event.task.strip()[:200]}")
        elif kind == "subagent_finished":
            transcript.add_notice(f"  ↳ subagent {event.name} finished: {event.exit_status}, {event.steps} steps, "
                                  f"{event.patch_lines} patch lines (trajectory {event.trajectory_id})")
        elif kind == "notice":
            transcript.add_notice(event.text, event.level)
        elif kind == "resumed":
            transcript.reset()
            transcript.show_history(event.trajectory)
            self._set_patch(event.trajectory.patch or "")
            if self._resume_follow_up:
                transcript.add_user(self._resume_follow_up)
                self._resume_follow_up = None

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
        self.session.agent.only_tools = None  # a custom command's allowed-tools held for its turn only
        if text.startswith("//"):
            text = text[1:]
        if self.diff.has_class("-shown") and not self._wide():  # back from the patch to the conversation
            self._diff_choice = None
            self._layout_diff()
        message = prepare(text, self.session, self.transcript.add_notice)  # @path mentions, pasted images
        outcome = self.session.submit(message) if message is not None else "refused"
        if outcome in ("started", "continued", "queued"):
            self.transcript.add_user(text, queued=outcome == "queued")
        self._refresh_status()

    def _run_command(self, command: SlashCommand, text: str = "") -> None:
        name = command.name if command.name in COMMANDS else None
        custom = None if name else find_command(self._custom_commands(), text)
        if custom is not None:
            self._send_custom(*custom)
            return
        name = resolve(command.name)
        if name is None and command.name.startswith("mcp__"):  # an MCP server's prompt
            outcome = self.session.send_prompt(command.name, command.argument)
            if outcome == "busy":
                self.transcript.add_notice(f"/{command.name}: wait until the agent stops (Ctrl-C interrupts it).",
                                           "warning")
            elif outcome == "started":
                self.transcript.add_user(f"/{command.name} {command.argument}".strip())
            self._refresh_status()
            return
        if name is None:
            self.transcript.add_notice(f"Unknown command /{command.name}: /help lists them.", "warning")
            return
        getattr(self, f"_command_{name}")(command.argument)
        self._refresh_status()

    def _command_model(self, argument: str) -> None:
        if not argument:
            self.transcript.add_notice(f"Model: {_model_label(self.session.model)}. Switch with /model NAME "
                                       "[--api-base URL].")
            return
        try:
            model = self.session.make_model(*model_switch(argument))
        except (ValueError, ModelConfigError) as exc:
            self.transcript.add_notice(_one_line(str(exc)), "error")
            return
        self.transcript.add_notice(f"Checking {_model_label(model)}…")
        threading.Thread(target=self._check_model, args=(model,), name="codeagent-model-check", daemon=True).start()

    def _check_model(self, model) -> None:
        """One cheap request (run/solve.py's preflight), off the screen's thread."""
        from ..run.solve import preflight

        try:
            preflight(model, paid=True)
            error = None
        except Exception as exc:  # noqa: BLE001 - a model error, or anything else: said, not switched
            error = str(exc) if isinstance(exc, ModelError) else f"{type(exc).__name__}: {exc}"
        self.post_message(ModelChecked(model, error))

    def on_model_checked(self, message: ModelChecked) -> None:
        if message.error is not None:
            self.transcript.add_notice(f"Model not switched ({_model_label(self.session.model)} stays): "
                                       f"{_one_line(message.error)}", "error")
            return
        self.session.set_model(message.model)
        self.transcript.add_notice(f"Model: {_model_label(message.model)} (from the next step).", "success")
        self._refresh_status()

    def _command_mode(self, argument: str) -> None:
        if argument:
            try:
                self.session.set_mode(argument)
            except ValueError as exc:
                self.transcript.add_notice(str(exc), "error")
                return
        self.transcript.add_notice(f"Approval mode: {self.session.mode} (one of {', '.join(MODES)}).")

    def _command_plan(self, argument: str) -> None:
        try:
            self.session.agent.mode = plan_mode(self.session.agent.mode, argument)  # told to the model next step
        except ValueError as exc:
            self.transcript.add_notice(str(exc), "error")
            return
        self.transcript.add_notice(plan_notice(self.session.agent.mode))

    def _command_init(self, argument: str) -> None:
        if self.session.agent.mode == "plan":
            self.transcript.add_notice("/init writes AGENTS.md: switch plan mode off first (/plan off).", "warning")
            return
        outcome = self.session.submit(init_request(self.session))
        if outcome in ("started", "continued", "queued"):
            self.transcript.add_user("/init: write a first AGENTS.md for this repository", queued=outcome == "queued")

    def _command_diff(self, argument: str) -> None:
        self._diff_choice = not self.diff.has_class("-shown")
        self._layout_diff()
        if self._diff_choice and not self.diff.patch.strip():
            self.transcript.add_notice("No changes yet.")

    def _command_undo(self, argument: str) -> None:
        self.session.undo()

    def _command_apply(self, argument: str) -> None:
        self.session.apply(argument or None)

    def _command_cost(self, argument: str) -> None:
        stats = self.session.stats
        self.transcript.add_notice(
            f"{stats.steps} steps · {stats.prompt_tokens:,} prompt + {stats.completion_tokens:,} completion tokens · "
            f"${stats.cost:.4f} · model {self.session.model_name}"
            + ("" if stats.cost else " (a replayed or unpriced model costs $0)"))

    def _command_compact(self, argument: str) -> None:
        self.session.compact()

    def _command_candidates(self, argument: str) -> None:
        """No argument: a picker of the candidates, each opening its patch; `pick N` chooses N."""
        words = argument.split()
        if words[:1] == ["pick"]:
            if len(words) != 2 or not words[1].isdigit():
                self.transcript.add_notice("Say /candidates pick N (N as numbered in the panel, from 0).", "warning")
                return
            self.session.pick_candidate(int(words[1]))
            return
        if argument:
            self.transcript.add_notice(f"/candidates {argument}: say /candidates or /candidates pick N.", "warning")
            return
        self.candidates.add_class("-shown")
        self.candidates.refresh_table()
        if not self.session.candidates:
            self.transcript.add_notice("No scored candidates yet: their patches can be opened once they are verified "
                                       "(the panel below follows them).")
            return
        self._pick_candidate_patch()

    def _pick_candidate_patch(self) -> None:
        chosen = {c.index for c in self.candidates.candidates.values() if c.selected}
        rows = []
        for index, candidate in sorted(self.session.candidates.items()):
            added, removed, files = patch_stats(candidate.patch) if candidate.patch.strip() else (0, 0, 0)
            scores = " ".join(f"{name}={value:.2f}" for name, value in candidate.scores.items()
                              if isinstance(value, (int, float)))
            rows.append((str(index), f"{index:>3}  {candidate.exit_status or 'failed':<16}  {files} file(s) +{added} "
                                     f"-{removed}  {scores}" + ("  ← selected" if index in chosen else "")))
        picker = PickScreen("Candidates: Enter opens one's patch", "  #  status            patch  scores", rows,
                            "↑↓ choose · Enter opens the patch · Esc closes · /candidates pick N chooses one")

        def opened(key: str | None) -> None:
            if key is None:
                return
            index = int(key)
            patch = self.session.candidates[index].patch
            self.push_screen(PatchScreen(f"Candidate {index}'s patch", patch,
                                         f"Esc: back to the candidates · /candidates pick {index} makes it the chosen "
                                         "patch (what /apply applies)"), lambda _: self._pick_candidate_patch())

        self.push_screen(picker, opened)

    def _command_resume(self, argument: str, follow_up: str | None = None) -> None:
        if not argument:
            rows = [(header.id, session_row(header, steps, status))
                    for header, steps, status in self.session.recent_details()]
            if not rows:
                self.transcript.add_notice(f"No saved session for {self.session.repo}.")
                return
            picker = PickScreen("Resume a session of this repository (newest first)", SESSION_COLUMNS, rows,
                                "↑↓ choose · Enter resumes it in a new sandbox · Esc closes · /resume ID also works")
            self.push_screen(picker, lambda chosen: self._command_resume(chosen) if chosen else None)
            return
        try:
            self.session.resume(argument, follow_up=follow_up)
        except (TrajectoryError, RuntimeError) as exc:
            self.transcript.add_notice(str(exc), "error")
            return
        self._resume_follow_up = follow_up  # shown after the saved conversation

    def _command_clear(self, argument: str) -> None:
        if self.session.clear():
            self.transcript.reset()
            self.candidates.reset()
            self._live_candidate, self._sampling = None, False
            self._set_patch("")

    def _command_rules(self, argument: str) -> None:
        self.transcript.add_notice(*rules_command(self.session.policy, argument))

    def _command_help(self, argument: str) -> None:
        custom = [(command.name, command.argument_hint, command.description) for command in self._custom_commands()]
        self.transcript.add_notice(help_text(self.session.mcp_prompts(), custom))

    def _custom_commands(self) -> list[CustomCommand]:
        """The custom commands (run/commands.py), read anew each time; a warning is said once."""
        said = self.__dict__.setdefault("_said", set())

        def warn(text: str) -> None:
            if text not in said:
                said.add(text)
                self.transcript.add_notice(text.removeprefix("warning: "), "warning")

        return custom_commands(self.session.config, self.session.repo, reserved=COMMANDS, warn=warn)

    def _send_custom(self, command: CustomCommand, arguments: str) -> None:
        """The command's body, rendered, is the user's message; its allowed-tools hold for that turn."""
        agent, before = self.session.agent, self.session.agent.only_tools
        agent.only_tools = frozenset(command.tool_names(agent.tools.names())) if command.allowed_tools else None
        outcome = self.session.submit(command.render(arguments))
        if outcome not in ("started", "continued", "queued"):
            agent.only_tools = before
        else:
            self.transcript.add_user(f"/{command.name} {arguments}".strip(), queued=outcome == "queued")
        self._refresh_status()

    def _command_quit(self, argument: str) -> None:
        self.action_quit()

    # -- actions -------------------------------------------------------------------------------

    def action_interrupt(self) -> None:
        now = time.monotonic()
        if now - self._last_ctrl_c < DOUBLE_PRESS_SECONDS:
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
                    self.call_from_thread(self.exit, 0)
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
        self.diff.update_patch(patch)
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
        if self._welcome.is_attached:  # the header says the mode and model of now, not of the start
            self._welcome.update(Content(self._welcome_text()))


def _model_label(model) -> str:
    if model is None:
        return "(no model)"
    api_base = getattr(model, "api_base", None)
    return f"{model.name} at {api_base}" if isinstance(api_base, str) and api_base else model.name


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit - 1] + "…"
