"""The HTTP side of `codeagent serve` (serve/server.py): a Starlette app over the chat service.

Everything a client could abuse is refused before the model sees it: other origins and Host names (403,
DNS rebinding; no CORS at all), methods other than GET and POST, bodies over the limit (413, judged from
Content-Length before reading, or while a chunked body arrives), anything but application/json (415). A
refusal closes its connection, whose body may be unread. One request body is decoded at a time
(`Chat.one_at_a_time`); generation is not under that lock. Connections beyond the limit and requests
that take too long to arrive are refused below the app, by the connection (serve/connections.py).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import socket
import threading
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from .chat import ChatService, Prepared, RequestError

log = logging.getLogger(__name__)


class Refused(Exception):
    """A request refused before the model sees it: status and the reason for the client."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
WILDCARDS = ("", "0.0.0.0", "::")


def host_allowed(host_header: str, bound: str, port: int, allowed: tuple[str, ...] = ()) -> bool:
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


def origin_refusal(headers: Headers, bound: tuple[str, int], allowed: tuple[str, ...]) -> Refused | None:
    """Browsers name the page's origin; only a page of this server could be allowed, and it has none.
    No CORS headers are ever sent, so a browser never lets another origin read a reply either."""
    host = headers.get("host") or ""
    if not host_allowed(host, *bound, allowed):
        return Refused(403, f"cross-origin requests are refused: Host {host[:200]!r} does not name this "
                            "server (DNS rebinding?); use 127.0.0.1 or localhost, or --allow-host")
    origin = headers.get("origin")
    site = (headers.get("sec-fetch-site") or "").lower()
    if site in ("cross-site", "same-site"):
        return Refused(403, f"cross-origin requests are refused (Sec-Fetch-Site: {site})")
    if origin is not None and origin != f"http://{host}":
        return Refused(403, f"cross-origin requests are refused (Origin: {origin[:200]})")
    return None


def error_response(status: int, message: str) -> Response:
    payload = {"error": {"message": message, "type": "invalid_request_error" if status < 500 else "server_error",
                         "code": status}}
    # The body may be unread: the connection cannot carry another request.
    return Response(json.dumps(payload), status_code=status, media_type="application/json",
                    headers={"Connection": "close"})


def json_response(payload: Any) -> Response:
    return Response(json.dumps(payload), media_type="application/json")


class Guard:
    """ASGI middleware: before any route, OPTIONS (a CORS preflight) and methods other than GET and POST are
    refused, then any request whose Host or origin is not this server's; paths lose their trailing slash."""

    def __init__(self, app, bound: tuple[str, int], allowed_hosts: tuple[str, ...] = ()):
        self.app = app
        self.bound = bound
        self.allowed_hosts = allowed_hosts

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        method = scope["method"]
        if method == "OPTIONS":
            refusal: Refused | None = Refused(405, "OPTIONS (CORS preflight) is not supported: this server answers "
                                                   "no other origin")
        elif method not in ("GET", "POST"):
            refusal = Refused(501, f"unsupported method {method[:20]!r}")
        else:
            refusal = origin_refusal(Headers(scope=scope), self.bound, self.allowed_hosts)
        if refusal:
            return await error_response(refusal.status, str(refusal))(scope, receive, send)
        await self.app({**scope, "path": scope["path"].rstrip("/") or "/"}, receive, send)


async def read_body(request: Request, limit: int) -> bytearray:
    content_type = (request.headers.get("content-type") or "").split(";", 1)[0].strip().lower()
    if content_type != "application/json":
        raise Refused(415, f"Content-Type must be application/json, not {content_type or 'missing'!r}")
    if "chunked" not in (request.headers.get("transfer-encoding") or "").lower():
        declared = request.headers.get("content-length")
        if declared is None:
            raise Refused(411, "Content-Length is required")
        if not declared.strip().isdigit():
            raise Refused(400, f"bad Content-Length {declared[:40]!r}")
        if int(declared) > limit:  # judged before a byte of the body is read (no 100 Continue is sent)
            raise Refused(413, f"the request body is {int(declared)} bytes; the limit is {limit}")
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit:
                raise Refused(413, f"the request body is larger than {limit} bytes")
    except ClientDisconnect:
        raise Refused(400, "the request body ended early") from None
    return body


