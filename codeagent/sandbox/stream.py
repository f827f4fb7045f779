"""The portable transport: `docker exec -i bash` over the engine's attach stream.

Works with any engine, local or remote; each byte goes through the engine, so large outputs
are slower than with the FIFO transport (`fifo.py`).
"""

from __future__ import annotations

import select
import socket
import struct
import time

from .engine import docker_client, exec_exit_code


class DockerTransport:
    """A `docker exec -i bash` stream; demultiplexes Docker's 8-byte frame headers."""

    def __init__(self, container_id: str, environment: dict[str, str], workdir: str):
        api = docker_client().api
        exec_id = api.exec_create(container_id, ["bash", "--noprofile", "--norc"], stdin=True,
                                  stdout=True, stderr=True, tty=False, environment=environment,
                                  workdir=workdir)["Id"]
        self._exec_id = exec_id
        self._response = api.exec_start(exec_id, socket=True)
        self._sock: socket.socket = getattr(self._response, "_sock", self._response)
        self._sock.setblocking(True)
        self._raw = b""
        self._frame_left = 0

    def send(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except OSError:
            pass  # the shell is gone: recv() reports end of stream

    def recv(self, timeout: float) -> bytes | None:
        end = time.monotonic() + timeout
        while True:
            payload = self._take_payload()
            if payload:
                return payload
            left = end - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self._sock], [], [], left)
            if not ready:
                return None
            try:
                chunk = self._sock.recv(1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                return b""
            self._raw += chunk

    def _take_payload(self) -> bytes:
        out = bytearray()
        while self._raw:
            if self._frame_left == 0:
                if len(self._raw) < 8:
                    break
                self._frame_left = struct.unpack(">I", self._raw[4:8])[0]
                self._raw = self._raw[8:]
                continue
            piece = self._raw[: self._frame_left]
            self._raw = self._raw[len(piece):]
            self._frame_left -= len(piece)
            out += piece
        return bytes(out)

    def exit_code(self) -> int | None:
        return exec_exit_code(self._exec_id)

    def close(self) -> None:
        for closer in (lambda: self._sock.shutdown(socket.SHUT_RDWR), self._sock.close, self._response.close):
            try:
                closer()
            except Exception:
                pass
