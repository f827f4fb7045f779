"""What MCP servers send, as text for the model or the user (tools/mcp.py): a tool's result, a resource's
contents (binary content summarized in one line), a prompt's arguments read from a slash command, an error
in one line."""

from __future__ import annotations

import json
import shlex


def prompt_arguments(prompt, text: str) -> dict[str, str]:
    """`a b`, `name=value` or both, mapped onto the prompt's arguments; the last one takes the rest
    of the words. ValueError when a required one is missing or a name is unknown."""
    names = [argument.name for argument in prompt.arguments or []]
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise ValueError(f"cannot read the arguments: {exc}") from None
    given: dict[str, str] = {}
    positional = []
    for word in words:
        key, equals, value = word.partition("=")
        if equals and key in names:
            given[key] = value
        else:
            positional.append(word)
    free = [name for name in names if name not in given]
    if positional and not free:
        raise ValueError(f"too many arguments: the prompt takes {', '.join(names) or 'none'}")
    for index, name in enumerate(free):
        if index >= len(positional):
            break
        given[name] = " ".join(positional[index:]) if index == len(free) - 1 else positional[index]
    missing = [argument.name for argument in prompt.arguments or [] if argument.required and argument.name not in given]
    if missing:
        raise ValueError(f"missing argument(s): {', '.join(missing)}")
    return given


def result_text(result) -> str:
    """A tool result's content as text: text as it is, anything else summarized in one line."""
    parts = [content_text(item) for item in result.content or []]
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


def content_text(item) -> str:
    kind = getattr(item, "type", "")
    if kind == "text":
        return item.text
    if kind in ("image", "audio"):
        return f"[{kind} content: {item.mime_type}, {len(item.data or '') * 3 // 4} bytes, not shown]"
    if kind == "resource_link":
        return f"[resource link: {item.uri}]"
    if kind == "resource":
        return contents_text(item.resource)
    return f"[{kind or 'unknown'} content, not shown]"


def contents_text(resource) -> str:
    """A resource's contents: its text, or binary content summarized in one line."""
    text = getattr(resource, "text", None)
    if isinstance(text, str):
        return text
    return f"[resource {resource.uri}: {getattr(resource, 'mime_type', None) or 'binary'}, not shown]"


def one_line(error: BaseException | str) -> str:
    while getattr(error, "exceptions", None):  # an exception group: its first cause
        error = error.exceptions[0]  # type: ignore[union-attr]
    text = str(error) if isinstance(error, str) else (f"{type(error).__name__}: {error}" if str(error)
                                                      else type(error).__name__)
    return " ".join(text.split())[:500]
