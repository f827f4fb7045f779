"""OpenTelemetry traces and metrics of runs, opt-in (CODEAGENT_ENABLE_TELEMETRY=1): one more consumer of the
event stream, exporting over OTLP/HTTP (protobuf) where the standard OTEL_EXPORTER_OTLP_* variables say.

Spans: a run > its steps > each step's model call (GenAI semantic conventions: tokens, model; cost as
`codeagent.cost_usd`) and tool calls. Metrics: tokens by type, cost, tool calls by tool and outcome,
approvals by decision. No prompt, reply, command or output text is exported unless
CODEAGENT_TELEMETRY_LOG_PROMPTS=1 (then capped); never a key or a header's value.

The SDK is imported only when telemetry is on; a collector that is down or slow costs a run at most
FLUSH_SECONDS when it ends (the export runs beside the run, in the SDK's own threads).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

from ..events import Event, EventBus, Finished, ModelOutput, ModelRetry, Observed, RunStarted, StepStarted, ToolCalled
from ..status import ExitStatus
from .telemetry_exporters import metric_readers, span_processors

ENABLE = "CODEAGENT_ENABLE_TELEMETRY"
LOG_PROMPTS = "CODEAGENT_TELEMETRY_LOG_PROMPTS"
TEXT_CHARS = 4096  # the most of one text a span carries with LOG_PROMPTS
FLUSH_SECONDS = 2.0  # the most a run's end waits for the last export
FAILED = frozenset({ExitStatus.MODEL_ERROR, ExitStatus.SANDBOX_ERROR, ExitStatus.PATCH_TOO_LARGE})
PROTOCOLS = ("OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL")


def _on(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def enabled(environ: Mapping[str, str] = os.environ) -> bool:
    return _on(environ.get(ENABLE))


_started: list[Telemetry | None] = []  # the process's one consumer, once asked for


def subscribe_telemetry(events: EventBus, warn=None) -> Telemetry | None:
    """Subscribe the process's telemetry consumer to `events` when telemetry is on (flushed, boundedly,
    when the process exits); None when it is off or cannot run (said once, through `warn`: default stderr)."""
    if not enabled():
        return None
    if not _started:
        _started.append(start_telemetry(warn))
        if _started[0] is not None:
            atexit.register(_started[0].close)
    if _started[0] is not None:
        events.subscribe(_started[0])
    return _started[0]


def start_telemetry(warn=None) -> Telemetry | None:
    """A consumer when telemetry is on and can run; None otherwise (`warn` says why)."""
    warn = warn or (lambda text: print(text, file=sys.stderr))
    if not enabled():
        return None
    for name in PROTOCOLS:
        if os.environ.get(name, "http/protobuf").strip() != "http/protobuf":
            warn(f"telemetry is off: {name}={os.environ[name]} is not supported (only http/protobuf)")
            return None
    try:
        return Telemetry(log_prompts=_on(os.environ.get(LOG_PROMPTS)), warn=warn)
    except ImportError as error:
        warn(f"telemetry is off: the OpenTelemetry SDK is not installed ({error.name}); "
             "pip install 'codeagent[telemetry]'")
        return None


def scrub(text: str, limit: int = 300) -> str:
    """An error's text as a span may carry it: capped, and no value of a secret-looking variable in it
    (a provider's error may quote the key it was given)."""
    for name, value in os.environ.items():
        if len(value) >= 8 and name.upper().endswith(("API_KEY", "_KEY", "TOKEN", "SECRET", "PASSWORD")):
            text = text.replace(value, "<hidden>")
    return text[:limit]


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


def provider_name(model: str, told: str = "") -> str:
    """The gen_ai.provider.name: as the model told it (LiteLLM's provider), else a scheme of ours (replay:,
    hf:...) as codeagent.SCHEME, else a provider/ prefix; "" when none says."""
    if told:
        return told
    if ":" in model.split("/", 1)[0]:
        return "codeagent." + model.split(":", 1)[0]
    return model.split("/", 1)[0] if "/" in model else ""


class Telemetry:
    """Turns events into spans and metric points. Thread-safe (candidates emit from their own threads)."""

    def __init__(self, log_prompts: bool = False, warn=None):
        from opentelemetry import trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.resources import SERVICE_NAME, OTELResourceDetector, Resource
        from opentelemetry.sdk.trace import TracerProvider

        from .. import __version__

        self._trace = trace
        _tell_export_failures_once()
        attributes = {"service.version": __version__}
        if SERVICE_NAME not in OTELResourceDetector().detect().attributes:  # OTEL_SERVICE_NAME and
            attributes[SERVICE_NAME] = "codeagent"  # OTEL_RESOURCE_ATTRIBUTES name it first
        resource = Resource.create(attributes)
        # shutdown_on_exit=False: the SDK's own exit hooks would wait out the exporter's timeout
        self.tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        for processor in span_processors(warn):
            self.tracer_provider.add_span_processor(processor)
        self.meter_provider = MeterProvider(resource=resource, metric_readers=metric_readers(warn),
                                            shutdown_on_exit=False)
        self.tracer = self.tracer_provider.get_tracer("codeagent", __version__)
        meter = self.meter_provider.get_meter("codeagent", __version__)
        self.tokens = meter.create_counter("codeagent.token.usage", unit="{token}",
                                           description="Tokens used, by gen_ai.token.type (input, output)")
        self.token_histogram = meter.create_histogram("gen_ai.client.token.usage", unit="{token}",
                                                      description="Tokens per model call")
        self.operation_duration = meter.create_histogram("gen_ai.client.operation.duration", unit="s",
                                                         description="Seconds per model call")
        self.cost = meter.create_counter("codeagent.cost.usage", unit="USD", description="Cost of the model calls")
        self.tool_calls = meter.create_counter("codeagent.tool.calls", unit="{call}",
                                               description="Tool calls, by gen_ai.tool.name and outcome")
        self.tool_duration = meter.create_histogram("codeagent.tool.duration", unit="s",
                                                    description="Seconds per tool call")
        self.approvals = meter.create_counter("codeagent.approvals", unit="{decision}",
                                              description="Tool calls allowed or refused, by decision and source")
        self.runs = meter.create_counter("codeagent.runs", unit="{run}", description="Runs, by exit status")
        self.log_prompts = log_prompts
        self._lock = threading.Lock()
        self._runs: dict[str, _Run] = {}
        self._closed = False

    # -- the consumer ----------------------------------------------------------------------------

    def __call__(self, event: Event) -> None:
        handler = getattr(self, f"_on_{event.kind}", None)
        if handler is None or not event.run_id:
            return
        try:
            with self._lock:
                handler(event)
        except Exception as error:  # noqa: BLE001 - telemetry never ends a run
            print(f"telemetry: {type(error).__name__}: {error}", file=sys.stderr)

    def _on_run_started(self, event: RunStarted) -> None:
        run = _Run(None, event.model, provider_name(event.model, event.provider))
        attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "codeagent",
                      "gen_ai.conversation.id": event.run_id, **self._model_attributes(run),
                      "codeagent.task_id": event.task_id, "codeagent.sandbox": event.sandbox,
                      "codeagent.replay": event.replay}
        run.span = self.tracer.start_span("invoke_agent codeagent", attributes=attributes, start_time=_ns(event.time))
        self._runs[event.run_id] = run

    def _on_step_started(self, event: StepStarted) -> None:
        run = self._runs.get(event.run_id)
        if run is None:
            return
        run.end_step()
        run.step = self.tracer.start_span("step", context=self._trace.set_span_in_context(run.span),
                                          attributes={"codeagent.step": event.step}, start_time=_ns(event.time))
        run.step_index, run.last, run.step_started, run.answered = event.step, event.time, event.time, False

    def _on_model_retry(self, event: ModelRetry) -> None:
        run = self._runs.get(event.run_id)
        if run is not None:
            run.retries.append(event)

    def _on_model_output(self, event: ModelOutput) -> None:
        run = self._runs.get(event.run_id)
        if run is None:
            return
        run.answered = True
        attributes: dict[str, Any] = {
            **self._chat_attributes(run), "gen_ai.usage.input_tokens": event.prompt_tokens,
            "gen_ai.usage.output_tokens": event.completion_tokens, "codeagent.step": event.step,
            "codeagent.tool_calls": len(event.tool_calls)}
        if event.response_model:
            attributes["gen_ai.response.model"] = event.response_model
        if event.finish_reason:
            attributes["gen_ai.response.finish_reasons"] = [event.finish_reason]
        if event.cost is not None:
            attributes["codeagent.cost_usd"] = event.cost
        if event.format_error:
            attributes["error.type"] = "format_error"
        if self.log_prompts:
            attributes["gen_ai.output.text"] = event.text[:TEXT_CHARS]
        started = event.started or event.time
        self._chat_span(run, attributes, started).end(end_time=_ns(event.time))
        run.last = event.time
        common = {"gen_ai.operation.name": "chat", **self._model_attributes(run, system=False)}
        for kind, count in (("input", event.prompt_tokens), ("output", event.completion_tokens)):
            self.tokens.add(count, {**common, "gen_ai.token.type": kind})
            self.token_histogram.record(count, {**common, "gen_ai.token.type": kind})
        self.operation_duration.record(max(0.0, event.time - started), common)
        run.input_tokens += event.prompt_tokens
        run.output_tokens += event.completion_tokens
        if event.cost:
            self.cost.add(event.cost, {"gen_ai.request.model": request_model(run.model, run.provider)})

    def _on_patch_changed(self, event: Event) -> None:
        if (run := self._runs.get(event.run_id)) is not None:
            run.last = event.time

    @staticmethod
    def _model_attributes(run: _Run, system: bool = True) -> dict[str, Any]:
        named = {"gen_ai.provider.name": run.provider, **({"gen_ai.system": run.provider} if system else {})}
        return {"gen_ai.request.model": request_model(run.model, run.provider), **(named if run.provider else {})}

    def _chat_attributes(self, run: _Run) -> dict[str, Any]:
        return {"gen_ai.operation.name": "chat", **self._model_attributes(run)}

    def _chat_span(self, run: _Run, attributes: dict, started: float):
        span = self.tracer.start_span(f"chat {request_model(run.model, run.provider)}", context=run.step_context(self._trace),
                                      attributes=attributes, start_time=_ns(started))
        for retry in run.retries:
            span.add_event("model_retry", {"attempt": retry.attempt, "reason": scrub(retry.reason),
                                           "wait_s": retry.wait}, timestamp=_ns(retry.time))
        run.retries.clear()
        return span

    def _on_tool_called(self, event: ToolCalled) -> None:
        run = self._runs.get(event.run_id)
        if run is None:
            return
        attributes: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": event.tool,
                                      "gen_ai.tool.call.id": event.call_id, "codeagent.step": event.step}
        if self.log_prompts:
            attributes["gen_ai.tool.call.arguments"] = json.dumps(event.arguments, default=str)[:TEXT_CHARS]
        run.tools[event.call_id] = self.tracer.start_span(
            f"execute_tool {event.tool}", context=run.step_context(self._trace), attributes=attributes,
            start_time=_ns(event.time))
        run.last = event.time

    def _on_observation(self, event: Observed) -> None:
        run = self._runs.get(event.run_id)
        if run is None:
            return
        outcome = ("interrupted" if event.interrupted else "timeout" if event.timed_out
                   else "error" if event.error else "success")
        span = run.tools.pop(event.call_id, None)
        if span is not None:
            attributes: dict[str, Any] = {"codeagent.tool.duration_s": event.seconds, "codeagent.tool.outcome": outcome}
            if event.exit_code is not None:
                attributes["codeagent.tool.exit_code"] = event.exit_code
            if event.approval:
                attributes["codeagent.approval.decision"] = event.approval
                attributes["codeagent.approval.source"] = event.approval_source
            if outcome != "success":
                attributes["error.type"] = outcome
                span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, outcome))
            if self.log_prompts:
                attributes["gen_ai.tool.call.result"] = event.output[:TEXT_CHARS]
            span.set_attributes(attributes)
            span.end(end_time=_ns(event.time))
        run.last = event.time
        self.tool_calls.add(1, {"gen_ai.tool.name": event.tool, "outcome": outcome})
        self.tool_duration.record(event.seconds, {"gen_ai.tool.name": event.tool, "outcome": outcome})
        if event.approval:
            self.approvals.add(1, {"decision": event.approval, "source": event.approval_source,
                                   "gen_ai.tool.name": event.tool})

    def _on_finished(self, event: Finished) -> None:
        run = self._runs.pop(event.run_id, None)
        if run is None:
            return
        for span in run.tools.values():  # a call the run did not see through
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, "unfinished"))
            span.end(end_time=_ns(event.time))
        status = str(event.exit_status)
        if run.step is not None and not run.answered:  # the run ended while the model was asked (the step's
            # own time: the model was asked as it began)
            span = self._chat_span(run, {**self._chat_attributes(run), "codeagent.step": run.step_index,
                                         "error.type": status}, run.step_started)
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, scrub(event.message) or status))
            span.end(end_time=_ns(event.time))
            run.last = event.time
        run.end_step()
        run.span.set_attributes({"codeagent.exit_status": status, "codeagent.steps": event.steps,
                                 "codeagent.cost_usd": event.cost, "codeagent.wall_seconds": event.seconds,
                                 "gen_ai.usage.input_tokens": run.input_tokens,  # the run's totals
                                 "gen_ai.usage.output_tokens": run.output_tokens})
        if status in FAILED:
            run.span.set_attribute("error.type", status)
            run.span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, status))
        run.span.end(end_time=_ns(event.time))
        self.runs.add(1, {"codeagent.exit_status": status})

    # -- the end ---------------------------------------------------------------------------------

    def close(self, seconds: float = FLUSH_SECONDS) -> None:
        """Export what is left, waiting `seconds` at most: a collector that is down or slow delays nothing
        more (the exports go on in daemon threads that the process's exit ends). Once; then nothing."""
        if self._closed:
            return
        self._closed = True

        def shut(provider) -> None:
            try:
                provider.shutdown()
            except Exception:  # noqa: BLE001,S110 - an export that failed is the SDK's to log
                pass

        workers = [threading.Thread(target=shut, args=(provider,), name="telemetry-flush", daemon=True)
                   for provider in (self.tracer_provider, self.meter_provider)]
        for worker in workers:
            worker.start()
        deadline = time.monotonic() + seconds
        for worker in workers:
            worker.join(max(0.0, deadline - time.monotonic()))