def prepare_or_refusal(service: ChatService, body: Any) -> Prepared | Refused:
    """The prepared request, or the refusal to send: an exception raised here is turned into a value so
    that its traceback (whose frames hold the decoded body) is gone before the decode lock is released."""
    try:
        return service.prepare(body)
    except RequestError as error:
        return Refused(error.status, str(error))
    except Exception as error:  # the model failed to render the turn: say so, keep serving
        log.exception("preparing a chat completion failed")
        return Refused(500, f"{type(error).__name__}: {error}")


class Chat:
    """The routes: GET /v1/models and /health, POST /v1/chat/completions (also without /v1)."""

    def __init__(self, service: ChatService, max_body_bytes: int):
        self.service = service
        self.max_body_bytes = max_body_bytes
        # One request decoded at a time: decoded JSON can take ~25x its text (many tiny objects), so only one
        # decoded body exists at once; the others wait as raw bytes. What is kept past it is the rendered
        # turn (token ids), and generation runs outside the lock, batched with the others.
        self.one_at_a_time = threading.Lock()

    async def models(self, request: Request) -> Response:
        return json_response(self.service.models())

    async def health(self, request: Request) -> Response:
        return json_response({"status": "ok", "model": self.service.name})

    async def no_route(self, request: Request, error: Exception) -> Response:
        hint = "; use /v1/chat/completions" if request.method == "POST" else ""
        return error_response(404, f"no route {request.url.path}{hint}")

    def decode_and_prepare(self, raw: bytearray) -> Prepared | Refused:
        with self.one_at_a_time:
            try:
                body = json.loads(raw)
            except (UnicodeDecodeError, RecursionError, ValueError) as error:
                return Refused(400, f"the request body is not JSON: {str(error)[:200]}")
            del raw
            prepared = prepare_or_refusal(self.service, body)
            del body  # the last reference: freed before the next request is decoded
            return prepared

    async def completions(self, request: Request) -> Response:
        try:
            prepared = await run_in_threadpool(self.decode_and_prepare, await read_body(request, self.max_body_bytes))
            if isinstance(prepared, Refused):
                raise prepared
            result = await run_in_threadpool(self.service.answer, prepared)
            stream = prepared.stream
            del prepared
        except Refused as refused:
            return error_response(refused.status, str(refused))
        except RequestError as error:
            return error_response(error.status, str(error))
        except Exception as error:  # the model failed: say so, keep serving
            log.exception("chat completion failed")
            return error_response(500, f"{type(error).__name__}: {error}")
        if not stream:
            return json_response(result)
        events = [f"data: {json.dumps(chunk)}\n\n".encode() for chunk in self.service.stream_chunks(result)]
        return Response(b"".join(events) + b"data: [DONE]\n\n",
                        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "Connection": "close"})


def create_app(service: ChatService, *, bound: tuple[str, int], max_body_bytes: int,
               allowed_hosts: tuple[str, ...] = ()) -> Guard:
    """The app for a server listening on `bound` (host, port): Host headers must name it (or `allowed_hosts`)."""
    chat = Chat(service, max_body_bytes)
    routes = [*(Route(path, chat.models, methods=["GET"]) for path in ("/v1/models", "/models")),
              *(Route(path, chat.health, methods=["GET"]) for path in ("/health", "/v1/health")),
              *(Route(path, chat.completions, methods=["POST"]) for path in ("/v1/chat/completions", "/chat/completions"))]
    app = Starlette(routes=routes, exception_handlers={404: chat.no_route, 405: chat.no_route})
    return Guard(app, bound, allowed_hosts)
