"""`run` and `watch` on a core install (no `[otlp]`, so no OTel SDK) or with `OTEL_SDK_DISABLED=true`:
the mirror gets the runs, their `transcript.span` records too; on a core install one line says
what to install when the environment asks for what only the SDK does (an OTLP endpoint, the
console exporter, a sampler)."""

from __future__ import annotations

import os
import sys
from typing import Final

from opentelemetry import trace
from opentelemetry.util.types import Attributes

from transcript_otel import environment_variables as env
from transcript_otel.capture.defaults import pipeline_from_environment, set_pipeline
from transcript_otel.otlp import exporters
from transcript_otel.otlp.sdk_presence import export_asked, export_needs_the_sdk, sdk_disabled, sdk_installed
from transcript_otel.sessions.recorded_spans import (
    Limits,
    PlainResource,
    RandomIds,
    RecordingTracer,
    sampler_needs_the_sdk,
    span_limits,
)

_SAMPLER_NEEDS_THE_SDK: Final = (
    "transcript-otel {command}: OTEL_TRACES_SAMPLER needs the OpenTelemetry SDK, which the core "
    "install leaves out: every span is recorded (pip install 'transcript-otel[otlp]')"
)


def without_the_sdk(command: str, what: str) -> bool:
    """Whether `command` goes without the SDK: `OTEL_SDK_DISABLED=true` (the SDK's providers
    would make no-op spans and log records, and export nothing: the mirror still gets `what`,
    its spans recorded here), or a core install, which says in one line what to install when
    the environment asks for what only the SDK does."""
    if sdk_disabled():
        return True
    if sdk_installed():
        return False
    _say_what_needs_the_sdk(command, what)
    return True


def _say_what_needs_the_sdk(command: str, what: str) -> None:
    """One line on stderr when the environment asks for an export (or a sampler) only the SDK has."""
    if export_asked():
        print(export_needs_the_sdk(f"transcript-otel {command}", what), file=sys.stderr)
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
