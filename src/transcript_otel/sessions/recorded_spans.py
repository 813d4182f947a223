"""Spans an import only records: they become `transcript.span` records, never exported.

An import's spans end in the mirror (`span_fields` reads them as they end); a backend gets
them later, from the records (`replay`, `import --endpoint`). The SDK's `Tracer` does more
than that needs for each of a Codex session's hundred spans a megabyte (a sampler, span
processors, locks, its own metrics): a large share of the span tree's cost. A `RecordedSpan` keeps
what a record holds, with the SDK's own attribute rules (`BoundedAttributes`, which the API
has, and the limits the environment sets, read as the SDK's `SpanLimits` reads them), so the
records are the ones the SDK's spans gave. None of it needs the SDK: a core install (no
`[otlp]`) imports and watches sessions with the same records. With a sampler set in the
environment the SDK's tracer is used, its decisions its own; without the SDK every span is
recorded (`sampler_needs_the_sdk` says so).
"""

from __future__ import annotations

import logging
import os
import random
import time
import traceback
from collections import deque
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, NamedTuple, Protocol

from opentelemetry import trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.context import Context
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.util import types

from transcript_otel.otlp.sdk_presence import sdk_installed

if TYPE_CHECKING:
    from opentelemetry.util._decorator import _AgnosticContextManager

logger = logging.getLogger(__name__)
_SAMPLER_VARIABLE = "OTEL_TRACES_SAMPLER"
# Values every SDK we allow keeps as they are where no length limit applies (a sequence of one
# of them: as a tuple): set without `BoundedAttributes`' cleaning and lock, a large share of a
# span's cost. Anything else, or a span at its count limit, is left to `BoundedAttributes`.
_PLAIN_VALUES: Final = frozenset({str, bool, int, float})
_SEQUENCES: Final = frozenset({list, tuple})


# The SDK's defaults (`opentelemetry.sdk.trace`: 128 of each, no length limit), and what its
# `SpanLimits` reads from the environment instead.
_DEFAULT_COUNT_LIMIT: Final = 128
_UNSET: Final = ""  # a variable set to nothing: no limit


class IdGenerator(Protocol):
    """Where span and trace ids come from (what the SDK's `IdGenerator` gives)."""

    def generate_span_id(self) -> int: ...

    def generate_trace_id(self) -> int: ...


class RandomIds:
    """Random ids, as the SDK's `RandomIdGenerator` makes them (never the invalid 0)."""

    def generate_span_id(self) -> int:
        span_id = random.getrandbits(64)
        while span_id == trace.INVALID_SPAN_ID:
            span_id = random.getrandbits(64)
        return span_id

    def generate_trace_id(self) -> int:
        trace_id = random.getrandbits(128)
        while trace_id == trace.INVALID_TRACE_ID:
            trace_id = random.getrandbits(128)
        return trace_id


class Resource(Protocol):
    """What a span's record reads of its resource: its attributes (`service.name`). The SDK's
    `Resource` is one; so is a `PlainResource`."""

    @property
    def attributes(self) -> Mapping[str, types.AttributeValue]: ...


class PlainResource(NamedTuple):
    """A resource that is its attributes only."""

    attributes: Mapping[str, types.AttributeValue]


class Limits(Protocol):
    """The limits a `RecordedSpan` keeps to: the SDK's `SpanLimits`, or ours (`span_limits()`)."""

    @property
    def max_events(self) -> int | None: ...
    @property
    def max_span_attributes(self) -> int | None: ...
    @property
    def max_event_attributes(self) -> int | None: ...
    @property
    def max_attribute_length(self) -> int | None: ...
    @property
    def max_span_attribute_length(self) -> int | None: ...


class SpanLimits(NamedTuple):
    """The span limits the SDK's `SpanLimits()` gives under the same environment (None: no limit)."""

    max_events: int | None
    max_span_attributes: int | None
    max_event_attributes: int | None
    max_attribute_length: int | None
    max_span_attribute_length: int | None


