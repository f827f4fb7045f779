"""A scripted OpenAI-compatible server on 127.0.0.1 (FakeServer) and the replies it serves: whole
completions, tool calls, and streamed chunks."""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MESSAGES = [{"role": "system", "content": "You fix bugs."}, {"role": "user", "content": "Fix it."}]


def completion(message, finish_reason="stop", model="test-model", logprobs=None):
    choice = {"index": 0, "finish_reason": finish_reason, "message": {"role": "assistant", **message}}
    if logprobs is not None:
        choice["logprobs"] = logprobs
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1700000000,
        "model": model,
        "choices": [choice],
        "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150},
    }


def answer(text: str) -> tuple[int, dict]:
    """The server's reply (status, body) with text only."""
    return 200, completion({"content": text})


def tool_call(arguments, name="bash", call_id="call_a"):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def chunks(pieces=(), calls=(), finish_reason="stop", usage=True, model="test-model"):
    """A streamed completion as chat.completion.chunk dicts: a text delta per piece, then per tool call
    (name, [argument pieces]) its id and name, then its arguments piece by piece; the finish; the usage."""
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000, "model": model}

    def chunk(delta, finish=None):
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"content": piece}) for piece in pieces]
    for index, (name, arguments) in enumerate(calls):
        out.append(chunk({"tool_calls": [{"index": index, "id": f"call_{index}", "type": "function",
                                          "function": {"name": name, "arguments": ""}}]}))
        out += [chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}) for piece in arguments]
    out.append(chunk({}, finish_reason))
    if usage:
        out.append({**base, "choices": [], "usage": {"prompt_tokens": 120, "completion_tokens": 30,
                                                      "total_tokens": 150}})
    return out


class Streamed:
    """A reply sent as server-sent events. With `hold_at`, the server sends that many chunks, sets `held`
    and waits (for `release`, at most `hold_seconds`) before the rest: a test sees the reply half-formed."""

    def __init__(self, chunks, hold_at=None, hold_seconds=60.0, done=True):
        """done=False: the connection closes after the chunks, with no `[DONE]` (a stream cut short)."""
        self.chunks, self.hold_at, self.hold_seconds, self.done = chunks, hold_at, hold_seconds, done
        self.held, self.release, self.ended = threading.Event(), threading.Event(), threading.Event()
        self.hung_up = threading.Event()  # the client closed the connection while the server held


class FakeServer:
    """Serves /v1/chat/completions from a queue of (status, body) and records every request. A queued
    HANG accepts the request and never answers it (until the server closes); `hanging` is set then. A
    queued `Streamed` answers as a stream (and records whether the client hung up: `Streamed.ended`)."""

    HANG = "hang"

    def __init__(self):
        self.replies = []
        self.requests = []
        self.hanging = threading.Event()
        self.closing = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                # the request's own header object, not a dict: names are case-insensitive in HTTP, and
                # clients differ (openai 3.x sends `authorization` in lower case)
                outer.requests.append(
                    {"path": self.path, "headers": self.headers, "body": json.loads(self.rfile.read(length))}
                )
                if outer.replies and outer.replies[0] == FakeServer.HANG:
                    outer.replies.pop(0)
                    outer.hanging.set()
                    outer.closing.wait()
                    return
                if outer.replies and isinstance(outer.replies[0], Streamed):
                    self.stream(outer.replies.pop(0))
                    return
                status, body = outer.replies.pop(0) if outer.replies else (500, {"error": {"message": "no reply queued"}})
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def stream(self, reply):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                try:
                    for position, data in enumerate(reply.chunks):
                        if position == reply.hold_at:
                            self.wfile.flush()
                            reply.held.set()
                            end = time.monotonic() + reply.hold_seconds
                            while not (reply.release.is_set() or outer.closing.is_set()) and time.monotonic() < end:
                                if self.client_gone():
                                    reply.hung_up.set()
                                    return
                                reply.release.wait(0.05)
                        self.wfile.write(f"data: {json.dumps(data)}\n\n".encode())
                        self.wfile.flush()
                    if reply.done:
                        self.wfile.write(b"data: [DONE]\n\n")
                        self.wfile.flush()
                except OSError:  # the client hung up
                    pass
                finally:
                    reply.ended.set()

            def client_gone(self):
                readable, _, _ = select.select([self.connection], [], [], 0)
                try:
                    return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
                except OSError:
                    return True

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.base = f"http://127.0.0.1:{self.httpd.server_port}/v1"

    def close(self):
        self.closing.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def pieces(text: str, size: int = 7) -> list[str]:
    return [text[start:start + size] for start in range(0, len(text), size)]