def request_model(model: str, provider: str) -> str:
    """gen_ai.request.model: the model's name as its provider knows it, without LiteLLM's `provider/` prefix
    (`openai/gpt-4o` asks OpenAI for `gpt-4o`; `hosted_vllm/Qwen/Qwen3-8B` a server for `Qwen/Qwen3-8B`)."""
    prefix = model.split("/", 1)[0]
    return model.split("/", 1)[1] if "/" in model and provider in (prefix, f"codeagent.{prefix}") else model


class _Once(logging.Handler):
    """The SDK's complaints (a collector down: one per retry) as one line on stderr, the first."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.told = False

    def emit(self, record: logging.LogRecord) -> None:
        if not self.told:
            self.told = True
            print(f"telemetry: {record.getMessage()[:300]} (further export errors are not shown)", file=sys.stderr)


def _tell_export_failures_once() -> None:
    log = logging.getLogger("opentelemetry")
    if not log.handlers:  # an application that set up its own logging keeps it
        log.addHandler(_Once())
        log.propagate = False


class _Run:
    """One run's open spans."""

    def __init__(self, span, model: str, provider: str):
        self.span, self.model, self.provider = span, model, provider
        self.step = None
        self.step_index = -1
        self.step_started = 0.0
        self.answered = False  # the open step's model call has answered
        self.last = 0.0  # when the open step's latest event happened: where it ends
        self.tools: dict[str, Any] = {}  # call id: its open span
        self.retries: list[ModelRetry] = []
        self.input_tokens = self.output_tokens = 0  # the run's model calls, all together

    def step_context(self, trace):
        return trace.set_span_in_context(self.step if self.step is not None else self.span)

    def end_step(self) -> None:
        if self.step is not None:
            self.step.end(end_time=_ns(self.last))
            self.step = None
