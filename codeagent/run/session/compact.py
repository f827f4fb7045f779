"""/compact: the conversation so far replaced by a summary the model writes, to free its context.

One model call: the conversation (fitted to the window by agent/history.py, as every step's call
is) and a request to summarize it. What the next turns send is then the system prompt (with the
project instructions), the task as first given, and one message with the summary and the current
patch, followed by whatever comes after. The trajectory keeps every message as it was (it is the
record, and training data); the session keeps the compacted view and gives it to the agent as the
conversation to continue (`view`). Runs on the session's thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...agent.history import estimate_tokens, fit_messages
from ...models import Sampling
from .state import Compaction

if TYPE_CHECKING:
    from ...trajectory.schema import Trajectory
    from .parts import SessionParts
    from .state import SessionState

REQUEST = (
    "The user asked to compact this conversation to free context. Write a summary of it that lets you "
    "continue the work without the earlier messages: the goal, what you found (files, functions, causes), "
    "what you changed and why, what you tried that did not work, the commands that test the change, and "
    "what is left to do. Plain text, no tool calls.")
SUMMARY = ("[The conversation so far was compacted at the user's request (/compact). The task above and the "
           "system prompt are as given; this is the summary of what happened since:]\n\n{summary}\n\n{patch}")


def view(state: SessionState, trajectory: Trajectory) -> Trajectory:
    """The trajectory with the conversation the agent continues: compacted when /compact ran on it."""
    compaction = state.compaction
    if compaction is None or compaction.trajectory_id != trajectory.id:
        return trajectory
    return trajectory.model_copy(update={"messages": compaction.messages + trajectory.messages[compaction.upto:]})


def compact(session: SessionParts) -> None:
    state = session.state
    if state.trajectory_id is None:
        session.notice("/compact: there is no conversation yet.", "warning")
        return
    if session.model is None:
        session.notice("/compact needs a model to write the summary: choose one with /model NAME.", "warning")
        return
    trajectory = session.store.load(state.trajectory_id)
    messages = view(state, trajectory).messages
    head = _head(messages)
    if len(messages) <= len(head):
        session.notice("/compact: nothing to compact: the conversation is only the task so far.")
        return
    model, config = session.model, session.config.model
    count = getattr(model, "count_tokens", estimate_tokens)
    budget = max(1024, config.context_tokens - (config.max_tokens or 4096))
    request = fit_messages([*messages, {"role": "user", "content": REQUEST}], budget, count)
    response = model.complete(request, [], Sampling(temperature=config.temperature, max_tokens=config.max_tokens))
    state.stats.prompt_tokens += response.usage.prompt_tokens or 0
    state.stats.completion_tokens += response.usage.completion_tokens or 0
    state.stats.cost += response.usage.cost or 0.0
    summary = (response.content or "").strip()
    if not summary:
        session.notice("/compact: the model wrote no summary; the conversation is kept as it was.", "error")
        return
    patch = (f"The changes so far (the patch against the base commit):\n```diff\n{state.patch.rstrip()}\n```"
             if state.patch.strip() else "No files are changed so far.")
    compacted = [*head, {"role": "user", "content": SUMMARY.format(summary=summary, patch=patch)}]
    before, after = count(messages), count(compacted)
    state.compaction = Compaction(trajectory.id, len(trajectory.messages), compacted)
    state.stats.context = after
    session.notice(f"Compacted the conversation: about {before:,} -> {after:,} tokens of context. The task, the "
                   "project instructions and the patch are kept; the next message continues from the summary.",
                   "success")


def _head(messages: list[dict]) -> list[dict]:
    """The system messages in front and the first user message (the task)."""
    end = 0
    while end < len(messages) and messages[end].get("role") == "system":
        end += 1
    if end < len(messages) and messages[end].get("role") == "user":
        end += 1
    return messages[:end]
