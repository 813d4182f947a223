"""The SDK processors `configure()` puts in its providers: log records and spans through a
`BoundedExportQueue` each, in place of the SDK's batch processors.

What each makes of a loss:

* a log record that does not fit in the queue: its emitting thread is told
  (`otel/export_drops.py`), and the OTel log sink turns that into a `transcript.error` record;
  the records of a batch the backend did not take are reported to their runs'
  pipelines, which write one `transcript.error` per run and batch
  (`failed_export_records`: how many) while the run is still held by its emitter and the
  pipeline runs;
* a span that does not fit: counted in the drop metric and named in one warning (its
  entries are in the log records and the JSONL mirror).

Needs the `[otlp]` extra (the SDK), like the exporters they feed.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from opentelemetry.context import Context
from opentelemetry.sdk._logs import LogRecordProcessor
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from transcript_otel.otel.attributes import FAILED_EXPORT_RECORDS, RUN_ID
from transcript_otel.otel.export_drops import QUEUE_FULL, mark_dropped, report_failed_export
from transcript_otel.otel.metrics import count_dropped
from transcript_otel.otlp.export_queue import BoundedExportQueue
from transcript_otel.otlp.export_sizes import record_bytes, span_bytes

_logger = logging.getLogger(__name__)

# Where, for the drop metric: lost between the queue and the backend.
EXPORT: Final = "otlp_export"
SPAN_EXPORT: Final = "otlp_span_export"


class BoundedLogRecordProcessor(BoundedExportQueue, LogRecordProcessor):
    """Batches log records to `exporter` on one thread; the queue is bounded in bytes."""

    _ITEMS = "log records"
    _ITEM = "log record"
    _THREAD_NAME = "transcript-otel-log-export"
    _WHERE = EXPORT

    def on_emit(self, log_record: Any) -> None:
        self._put(log_record, record_bytes(log_record))

    def _dropped_one(self, reason: str) -> None:
        # The OTel log sink sees this mark after its emit, and reports the entry.
        mark_dropped(reason)

    def _report_failed(self, items: list[Any], failure: str) -> None:
        lost: dict[str, int] = {}
        for item in items:
            attributes = getattr(getattr(item, "log_record", item), "attributes", None) or {}
            run_id = attributes.get(RUN_ID)
            # A report of lost records is not reported when it is lost in turn: no end otherwise.
            if isinstance(run_id, str) and FAILED_EXPORT_RECORDS not in attributes:
                lost[run_id] = lost.get(run_id, 0) + 1
        if lost:
            report_failed_export(lost, failure)


class BoundedSpanProcessor(BoundedExportQueue, SpanProcessor):
    """Batches finished spans to `exporter` on one thread; the queue is bounded in bytes."""

    _ITEMS = "spans"
    _ITEM = "span"
    _THREAD_NAME = "transcript-otel-span-export"
    _WHERE = SPAN_EXPORT

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if context is None or not context.trace_flags.sampled:
            return  # recorded but not sampled (RECORD_ONLY): not for export, like the SDK's processor
        self._put(span, span_bytes(span))

    def _dropped_one(self, reason: str) -> None:
        count_dropped(1, SPAN_EXPORT)
        # A span ended after the shutdown (a late thread at exit) is counted, not announced.
        if reason == QUEUE_FULL and not self._warned_drop:
            self._warned_drop = True
            _logger.warning(
                "transcript-otel: spans are being dropped: %s (counted in the metric "
                "transcript_otel.records.dropped; their entries are in the log records and the JSONL mirror)",
                reason,
            )
