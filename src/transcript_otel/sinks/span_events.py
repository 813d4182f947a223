"""A copy of each transcript record as an event on the span that was current.

Jaeger stores no logs, so this copy has to be readable on its own: the envelope
flattened into attributes, `detail` as a JSON string, long values cut so their
JSON stays valid and the cut marked with the original length.
"""

from __future__ import annotations

import logging
import threading
from typing import Final

from opentelemetry import trace

from transcript_otel._otel_attributes import truncated_attributes
from transcript_otel._records import PreparedRecord
from transcript_otel.model import TranscriptEvent
from transcript_otel.sinks.base import Sink

DEFAULT_MAX_VALUE_LENGTH: Final = 4096
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
    """

    name = "span_events"

    def __init__(self, *, max_value_length: int = DEFAULT_MAX_VALUE_LENGTH) -> None:
        self.max_value_length = max_value_length
        self.missed = 0

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
        attributes = truncated_attributes(record, self.max_value_length)
        adding = _ENDED_WHILE_ADDING.adding
        adding.active, adding.raced = True, False
        try:
            span.add_event(record.event.value, attributes=attributes, timestamp=record.timestamp_ns)
        finally:
            adding.active = False
        if adding.raced:
            self.missed += 1  # the span ended after is_recording(): missed like the above
