"""Every hosted or served model, through litellm (imported on first use: it takes seconds).

Served models (`hosted_vllm/NAME`, or any name with an api_base whose GET /models says the server is
`codeagent serve` or vLLM's OpenAI server: `owned_by` codeagent or vllm) are asked for their token
ids (`return_token_ids`, `logprobs` with `return_tokens_as_token_ids`), and the response's
`prompt_token_ids`, completion ids and logprobs are recorded: a served run is token-exact. Their tool
schemas go in the request body as given (`extra_body`), because litellm drops `additionalProperties:
false` from the ones it sends (and does so in the caller's own dicts): the served model must see the
prompt it was trained on.

Replies are streamed (`stream`, on by default): text and tool-call arguments are reported as they form
(models/progress.py) and the chunks are put back together into the same reply as an unstreamed one; an
abandoned call closes its stream. Served models are not streamed: their token ids and logprobs come
whole only with an unstreamed reply.
"""

from __future__ import annotations

import copy
import email.utils
import json
import logging
import os
import random
import socket
import time
import urllib.parse
from typing import Any

from codeagent.models import progress
from codeagent.models.cancel import cancelled, on_cancel, pause
from codeagent.models.errors import (
    ContextWindowExceeded,
    ModelConfigError,
    ModelRequestError,
    ModelUnavailable,
)
from codeagent.models.text_protocol import response_from_text, to_text_messages
from codeagent.models.tokens import estimate_tokens
from codeagent.models.types import ModelResponse, Sampling, Usage, response_from_message, tool_names

log = logging.getLogger(__name__)

# Servers that need no key (vLLM, SGLang, llama.cpp) still get one from the OpenAI client.
PLACEHOLDER_API_KEY = "EMPTY"
# A server that refuses the connection (or a name that does not resolve) is not busy: it is not there.
# It gets this many quick attempts more (a server restarting), then the call fails naming host:port.
CONNECT_RETRIES, CONNECT_BACKOFF = 2, 0.5
PROBE_TIMEOUT = 10.0  # seconds the one request of `probe` may take


def _import_litellm():
    # Offline by default: otherwise the import fetches a price list from GitHub, retrying for seconds.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import litellm
    except ImportError as error:
        raise ModelConfigError(
            f"litellm is not installed ({error}); run: pip install 'codeagent[llm]'"
        ) from error
    litellm.suppress_debug_info = True
    return litellm


class _Retry(Exception):
    def __init__(self, cause: Exception, wait_hint: float | None = None):
        super().__init__(str(cause))
        self.cause = cause
        self.wait_hint = wait_hint


