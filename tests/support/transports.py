"""A shell transport that replays a byte stream, cut into reads of the given sizes (the sandbox's output
parsing without a container)."""

from __future__ import annotations


class ScriptedTransport:
    def __init__(self, stream: bytes, sizes: list[int]):
        self.stream, self.sizes = stream, sizes

    def send(self, data: bytes) -> None:
        pass

    def recv(self, timeout: float) -> bytes | None:
        if not self.stream:
            return b""
        size = self.sizes.pop(0) if self.sizes else len(self.stream)
        chunk, self.stream = self.stream[:size], self.stream[size:]
        return chunk

    def close(self) -> None:
        pass

    def exit_code(self) -> int | None:
        return None
