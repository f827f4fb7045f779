"""Data that crosses the model boundary: sampling settings, tool calls, responses."""

from __future__ import annotations

import json
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field


class Sampling(BaseModel):
    temperature: float = 0.0
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    stop: list[str] | None = None


class ToolCall(BaseModel):
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    raw_arguments: str = "{}"  # exactly what the model wrote, kept for token-exact records


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None  # None when the price is unknown (local and open models)


class ModelResponse(BaseModel):
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    finish_reason: str | None = None
    # Set when the reply could not be turned into valid tool calls; then tool_calls is empty and
    # content holds what the model wrote, so the agent can answer with this exact reason.
    format_error: str | None = None
    token_ids: list[int] | None = None  # completion token ids, when the backend exposes them
    logprobs: list[float] | None = None  # one per completion token
    prompt_token_ids: list[int] | None = None  # the exact prompt tokens (local models)
    raw: dict[str, Any] | None = None

    def to_message(self) -> dict[str, Any]:
        """The assistant message (OpenAI chat format) to append to the conversation."""
        return assistant_message(self.content, self.tool_calls)


@runtime_checkable
class Model(Protocol):
    name: str

    def complete(
        self, messages: list[dict], tools: list[dict], sampling: Sampling
    ) -> ModelResponse: ...


def assistant_message(content: str, tool_calls: list[ToolCall]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        # Several providers reject an empty text block next to tool calls; null is accepted by all.
        message["content"] = content or None
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.raw_arguments},
            }
            for call in tool_calls
        ]
    return message


def tool_names(tools: list[dict]) -> list[str]:
    names = []
    for tool in tools or []:
        function = tool.get("function", tool)
        if isinstance(function, dict) and function.get("name"):
            names.append(function["name"])
    return names


def _snippet(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more chars]"


def check_tool_name(name: str, known: list[str] | None) -> str | None:
    if known and name not in known:
        return f"unknown tool {name!r}; available tools: {', '.join(known)}"
    return None


def parse_native_tool_calls(
    raw_calls: list[dict] | None, known_tools: list[str] | None = None
) -> tuple[list[ToolCall], str | None]:
    """Validate OpenAI-format tool calls; return (calls, None) or ([], precise reason)."""
    calls: list[ToolCall] = []
    problems: list[str] = []
    for position, raw in enumerate(raw_calls or [], start=1):
        function = raw.get("function") or {}
        call_id = raw.get("id") or f"call_{position}"
        name = function.get("name")
        where = f"tool call #{position} (id {call_id})"
        if not isinstance(name, str) or not name.strip():
            problems.append(f"{where} has no function name")
            continue
        arguments_text = function.get("arguments")
        if isinstance(arguments_text, dict):  # some backends hand back parsed arguments
            arguments, arguments_text = arguments_text, json.dumps(arguments_text)
        else:
            arguments_text = arguments_text or ""
            if not arguments_text.strip():
                arguments = {}
            else:
                try:
                    arguments = json.loads(arguments_text)
                except json.JSONDecodeError as error:
                    problems.append(
                        f"{where} to {name!r}: arguments are not valid JSON: {error.msg} at line "
                        f"{error.lineno} column {error.colno} (char {error.pos}); got: "
                        f"{_snippet(arguments_text)}; expected a JSON object such as "
                        '{"arg": "value"}'
                    )
                    continue
        if not isinstance(arguments, dict):
            problems.append(
                f"{where} to {name!r}: arguments must be a JSON object, got "
                f"{type(arguments).__name__}: {_snippet(str(arguments_text))}"
            )
            continue
        unknown = check_tool_name(name, known_tools)
        if unknown:
            problems.append(f"{where}: {unknown}")
            continue
        calls.append(
            ToolCall(id=call_id, name=name, arguments=arguments, raw_arguments=arguments_text)
        )
    if problems:
        return [], "; ".join(problems)
    return calls, None


def response_from_message(
    message: dict[str, Any], known_tools: list[str] | None = None, **fields: Any
) -> ModelResponse:
    """Build a response from an OpenAI-format assistant message (recorded, scripted or returned)."""
    content = message.get("content") or ""
    if not isinstance(content, str):  # list-of-parts content: keep the text parts
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    calls, error = parse_native_tool_calls(message.get("tool_calls"), known_tools)
    if error is None and not calls and not content.strip():
        error = "empty reply: no text and no tool call; reply with a tool call"
    return ModelResponse(content=content, tool_calls=calls, format_error=error, **fields)
