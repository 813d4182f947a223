"""OTel SDK providers for the benchmarks: discarding and counting exporters.

The SDK's `BatchLogRecordProcessor` drops records silently when its queue is
full (only a rate-limited warning). To report those drops, a counting processor
sits in front of the batch processor and a counting wrapper around the
exporter: SDK drops = records handed to the SDK - records handed to the exporter.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor, ReadableLogRecord, ReadWriteLogRecord
from opentelemetry.sdk._logs.export import (
    BatchLogRecordProcessor,
    LogRecordExporter,
    LogRecordExportResult,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from transcript_otel.otlp.export_processors import BoundedLogRecordProcessor


class CountingLogExporter(LogRecordExporter):
    """Counts what the SDK hands over; forwards to `inner`, or discards without it."""

    def __init__(self, inner: LogRecordExporter | None = None) -> None:
        self.inner = inner
        self.exported = 0
        self.failed = 0
        self._lock = threading.Lock()

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        result = LogRecordExportResult.SUCCESS if self.inner is None else self.inner.export(batch)
        with self._lock:
            if result is LogRecordExportResult.SUCCESS:
                self.exported += len(batch)
            else:
                self.failed += len(batch)
        return result

    def shutdown(self) -> None:
        inner: Any = self.inner  # the SDK's LogRecordExporter.shutdown() is unannotated
        if inner is not None:
            inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True if self.inner is None else self.inner.force_flush(timeout_millis)


class CountingProcessor(LogRecordProcessor):
    """Counts the records emitted into the provider (added before the batch processor)."""

    def __init__(self) -> None:
        self.emitted = 0

    def on_emit(self, log_record: ReadWriteLogRecord) -> None:
        self.emitted += 1

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class DiscardingSpanExporter(SpanExporter):
    def __init__(self) -> None:
        self.spans = 0
        self.events = 0
        self.dropped_events = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        for span in spans:
            self.spans += 1
            self.events += len(span.events)
            self.dropped_events += span.dropped_events
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


@dataclass
class SdkLogs:
    """A logger provider with a counting processor, a batch processor and a counting exporter."""

    provider: LoggerProvider
    counter: CountingProcessor
    exporter: CountingLogExporter

    def snapshot(self) -> tuple[int, int, int]:
        return self.counter.emitted, self.exporter.exported, self.exporter.failed

    def shutdown(self) -> None:
        self.provider.shutdown()


def sdk_logs(inner: LogRecordExporter | None = None, **batch_options: Any) -> SdkLogs:
    """`LoggerProvider` + `BatchLogRecordProcessor(exporter, **batch_options)`.

    Without `inner` the exporter discards (a no-op exporter that still counts).
    """
    provider = LoggerProvider(shutdown_on_exit=False)
    counter = CountingProcessor()
    exporter = CountingLogExporter(inner)
    provider.add_log_record_processor(counter)
    provider.add_log_record_processor(BatchLogRecordProcessor(exporter, **batch_options))
    return SdkLogs(provider, counter, exporter)


def sdk_tracer(exporter: SpanExporter | None = None) -> tuple[TracerProvider, SpanExporter]:
    """A `TracerProvider` with a batch processor (discarding exporter unless given one)."""
    provider = TracerProvider(shutdown_on_exit=False)
    span_exporter = exporter if exporter is not None else DiscardingSpanExporter()
    provider.add_span_processor(BatchSpanProcessor(span_exporter))
    return provider, span_exporter


def log_processors(provider: LoggerProvider) -> tuple[LogRecordProcessor, ...]:
    """The processors of an SDK `LoggerProvider` (the SDK has no public accessor)."""
    processors: tuple[LogRecordProcessor, ...] = tuple(
        provider._multi_log_record_processor._log_record_processors
    )
    return processors


def export_queue_of(provider: LoggerProvider) -> BoundedLogRecordProcessor:
    """The byte-bounded export queue `configure()` put in `provider` (to read its counters)."""
    for processor in log_processors(provider):
        if isinstance(processor, BoundedLogRecordProcessor):
            return processor
    raise RuntimeError("no BoundedLogRecordProcessor in this LoggerProvider (was an endpoint set?)")


class ExporterMessages(logging.Handler):
    """Counts the SDK's and exporters' own log messages instead of printing them."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.counts: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        self.counts[f"{record.name}: {record.getMessage()}"[:160]] += 1

    def __enter__(self) -> ExporterMessages:
        logger = logging.getLogger("opentelemetry")
        self._propagate = logger.propagate
        logger.addHandler(self)
        logger.propagate = False
        return self

    def __exit__(self, *exc_info: object) -> None:
        logger = logging.getLogger("opentelemetry")
        logger.removeHandler(self)
        logger.propagate = self._propagate
