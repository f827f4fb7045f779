"""What a model call reports while it runs: its text and tool-call arguments as they form, its retries,
and how long it has waited for a first token.

The caller listens with `listening(callback)`; the model calls `report(...)` from whatever thread runs
the call (`call_cancellable` copies the caller's context into its worker); `Waiting` comes from a
timer of the listener's own. Once the caller stops
listening (the call returned or was abandoned) late reports are dropped, so an abandoned call cannot
speak after the run has moved on.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ToolCallDelta:
    """A piece of the `index`-th tool call: its id and name come with its first piece."""

    index: int
    call_id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass(frozen=True)
class Retrying:
    """The attempt failed and the call is tried again after `wait` seconds (the text so far is void)."""

    attempt: int
    retries: int
    reason: str
    wait: float


@dataclass(frozen=True)
class Waiting:
    """No token yet after `seconds` (whole seconds, reported once each)."""

    seconds: int


Notice = TextDelta | ToolCallDelta | Retrying | Waiting


class _Listener:
    def __init__(self, callback: Callable[[Notice], None]):
        self._callback = callback
        self._lock = threading.Lock()
        self._closed = False
        self._started = time.monotonic()
        self._heard = False  # a token arrived in the current attempt
        self._waited = 0
        self._stop = threading.Event()

    def __call__(self, notice: Notice) -> None:
        with self._lock:
            if self._closed:
                return
            if isinstance(notice, (TextDelta, ToolCallDelta)):
                self._heard = True
            elif isinstance(notice, Retrying):
                self._heard = False
            try:
                self._callback(notice)
            except Exception:  # a display's bug must not fail the model call
                log.exception("a listener of the model call failed on %r", notice)

    def tick(self) -> None:
        seconds = int(time.monotonic() - self._started)
        if not self._heard and seconds > self._waited:
            self._waited = seconds
            self(Waiting(seconds))

    def start_ticking(self) -> None:
        # Its own thread, not the caller's: in a headless run that is the main thread, where Ctrl-C lands,
        # and an interrupt in the middle of printing leaves the terminal's writer half done.
        def run() -> None:
            while not self._stop.wait(1.0):
                self.tick()

        threading.Thread(target=run, name="codeagent-model-wait", daemon=True).start()

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._stop.set()


_listener: contextvars.ContextVar[_Listener | None] = contextvars.ContextVar("codeagent_progress", default=None)


@contextmanager
def listening(callback: Callable[[Notice], None]) -> Iterator[None]:
    """Hand what model calls made inside report to `callback` (serialised, never after the block)."""
    listener = _Listener(callback)
    listener.start_ticking()
    token = _listener.set(listener)
    try:
        yield
    finally:
        listener.close()
        _listener.reset(token)


def report(notice: Notice) -> bool:
    """Hand the notice to the listener; False when nobody listens (the caller may log it instead)."""
    listener = _listener.get()
    if listener is not None:
        listener(notice)
    return listener is not None
