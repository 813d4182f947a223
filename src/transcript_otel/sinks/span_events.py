"""A copy of each transcript record as an event on the span that was current.

Jaeger stores no logs, so this copy has to be readable on its own: the envelope
flattened into attributes, `detail` as a JSON string, long values cut so their
JSON stays valid and the cut marked with the original length.

A span holds its events until it ends, and a run's root span lives as long as the
run: past `max_span_bytes` of event values on one span (as Python holds them), its
further events keep a preview of `OVER_BUDGET_VALUE_LENGTH` characters of each long
value (JSON as `{"truncated_json_preview": ...}`: a structure-keeping cut of every value
would cost the writer too much), so a long run of large entries holds a
few MiB per span, not 1024 events of 16 KB values.
"""

from __future__ import annotations

import logging
import sys
import threading
import weakref
from typing import Final

from opentelemetry import trace

from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.otel import attributes as attr
from transcript_otel.records.prepared import PreparedRecord
from transcript_otel.sinks.base import Sink
from transcript_otel.sinks.record_attributes import Scalar, truncated_attributes

DEFAULT_MAX_VALUE_LENGTH: Final = 4096
DEFAULT_MAX_SPAN_BYTES: Final = 4 * 1024 * 1024
# Enough for a message's first lines or a tool call's name and arguments.
OVER_BUDGET_VALUE_LENGTH: Final = 256
# An event's memory besides its detail and raw: the SDK's event and attribute dict, the
# envelope's short values (its keys are shared with every other record's).
_EVENT_BYTES: Final = 1024
# What the SDK logs (as a WARNING, on stderr when logging is not configured) when an
# event is added to a span that has ended.
_ENDED_SPAN_MESSAGE: Final = "Tried calling %s on an ended span."


class _EndedWhileAdding(logging.Filter):
    """Drops the SDK's ended-span warning caused by our own `add_event`, and says so.

    The agent may end a span between our `is_recording()` check and `add_event()`
    (it never waits for the writer). That record is then missed on the span, as
    when the span had ended earlier, and is counted the same way instead of
    printing an SDK warning into the agent's stderr. Only warnings raised inside
    our call on this thread are dropped; the SDK's others pass through.
    """

    def __init__(self) -> None:
        super().__init__()
        self.adding = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != _ENDED_SPAN_MESSAGE or not getattr(self.adding, "active", False):
            return True
        self.adding.raced = True
        return False


_ENDED_WHILE_ADDING = _EndedWhileAdding()
logging.getLogger("opentelemetry.sdk.trace").addFilter(_ENDED_WHILE_ADDING)


class SpanEventSink(Sink):
    """Adds the record as a span event while its span is still recording.

    A span that ended before the writer reached the record cannot take events any
    more; such records are counted in `missed` (the log record and the JSONL mirror
    still hold them). Call `TranscriptPipeline.flush()` before ending a span you own
    to make sure its events land.

    Each span's events take up to `max_span_bytes` with values of `max_value_length`;
    past that, long values become previews of `OVER_BUDGET_VALUE_LENGTH` characters
    (see the module's docstring).
    """

    name = "span_events"

    def __init__(
        self,
        *,
        max_value_length: int = DEFAULT_MAX_VALUE_LENGTH,
        max_span_bytes: int = DEFAULT_MAX_SPAN_BYTES,
    ) -> None:
        self.max_value_length = max_value_length
        self.max_span_bytes = max_span_bytes
        self.missed = 0
        self.cut_for_budget = 0  # events added past their span's budget (long values as previews)
        # Bytes of events added to each span still alive (the SDK's spans are weakly referenceable).
        self._span_bytes: weakref.WeakKeyDictionary[trace.Span, int] = weakref.WeakKeyDictionary()

    def write(self, record: PreparedRecord) -> None:
        if record.event is TranscriptEvent.SPAN:
            return  # the span itself reaches the backend; its record is for the mirror
        if record.otel_context is None or not record.span_id:
            return
        span = trace.get_current_span(record.otel_context)
        if not span.is_recording():
            if span.get_span_context().trace_flags.sampled:
                self.missed += 1
            return
        attributes = self._attributes_within_budget(record, span)
        adding = _ENDED_WHILE_ADDING.adding
        adding.active, adding.raced = True, False
        try:
            span.add_event(record.event.value, attributes=attributes, timestamp=record.timestamp_ns)
        finally:
            adding.active = False
        if adding.raced:
            self.missed += 1  # the span ended after is_recording(): missed like the above

    def _attributes_within_budget(self, record: PreparedRecord, span: trace.Span) -> dict[str, Scalar]:
        try:
            held = self._span_bytes.get(span, 0)
        except TypeError:  # a span type that cannot be weakly referenced: no budget to keep
            return truncated_attributes(record, self.max_value_length)
        if held < self.max_span_bytes or self.max_value_length <= OVER_BUDGET_VALUE_LENGTH:
            attributes = truncated_attributes(record, self.max_value_length)
        else:
            attributes = truncated_attributes(record, OVER_BUDGET_VALUE_LENGTH, preview=True)
            self.cut_for_budget += 1
        detail, raw = attributes.get(attr.DETAIL, ""), attributes.get(attr.RAW, "")
        self._span_bytes[span] = held + _EVENT_BYTES + sys.getsizeof(detail) + sys.getsizeof(raw)
        return attributes
