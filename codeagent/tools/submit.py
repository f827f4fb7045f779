"""The submit tool: the agent says it is done; the patch is the sandbox's diff."""

from __future__ import annotations

from .base import ToolContext, ToolResult
from .text import truncate_middle


def submit(context: ToolContext) -> ToolResult:
    patch = context.sandbox.diff(exclude=context.settings.patch_exclude)
    if context.settings.review_on_submit and not context.state.get("reviewed"):
        context.state["reviewed"] = True
        if not patch.strip():
            return ToolResult("Your change is empty: nothing differs from the original code. Make the fix "
                              "first, or call submit again to give up with an empty patch.")
        return ToolResult("Review your change before it is final. Remove reproduction scripts and debugging "
                          "output that are not part of the fix, then call submit again.\n\n"
                          + truncate_middle(patch, context.settings.observation_chars))
    return ToolResult("Submitted." if patch.strip() else "Submitted an empty patch.", submitted=True)
