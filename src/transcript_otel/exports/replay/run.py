"""Sending a captured run to an OTLP backend later (`transcript-otel replay`).

A run captured offline, or wanted in a second backend, is rebuilt as it was sent
live: its spans from the mirror's `transcript.span` records (name, kind, parent,
start and end, status, attributes) with their **original trace and span ids**, and
every transcript record as a log record and a span event with its original time,
through the same sinks a live run uses. Replaying twice sends the same ids, so a
backend shows one trace, not two.

Runs kept without span records (a mirror from before they existed, a weakincentives
bundle) still replay: a span an entry names but no record describes is rebuilt from
its entries (`invoke_agent` for the run's root, `execute_tool {name}` for a tool's,
else `chat`), and a run without any ids gets ids derived from its identity (the same
on every replay).

Two passes over the records, memory bounded by the number of spans: the first
(`plan`) reads the span records and counts the records of each span, the
second (`emit`) creates the spans, feeds the records, and ends each span as
soon as its last record is in (the batch exporter then sends it). This module sets up
the exporters, checks the endpoint, and stops at the first batch the backend refuses.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from transcript_otel.exports.replay.emit import FixedIds, Replayer
from transcript_otel.exports.replay.plan import ReplayPlan
from transcript_otel.otlp.exporters import (
    ConfigurationError,
    endpoint_for,
    logger_provider,
    protocol_for,
    resource,
)
from transcript_otel.otlp.exporters import tracer_provider as sdk_tracer_provider
from transcript_otel.otlp.sdk_presence import SENDING_DISABLED, sdk_disabled
from transcript_otel.reading.sources import RecordSource
from transcript_otel.sinks.otel_logs import OTelLogSink

_FLUSH_TIMEOUT_S: Final = 30.0
# Records fed between waits for the exporters: well under the SDK's queue of 2,048.
_FLUSH_EVERY: Final = 512


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """What was sent: the trace ids, spans and log records."""

    trace_ids: tuple[str, ...]
    spans: int
    records: int


class ReplayError(RuntimeError):
    """The backend did not take what was sent (refused, unreachable, or too slow)."""


class _Counted:
    """An exporter that counts the batches its backend did not take."""

    def __init__(self, exporter: Any) -> None:
        self.exporter = exporter
        self.failed = 0
        self.error: str | None = None

    def export(self, batch: Any) -> Any:
        try:
            result = self.exporter.export(batch)
        except Exception as exc:
            self.failed += 1
            self.error = f"{type(exc).__name__}: {exc}"
            raise
        if getattr(result, "name", "") != "SUCCESS":
            self.failed += 1
            self.error = self.error or f"export result {getattr(result, 'name', result)}"
        return result

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        flush = getattr(self.exporter, "force_flush", None)
        return bool(flush(timeout_millis)) if callable(flush) else True

    def shutdown(self) -> None:
        self.exporter.shutdown()


def _check_endpoint(url: str, protocol: str, given: str) -> None:
    """Refuse, before anything is read or sent, what no OTLP exporter can send to (`given`:
    the endpoint as the user gave it, for the message)."""
    parts = urlsplit(url)
    if parts.scheme in ("http", "https") and parts.hostname:
        return
    if protocol == "grpc" and not parts.scheme and ":" in url:  # host:port
        return
    example = "localhost:4317" if protocol == "grpc" else "http://localhost:4318"
    raise ConfigurationError(f"not an OTLP endpoint: {given!r} (give a URL such as {example})")


def replay(
    source: RecordSource,
    *,
    endpoint: str | None = None,
    protocol: str | None = None,
    service_name: str | None = None,
) -> ReplayResult:
    """Send the run's spans and log records to the OTLP backend at `endpoint`
    (default: the `OTEL_EXPORTER_OTLP_*` variables), with their original ids and times.

    Raises `ReplayError` as soon as the backend refuses or misses a batch, ConfigurationError
    when `OTEL_SDK_DISABLED=true` (the SDK's providers would take nothing, and send nothing).
    """
    if sdk_disabled():
        raise ConfigurationError(SENDING_DISABLED)
    traces_protocol, logs_protocol = protocol_for("TRACES", protocol), protocol_for("LOGS", protocol)
    traces_url = endpoint_for("TRACES", endpoint, traces_protocol)
    logs_url = endpoint_for("LOGS", endpoint, logs_protocol)
    if traces_url is None or logs_url is None or endpoint == "":
        raise ConfigurationError("no OTLP endpoint: give --endpoint or set OTEL_EXPORTER_OTLP_ENDPOINT")
    for url, chosen in ((traces_url, traces_protocol), (logs_url, logs_protocol)):
        _check_endpoint(url, chosen, endpoint or url)
    plan = ReplayPlan()
    plan.read(source.records())
    if not plan.identity:
        raise ValueError("the run has no records: nothing to replay")
    plan.complete()
    # As it was live: the recorded service, unless one is given (argument, OTEL_SERVICE_NAME).
    recorded = None if os.environ.get("OTEL_SERVICE_NAME") else plan.service_name
    sdk_resource = resource(service_name or recorded)
    counted: list[_Counted] = []

    def count(exporter: Any) -> _Counted:
        counted.append(_Counted(exporter))
        return counted[-1]

    # No bound on the export queues: the replay waits for them every _FLUSH_EVERY records.
    tracers = sdk_tracer_provider(
        sdk_resource, traces_url, traces_protocol, id_generator=FixedIds(), wrap=count, max_queue_bytes=None
    )
    loggers = logger_provider(sdk_resource, logs_url, logs_protocol, wrap=count, max_queue_bytes=None)

    def flush() -> None:
        """Wait for what is queued to be exported (the queues stay short), and stop at a failure."""
        tracers.force_flush(int(_FLUSH_TIMEOUT_S * 1000))
        loggers.force_flush(int(_FLUSH_TIMEOUT_S * 1000))
        failed = next((exporter for exporter in counted if exporter.failed), None)
        if failed is not None:
            raise ReplayError(f"the backend at {endpoint or logs_url} did not take the run: {failed.error}")

    replayer = Replayer(plan, tracers, OTelLogSink(loggers))
    try:
        for record in source.records():
            replayer.feed(record)
            if replayer.sent % _FLUSH_EVERY == 0:
                flush()
        replayer.end_all()
        flush()
    finally:
        tracers.shutdown()
        loggers.shutdown()
    return ReplayResult(tuple(sorted(plan.trace_ids)), len(plan.spans), replayer.sent)
