"""`codeagent serve`: a local model (with its LoRA adapter) behind an OpenAI-compatible chat endpoint.

    codeagent serve --model BASE_OR_ADAPTER_DIR [--adapter DIR] [--port 8000]
    codeagent solve --model hosted_vllm/codeagent --api-base http://127.0.0.1:8000/v1 ...

Endpoints: POST /v1/chat/completions (messages, tools, temperature, top_p, max_tokens /
max_completion_tokens, seed, stop, stream, logprobs) and GET /v1/models, GET /health. Tool calls are
parsed from the model's `<tool_call>{...}</tool_call>` text and returned as OpenAI `tool_calls`, so
any OpenAI client, litellm included, calls tools through it. With `logprobs: true` (and vLLM's
`return_tokens_as_token_ids: true`) every token comes back as `token_id:N` with its log-probability:
runs through the server are token-exact too.

It serves one request at a time (generation is serialized) on localhost: a tool for trying what was
just trained, not a production server. On a GPU, serve with vLLM instead, which speaks the same API:

    vllm serve BASE --enable-lora --lora-modules codeagent=ADAPTER_DIR \\
        --enable-auto-tool-choice --tool-call-parser hermes --max-lora-rank 64
    codeagent solve --model hosted_vllm/codeagent --api-base http://localhost:8000/v1 ...

(`hermes` parses Qwen-style `<tool_call>` output; pick the parser of your model family.)
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

log = logging.getLogger(__name__)

DEFAULT_NAME = "codeagent"


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


def _messages(raw: Any) -> list[dict]:
    if not isinstance(raw, list) or not raw:
        raise RequestError("`messages` must be a non-empty list")
    out = []
    for index, message in enumerate(raw):
        if not isinstance(message, dict) or message.get("role") not in ("system", "user", "assistant", "tool"):
            raise RequestError(f"messages[{index}] must be an object with role system, user, assistant or tool")
        clean = {key: value for key, value in message.items()
                 if key in ("role", "content", "tool_calls", "tool_call_id", "name")}
        clean["content"] = _text(message.get("content"))
        out.append(clean)
    return out


def _sampling(body: dict):
    from codeagent.models.types import Sampling

    stop = body.get("stop")
    return Sampling(
        temperature=float(body["temperature"]) if body.get("temperature") is not None else 0.0,
        top_p=body.get("top_p"), seed=body.get("seed"),
        max_tokens=body.get("max_completion_tokens") or body.get("max_tokens"),
        stop=[stop] if isinstance(stop, str) else stop,
    )


class ChatService:
    """The request -> response logic, independent of HTTP."""

    def __init__(self, model, name: str = DEFAULT_NAME):
        self.model = model
        self.name = name

    def models(self) -> dict:
        return {"object": "list", "data": [{"id": self.name, "object": "model", "created": int(time.time()),
                                            "owned_by": "codeagent"}]}

    def chat(self, body: dict) -> dict:
        if not isinstance(body, dict):
            raise RequestError("the request body must be a JSON object")
        if body.get("n", 1) not in (1, None):
            raise RequestError("only n=1 is supported")
        messages = _messages(body.get("messages"))
        tools = body.get("tools") or []
        if body.get("tool_choice") == "none":
            tools = []
        response = self.model.complete(messages, tools, _sampling(body))
        message: dict[str, Any] = {"role": "assistant", "content": response.content or None}
        if response.format_error and not response.tool_calls:
            message["content"] = response.content  # what the model wrote; the client sees no call
        if response.tool_calls:
            message["tool_calls"] = [{"id": call.id, "type": "function",
                                      "function": {"name": call.name, "arguments": call.raw_arguments}}
                                     for call in response.tool_calls]
        finish = "tool_calls" if response.tool_calls else ("length" if response.finish_reason == "length" else "stop")
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
        if body.get("logprobs") and response.token_ids is not None:
            as_ids = bool(body.get("return_tokens_as_token_ids"))
            tokenizer = getattr(self.model, "tokenizer", None)
            choice["logprobs"] = {"content": [
                {"token": f"token_id:{token}" if as_ids or tokenizer is None else tokenizer.decode([token]),
                 "logprob": logprob, "bytes": None, "top_logprobs": []}
                for token, logprob in zip(response.token_ids, response.logprobs or [])]}
        usage = response.usage
        return {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()),
                "model": self.name, "choices": [choice],
                "usage": {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
                          "total_tokens": usage.prompt_tokens + usage.completion_tokens}}

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


def make_handler(service: ChatService):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "codeagent-serve"

        def log_message(self, fmt, *args):  # through logging, not stderr noise
            log.info("%s %s", self.address_string(), fmt % args)

        def _send(self, status: int, payload: dict) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str) -> None:
            self._send(status, {"error": {"message": message, "type": "invalid_request_error" if status < 500
                                          else "server_error", "code": status}})

        def do_GET(self):
            path = self.path.rstrip("/")
            if path in ("/v1/models", "/models"):
                self._send(200, service.models())
            elif path in ("/health", "/v1/health"):
                self._send(200, {"status": "ok", "model": service.name})
            else:
                self._error(404, f"no route {self.path}")

        def do_POST(self):
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                self._error(404, f"no route {self.path}; use /v1/chat/completions")
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                result = service.chat(body)
            except json.JSONDecodeError as error:
                self._error(400, f"the request body is not JSON: {error}")
                return
            except RequestError as error:
                self._error(error.status, str(error))
                return
            except Exception as error:  # the model failed: say so, keep serving
                log.exception("chat completion failed")
                self._error(500, f"{type(error).__name__}: {error}")
                return
            if body.get("stream"):
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


class Server:
    """The HTTP server in a background thread (tests, benchmarks) or in the foreground (`serve`)."""

    def __init__(self, model, *, name: str = DEFAULT_NAME, host: str = "127.0.0.1", port: int = 8000):
        self.service = ChatService(model, name)
        self.httpd = ThreadingHTTPServer((host, port), make_handler(self.service))
        self.httpd.daemon_threads = True
        self.thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
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


def main(argv: list[str] | None = None) -> None:
    """`python -m codeagent.train.serve ...` (the same as `codeagent serve`)."""
    from .commands import serve

    serve.main(args=argv, prog_name="codeagent serve")


if __name__ == "__main__":
    main()
