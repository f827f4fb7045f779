"""The transcript: the user's messages, the model's (Markdown), each tool call as a compact block
that expands to its full output, and what the session says (notices, end of a run)."""

from __future__ import annotations

import json
from typing import Any

from rich.cells import cell_len, set_cell_size
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Collapsible, Markdown, Static

from ..events import Finished, ModelDelta, ModelOutput, ModelRetry, ModelWaiting, Observed, RunStarted, ToolCalled
from ..run.printers import counted
from ..status import LIMITS, ExitStatus
from ..visible import visible
from .diff_panel import diff_content
from .link_screen import LinkScreen, openable

SUMMARY_CHARS = 1000
MIN_SUMMARY = 12
TITLE_INSET = 4  # the title's padding and its ▶
LEVEL_STYLES = {"info": "dim", "success": "green", "warning": "yellow", "error": "bold red"}
STATUS_ICONS: dict[str, tuple[str, str]] = {ExitStatus.SUBMITTED: ("✓", "green"), ExitStatus.INTERRUPTED: ("■", "yellow"),
                ExitStatus.ANSWERED: ("●", "cyan"), ExitStatus.EMPTY_SUBMISSION: ("○", "yellow")}


def describe_call(tool: str, arguments: dict[str, Any]) -> str:
    """One line for a tool call: `$ command`, `edit path`, `search 'pattern'`..."""
    if tool == "bash":
        lines = str(arguments.get("command", "")).strip().splitlines() or [""]
        text = "$ " + lines[0] + (" …" if len(lines) > 1 else "")
    elif tool == "editor":
        command = arguments.get("command", "")
        verb = {"str_replace": "edit", "insert": "insert into", "create": "create", "view": "view",
                "undo_edit": "undo edit of"}.get(command, command)
        text = f"{verb} {arguments.get('path', '')}"
        if command == "view" and arguments.get("view_range"):
            text += " [{}:{}]".format(*arguments["view_range"][:2]) if len(arguments["view_range"]) >= 2 else ""
    elif tool == "submit":
        text = "submit"
    elif tool in ("search", "navigate") and arguments.get("command"):
        words = [str(arguments["command"])]
        for key in ("pattern", "symbol", "focus"):
            if arguments.get(key):
                words.append(repr(arguments[key]))
        for key in ("path", "include"):
            if arguments.get(key):
                words.append(f"in {arguments[key]}")
        text = f"{tool} " + " ".join(words)
    else:
        details = " ".join(f"{key}={value!r}" for key, value in arguments.items() if value not in (None, ""))
        text = f"{tool} {details}".strip()
    text = visible(text)  # cut to the width where it is shown (ToolBlock); a bound against huge arguments
    return text if len(text) <= SUMMARY_CHARS else text[:SUMMARY_CHARS - 1] + "…"


def fit_summary(summary: str, status: str, width: int) -> str:
    """The summary cut (…) so that `summary · status` fits `width` cells; the status is never cut."""
    room = width - cell_len(" · " + status)
    if cell_len(summary) <= room:
        return summary
    return set_cell_size(summary, max(room - 1, MIN_SUMMARY)).rstrip() + "…"


def edit_preview(arguments: dict[str, Any]) -> str | None:
    """An edit's old and new text as -/+ lines (the block's body, above the tool's output)."""
    command = arguments.get("command")
    if command == "str_replace":
        old = ["-" + line for line in str(arguments.get("old_str", "")).splitlines()]
        new = ["+" + line for line in str(arguments.get("new_str", "")).splitlines()]
        return "\n".join(old + new)
    if command in ("insert", "create"):
        text = arguments.get("new_str") if command == "insert" else arguments.get("file_text")
        return "\n".join("+" + line for line in str(text or "").splitlines())
    return None


