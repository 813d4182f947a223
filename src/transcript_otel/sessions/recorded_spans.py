"""Spans an import only records: they become `transcript.span` records, never exported.

An import's spans end in the mirror (`span_fields` reads them as they end); a backend gets
them later, from the records (`replay`, `import --endpoint`). The SDK's `Tracer` does more
than that needs for each of a Codex session's hundred spans a megabyte (a sampler, span
processors, locks, its own metrics): a fifth of the span tree's cost. A `RecordedSpan` keeps
what a record holds, with the SDK's own attribute rules (`BoundedAttributes` and the
`SpanLimits` the environment sets), so the records are the ones the SDK's spans gave. With a
sampler set in the environment the SDK's tracer is used: its decisions are its own.
"""

from __future__ import annotations

import logging
import os
import time
import traceback
from collections import deque
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from opentelemetry import trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.context import Context
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.util import types

if TYPE_CHECKING:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import Event, SpanLimits
    from opentelemetry.sdk.trace.id_generator import IdGenerator
    from opentelemetry.util._decorator import _AgnosticContextManager

logger = logging.getLogger(__name__)
_SAMPLER_VARIABLE = "OTEL_TRACES_SAMPLER"
# Values every SDK we allow keeps as they are where no length limit applies (a sequence of one
# of them: as a tuple): set without `BoundedAttributes`' cleaning and lock, a fifth of a span's
# cost. Anything else, or a span at its count limit, is left to `BoundedAttributes`.
_PLAIN_VALUES: Final = frozenset({str, bool, int, float})
_SEQUENCES: Final = frozenset({list, tuple})


def recording_tracer(ids: IdGenerator, resource: Resource, name: str) -> trace.Tracer:
    """A tracer of `RecordedSpan`s under `ids`; the SDK's when the environment sets a sampler."""
    from opentelemetry.sdk.trace import SpanLimits, TracerProvider

    if os.environ.get(_SAMPLER_VARIABLE):
        return TracerProvider(id_generator=ids, resource=resource).get_tracer(name)
    return RecordingTracer(ids, resource, SpanLimits())


