"""A run's first request to a self-hosted OpenAI-compatible server (`--api-base`), sent without waiting
for litellm's import (seconds of CPU at launch): litellm is imported in the background meanwhile, while the
server thinks, and the reply is put together here (`assemble`: the same response and usage as litellm's, and
no cost, as litellm knows no price for these names), so that the first reply is not kept waiting either.

Taken only where litellm would send the request as it is: a `openai/` or `hosted_vllm/` name at an
api_base, no extra litellm options, a name litellm's price table has no entry for (litellm then assumes
native tool calling and knows no price), and a conversation of system and user text only (a run's
first prompt). A server that answers with an error status has failed the run's first attempt, judged
as litellm's error would be (`ServerStatus`: retried with backoff and reported, or the run's model error,
with the server's words); any other failure (no connection, a stream cut short) hands the request to
litellm, whose retries and error messages are the ones a run always had.
"""

from __future__ import annotations

import functools
import json
import os
import threading
from importlib.util import find_spec
from typing import Any

from . import progress

# The providers whose requests go out unchanged, and the key litellm sends when none is given: its
# environment variable, else the placeholder (openai's comes from the model's check: "EMPTY").
KEYS = {"openai": ("OPENAI_API_KEY", None), "hosted_vllm": ("HOSTED_VLLM_API_KEY", "fake-api-key")}
# litellm's own arguments, not the server's
LITELLM_ONLY = ("model", "timeout", "num_retries", "max_retries", "drop_params", "api_base", "api_key", "extra_body")


class ServerStatus(Exception):
    """A status the server answered the first request with; `status_code` and `response` as litellm's
    errors carry them, so that the retry logic judges it (and reads its retry-after) the same way."""

    def __init__(self, status_code: int, message: str, response: Any):
        super().__init__(f"{status_code}: {message}")
        self.status_code = status_code
        self.response = response


def error_message(raw: bytes) -> str:
    """The server's own words for a failed request: its JSON error's message, else the body's start."""
    try:
        error = json.loads(raw).get("error")
        message = error.get("message") if isinstance(error, dict) else error
        if isinstance(message, str) and message:
            return message[:400]
    except (ValueError, AttributeError):
        pass
    return raw[:400].decode("utf-8", "replace")


def provider_of(name: str, api_base: str | None, extra: dict) -> str | None:
    """The provider of a model whose first request may go out without litellm (None: litellm sends it)."""
    provider, _, rest = name.partition("/")
    if not (rest and api_base and provider in KEYS and not extra):
        return None
    if os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP") not in (None, "True"):
        return None  # litellm reads its price table from the network: it may know this name
    return None if _priced(name.lower()) else provider


def first_prompt(messages: list[dict]) -> bool:
    """System and user messages of text alone: what litellm sends unchanged to these providers."""
    def text(content: Any) -> bool:
        return isinstance(content, str) or (isinstance(content, list) and all(
            isinstance(part, dict) and part.get("type") == "text" for part in content))

    return all(message.get("role") in ("system", "user") and text(message.get("content")) for message in messages)


@functools.lru_cache(maxsize=1)
def _table_names() -> frozenset[str] | None:
    """Every model name litellm's bundled price table knows, whole and without its provider prefix (None:
    litellm is not installed, or its table cannot be read: litellm decides, and says so)."""
    spec = find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "model_prices_and_context_window_backup.json")
    try:
        with open(path, encoding="utf-8") as file:
            keys = [key.lower() for key in json.load(file)]
    except (OSError, ValueError):
        return None
    return frozenset(keys + [key.split("/", 1)[1] for key in keys if "/" in key])


def _priced(name: str) -> bool:
    names = _table_names()
    if names is None:
        return True
    return name in names or name.split("/", 1)[1] in names


def api_key(provider: str, given: str | None) -> str | None:
    variable, placeholder = KEYS[provider]
    return given or os.environ.get(variable) or placeholder


def body(request: dict) -> dict:
    """The JSON body litellm sends for `request` (its arguments to litellm.completion)."""
    sent = {key: value for key, value in request.items() if key not in LITELLM_ONLY}
    sent["model"] = request["model"].split("/", 1)[1]
    return {**sent, **dict(request.get("extra_body") or {})}


def read_events(response) -> list[dict] | None:
    """The chunks of a streamed reply (server-sent events), each text and tool-call piece reported as it
    comes; None when the stream ends before the reply does (no finish reason)."""
    chunks: list[dict] = []
    for line in response.iter_lines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            break
        chunk = json.loads(data)
        chunks.append(chunk)
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                progress.report(progress.TextDelta(delta["content"]))
            for call in delta.get("tool_calls") or []:
                function = call.get("function") or {}
                progress.report(progress.ToolCallDelta(
                    index=call.get("index") or 0, call_id=call.get("id") or "", name=function.get("name") or "",
                    arguments=function.get("arguments") or ""))
    finished = any(choice.get("finish_reason") for chunk in chunks for choice in chunk.get("choices") or [])
    return chunks if finished else None


def assemble(chunks: list[dict]) -> dict:
    """A streamed reply's chunks as one chat.completion (what litellm's stream_chunk_builder makes of them):
    the text and each tool call's arguments joined, the last finish reason, the usage."""
    text: list[str] = []
    calls: dict[int, dict] = {}
    finish, usage = None, None
    for chunk in chunks:
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            text.append(delta.get("content") or "")
            for piece in delta.get("tool_calls") or []:
                call = calls.setdefault(piece.get("index") or 0, {"id": "", "type": "function",
                                                                   "function": {"name": "", "arguments": ""}})
                call["id"] = call["id"] or piece.get("id") or ""
                function = piece.get("function") or {}
                call["function"]["name"] += function.get("name") or ""
                call["function"]["arguments"] += function.get("arguments") or ""
            finish = choice.get("finish_reason") or finish
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text) or None}
    if calls:
        message["tool_calls"] = [calls[index] for index in sorted(calls)]
    first = chunks[0] if chunks else {}
    return {"id": first.get("id"), "object": "chat.completion", "created": first.get("created"),
            "model": first.get("model"), "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage or {}}


class Loader:
    """litellm's import in a thread of its own (started once): `wait()` gives the module."""

    def __init__(self, load):
        self._load, self._module, self._error = load, None, None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="codeagent-litellm-import", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        try:
            self._module = self._load()
        except BaseException as error:  # noqa: BLE001 - given to the caller of wait()
            self._error = error

    def wait(self):
        self.start()
        assert self._thread is not None
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._module
