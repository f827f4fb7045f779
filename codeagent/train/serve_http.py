"""The HTTP side of `codeagent serve` (train/serve.py): `ChatHandler` answers one connection's requests
from a `ChatHTTPServer`, which holds the chat service, the limits and at most `max_connections` connections.

Everything a client could abuse is refused before the model sees it: other origins and Host names (403,
DNS rebinding), bodies over the limit (413, judged from Content-Length or while reading chunks), anything
but application/json, requests that take too long to arrive (slowloris) and connections beyond the limit
(503). One request body is decoded at a time (see `ChatHTTPServer.one_at_a_time`).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

from .serve_chat import ChatService, Prepared, RequestError

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


def read_chunked(rfile, limit: int) -> bytearray:
    body = bytearray()
    while True:
        line = rfile.readline(1026)
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise Refused(400, "malformed chunked request body") from None
        if size < 0:
            raise Refused(400, "malformed chunked request body")
        if size == 0:
            for _ in range(64):  # trailers, up to an empty line
                if rfile.readline(1026) in (b"\r\n", b"\n", b""):
                    return body
            raise Refused(400, "too many trailer lines in the chunked request body")
        if len(body) + size > limit:
            raise Refused(413, f"the request body is larger than {limit} bytes")
        chunk = rfile.read(size)
        if len(chunk) != size:
            raise Refused(400, "the request body ended early")
        body += chunk
        rfile.readline(1026)  # the CRLF after each chunk


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


class ChatHandler(BaseHTTPRequestHandler):
    """One connection: GET /v1/models and /health, POST /v1/chat/completions; the settings are the server's."""

    protocol_version = "HTTP/1.1"
    server_version = "codeagent-serve"
    server: ChatHTTPServer

    def setup(self):
        self.timeout = self.server.idle_seconds  # type: ignore[misc]  # a client that stops sending loses its connection
        super().setup()

    def handle_one_request(self):
        # a request that has not fully arrived in request_seconds loses its connection
        self._watchdog = threading.Timer(self.server.request_seconds, self._hang_up)
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
        if not host_allowed(host, *cast(tuple[str, int], self.server.server_address)[:2], self.server.allowed_hosts):
            raise Refused(403, f"cross-origin requests are refused: Host {host[:200]!r} does not name this "
                                "server (DNS rebinding?); use 127.0.0.1 or localhost, or --allow-host")
        origin = self.headers.get("Origin")
        site = (self.headers.get("Sec-Fetch-Site") or "").lower()
        if site in ("cross-site", "same-site"):
            raise Refused(403, f"cross-origin requests are refused (Sec-Fetch-Site: {site})")
        if origin is not None and origin != f"http://{host}":
            raise Refused(403, f"cross-origin requests are refused (Origin: {origin[:200]})")

    def _read_body(self) -> bytes | bytearray:
        content_type = (self.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        if content_type != "application/json":
            raise Refused(415, f"Content-Type must be application/json, not {content_type or 'missing'!r}")
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            return read_chunked(self.rfile, self.server.max_body_bytes)
        declared = self.headers.get("Content-Length")
        if declared is None:
            raise Refused(411, "Content-Length is required")
        if not declared.strip().isdigit():
            raise Refused(400, f"bad Content-Length {declared[:40]!r}")
        length = int(declared)
        if length > self.server.max_body_bytes:
            raise Refused(413, f"the request body is {length} bytes; the limit is {self.server.max_body_bytes}")
        body = self.rfile.read(length)
        if len(body) != length:
            raise Refused(400, "the request body ended early")
        return body

    def handle_expect_100(self):  # refuse before the client sends a body it would be refused for
        try:
            self._check_origin()
            declared = self.headers.get("Content-Length") or ""
            if declared.strip().isdigit() and int(declared) > self.server.max_body_bytes:
                raise Refused(413, f"the request body is {declared} bytes; the limit is {self.server.max_body_bytes}")
        except Refused as refused:
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
        except Refused as refused:
            self._error(refused.status, str(refused))
            return
        path = self.path.rstrip("/")
        if path in ("/v1/models", "/models"):
            self._send(200, self.server.service.models())
        elif path in ("/health", "/v1/health"):
            self._send(200, {"status": "ok", "model": self.server.service.name})
        else:
            self._error(404, f"no route {self.path}")

    def do_POST(self):
        try:
            self._check_origin()
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                raise Refused(404, f"no route {self.path}; use /v1/chat/completions")
            raw = self._read_body()
            self._arrived()
            with self.server.one_at_a_time:
                try:
                    body = json.loads(raw)
                except (UnicodeDecodeError, RecursionError, ValueError) as error:
                    raise Refused(400, f"the request body is not JSON: {str(error)[:200]}") from None
                del raw
                prepared = prepare_or_refusal(self.server.service, body)
                del body  # the last reference: freed before the next request is decoded
            if isinstance(prepared, Refused):
                raise prepared
            result = self.server.service.answer(prepared)
            stream = prepared.stream
            del prepared
        except Refused as refused:
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
            for chunk in self.server.service.stream_chunks(result):
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True
        else:
            self._send(200, result)


_BUSY = json.dumps({"error": {"message": "the server is busy: too many connections; retry later",
                              "type": "server_error", "code": 503}}).encode()
_BUSY_RESPONSE = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
                  b"Connection: close\r\nContent-Length: " + str(len(_BUSY)).encode() + b"\r\n\r\n" + _BUSY)


class ChatHTTPServer(ThreadingHTTPServer):
    """One thread per connection (a ChatHandler), at most `max_connections` of them; the others get a 503 at
    once. The handlers read the service and the limits from here."""

    daemon_threads = True

    def __init__(self, address, service: ChatService, *, max_connections: int, max_body_bytes: int,
                 idle_seconds: float, request_seconds: float, allowed_hosts: tuple[str, ...] = ()):
        self.service = service
        self.max_body_bytes = max_body_bytes
        self.idle_seconds = idle_seconds
        self.request_seconds = request_seconds
        self.allowed_hosts = allowed_hosts
        # One request decoded at a time: decoded JSON can take ~25x its text (many tiny objects), so only one
        # decoded body exists at once; the others wait as raw bytes. What is kept past it is the rendered
        # turn (token ids), and generation runs outside the lock, batched with the others.
        self.one_at_a_time = threading.Lock()
        self.slots = threading.BoundedSemaphore(max_connections)
        super().__init__(address, ChatHandler)

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