class LiteLLMModel:
    remote = True  # a call waits on a server: the agent may abandon it (interrupt, time limit)

    def __init__(
        self,
        name: str,
        api_base: str | None = None,
        api_key: str | None = None,
        extra: dict[str, Any] | None = None,
        retries: int = 6,
        native_tools: bool = True,
        timeout: float = 600.0,
        backoff_base: float = 1.0,
        backoff_max: float = 60.0,
        total_timeout: float | None = None,
        stream: bool = True,
    ):
        """`timeout`: seconds one HTTP request may take; `retries`: how many times a transient failure is
        retried; `total_timeout`: seconds one `complete` may take, every attempt and pause included;
        `stream`: ask for the reply as a stream (not for served models: see the module's doc)."""
        if not name or not name.strip():
            raise ModelConfigError(
                "no model configured: set `model` in the config file or pass --model "
                "(e.g. gpt-4o, anthropic/claude-sonnet-4-20250514, hosted_vllm/Qwen/Qwen3-8B)"
            )
        for key, seconds in (("timeout", timeout), ("total_timeout", total_timeout)):
            if seconds is not None and not seconds > 0:
                raise ModelConfigError(f"model.{key} must be a number of seconds above 0, not {seconds!r}")
        self.name = name
        self.api_base = api_base
        self.api_key = api_key
        self.extra = dict(extra or {})
        self.retries = retries
        self.native_tools = native_tools
        self.timeout = timeout
        self.total_timeout = total_timeout
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.stream = stream
        self._checked = False
        self._probed = False
        self._native: bool | None = None
        self._gives_ids: bool | None = None  # the api_base's server answers with token ids (None: not asked yet)

    def complete(self, messages: list[dict], tools: list[dict], sampling: Sampling) -> ModelResponse:
        sampling = sampling or Sampling()
        litellm = _import_litellm()
        self.check()
        native = self.uses_native_tools(litellm)
        request = {
            "model": self.name,
            "messages": messages if native else to_text_messages(messages, tools),
            "timeout": self.timeout,
            "num_retries": 0,  # retries are ours, so that they are counted and logged once
            "max_retries": 0,
            "drop_params": True,  # e.g. o-series models reject temperature
            **sampling.model_dump(exclude_none=True),
        }
        if native and tools:
            request["tools"] = copy.deepcopy(tools)  # litellm edits the schemas it is given, in place
        if self.api_base:
            request["api_base"] = self.api_base
        if self.api_key:
            request["api_key"] = self.api_key
        request.update(self.extra)
        if self.served():
            request.setdefault("logprobs", True)
            extra_body = {"return_token_ids": True, "return_tokens_as_token_ids": True,
                          **dict(request.get("extra_body") or {})}
            if native and tools:
                extra_body["tools"] = copy.deepcopy(tools)  # reaches the server's chat template unchanged
            request["extra_body"] = extra_body
        elif self.stream:
            request["stream"] = True
            request["stream_options"] = {"include_usage": True}
        response = self._call_with_retries(litellm, request)
        return self._to_response(litellm, response, native, tool_names(tools))

    @property
    def provider(self) -> str:
        """Where LiteLLM sends this model (openai, anthropic, hosted_vllm...; telemetry's gen_ai.provider.name);
        "" when it cannot tell."""
        try:
            return _import_litellm().get_llm_provider(self.name)[1] or ""
        except Exception:  # noqa: BLE001 - an unknown name, or no litellm: the run says so elsewhere
            return ""

    def served(self) -> bool:
        """A model served with vLLM's OpenAI API (codeagent serve, vllm serve): token ids can be asked for.
        Named hosted_vllm/..., or under any prefix (openai/...) at an api_base whose server says so in its
        model list; at any other api_base the run will not be token-exact, which is logged once."""
        if self.name.startswith("hosted_vllm/"):
            return True
        if not self.api_base:
            return False
        if self._gives_ids is None:
            self._gives_ids = _server_gives_token_ids(self.api_base)
            if self._gives_ids is False:
                log.warning("model %s: the server at %s does not say it gives token ids (not codeagent serve "
                            "or vLLM): this run records no token ids and will not be token-exact",
                            self.name, _endpoint(self.api_base))
        return bool(self._gives_ids)

    def check(self) -> None:
        """Raise ModelConfigError now if the model cannot be used as configured (unknown provider, no
        key): front ends call it before they build a sandbox."""
        if not self._checked:
            self._check_configuration(_import_litellm())
            self._checked = True

    def probe(self, paid: bool = False) -> None:
        """One cheap request, before anything is built on the model (front ends call it with `check`):
        with an api_base, GET {api_base}/models (free): a server that is not there raises
        ModelUnavailable naming host:port, and one that lists its models without this one raises
        ModelConfigError. Without an api_base, only when `paid` (the user switches models), a one-token
        completion: a rejected key or an unknown model raises ModelConfigError. Once per model; the
        server is asked before litellm is imported (seconds), so that a dead one is told at once."""
        if not self._probed and self.api_base:
            self._probe_server()
        self.check()
        if not self._probed and not self.api_base and paid:
            self._probe_completion()
        self._probed = True

    def _probe_server(self) -> None:
        import httpx

        assert self.api_base is not None

        url = self.api_base.rstrip("/") + "/models"  # never sent a key: only whether anyone answers
        try:
            answer = httpx.get(url, timeout=PROBE_TIMEOUT / 2)
        except httpx.TimeoutException:
            return  # someone is there; the run's own timeouts judge a slow server
        except httpx.HTTPError as error:
            if _connection_failed(error):
                raise ModelUnavailable(f"model {self.name!r}: cannot connect to {_endpoint(self.api_base)}: "
                                       f"{error}") from error
            return
        try:
            served = [entry["id"] for entry in answer.json()["data"]] if answer.status_code == 200 else []
        except (ValueError, KeyError, TypeError):
            return
        wanted = self.name.split("/", 1)[1] if "/" in self.name else self.name
        if served and all(isinstance(name, str) for name in served) and wanted not in served:
            shown = ", ".join(served[:5]) + (" ..." if len(served) > 5 else "")
            raise ModelConfigError(f"model {self.name!r}: {_endpoint(self.api_base)} does not serve {wanted!r}; "
                                   f"it serves {shown}")

    def _probe_completion(self) -> None:
        litellm = _import_litellm()
        request = {"model": self.name, "messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 1,
                   "timeout": PROBE_TIMEOUT, "num_retries": 0, "max_retries": 0, "drop_params": True,
                   **({"api_key": self.api_key} if self.api_key else {})}
        try:
            litellm.completion(**request)
        except Exception as error:
            try:
                retry = _classify(litellm, error, self.name)  # raises for a rejected key, an unknown model
            except ModelRequestError:
                return  # the request was understood and refused (e.g. max_tokens too small): the model is there
            if _connection_failed(retry.cause):
                raise ModelUnavailable(f"model {self.name!r}: cannot connect to {_endpoint(self.api_base)}") from error
            raise ModelUnavailable(f"model {self.name!r}: {type(retry.cause).__name__}: {retry.cause}") from error

    def count_tokens(self, messages: list[dict]) -> int:
        """Tokens of messages for this model (litellm's tokenizer; chars/4 if it has none)."""
        try:
            return int(_import_litellm().token_counter(model=self.name, messages=messages))
        except Exception:
            return estimate_tokens(messages)

    def uses_native_tools(self, litellm=None) -> bool:
        """Native tool calling unless disabled or litellm knows the model lacks it."""
        if not self.native_tools:
            return False
        if self._native is None:
            litellm = litellm or _import_litellm()
            try:
                supported = litellm.get_model_info(self.name).get("supports_function_calling")
            except Exception:  # not in litellm's table (served/local models): assume support
                supported = None
            self._native = supported is not False
        return self._native

    def _check_configuration(self, litellm) -> None:
        try:
            litellm.get_llm_provider(self.name)
        except Exception as error:
            raise ModelConfigError(
                f"unknown model {self.name!r}: litellm cannot tell its provider ({error}). "
                "Name it as provider/model, e.g. openai/gpt-4o or hosted_vllm/<served name>"
            ) from error
        if self.api_key:
            return
        try:
            missing = litellm.validate_environment(self.name, api_base=self.api_base)["missing_keys"]
        except Exception:
            return
        if not missing:
            return
        if self.api_base:
            self.api_key = PLACEHOLDER_API_KEY
            return
        raise ModelConfigError(
            f"model {self.name!r} needs {' or '.join(missing)}: set it in the environment (export "
            f"{missing[0]}=...), or for a self-hosted server give its address (--api-base or model.api_base)"
        )

    def _call_with_retries(self, litellm, request: dict):
        attempt = 0
        deadline = time.monotonic() + self.total_timeout if self.total_timeout else None
        while True:
            if deadline is not None:
                request["timeout"] = max(0.1, min(self.timeout, deadline - time.monotonic()))
            try:
                response = litellm.completion(**request)
                if request.get("stream"):
                    response = _read_stream(litellm, response, request["messages"])
                if not response.model_dump().get("choices"):
                    raise _Retry(RuntimeError(f"provider returned no choices: {response}"[:400]))
                return response
            except Exception as error:
                retry = error if isinstance(error, _Retry) else _classify(litellm, error, self.name)
            if cancelled():  # the caller gave up on this call (an interrupt, its time limit): no more attempts
                raise ModelUnavailable(f"model {self.name!r}: the call was cancelled") from retry.cause
            delay = min(self.backoff_max, self.backoff_base * 2**attempt)
            delay = delay / 2 + random.uniform(0, delay / 2)
            if retry.wait_hint is not None:
                delay = max(delay, min(retry.wait_hint, self.backoff_max))
            retries = self.retries
            refused = _connection_failed(retry.cause)
            if refused:  # nobody there: a few quick attempts, not the backoff meant for a busy server
                retries = min(retries, CONNECT_RETRIES)
                delay = min(delay, CONNECT_BACKOFF)
            out_of_time = deadline is not None and time.monotonic() + delay >= deadline
            if attempt >= retries or out_of_time:
                why = f"no answer within {self.total_timeout:g}s" if out_of_time else "still failing"
                if refused:
                    why = f"cannot connect to {_endpoint(self.api_base)}"
                raise ModelUnavailable(
                    f"model {self.name!r}: {why} after {attempt + 1} attempts: "
                    f"{type(retry.cause).__name__}: {retry.cause}"
                ) from retry.cause
            attempt += 1
            reason = f"cannot connect to {_endpoint(self.api_base)}" if refused else (
                f"{type(retry.cause).__name__}: {str(retry.cause)[:200]}")
            if not progress.report(progress.Retrying(attempt, retries, reason, round(delay, 2))):
                log.warning("model %s: %s; retry %d/%d in %.1fs", self.name, reason, attempt, retries, delay)
            if pause(delay):
                raise ModelUnavailable(f"model {self.name!r}: the call was cancelled") from retry.cause

    def _to_response(self, litellm, response, native: bool, known_tools: list[str]) -> ModelResponse:
        raw = response.model_dump()
        choice = raw["choices"][0]
        message = choice.get("message") or {}
        usage = raw.get("usage") or {}
        token_ids, logprobs = _token_logprobs(choice.get("logprobs"))
        listed = choice.get("token_ids") or (choice.get("provider_specific_fields") or {}).get("token_ids")
        if isinstance(listed, list) and all(isinstance(token, int) for token in listed):
            token_ids = listed
        prompt_ids = raw.get("prompt_token_ids")
        if not (isinstance(prompt_ids, list) and all(isinstance(token, int) for token in prompt_ids)):
            prompt_ids = None
        fields = dict(
            usage=Usage(
                prompt_tokens=usage.get("prompt_tokens") or 0,
                completion_tokens=usage.get("completion_tokens") or 0,
                cost=self._cost(litellm, response),
            ),
            finish_reason=choice.get("finish_reason"),
            token_ids=token_ids,
            logprobs=logprobs,
            prompt_token_ids=prompt_ids,
            raw=raw,
        )
        if native:
            response = response_from_message(message, known_tools, **fields)
        else:
            response = response_from_text(message.get("content") or "", known_tools, **fields)
        if response.format_error and response.finish_reason == "length":
            response.format_error += (
                " (the reply was cut off at the max_tokens limit: finish_reason=length)"
            )
        return response

    def _cost(self, litellm, response) -> float | None:
        try:
            return float(litellm.completion_cost(completion_response=response, model=self.name))
        except Exception:  # no price known for this model
            return None