class RecordingTracer(trace.Tracer):
    """Starts `RecordedSpan`s: every span sampled, as the SDK's default sampler decides for an
    import (a root with no parent, then its children)."""

    def __init__(self, ids: IdGenerator, resource: Resource, limits: SpanLimits) -> None:
        self._ids = ids
        self._resource = resource
        self._limits = limits

    def start_span(
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: types.Attributes = None,
        links: Sequence[Link] | None = (),
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> RecordedSpan:
        parent = trace.get_current_span(context).get_span_context()
        if not parent.is_valid:
            trace_id = self._ids.generate_trace_id()
            parent_context: SpanContext | None = None
        else:
            trace_id = parent.trace_id
            parent_context = parent
        span_context = SpanContext(
            trace_id,
            self._ids.generate_span_id(),
            is_remote=False,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
        return RecordedSpan(
            name,
            span_context,
            parent_context,
            kind,
            attributes,
            time.time_ns() if start_time is None else start_time,
            self._resource,
            self._limits,
        )

    def start_as_current_span(
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: types.Attributes = None,
        links: Sequence[Link] | None = (),
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
        end_on_exit: bool = True,
    ) -> _AgnosticContextManager[trace.Span]:
        span = self.start_span(name, context, kind, attributes, links, start_time)
        return trace.use_span(
            span,
            end_on_exit=end_on_exit,
            record_exception=record_exception,
            set_status_on_exception=set_status_on_exception,
        )


class RecordedSpan(trace.Span):
    """A span kept for its record: what `span_fields` reads, under the SDK's attribute limits;
    changes after its end are ignored, with the SDK's warning."""

    def __init__(
        self,
        name: str,
        context: SpanContext,
        parent: SpanContext | None,
        kind: SpanKind,
        attributes: types.Attributes,
        start_time: int,
        resource: Resource,
        limits: SpanLimits,
    ) -> None:
        self.name = name
        self._context = context
        self.parent = parent
        self.kind = kind
        self.start_time = start_time
        self.end_time: int | None = None
        self.resource = resource
        self.status = Status(StatusCode.UNSET)
        self._limits = limits
        self.attributes: dict[str, types.AttributeValue] | BoundedAttributes = {}
        if limits.max_span_attribute_length is not None:
            self._bounded()
        if attributes:
            self.set_attributes(attributes)
        # The SDK keeps the newest events past the limit (None: no limit).
        self.events: deque[Event] = deque(maxlen=limits.max_events)

    def get_span_context(self) -> SpanContext:
        return self._context

    def is_recording(self) -> bool:
        return self.end_time is None

    def _ended(self, what: str) -> bool:
        if self.end_time is None:
            return False
        logger.warning("%s on ended span.", what)
        return True

    def set_attributes(self, attributes: Mapping[str, types.AttributeValue]) -> None:
        if not self._ended("Setting attribute"):
            for key, value in attributes.items():
                self._set(key, value)

    def set_attribute(self, key: str, value: types.AttributeValue) -> None:
        if not self._ended("Setting attribute"):
            self._set(key, value)

    def _set(self, key: str, value: types.AttributeValue) -> None:
        """As `BoundedAttributes` sets it: a key set again moves to the end."""
        held = self.attributes
        if type(held) is dict:
            kind = type(value)
            plain = kind in _PLAIN_VALUES or (kind in _SEQUENCES and _plain_sequence(value))
            limit = self._limits.max_span_attributes
            if plain and type(key) is str and key and (key in held or limit is None or len(held) < limit):
                held.pop(key, None)
                held[key] = tuple(value) if kind in _SEQUENCES else value  # type: ignore[arg-type]
                return
            held = self._bounded()  # cleans what is not plain, drops the oldest past the limit
        held[key] = value

    def _bounded(self) -> BoundedAttributes:
        """The attributes held by the SDK's `BoundedAttributes` from now on."""
        held = self.attributes
        if isinstance(held, BoundedAttributes):
            return held
        limits = self._limits
        self.attributes = bounded = BoundedAttributes(
            limits.max_span_attributes, held, immutable=False, max_value_len=limits.max_span_attribute_length
        )
        return bounded

    def update_name(self, name: str) -> None:
        if not self._ended("Calling update_name()"):
            self.name = name

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        if self._ended("Calling set_status()") or self.status.status_code is StatusCode.OK:
            return
        self.status = status if isinstance(status, Status) else Status(status, description)

    def add_event(self, name: str, attributes: types.Attributes = None, timestamp: int | None = None) -> None:
        from opentelemetry.sdk.trace import Event

        if self._ended("Calling add_event()"):
            return
        bounded = BoundedAttributes(
            self._limits.max_event_attributes,
            attributes,
            immutable=True,
            max_value_len=self._limits.max_attribute_length,
        )
        self.events.append(Event(name, bounded, time.time_ns() if timestamp is None else timestamp))

    def record_exception(
        self,
        exception: BaseException,
        attributes: types.Attributes = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        found: dict[str, Any] = {
            "exception.type": type(exception).__qualname__,
            "exception.message": str(exception),
            "exception.stacktrace": "".join(traceback.format_exception(exception)),
            "exception.escaped": str(escaped),
        }
        found.update(attributes or {})
        self.add_event("exception", found, timestamp)

    def end(self, end_time: int | None = None) -> None:
        if not self._ended("Calling end()"):
            self.end_time = time.time_ns() if end_time is None else end_time


def _plain_sequence(value: Any) -> bool:
    """A non-empty list or tuple of one plain type (`_PLAIN_VALUES`)."""
    if not value:
        return False
    kind = type(value[0])
    return kind in _PLAIN_VALUES and all(type(item) is kind for item in value)
