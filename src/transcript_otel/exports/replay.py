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
reads the span records and counts the records of each span, the second creates
the spans (parents first), feeds the records, and ends each span as soon as its
last record is in (the batch exporter then sends it).
"""

from __future__ import annotations

import hashlib
import threading
from collections import Counter, deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

import orjson
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from transcript_otel import _span_records as fields
from transcript_otel._records import PreparedRecord
from transcript_otel.exporters import (
    ConfigurationError,
    endpoint_for,
    logger_provider,
    protocol_for,
    resource,
)
from transcript_otel.exporters import tracer_provider as sdk_tracer_provider
from transcript_otel.model import TranscriptEvent
from transcript_otel.reading.sources import RecordSource
from transcript_otel.run import RunInfo
from transcript_otel.sinks.otel_logs import OTelLogSink
from transcript_otel.sinks.span_events import SpanEventSink
from transcript_otel.version import __version__

_EVENTS: Final = {event.value: event for event in TranscriptEvent if event is not TranscriptEvent.SPAN}
_FLUSH_TIMEOUT_S: Final = 30.0


@dataclass(slots=True)
class _SpanPlan:
    """One span to rebuild: from its record, or from the records that name it."""

    span_id: str
    trace_id: str
    name: str | None = None
    kind: str = "INTERNAL"
    parent_span_id: str | None = None
    start_ns: int | None = None
    end_ns: int | None = None
    status: str = "UNSET"
    status_description: str | None = None
    attributes: dict[str, Any] = field(default_factory=dict)
    records: int = 0
    tool_name: str | None = None
    described: bool = False  # a `transcript.span` record told us all of it

    def seen_at(self, nanos: int) -> None:
        if self.described:
            return
        self.start_ns = nanos if self.start_ns is None else min(self.start_ns, nanos)
        self.end_ns = nanos if self.end_ns is None else max(self.end_ns, nanos)


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """What was sent: the trace ids, spans and log records."""

    trace_ids: tuple[str, ...]
    spans: int
    records: int


class _FixedIds(IdGenerator):
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


def _nanos(timestamp: Any) -> int | None:
    if not isinstance(timestamp, str):
        return None
    try:
        moment = datetime.fromisoformat(timestamp)
    except ValueError:
        return None
    return int(moment.timestamp() * 1_000_000) * 1000


def _derived_id(identity: str, what: str, size: int) -> str:
    """A stable id for a run kept without ids: the same on every replay."""
    return hashlib.sha256(f"transcript-otel replay\0{identity}\0{what}".encode()).hexdigest()[: size * 2]


class _Plan:
    """Pass one: the spans to rebuild and how many records each holds."""

    def __init__(self) -> None:
        self.spans: dict[str, _SpanPlan] = {}
        self.root: str | None = None
        self.trace_ids: set[str] = set()
        self.identity = ""
        self.prompt_name = ""
        # Records without ids (a weakincentives bundle): they belong to the run's root.
        self.loose = _SpanPlan("", "")

    def read(self, records: Iterator[dict[str, Any]]) -> None:
        for record in records:
            context = record.get("context")
            if not isinstance(context, Mapping):
                continue
            if not self.identity:
                self.prompt_name = str(context.get("prompt_name") or "")
                self.identity = str(context.get("run_id") or context.get("session_id") or self.prompt_name)
            self._add(record, context)

    def _add(self, record: Mapping[str, Any], context: Mapping[str, Any]) -> None:
        span_id, trace_id = context.get("span_id"), context.get("trace_id")
        if isinstance(span_id, str) and isinstance(trace_id, str):
            self.trace_ids.add(trace_id)
            plan = self.spans.setdefault(span_id, _SpanPlan(span_id, trace_id))
        else:
            plan = self.loose
        event = record.get("event")
        if event == TranscriptEvent.SPAN.value:
            self._describe(plan, context)
            return
        if event not in _EVENTS:
            return
        plan.records += 1
        if event == TranscriptEvent.START.value and self.root is None and plan is not self.loose:
            self.root = plan.span_id
        nanos = _nanos(context.get("timestamp") or record.get("timestamp"))
        if nanos is not None:
            plan.seen_at(nanos)
        detail = context.get("detail")
        if context.get("entry_type") in ("tool_use", "tool_result") and isinstance(detail, Mapping):
            name = detail.get("tool_name")
            plan.tool_name = plan.tool_name or (name if isinstance(name, str) else None)

    @staticmethod
    def _describe(plan: _SpanPlan, context: Mapping[str, Any]) -> None:
        plan.described = True
        plan.name = str(context.get(fields.NAME) or plan.name or "span")
        plan.kind = str(context.get(fields.KIND) or "INTERNAL")
        parent = context.get(fields.PARENT_SPAN_ID)
        plan.parent_span_id = parent if isinstance(parent, str) else None
        start, end = context.get(fields.START), context.get(fields.END)
        plan.start_ns = start if isinstance(start, int) else plan.start_ns
        plan.end_ns = end if isinstance(end, int) else plan.end_ns
        plan.status = str(context.get(fields.STATUS) or "UNSET")
        description = context.get(fields.STATUS_DESCRIPTION)
        plan.status_description = description if isinstance(description, str) else None
        attributes = context.get(fields.ATTRIBUTES)
        plan.attributes = dict(attributes) if isinstance(attributes, Mapping) else {}

    def complete(self) -> None:
        """Name the spans no record described, under the run's root; ids for a run without any."""
        if not self.spans:
            trace_id = _derived_id(self.identity, "trace", 16)
            self.root = _derived_id(self.identity, "root", 8)
            self.spans[self.root] = _SpanPlan(self.root, trace_id)
            self.trace_ids.add(trace_id)
        if self.root is None:
            self.root = next(iter(self.spans))
        root = self.spans[self.root]
        root.records += self.loose.records
        for nanos in (self.loose.start_ns, self.loose.end_ns):
            if nanos is not None:
                root.seen_at(nanos)
        for plan in self.spans.values():
            if plan.described:
                continue
            if plan.span_id == self.root:
                plan.name = f"invoke_agent {self.prompt_name}".strip()
            else:
                plan.name = f"execute_tool {plan.tool_name}" if plan.tool_name else "chat"
                plan.parent_span_id = self.root if self.root in self.spans else None

    def ordered(self) -> list[_SpanPlan]:
        """Parents before their children (a parent outside the run counts as remote)."""
        done: set[str] = set()
        ordered: list[_SpanPlan] = []

        def visit(plan: _SpanPlan, depth: int) -> None:
            if plan.span_id in done:
                return
            parent = self.spans.get(plan.parent_span_id or "")
            if parent is not None and depth < len(self.spans):
                visit(parent, depth + 1)
            done.add(plan.span_id)
            ordered.append(plan)

        for plan in sorted(self.spans.values(), key=lambda p: (p.start_ns or 0, p.span_id)):
            visit(plan, 0)
        return ordered


