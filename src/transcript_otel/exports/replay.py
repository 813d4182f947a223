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
import os
import threading
from collections import Counter, deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from transcript_otel.model import span_records as fields
from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.otlp.exporters import (
    ConfigurationError,
    endpoint_for,
    logger_provider,
    protocol_for,
    resource,
)
from transcript_otel.otlp.exporters import tracer_provider as sdk_tracer_provider
from transcript_otel.reading.sources import RecordSource
from transcript_otel.records.prepared import PreparedRecord
from transcript_otel.records.run import RunInfo
from transcript_otel.records.serialize import dumps
from transcript_otel.sinks.otel_logs import OTelLogSink
from transcript_otel.sinks.span_events import SpanEventSink
from transcript_otel.version import __version__

_EVENTS: Final = {event.value: event for event in TranscriptEvent if event is not TranscriptEvent.SPAN}
_FLUSH_TIMEOUT_S: Final = 30.0
# Records fed between waits for the exporters: well under the SDK's queue of 2,048.
_FLUSH_EVERY: Final = 512


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
    events: list[Mapping[str, Any]] = field(default_factory=list)  # its `exception` events

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
    if moment.tzinfo is None:  # the envelope's times are UTC
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1_000_000) * 1000


def _hex_id(value: Any, size: int) -> str | None:
    """A trace (16 bytes) or span (8 bytes) id as lowercase hex, or None if it is not one."""
    if not isinstance(value, str) or len(value) != size * 2:
        return None
    try:
        return value.lower() if int(value, 16) else None
    except ValueError:
        return None


def _derived_id(identity: str, what: str, size: int) -> str:
    """A stable id for a run kept without ids: the same on every replay."""
    return hashlib.sha256(f"transcript-otel replay\0{identity}\0{what}".encode()).hexdigest()[: size * 2]


class _Plan:
    """Pass one: the spans to rebuild and how many records each holds."""

    def __init__(self) -> None:
        self.spans: dict[str, _SpanPlan] = {}
        self.root: str | None = None
        # The root of each trace (its `transcript.start`'s span): a file may hold several runs.
        self.roots: dict[str, str] = {}
        self.trace_ids: set[str] = set()
        self.skipped = 0
        self.service_name: str | None = None
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
        span_id, trace_id = _hex_id(context.get("span_id"), 8), _hex_id(context.get("trace_id"), 16)
        if span_id is not None and trace_id is not None:
            plan = self.spans.setdefault(span_id, _SpanPlan(span_id, trace_id))
        else:
            plan = self.loose
        event = record.get("event")
        if not isinstance(event, str) or (
            event == TranscriptEvent.ENTRY.value and not isinstance(context.get("entry_type"), str)
        ):
            self.skipped += 1
            return
        if event == TranscriptEvent.SPAN.value:
            self._describe(plan, context)
            return
        if event not in _EVENTS:
            return
        plan.records += 1
        if plan is not self.loose:
            self.trace_ids.add(plan.trace_id)
            if event == TranscriptEvent.START.value:
                self.roots.setdefault(plan.trace_id, plan.span_id)
                self.root = self.root or plan.span_id
        nanos = _nanos(context.get("timestamp") or record.get("timestamp"))
        if nanos is not None:
            plan.seen_at(nanos)
        detail = context.get("detail")
        if context.get("entry_type") in ("tool_use", "tool_result") and isinstance(detail, Mapping):
            name = detail.get("tool_name")
            plan.tool_name = plan.tool_name or (name if isinstance(name, str) else None)

    def _describe(self, plan: _SpanPlan, context: Mapping[str, Any]) -> None:
        plan.described = True
        self.trace_ids.add(plan.trace_id)
        service = context.get(fields.SERVICE_NAME)
        if isinstance(service, str) and service and self.service_name is None:
            self.service_name = service
        events = context.get(fields.EVENTS)
        plan.events = (
            [event for event in events if isinstance(event, Mapping)] if isinstance(events, list) else []
        )
        plan.name = str(context.get(fields.NAME) or plan.name or "span")
        kind = context.get(fields.KIND)
        plan.kind = kind if isinstance(kind, str) and kind in SpanKind.__members__ else "INTERNAL"
        plan.parent_span_id = _hex_id(context.get(fields.PARENT_SPAN_ID), 8)
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
        roots = set(self.roots.values()) | {self.root}
        for plan in self.spans.values():
            if plan.described:
                continue
            if plan.span_id in roots:
                plan.name = f"invoke_agent {self.prompt_name}".strip()
            else:
                plan.name = f"execute_tool {plan.tool_name}" if plan.tool_name else "chat"
                plan.parent_span_id = self.roots.get(plan.trace_id, self.root)


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


class _Replayer:
    """Pass two: each span started at its first record and ended after its last, so only the
    spans with records still to come are open; the records go through the live sinks."""

    def __init__(self, plan: _Plan, tracer_provider: Any, log_sink: OTelLogSink) -> None:
        self.plan = plan
        self.tracer = tracer_provider.get_tracer("transcript_otel.replay", __version__)
        self.ids: _FixedIds = tracer_provider.id_generator
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
        event = _EVENTS.get(raw_event) if isinstance(raw_event, str) else None
        context = record.get("context")
        if event is None or not isinstance(context, Mapping):
            return
        if event is TranscriptEvent.ENTRY and not isinstance(context.get("entry_type"), str):
            return
        placed = _hex_id(context.get("span_id"), 8) and _hex_id(context.get("trace_id"), 16)
        span_id = _hex_id(context.get("span_id"), 8) if placed else self.plan.root
        if span_id is None or span_id not in self.plan.spans or span_id in self.done:
            return
        nanos = _nanos(context.get("timestamp") or record.get("timestamp")) or 0
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

    Raises `ReplayError` as soon as the backend refuses or misses a batch.
    """
    traces_protocol, logs_protocol = protocol_for("TRACES", protocol), protocol_for("LOGS", protocol)
    traces_url = endpoint_for("TRACES", endpoint, traces_protocol)
    logs_url = endpoint_for("LOGS", endpoint, logs_protocol)
    if traces_url is None or logs_url is None or endpoint == "":
        raise ConfigurationError("no OTLP endpoint: give --endpoint or set OTEL_EXPORTER_OTLP_ENDPOINT")
    for url, chosen in ((traces_url, traces_protocol), (logs_url, logs_protocol)):
        _check_endpoint(url, chosen, endpoint or url)
    plan = _Plan()
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
        sdk_resource, traces_url, traces_protocol, id_generator=_FixedIds(), wrap=count, max_queue_bytes=None
    )
    loggers = logger_provider(sdk_resource, logs_url, logs_protocol, wrap=count, max_queue_bytes=None)

    def flush() -> None:
        """Wait for what is queued to be exported (the queues stay short), and stop at a failure."""
        tracers.force_flush(int(_FLUSH_TIMEOUT_S * 1000))
        loggers.force_flush(int(_FLUSH_TIMEOUT_S * 1000))
        failed = next((exporter for exporter in counted if exporter.failed), None)
        if failed is not None:
            raise ReplayError(f"the backend at {endpoint or logs_url} did not take the run: {failed.error}")

    replayer = _Replayer(plan, tracers, OTelLogSink(loggers))
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
