"""A tmux pane a test drives as a user would: keys sent, the screen's text read."""

from __future__ import annotations

import os
import subprocess
import time


def new_session(name: str, command: str, width: int = 100, height: int = 30) -> None:
    """A detached tmux session running `command`. tmux can refuse one right after the last session was killed (its
    server still exiting, a CI failure): tried again for a few seconds, then its error said."""
    tries = 20
    for _ in range(tries):
        proc = subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", str(width), "-y", str(height), command],
                              capture_output=True, text=True, check=False)
        if proc.returncode == 0:
            return
        time.sleep(0.25)
    raise AssertionError(f"tmux new-session failed {tries} times: {proc.stderr.strip()}")


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


def processes_with(marker: str) -> list[int]:
    """Processes whose environment holds `marker` (each test's own temporary folder)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                with open(f"/proc/{entry}/environ", "rb") as environ:
                    if marker.encode() in environ.read():
                        found.append(int(entry))
            except OSError:  # gone, or not ours to read
                pass
    return found


def close_terminal(name: str, marker: str, timeout: float = 60) -> None:
    """Kill the tmux session (the terminal hangs up) and wait until no process of the test is left:
    a TUI that survives its terminal keeps its sandbox running."""
    subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True, check=False)
    deadline = time.monotonic() + timeout
    while processes_with(marker):
        assert time.monotonic() < deadline, f"processes left after the terminal closed: {processes_with(marker)}"
        time.sleep(0.2)
