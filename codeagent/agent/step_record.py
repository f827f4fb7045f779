"""What one step of a run records in its trajectory (`TrajectoryWriter.append_step`): timings, the model's
usage and tokens, and each tool call's outcome."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..models import ModelResponse


@dataclass
class ToolStat:
    id: str
    name: str
    exit_code: int | None
    timed_out: bool
    seconds: float
    output_chars: int

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "exit_code": self.exit_code, "timed_out": self.timed_out,
                "seconds": round(self.seconds, 4), "output_chars": self.output_chars}


@dataclass
class StepRecord:
    index: int
    started: datetime = field(default_factory=lambda: now())
    asked_at: float = 0.0  # time.time() when the model was asked
    model_seconds: float = 0.0
    tool_seconds: float = 0.0
    response: ModelResponse = field(default_factory=ModelResponse)
    format_error: str | None = None
    tool_calls: list[ToolStat] = field(default_factory=list)

    def as_dict(self, ended: datetime) -> dict[str, Any]:
        response, usage = self.response, self.response.usage
        return {"index": self.index, "started": self.started, "ended": ended,
                "model_seconds": round(self.model_seconds, 4), "tool_seconds": round(self.tool_seconds, 4),
                "prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens, "cost": usage.cost,
                "finish_reason": response.finish_reason, "format_error": self.format_error,
                "token_ids": response.token_ids, "logprobs": response.logprobs,
                "prompt_token_ids": response.prompt_token_ids,
                "tool_calls": [stat.as_dict() for stat in self.tool_calls]}


def now() -> datetime:
    return datetime.now(timezone.utc)
