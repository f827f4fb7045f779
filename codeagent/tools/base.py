"""What a tool is: a spec (data, from tools/*.yaml) and a function over a ToolContext."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..config import WebFetchSettings
from ..sandbox import Sandbox


@dataclass
class ToolResult:
    output: str
    error: bool = False  # the call failed (bad arguments, missing file...): the model should adapt
    exit_code: int | None = None
    timed_out: bool = False
    seconds: float = 0.0
    submitted: bool = False  # the run ends after this call


@dataclass
class ToolSettings:
    command_timeout: float = 300.0
    observation_chars: int = 12_000  # what the model sees of one observation (head + tail)
    max_listing: int = 200  # lines of search results / listings before they are capped
    review_on_submit: bool = False  # the first submit shows the patch and asks to confirm
    patch_exclude: list[str] = field(default_factory=list)
    max_patch_bytes: int | None = None  # a bigger diff is never read out of the sandbox
    deadline: float = float("inf")  # time.monotonic() when the run's max_seconds are up
    web_fetch: WebFetchSettings | None = None  # the user's allow-list and caps (tools/web_fetch.py)

    def seconds_for(self, wanted: float | None = None) -> float:
        """How long one command may run: what was asked, at most command_timeout, and never past
        the run's deadline (a command cannot outlast max_seconds)."""
        seconds = min(float(wanted), self.command_timeout) if wanted else self.command_timeout
        return max(1.0, min(seconds, self.deadline - time.monotonic()))


@dataclass
class ToolContext:
    sandbox: Sandbox
    settings: ToolSettings = field(default_factory=ToolSettings)
    issue: str = ""
    state: dict[str, Any] = field(default_factory=dict)  # per-run state of tools (edit history...)
    _closers: list[Callable[[], None]] = field(default_factory=list)

    def on_close(self, closer: Callable[[], None]) -> None:
        """Register cleanup to run when the run ends (temporary files of a tool...)."""
        self._closers.append(closer)

    def close(self) -> None:
        while self._closers:
            self._closers.pop()()


def run_in_repo(context: ToolContext, command: str, timeout: float | None = None):
    """Run a tool's own command from the repository root in a subshell, so the agent's shell
    keeps its working directory and variables."""
    import shlex

    return context.sandbox.run(f"( cd {shlex.quote(context.sandbox.workdir)} && {command} )",
                               timeout=context.settings.seconds_for(timeout))


class ToolError(Exception):
    """Raised by a tool implementation: the message goes back to the model as the observation."""


ToolFunction = Callable[..., ToolResult | str]


@dataclass
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    function: ToolFunction
    read_only: bool = False  # `read_only: true` in its spec: it changes no file
    plan: PlanUse | bool | None = None  # its spec's `plan:` (below); None: offered in plan mode when read_only
    opt_in: bool = False  # `opt_in: true`: offered only when the user's config enables it

    def spec(self, plan: bool = False) -> dict[str, Any]:
        """The OpenAI function-tool form sent to the model (in plan mode, with `plan`)."""
        use = self.plan if plan and isinstance(self.plan, PlanUse) else None
        return {"type": "function", "function": {
            "name": self.name, "description": use.description if use else self.description,
            "parameters": use.parameters if use and use.parameters else self.parameters}}

    @property
    def in_plan(self) -> bool:
        """Offered in plan mode: a read-only tool unless its spec says `plan: false`, or a tool that
        can write whose spec gives a `plan:` check for its calls."""
        return bool(self.plan) if self.plan is not None else self.read_only


@dataclass
class PlanUse:
    """How plan mode offers a tool that can write: with this description (and parameters), and only
    the calls `check` finds read-only; it returns why a call is refused, or None."""

    description: str
    check: Callable[[dict[str, Any]], str | None]
    parameters: dict[str, Any] | None = None
