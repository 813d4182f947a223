"""OTel SDK providers and OTLP exporters, as `configure()` builds them.

Needs the `[otlp]` extra. Endpoints and protocols follow the standard variables:
an explicit argument, else `OTEL_EXPORTER_OTLP_{TRACES,LOGS}_ENDPOINT` (used as
given), else `OTEL_EXPORTER_OTLP_ENDPOINT` (plus `/v1/traces` or `/v1/logs` over
HTTP); `OTEL_EXPORTER_OTLP_[{TRACES,LOGS}_]PROTOCOL` is `http/protobuf` (default)
or `grpc`. Headers, certificates and compression are left to the exporters,
which read their own `OTEL_EXPORTER_OTLP_*` variables. `OTEL_TRACES_EXPORTER` and
`OTEL_LOGS_EXPORTER` choose among `otlp` (the default; sent only where an endpoint is
set), `console` and `none`, as the SDK's own configuration reads them.
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

from transcript_otel.otlp.export_sizes import DEFAULT_MAX_QUEUE_BYTES

if TYPE_CHECKING:
    from transcript_otel.otlp.export_queue import BoundedExportQueue

PROTOCOLS: Final = ("grpc", "http/protobuf")
DEFAULT_SERVICE_NAME: Final = "transcript-otel-agent"
# Exports give up after this long, so a dead backend cannot hold shutdown for 30 s.
EXPORT_TIMEOUT_S: Final = 5.0
SPAN_EVENT_LIMIT: Final = 1024

Signal = Literal["TRACES", "LOGS", "METRICS"]
_HTTP_PATHS: Final[dict[Signal, str]] = {"TRACES": "/v1/traces", "LOGS": "/v1/logs", "METRICS": "/v1/metrics"}
_logger = logging.getLogger(__name__)
_Processor = TypeVar("_Processor", bound="BoundedExportQueue")
ExportedSignal = Literal["TRACES", "LOGS"]
EXPORTER_NAMES: Final = ("otlp", "console", "none")
# The SDK's console exporter of each signal, behind the SDK's own batch processor (the console
# exporters take only what it hands them); the module, the processor, the exporter's names.
_CONSOLE_EXPORTERS: Final[dict[ExportedSignal, tuple[str, str, tuple[str, ...]]]] = {
    "TRACES": ("opentelemetry.sdk.trace.export", "BatchSpanProcessor", ("ConsoleSpanExporter",)),
    # Renamed (1.39 has only the old name, deprecated since).
    "LOGS": (
        "opentelemetry.sdk._logs.export",
        "BatchLogRecordProcessor",
        ("ConsoleLogRecordExporter", "ConsoleLogExporter"),
    ),
}


class ConfigurationError(ValueError):
    """Settings transcript-otel cannot honour."""


def protocol_for(signal: Signal, protocol: str | None = None) -> str:
    """`protocol`, else the signal's or the general variable, else `http/protobuf`. A bad
    argument is a ConfigurationError; a variable naming a protocol we cannot send (e.g.
    `http/json`) warns and falls back to `http/protobuf`, which OTLP/HTTP receivers accept,
    rather than switch capture off."""
    if protocol is not None:
        if protocol not in PROTOCOLS:
            raise ConfigurationError(
                f"OTLP protocol {protocol!r} is not supported; use one of {', '.join(PROTOCOLS)}"
            )
        return protocol
    for variable in (f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        value = os.environ.get(variable, "").strip()
        if value:
            return _supported_protocol(variable, value)
    return "http/protobuf"


@functools.cache
def _supported_protocol(variable: str, value: str) -> str:
    """`value` if we can send it, else `http/protobuf` (warned once per variable and value)."""
    if value in PROTOCOLS:
        return value
    _logger.warning(
        "transcript-otel: %s=%r is not supported (use one of %s); sending http/protobuf",
        variable,
        value,
        ", ".join(PROTOCOLS),
    )
    return "http/protobuf"


def exporters_named(signal: Signal) -> frozenset[str]:
    """The exporters `OTEL_{signal}_EXPORTER` names (comma-separated): `otlp` and `console`;
    `none` adds none. Unset: `otlp`, but for metrics none (see `metrics_wanted`). An unknown
    name warns once and is skipped."""
    variable = f"OTEL_{signal}_EXPORTER"
    value = os.environ.get(variable, "").strip().lower()
    if not value:
        return frozenset() if signal == "METRICS" else frozenset({"otlp"})
    names = frozenset(name.strip() for name in value.split(",") if name.strip())
    unknown = names.difference(EXPORTER_NAMES)
    if unknown:
        _warn_unknown_exporters(variable, tuple(sorted(unknown)))
    return names.intersection({"otlp", "console"})


@functools.cache
def _warn_unknown_exporters(variable: str, names: tuple[str, ...]) -> None:
    _logger.warning(
        "transcript-otel: %s names %s, which transcript-otel does not provide (use %s); skipped",
        variable,
        ", ".join(names),
        ", ".join(EXPORTER_NAMES),
    )


def otlp_url(signal: Signal, endpoint: str | None = None, protocol: str | None = None) -> str | None:
    """Where `signal` goes over OTLP: `endpoint_for()`, unless `OTEL_{signal}_EXPORTER` leaves
    `otlp` out."""
    return endpoint_for(signal, endpoint, protocol) if "otlp" in exporters_named(signal) else None


def console_wanted(signal: Signal) -> bool:
    """Whether `OTEL_{signal}_EXPORTER` asks for the SDK's console exporter (stdout)."""
    return "console" in exporters_named(signal)


