"""Pass two of a replay: the run's spans and records sent again as they were sent live.

`Replayer.feed` takes the records in file order: each span starts at its first record
(its parent need not be open: the ids are all a child needs) with the ids it had, given
to the SDK by `FixedIds`, and ends as soon as its last record is in, so only the spans
with records still to come are open. Each record goes through the live sinks (a span
event and a log record) with its original time.
"""

from __future__ import annotations

import threading
from collections import Counter, deque
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from transcript_otel.exports.replay.plan import REPLAYED_EVENTS, ReplayPlan, hex_id, record_nanos
from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.records.prepared import PreparedRecord
from transcript_otel.records.run import RunInfo
from transcript_otel.records.serialize import dumps
from transcript_otel.sinks.otel_logs import OTelLogSink
from transcript_otel.sinks.span_events import SpanEventSink
from transcript_otel.version import __version__


class FixedIds(IdGenerator):
    """An SDK id generator handing out the ids the replayed spans had."""

    def __init__(self) -> None:
        self._next: deque[tuple[int, int]] = deque()
        self._lock = threading.Lock()

    def prescribe(self, trace_id: int, span_id: int) -> None:
        with self._lock:
            self._next.append((trace_id, span_id))

    def generate_span_id(self) -> int:
        with self._lock:
            return self._next[0][1]

    def generate_trace_id(self) -> int:
        with self._lock:
            return self._next[0][0]

    def is_trace_id_random(self) -> bool:
        return False  # given, not drawn: the W3C "random" flag must stay unset

    def done(self) -> None:
        with self._lock:
            self._next.popleft()


class Replayer:
    """Pass two: each span started at its first record and ended after its last, so only the
    spans with records still to come are open; the records go through the live sinks."""

    def __init__(self, plan: ReplayPlan, tracer_provider: Any, log_sink: OTelLogSink) -> None:
        self.plan = plan
        self.tracer = tracer_provider.get_tracer("transcript_otel.replay", __version__)
        self.ids: FixedIds = tracer_provider.id_generator
        self.events = SpanEventSink()
        self.logs = log_sink
        self.open: dict[str, Any] = {}
        self.done: set[str] = set()
        self.left: Counter[str] = Counter({p.span_id: p.records for p in plan.spans.values()})
        self.run = RunInfo(prompt_name=plan.prompt_name, adapter="", session_id=None, started_ns=0)
        self.sent = 0

    def _context(self, span_id: str) -> Context:
        """The span's context, starting the span if it is not started yet."""
        span = self.open.get(span_id)
        if span is None:
            plan = self.plan.spans[span_id]
            parent = Context()
            if plan.parent_span_id:  # its ids are all a child needs: the parent need not be open
                remote = plan.parent_span_id not in self.plan.spans
                ids = SpanContext(
                    int(plan.trace_id, 16),
                    int(plan.parent_span_id, 16),
                    remote,
                    TraceFlags(TraceFlags.SAMPLED),
                )
                parent = trace.set_span_in_context(NonRecordingSpan(ids))
            self.ids.prescribe(int(plan.trace_id, 16), int(span_id, 16))
            try:
                span = self.tracer.start_span(
                    plan.name or "span",
                    context=parent,
                    kind=SpanKind[plan.kind],
                    attributes=plan.attributes,
                    start_time=plan.start_ns,
                )
            finally:
                self.ids.done()
            for event in plan.events:  # the span's own (`exception`), as the live span had them
                attributes = event.get("attributes")
                span.add_event(
                    str(event.get("name")),
                    attributes=dict(attributes) if isinstance(attributes, Mapping) else None,
                    timestamp=event.get("time_unix_nano")
                    if isinstance(event.get("time_unix_nano"), int)
                    else None,
                )
            self.open[span_id] = span
        return trace.set_span_in_context(span)

    def feed(self, record: Mapping[str, Any]) -> None:
        raw_event = record.get("event")
        event = REPLAYED_EVENTS.get(raw_event) if isinstance(raw_event, str) else None
        context = record.get("context")
        if event is None or not isinstance(context, Mapping):
            return
        if event is TranscriptEvent.ENTRY and not isinstance(context.get("entry_type"), str):
            return
        placed = hex_id(context.get("span_id"), 8) and hex_id(context.get("trace_id"), 16)
        span_id = hex_id(context.get("span_id"), 8) if placed else self.plan.root
        if span_id is None or span_id not in self.plan.spans or span_id in self.done:
            return
        nanos = record_nanos(context.get("timestamp") or record.get("timestamp")) or 0
        own = {key: value for key, value in context.items() if key not in ("trace_id", "span_id")}
        detail = own.get("detail")
        prepared = PreparedRecord(
            event=event,
            run=self._run_of(own),
            timestamp_ns=nanos,
            timestamp=str(own.get("timestamp") or record.get("timestamp")),
            context=own,
            detail_json=None if detail is None else dumps(detail).data,  # the live encoder
            detail=detail,
            otel_context=self._context(span_id),
        )
        span_context = trace.get_current_span(prepared.otel_context).get_span_context()
        prepared.trace_id, prepared.span_id = span_context.trace_id, span_context.span_id
        self.events.write(prepared)
        self.logs.write(prepared)
        self.sent += 1
        self.left[span_id] -= 1
        if self.left[span_id] == 0:
            self._end(span_id)

    def _run_of(self, context: Mapping[str, Any]) -> RunInfo:
        run = self.run
        run.prompt_name = str(context.get("prompt_name") or run.prompt_name)
        run.adapter = str(context.get("adapter") or run.adapter)
        session = context.get("session_id")
        run.session_id = session if isinstance(session, str) else run.session_id
        run_id = context.get("run_id")
        if isinstance(run_id, str):
            run.run_id = run_id
        return run

    def _end(self, span_id: str) -> None:
        self._context(span_id)  # a span without records is started here
        span = self.open.pop(span_id)
        self.done.add(span_id)
        plan = self.plan.spans[span_id]
        if plan.status == "ERROR":
            span.set_status(Status(StatusCode.ERROR, plan.status_description))
        span.end(end_time=plan.end_ns)

    def end_all(self) -> None:
        for span_id in self.plan.spans:
            if span_id not in self.done:
                self._end(span_id)
