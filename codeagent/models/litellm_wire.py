"""The wire side of litellm calls: a streamed reply put back together (deltas reported on the way),
closing a stream from any thread, whether a server gives token ids, and the token ids and logprobs
of a reply."""

from __future__ import annotations

import json
import socket
from typing import Any

from . import progress
from .cancel import cancelled, on_cancel
from .litellm_errors import PROBE_TIMEOUT, _Retry


def _read_stream(litellm, stream, messages: list[dict]):
    """The streamed reply as one response (as litellm gives an unstreamed one), its deltas reported on
    the way; the stream is closed if the caller gives up on the call."""
    http: Any = getattr(getattr(stream, "completion_stream", None), "response", None)
    headers: Any = getattr(http, "headers", None)
    kind = headers.get("content-type", "") if hasattr(headers, "get") else ""
    if kind.startswith("application/json"):  # a server that does not stream answered with the whole reply
        try:
            return litellm.ModelResponse(**json.loads(http.read()))
        except ValueError as error:
            raise _Retry(RuntimeError(f"the server's reply is not JSON: {error}")) from error
    chunks = []
    with on_cancel(lambda: _close(stream)):
        try:
            for chunk in stream:
                if cancelled():
                    break
                chunks.append(chunk)
                for choice in chunk.choices or []:
                    delta = choice.delta
                    if delta is None:
                        continue
                    if delta.content:
                        progress.report(progress.TextDelta(delta.content))
                    for call in delta.tool_calls or []:
                        function = call.function
                        progress.report(progress.ToolCallDelta(
                            index=call.index or 0, call_id=call.id or "",
                            name=(function.name if function else None) or "",
                            arguments=(function.arguments if function else None) or ""))
        finally:
            _close(stream)
    if cancelled():
        raise RuntimeError("the streamed reply was abandoned")  # never seen: the caller has gone
    if hasattr(stream, "received_finish_reason"):  # litellm closes every stream with a finish: the server's own
        finished = stream.received_finish_reason or getattr(stream, "intermittent_finish_reason", None)
    else:
        finished = any(choice.finish_reason for chunk in chunks for choice in chunk.choices or [])
    if not finished:
        raise _Retry(RuntimeError(f"the stream ended before the reply did ({len(chunks)} chunks)"))
    return litellm.stream_chunk_builder(chunks, messages=messages)


TOKEN_ID_SERVERS = ("codeagent", "vllm")  # owned_by of the servers that answer with token ids and logprobs


def _server_gives_token_ids(api_base: str) -> bool | None:
    """Whether GET {api_base}/models names a server that gives token ids (None: nobody there yet, ask
    again; a server too slow to list its models is taken as not giving them, and not asked again)."""
    import httpx

    try:
        answer = httpx.get(api_base.rstrip("/") + "/models", timeout=PROBE_TIMEOUT / 2)
        entries = answer.json()["data"] if answer.status_code == 200 else None
    except httpx.TimeoutException:
        return False
    except httpx.HTTPError:
        return None
    except (ValueError, KeyError, TypeError):
        return False
    if not isinstance(entries, list):
        return False
    return any(isinstance(entry, dict) and entry.get("owned_by") in TOKEN_ID_SERVERS for entry in entries)


def _close(stream) -> None:
    """Close a streamed reply, from any thread: its socket is shut down first, which also wakes a read
    blocked on it (closing the response alone may wait for that read)."""
    http = getattr(getattr(stream, "completion_stream", None), "response", None)
    network: Any = (getattr(http, "extensions", None) or {}).get("network_stream")
    sock = network.get_extra_info("socket") if hasattr(network, "get_extra_info") else None
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    for closable in (getattr(stream, "completion_stream", None), getattr(stream, "response", None)):
        close = getattr(closable, "close", None)
        if callable(close):
            try:
                close()
            except Exception:  # noqa: BLE001 - closing what may be half-read or already closed
                pass


def _token_logprobs(logprobs: dict | None) -> tuple[list[int] | None, list[float] | None]:
    entries = (logprobs or {}).get("content") or []
    if not entries:
        return None, None
    values = [entry.get("logprob") for entry in entries]
    # vLLM with return_tokens_as_token_ids writes each token as "token_id:<int>".
    ids: Any = []  # token ids, or None when one entry has none
    for entry in entries:
        token = entry.get("token") or ""
        if not token.startswith("token_id:"):
            ids = None
            break
        ids.append(int(token.split(":", 1)[1]))
    return ids, values