def endpoint_for(signal: Signal, endpoint: str | None = None, protocol: str | None = None) -> str | None:
    """The URL the `signal` exporter sends to, or None when nothing is configured."""
    chosen_protocol = protocol_for(signal, protocol)
    if endpoint is None:
        specific = os.environ.get(f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT")
        if specific:
            return specific
        endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or None
        if endpoint is None:
            return None
    if chosen_protocol == "grpc":
        return endpoint
    return endpoint.rstrip("/") + _HTTP_PATHS[signal]


def _timeout_option(signal: Signal) -> dict[str, float]:
    """Our 5 s export timeout, unless `OTEL_EXPORTER_OTLP_[{signal}_]TIMEOUT` is set: the
    exporter then reads it itself, in its own unit (seconds, for the Python exporters),
    so the variable has one meaning."""
    if os.environ.get(f"OTEL_EXPORTER_OTLP_{signal}_TIMEOUT") or os.environ.get("OTEL_EXPORTER_OTLP_TIMEOUT"):
        return {}
    return {"timeout": EXPORT_TIMEOUT_S}


_EXPORTER_CLASSES: Final[dict[tuple[Signal, str], tuple[str, str]]] = {
    ("TRACES", "grpc"): ("opentelemetry.exporter.otlp.proto.grpc.trace_exporter", "OTLPSpanExporter"),
    ("TRACES", "http/protobuf"): (
        "opentelemetry.exporter.otlp.proto.http.trace_exporter",
        "OTLPSpanExporter",
    ),
    ("LOGS", "grpc"): ("opentelemetry.exporter.otlp.proto.grpc._log_exporter", "OTLPLogExporter"),
    ("LOGS", "http/protobuf"): ("opentelemetry.exporter.otlp.proto.http._log_exporter", "OTLPLogExporter"),
    ("METRICS", "grpc"): ("opentelemetry.exporter.otlp.proto.grpc.metric_exporter", "OTLPMetricExporter"),
    ("METRICS", "http/protobuf"): (
        "opentelemetry.exporter.otlp.proto.http.metric_exporter",
        "OTLPMetricExporter",
    ),
}


def otlp_exporter(signal: Signal, url: str, protocol: str) -> Any:
    """The OTLP exporter of `signal` over `protocol`, sending to `url`."""
    module_name, class_name = _EXPORTER_CLASSES[signal, protocol]
    try:
        exporter_class = getattr(importlib.import_module(module_name), class_name)
    except ImportError as exc:
        # `[otlp]` has the HTTP exporter only; grpcio comes with `[otlp-grpc]`.
        extra = "otlp-grpc" if protocol == "grpc" else "otlp"
        raise ConfigurationError(
            f"the OTLP {protocol} exporter is missing: pip install 'transcript-otel[{extra}]'"
        ) from exc
    options: dict[str, Any] = {"endpoint": url, **_timeout_option(signal)}
    if protocol == "grpc" and url.startswith("http://"):
        options["insecure"] = True  # otherwise OTEL_EXPORTER_OTLP_INSECURE and the scheme decide
    return exporter_class(**options)


def _require_sdk() -> None:
    """Raise a clear ConfigurationError when the `[otlp]` extra is not installed."""
    try:
        import opentelemetry.sdk  # noqa: F401
    except ImportError as exc:
        raise ConfigurationError("the OTel SDK is missing: pip install 'transcript-otel[otlp]'") from exc


def resource(service_name: str | None) -> Any:
    """The SDK resource: `service_name`, else `OTEL_SERVICE_NAME`, else our default."""
    _require_sdk()
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource

    attributes = {}
    if service_name or not os.environ.get("OTEL_SERVICE_NAME"):
        attributes[SERVICE_NAME] = service_name or DEFAULT_SERVICE_NAME
    return Resource.create(attributes)


def tracer_provider(
    sdk_resource: Any,
    url: str | None,
    protocol: str,
    *,
    console: bool = False,
    id_generator: Any = None,
    wrap: Callable[[Any], Any] | None = None,
    max_queue_bytes: int | None = DEFAULT_MAX_QUEUE_BYTES,
) -> Any:
    """An SDK TracerProvider, exporting over OTLP when `url` is set (ids exist either way);
    `console`: also to stdout; `id_generator`: where span and trace ids come from (`replay`
    gives the original ones); `wrap`: a wrapper around the exporter (`replay` counts what the
    backend refused); `max_queue_bytes`: the export queue's bound, None for none."""
    _require_sdk()
    from opentelemetry.sdk.trace import SpanLimits, TracerProvider

    from transcript_otel.otlp.export_processors import BoundedSpanProcessor

    # A run's span events are its readable transcript in Jaeger: keep more than the
    # SDK's 128 unless OTEL_SPAN_EVENT_COUNT_LIMIT says otherwise.
    limits = SpanLimits(
        max_events=None if os.environ.get("OTEL_SPAN_EVENT_COUNT_LIMIT") else SPAN_EVENT_LIMIT
    )
    provider = TracerProvider(
        resource=sdk_resource, shutdown_on_exit=False, span_limits=limits, id_generator=id_generator
    )
    if url is not None:
        # Bounded in bytes like the log records: a span holds the span events of its entries.
        processor = _export_processor(BoundedSpanProcessor, "TRACES", url, protocol, wrap, max_queue_bytes)
        provider.add_span_processor(processor)
    if console:
        provider.add_span_processor(_console_processor("TRACES"))
    return provider


def logger_provider(
    sdk_resource: Any,
    url: str | None,
    protocol: str,
    *,
    console: bool = False,
    wrap: Callable[[Any], Any] | None = None,
    max_queue_bytes: int | None = DEFAULT_MAX_QUEUE_BYTES,
) -> Any:
    """An SDK LoggerProvider, exporting over OTLP when `url` is set (`console`, `wrap`: as
    above; `max_queue_bytes`: the export queue's bound, None for none)."""
    _require_sdk()
    from opentelemetry.sdk._logs import LoggerProvider

    from transcript_otel.otlp.export_processors import BoundedLogRecordProcessor

    provider = LoggerProvider(resource=sdk_resource, shutdown_on_exit=False)
    if url is not None:
        # In batches small enough for collectors to take (`DEFAULT_BATCH_SIZE`); the queue is
        # bounded in bytes: a backend that is down costs at most `max_queue_bytes`.
        processor = _export_processor(BoundedLogRecordProcessor, "LOGS", url, protocol, wrap, max_queue_bytes)
        provider.add_log_record_processor(processor)
    if console:
        provider.add_log_record_processor(_console_processor("LOGS"))
    return provider


def _console_processor(signal: ExportedSignal) -> Any:
    """The SDK's batch processor feeding its console exporter of `signal` (stdout)."""
    module_name, processor_name, exporter_names = _CONSOLE_EXPORTERS[signal]
    module = importlib.import_module(module_name)
    exporter_class = next(getattr(module, name) for name in exporter_names if hasattr(module, name))
    return getattr(module, processor_name)(exporter_class())


def _export_processor(
    processor_class: type[_Processor],
    signal: Signal,
    url: str,
    protocol: str,
    wrap: Callable[[Any], Any] | None,
    max_queue_bytes: int | None,
) -> _Processor:
    """A `processor_class` feeding the OTLP exporter of `signal`, through `wrap` when given."""
    exporter = otlp_exporter(signal, url, protocol)
    return processor_class(
        exporter if wrap is None else wrap(exporter),
        max_queue_bytes=max_queue_bytes,
        report_losses=wrap is None,  # a wrapping caller (replay) reports failures itself
    )


def metrics_wanted() -> bool:
    """Metrics only when asked for (`OTEL_METRICS_EXPORTER=otlp` or `console`): trace and log
    backends (Jaeger, Tempo, Loki) refuse them, so unset means none, unlike the SDK's default."""
    return bool(exporters_named("METRICS"))


def meter_provider(sdk_resource: Any, url: str | None, protocol: str, *, console: bool = False) -> Any:
    """An SDK MeterProvider exporting over OTLP (when `url` is set) and to stdout (`console`)
    every `OTEL_METRIC_EXPORT_INTERVAL` (60 s)."""
    _require_sdk()
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, PeriodicExportingMetricReader

    exporters = [otlp_exporter("METRICS", url, protocol)] if url is not None else []
    if console:
        exporters.append(ConsoleMetricExporter())
    readers = [PeriodicExportingMetricReader(exporter) for exporter in exporters]
    return MeterProvider(metric_readers=readers, resource=sdk_resource, shutdown_on_exit=False)