def span_limits(max_events: int | None = None) -> SpanLimits:
    """The limits of `SpanLimits(max_events=max_events)` of the SDK: each `OTEL_*_LIMIT` variable
    when set (empty: no limit), else the general one, else the default; read in the SDK's order,
    links' too, so that a bad value is the SDK's ValueError."""
    if max_events is not None and max_events < 0:
        raise ValueError(f"OTEL_SPAN_EVENT_COUNT_LIMIT must be a non-negative integer but got {max_events}")
    events = _limit("OTEL_SPAN_EVENT_COUNT_LIMIT", _DEFAULT_COUNT_LIMIT) if max_events is None else max_events
    _limit("OTEL_SPAN_LINK_COUNT_LIMIT", None)  # (no links here)
    general = _limit("OTEL_ATTRIBUTE_COUNT_LIMIT", None)
    counts = _DEFAULT_COUNT_LIMIT if general is None else general
    span_attributes = _limit("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", counts)
    event_attributes = _limit("OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT", counts)
    _limit("OTEL_LINK_ATTRIBUTE_COUNT_LIMIT", None)
    length = _limit("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", None)
    return SpanLimits(
        max_events=events,
        max_span_attributes=span_attributes,
        max_event_attributes=event_attributes,
        max_attribute_length=length,
        max_span_attribute_length=_limit("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", length),
    )


def _limit(variable: str, default: int | None) -> int | None:
    """As the SDK's `SpanLimits._from_env_if_absent` reads one variable."""
    if variable not in os.environ:
        return default
    text = os.environ.get(variable, "").strip().lower()
    if text == _UNSET:
        return None
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{variable} must be a non-negative integer but got {text}") from None
    if value < 0:
        raise ValueError(f"{variable} must be a non-negative integer but got {value}")
    return value


def sampler_needs_the_sdk() -> bool:
    """The environment names a sampler that only the SDK has: without it, every span is recorded."""
    return bool(os.environ.get(_SAMPLER_VARIABLE)) and not sdk_installed()


def recording_tracer(ids: IdGenerator, resource: Resource, name: str) -> trace.Tracer:
    """A tracer of `RecordedSpan`s under `ids`; the SDK's when the environment sets a sampler
    (and the SDK is installed: else every span is recorded)."""
    if os.environ.get(_SAMPLER_VARIABLE) and sdk_installed():
        from opentelemetry.sdk.resources import Resource as SdkResource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.id_generator import IdGenerator as SdkIdGenerator

        class SdkIds(SdkIdGenerator):
            def generate_span_id(self) -> int:
                return ids.generate_span_id()

            def generate_trace_id(self) -> int:
                return ids.generate_trace_id()

        sdk_resource = SdkResource.create(dict(resource.attributes))
        return TracerProvider(id_generator=SdkIds(), resource=sdk_resource).get_tracer(name)
    return RecordingTracer(ids, resource, span_limits())


class SpanEvent(NamedTuple):
    """A span's event, as the SDK's `Event` gives it to a record (`span_fields`)."""

    name: str
    attributes: types.Attributes
    timestamp: int


class RecordingTracer(trace.Tracer):
    """Starts `RecordedSpan`s: every span sampled, as the SDK's default sampler decides for an
    import (a root with no parent, then its children)."""

    def __init__(self, ids: IdGenerator, resource: Resource, limits: Limits) -> None:
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
        limits: Limits,
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
        self.events: deque[SpanEvent] = deque(maxlen=limits.max_events)

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
        if self._ended("Calling add_event()"):
            return
        bounded = BoundedAttributes(
            self._limits.max_event_attributes,
            attributes,
            immutable=True,
            max_value_len=self._limits.max_attribute_length,
        )
        self.events.append(SpanEvent(name, bounded, time.time_ns() if timestamp is None else timestamp))

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
