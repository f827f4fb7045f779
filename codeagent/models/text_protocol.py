"""Tool calling for models without native support: calls written in the reply text.

A call is a JSON object inside tags, one per call (the Qwen/Hermes convention, which the local
models we fine-tune use too):

    <tool_call>
    {"name": "bash", "arguments": {"command": "ls"}}
    </tool_call>

Tool results go back as user messages wrapped in <tool_response> tags.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from .types import ToolCall, check_tool_name

OPEN = "<tool_call>"
CLOSE = "</tool_call>"
EXPECTED_FORM = OPEN + '\n{"name": "<tool name>", "arguments": {<arguments as a JSON object>}}\n' + CLOSE

# Tool-call syntaxes of other model families; seen without any <tool_call> block they mean the
# model tried to call a tool in a format this protocol does not read.
_FOREIGN_FORMATS = [
    (re.compile(r"<function=[\w.-]+>"), "<function=...> tags"),
    (re.compile(r"<tool_use>|<invoke name="), "<tool_use>/<invoke> tags"),
    (re.compile(r"\[TOOL_CALLS\]"), "[TOOL_CALLS]"),
    (re.compile(r"<\|tool_call\|>|<\|python_tag\|>|<tool_call\|>|<\|tool_call>"), "special-token tags"),
    (re.compile(r"<tool_calls?\s*/?>|<toolcall>|<function_call>", re.I), "a misspelled tag"),
]
_FENCED_JSON = re.compile(r"```(?:json)?\s*\n(\{.*?\})\s*\n```", re.S)
_DECODER = json.JSONDecoder()


@dataclass
class ParsedReply:
    content: str  # the text outside the tool-call blocks
    tool_calls: list[ToolCall] = field(default_factory=list)
    error: str | None = None


def new_call_id() -> str:
    return "call_" + uuid.uuid4().hex[:12]


def _line_col(text: str, index: int) -> str:
    line = text.count("\n", 0, index) + 1
    column = index - (text.rfind("\n", 0, index) + 1) + 1
    return f"line {line}, column {column}"


def _strip_fence(body: str) -> str:
    body = body.strip()
    match = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", body, re.S)
    return match.group(1) if match else body


_FENCE_OPEN = re.compile(r"\s*(```(?:json)?[ \t]*\n)?\s*")
_FENCE_CLOSE = re.compile(r"\s*(```)?\s*")


_NOT_DECODED = object()


class _Undecoded(str):
    """The text of a block whose JSON did not decode; parsed again to say why."""


def _read_block(text: str, start: int) -> tuple[Any, int] | str:
    """Read the block opened at `start`: (decoded JSON or _Undecoded body, index after the
    closing tag), or an error. The JSON is decoded first, so a closing tag inside a string value
    is harmless."""
    body_start = start + len(OPEN)
    position = _FENCE_OPEN.match(text, body_start).end()  # type: ignore[union-attr]  # all optional: it matches
    try:
        payload, end = _DECODER.raw_decode(text, position)
    except json.JSONDecodeError:
        payload = _NOT_DECODED
    if payload is not _NOT_DECODED:
        after = _FENCE_CLOSE.match(text, end).end()  # type: ignore[union-attr]  # all optional: it matches
        if text.startswith(CLOSE, after):
            return payload, after + len(CLOSE)
    end = text.find(CLOSE, body_start)
    nested = text.find(OPEN, body_start)
    if end == -1 or (nested != -1 and nested < end):
        return (
            f"unclosed {OPEN} at {_line_col(text, start)}: close each call with {CLOSE} "
            f"right after its JSON object"
        )
    if payload is not _NOT_DECODED:
        return (
            f"unexpected text after the JSON object of the call at {_line_col(text, start)}: "
            f"{text[after:end][:80]!r}; put {CLOSE} right after the object"
        )
    return _Undecoded(text[body_start:end]), end + len(CLOSE)


def _parse_block(body: Any, ordinal: int, known: list[str] | None) -> ToolCall | str:
    where = f"tool call #{ordinal}"
    if isinstance(body, _Undecoded):
        body = _strip_fence(body)
        if not body:
            return f"{where} is empty; expected {EXPECTED_FORM}"
        try:
            json.loads(body)
        except json.JSONDecodeError as error:
            around = body[max(0, error.pos - 30) : error.pos + 30]
            return (
                f"{where} is not valid JSON: {error.msg} at line {error.lineno} column "
                f"{error.colno} (char {error.pos}) of the block, near {around!r}"
            )
        return f"{where} is not a single JSON object; expected {EXPECTED_FORM}"
    payload = body
    if not isinstance(payload, dict):
        return f"{where} must be a JSON object with \"name\" and \"arguments\", got {type(payload).__name__}"
    name = payload.get("name")
    if name is None:
        return f"{where} has no \"name\" key (keys: {', '.join(payload) or 'none'}); expected {EXPECTED_FORM}"
    if not isinstance(name, str) or not name.strip():
        return f"{where}: \"name\" must be a non-empty string, got {json.dumps(name)}"
    arguments = payload.get("arguments", {})
    if not isinstance(arguments, dict):
        return (
            f"{where} to {name!r}: \"arguments\" must be a JSON object, got "
            f"{type(arguments).__name__} {json.dumps(arguments)[:100]}"
        )
    unknown = check_tool_name(name, known)
    if unknown:
        return f"{where}: {unknown}"
    return ToolCall(
        id=new_call_id(), name=name, arguments=arguments, raw_arguments=json.dumps(arguments)
    )


def parse_tool_calls(
    text: str, *, tool_names: list[str] | None = None, max_calls: int | None = None
) -> ParsedReply:
    """Split a reply into its text and tool calls, or give the precise reason it is malformed.

    On error no call is returned (a half-valid reply is not run) and content is the full text.
    """
    text = text or ""
    blocks: list[tuple[int, Any]] = []  # (position, parsed JSON or the raw body text)
    outside: list[str] = []
    cursor = 0
    while True:
        start = text.find(OPEN, cursor)
        stray_close = text.find(CLOSE, cursor)
        if stray_close != -1 and (start == -1 or stray_close < start):
            return ParsedReply(
                text,
                error=f"found {CLOSE} at {_line_col(text, stray_close)} without a matching {OPEN} "
                f"before it; expected {EXPECTED_FORM}",
            )
        if start == -1:
            outside.append(text[cursor:])
            break
        outside.append(text[cursor:start])
        block = _read_block(text, start)
        if isinstance(block, str):
            return ParsedReply(text, error=block)
        body, cursor = block
        blocks.append((start, body))

    content = "".join(outside).strip()
    if not blocks:
        foreign = _foreign_format(text)
        if foreign:
            return ParsedReply(
                text,
                error=f"the reply seems to call a tool with {foreign}, which is not understood; "
                f"write each call as {EXPECTED_FORM}",
            )
        return ParsedReply(content)
    if max_calls is not None and len(blocks) > max_calls:
        return ParsedReply(
            text,
            error=f"found {len(blocks)} tool calls but at most {max_calls} allowed per reply; "
            f"make one call, read its result, then make the next",
        )
    calls, problems = [], []
    for ordinal, (start, body) in enumerate(blocks, start=1):
        parsed = _parse_block(body, ordinal, tool_names)
        if isinstance(parsed, str):
            problems.append(f"{parsed} (block starts at {_line_col(text, start)})")
        else:
            calls.append(parsed)
    if problems:
        return ParsedReply(text, error="; ".join(problems))
    return ParsedReply(content, calls)


def _foreign_format(text: str) -> str | None:
    for pattern, label in _FOREIGN_FORMATS:
        if pattern.search(text):
            return label
    for match in _FENCED_JSON.finditer(text):
        try:
            payload = json.loads(match.group(1))
        except json.JSONDecodeError:
            continue
        if isinstance(payload, dict) and "name" in payload and "arguments" in payload:
            return "a JSON code block instead of <tool_call> tags"
    return None


def format_tool_call(name: str, arguments: dict[str, Any] | str) -> str:  # str: arguments that are not JSON
    return f"{OPEN}\n{json.dumps({'name': name, 'arguments': arguments})}\n{CLOSE}"


def render_tools_prompt(tools: list[dict]) -> str:
    """Text for the system prompt: the available tools and how to call them."""
    specs = "\n".join(json.dumps(tool.get("function", tool)) for tool in tools)
    return (
        "# Tools\n\n"
        "These tools are available. Each is described by a JSON schema inside <tools> tags:\n"
        f"<tools>\n{specs}\n</tools>\n\n"
        "To use a tool, write a JSON object with its name and arguments between tags, like this:\n"
        f"{EXPECTED_FORM}\n"
        "Write nothing after your tool calls. The results come back in <tool_response> tags."
    )


def to_text_messages(messages: list[dict], tools: list[dict]) -> list[dict]:
    """Rewrite an OpenAI-format conversation for a model that only reads and writes text."""
    out: list[dict] = []
    tools_prompt = render_tools_prompt(tools) if tools else ""
    if tools_prompt and not (messages and messages[0].get("role") == "system"):
        out.append({"role": "system", "content": tools_prompt})
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "system" and index == 0 and tools_prompt:
            out.append({"role": "system", "content": f"{message.get('content') or ''}\n\n{tools_prompt}"})
        elif role == "assistant" and message.get("tool_calls"):
            parts = [message.get("content") or ""]
            for call in message["tool_calls"]:
                function = call.get("function", {})
                arguments = function.get("arguments") or "{}"
                try:
                    arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
                except json.JSONDecodeError:
                    pass
                parts.append(format_tool_call(function.get("name", ""), arguments))
            out.append({"role": "assistant", "content": "\n".join(p for p in parts if p)})
        elif role == "tool":
            response = f"<tool_response>\n{message.get('content') or ''}\n</tool_response>"
            if out and out[-1].get("role") == "user" and out[-1].get("_tool_responses"):
                out[-1]["content"] += "\n" + response
            else:
                out.append({"role": "user", "content": response, "_tool_responses": True})
        else:
            out.append({k: v for k, v in message.items() if k in ("role", "content", "name")})
    for message in out:
        message.pop("_tool_responses", None)
    return out



def response_from_text(
    text: str, known_tools: list[str] | None = None, max_calls: int | None = None, **fields: Any
):
    """A ModelResponse from a reply written in this protocol."""
    from .types import ModelResponse

    parsed = parse_tool_calls(text, tool_names=known_tools, max_calls=max_calls)
    error = parsed.error
    if error is None and not parsed.tool_calls and not parsed.content:
        error = f"empty reply: no text and no tool call; call a tool with {EXPECTED_FORM}"
    return ModelResponse(
        content=parsed.content, tool_calls=parsed.tool_calls, format_error=error, **fields
    )
