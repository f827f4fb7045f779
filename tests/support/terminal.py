"""A tmux pane a test drives as a user would: keys sent, the screen's text read."""

from __future__ import annotations

import subprocess
import time


class Pane:
    def __init__(self, name: str):
        self.name = name

    def text(self) -> str:
        return subprocess.run(["tmux", "capture-pane", "-p", "-t", self.name], capture_output=True, text=True,
                              check=False).stdout

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.name, *keys], check=True)

    def wait_for(self, *needles: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while True:
            text = self.text()
            if all(needle in text for needle in needles):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"the terminal never showed {needles}:\n{text}")
            time.sleep(0.1)
