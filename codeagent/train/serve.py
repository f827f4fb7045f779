"""`codeagent serve`: a local model (with its LoRA adapter) behind an OpenAI-compatible chat endpoint.

    codeagent serve --model BASE_OR_ADAPTER_DIR [--adapter DIR] [--port 8000]
    codeagent solve --model hosted_vllm/codeagent --api-base http://127.0.0.1:8000/v1 ...

Endpoints: POST /v1/chat/completions (messages, tools, temperature, top_p, max_tokens /
max_completion_tokens, seed, stop, stream, logprobs, return_token_ids) and GET /v1/models, GET /health.
Tool calls are parsed from the model's `<tool_call>{...}</tool_call>` text and returned as OpenAI
`tool_calls`, so any OpenAI client, litellm included, calls tools through it. Token-exact, as vLLM's
OpenAI server: with `return_token_ids: true` the response carries `prompt_token_ids` (the exact prompt
fed, a continuation of the conversation's earlier turns as generated) and each choice `token_ids`; with
`logprobs: true` (and `return_tokens_as_token_ids: true`) every token comes back as `token_id:N` with
its log-probability. codeagent's own client (models/litellm_model.py) asks for both and records them,
and sends the tool schemas as given (litellm would drop `additionalProperties: false`), so a served
run sees the prompt the model was trained on and its trajectory is trainable.

Requests run concurrently on the batched engine (models/batching.py): turns that arrive together are
decoded as one batch. It is meant for localhost: a tool for trying what was just trained. It takes only
`application/json` POSTs of at most 4 MiB (413 otherwise, judged from Content-Length before reading),
checks every field it uses (400 with the reason), holds at most 8 connections (503 beyond) and decodes
one request body at a time (JSON parsing, checking and rendering the prompt; generation is not under
that lock), and refuses
browsers from other origins and any request whose Host names another server (403, DNS rebinding; no
CORS at all): a web page cannot drive or read it, and its memory stays
under about 8 x 2 x 4 MiB + 32 x 4 MiB above its model whatever clients send. On a GPU, serve with vLLM instead, which speaks the same API:

    vllm serve BASE --enable-lora --lora-modules codeagent=ADAPTER_DIR \\
        --enable-auto-tool-choice --tool-call-parser hermes --max-lora-rank 64
    codeagent solve --model hosted_vllm/codeagent --api-base http://localhost:8000/v1 ...

(`hermes` parses Qwen-style `<tool_call>` output; pick the parser of your model family.)
"""

from __future__ import annotations

import ipaddress
import json
import logging
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

from .serve_schema import ChatRequest, validate_request

log = logging.getLogger(__name__)

DEFAULT_NAME = "codeagent"
MAX_BODY_BYTES = 4 * 1024 * 1024  # a 128k-token conversation is well under 1 MiB of JSON
MAX_CONNECTIONS = 8  # each may hold a body of MAX_BODY_BYTES while it waits for the model
IDLE_SECONDS = 60.0
# The most a request may take to arrive, line and headers and body: IDLE_SECONDS bounds each wait,
# so a client that sends a byte now and then (slowloris) would hold a connection slot for ever.
REQUEST_SECONDS = 60.0
# Rendering a value through the chat template costs far more than decoding it: real tool specs hold hundreds.
MAX_STRUCTURED_VALUES = 100_000
DECODED_PER_BYTE = 32  # the most memory decoded JSON takes per byte of text ([[],[],...]: ~25)


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
    from codeagent.models.types import Sampling

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


