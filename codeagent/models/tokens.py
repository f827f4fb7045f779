"""Counting a conversation's tokens without a tokenizer: the fallback every backend shares."""

from __future__ import annotations

from collections.abc import Callable

TokenCounter = Callable[[list[dict]], int]

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD_TOKENS = 4
BOUND_SLACK_TOKENS = 16  # per message and per field: a chat format's own tokens, a tokenizer's special ones


def estimate_tokens(messages: list[dict]) -> int:
    """Cheap estimate (chars / 4); a backend with a tokenizer can pass an exact counter."""
    total = 0
    for message in messages:
        chars = len(message_text(message.get("content")))
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            chars += len(function.get("name") or "") + len(str(function.get("arguments") or ""))
        total += chars // CHARS_PER_TOKEN + MESSAGE_OVERHEAD_TOKENS
    return total


def message_text(content) -> str:
    """A message's content as text (string content, or the text parts of a list)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)


def token_upper_bound(messages: list[dict]) -> int | None:
    """More tokens than a tokenizer counts for these messages as a chat (a byte-level or byte-fallback
    tokenizer makes at most one token per byte of text; the chat format adds a few per message and field),
    without a tokenizer; None for a message with more than text (images, tool calls): count those. Where it
    is under the budget, the conversation fits without loading a tokenizer (litellm's: ~0.2 s)."""
    total = BOUND_SLACK_TOKENS
    for message in messages:
        total += BOUND_SLACK_TOKENS
        for key, value in message.items():
            if not isinstance(value, str):
                return None
            total += len(key) + len(value.encode("utf-8", "surrogatepass")) + BOUND_SLACK_TOKENS
    return total
