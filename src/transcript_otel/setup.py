"""`configure()`: one call that sets up OTel, the sinks and the instrumentors.

Needs the `[otlp]` extra (the OTel SDK and OTLP exporters) unless the
application already configured OTel itself.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Final

from opentelemetry import _logs, trace
from opentelemetry._logs._internal import ProxyLoggerProvider

from transcript_otel import environment_variables as env
from transcript_otel.defaults import set_pipeline
from transcript_otel.pipeline import (
    DEFAULT_MAX_BACKLOG_BYTES,
    DEFAULT_SHUTDOWN_TIMEOUT_S,
    TranscriptPipeline,
)
from transcript_otel.sinks.base import Sink
from transcript_otel.sinks.jsonl import JsonlMirror
from transcript_otel.sinks.otel_logs import OTelLogSink
from transcript_otel.sinks.span_events import DEFAULT_MAX_VALUE_LENGTH, SpanEventSink

_logger = logging.getLogger(__name__)

DISTRIBUTION: Final = "transcript-otel"
INSTRUMENTOR_GROUP: Final = "opentelemetry_instrumentor"
DEFAULT_SERVICE_NAME: Final = "transcript-otel-agent"
# Exports give up after this long, so a dead backend cannot hang shutdown for 30 s.
EXPORT_TIMEOUT_S: Final = 5.0
_PROTOCOLS: Final = ("grpc", "http/protobuf")


class ConfigurationError(ValueError):
    """`configure()` was given settings it cannot honour."""


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
    instrumented: list[str] = field(default_factory=list)

    def shutdown(self, timeout_s: float | None = None) -> None:
        self.pipeline.shutdown(timeout_s)


def _sdk_configured() -> bool:
    return not isinstance(trace.get_tracer_provider(), (trace.ProxyTracerProvider, trace.NoOpTracerProvider))


def _logs_configured() -> bool:
    provider = _logs.get_logger_provider()
    return not isinstance(provider, (ProxyLoggerProvider, _logs.NoOpLoggerProvider))


def _otlp_endpoint(endpoint: str | None) -> str | None:
    return endpoint or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or None


def _otlp_protocol(signal: str, protocol: str | None) -> str:
    chosen = (
        protocol
        or os.environ.get(f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    )
    if chosen not in _PROTOCOLS:
        raise ConfigurationError(
            f"OTLP protocol {chosen!r} is not supported; use one of {', '.join(_PROTOCOLS)}"
        )
    return chosen


def _signal_endpoint(base: str, protocol: str, path: str) -> str:
    if protocol == "grpc":
        return base
    return base.rstrip("/") + path


def _exporters(endpoint: str | None, protocol: str | None) -> tuple[Any, Any]:
    """OTLP span and log exporters per the `OTEL_EXPORTER_OTLP_*` variables."""
    traces_protocol = _otlp_protocol("TRACES", protocol)
    logs_protocol = _otlp_protocol("LOGS", protocol)
    timeout = float(os.environ.get("OTEL_EXPORTER_OTLP_TIMEOUT", 0)) / 1000 or EXPORT_TIMEOUT_S
    span_kwargs: dict[str, Any] = {"timeout": timeout}
    log_kwargs: dict[str, Any] = {"timeout": timeout}
    if endpoint is not None:
        span_kwargs["endpoint"] = _signal_endpoint(endpoint, traces_protocol, "/v1/traces")
        log_kwargs["endpoint"] = _signal_endpoint(endpoint, logs_protocol, "/v1/logs")
    if traces_protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as Grpc

        span_exporter: Any = Grpc(insecure=_insecure(endpoint), **span_kwargs)
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        span_exporter = OTLPSpanExporter(**span_kwargs)
    if logs_protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogs

        log_exporter: Any = GrpcLogs(insecure=_insecure(endpoint), **log_kwargs)
    else:
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter

        log_exporter = OTLPLogExporter(**log_kwargs)
    return span_exporter, log_exporter


def _insecure(endpoint: str | None) -> bool | None:
    if endpoint is None:
        return None  # let OTEL_EXPORTER_OTLP_INSECURE / the scheme decide
    return endpoint.startswith("http://")


def _create_providers(
    service_name: str | None, endpoint: str | None, protocol: str | None
) -> tuple[Any, Any]:
    try:
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise ConfigurationError(
            "configure() needs the OTel SDK: pip install 'transcript-otel[otlp]'"
        ) from exc
    attributes = {}
    if service_name or not os.environ.get("OTEL_SERVICE_NAME"):
        attributes[SERVICE_NAME] = service_name or DEFAULT_SERVICE_NAME
    resource = Resource.create(attributes)
    tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    logger_provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
    if endpoint is not None:
        span_exporter, log_exporter = _exporters(endpoint, protocol)
        tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter))
        logger_provider.add_log_record_processor(BatchLogRecordProcessor(log_exporter))
    return tracer_provider, logger_provider


def _shutdown_within(provider: Any, timeout_s: float) -> None:
    """`provider.shutdown()` on a helper thread: a dead backend must not hang exit."""
    worker = threading.Thread(target=provider.shutdown, name="transcript-otel-shutdown", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        _logger.warning(
            "transcript-otel: %s did not shut down within %.1f s; giving up",
            type(provider).__name__,
            timeout_s,
        )


def instrument_installed() -> list[str]:
    """Instrument every harness of ours whose library is installed; their names."""
    from opentelemetry.instrumentation.dependencies import get_dist_dependency_conflicts

    done: list[str] = []
    for entry_point in metadata.entry_points(group=INSTRUMENTOR_GROUP):
        dist = entry_point.dist
        if dist is None or dist.name != DISTRIBUTION:
            continue
        try:
            if get_dist_dependency_conflicts(dist) is not None:
                continue
            instrumentor = entry_point.load()()
            if not instrumentor.is_instrumented_by_opentelemetry:
                instrumentor.instrument()
            done.append(entry_point.name)
        except Exception as exc:  # one broken instrumentor must not stop the others
            _logger.warning("transcript-otel: could not instrument %s: %r", entry_point.name, exc)
    return done


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
    max_backlog_bytes: int | None = None,
    shutdown_timeout_s: float | None = None,
    instrument: bool = True,
) -> Configuration:
    """Set up transcript capture for this process in one call.

    * OTel: when the application has not configured OTel yet, create SDK tracer and
      logger providers (batch processors; OTLP exporters when `endpoint` or
      `OTEL_EXPORTER_OTLP_ENDPOINT` is set, over `protocol` or
      `OTEL_EXPORTER_OTLP_[TRACES_|LOGS_]PROTOCOL`: `grpc` or `http/protobuf`) and
      make them global. When it has, reuse its providers.
    * Sinks: the JSONL mirror, OTel log records and span events, each switchable
      (arguments > `TRANSCRIPT_OTEL_*` variables > on).
    * Instrumentors: every transcript-otel instrumentor whose library is installed.

    Everything is flushed and shut down at interpreter exit within
    `shutdown_timeout_s` (default 5 s), even when the backend is down.
    """
    endpoint = _otlp_endpoint(endpoint)
    created = False
    tracer_provider: Any = trace.get_tracer_provider()
    logger_provider: Any = _logs.get_logger_provider()
    if not _sdk_configured() or not _logs_configured():
        new_tracer_provider, new_logger_provider = _create_providers(service_name, endpoint, protocol)
        if not _sdk_configured():
            trace.set_tracer_provider(new_tracer_provider)
            tracer_provider = new_tracer_provider
        if not _logs_configured():
            _logs.set_logger_provider(new_logger_provider)
            logger_provider = new_logger_provider
        created = True

    timeout = shutdown_timeout_s or env.env_number(
        env.TRANSCRIPT_OTEL_SHUTDOWN_TIMEOUT, DEFAULT_SHUTDOWN_TIMEOUT_S
    )
    sinks: list[Sink] = []
    mirror: JsonlMirror | None = None
    if jsonl if jsonl is not None else env.env_flag(env.TRANSCRIPT_OTEL_JSONL, True):
        mirror = JsonlMirror(
            jsonl_dir if jsonl_dir is not None else env.env_text(env.TRANSCRIPT_OTEL_JSONL_DIR),
            path=jsonl_path if jsonl_path is not None else env.env_text(env.TRANSCRIPT_OTEL_JSONL_PATH),
        )
        sinks.append(mirror)
    if log_records if log_records is not None else env.env_flag(env.TRANSCRIPT_OTEL_LOG_RECORDS, True):
        sinks.append(OTelLogSink(logger_provider))
    if span_events if span_events is not None else env.env_flag(env.TRANSCRIPT_OTEL_SPAN_EVENTS, True):
        length = span_event_max_length or int(
            env.env_number(env.TRANSCRIPT_OTEL_SPAN_EVENT_MAX_LENGTH, DEFAULT_MAX_VALUE_LENGTH)
        )
        sinks.append(SpanEventSink(max_value_length=length))
    pipeline = TranscriptPipeline(
        sinks,
        max_backlog_bytes=max_backlog_bytes
        or int(env.env_number(env.TRANSCRIPT_OTEL_MAX_BACKLOG_BYTES, DEFAULT_MAX_BACKLOG_BYTES)),
        shutdown_timeout_s=timeout,
    )
    if created:
        for provider in (tracer_provider, logger_provider):
            pipeline.add_shutdown_callback(functools.partial(_shutdown_within, provider))
    pipeline.ensure_running()  # also registers the bounded flush at interpreter exit
    previous = set_pipeline(pipeline)
    if previous is not None:
        # The providers a first configure() created live on; only the old sinks go.
        pipeline.adopt_shutdown_callbacks(previous)
        previous.shutdown(timeout)
    configuration = Configuration(
        pipeline=pipeline,
        tracer_provider=tracer_provider,
        logger_provider=logger_provider,
        created_providers=created,
        otlp_endpoint=endpoint if created else None,
        otlp_protocol=_otlp_protocol("LOGS", protocol) if created and endpoint else None,
        jsonl_directory=None if mirror is None else str(mirror.path or mirror.directory),
    )
    if instrument:
        configuration.instrumented = instrument_installed()
    return configuration
