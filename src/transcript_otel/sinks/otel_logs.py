"""OTel log records through the OTel *API*, emitted from the writer thread.

Each record keeps the timestamp and the context (hence trace_id/span_id)
captured when the agent called `emit()`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

from opentelemetry._logs import LoggerProvider, LogRecord, SeverityNumber, get_logger
from opentelemetry.context import Context

from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.otel.export_drops import ExportQueueFull, take_drop
from transcript_otel.records.prepared import PreparedRecord
from transcript_otel.sinks.base import Sink
from transcript_otel.sinks.record_attributes import record_attributes, truncated_attributes
from transcript_otel.version import __version__

SCOPE_NAME = "transcript_otel"


class OTelLogSink(Sink):
    """One OTel log record per transcript record, event name `transcript.*`."""

    name = "otel_logs"

    def __init__(
        self, logger_provider: LoggerProvider | None = None, *, max_value_length: int | None = None
    ) -> None:
        self._provider = logger_provider
        # Longest attribute value (`transcript.detail` above all), cut JSON-preserving; None: whole.
        self.max_value_length = max_value_length
        self._logger = get_logger(SCOPE_NAME, __version__, logger_provider=logger_provider)
        # The provider flush in progress, if any: one at a time however often we are asked.
        self._flushing: threading.Thread | None = None
        self._flushing_lock = threading.Lock()

    def write(self, record: PreparedRecord) -> None:
        if record.event is TranscriptEvent.SPAN:
            return  # the span itself reaches the backend; its record is for the mirror
        warning = record.level == "WARNING"
        severity = SeverityNumber.WARN if warning else SeverityNumber.DEBUG
        if not self._enabled(record, severity):
            return  # no SDK behind the API (or filtered): skip building attributes
        take_drop()  # a mark left by another record emitted on this thread is not this one's
        self._logger.emit(
            LogRecord(
                timestamp=record.timestamp_ns,
                observed_timestamp=time.time_ns(),
                context=record.otel_context,
                severity_text=record.level,
                severity_number=severity,
                body=record.message,
                attributes=record_attributes(record)
                if self.max_value_length is None
                else truncated_attributes(record, self.max_value_length),
                event_name=record.event.value,
            )
        )
        # The export queue drops on this thread, in this call (the SDK's synchronous
        # multi-processor; with its concurrent one, drops are counted there but not seen here).
        reason = take_drop()
        if reason is not None:
            raise ExportQueueFull(reason)

    def emit_event(
        self, name: str, attributes: Mapping[str, Any], context: Context, timestamp_ns: int
    ) -> None:
        """One OTel event: an INFO log record named `name`, no body, `attributes` as given.

        Not a transcript record (`gen_ai.client.inference.operation.details`, from the span
        wiring): the SDK >= 1.45 keeps nested lists and maps in log attributes, so
        structured messages go as they are, cut by the caller.
        """
        if not self._event_enabled(name, context):
            return  # no SDK behind the API (or filtered): skip the record
        take_drop()  # a mark left by another record emitted on this thread is not this one's
        self._logger.emit(
            LogRecord(
                timestamp=timestamp_ns,
                observed_timestamp=time.time_ns(),
                context=context,
                severity_text="INFO",
                severity_number=SeverityNumber.INFO,
                body=None,
                attributes=attributes,
                event_name=name,
            )
        )
        # A full export queue drops the event here; it is a copy of what the spans carry,
        # so the mark is cleared (the next transcript record must not take the blame) and
        # nothing is reported.
        take_drop()

    def _enabled(self, record: PreparedRecord, severity: SeverityNumber) -> bool:
        enabled = getattr(self._logger, "enabled", None)  # Logger.enabled() is API >= 1.45
        if enabled is None:
            return True
        return bool(
            enabled(context=record.otel_context, severity_number=severity, event_name=record.event.value)
        )

    def _event_enabled(self, name: str, context: Context) -> bool:
        enabled = getattr(self._logger, "enabled", None)  # as in `_enabled`
        if enabled is None:
            return True
        return bool(enabled(context=context, severity_number=SeverityNumber.INFO, event_name=name))

    def force_flush(self, timeout_s: float) -> None:
        """Ask the provider to export what it holds; return after `timeout_s` at most.

        The SDK's batch processors ignore the flush timeout and export everything
        synchronously: against a slow backend (every request running into the
        exporter's 5 s timeout) one flush takes 5 s per queued batch. This runs on
        the pipeline's writer thread, which also feeds the JSONL mirror, so the
        provider's flush runs on a helper thread and is only waited for up to
        `timeout_s`; a flush still running is waited for again rather than doubled.
        """
        provider = self._provider
        if provider is None:
            from opentelemetry._logs import get_logger_provider

            provider = get_logger_provider()
        force_flush = getattr(provider, "force_flush", None)
        if not callable(force_flush):
            return
        with self._flushing_lock:
            flushing = self._flushing
            if flushing is None or not flushing.is_alive():
                flushing = threading.Thread(
                    target=force_flush,
                    args=(int(timeout_s * 1000),),
                    name="transcript-otel-log-flush",
                    daemon=True,
                )
                self._flushing = flushing
                flushing.start()
        flushing.join(max(0.0, timeout_s))

    def shutdown(self, timeout_s: float) -> None:
        self.force_flush(timeout_s)
