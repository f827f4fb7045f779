"""The connections of `codeagent serve`: uvicorn's HTTP/1.1 protocol (h11) with the two bounds a model server
on a shared host needs and uvicorn does not give:

- at most `max_connections` connections: the next one gets a 503 at once and is closed before anything it
  sends is read (uvicorn's `limit_concurrency` answers 503 only once a request's head has arrived, and keeps
  the connections that never finish one);
- a deadline for each request to arrive whole, line, headers and body (`request_seconds`, counted from the
  moment the connection waits for it), and at most `idle_seconds` between two reads while it arrives: a
  client that sends a byte now and then (slowloris) would otherwise hold its connection for ever
  (uvicorn's keep-alive timeout only bounds the wait between requests). Generation is not under either.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

_BUSY = json.dumps({"error": {"message": "the server is busy: too many connections; retry later",
                              "type": "server_error", "code": 503}}).encode()
BUSY_RESPONSE = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
                 b"Connection: close\r\nContent-Length: " + str(len(_BUSY)).encode() + b"\r\n\r\n" + _BUSY)


@dataclass(frozen=True)
class ConnectionLimits:
    max_connections: int
    request_seconds: float
    idle_seconds: float


class BoundedH11Protocol(H11Protocol):
    """One connection; the limits are the class's (`protocol_class` makes one per server)."""

    limits: ConnectionLimits

    def connection_made(self, transport) -> None:
        self._timers: list[asyncio.TimerHandle] = []
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections:  # this one included
            transport.write(BUSY_RESPONSE)
            transport.close()
            return
        self._wait_for_a_request()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._arrived():
            self._cancel()
        elif self._timers and not self.transport.is_closing():  # still arriving: the idle clock starts again
            self._timers[1].cancel()
            self._timers[1] = self.loop.call_later(self.limits.idle_seconds, self._hang_up)

    def on_response_complete(self) -> None:
        super().on_response_complete()  # may go on with a pipelined request already received
        if not self.transport.is_closing() and not self._arrived():
            self._wait_for_a_request()

    def _arrived(self) -> bool:
        return self.conn.their_state in (h11.DONE, h11.MUST_CLOSE, h11.CLOSED, h11.ERROR)

    def _wait_for_a_request(self) -> None:
        self._cancel()
        self._timers = [self.loop.call_later(self.limits.request_seconds, self._hang_up),
                        self.loop.call_later(self.limits.idle_seconds, self._hang_up)]

    def _cancel(self) -> None:
        for timer in self._timers:
            timer.cancel()
        self._timers = []

    def _hang_up(self) -> None:
        self._cancel()
        if not self._arrived():
            self.transport.close()


def protocol_class(limits: ConnectionLimits) -> type[BoundedH11Protocol]:
    class Bounded(BoundedH11Protocol):
        pass

    Bounded.limits = limits
    return Bounded
