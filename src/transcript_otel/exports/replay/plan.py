"""Pass one of a replay: the spans to rebuild, read from the run's records.

`ReplayPlan.read` takes each span from its `transcript.span` record (name, kind,
parent, start and end, status, attributes, its own events) with its original ids, and
counts the records each span holds, so pass two can end a span as soon as its last
record is in. `ReplayPlan.complete` fills in what records did not say: a span an entry
names but no record describes is named from its entries (`invoke_agent` for a run's
root, `execute_tool {name}` for a tool's, else `chat`), records without ids go to the
run's root, and a run without any ids gets ids derived from its identity (the same on
every replay). Memory is bounded by the number of spans, not of records.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from opentelemetry.trace import SpanKind

from transcript_otel.model import span_records as fields
from transcript_otel.model.entries import TranscriptEvent

# The events replayed as log records and span events (span records describe spans instead).
REPLAYED_EVENTS: Final = {
    event.value: event for event in TranscriptEvent if event is not TranscriptEvent.SPAN
}


@dataclass(slots=True)
class SpanPlan:
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


def record_nanos(timestamp: Any) -> int | None:
    """A record's ISO timestamp as epoch nanoseconds (microsecond precision), or None."""
    if not isinstance(timestamp, str):
        return None
    try:
        moment = datetime.fromisoformat(timestamp)
    except ValueError:
        return None
    if moment.tzinfo is None:  # the envelope's times are UTC
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1_000_000) * 1000


def hex_id(value: Any, size: int) -> str | None:
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


class ReplayPlan:
    """Pass one: the spans to rebuild and how many records each holds."""

    def __init__(self) -> None:
        self.spans: dict[str, SpanPlan] = {}
        self.root: str | None = None
        # The root of each trace (its `transcript.start`'s span): a file may hold several runs.
        self.roots: dict[str, str] = {}
        self.trace_ids: set[str] = set()
        self.skipped = 0
        self.service_name: str | None = None
        self.identity = ""
        self.prompt_name = ""
        # Records without ids (a weakincentives bundle): they belong to the run's root.
        self.loose = SpanPlan("", "")

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
        span_id, trace_id = hex_id(context.get("span_id"), 8), hex_id(context.get("trace_id"), 16)
        if span_id is not None and trace_id is not None:
            plan = self.spans.setdefault(span_id, SpanPlan(span_id, trace_id))
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
        if event not in REPLAYED_EVENTS:
            return
        plan.records += 1
        if plan is not self.loose:
            self.trace_ids.add(plan.trace_id)
            if event == TranscriptEvent.START.value:
                self.roots.setdefault(plan.trace_id, plan.span_id)
                self.root = self.root or plan.span_id
        nanos = record_nanos(context.get("timestamp") or record.get("timestamp"))
        if nanos is not None:
            plan.seen_at(nanos)
        detail = context.get("detail")
        if context.get("entry_type") in ("tool_use", "tool_result") and isinstance(detail, Mapping):
            name = detail.get("tool_name")
            plan.tool_name = plan.tool_name or (name if isinstance(name, str) else None)

    def _describe(self, plan: SpanPlan, context: Mapping[str, Any]) -> None:
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
        plan.parent_span_id = hex_id(context.get(fields.PARENT_SPAN_ID), 8)
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
            self.spans[self.root] = SpanPlan(self.root, trace_id)
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