def _read_stream(litellm, stream, messages: list[dict]):
    """The streamed reply as one response (as litellm gives an unstreamed one), its deltas reported on
    the way; the stream is closed if the caller gives up on the call."""
    http: Any = getattr(getattr(stream, "completion_stream", None), "response", None)
    headers: Any = getattr(http, "headers", None)
    kind = headers.get("content-type", "") if hasattr(headers, "get") else ""
    if kind.startswith("application/json"):  # a server that does not stream answered with the whole reply
        try:
            return litellm.ModelResponse(**json.loads(http.read()))
        except ValueError as error:
            raise _Retry(RuntimeError(f"the server's reply is not JSON: {error}")) from error
    chunks = []
    with on_cancel(lambda: _close(stream)):
        try:
            for chunk in stream:
                if cancelled():
                    break
                chunks.append(chunk)
                for choice in chunk.choices or []:
                    delta = choice.delta
                    if delta is None:
                        continue
                    if delta.content:
                        progress.report(progress.TextDelta(delta.content))
                    for call in delta.tool_calls or []:
                        function = call.function
                        progress.report(progress.ToolCallDelta(
                            index=call.index or 0, call_id=call.id or "",
                            name=(function.name if function else None) or "",
                            arguments=(function.arguments if function else None) or ""))
        finally:
            _close(stream)
    if cancelled():
        raise RuntimeError("the streamed reply was abandoned")  # never seen: the caller has gone
    if hasattr(stream, "received_finish_reason"):  # litellm closes every stream with a finish: the server's own
        finished = stream.received_finish_reason or getattr(stream, "intermittent_finish_reason", None)
    else:
        finished = any(choice.finish_reason for chunk in chunks for choice in chunk.choices or [])
    if not finished:
        raise _Retry(RuntimeError(f"the stream ended before the reply did ({len(chunks)} chunks)"))
    return litellm.stream_chunk_builder(chunks, messages=messages)