class _Replayer:
    """Pass two: the spans, the records through the live sinks, each span ended after its last record."""

    def __init__(self, plan: _Plan, tracer_provider: Any, log_sink: OTelLogSink) -> None:
        self.plan = plan
        self.tracer = tracer_provider.get_tracer("transcript_otel.replay", __version__)
        self.ids: _FixedIds = tracer_provider.id_generator
        self.events = SpanEventSink()
        self.logs = log_sink
        self.open: dict[str, Any] = {}
        self.contexts: dict[str, Context] = {}
        self.left: Counter[str] = Counter({p.span_id: p.records for p in plan.spans.values()})
        self.run = RunInfo(prompt_name=plan.prompt_name, adapter="", session_id=None, started_ns=0)
        self.sent = 0

    def start_spans(self) -> None:
        for plan in self.plan.ordered():
            parent_context = self.contexts.get(plan.parent_span_id or "")
            if parent_context is None and plan.parent_span_id:  # the program's span, not in the mirror
                remote = SpanContext(
                    int(plan.trace_id, 16), int(plan.parent_span_id, 16), True, TraceFlags(TraceFlags.SAMPLED)
                )
                parent_context = trace.set_span_in_context(NonRecordingSpan(remote))
            self.ids.prescribe(int(plan.trace_id, 16), int(plan.span_id, 16))
            try:
                span = self.tracer.start_span(
                    plan.name or "span",
                    context=parent_context or Context(),
                    kind=SpanKind[plan.kind] if plan.kind in SpanKind.__members__ else SpanKind.INTERNAL,
                    attributes=plan.attributes,
                    start_time=plan.start_ns,
                )
            finally:
                self.ids.done()
            self.open[plan.span_id] = span
            self.contexts[plan.span_id] = trace.set_span_in_context(span)
            if plan.records == 0:
                self._end(plan.span_id)

    def feed(self, record: Mapping[str, Any]) -> None:
        event = _EVENTS.get(str(record.get("event")))
        context = record.get("context")
        if event is None or not isinstance(context, Mapping):
            return
        placed = isinstance(context.get("span_id"), str) and isinstance(context.get("trace_id"), str)
        span_id = context["span_id"] if placed else self.plan.root
        nanos = _nanos(context.get("timestamp") or record.get("timestamp")) or 0
        own = {key: value for key, value in context.items() if key not in ("trace_id", "span_id")}
        detail = own.get("detail")
        prepared = PreparedRecord(
            event=event,
            run=self._run_of(own),
            timestamp_ns=nanos,
            timestamp=str(own.get("timestamp") or record.get("timestamp")),
            context=own,
            detail_json=None,
            detail=detail,
            otel_context=self.contexts.get(str(span_id)),
        )
        span_context = trace.get_current_span(prepared.otel_context).get_span_context()
        prepared.trace_id, prepared.span_id = span_context.trace_id, span_context.span_id
        if detail is not None:  # the live pipeline's encoder: the same attribute text
            prepared.detail_json = orjson.dumps(detail, default=repr)
        self.events.write(prepared)
        self.logs.write(prepared)
        self.sent += 1
        if span_id is not None:
            self.left[str(span_id)] -= 1
            if self.left[str(span_id)] == 0:
                self._end(str(span_id))

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
        span = self.open.pop(span_id, None)
        if span is None:
            return
        plan = self.plan.spans[span_id]
        if plan.status == "ERROR":
            span.set_status(Status(StatusCode.ERROR, plan.status_description))
        span.end(end_time=plan.end_ns)

    def end_all(self) -> None:
        for span_id in list(self.open):
            self._end(span_id)


