"""The record every sink writes, and the records of a run's life: start, stop and errors.

Built on the background writer only (an entry's record: `entry_record.py`): timestamp
formatting, validation and JSON encoding never happen on the agent's thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanContext

from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.records.queued import EntryPlacement, QueuedItem
from transcript_otel.records.redaction import Redactor
from transcript_otel.records.run import RunInfo
from transcript_otel.records.serialize import iso_timestamp, safe_text


@dataclass(slots=True)
class PreparedRecord:
    """One structured-log record, ready for every sink.

    `context` is the specification's context object in key order; for entries its
    `detail` value is a pre-encoded `orjson.Fragment` so the JSON is built once.
    `detail_is_json`: `detail` encoded to exactly `detail_json` (nothing converted or
    redacted in the JSON), so a sink may read it instead of parsing the JSON again;
    `redactor` is what the content went through, for what a sink makes of `detail`
    (the agent may have changed it since, though it must not).
    """

    event: TranscriptEvent
    run: RunInfo
    timestamp_ns: int
    timestamp: str
    context: dict[str, Any]
    detail_json: bytes | None = None
    detail: Any = None
    detail_is_json: bool = False
    redactor: Redactor | None = None
    otel_context: Context | None = None
    problems: list[str] = field(default_factory=list)
    trace_id: int = 0
    span_id: int = 0
    # Filled by the first OTel sink that needs them (`sinks/record_attributes.record_attributes`),
    # shared after.
    otel_attributes: dict[str, str | int | float | bool] | None = None

    @property
    def level(self) -> str:
        return record_level(self.event)

    @property
    def message(self) -> str:
        return record_message(self.event, self.context)


def record_level(event: TranscriptEvent) -> str:
    """The log level of a record of `event`: errors are warnings, the rest debug."""
    return "WARNING" if event is TranscriptEvent.ERROR else "DEBUG"


def record_message(event: TranscriptEvent, context: dict[str, Any]) -> str:
    """The one-line message of a record of `event` with this `context`."""
    if event is TranscriptEvent.ENTRY:
        return f"transcript entry: {context['entry_type']}"
    if event is TranscriptEvent.ERROR:
        return f"transcript error: {context.get('error', '')}"
    return str(event.value)


# The last span context whose ids were written out, and them: a span's records come together.
_last_ids: tuple[SpanContext | None, str, str] = (None, "", "")


def with_trace(record: PreparedRecord) -> PreparedRecord:
    """`record` with the trace and span ids of its OTel context, if that holds a valid span."""
    global _last_ids
    # An empty Context (no span was current when the agent emitted) is falsy: nothing to look up.
    if record.otel_context:
        span_context = trace.get_current_span(record.otel_context).get_span_context()
        last = _last_ids
        if span_context is not last[0]:
            if not span_context.is_valid:
                return record
            last = _last_ids = (
                span_context,
                format(span_context.trace_id, "032x"),
                format(span_context.span_id, "016x"),
            )
        record.trace_id = span_context.trace_id
        record.span_id = span_context.span_id
        record.context["trace_id"] = last[1]
        record.context["span_id"] = last[2]
    return record


def _run_fields(run: RunInfo) -> dict[str, Any]:
    fields: dict[str, Any] = {"prompt_name": run.prompt_name, "adapter": run.adapter}
    if run.session_id is not None:
        fields["session_id"] = run.session_id
    return fields


def prepare_lifecycle(item: QueuedItem, redactor: Redactor | None = None) -> PreparedRecord:
    """Build a `transcript.start`, `.stop` or `.error` record (`detail` holds its fields);
    the caller's text fields (an error's message: often an exception's) pass `redactor`."""
    event, run, _, _, timestamp_ns, extra, _, otel_context = item
    if isinstance(otel_context, EntryPlacement):  # only entries are placed; nothing else should be
        otel_context = None
    context = _run_fields(run)
    context["run_id"] = run.run_id
    if event is TranscriptEvent.STOP:
        context.update(
            total_entries=sum(run.entries_by_type.values()),
            entries_by_source=dict(run.entries_by_source),
            entries_by_type=dict(run.entries_by_type),
            dropped_entries=run.dropped,
        )
    if isinstance(extra, dict):
        fields = {key: value for key, value in extra.items() if key not in context}  # never the run's
        text_keys = [key for key, value in fields.items() if isinstance(value, str)]
        texts = [fields[key] for key in text_keys]
        for key, text in zip(text_keys, texts if redactor is None else redactor.texts(texts), strict=True):
            fields[key] = safe_text(text)[0]
        context.update(fields)
    record = PreparedRecord(
        event=event,
        run=run,
        timestamp_ns=timestamp_ns,
        timestamp=iso_timestamp(timestamp_ns),
        context=context,
        otel_context=otel_context,
    )
    return with_trace(record)


def error_record(
    run: RunInfo, timestamp_ns: int, error: str, otel_context: Context | None = None, **extra: Any
) -> PreparedRecord:
    """A `transcript.error` record (WARNING) about `run`."""
    item: QueuedItem = (
        TranscriptEvent.ERROR,
        run,
        None,
        None,
        timestamp_ns,
        {"error": error, **extra},
        None,
        otel_context,
    )
    return prepare_lifecycle(item)
