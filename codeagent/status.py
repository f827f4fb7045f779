"""Why a run ended: its exit status. A `str` enum, so JSON, trajectories and comparisons with plain
strings ("submitted") keep working."""

from __future__ import annotations

from enum import Enum


class ExitStatus(str, Enum):
    SUBMITTED = "submitted"
    EMPTY_SUBMISSION = "empty_submission"  # `solve` (TUI, headless): the agent submitted and changed nothing
    ANSWERED = "answered"  # a user follows (TUI, headless solve) or plan mode: a plain reply ended the turn
    MAX_STEPS = "max_steps"
    MAX_COST = "max_cost"
    MAX_TIME = "max_time"
    MAX_TOOL_CALLS = "max_tool_calls"
    FORMAT_ERRORS = "format_errors"
    INTERRUPTED = "interrupted"
    MODEL_ERROR = "model_error"
    SANDBOX_ERROR = "sandbox_error"
    PATCH_TOO_LARGE = "patch_too_large"
    NO_CANDIDATE = "no_candidate"  # several candidates ran and none was usable

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


LIMITS = (ExitStatus.MAX_STEPS, ExitStatus.MAX_COST, ExitStatus.MAX_TIME, ExitStatus.MAX_TOOL_CALLS)  # a limit ended the run
