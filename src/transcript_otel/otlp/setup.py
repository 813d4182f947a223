"""`configure()`: one call that sets up OTel, the sinks and the instrumentors.

Its spans and log records need the `[otlp]` extra (the OTel SDK and OTLP exporters) unless
the application already configured OTel itself; without it, or with `OTEL_SDK_DISABLED=true`,
the JSONL mirror alone gets the transcript.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from opentelemetry import _logs, trace
from opentelemetry._logs._internal import ProxyLoggerProvider

from transcript_otel import environment_variables as env
from transcript_otel.capture.defaults import backend_limits, pipeline_from_environment, set_pipeline
from transcript_otel.capture.pipeline import (
    TranscriptPipeline,
)
from transcript_otel.otlp import exporters, sdk_presence
from transcript_otel.otlp.exporters import ConfigurationError
from transcript_otel.records.content import ContentPolicy, policy_from
from transcript_otel.records.redaction import Redactor
from transcript_otel.sinks.jsonl import JsonlMirror

__all__ = ["Configuration", "ConfigurationError", "configure", "instrument_installed"]

_logger = logging.getLogger(__name__)

DISTRIBUTION: Final = "transcript-otel"
INSTRUMENTOR_GROUP: Final = "opentelemetry_instrumentor"


@dataclass(slots=True)
class Configuration:
    """What `configure()` set up; `shutdown()` undoes it within a bounded time."""

    pipeline: TranscriptPipeline
    tracer_provider: Any
    logger_provider: Any
    created_providers: bool
    otlp_endpoint: str | None
    otlp_protocol: str | None
    jsonl_directory: str | None
    created_tracer_provider: bool = False
    created_logger_provider: bool = False
    instrumented: list[str] = field(default_factory=list)

    def shutdown(self, timeout_s: float | None = None) -> None:
        self.pipeline.shutdown(timeout_s)


def _sdk_configured() -> bool:
    return not isinstance(trace.get_tracer_provider(), (trace.ProxyTracerProvider, trace.NoOpTracerProvider))


def _logs_configured() -> bool:
    provider = _logs.get_logger_provider()
    return not isinstance(provider, (ProxyLoggerProvider, _logs.NoOpLoggerProvider))


def _described_endpoint(endpoint: str | None, logs_url: str | None, traces_url: str | None) -> str | None:
    """The endpoint as the user gave it (base URL), or the signal URL we export to."""
    if logs_url is None and traces_url is None:
        return None
    return endpoint or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or logs_url or traces_url


def _described_protocol(protocol: str | None, logs_url: str | None, traces_url: str | None) -> str | None:
    if logs_url is not None:
        return exporters.protocol_for("LOGS", protocol)
    if traces_url is not None:
        return exporters.protocol_for("TRACES", protocol)
    return None


def instrument_installed() -> list[str]:
    """Instrument every harness of ours whose library is installed; their names."""
    # Here, not at the top (issue 30): importlib.metadata brings zipfile and email, which
    # `configure(instrument=False)` does not need.
    from importlib import metadata

    from opentelemetry.instrumentation.dependencies import get_dependency_conflicts

    done: list[str] = []
    for entry_point in metadata.entry_points(group=INSTRUMENTOR_GROUP):
        dist = entry_point.dist
        if dist is None or dist.name != DISTRIBUTION:
            continue
        try:
            instrumentor = entry_point.load()()
            # Checked here, quietly: `instrument()` would log an error for each library not installed.
            if get_dependency_conflicts(list(instrumentor.instrumentation_dependencies())) is not None:
                continue
            if not instrumentor.is_instrumented_by_opentelemetry:
                instrumentor.instrument()
            done.append(entry_point.name)
        except Exception as exc:  # one broken instrumentor must not stop the others
            _logger.warning("transcript-otel: could not instrument %s: %r", entry_point.name, exc)
    return done


def _metrics_configured() -> bool:
    # The metrics API, slow to import, only when metrics are wanted (issue 30).
    from opentelemetry import metrics
    from opentelemetry.metrics._internal import _ProxyMeterProvider

    return not isinstance(metrics.get_meter_provider(), (_ProxyMeterProvider, metrics.NoOpMeterProvider))


def _checked_profile(profile: str | None) -> str | None:
    try:
        backend_limits(profile)
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from exc
    return profile


def _content_policy(content: str | None, exclude: Iterable[str] | None) -> ContentPolicy:
    try:
        return policy_from(content, exclude)
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from exc


def _without_the_sdk(endpoint: str | None, protocol: str | None) -> bool:
    """Whether no SDK provider is made: `OTEL_SDK_DISABLED=true`, or a core install (no
    `[otlp]`), which says in one line what to install when an export is asked for instead of
    raising into the application: either way the mirror gets the transcript."""
    if sdk_presence.sdk_disabled():
        return True
    if sdk_presence.sdk_installed():
        return False
    if sdk_presence.export_asked(endpoint, protocol):
        _logger.warning(sdk_presence.export_needs_the_sdk("transcript-otel", "the transcript"))
    return True


def _copies_wanted(argument: bool | None, variable: str, exported: bool) -> bool:
    """Whether a sink of OTel copies (log records, span events) is on: as the argument, else the
    variable, says; else only when something exports them."""
    return argument if argument is not None else env.env_flag(variable, exported)


def configure(
    *,
    service_name: str | None = None,
    endpoint: str | None = None,
    protocol: str | None = None,
    jsonl: bool | None = None,
    jsonl_dir: str | os.PathLike[str] | None = None,
    jsonl_path: str | os.PathLike[str] | None = None,
    log_records: bool | None = None,
    span_events: bool | None = None,
    span_event_max_length: int | None = None,
    span_event_max_bytes: int | None = None,
    max_backlog_bytes: int | None = None,
    shutdown_timeout_s: float | None = None,
    redact_patterns: Iterable[tuple[str, str]] = (),
    redact: Callable[[str], str] | None = None,
    content: str | None = None,
    content_exclude: Iterable[str] | None = None,
    backend_profile: str | None = None,
    openinference: bool | None = None,
    instrument: bool = True,
    export: bool = True,
) -> Configuration:
    """Set up transcript capture for this process in one call.

    * OTel: when the application has not configured OTel yet, create SDK tracer and
      logger providers (batch processors; OTLP exporters when `endpoint` or
      `OTEL_EXPORTER_OTLP_[TRACES_|LOGS_]ENDPOINT` is set, over `protocol` or
      `OTEL_EXPORTER_OTLP_[TRACES_|LOGS_]PROTOCOL`: `grpc` or `http/protobuf`) and
      make them global; `OTEL_TRACES_EXPORTER` / `OTEL_LOGS_EXPORTER` choose `otlp` (the
      default), `console` (stdout), `none`, or a comma-separated list. A provider the
      application already set is reused, and left for the application to shut down.
    * Sinks: the JSONL mirror, OTel log records and span events, each switchable
      (arguments > `TRANSCRIPT_OTEL_*` variables > on). Log records and span events are
      on by default only when something exports them: an exporter made here, or the
      application's own provider.
    * Content: `content` (`full`, `metadata` or `none`; else `TRANSCRIPT_OTEL_CONTENT`,
      else `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`, else `full`) for every
      sink, lowered to `metadata` for the categories in `content_exclude`
      (`user_text`, `assistant_text`, `thinking`, `tool_arguments`, `tool_results`).
    * GenAI content on spans: the content the policy keeps `full` also goes into the
      spans' GenAI attributes (`gen_ai.input.messages`, ...) and/or
      `gen_ai.client.inference.operation.details` events, as
      `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` says (unset: spans only), up to
      `TRANSCRIPT_OTEL_GENAI_CONTENT_MAX_LENGTH` characters per attribute (else the
      profile's). `openinference` (else `TRANSCRIPT_OTEL_OPENINFERENCE`, else the
      profile's) adds OpenInference's `input.value`/`output.value`, for Arize Phoenix.
    * Limits: `backend_profile` (`generic`, `jaeger`, `grafana`, `phoenix`; else
      `TRANSCRIPT_OTEL_BACKEND_PROFILE`) sets how long span-event, log-record and GenAI
      content attribute values may be (cut JSON-preserving, marked); the mirror keeps
      all. `phoenix` also turns OpenInference on.
    * Redaction, always on: secrets (API keys and tokens of the common providers,
      bearer credentials, private keys) are replaced in every entry before any sink
      sees it; `redact_patterns` adds `(kind, regex)` pairs, `redact` a function
      applied to each text after them.
    * Instrumentors: every transcript-otel instrumentor whose library is installed.
    * Without the SDK: `OTEL_SDK_DISABLED=true`, or a core install (no `[otlp]` extra), makes
      no providers and exports nothing; the mirror gets every entry. A core install asked to
      export says in one line (a warning) what to install, and raises nothing. `export=False`
      does the same whatever is installed.

    Everything is flushed and shut down at interpreter exit within
    `shutdown_timeout_s` (default 5 s), even when the backend is down.
    """
    tracer_provider: Any = trace.get_tracer_provider()
    logger_provider: Any = _logs.get_logger_provider()
    no_sdk = not export or _without_the_sdk(endpoint, protocol)
    create_tracer = not no_sdk and not _sdk_configured()
    create_logger = not no_sdk and not _logs_configured()
    traces_url = exporters.otlp_url("TRACES", endpoint, protocol) if create_tracer else None
    logs_url = exporters.otlp_url("LOGS", endpoint, protocol) if create_logger else None
    traces_console = create_tracer and exporters.console_wanted("TRACES")
    logs_console = create_logger and exporters.console_wanted("LOGS")
    # Metrics only when asked for, with an endpoint, and no MeterProvider set (see exporters).
    wants_meters = not no_sdk and exporters.metrics_wanted() and not _metrics_configured()
    metrics_url = exporters.otlp_url("METRICS", endpoint, protocol) if wants_meters else None
    metrics_console = wants_meters and exporters.console_wanted("METRICS")
    meter_provider: Any = None
    if create_tracer or create_logger or metrics_url is not None or metrics_console:
        # All are built before any becomes global: a failure leaves nothing half set.
        resource = exporters.resource(service_name)
        if create_tracer:
            tracer_provider = exporters.tracer_provider(
                resource, traces_url, exporters.protocol_for("TRACES", protocol), console=traces_console
            )
        if create_logger:
            logger_provider = exporters.logger_provider(
                resource, logs_url, exporters.protocol_for("LOGS", protocol), console=logs_console
            )
        if metrics_url is not None or metrics_console:
            meter_provider = exporters.meter_provider(
                resource, metrics_url, exporters.protocol_for("METRICS", protocol), console=metrics_console
            )
        if create_tracer:
            trace.set_tracer_provider(tracer_provider)
        if create_logger:
            _logs.set_logger_provider(logger_provider)
        if meter_provider is not None:
            from opentelemetry import metrics

            metrics.set_meter_provider(meter_provider)

    # What no exporter takes is not made: the providers made here without an exporter drop
    # it, and the log records and span events of each entry are most of the writer's work.
    # The mirror has every entry (`replay` makes both from it); spans are made either way,
    # their ids and records are in the mirror. An application's own providers export.
    logs_exported = not no_sdk and (not create_logger or logs_url is not None or logs_console)
    traces_exported = not no_sdk and (not create_tracer or traces_url is not None or traces_console)
    pipeline = pipeline_from_environment(
        logger_provider=logger_provider,
        jsonl=jsonl,
        jsonl_dir=jsonl_dir,
        jsonl_path=jsonl_path,
        log_records=_copies_wanted(log_records, env.TRANSCRIPT_OTEL_LOG_RECORDS, logs_exported),
        span_events=_copies_wanted(span_events, env.TRANSCRIPT_OTEL_SPAN_EVENTS, traces_exported),
        span_event_max_length=span_event_max_length,
        span_event_max_bytes=span_event_max_bytes,
        max_backlog_bytes=max_backlog_bytes,
        shutdown_timeout_s=shutdown_timeout_s,
        redactor=Redactor(redact_patterns, redact),
        content_policy=_content_policy(content, content_exclude),
        backend_profile=_checked_profile(backend_profile),
        openinference=openinference,
    )
    mirror = next((sink for sink in pipeline.sinks if isinstance(sink, JsonlMirror)), None)
    # Only what we created is ours to shut down; the application's providers are its own.
    if create_tracer:
        pipeline.add_shutdown_callback(tracer_provider.shutdown)
    if create_logger:
        pipeline.add_shutdown_callback(logger_provider.shutdown)
    if meter_provider is not None:
        pipeline.add_shutdown_callback(meter_provider.shutdown)
    pipeline.ensure_running()  # also registers the bounded flush at interpreter exit
    previous = set_pipeline(pipeline)
    if previous is not None:
        # Emitters created before keep their pipeline, which lives on until exit; the
        # providers a first configure() created are now shut down with this one.
        pipeline.adopt_shutdown_callbacks(previous)
    configuration = Configuration(
        pipeline=pipeline,
        tracer_provider=tracer_provider,
        logger_provider=logger_provider,
        created_providers=create_tracer or create_logger,
        otlp_endpoint=_described_endpoint(endpoint, logs_url, traces_url),
        otlp_protocol=_described_protocol(protocol, logs_url, traces_url),
        created_tracer_provider=create_tracer,
        created_logger_provider=create_logger,
        jsonl_directory=None if mirror is None else str(mirror.path or mirror.directory),
    )
    if instrument:
        configuration.instrumented = instrument_installed()
    return configuration