TOKEN_ID_SERVERS = ("codeagent", "vllm")  # owned_by of the servers that answer with token ids and logprobs


def _server_gives_token_ids(api_base: str) -> bool | None:
    """Whether GET {api_base}/models names a server that gives token ids (None: nobody there yet, ask
    again; a server too slow to list its models is taken as not giving them, and not asked again)."""
    import httpx

    try:
        answer = httpx.get(api_base.rstrip("/") + "/models", timeout=PROBE_TIMEOUT / 2)
        entries = answer.json()["data"] if answer.status_code == 200 else None
    except httpx.TimeoutException:
        return False
    except httpx.HTTPError:
        return None
    except (ValueError, KeyError, TypeError):
        return False
    if not isinstance(entries, list):
        return False
    return any(isinstance(entry, dict) and entry.get("owned_by") in TOKEN_ID_SERVERS for entry in entries)


def _close(stream) -> None:
    """Close a streamed reply, from any thread: its socket is shut down first, which also wakes a read
    blocked on it (closing the response alone may wait for that read)."""
    http = getattr(getattr(stream, "completion_stream", None), "response", None)
    network: Any = (getattr(http, "extensions", None) or {}).get("network_stream")
    sock = network.get_extra_info("socket") if hasattr(network, "get_extra_info") else None
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    for closable in (getattr(stream, "completion_stream", None), getattr(stream, "response", None)):
        close = getattr(closable, "close", None)
        if callable(close):
            try:
                close()
            except Exception:  # noqa: BLE001 - closing what may be half-read or already closed
                pass


def _token_logprobs(logprobs: dict | None) -> tuple[list[int] | None, list[float] | None]:
    entries = (logprobs or {}).get("content") or []
    if not entries:
        return None, None
    values = [entry.get("logprob") for entry in entries]
    # vLLM with return_tokens_as_token_ids writes each token as "token_id:<int>".
    ids: Any = []  # token ids, or None when one entry has none
    for entry in entries:
        token = entry.get("token") or ""
        if not token.startswith("token_id:"):
            ids = None
            break
        ids.append(int(token.split(":", 1)[1]))
    return ids, values


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
    if isinstance(error, (e.BadRequestError, e.UnprocessableEntityError, e.APIError)) or (
        isinstance(status, int) and 400 <= status < 500
    ):
        raise ModelRequestError(f"model {model!r}: request rejected: {text}") from error
    raise error