class _Refused(Exception):
    """A request refused before the model sees it: status and the reason for the client."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
WILDCARDS = ("", "0.0.0.0", "::")


def _host_allowed(host_header: str, bound: str, port: int, allowed: tuple[str, ...] = ()) -> bool:
    """Whether a request's Host names this server: a loopback name or the address it was bound to (bound
    to every interface: any IP address, or this machine's name), or a name in `allowed`, with its port.
    A web page that rebinds its own DNS name to 127.0.0.1 sends that name: refused."""
    name, colon, given_port = host_header.strip().lower().rpartition(":")
    if not colon or name.endswith(":") or "]" in given_port:  # no port: 80 (or an IPv6 literal alone)
        name, given_port = host_header.strip().lower(), "80"
    if given_port != str(port):
        return False
    bare = name.strip("[]")
    names = {*LOOPBACK_NAMES, bound.lower(), f"[{bound.lower()}]", *(item.lower() for item in allowed)}
    if name in names:
        return True
    if bound in WILDCARDS:
        try:
            ipaddress.ip_address(bare)
            return True
        except ValueError:
            return bare in {socket.gethostname().lower(), socket.getfqdn().lower()}
    return False


def _read_chunked(rfile, limit: int) -> bytearray:
    body = bytearray()
    while True:
        line = rfile.readline(1026)
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise _Refused(400, "malformed chunked request body") from None
        if size < 0:
            raise _Refused(400, "malformed chunked request body")
        if size == 0:
            for _ in range(64):  # trailers, up to an empty line
                if rfile.readline(1026) in (b"\r\n", b"\n", b""):
                    return body
            raise _Refused(400, "too many trailer lines in the chunked request body")
        if len(body) + size > limit:
            raise _Refused(413, f"the request body is larger than {limit} bytes")
        chunk = rfile.read(size)
        if len(chunk) != size:
            raise _Refused(400, "the request body ended early")
        body += chunk
        rfile.readline(1026)  # the CRLF after each chunk


def _prepare_or_refusal(service: ChatService, body: Any) -> Prepared | _Refused:
    """The prepared request, or the refusal to send: an exception raised here is turned into a value so
    that its traceback (whose frames hold the decoded body) is gone before the decode lock is released."""
    try:
        return service.prepare(body)
    except RequestError as error:
        return _Refused(error.status, str(error))
    except Exception as error:  # the model failed to render the turn: say so, keep serving
        log.exception("preparing a chat completion failed")
        return _Refused(500, f"{type(error).__name__}: {error}")


def make_handler(service: ChatService, *, max_body_bytes: int = MAX_BODY_BYTES,
                 idle_seconds: float = IDLE_SECONDS, request_seconds: float = REQUEST_SECONDS,
                 allowed_hosts: tuple[str, ...] = ()):
    # One request decoded at a time: decoded JSON can take ~25x its text (many tiny objects), so only one
    # decoded body exists at once; the others wait as raw bytes. What is kept past it is the rendered
    # turn (token ids), and generation runs outside the lock, batched with the others.
    one_at_a_time = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "codeagent-serve"
        timeout = idle_seconds  # a client that stops sending loses its connection

        def handle_one_request(self):
            # a request that has not fully arrived in request_seconds loses its connection
            self._watchdog = threading.Timer(request_seconds, self._hang_up)
            self._watchdog.daemon = True
            self._watchdog.start()
            try:
                super().handle_one_request()
            finally:
                self._watchdog.cancel()

        def _hang_up(self):
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

        def _arrived(self):
            self._watchdog.cancel()

        def log_message(self, fmt, *args):  # through logging, not stderr noise
            log.info("%s %s", self.address_string(), fmt % args)

        def _send(self, status: int, payload: dict, *, close: bool = False) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if close:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str) -> None:
            # The body may be unread: the connection cannot carry another request.
            try:
                self._send(status, {"error": {"message": message, "type": "invalid_request_error" if status < 500
                                              else "server_error", "code": status}}, close=True)
            except OSError:  # the client is gone (it may have sent on and been reset)
                self.close_connection = True

        def _check_origin(self) -> None:
            """Browsers name the page's origin; only a page of this server could be allowed, and it has none.
            No CORS headers are ever sent, so a browser never lets another origin read a reply either."""
            host = self.headers.get("Host") or ""
            if not _host_allowed(host, *cast(tuple[str, int], self.server.server_address)[:2], allowed_hosts):
                raise _Refused(403, f"cross-origin requests are refused: Host {host[:200]!r} does not name this "
                                    "server (DNS rebinding?); use 127.0.0.1 or localhost, or --allow-host")
            origin = self.headers.get("Origin")
            site = (self.headers.get("Sec-Fetch-Site") or "").lower()
            if site in ("cross-site", "same-site"):
                raise _Refused(403, f"cross-origin requests are refused (Sec-Fetch-Site: {site})")
            if origin is not None and origin != f"http://{host}":
                raise _Refused(403, f"cross-origin requests are refused (Origin: {origin[:200]})")

        def _read_body(self) -> bytes | bytearray:
            content_type = (self.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
            if content_type != "application/json":
                raise _Refused(415, f"Content-Type must be application/json, not {content_type or 'missing'!r}")
            if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                return _read_chunked(self.rfile, max_body_bytes)
            declared = self.headers.get("Content-Length")
            if declared is None:
                raise _Refused(411, "Content-Length is required")
            if not declared.strip().isdigit():
                raise _Refused(400, f"bad Content-Length {declared[:40]!r}")
            length = int(declared)
            if length > max_body_bytes:
                raise _Refused(413, f"the request body is {length} bytes; the limit is {max_body_bytes}")
            body = self.rfile.read(length)
            if len(body) != length:
                raise _Refused(400, "the request body ended early")
            return body

        def handle_expect_100(self):  # refuse before the client sends a body it would be refused for
            try:
                self._check_origin()
                declared = self.headers.get("Content-Length") or ""
                if declared.strip().isdigit() and int(declared) > max_body_bytes:
                    raise _Refused(413, f"the request body is {declared} bytes; the limit is {max_body_bytes}")
            except _Refused as refused:
                self._error(refused.status, str(refused))
                return False
            return super().handle_expect_100()

        def do_OPTIONS(self):
            self._arrived()
            self._error(405, "OPTIONS (CORS preflight) is not supported: this server answers no other origin")

        def do_GET(self):
            self._arrived()
            try:
                self._check_origin()
            except _Refused as refused:
                self._error(refused.status, str(refused))
                return
            path = self.path.rstrip("/")
            if path in ("/v1/models", "/models"):
                self._send(200, service.models())
            elif path in ("/health", "/v1/health"):
                self._send(200, {"status": "ok", "model": service.name})
            else:
                self._error(404, f"no route {self.path}")

        def do_POST(self):
            try:
                self._check_origin()
                if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                    raise _Refused(404, f"no route {self.path}; use /v1/chat/completions")
                raw = self._read_body()
                self._arrived()
                with one_at_a_time:
                    try:
                        body = json.loads(raw)
                    except (UnicodeDecodeError, RecursionError, ValueError) as error:
                        raise _Refused(400, f"the request body is not JSON: {str(error)[:200]}") from None
                    del raw
                    prepared = _prepare_or_refusal(service, body)
                    del body  # the last reference: freed before the next request is decoded
                if isinstance(prepared, _Refused):
                    raise prepared
                result = service.answer(prepared)
                stream = prepared.stream
                del prepared
            except _Refused as refused:
                self._error(refused.status, str(refused))
                return
            except RequestError as error:
                self._error(error.status, str(error))
                return
            except Exception as error:  # the model failed: say so, keep serving
                log.exception("chat completion failed")
                self._error(500, f"{type(error).__name__}: {error}")
                return
            if stream:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                for chunk in service.stream_chunks(result):
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True
            else:
                self._send(200, result)

    return Handler


_BUSY = json.dumps({"error": {"message": "the server is busy: too many connections; retry later",
                              "type": "server_error", "code": 503}}).encode()
_BUSY_RESPONSE = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
                  b"Connection: close\r\nContent-Length: " + str(len(_BUSY)).encode() + b"\r\n\r\n" + _BUSY)


class _BoundedHTTPServer(ThreadingHTTPServer):
    """One thread per connection, at most `max_connections` of them; the others get a 503 at once."""

    daemon_threads = True

    def __init__(self, address, handler, max_connections: int):
        super().__init__(address, handler)
        self.slots = threading.BoundedSemaphore(max_connections)

    def process_request(self, request, client_address):
        if not self.slots.acquire(blocking=False):
            try:
                request.sendall(_BUSY_RESPONSE)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


class Server:
    """The HTTP server in a background thread (tests, benchmarks) or in the foreground (`serve`)."""

    def __init__(self, model, *, name: str = DEFAULT_NAME, host: str = "127.0.0.1", port: int = 8000,
                 max_body_bytes: int = MAX_BODY_BYTES, max_connections: int = MAX_CONNECTIONS,
                 idle_seconds: float = IDLE_SECONDS, request_seconds: float = REQUEST_SECONDS,
                 allowed_hosts: tuple[str, ...] = ()):
        self.service = ChatService(model, name)
        handler = make_handler(self.service, max_body_bytes=max_body_bytes, idle_seconds=idle_seconds,
                               request_seconds=request_seconds, allowed_hosts=(host, *allowed_hosts))
        self.httpd = _BoundedHTTPServer((host, port), handler, max_connections)
        self.thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = cast(tuple[str, int], self.httpd.server_address[:2])
        return f"http://{host}:{port}/v1"

    def start(self) -> Server:
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="codeagent-serve", daemon=True)
        self.thread.start()
        return self

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def load_served_model(model: str, adapter: str | None = None, *, max_new_tokens: int = 1024,
                      device: str | None = None, threads: int | None = None):
    """The model to serve: PATH (model or adapter dir, or hub id) plus an optional adapter, merged."""
    from codeagent.models.hf import HFModel

    if threads:
        import torch

        torch.set_num_threads(threads)
    return HFModel.load(model, adapter, device=device, max_new_tokens=max_new_tokens, merge=True)