def advice(event: Finished) -> str:
    """What the user can do after a run ended this way."""
    message = event.message.strip()
    status = event.exit_status
    if status == ExitStatus.SUBMITTED:
        return "Review the patch with /diff, apply it to your working tree with /apply, or type a follow-up."
    if status == ExitStatus.EMPTY_SUBMISSION:
        return "The agent submitted without changing any file. Type a follow-up to say what to change."
    if status == ExitStatus.ANSWERED:
        return "Type a reply to continue the conversation (/plan switches plan mode)."
    if status == ExitStatus.INTERRUPTED:
        return "Type a message to continue, /undo to revert the last change, or press Ctrl-C again to quit."
    if status == ExitStatus.MODEL_ERROR:
        if "ReplayExhausted" in message:
            return ("The recorded trajectory has no more turns. Choose a model with /model NAME "
                    "(e.g. /model gpt-4o) to continue.")
        if "cannot connect to" in message:
            return (f"{message}\nIs the server running at that address? Check model.api_base (--api-base), "
                    "or switch with /model NAME; then type a message to continue.")
        return (f"{message}\nCheck the model name and its API key (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...), "
                "or switch with /model NAME; then type a message to continue.")
    if status == ExitStatus.SANDBOX_ERROR:
        return f"{message}\nYour next message starts a new sandbox with the patch so far."
    if status in LIMITS:
        return f"Stopped: {message}. Type a message to give it another turn (limits apply per turn)."
    if status == ExitStatus.FORMAT_ERRORS:
        return f"{message}\nType a message to try again, or switch model with /model NAME."
    return message


class ToolBlock(Collapsible):
    """`▶ $ pytest -q · exit 0 · 0.42s`, expanding to the call's full output."""

    DEFAULT_CSS = """
    ToolBlock {
        border-top: none;
        padding: 0;
        margin: 0;
        background: $background;
    }
    ToolBlock > Contents { padding: 0 0 0 4; }
    ToolBlock .body { color: $text-muted; }
    ToolBlock .edit { color: $text; }
    """

    def __init__(self, event: ToolCalled):
        self.summary = describe_call(event.tool, event.arguments)
        preview = edit_preview(event.arguments) if event.tool == "editor" else None
        self._edit = Static(diff_content(preview, dark=self.app.current_theme.dark), classes="edit") if preview else None
        self._output = Static(Content("…"), classes="body")
        children = [self._edit, self._output] if self._edit else [self._output]
        self._status = ("running…", "yellow")
        super().__init__(*children, title=self._label(0), collapsed=True)  # type: ignore[arg-type]  # a Content title: Textual renders it

    def _label(self, width: int | None = None) -> Content:
        status, style = self._status
        width = self.size.width if width is None else width
        summary = fit_summary(self.summary, status, width - TITLE_INSET) if width else self.summary
        return Content.assemble((summary, "bold"), (" · ", "dim"), (status, style))

    def on_resize(self) -> None:
        self.title = self._label()  # type: ignore[assignment]  # Textual renders a Content title

    def finish(self, event: Observed) -> None:
        if event.approval == "reject":  # someone's choice (the user's, a hook's), not a failure
            source = "" if event.approval_source in ("user", "") else f" ({event.approval_source})"
            status, style = f"denied{source}", "bold magenta"
        elif event.interrupted:
            status, style = f"interrupted · {event.seconds:.2f}s", "yellow"
        elif event.timed_out:
            status, style = f"timed out · {event.seconds:.2f}s", "red"
        elif event.exit_code is not None:
            status = f"exit {event.exit_code} · {event.seconds:.2f}s"
            style = "green" if event.exit_code == 0 and not event.error else "red"
        else:
            status, style = ("error" if event.error else "ok") + f" · {event.seconds:.2f}s", \
                "red" if event.error else "green"
        self._status = status, style
        self.title = self._label()  # type: ignore[assignment]
        self._output.update(Content(visible(event.output.rstrip("\n")) or "(no output)"))


def _shortened(arguments: str, limit: int = 240) -> str:
    """A tool call's arguments as they form, a file's whole text not included."""
    return arguments if len(arguments) <= limit else f"{arguments[:limit]}… ({len(arguments):,} chars)"


