"""The slash commands in the app: each one's handler calls the session (run/session/) and shows the
outcome in the widgets; their names, help and parsing are run/session/slash.py. A mixin of the App."""

from __future__ import annotations

import threading

from textual.app import App
from textual.message import Message

from ..models import ModelConfigError, ModelError
from ..run.commands import CustomCommand, custom_commands, find_command
from ..run.printers import counted, patch_stats
from ..run.session import Session
from ..run.session.approval import MODES
from ..run.session.approval_rules import rules_command
from ..run.session.message import init_request
from ..run.session.slash import COMMANDS, SlashCommand, help_text, model_switch, plan_mode, plan_notice, resolve
from ..run.session.summary import SESSION_COLUMNS, session_row
from ..trajectory.store import TrajectoryError
from .candidates import CandidatesPanel
from .diff_panel import DiffPanel, PatchScreen
from .pick_screen import PickScreen
from .search_panel import SearchPanel
from .session_view import SessionView
from .transcript import Transcript


class ModelChecked(Message):
    """`/model`'s check of a model ended (from its thread): `error` is None when it can be used."""

    def __init__(self, model, error: str | None):
        super().__init__()
        self.model = model
        self.error = error


class SlashCommands(App[int]):
    """The App's slash commands (app.py's CodeagentApp sets these attributes and the helpers)."""

    session: Session
    transcript: Transcript
    diff: DiffPanel
    candidates: CandidatesPanel
    search: SearchPanel
    view: SessionView
    _diff_choice: bool | None

    def _refresh_status(self) -> None: ...

    def _layout_diff(self, width: int | None = None) -> None: ...

    def _set_patch(self, patch: str) -> None: ...

    def action_quit(self) -> None: ...  # type: ignore[override]  # the App's: stops the session, then exits

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
            self.session.set_work_mode(plan_mode(self.session.work_mode, argument))  # told to the model next step
        except ValueError as exc:
            self.transcript.add_notice(str(exc), "error")
            return
        self.transcript.add_notice(plan_notice(self.session.work_mode))

    def _command_init(self, argument: str) -> None:
        if self.session.work_mode == "plan":
            self.transcript.add_notice("/init writes AGENTS.md: switch plan mode off first (/plan off).", "warning")
            return
        outcome = self.session.submit(init_request(self.session))
        if outcome.accepted:
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
        stats = self.session.state.stats
        self.transcript.add_notice(
            f"{counted(stats.steps, 'step')} · {stats.prompt_tokens:,} prompt + {stats.completion_tokens:,} completion tokens · "
            f"${stats.cost:.4f} · model {self.session.model_name}"
            + ("" if stats.cost else " (a replayed or unpriced model costs $0)"))

    def _command_compact(self, argument: str) -> None:
        self.session.compact()

    def _command_candidates(self, argument: str) -> None:
        """No argument: a picker of the candidates, each opening its patch; `pick N` chooses N; `more` has the
        method go on with another budget."""
        words = argument.split()
        if words[:1] == ["pick"]:
            if len(words) != 2 or not words[1].isdigit():
                self.transcript.add_notice("Say /candidates pick N (N as numbered in the panel, from 0).", "warning")
                return
            self.session.pick_candidate(int(words[1]))
            return
        if argument == "more":
            self.search.reset()  # the method's panel follows it again from where it stopped
            self.session.more_candidates()
            return
        if argument:
            self.transcript.add_notice(f"/candidates {argument}: say /candidates, /candidates pick N or /candidates more.",
                                       "warning")
            return
        self.candidates.add_class("-shown")
        self.candidates.refresh_table()
        if not self.session.state.candidates:
            self.transcript.add_notice("No scored candidates yet: their patches can be opened once they are verified "
                                       "(the panel below follows them).")
            return
        self._pick_candidate_patch()

    def _pick_candidate_patch(self) -> None:
        chosen = {c.index for c in self.candidates.candidates.values() if c.selected}
        rows = []
        for index, candidate in sorted(self.session.state.candidates.items()):
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
            patch = self.session.state.candidates[index].patch
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
        self.view.resume_follow_up = follow_up  # shown after the saved conversation

    def _command_clear(self, argument: str) -> None:
        if self.session.clear():
            self.transcript.reset()
            self.candidates.reset()
            self.search.reset()
            self.view.reset()
            self._set_patch("")

    def _command_rules(self, argument: str) -> None:
        self.transcript.add_notice(*rules_command(self.session.policy, argument))

    def _command_help(self, argument: str) -> None:
        custom = [(command.name, command.argument_hint, command.description) for command in self._custom_commands()]
        self.transcript.add_notice(help_text(self.session.mcp_prompts(), custom))

    def _command_quit(self, argument: str) -> None:
        self.action_quit()

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
        tools = frozenset(command.tool_names(self.session.tool_names())) if command.allowed_tools else None
        typed = f"/{command.name} {arguments}".strip()
        outcome = self.session.submit(command.render(arguments), only_tools=tools, title=typed)
        if outcome.accepted:
            self.transcript.add_user(typed, queued=outcome == "queued")
        self._refresh_status()


def _model_label(model) -> str:
    if model is None:
        return "(no model)"
    api_base = getattr(model, "api_base", None)
    return f"{model.name} at {api_base}" if isinstance(api_base, str) and api_base else model.name


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit - 1] + "…"
