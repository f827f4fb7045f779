"""Headless consumers of the event stream: a readable progress printer and a JSON-lines printer.

Everything the model, the tools or a task wrote is printed through `visible` (and never as rich
markup): command output cannot send escape sequences to the user's terminal. JSON is exact."""

from __future__ import annotations

import json
import sys
import threading
from typing import TextIO

from rich.markup import escape

from ..events import (
    PROGRESS_KINDS,
    CandidateScored,
    Event,
    Finished,
    ModelDelta,
    ModelOutput,
    ModelRetry,
    ModelWaiting,
    Observed,
    PatchChanged,
    RunStarted,
    SelectionMade,
    StepStarted,
    ToolCalled,
)
from ..status import ExitStatus
from ..visible import visible

PREVIEW_LINES = 12


class JsonPrinter:
    """One JSON object per event, one per line (`--json`); the reply as it forms (model_delta) and the
    wait for it (model_waiting) only with `deltas` (`--json-deltas`)."""

    def __init__(self, stream: TextIO | None = None, deltas: bool = False):
        self.stream = stream or sys.stdout
        self.deltas = deltas
        self._lock = threading.Lock()  # candidates' model calls report from their own threads

    def __call__(self, event: Event) -> None:
        if event.kind in PROGRESS_KINDS and not self.deltas:
            return
        line = json.dumps(event.to_dict(), default=str) + "\n"
        with self._lock:
            self.stream.write(line)
            self.stream.flush()