class LiveReply(Static):
    """The model's reply as it streams in (plain text, tool calls as their arguments form); replaced by
    the complete message when it arrives. Before the first token: how long the model has been waited on."""

    def __init__(self):
        super().__init__(Content.styled("waiting for the model…", "dim italic"), classes="live")
        self.text = ""
        self.calls: dict[int, list[str]] = {}  # index -> [tool name, arguments so far]

    def waiting(self, seconds: int) -> None:
        if not self.text and not self.calls:
            self.update(Content.styled(f"waiting for the model ({seconds}s)", "dim italic"))

    def cut_off(self) -> None:
        self.add_class("-cut")
        self.update(Content.assemble(Content(visible(self.text.strip())), ("  (cut off)", "dim")))

    def add(self, event) -> None:
        if event.tool_index is None:
            self.text += event.text
        else:
            call = self.calls.setdefault(event.tool_index, ["", ""])
            call[0] = call[0] or event.tool
            call[1] += event.arguments
        parts = [visible(self.text.strip())] if self.text.strip() else []
        parts += [visible(f"→ {name or '?'} {_shortened(arguments)}") for name, arguments in self.calls.values()]
        self.update(Content("\n".join(parts)))


def model_text(text: str) -> Markdown:
    return Markdown(visible(text.strip()), open_links=False)  # a click goes to Transcript's handler


