"""Is a model's server (`api_base`) there, and does it serve the model? Asked before anything is built on it:
first a bare TCP connection (milliseconds, stdlib only: a refused server is told before httpx or litellm is
imported), then its free model list (GET /models, never sent a key). A name is matched the way the servers
that list models match it: exactly (vLLM, SGLang), or as Ollama does (any case, `:latest` when no tag is
given, `library/` when no namespace is)."""

from __future__ import annotations

import socket
import urllib.parse

from .errors import ModelConfigError, ModelUnavailable
from .litellm_errors import PROBE_TIMEOUT, _connection_failed, _endpoint

CONNECT_TIMEOUT = 2.0  # seconds a connection may take before the server is left to the run's own timeouts


def connect(name: str, api_base: str) -> None:
    """Raise ModelUnavailable when nobody accepts a connection at api_base's host:port (refused, or the host
    name does not resolve); a slow or odd answer is left to the model list and the run to judge."""
    parts = urllib.parse.urlsplit(api_base if "//" in api_base else f"http://{api_base}")
    try:
        host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return  # a bad port: the request's own error says so
    if not host:
        return
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT):
            return
    except (ConnectionRefusedError, socket.gaierror) as error:
        raise ModelUnavailable(f"model {name!r}: cannot connect to {_endpoint(api_base)}: {error}") from error
    except OSError:
        return  # a timeout, no route: perhaps a firewall that drops; the run's timeouts judge


def check_listed(name: str, api_base: str) -> None:
    """GET {api_base}/models: ModelUnavailable when the server cannot be reached, ModelConfigError when it
    lists models and this one is not among them (as the server matches names); anything else passes."""
    import httpx

    url = api_base.rstrip("/") + "/models"
    try:
        answer = httpx.get(url, timeout=PROBE_TIMEOUT / 2)
    except httpx.TimeoutException:
        return  # someone is there; the run's own timeouts judge a slow server
    except httpx.HTTPError as error:
        if _connection_failed(error):
            raise ModelUnavailable(f"model {name!r}: cannot connect to {_endpoint(api_base)}: {error}") from error
        return
    try:
        served = [entry["id"] for entry in answer.json()["data"]] if answer.status_code == 200 else []
    except (ValueError, KeyError, TypeError):
        return
    wanted = name.split("/", 1)[1] if "/" in name else name
    if served and all(isinstance(listed, str) for listed in served) and not serves(served, wanted):
        shown = ", ".join(served[:5]) + (" ..." if len(served) > 5 else "")
        raise ModelConfigError(f"model {name!r}: {_endpoint(api_base)} does not serve {wanted!r}; it serves {shown}")


def serves(listed: list[str], wanted: str) -> bool:
    """`wanted` names one of the `listed` models: the same name, or the same once both are read as Ollama
    reads a name (`qwen3` is `qwen3:latest`, `library/qwen3:latest` too, in any case)."""
    return wanted in listed or _ollama_name(wanted) in {_ollama_name(name) for name in listed}


def _ollama_name(name: str) -> str:
    name = name.strip().lower()
    path, _, tag = name.rpartition(":") if ":" in name.rsplit("/", 1)[-1] else (name, "", "")
    parts = path.split("/")
    if len(parts) == 1:
        parts = ["library", *parts]
    if len(parts) == 2:
        parts = ["registry.ollama.ai", *parts]
    return "/".join(parts) + ":" + (tag or "latest")
