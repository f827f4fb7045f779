"""The bash tool: one command in the sandbox's persistent shell."""

from __future__ import annotations

from .base import ToolContext, ToolResult
from .text import truncate_middle


def run_bash(context: ToolContext, command: str, timeout: float | None = None) -> ToolResult:
    seconds = context.settings.seconds_for(timeout)
    if not command.strip():
        return ToolResult("The command is empty.", error=True)
    result = context.sandbox.run(command, timeout=seconds)
    notes = []
    if result.timed_out:
        notes.append(f"The command timed out after {seconds:g}s and was killed with its child processes. "
                     "Run long jobs with a narrower scope, or pass a larger `timeout`.")
    if result.shell_restarted:
        notes.append("The shell exited or hung and was restarted; the working directory and exported "
                     "variables were restored, other shell state (functions, aliases) was lost.")
    if result.elided_bytes:
        notes.append(f"The output was {result.total_bytes} bytes; the middle was cut.")
    output = truncate_middle(result.output, context.settings.observation_chars)
    return ToolResult(
        output=(output + ("\n" if output and not output.endswith("\n") else "") + "\n".join(notes)).rstrip("\n"),
        exit_code=result.exit_code, timed_out=result.timed_out, seconds=result.seconds,
        error=result.timed_out,
    )


def plan_check(arguments: dict) -> str | None:
    """Plan mode runs a command only when every part of it reads (read_only_commands.py)."""
    from .read_only_commands import refusal

    return refusal(str(arguments.get("command", "")))
