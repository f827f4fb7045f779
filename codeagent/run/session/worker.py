"""The session's background thread: one job at a time; the UI's thread claims it and returns at once."""

from __future__ import annotations

import threading
from collections.abc import Callable


class Worker:
    def __init__(self, on_done: Callable[[], None]):
        """`on_done()` is called on the worker's thread after each job, once it is no longer busy."""
        self.on_done = on_done
        self.lock = threading.RLock()  # held while deciding whether to claim
        self.busy = False
        self.closed = False
        self.stop = threading.Event()  # an interrupt that came before the agent started
        self._idle = threading.Event()
        self._idle.set()
        self._thread: threading.Thread | None = None

    def claim(self) -> bool:
        """Reserve the thread for a job: False while one runs or once closed."""
        with self.lock:
            if self.busy or self.closed:
                return False
            self.busy = True
            self._idle.clear()
            self.stop.clear()
            return True

    def launch(self, name: str, job: Callable, *args) -> None:
        """Run `job(*args)` on a new thread (after a claim)."""
        self._thread = threading.Thread(target=self._run, args=(job, args), name=f"codeagent-{name}", daemon=True)
        self._thread.start()

    def wait_idle(self, timeout: float | None = None) -> bool:
        return self._idle.wait(timeout)

    def _run(self, job: Callable, args: tuple) -> None:
        try:
            job(*args)
        finally:
            with self.lock:
                self.busy = False
                self._idle.set()
            self.on_done()
