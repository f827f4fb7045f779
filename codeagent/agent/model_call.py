"""A step's model call, owned by the Agent: the history fitted to the model's context window (images
inlined), and a remote call waited on so that an interrupt or the run's time limit ends it."""

from __future__ import annotations

import threading
import time
from functools import partial
from pathlib import Path

from ..config import Config
from ..models import ContextWindowExceeded, Model, ModelResponse, Sampling
from ..models.cancel import Cancelled, call_cancellable
from ..status import ExitStatus
from .history import estimate_tokens, fit_messages
from .images import inline
from .run_types import Stop


class ModelCall:
    """Asks the model. `model` may be switched between steps (`Agent.use_model`); `deadline` and `keep` (the
    repository's instructions, kept when the history is elided) are set by each run."""

    def __init__(self, model: Model, config: Config, image_root: Path, interrupted: threading.Event):
        self.model = model
        self.config = config
        self.image_root = image_root  # where attached images are stored (the trajectory store)
        self.interrupted = interrupted
        self.deadline = float("inf")  # time.monotonic() at which the running run's max_seconds are up
        self.keep = ""

    def __call__(self, messages: list[dict], sampling: Sampling, specs: list[dict]) -> ModelResponse:
        count = getattr(self.model, "count_tokens", estimate_tokens)
        reserve = self.config.model.max_tokens or 4096
        budget = max(1024, self.config.model.context_tokens - reserve)
        for _attempt in range(3):
            fitted = inline(fit_messages(messages, budget, count, keep=self.keep,
                                         upper_bound=getattr(self.model, "token_upper_bound", None)), self.image_root)
            try:
                return self._ask(partial(self.model.complete, fitted, specs, sampling))
            except ContextWindowExceeded:
                budget = int(budget * 0.7)  # our estimate was optimistic: fit tighter and ask again
        raise Stop(ExitStatus.MODEL_ERROR, "the conversation does not fit the model's context window even when elided")

    def _ask(self, complete):
        """A remote model's call is waited on, not sat in: an interrupt or the run's time limit ends the
        run within a poll even while the server hangs (the call is abandoned). In-process models (no
        `remote`) are called directly: their generation is bounded by max_tokens, and abandoning it
        would leave it running on the weights."""
        if not getattr(self.model, "remote", False):
            return complete()

        def stop_reason() -> str | None:
            if self.interrupted.is_set():
                return ExitStatus.INTERRUPTED
            return ExitStatus.MAX_TIME if time.monotonic() >= self.deadline else None

        try:
            return call_cancellable(complete, stop_reason)
        except Cancelled as cancelled:
            if cancelled.reason == ExitStatus.INTERRUPTED:
                raise Stop(ExitStatus.INTERRUPTED, "interrupted by the user while the model was answering") from None
            raise Stop(ExitStatus.MAX_TIME, f"ran for more than {self.config.limits.max_seconds:g}s "
                                   "(the model call in flight was abandoned)") from None
