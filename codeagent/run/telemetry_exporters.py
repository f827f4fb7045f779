"""Where telemetry goes, as the standard variables say: OTEL_TRACES_EXPORTER and OTEL_METRICS_EXPORTER
(otlp: OTLP/HTTP where OTEL_EXPORTER_OTLP_* point; console: printed on stderr; none). The SDK is imported here
only when telemetry is on."""

from __future__ import annotations

import os
import sys


def exporters(signal: str, warn=None) -> list[str]:
    """The exporters OTEL_{signal}_EXPORTER names (comma-separated; default otlp): otlp, console (to stderr:
    stdout carries a run's result), none; any other is said and left out."""
    named = [part.strip().lower() for part in os.environ.get(f"OTEL_{signal}_EXPORTER", "otlp").split(",")]
    unknown = [name for name in named if name and name not in ("otlp", "console", "none")]
    if unknown and warn is not None:
        warn(f"telemetry: OTEL_{signal}_EXPORTER: {', '.join(unknown)} not supported (otlp, console, none)")
    return [name for name in named if name in ("otlp", "console")]


def span_processors(warn=None) -> list:
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    found = []
    for name in exporters("TRACES", warn):
        if name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            found.append(BatchSpanProcessor(OTLPSpanExporter()))
        else:
            found.append(BatchSpanProcessor(ConsoleSpanExporter(out=sys.stderr)))
    return found


def metric_readers(warn=None) -> list:
    from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, PeriodicExportingMetricReader

    found = []
    for name in exporters("METRICS", warn):
        if name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

            found.append(PeriodicExportingMetricReader(OTLPMetricExporter()))
        else:
            found.append(PeriodicExportingMetricReader(ConsoleMetricExporter(out=sys.stderr)))
    return found
