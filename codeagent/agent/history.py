"""Fit a conversation into the model's context window without breaking its structure.

Order of sacrifice, each step only while the conversation is still too long:
1. old tool observations, oldest first, are replaced by a short marker;
2. whole old turns (an assistant message with its tool results, plus any user messages between)
   are dropped, oldest first, leaving one note saying how many messages were removed;
3. the observations of the latest turn are cut to head + tail;
4. the system and first user messages are cut to head + tail.
The system messages, the first user message and the latest turn are never dropped, and an
assistant message with tool_calls is always kept or dropped together with its tool results.
The project instructions (`keep`) are never lost: cut with the system prompt, they are put back whole.
"""

from __future__ import annotations

from collections.abc import Callable

from ..models.tokens import TokenCounter, estimate_tokens
from ..models.tokens import message_text as _text
from ..text import head_tail as text_head_tail

__all__ = ["TokenCounter", "elision_marker", "estimate_tokens", "fit_messages", "head_tail"]


def elision_marker(chars: int) -> str:
    return f"[output elided to fit the context window: {chars} chars]"


def head_tail(text: str, keep_chars: int) -> str:
    """Keep the start and end of text within about keep_chars characters."""
    return text_head_tail(text, keep_chars, "[... {cut} chars elided to fit the context window ...]")


def _turns(messages: list[dict], start: int) -> list[list[int]]:
    """Group message indices from `start` into turns: an assistant message with the tool
    results that follow it; any other message is a turn of its own."""
    turns: list[list[int]] = []
    for index in range(start, len(messages)):
        role = messages[index].get("role")
        if role == "tool" and turns and messages[turns[-1][0]].get("role") == "assistant":
            turns[-1].append(index)
        else:
            turns.append([index])
    return turns


def fit_messages(
    messages: list[dict], budget_tokens: int, count_tokens: TokenCounter = estimate_tokens, keep: str = "",
    upper_bound: Callable[[list[dict]], int | None] | None = None,
) -> list[dict]:
    """Return a copy of messages that fits budget_tokens (best effort; never raises). `keep` (the
    project instructions) must reach the model whole: when no message holds it any more (it was
    cut, or never there), it comes back as a system message after the leading ones. `upper_bound`
    (the model's, at least count_tokens' sum; None: unknown): under the budget, nothing is counted."""
    bound = upper_bound(messages) if upper_bound is not None else None
    if bound is not None and bound <= budget_tokens:
        fitted = [dict(message) for message in messages]
    else:
        fitted = _fit(messages, budget_tokens, count_tokens)
    if not keep or any(keep in _text(message.get("content")) for message in fitted):
        return fitted
    again = {"role": "system", "content": keep}
    fitted = _fit(messages, max(0, budget_tokens - count_tokens([again])), count_tokens)
    if any(keep in _text(message.get("content")) for message in fitted):
        return fitted
    at = next((i for i, message in enumerate(fitted) if message.get("role") != "system"), len(fitted))
    return [*fitted[:at], again, *fitted[at:]]


def _fit(messages: list[dict], budget_tokens: int, count_tokens: TokenCounter) -> list[dict]:
    messages = [dict(message) for message in messages]
    sizes = [count_tokens([message]) for message in messages]
    if sum(sizes) <= budget_tokens or not messages:
        return messages

    def fits() -> bool:
        return sum(sizes) <= budget_tokens

    def set_content(index: int, content: str) -> None:
        messages[index]["content"] = content
        sizes[index] = count_tokens([messages[index]])

    # The protected prefix: leading system messages and the first user message.
    prefix_end = 0
    while prefix_end < len(messages) and messages[prefix_end].get("role") == "system":
        prefix_end += 1
    if prefix_end < len(messages) and messages[prefix_end].get("role") == "user":
        prefix_end += 1
    turns = _turns(messages, prefix_end)
    last_turn = set(turns[-1]) if turns else set()

    # 1. Old observations, oldest first.
    for turn in turns[:-1]:
        for index in turn:
            if fits():
                break
            if messages[index].get("role") == "tool":
                text = _text(messages[index].get("content"))
                marker = elision_marker(len(text))
                if len(text) > len(marker):
                    set_content(index, marker)
    # 2. Whole old turns, oldest first.
    dropped: set[int] = set()
    note_index = None
    for turn in turns[:-1]:
        if fits():
            break
        dropped.update(turn)
        for index in turn:
            sizes[index] = 0
        if note_index is None:
            note_index = turn[0]
            sizes[note_index] = count_tokens([_dropped_note(1)])
    # 3. Observations of the latest turn, then 4. the protected prefix: head + tail.
    tail_targets = [i for i in sorted(last_turn) if messages[i].get("role") == "tool"]
    tail_targets += [i for i in sorted(last_turn) if messages[i].get("role") != "tool"]
    for index in tail_targets + list(range(prefix_end)):
        if fits():
            break
        _shrink(messages, sizes, index, budget_tokens, set_content)

    result = []
    removed = len(dropped)
    for index, message in enumerate(messages):
        if index == note_index:
            result.append(_dropped_note(removed))
        if index not in dropped:
            result.append(message)
    return result


def _dropped_note(count: int) -> dict:
    return {
        "role": "user",
        "content": f"[{count} earlier messages were removed to fit the context window]",
    }


def _shrink(messages, sizes, index, budget_tokens, set_content) -> None:
    """Cut one message's text to head + tail, just enough to fit if possible."""
    text = _text(messages[index].get("content"))
    if not text:
        return
    excess = sum(sizes) - budget_tokens
    # Shrink in proportion to the excess, then halve until it fits or little is left.
    ratio = max(0.0, 1 - excess / max(sizes[index], 1))
    keep = int(len(text) * ratio * 0.95)
    while True:
        set_content(index, head_tail(text, keep))
        if sum(sizes) <= budget_tokens or keep <= 0:
            return
        keep //= 2
