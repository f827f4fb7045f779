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

import contextlib
import copy
import gc
import json
import logging
import os
import random
import sys
import time
from typing import Any

from . import first_request, progress, server_check
from .cancel import cancelled, on_cancel, pause
from .errors import (
    ModelConfigError,
    ModelRequestError,
    ModelUnavailable,
)
from .litellm_errors import (
    PROBE_TIMEOUT,
    _classify,
    _connection_failed,
    _endpoint,
    _Retry,
)
from .litellm_wire import _read_stream, _server_gives_token_ids, _token_logprobs
from .text_protocol import response_from_text, to_text_messages
from .tokens import estimate_tokens, token_upper_bound
from .types import ModelResponse, Sampling, Usage, response_from_message, tool_names

log = logging.getLogger(__name__)

# Servers that need no key (vLLM, SGLang, llama.cpp) still get one from the OpenAI client.
PLACEHOLDER_API_KEY = "EMPTY"
# A server that refuses the connection (or a name that does not resolve) is not busy: it is not there.
# It gets this many quick attempts more (a server restarting), then the call fails naming host:port.
CONNECT_RETRIES, CONNECT_BACKOFF = 2, 0.5


def _import_litellm():
    # Offline by default: otherwise the import fetches a price list from GitHub, retrying for seconds.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        if "litellm" in sys.modules:
            import litellm
        else:
            with _collector_paused():
                import litellm
    except ImportError as error:
        raise ModelConfigError(
            f"litellm is not installed ({error}); run: pip install 'codeagent[llm]'"
        ) from error
    litellm.suppress_debug_info = True
    return litellm


_LOADER = first_request.Loader(_import_litellm)


