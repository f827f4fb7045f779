"""The `subagent` tool: hand a sub-task to a subagent, or apply a finished one's patch.

The work is done by the run's Subagents (agent/subagents.py), which the agent loop puts in
`context.state["subagents"]`; a run without it (a caller that does not offer subagents) refuses.
"""

from __future__ import annotations

from .base import ToolContext, ToolError, ToolResult


def subagent(context: ToolContext, task: str | None = None, tools: str = "full", max_steps: int | None = None,
             apply: str | None = None) -> ToolResult:
    runner = context.state.get("subagents")
    if runner is None:
        raise ToolError("Subagents are not available in this run.")
    if apply is not None:
        if task is not None:
            raise ToolError("Give either `task` (start a subagent) or `apply` (apply its patch), not both.")
        return runner.apply(context, apply)
    if not task or not task.strip():
        raise ToolError("Give the sub-task in `task`.")
    return runner.run(context, task, tools, max_steps)
