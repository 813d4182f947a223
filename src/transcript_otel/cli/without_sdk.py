"""`run` and `watch` on a core install (no `[otlp]`, so no OTel SDK): the mirror gets the runs,
their `transcript.span` records too, and one line says what to install when the environment asks
for what only the SDK does (an OTLP endpoint, the console exporter, a sampler)."""

from __future__ import annotations

import os
import sys
from typing import Final

from opentelemetry import trace
from opentelemetry.util.types import Attributes

from transcript_otel import environment_variables as env
from transcript_otel.capture.defaults import pipeline_from_environment, set_pipeline
from transcript_otel.otlp import exporters
from transcript_otel.sessions.recorded_spans import (
    Limits,
    PlainResource,
    RandomIds,
    RecordingTracer,
    sampler_needs_the_sdk,
    span_limits,
)

_SIGNALS: Final[tuple[exporters.ExportedSignal, ...]] = ("TRACES", "LOGS")
_EXPORT_NEEDS_THE_SDK: Final = (
    "transcript-otel {command}: exporting to an OTLP endpoint or the console needs the OpenTelemetry "
    "SDK and OTLP exporters, which the core install leaves out: pip install 'transcript-otel[otlp]' "
    "(the mirror gets {what})"
)
_SAMPLER_NEEDS_THE_SDK: Final = (
    "transcript-otel {command}: OTEL_TRACES_SAMPLER needs the OpenTelemetry SDK, which the core "
    "install leaves out: every span is recorded (pip install 'transcript-otel[otlp]')"
)


def say_what_needs_the_sdk(command: str, what: str) -> None:
    """One line on stderr when the environment asks for an export (or a sampler) only the SDK has."""
    if any(exporters.otlp_url(signal) or exporters.console_wanted(signal) for signal in _SIGNALS):
        print(_EXPORT_NEEDS_THE_SDK.format(command=command, what=what), file=sys.stderr)
    elif sampler_needs_the_sdk():
        print(_SAMPLER_NEEDS_THE_SDK.format(command=command), file=sys.stderr)


def recorded_for_the_mirror(service: str) -> RecordingTracerProvider:
    """Spans recorded for their `transcript.span` records only, as `configure()`'s provider that
    exports nothing records them (random ids, the service's name, its span limits), and the
    pipeline it makes then (made the default), without the OTel copies nothing would export."""
    pipeline = pipeline_from_environment(
        log_records=env.env_flag(env.TRANSCRIPT_OTEL_LOG_RECORDS, False),
        span_events=env.env_flag(env.TRANSCRIPT_OTEL_SPAN_EVENTS, False),
    )
    pipeline.ensure_running()
    set_pipeline(pipeline)
    max_events = None if os.environ.get("OTEL_SPAN_EVENT_COUNT_LIMIT") else exporters.SPAN_EVENT_LIMIT
    return RecordingTracerProvider(PlainResource({"service.name": service}), span_limits(max_events))


class RecordingTracerProvider(trace.TracerProvider):
    """Every tracer one `RecordingTracer`: its spans are recorded, never exported."""

    def __init__(self, resource: PlainResource, limits: Limits) -> None:
        self._tracer = RecordingTracer(RandomIds(), resource, limits)

    def get_tracer(
        self,
        instrumenting_module_name: str,
        instrumenting_library_version: str | None = None,
        schema_url: str | None = None,
        attributes: Attributes | None = None,
    ) -> trace.Tracer:
        return self._tracer
