"""The chat completion logic of `codeagent serve` (serve/server.py), independent of HTTP: a request checked
(serve/schema.py), rendered into the model's turn, generated, and answered in OpenAI's shape
(tool calls, token ids, logprobs, streamed chunks)."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from .schema import ChatRequest, validate_request

DEFAULT_NAME = "codeagent"
# Rendering a value through the chat template costs far more than decoding it: real tool specs hold hundreds.
MAX_STRUCTURED_VALUES = 100_000


class RequestError(ValueError):
    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # list of parts: keep the text ones
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)


def _messages(raw: list[dict]) -> list[dict]:
    out = []
    for message in raw:
        clean = {key: value for key, value in message.items()
                 if key in ("role", "content", "tool_calls", "tool_call_id", "name")}
        clean["content"] = _text(message.get("content"))
        out.append(clean)
    return out


def _too_many_values(value: Any, limit: int) -> bool:
    """Whether `value` holds more than `limit` JSON values (counted without copying, stopping early)."""
    stack, seen = [value], 0
    while stack:
        item = stack.pop()
        seen += 1
        if seen > limit:
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _sampling(request: ChatRequest, limit: int | None):
    from ..models.types import Sampling

    max_tokens = request.max_completion_tokens or request.max_tokens
    if limit and max_tokens:
        max_tokens = min(max_tokens, limit)  # the server's --max-tokens is also the most a reply gets
    stop = request.stop
    return Sampling(
        temperature=request.temperature if request.temperature is not None else 0.0,
        top_p=request.top_p, seed=request.seed, max_tokens=max_tokens,
        stop=[stop] if isinstance(stop, str) else stop,
    )


@dataclass
class Prepared:
    turn: Any  # the model's rendered turn (HFModel.start): ids, not the request's objects
    logprobs: bool
    as_token_ids: bool
    token_ids: bool
    stream: bool


class ChatService:
    """The request -> response logic, independent of HTTP."""

    def __init__(self, model, name: str = DEFAULT_NAME):
        self.model = model
        self.name = name

    def models(self) -> dict:
        return {"object": "list", "data": [{"id": self.name, "object": "model", "created": int(time.time()),
                                            "owned_by": "codeagent"}]}

    def chat(self, body: Any) -> dict:
        return self.answer(self.prepare(body))

    def prepare(self, body: Any) -> Prepared:
        """The checked request, rendered into the model's turn: no decoded object of the body outlives
        this call (tool schemas or tool-call arguments may be millions of tiny objects)."""
        try:
            request = validate_request(body)
        except ValueError as error:
            raise RequestError(str(error)) from None
        structured = [body.get("tools") or []] + [call.get("function", {}).get("arguments")
                                                   for message in body["messages"] if isinstance(message, dict)
                                                   for call in message.get("tool_calls") or []]
        if _too_many_values(structured, MAX_STRUCTURED_VALUES):
            raise RequestError(f"the tool schemas and tool-call arguments hold more than {MAX_STRUCTURED_VALUES} "
                               "JSON values; the chat template cannot render that many")
        messages = _messages(body["messages"])
        tools = body.get("tools") or []
        if request.tool_choice == "none":
            tools = []
        turn = self.model.start(messages, tools, _sampling(request, getattr(self.model, "max_new_tokens", None)))
        return Prepared(turn, bool(request.logprobs), bool(request.return_tokens_as_token_ids),
                        bool(request.return_token_ids), request.stream is True)

    def answer(self, prepared: Prepared) -> dict:
        request = prepared
        response = self.model.finish(prepared.turn)
        message: dict[str, Any] = {"role": "assistant", "content": response.content or None}
        if response.format_error and not response.tool_calls:
            message["content"] = response.content  # what the model wrote; the client sees no call
        if response.tool_calls:
            message["tool_calls"] = [{"id": call.id, "type": "function",
                                      "function": {"name": call.name, "arguments": call.raw_arguments}}
                                     for call in response.tool_calls]
        finish = "tool_calls" if response.tool_calls else ("length" if response.finish_reason == "length" else "stop")
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
        if request.token_ids:
            choice["token_ids"] = response.token_ids
        if request.logprobs and response.token_ids is not None:
            as_ids = request.as_token_ids
            tokenizer = getattr(self.model, "tokenizer", None)
            choice["logprobs"] = {"content": [
                {"token": f"token_id:{token}" if as_ids or tokenizer is None else tokenizer.decode([token]),
                 "logprob": logprob, "bytes": None, "top_logprobs": []}
                for token, logprob in zip(response.token_ids, response.logprobs or [])]}
        usage = response.usage
        result = {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()),
                  "model": self.name, "choices": [choice],
                  "usage": {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
                            "total_tokens": usage.prompt_tokens + usage.completion_tokens}}
        if request.token_ids:
            result["prompt_token_ids"] = response.prompt_token_ids
        return result

    @staticmethod
    def stream_chunks(result: dict) -> list[dict]:
        """A finished completion as chat.completion.chunk events (one delta, then the finish)."""
        choice = result["choices"][0]
        message = dict(choice["message"])
        delta: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
        if message.get("tool_calls"):
            delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]
        base = {"id": result["id"], "object": "chat.completion.chunk", "created": result["created"],
                "model": result["model"]}
        return [{**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}],
                 "usage": result["usage"]}]