class Transcript(VerticalScroll):
    DEFAULT_CSS = """
    Transcript { height: 1fr; padding: 0 1; scrollbar-size-vertical: 1; }
    Transcript > .user { margin: 1 0 0 0; color: $text; background: $boost; padding: 0 1; }
    Transcript > .user.-queued { color: $text-muted; }
    Transcript > Markdown { margin: 1 0 0 0; padding: 0; background: $background; }
    Transcript > Markdown > MarkdownParagraph { margin: 0; }
    Transcript > .notice { margin: 0; }
    Transcript > .banner { color: $warning; margin: 0 0 1 0; }
    Transcript > .finished { margin: 1 0 0 0; }
    Transcript > .welcome { color: $text-muted; }
    Transcript > .live { margin: 1 0 0 0; }
    """

    def __init__(self, **options):
        super().__init__(**options)
        self.blocks: dict[str, ToolBlock] = {}
        self.live: dict[str, LiveReply] = {}  # run id -> its reply in the making

    def on_mount(self) -> None:
        self.anchor()

    def _add(self, widget) -> None:
        self.mount(widget)  # anchored: follows the end unless the user scrolled up to read

    def add_user(self, text: str, queued: bool = False) -> None:
        label = "› " + visible(text) + ("   (queued: read before the next step)" if queued else "")
        self._add(Static(Content(label), classes="user" + (" -queued" if queued else "")))
        self.anchor()  # the user's own message brings the view back to the end

    def add_assistant(self, text: str) -> None:
        if text.strip():
            self._add(model_text(text))

    def on_markdown_link_clicked(self, event: Markdown.LinkClicked) -> None:
        """A link in the model's text: http(s) opens after the user has seen the URL; other schemes never."""
        event.stop()
        url = event.href
        if not openable(url):
            self.add_notice(f"Not opened: {url[:500]} (only http and https links open).", "warning")
            return
        self.app.push_screen(LinkScreen(url), lambda chosen: self.app.open_url(url) if chosen else None)

    def add_notice(self, text: str, level: str = "info") -> None:
        self._add(Static(Content.styled(visible(text), LEVEL_STYLES.get(level, "")), classes=f"notice -{level}"))

    def add_welcome(self, text: str) -> Static:
        welcome = Static(Content(text), classes="welcome")
        self._add(welcome)
        return welcome

    def show_run_started(self, event: RunStarted) -> None:
        if event.replay:
            self._add(Static(Content("REPLAY: no model is configured, so this run plays back a recorded trajectory; "
                                     "the commands and tests run for real in the sandbox."), classes="banner"))

    def show_progress(self, event: ModelWaiting | ModelDelta | ModelRetry) -> None:
        """The reply in the making, in one widget per run."""
        if isinstance(event, ModelRetry):  # what had come is void; the next attempt streams below the notice
            self._end_live(event.run_id)
            self.add_notice(f"The model call failed ({event.reason}); retry {event.attempt}/{event.retries} "
                            f"in {event.wait:.1f}s.", "warning")
            return
        live = self.live.get(event.run_id)
        if live is None:
            live = self.live[event.run_id] = LiveReply()
            self._add(live)
        if isinstance(event, ModelWaiting):
            live.waiting(event.seconds)
        else:
            live.add(event)

    def _end_live(self, run_id: str) -> None:
        """A reply cut off (an interrupt, a limit): what had come stays, marked as such."""
        live = self.live.pop(run_id, None)
        if live is not None and (live.text or live.calls):
            live.cut_off()
        elif live is not None:
            live.remove()

    def show_model_output(self, event: ModelOutput) -> None:
        live = self.live.pop(event.run_id, None)
        if live is not None and event.text.strip():
            self.mount(model_text(event.text), before=live)  # where the streamed text was
        else:
            self.add_assistant(event.text)
        if live is not None:
            live.remove()
        if event.format_error:
            self.add_notice(f"Unusable reply: {event.format_error}", "warning")

    def show_tool_called(self, event: ToolCalled) -> None:
        block = ToolBlock(event)
        self.blocks[f"{event.run_id}/{event.call_id}"] = block
        self._add(block)

    def show_observed(self, event: Observed) -> None:
        block = self.blocks.get(f"{event.run_id}/{event.call_id}")
        if block is not None:
            block.finish(event)

    def show_finished(self, event: Finished) -> None:
        self._end_live(event.run_id)  # a reply cut off by an interrupt or a limit
        icon, style = STATUS_ICONS.get(event.exit_status, ("!", "red" if "error" in event.exit_status else "yellow"))
        line = Content.assemble((f"{icon} {event.exit_status}", f"bold {style}"),
                                (f" · {counted(event.steps, 'step')} · ${event.cost:.4f} · {event.seconds:.1f}s", "dim"))
        self._add(Static(line, classes="finished"))
        self.add_notice(advice(event), "info" if event.exit_status in (ExitStatus.SUBMITTED, ExitStatus.ANSWERED)
                        else "warning")

    def show_history(self, trajectory: Any) -> None:
        """A saved trajectory's conversation, as it would have been shown live."""
        task = trajectory.task or {}
        self.add_user(str(task.get("problem_statement", "")).strip())
        stats = {call.id: call for step in trajectory.steps for call in step.tool_calls}
        outputs = {m.get("tool_call_id"): m.get("content") or "" for m in trajectory.messages if m.get("role") == "tool"}
        for message in trajectory.messages[2:]:  # after the system prompt and the rendered issue
            role = message.get("role")
            if role == "user":
                self.add_user(str(message.get("content") or ""))
            elif role == "assistant":
                self.add_assistant(str(message.get("content") or ""))
                for call in message.get("tool_calls") or []:
                    function = call.get("function") or {}
                    try:
                        arguments = json.loads(function.get("arguments") or "{}")
                    except ValueError:
                        arguments = {"arguments": function.get("arguments")}
                    stat = stats.get(call.get("id"))
                    block = ToolBlock(ToolCalled(tool=function.get("name", "?"), call_id=call.get("id", ""),
                                                 arguments=arguments if isinstance(arguments, dict) else {}))
                    self._add(block)
                    block.finish(Observed(output=str(outputs.get(call.get("id"), "")),
                                          exit_code=stat.exit_code if stat else None,
                                          timed_out=bool(stat and stat.timed_out),
                                          seconds=(stat.seconds or 0.0) if stat else 0.0))
        if trajectory.exit_status:
            self.add_notice(f"(saved session {trajectory.id}: it ended as {trajectory.exit_status})")

    def reset(self) -> None:
        self.blocks.clear()
        self.live.clear()
        self.remove_children()
