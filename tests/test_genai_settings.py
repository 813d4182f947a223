"""Settings for GenAI content beside the transcript, and the operation-details event hook.

Where content goes (spans, the `gen_ai.client.inference.operation.details` event, both or
neither), how long it may be and whether OpenInference values go along: from arguments,
variables and the backend profile. The event goes through the pipeline's OTel log sinks
(a real SDK `LoggerProvider` with an in-memory exporter, the `otel` fixture).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from transcript_otel import TranscriptPipeline
from transcript_otel.capture.defaults import BACKEND_PROFILES, backend_limits, pipeline_from_environment
from transcript_otel.records.content import ContentPolicy, GenAiContent, genai_content_from, policy_from
from transcript_otel.sinks import JsonlMirror, OTelLogSink

from conftest import OTelHarness

CAPTURE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
EVENT = "gen_ai.client.inference.operation.details"
MESSAGES = [{"role": "user", "parts": [{"type": "text", "content": "Fix billing.py"}]}]
SPANS, EVENTS, BOTH, NEITHER = (True, False), (False, True), (True, True), (False, False)


@pytest.fixture
def pipelines() -> Iterator[Callable[..., TranscriptPipeline]]:
    """`pipeline_from_environment(...)` without the mirror; each one shut down after the test."""
    created: list[TranscriptPipeline] = []

    def build(**options: Any) -> TranscriptPipeline:
        pipeline = pipeline_from_environment(**{"jsonl": False, "span_events": False, **options})
        created.append(pipeline)
        return pipeline

    yield build
    for pipeline in created:
        pipeline.shutdown(5.0)


# -- where content goes ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "destinations", "entries"),
    [
        (None, SPANS, "full"),
        ("", SPANS, "full"),
        ("SPAN_ONLY", SPANS, "full"),
        ("span_only", SPANS, "full"),
        ("EVENT_ONLY", EVENTS, "full"),
        ("Event_Only", EVENTS, "full"),
        ("SPAN_AND_EVENT", BOTH, "full"),
        ("true", BOTH, "full"),
        ("TRUE", BOTH, "full"),
        ("1", BOTH, "full"),
        ("yes", BOTH, "full"),
        ("NO_CONTENT", NEITHER, "metadata"),
        ("no_content", NEITHER, "metadata"),
        ("false", NEITHER, "metadata"),
        ("0", NEITHER, "metadata"),
        ("no", NEITHER, "metadata"),
        (" SPAN_AND_EVENT ", BOTH, "full"),
    ],
)
def test_the_capture_variable_says_where_content_goes(
    value: str | None, destinations: tuple[bool, bool], entries: str, caplog: pytest.LogCaptureFixture
) -> None:
    environ = {} if value is None else {CAPTURE: value}
    content = genai_content_from(environ=environ)
    assert (content.on_spans, content.in_events) == destinations
    assert policy_from(environ=environ).mode == entries
    assert not caplog.records  # every value above is known


def test_an_unknown_capture_value_warns_once_and_keeps_spans_only(caplog: pytest.LogCaptureFixture) -> None:
    environ = {CAPTURE: "SPANS_PLEASE"}
    with caplog.at_level(logging.WARNING):
        content = genai_content_from(environ=environ)
    assert (content.on_spans, content.in_events) == SPANS
    (warning,) = caplog.records
    assert warning.levelno == logging.WARNING
    assert f"{CAPTURE}='SPANS_PLEASE' is not one of SPAN_ONLY, EVENT_ONLY" in warning.getMessage()
    assert policy_from(environ=environ) == ContentPolicy()  # entries stay `full`, as before


def test_a_capture_argument_comes_before_the_variable() -> None:
    content = genai_content_from("event_only", environ={CAPTURE: "NO_CONTENT"})
    assert (content.on_spans, content.in_events) == EVENTS
    content = genai_content_from("", environ={CAPTURE: "NO_CONTENT"})  # empty: as not given
    assert (content.on_spans, content.in_events) == NEITHER


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"capture": "sometimes"}, "GenAI content capture must be one of SPAN_ONLY, .*'sometimes'"),
        ({"max_length": 0}, "must be a positive integer, not 0"),
        ({"max_length": -5}, "must be a positive integer, not -5"),
    ],
)
def test_a_bad_argument_is_a_clear_error(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        genai_content_from(**arguments, environ={})


def test_the_defaults_are_spans_only_without_openinference() -> None:
    assert genai_content_from(environ={}) == GenAiContent() == GenAiContent(True, False, False, 16384)


# -- lengths and OpenInference: argument > variable > profile -----------------------------------


@pytest.mark.parametrize(
    ("profile", "span_content_length", "openinference"),
    [("generic", 16384, False), ("jaeger", 4096, False), ("grafana", 2048, False), ("phoenix", 65536, True)],
)
def test_each_profile_sets_the_content_length_and_openinference(
    profile: str,
    span_content_length: int,
    openinference: bool,
    pipelines: Callable[..., TranscriptPipeline],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for variable in (CAPTURE, "TRANSCRIPT_OTEL_OPENINFERENCE", "TRANSCRIPT_OTEL_GENAI_CONTENT_MAX_LENGTH"):
        monkeypatch.delenv(variable, raising=False)
    limits = backend_limits(profile)
    assert (limits.span_content_length, limits.openinference) == (span_content_length, openinference)
    pipeline = pipelines(backend_profile=profile, log_records=False)
    assert pipeline.genai_content == GenAiContent(True, False, openinference, span_content_length)


def test_the_phoenix_profile_keeps_events_and_log_records_as_generic() -> None:
    phoenix, generic = BACKEND_PROFILES["phoenix"], BACKEND_PROFILES["generic"]
    assert phoenix.span_event_value_length == generic.span_event_value_length
    assert phoenix.log_value_length == generic.log_value_length is None


def test_the_profile_variable_chooses_phoenix(
    pipelines: Callable[..., TranscriptPipeline], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRANSCRIPT_OTEL_BACKEND_PROFILE", "Phoenix")
    assert pipelines(log_records=False).genai_content == GenAiContent(openinference=True, max_length=65536)


@pytest.mark.parametrize(
    ("argument", "variable", "profile", "expected"),
    [
        (None, None, "generic", False),
        (None, None, "phoenix", True),
        (None, "true", "generic", True),
        (None, "false", "phoenix", False),
        (True, "false", "generic", True),
        (False, "true", "phoenix", False),
    ],
)
def test_openinference_argument_then_variable_then_profile(
    argument: bool | None,
    variable: str | None,
    profile: str,
    expected: bool,
    pipelines: Callable[..., TranscriptPipeline],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if variable is None:
        monkeypatch.delenv("TRANSCRIPT_OTEL_OPENINFERENCE", raising=False)
    else:
        monkeypatch.setenv("TRANSCRIPT_OTEL_OPENINFERENCE", variable)
    pipeline = pipelines(openinference=argument, backend_profile=profile, log_records=False)
    assert pipeline.genai_content.openinference is expected


@pytest.mark.parametrize(
    ("argument", "variable", "profile", "expected"),
    [
        (None, None, "grafana", 2048),
        (None, "100000", "grafana", 100000),
        (None, "5000.0", "phoenix", 5000),
        (300, "100000", "grafana", 300),
    ],
)
def test_max_length_argument_then_variable_then_profile(
    argument: int | None, variable: str | None, profile: str, expected: int
) -> None:
    environ = {} if variable is None else {"TRANSCRIPT_OTEL_GENAI_CONTENT_MAX_LENGTH": variable}
    limits = backend_limits(profile)
    content = genai_content_from(
        max_length=argument,
        environ=environ,
        profile_openinference=limits.openinference,
        profile_max_length=limits.span_content_length,
    )
    assert content.max_length == expected


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("TRANSCRIPT_OTEL_GENAI_CONTENT_MAX_LENGTH", "lots"),
        ("TRANSCRIPT_OTEL_GENAI_CONTENT_MAX_LENGTH", "-1"),
        ("TRANSCRIPT_OTEL_GENAI_CONTENT_MAX_LENGTH", "0.5"),
        ("TRANSCRIPT_OTEL_OPENINFERENCE", "perhaps"),
    ],
)
def test_an_unreadable_variable_keeps_the_profiles_value(
    variable: str, value: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        content = genai_content_from(
            environ={variable: value}, profile_openinference=True, profile_max_length=4096
        )
    assert (content.openinference, content.max_length) == (True, 4096)
    if value != "0.5":  # positive, so read as a number, but shorter than one character
        assert f"{variable}={value!r} is not a" in caplog.text


def test_given_settings_replace_the_environment_but_openinference_still_applies(
    pipelines: Callable[..., TranscriptPipeline], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CAPTURE, "NO_CONTENT")
    given = GenAiContent(on_spans=True, in_events=True, max_length=100)
    assert pipelines(genai_content=given, log_records=False).genai_content == given
    assert pipelines(genai_content=given, openinference=True, log_records=False).genai_content == (
        GenAiContent(True, True, True, 100)
    )


def test_the_variables_reach_the_pipeline(
    pipelines: Callable[..., TranscriptPipeline], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CAPTURE, "SPAN_AND_EVENT")
    monkeypatch.setenv("TRANSCRIPT_OTEL_OPENINFERENCE", "true")
    monkeypatch.setenv("TRANSCRIPT_OTEL_GENAI_CONTENT_MAX_LENGTH", "1000")
    monkeypatch.delenv("TRANSCRIPT_OTEL_BACKEND_PROFILE", raising=False)
    assert pipelines(log_records=False).genai_content == GenAiContent(True, True, True, 1000)


def test_a_pipeline_made_directly_puts_content_on_spans(
    make_pipeline: Callable[..., TranscriptPipeline],
) -> None:
    assert make_pipeline([]).genai_content == GenAiContent()


# -- the operation-details event --------------------------------------------------------------


def _event_attributes() -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "claude-opus-4-6",
        "gen_ai.usage.input_tokens": 108,
        "gen_ai.response.finish_reasons": ["stop"],
        "gen_ai.input.messages": MESSAGES,
    }


def test_the_event_is_a_log_record_in_the_spans_trace(
    make_pipeline: Callable[..., TranscriptPipeline], otel: OTelHarness
) -> None:
    from opentelemetry import context as otel_context
    from opentelemetry._logs import SeverityNumber

    pipeline = make_pipeline([OTelLogSink(otel.logger_provider)])
    with otel.tracer.start_as_current_span("chat claude-opus-4-6") as span:
        chat_context = otel_context.get_current()
    pipeline.emit_genai_event(EVENT, _event_attributes(), chat_context, 1_700_000_000_123_456_789)
    (log,) = otel.finished_logs()
    record = log.log_record
    assert record.event_name == EVENT
    assert record.body is None
    assert (record.severity_number, record.severity_text) == (SeverityNumber.INFO, "INFO")
    assert record.timestamp == 1_700_000_000_123_456_789
    assert record.trace_id == span.get_span_context().trace_id
    assert record.span_id == span.get_span_context().span_id
    attributes = dict(record.attributes)
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.usage.input_tokens"] == 108
    assert list(attributes["gen_ai.response.finish_reasons"]) == ["stop"]
    # Structured, not a JSON string (the SDK keeps sequences as tuples).
    (message,) = attributes["gen_ai.input.messages"]
    assert message["role"] == "user"
    assert [dict(part) for part in message["parts"]] == MESSAGES[0]["parts"]


def test_the_event_goes_through_every_log_sink_and_not_the_mirror(
    make_pipeline: Callable[..., TranscriptPipeline], otel: OTelHarness, tmp_path: Path
) -> None:
    from opentelemetry import context as otel_context

    runs = tmp_path / "runs"
    sinks = [JsonlMirror(runs), OTelLogSink(otel.logger_provider), OTelLogSink(otel.logger_provider)]
    pipeline = make_pipeline(sinks)
    pipeline.emit_genai_event(EVENT, _event_attributes(), otel_context.get_current(), 1)
    assert [log.log_record.event_name for log in otel.finished_logs()] == [EVENT, EVENT]
    assert not runs.exists()


def test_without_log_records_the_event_is_not_sent(
    pipelines: Callable[..., TranscriptPipeline], otel: OTelHarness
) -> None:
    from opentelemetry import context as otel_context

    pipeline = pipelines(logger_provider=otel.logger_provider, log_records=False)
    pipeline.emit_genai_event(EVENT, _event_attributes(), otel_context.get_current(), 1)
    assert otel.finished_logs() == []


def test_a_pipeline_with_no_sinks_takes_the_event_quietly(
    make_pipeline: Callable[..., TranscriptPipeline], caplog: pytest.LogCaptureFixture
) -> None:
    from opentelemetry import context as otel_context

    make_pipeline([]).emit_genai_event(EVENT, _event_attributes(), otel_context.get_current(), 1)
    assert not caplog.records


class _BrokenLogSink(OTelLogSink):
    def emit_event(self, name: str, attributes: Mapping[str, Any], context: Any, timestamp_ns: int) -> None:
        raise RuntimeError("exporter exploded")


def test_a_failing_log_sink_never_raises_and_the_others_still_get_the_event(
    make_pipeline: Callable[..., TranscriptPipeline], otel: OTelHarness, caplog: pytest.LogCaptureFixture
) -> None:
    from opentelemetry import context as otel_context

    pipeline = make_pipeline([_BrokenLogSink(otel.logger_provider), OTelLogSink(otel.logger_provider)])
    with caplog.at_level(logging.DEBUG, logger="transcript_otel.capture.pipeline"):
        pipeline.emit_genai_event(EVENT, _event_attributes(), otel_context.get_current(), 1)
    assert [log.log_record.event_name for log in otel.finished_logs()] == [EVENT]
    (note,) = [r for r in caplog.records if r.name == "transcript_otel.capture.pipeline"]
    assert note.levelno == logging.DEBUG  # an optional copy of the span's content: no warning
    assert "exporter exploded" in note.getMessage()
    assert pipeline.sink_failures == {}  # not a transcript record: no transcript.error either


class _FilteringLogger:
    """A logger that is enabled for nothing, as an SDK filter would make it."""

    def __init__(self) -> None:
        self.emitted: list[Any] = []
        self.asked: list[dict[str, Any]] = []

    def enabled(self, **question: Any) -> bool:
        self.asked.append(question)
        return False

    def emit(self, record: Any = None, **_: Any) -> None:
        self.emitted.append(record)


class _FilteringProvider:
    def __init__(self) -> None:
        self.logger = _FilteringLogger()

    def get_logger(self, *_: Any, **__: Any) -> _FilteringLogger:
        return self.logger


def test_a_logger_not_enabled_for_the_event_skips_it(
    make_pipeline: Callable[..., TranscriptPipeline],
) -> None:
    from opentelemetry import context as otel_context
    from opentelemetry._logs import SeverityNumber

    provider = _FilteringProvider()
    pipeline = make_pipeline([OTelLogSink(provider)])  # type: ignore[arg-type]
    pipeline.emit_genai_event(EVENT, _event_attributes(), otel_context.get_current(), 1)
    assert provider.logger.emitted == []
    (question,) = provider.logger.asked
    assert question["event_name"] == EVENT
    assert question["severity_number"] is SeverityNumber.INFO


def test_after_shutdown_the_event_is_dropped_quietly(
    make_pipeline: Callable[..., TranscriptPipeline], otel: OTelHarness
) -> None:
    from opentelemetry import context as otel_context

    pipeline = make_pipeline([OTelLogSink(otel.logger_provider)])
    pipeline.shutdown(5.0)
    pipeline.emit_genai_event(EVENT, _event_attributes(), otel_context.get_current(), 1)
    assert otel.finished_logs() == []