class ProgressPrinter:
    """What a person watching a headless run wants to see, on stderr by default."""

    STEP_EVENTS = {"step_started", "model_output", "tool_called", "observation", "patch_changed", "model_delta",
                   "model_waiting"}
    WAITING_SHOWN = (2, 10, 30)  # seconds without a token after which a pipe is told (then each minute)

    def __init__(self, stream: TextIO | None = None, verbose: bool = False, compact: bool = False):
        """compact: one line per run and per candidate (several runs at once interleave otherwise)."""
        from rich.console import Console

        self.console = Console(file=stream or sys.stderr, highlight=False, soft_wrap=True)
        self.verbose = verbose
        self.compact = compact
        self._streamed = ""  # the step's reply text printed as it formed
        self._waiting_line = False  # a terminal's "waiting for the model" line is open

    def __call__(self, event: Event) -> None:
        if self.compact and event.kind in self.STEP_EVENTS:
            return
        handler = getattr(self, f"_on_{event.kind}", None)
        if handler:
            handler(event)

    def _on_run_started(self, event: RunStarted) -> None:
        if event.replay:
            self.console.print("[bold yellow]REPLAY[/]: no model is configured, so this run plays back a recorded "
                               "trajectory; the commands and tests run for real in the sandbox.")
        self.console.print(f"codeagent · task {visible(event.task_id)} · model {visible(event.model)} · "
                           f"sandbox {event.sandbox}", markup=False)

    def _on_step_started(self, event: StepStarted) -> None:
        self.console.rule(f"step {event.step + 1}", style="dim")

    def _on_model_waiting(self, event: ModelWaiting) -> None:
        text = f"waiting for the model ({event.seconds}s)"
        if self.console.is_terminal:
            self.console.file.write(f"\r{text}")
            self.console.file.flush()
            self._waiting_line = True
        elif event.seconds in self.WAITING_SHOWN or event.seconds % 60 == 0:
            self.console.print(text, style="dim", markup=False)

    def _end_waiting_line(self) -> None:
        if self._waiting_line:
            self.console.file.write("\r\x1b[2K")
            self._waiting_line = False

    def _on_model_delta(self, event: ModelDelta) -> None:
        self._end_waiting_line()
        if not event.text:
            return
        text = visible(event.text.lstrip() if not self._streamed else event.text)
        self._streamed += event.text
        self.console.print(text, style="italic", markup=False, end="")
        self.console.file.flush()

    def _on_model_retry(self, event: ModelRetry) -> None:
        self._end_waiting_line()
        if self._streamed:
            self.console.print("\n(the reply above was cut off: it is asked for again)", style="dim", markup=False)
            self._streamed = ""
        self.console.print(visible(f"model call failed: {event.reason}; retry {event.attempt}/{event.retries} "
                                   f"in {event.wait:.1f}s"), style="yellow", markup=False)

    def _on_model_output(self, event: ModelOutput) -> None:
        self._end_waiting_line()
        streamed, self._streamed = self._streamed, ""
        if streamed:
            self.console.print()  # the text is out already, as it formed
        elif event.text.strip():
            self.console.print(visible(event.text.strip()), style="italic", markup=False)
        if event.format_error:
            self.console.print(f"unusable reply: {visible(event.format_error)}", style="red", markup=False)

    def _on_tool_called(self, event: ToolCalled) -> None:
        self.console.print(visible(_describe_call(event.tool, event.arguments)), style="bold cyan", markup=False)

    def _on_observation(self, event: Observed) -> None:
        lines = event.output.splitlines()
        shown = lines if self.verbose else lines[:PREVIEW_LINES]
        for line in shown:
            self.console.print(f"  {visible(line)}", style="dim", markup=False)
        if len(shown) < len(lines):
            self.console.print(f"  [... {len(lines) - len(shown)} more lines]", style="dim", markup=False)
        status = "interrupted" if event.interrupted else "timed out" if event.timed_out else (
            f"exit {event.exit_code}" if event.exit_code is not None else "")
        colour = "red" if event.error or event.timed_out or event.interrupted or (event.exit_code not in (None, 0)) else "green"
        self.console.print(f"  [{colour}]{status or ('error' if event.error else 'ok')}[/] · {event.seconds:.2f}s")

    def _on_subagent_started(self, event) -> None:
        task = visible(event.task.strip().splitlines()[0] if event.task.strip() else "")[:160]
        self.console.print(f"    ↳ subagent {event.name} ({event.tools}, {event.model}): {task}", style="blue",
                           markup=False)

    def _on_subagent_finished(self, event) -> None:
        self.console.print(f"    ↳ subagent {event.name} finished: {event.exit_status}, {counted(event.steps, 'step')}, "
                           f"${event.cost:.4f}, {event.patch_lines} patch lines; trajectory {event.trajectory_id}",
                           style="blue", markup=False)

    def _on_patch_changed(self, event: PatchChanged) -> None:
        added, removed, files = patch_stats(event.patch)
        self.console.print(f"  patch: {files} file(s), +{added} -{removed}", style="magenta")

    def _on_candidate_scored(self, event: CandidateScored) -> None:
        added, removed, files = patch_stats(event.patch)
        scores = ", ".join(f"{name} {value:.2f}" for name, value in sorted(event.scores.items())) or "no scores"
        discarded = f" · discarded: {event.details['discarded']}" if event.details.get("discarded") else ""
        regression = event.details.get("regression")
        tests = f" · tests: {regression['command']}" if isinstance(regression, dict) and regression.get("command") else ""
        self.console.print(visible(f"candidate {event.index}: {event.exit_status} · {files} file(s) +{added} "
                                   f"-{removed} · {scores}{tests}{discarded}"), markup=False)

    def _on_search_progress(self, event) -> None:  # scaling/progress.py: a round of evolution, a wave of search
        budget, best = event.budget, max(event.nodes, key=lambda node: node["value"], default=None)
        spent = f"{budget['spent_tokens']}" + (f"/{budget['tokens']}" if budget.get("tokens") else "")
        top = f" · best so far: candidate {best['index']} (value {best['value']:.2f})" if best else ""
        self.console.print(visible(f"{event.method} · {event.note}{top} · {spent} tokens generated"),
                           style="bold" if event.done else "", markup=False)

    def _on_selection_made(self, event: SelectionMade) -> None:
        if event.chosen is None:
            self.console.print(f"[bold red]no usable candidate[/] ({event.policy}): {escape(visible(event.why))}")
        else:
            self.console.print(f"[bold green]chosen: candidate {event.chosen}[/] by the {event.policy} policy: "
                               f"{escape(visible(event.why))}")

    def _on_finished(self, event: Finished) -> None:
        self._end_waiting_line()
        if self._streamed:  # the run ended mid-reply (interrupted): end its line
            self.console.print()
            self._streamed = ""
        if self.compact:
            self.console.print(f"run {event.trajectory_id}: {event.exit_status} · {counted(event.steps, 'step')} · "
                               f"${event.cost:.4f} · {event.seconds:.1f}s", markup=False)
            return
        self.console.rule("done", style="bold")
        colour = "green" if event.exit_status == ExitStatus.SUBMITTED else "yellow"
        self.console.print(f"exit status: [bold {colour}]{event.exit_status}[/]" +
                           (f" ({escape(visible(event.message))})" if event.message and event.exit_status != ExitStatus.SUBMITTED
                            else ""))
        self.console.print(f"steps: {event.steps} · cost: ${event.cost:.4f} · time: {event.seconds:.1f}s")
        self.console.print(f"trajectory: {event.trajectory_id} ({event.trajectory_path})")


def counted(count: int, noun: str) -> str:
    """`1 step`, `2 steps`: a count with its noun (nouns that take an s)."""
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _describe_call(tool: str, arguments: dict) -> str:
    if tool == "bash":
        return f"$ {arguments.get('command', '')}"
    if tool == "editor":
        return f"editor {arguments.get('command', '')} {arguments.get('path', '')}"
    details = " ".join(f"{key}={value!r}" for key, value in arguments.items())
    return f"{tool} {details}".strip()


def patch_stats(patch: str) -> tuple[int, int, int]:
    added = removed = files = 0
    for line in patch.splitlines():
        if line.startswith("diff --git "):
            files += 1
        elif line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return added, removed, files