@contextlib.contextmanager
def _collector_paused():
    """The import makes ~half a million long-lived objects and no garbage cycles: the cyclic collector's passes
    over them during it were ~30% of its CPU (a launch's longest step). It is paused meanwhile, then what is
    alive is frozen (later full collections skip it: ~0.2 s each) and it runs again. Process-wide: the
    sandbox's start, in the other thread, goes without collections too for those seconds."""
    if not gc.isenabled():  # paused already (another thread's import, or the user's choice): leave it so
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


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
        self._server_probed = False
        self._native: bool | None = None
        self._gives_ids: bool | None = None  # the api_base's server answers with token ids (None: not asked yet)
        self._light: str | None = None  # the provider, while the first request goes out without litellm

    def start_light(self) -> None:
        """A run starts: its first request may go out before litellm is imported (models/first_request.py)."""
        self._light = first_request.provider_of(self.name, self.api_base, self.extra)

    def complete(self, messages: list[dict], tools: list[dict], sampling: Sampling) -> ModelResponse:
        sampling = sampling or Sampling()
        light = self._light is not None and first_request.first_prompt(messages)
        litellm = None if light else _import_litellm()
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
        deadline = time.monotonic() + self.total_timeout if self.total_timeout else None
        try:
            failed = None
            try:
                response = self._send_light(request, deadline) if light else None
            except first_request.ServerStatus as status:
                response, failed = None, _classify(_LOADER.wait(), status, self.name)  # its first attempt
            if light and cancelled():
                raise ModelUnavailable(f"model {self.name!r}: the call was cancelled")
            if response is None:  # the light request failed: litellm sends it (the light reply needs no litellm)
                litellm = _LOADER.wait() if light else litellm
                response = self._call_with_retries(litellm, request, deadline, failed)
        finally:
            self._light = None if light else self._light  # one light request: litellm is there for the rest
        return self._to_response(litellm, response, native, tool_names(tools))

    def _send_light(self, request: dict, deadline: float | None) -> dict | None:
        """The request sent with httpx while litellm is imported in the background, its reply as the dict of
        litellm's response (put together here: the reply is not kept waiting for the import); None on any
        failure (litellm sends it again and judges the failure)."""
        import httpx

        assert self._light is not None and self.api_base is not None
        key = first_request.api_key(self._light, self.api_key)
        timeout = self.timeout if deadline is None else max(0.1, min(self.timeout, deadline - time.monotonic()))
        client = httpx.Client(timeout=timeout)
        try:
            sent = client.build_request("POST", self.api_base.rstrip("/") + "/chat/completions",
                                        json=first_request.body(request),
                                        headers={"Authorization": f"Bearer {key}"} if key else {})
            _LOADER.start()  # while the server thinks
            with on_cancel(client.close):
                answer = client.send(sent, stream=True)
                try:
                    if answer.status_code != 200:
                        raise first_request.ServerStatus(
                            answer.status_code, first_request.error_message(answer.read()), answer)
                    whole = answer.headers.get("content-type", "").startswith("application/json")
                    reply: Any = json.loads(answer.read()) if whole else first_request.read_events(answer)
                finally:
                    answer.close()
            if reply is None or cancelled():
                return None
            response = reply if whole else first_request.assemble(reply)
            return response if isinstance(response, dict) and response.get("choices") else None
        except (httpx.HTTPError, ValueError, TypeError, KeyError, AttributeError):
            return None
        finally:
            client.close()

    @property
    def provider(self) -> str:
        """Where LiteLLM sends this model (openai, anthropic, hosted_vllm...; telemetry's gen_ai.provider.name);
        "" when it cannot tell."""
        if self._light is not None:
            return self._light  # litellm's get_llm_provider names these by their prefix
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
            if self._gives_ids is False:  # said at INFO: a warning at every run was noise (`doctor` says it)
                log.info("model %s: the server at %s does not say it gives token ids (not codeagent serve "
                         "or vLLM): this run records no token ids and will not be token-exact",
                         self.name, _endpoint(self.api_base))
        return bool(self._gives_ids)

    def check(self) -> None:
        """Raise ModelConfigError now if the model cannot be used as configured (unknown provider, no
        key): front ends call it before they build a sandbox."""
        if not self._checked:
            if self._light is None:
                self._check_configuration(_import_litellm())
            elif self._light == "openai" and not self.api_key and not os.environ.get("OPENAI_API_KEY"):
                self.api_key = PLACEHOLDER_API_KEY  # as _check_configuration does for a served model
            self._checked = True

    def probe(self, paid: bool = False) -> None:
        """One cheap request, before anything is built on the model (front ends call it with `check`):
        with an api_base, its server's free model list (`probe_server`). Without an api_base, only when
        `paid` (the user switches models), a one-token completion: a rejected key or an unknown model
        raises ModelConfigError. Once per model; the server is asked before litellm is imported (seconds),
        so that a dead one is told at once."""
        self.probe_server()
        self.check()
        if not self._probed and not self.api_base and paid:
            self._probe_completion()
        self._probed = True

    def connect(self) -> None:
        """With an api_base: ModelUnavailable at once (milliseconds) when nobody accepts a connection
        there (models/server_check.py)."""
        if self.api_base and not self._probed:
            server_check.connect(self.name, self.api_base)

    def probe_server(self) -> None:
        """With an api_base, once: GET {api_base}/models (free): a server that is not there raises
        ModelUnavailable naming host:port, one that lists its models without this one ModelConfigError."""
        if self.api_base and not self._probed and not self._server_probed:
            server_check.check_listed(self.name, self.api_base)
            self._server_probed = True

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

    def token_upper_bound(self, messages: list[dict]) -> int | None:
        """At least count_tokens(messages), without litellm's tokenizer (None: count them)."""
        return token_upper_bound(messages)

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
        if self._native is None and self._light is not None:
            self._native = True  # litellm's table has no entry for the name: it assumes native tool calling
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

    def _call_with_retries(self, litellm, request: dict, deadline: float | None = None,
                           failed: _Retry | None = None):
        """litellm's call, retried; `failed`: the first attempt, already made and failed (first_request)."""
        attempt = 0
        while True:
            if failed is not None:
                retry, failed = failed, None
            else:
                retry = self._attempt(litellm, request, deadline)
                if not isinstance(retry, _Retry):
                    return retry
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

    def _attempt(self, litellm, request: dict, deadline: float | None):
        """One call through litellm: its response, or the _Retry its failure is worth (others raise)."""
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
            return error if isinstance(error, _Retry) else _classify(litellm, error, self.name)

    def _to_response(self, litellm, response, native: bool, known_tools: list[str]) -> ModelResponse:
        """`response`: litellm's, or a light reply's dict (`litellm` None: its model has no litellm price)."""
        raw = response if isinstance(response, dict) else response.model_dump()
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
        if litellm is None:
            return None  # a light reply: litellm's price table has no entry for the model
        try:
            return float(litellm.completion_cost(completion_response=response, model=self.name))
        except Exception:  # no price known for this model
            return None
