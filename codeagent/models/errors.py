"""The few ways a model call can fail. The agent decides what to do by type, never by message."""

from __future__ import annotations


class ModelError(Exception):
    """Base class of every model failure."""


class ModelConfigError(ModelError):
    """The model cannot be used as configured: no model, missing or bad API key, unknown model.

    The message says what to set. Retrying never helps.
    """


class ModelRequestError(ModelError):
    """The provider rejected this request (HTTP 400-style). Retrying the same request never helps."""


class ContextWindowExceeded(ModelRequestError):
    """The conversation is longer than the model's context window; shorten the history and retry."""


class ModelUnavailable(ModelError):
    """Transient failures (rate limits, timeouts, 5xx, connection errors) outlasted every retry."""


class ReplayExhausted(ModelError):
    """A replay or scripted model was asked for more turns than it holds."""
