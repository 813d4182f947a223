"""An import's spans are recorded without the SDK's tracer (`sessions.recorded_spans`): the
`transcript.span` records are byte for byte those the SDK's spans gave, under the attribute
limits the environment sets, and a span behaves as the SDK's does where the span tree may touch
it (after its end, its events)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

from transcript_otel.model.span_records import span_fields
from transcript_otel.sessions.files import find_sessions
from transcript_otel.sessions.importer import import_session
from transcript_otel.sessions.recorded_spans import (
    RecordedSpan,
    RecordingTracer,
    recording_tracer,
    span_limits,
)

from session_fixtures import GEMINI, IMPORTED, SESSIONS

SCENARIOS = sorted(f"{cli.name}/{s.name}" for cli in (*IMPORTED, GEMINI) for s in cli.iterdir() if s.is_dir())
LIMITS = {
    "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT": "6",
    "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "24",
    "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT": "40",
}


def _imported(scenario: str, directory: Path) -> bytes:
    """Every session of the scenario (a fork's scenario has more than one), imported."""
    return b"".join(
        import_session(session, directory / str(index)).path.read_bytes()
        for index, session in enumerate(find_sessions([SESSIONS / scenario]))
    )


@pytest.mark.parametrize("limits", [False, True], ids=["no limits", "limits"])
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_an_import_records_the_spans_the_sdks_tracer_would(
    scenario: str, limits: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in LIMITS.items() if limits else ():
        monkeypatch.setenv(key, value)
    recorded = _imported(scenario, tmp_path / "recorded")
    # A sampler in the environment (here the default one, named) makes the import use the SDK.
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "parentbased_always_on")
    assert _imported(scenario, tmp_path / "sdk") == recorded
    assert b'"event":"transcript.span"' in recorded


def test_the_sdks_tracer_is_used_for_a_sampler_of_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    resource = Resource.create({})
    assert isinstance(recording_tracer(RandomIdGenerator(), resource, "t"), RecordingTracer)
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
    tracer = recording_tracer(RandomIdGenerator(), resource, "t")
    assert not tracer.start_span("s").is_recording()  # the SDK's decision: not sampled


def _pair(**limits: int | None) -> tuple[trace.Tracer, trace.Tracer]:
    resource = Resource.create({"service.name": "svc"})
    sdk = TracerProvider(resource=resource, span_limits=SpanLimits(**limits)).get_tracer("t")
    return sdk, RecordingTracer(RandomIdGenerator(), resource, SpanLimits(**limits))


def _fields(span: trace.Span) -> dict[str, object]:
    found = span_fields(span, 99, None)
    assert found is not None
    return {
        key: value for key, value in found.items() if key not in ("start_time_unix_nano", "parent_span_id")
    }


def test_a_recorded_span_changes_as_the_sdks_does_and_not_after_its_end(
    caplog: pytest.LogCaptureFixture,
) -> None:
    spans = []
    for tracer in _pair(max_span_attributes=3, max_span_attribute_length=5, max_events=2):
        root = tracer.start_span("root", attributes={"a": "abcdefgh", "list": ["x", "yyyyyyy"]})
        child = tracer.start_span(
            "child", context=trace.set_span_in_context(root), kind=trace.SpanKind.CLIENT
        )
        child.set_attribute("n", 1)
        child.set_attributes({"b": True, "c": 2.5, "d": "dropped: over the count"})
        child.update_name("renamed")
        for number in range(3):
            child.record_exception(ValueError(f"bad {number}"), timestamp=number)
        child.end(end_time=7)
        with caplog.at_level(logging.WARNING):
            child.set_attribute("late", 1)
            child.update_name("late")
            child.end(end_time=8)
        spans.append((root, child))
    (sdk_root, sdk_child), (root, child) = spans
    assert isinstance(child, RecordedSpan)
    assert _fields(root) == _fields(sdk_root)
    recorded, expected = _fields(child), _fields(sdk_child)
    for events in (recorded.pop("events"), expected.pop("events")):  # tracebacks differ in line
        assert isinstance(events, list)
        for event in events:
            event["attributes"].pop("exception.stacktrace")
    assert recorded == expected
    assert span_fields(child, 99, None)["parent_span_id"] == format(root.get_span_context().span_id, "016x")  # type: ignore[index]
    assert child.end_time == 7
    assert not child.is_recording()
    assert [r.getMessage() for r in caplog.records if r.name.endswith("recorded_spans")] == [
        "Setting attribute on ended span.",
        "Calling update_name() on ended span.",
        "Calling end() on ended span.",
    ]


def test_a_span_started_as_current_is_current_until_it_ends() -> None:
    _, tracer = _pair()
    with tracer.start_as_current_span("outer") as outer:
        assert trace.get_current_span() is outer
        inner = tracer.start_span("inner")
        assert inner.is_recording()
    assert not outer.is_recording()
    assert span_fields(inner, 1, None)["parent_span_id"] == format(outer.get_span_context().span_id, "016x")  # type: ignore[index]


_PLAIN = st.one_of(
    st.text(max_size=8),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.lists(st.text(max_size=3), min_size=1, max_size=3),
    st.lists(st.integers(), min_size=1, max_size=3).map(tuple),
)
_OTHER = st.one_of(
    st.none(),
    st.binary(max_size=3),
    st.lists(
        st.one_of(st.text(max_size=3), st.integers(), st.booleans(), st.floats(allow_nan=False)), max_size=3
    ),
    st.builds(object),
)
_KEYS = st.sampled_from(["a", "b", "c", "d", "", "e"])
# Mostly plain values (kept without `BoundedAttributes` until one that is not comes).
_SETS = st.one_of(
    st.lists(st.tuples(_KEYS, _PLAIN), max_size=8),
    st.lists(st.tuples(_KEYS, st.one_of(_PLAIN, _OTHER)), max_size=8),
)


@settings(max_examples=300, deadline=None)
@example(first=[("a", 1), ("b", 2)], then=[("a", 3)], count=128, length=None)  # moves to the end
@given(
    first=_SETS,
    then=_SETS,
    count=st.sampled_from([128, 0, 2, 4]),
    length=st.sampled_from([None, 3]),
)
def test_attributes_are_kept_as_the_sdks_span_keeps_them(
    first: list[tuple[str, object]], then: list[tuple[str, object]], count: int, length: int | None
) -> None:
    """Whatever is set, in whatever order, under whatever limits (plain values are kept
    without `BoundedAttributes`, the rest by it): the record is the SDK span's."""
    records = []
    for tracer in _pair(max_span_attributes=count, max_span_attribute_length=length):
        span = tracer.start_span("s", attributes=dict(first))  # type: ignore[arg-type]
        for key, value in then:
            span.set_attribute(key, value)  # type: ignore[arg-type]
        span.set_attributes(dict(then))  # type: ignore[arg-type]
        records.append(json.dumps(_fields(span), default=repr))  # in order
    assert records[0] == records[1]


LIMIT_VARIABLES = (
    "OTEL_SPAN_LINK_COUNT_LIMIT",
    "OTEL_LINK_ATTRIBUTE_COUNT_LIMIT",
    "OTEL_ATTRIBUTE_COUNT_LIMIT",
    "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT",
    "OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT",
    "OTEL_SPAN_EVENT_COUNT_LIMIT",
    "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT",
    "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT",
)


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.sampled_from([None, "", " 7 ", "0", "3", "200", "x", "-1"]), min_size=8, max_size=8),
    max_events=st.sampled_from([None, 0, 5]),
)
@example(values=[None] * 8, max_events=None)
def test_our_span_limits_are_the_sdks_under_any_environment(
    values: list[str | None], max_events: int | None
) -> None:
    """Without the SDK (a core install), `span_limits()` reads the environment as `SpanLimits()`
    does: the same limits, or the same error for a bad value."""
    with pytest.MonkeyPatch.context() as patch:
        for variable, value in zip(LIMIT_VARIABLES, values, strict=True):
            if value is None:
                patch.delenv(variable, raising=False)
            else:
                patch.setenv(variable, value)
        assert _limits_or_error(lambda: span_limits(max_events)._asdict()) == _limits_or_error(
            lambda: {name: getattr(SpanLimits(max_events=max_events), name) for name in SPAN_LIMIT_NAMES}
        )


SPAN_LIMIT_NAMES = (
    "max_events",
    "max_span_attributes",
    "max_event_attributes",
    "max_attribute_length",
    "max_span_attribute_length",
)


def _limits_or_error(read: Callable[[], dict[str, int | None]]) -> dict[str, int | None] | str:
    try:
        return read()
    except ValueError as exc:
        return str(exc)
