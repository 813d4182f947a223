"""`transcript.span` records: the spans of a run, kept in the JSONL mirror for `replay`.

The mirror holds every entry with its trace and span ids, but not the spans
themselves; when an instrumented run ends a span, one record keeps what a backend
would have received: name, kind, parent, start and end times (Unix nanoseconds),
status and attributes. Written to the mirror only: the spans reach OTLP backends
as spans already.
"""

from __future__ import annotations

from typing import Any, Final

from opentelemetry.trace import Span

NAME: Final = "name"
KIND: Final = "kind"
PARENT_SPAN_ID: Final = "parent_span_id"
START: Final = "start_time_unix_nano"
END: Final = "end_time_unix_nano"
STATUS: Final = "status"  # "ERROR" or "UNSET"
STATUS_DESCRIPTION: Final = "status_description"
ATTRIBUTES: Final = "attributes"
SERVICE_NAME: Final = "service_name"  # the resource's `service.name`, for a replay to look the same
EVENTS: Final = "events"  # the span's own events (`exception`); transcript events are records already
_KEPT_EVENTS: Final = frozenset({"exception"})


def span_fields(span: Span, end_time_ns: int, error_type: str | None) -> dict[str, Any] | None:
    """The record of an SDK span about to end at `end_time_ns`; None for a span the
    API alone made (no SDK: nothing was recorded, there is nothing to replay)."""
    start = getattr(span, "start_time", None)
    name = getattr(span, "name", None)
    if not isinstance(start, int) or not isinstance(name, str):
        return None
    parent_id = getattr(getattr(span, "parent", None), "span_id", 0)
    kind = getattr(span, "kind", None)
    attributes = getattr(span, "attributes", None) or {}
    fields: dict[str, Any] = {
        NAME: name,
        KIND: getattr(kind, "name", "INTERNAL"),
        PARENT_SPAN_ID: format(parent_id, "016x") if isinstance(parent_id, int) and parent_id else None,
        START: start,
        END: end_time_ns,
        STATUS: "UNSET" if error_type is None else "ERROR",
        ATTRIBUTES: {
            key: list(value) if isinstance(value, tuple) else value for key, value in attributes.items()
        },
    }
    if error_type is not None:
        fields[STATUS_DESCRIPTION] = error_type
    service = getattr(getattr(getattr(span, "resource", None), "attributes", None), "get", None)
    if callable(service) and isinstance(service("service.name"), str):
        fields[SERVICE_NAME] = service("service.name")
    events = [
        {"name": event.name, "time_unix_nano": event.timestamp, "attributes": dict(event.attributes or {})}
        for event in getattr(span, "events", ())
        if getattr(event, "name", None) in _KEPT_EVENTS
    ]
    if events:
        fields[EVENTS] = events
    return fields
