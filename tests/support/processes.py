"""The processes a test starts: their output read as it comes, a local port nobody listens on."""

from __future__ import annotations

import os
import socket
import threading
import time


def free_port() -> int:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Output:
    """A pipe read as it comes (the streamed text has no newline until the reply ends)."""

    def __init__(self, pipe):
        self.text = ""
        self._pipe = pipe
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while chunk := os.read(self._pipe.fileno(), 4096):
            self.text += chunk.decode(errors="replace")

    def wait_for(self, needle: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while needle not in self.text:
            assert time.monotonic() < deadline, f"{needle!r} never came; output so far:\n{self.text}"
            time.sleep(0.05)
