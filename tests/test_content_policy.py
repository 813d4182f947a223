"""The content policy: full, metadata or none, per category, the same in every sink."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from transcript_otel import TranscriptEmitter, TranscriptPipeline
from transcript_otel.capture.defaults import pipeline_from_environment
from transcript_otel.reading.reconstruct import read_records
from transcript_otel.records.content import ContentPolicy, policy_from, text_digest
from transcript_otel.sinks import JsonlMirror, OTelLogSink, SpanEventSink

from conftest import OTelHarness

PROMPT = "Please fix the failing test in billing.py"
ANSWER = "The rounding was wrong; fixed."
THOUGHT = "Maybe the cents are truncated."
ARGUMENTS = {"command": "pytest billing.py", "timeout": 30}
RESULT = "1 failed, 3 passed"
TEXTS = (PROMPT, ANSWER, THOUGHT, "pytest billing.py", RESULT)


Run = Callable[[ContentPolicy], tuple[list[dict[str, Any]], str, str]]


@pytest.fixture
def run(make_pipeline: Callable[..., TranscriptPipeline], tmp_path: Path, otel: OTelHarness) -> Run:
    """One conversation through all three sinks under `policy`: (mirror entries, logs, span events)."""

    def go(policy: ContentPolicy) -> tuple[list[dict[str, Any]], str, str]:
        runs = tmp_path / policy.mode / "-".join(sorted(policy.excluded))
        sinks = [JsonlMirror(runs), OTelLogSink(otel.logger_provider), SpanEventSink()]
        pipeline = make_pipeline(sinks, content_policy=policy)
        otel.span_exporter.clear()
        otel.log_exporter.clear()
        with (
            otel.tracer.start_as_current_span("agent"),
            TranscriptEmitter(prompt_name="fix", adapter="cli", pipeline=pipeline) as emitter,
        ):
            emitter.emit("user_message", detail={"text": PROMPT, "message": {"role": "user"}}, raw=PROMPT)
            emitter.emit("thinking", detail={"text": THOUGHT})
            emitter.emit(
                "tool_use",
                detail={"tool_use_id": "c1", "tool_name": "shell", "input": ARGUMENTS},
                raw=json.dumps(ARGUMENTS),
            )
            emitter.emit("tool_result", detail={"tool_use_id": "c1", "content": RESULT, "is_error": True})
            emitter.emit("assistant_message", detail={"text": ANSWER})
            emitter.emit("token_usage", detail={"usage": {"input_tokens": 12, "output_tokens": 3}})
        assert emitter.jsonl_path is not None
        entries = [r["context"] for r in read_records(emitter.jsonl_path) if r["event"] == "transcript.entry"]
        logs = json.dumps([dict(log.log_record.attributes) for log in otel.finished_logs()])
        (span,) = otel.finished_spans()
        events = json.dumps([dict(event.attributes) for event in span.events])
        return entries, logs, events

    return go


def test_full_keeps_everything(run: Run) -> None:
    entries, logs, events = run(ContentPolicy())
    for text in TEXTS:
        assert text in json.dumps(entries)
        assert text in logs
        assert text in events
    assert entries[0]["raw"] == PROMPT


def test_metadata_keeps_ids_sizes_and_digests_but_no_text(run: Run) -> None:
    entries, logs, events = run(ContentPolicy("metadata"))
    for output in (json.dumps(entries), logs, events):
        for text in TEXTS:
            assert text not in output
    user, thinking, use, result, answer, usage = (entry["detail"] for entry in entries)
    assert user == {"text": text_digest(PROMPT), "message": {"role": "user"}}
    assert thinking == {"text": text_digest(THOUGHT)}
    assert use == {
        "tool_use_id": "c1",
        "tool_name": "shell",
        "input": {"command": text_digest("pytest billing.py"), "timeout": 30},
    }
    assert result == {"tool_use_id": "c1", "content": text_digest(RESULT), "is_error": True}
    assert answer == {"text": text_digest(ANSWER)}
    assert usage == {"usage": {"input_tokens": 12, "output_tokens": 3}}
    assert all("raw" not in entry for entry in entries)
    # Still readable as a run: tool names and ids on the log records, usage counted.
    assert '"gen_ai.tool.name": "shell"' in logs
    assert '"gen_ai.usage.input_tokens": 12' in logs


def test_none_keeps_only_the_envelope(run: Run) -> None:
    entries, logs, _ = run(ContentPolicy("none"))
    assert [entry["entry_type"] for entry in entries] == [
        "user_message",
        "thinking",
        "tool_use",
        "tool_result",
        "assistant_message",
        "token_usage",
    ]
    assert all(entry["detail"] == {} and "raw" not in entry for entry in entries)
    assert [entry["sequence_number"] for entry in entries] == [1, 2, 3, 4, 5, 6]
    for text in TEXTS:
        assert text not in logs


def test_one_category_can_be_kept_as_metadata(run: Run) -> None:
    entries, logs, events = run(ContentPolicy("full", frozenset({"thinking", "tool_results"})))
    for output in (json.dumps(entries), logs, events):
        assert THOUGHT not in output
        assert RESULT not in output
        assert PROMPT in output
        assert ANSWER in output
        assert "pytest billing.py" in output


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, ContentPolicy()),
        ({"TRANSCRIPT_OTEL_CONTENT": "metadata"}, ContentPolicy("metadata")),
        ({"TRANSCRIPT_OTEL_CONTENT": "NONE"}, ContentPolicy("none")),
        ({"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "false"}, ContentPolicy("metadata")),
        ({"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "NO_CONTENT"}, ContentPolicy("metadata")),
        ({"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_AND_EVENT"}, ContentPolicy()),
        ({"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"}, ContentPolicy()),
        ({"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "EVENT_ONLY"}, ContentPolicy()),
        ({"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}, ContentPolicy()),
        (
            {
                "TRANSCRIPT_OTEL_CONTENT": "full",
                "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "false",
            },
            ContentPolicy(),
        ),
        (
            {"TRANSCRIPT_OTEL_CONTENT_EXCLUDE": "thinking, tool_arguments"},
            ContentPolicy("full", frozenset({"thinking", "tool_arguments"})),
        ),
    ],
)
def test_the_policy_comes_from_the_environment(environ: dict[str, str], expected: ContentPolicy) -> None:
    assert policy_from(environ=environ) == expected


def test_arguments_come_before_the_environment() -> None:
    environ = {"TRANSCRIPT_OTEL_CONTENT": "none", "TRANSCRIPT_OTEL_CONTENT_EXCLUDE": "thinking"}
    assert policy_from("full", [], environ=environ) == ContentPolicy()


@pytest.mark.parametrize(
    ("mode", "exclude", "message"),
    [
        ("some", None, "must be one of full, metadata, none, not 'some'"),
        ("full", ["secrets"], "unknown content categories ['secrets']"),
    ],
)
def test_a_bad_setting_is_a_clear_error(mode: str, exclude: list[str] | None, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        policy_from(mode, exclude, environ={})


def test_an_exclusion_iterator_is_read_once_and_applied() -> None:
    policy = policy_from("full", iter(["tool_results", "user_text"]), environ={})
    assert policy.excluded == frozenset({"tool_results", "user_text"})


def test_a_bad_variable_keeps_less_not_more(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("TRANSCRIPT_OTEL_CONTENT", "metdata")
    pipeline = pipeline_from_environment(jsonl=False, log_records=False, span_events=False)
    try:
        assert pipeline.content_policy == ContentPolicy("metadata")
        assert "TRANSCRIPT_OTEL_CONTENT must be one of full, metadata, none, not 'metdata'" in caplog.text
    finally:
        pipeline.shutdown(1.0)


@pytest.mark.parametrize(
    ("profile", "span_limit", "log_limit"),
    [("jaeger", 4096, None), ("grafana", 2048, 16384), ("phoenix", 4096, None)],
)
def test_backend_profiles_cut_what_backends_keep_and_the_mirror_keeps_every_byte(
    profile: str,
    span_limit: int,
    log_limit: int | None,
    otel: OTelHarness,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TRANSCRIPT_OTEL_JSONL_DIR", str(tmp_path / "runs"))
    pipeline = pipeline_from_environment(logger_provider=otel.logger_provider, backend_profile=profile)
    output = "".join(f"line {index}: {'x' * 90}\n" for index in range(1_000))  # ~100 KB
    try:
        with (
            otel.tracer.start_as_current_span("agent"),
            TranscriptEmitter(prompt_name="big", adapter="cli", pipeline=pipeline) as emitter,
        ):
            emitter.emit("tool_result", detail={"tool_use_id": "c1", "content": output})
    finally:
        pipeline.shutdown(5.0)
    (span,) = otel.finished_spans()
    (event,) = [e for e in span.events if e.name == "transcript.entry"]
    detail = str(event.attributes["transcript.detail"])
    assert len(detail) <= span_limit
    assert event.attributes["transcript.detail.truncated"] is True
    json.loads(detail)  # cut where JSON stays JSON
    (log,) = [log for log in otel.finished_logs() if log.log_record.event_name == "transcript.entry"]
    logged = str(log.log_record.attributes["transcript.detail"])
    if log_limit is None:
        assert json.loads(logged)["content"] == output
    else:
        assert len(logged) <= log_limit
        json.loads(logged)
    assert emitter.jsonl_path is not None
    (entry,) = [r for r in read_records(emitter.jsonl_path) if r["event"] == "transcript.entry"]
    assert entry["context"]["detail"]["content"] == output  # every byte


def test_an_unknown_profile_is_a_clear_error() -> None:
    with pytest.raises(
        ValueError, match="backend profile must be one of generic, jaeger, grafana, phoenix, not 'tempo'"
    ):
        pipeline_from_environment(backend_profile="tempo")
