"""What a failed litellm call means: retried (a transient failure, with the server's Retry-After), or
one of the ModelErrors a front end tells the user; a server that is not there named by host:port."""

from __future__ import annotations

import email.utils
import time
import urllib.parse

from .errors import (
    ContextWindowExceeded,
    ModelConfigError,
    ModelRequestError,
)

PROBE_TIMEOUT = 10.0  # seconds the one request of `probe` may take


class _Retry(Exception):
    def __init__(self, cause: Exception, wait_hint: float | None = None):
        super().__init__(str(cause))
        self.cause = cause
        self.wait_hint = wait_hint


CONNECTION_SIGNS = ("Connection refused", "Errno 111", "Name or service not known", "Cannot connect",
                    "nodename nor servname", "Temporary failure in name resolution")


def _connection_failed(error: BaseException | None) -> bool:
    """No connection to the server at all: refused, or its name does not resolve. litellm reports that
    under several types (InternalServerError, APIConnectionError), so the cause chain's text decides;
    a timeout or a dropped stream is not this."""
    seen = 0
    while error is not None and seen < 8:
        if isinstance(error, ConnectionRefusedError) or any(sign in str(error) for sign in CONNECTION_SIGNS):
            return True
        error, seen = error.__cause__ or error.__context__, seen + 1
    return False


def _endpoint(api_base: str | None) -> str:
    """host:port of the server a model is asked at, as a refused connection should name it."""
    if not api_base:
        return "the provider's API (no api_base set)"
    parts = urllib.parse.urlsplit(api_base if "//" in api_base else f"http://{api_base}")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return api_base
    return f"{parts.hostname}:{port} (api_base {api_base})"


def _retry_after(error: Exception) -> float | None:
    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None) or {}
    value = headers.get("retry-after") if hasattr(headers, "get") else None
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value)
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


def _classify(litellm, error: Exception, model: str) -> _Retry:
    """Return a _Retry for transient failures; raise the matching ModelError otherwise."""
    e = litellm.exceptions
    text = f"{type(error).__name__}: {error}"
    if isinstance(error, e.ContextWindowExceededError):
        raise ContextWindowExceeded(f"model {model!r}: {text}") from error
    if isinstance(error, (e.AuthenticationError, e.PermissionDeniedError)):
        raise ModelConfigError(
            f"model {model!r} rejected the API key ({text}); check the key for this provider "
            "(its environment variable)"
        ) from error
    if isinstance(error, e.NotFoundError):
        raise ModelConfigError(
            f"model {model!r} not found ({text}); check the model name and api_base"
        ) from error
    if isinstance(error, e.PaymentRequiredError):
        raise ModelConfigError(f"model {model!r}: payment required ({text})") from error
    if isinstance(error, e.LiteLLMUnknownProvider):
        raise ModelConfigError(f"model {model!r}: {text}; name it as provider/model") from error
    if "Missing credentials" in str(error) or "api_key client option must be set" in str(error):
        raise ModelConfigError(f"model {model!r}: no API key ({text})") from error
    if isinstance(error, ModuleNotFoundError):
        raise ModelConfigError(
            f"litellm needs a missing package ({error}); run: pip install 'codeagent[llm]'"
        ) from error
    transient = (
        e.RateLimitError,
        e.Timeout,
        e.APIConnectionError,
        e.InternalServerError,
        e.ServiceUnavailableError,
        e.BadGatewayError,
    )
    if isinstance(error, transient):
        return _Retry(error, _retry_after(error))
    status = getattr(error, "status_code", None)
    if isinstance(status, int) and (status >= 500 or status in (408, 409, 429)):
        return _Retry(error, _retry_after(error))
    if status in (401, 403):  # a server answered codeagent's own first request (models/first_request.py)
        raise ModelConfigError(f"model {model!r} rejected the API key ({text}); check the key for this provider "
                               "(its environment variable)") from error
    if status == 404:
        raise ModelConfigError(f"model {model!r} not found ({text}); check the model name and api_base") from error
    if isinstance(error, (e.BadRequestError, e.UnprocessableEntityError, e.APIError)) or (
        isinstance(status, int) and 400 <= status < 500
    ):
        raise ModelRequestError(f"model {model!r}: request rejected: {text}") from error
    raise error
