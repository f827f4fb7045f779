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

Here: the server (uvicorn running the Starlette app, in a thread or in the foreground) and loading the
served model. The request -> response logic is in serve/chat.py (the request's shape in serve/schema.py), the
HTTP routes and their refusals in serve/app.py, the connection limits in serve/connections.py.
"""

from __future__ import annotations

import socket
import threading
import time

from .chat import DEFAULT_NAME, MAX_STRUCTURED_VALUES, ChatService, RequestError

# the names other modules import from here (chat.py holds some)
__all__ = ["DECODED_PER_BYTE", "DEFAULT_NAME", "IDLE_SECONDS", "MAX_BODY_BYTES", "MAX_CONNECTIONS",
           "MAX_STRUCTURED_VALUES", "REQUEST_SECONDS", "ChatService", "RequestError", "Server", "load_served_model"]

MAX_BODY_BYTES = 4 * 1024 * 1024  # a 128k-token conversation is well under 1 MiB of JSON
MAX_CONNECTIONS = 8  # each may hold a body of MAX_BODY_BYTES while it waits for the model
IDLE_SECONDS = 60.0
# The most a request may take to arrive, line and headers and body: IDLE_SECONDS bounds each wait,
# so a client that sends a byte now and then (slowloris) would hold a connection slot for ever.
REQUEST_SECONDS = 60.0
DECODED_PER_BYTE = 32  # the most memory decoded JSON takes per byte of text ([[],[],...]: ~25)
GRACEFUL_SECONDS = 5  # on stop, how long requests being answered may take to finish


def listen(host: str, port: int) -> socket.socket:
    """A listening IPv4 socket (port 0: a free one), bound now so that the URL is known before serving."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except BaseException:
        sock.close()
        raise
    return sock


class Server:
    """The HTTP server (uvicorn) in a background thread (tests, benchmarks) or in the foreground (`serve`)."""

    def __init__(self, model, *, name: str = DEFAULT_NAME, host: str = "127.0.0.1", port: int = 8000,
                 max_body_bytes: int = MAX_BODY_BYTES, max_connections: int = MAX_CONNECTIONS,
                 idle_seconds: float = IDLE_SECONDS, request_seconds: float = REQUEST_SECONDS,
                 allowed_hosts: tuple[str, ...] = ()):
        import uvicorn

        from .app import create_app
        from .connections import ConnectionLimits, protocol_class

        self.service = ChatService(model, name)
        self.socket = listen(host, port)
        self.server_address: tuple[str, int] = self.socket.getsockname()[:2]
        app = create_app(self.service, bound=self.server_address, max_body_bytes=max_body_bytes,
                         allowed_hosts=(host, *allowed_hosts))
        protocol = protocol_class(ConnectionLimits(max_connections, request_seconds, idle_seconds))
        self.uvicorn = uvicorn.Server(uvicorn.Config(
            app, http=protocol, ws="none", lifespan="off", loop="asyncio", log_config=None, access_log=False,
            proxy_headers=False, server_header=False, headers=[("server", "codeagent-serve")],
            timeout_keep_alive=idle_seconds, timeout_graceful_shutdown=GRACEFUL_SECONDS))
        self.thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.server_address
        return f"http://{host}:{port}/v1"

    def start(self) -> Server:
        self.thread = threading.Thread(target=self.serve_forever, name="codeagent-serve", daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.uvicorn.started and self.thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        return self

    def serve_forever(self) -> None:
        """Until stopped (in the foreground: SIGINT or SIGTERM, which uvicorn raises again once it has stopped)."""
        self.uvicorn.run(sockets=[self.socket])

    def stop(self) -> None:
        self.uvicorn.should_exit = True
        if self.thread is not None:
            self.thread.join(timeout=GRACEFUL_SECONDS + 10)
        self.socket.close()

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def load_served_model(model: str, adapter: str | None = None, *, max_new_tokens: int = 1024,
                      device: str | None = None, threads: int | None = None):
    """The model to serve: PATH (model or adapter dir, or hub id) plus an optional adapter, merged."""
    from ..models.hf import HFModel

    if threads:
        import torch

        torch.set_num_threads(threads)
    return HFModel.load(model, adapter, device=device, max_new_tokens=max_new_tokens, merge=True)