def replay(
    source: RecordSource,
    *,
    endpoint: str | None = None,
    protocol: str | None = None,
    service_name: str | None = None,
) -> ReplayResult:
    """Send the run's spans and log records to the OTLP backend at `endpoint`
    (default: the `OTEL_EXPORTER_OTLP_*` variables), with their original ids and times."""
    traces_protocol, logs_protocol = protocol_for("TRACES", protocol), protocol_for("LOGS", protocol)
    traces_url = endpoint_for("TRACES", endpoint, traces_protocol)
    logs_url = endpoint_for("LOGS", endpoint, logs_protocol)
    if traces_url is None or logs_url is None:
        raise ConfigurationError("no OTLP endpoint: give --endpoint or set OTEL_EXPORTER_OTLP_ENDPOINT")
    plan = _Plan()
    plan.read(source.records())
    if not plan.identity:
        raise ValueError("the run has no records: nothing to replay")
    plan.complete()
    sdk_resource = resource(service_name)
    tracers = sdk_tracer_provider(sdk_resource, traces_url, traces_protocol, id_generator=_FixedIds())
    loggers = logger_provider(sdk_resource, logs_url, logs_protocol)
    try:
        replayer = _Replayer(plan, tracers, OTelLogSink(loggers))
        replayer.start_spans()
        for record in source.records():
            replayer.feed(record)
        replayer.end_all()
    finally:
        tracers.force_flush(int(_FLUSH_TIMEOUT_S * 1000))
        loggers.force_flush(int(_FLUSH_TIMEOUT_S * 1000))
        tracers.shutdown()
        loggers.shutdown()
    return ReplayResult(tuple(sorted(plan.trace_ids)), len(plan.spans), replayer.sent)
