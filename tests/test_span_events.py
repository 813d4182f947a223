"""Span events: the compatibility copy of each record on the span current at `emit()`.

Span events take no nested maps, so the envelope is flattened, `detail` is a
JSON string, and long values are cut so that JSON stays valid and the cut is
marked (`<key>.truncated`, `<key>.original_length`). Real SDK providers.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

from transcript_otel import TranscriptEmitter, TranscriptPipeline
from transcript_otel.sinks import JsonlMirror, OTelLogSink, SpanEventSink

from conftest import OTelHarness
from helpers import entry_contexts, run_records

SCALARS = (str, bool, int, float)


def entry_events(span: Any) -> list[Any]:
    return [event for event in span.events if event.name == "transcript.entry"]


def log_entries(otel: OTelHarness) -> list[Any]:
    return [r for r in otel.finished_logs() if r.log_record.event_name == "transcript.entry"]


def build(
    make_pipeline: Callable[..., TranscriptPipeline],
    runs_dir: Path,
    otel: OTelHarness,
    sink: SpanEventSink,
    **options: Any,
) -> TranscriptPipeline:
    return make_pipeline([JsonlMirror(runs_dir), OTelLogSink(otel.logger_provider), sink], **options)


def test_attributes_are_flat_and_detail_is_a_json_string(
    full_pipeline: TranscriptPipeline, otel: OTelHarness
) -> None:
    detail = {"text": "héllo ☃", "nested": {"list": [1, 2.5, None, True, {"deep": []}], "empty": {}}}
    with otel.tracer.start_as_current_span("run"):
        with TranscriptEmitter(
            prompt_name="p", adapter="a", session_id="s1", pipeline=full_pipeline
        ) as emitter:
            emitter.emit("user_message", detail=detail, raw='{"native": [1, 2]}')
            emitter.emit("tool_use", detail={"tool_use_id": "t1", "tool_name": "Read"})
        assert full_pipeline.flush()
    (span,) = otel.finished_spans()
    assert [event.name for event in span.events] == [
        "transcript.start",
        "transcript.entry",
        "transcript.entry",
        "transcript.stop",
    ]
    for event in span.events:
        for key, value in event.attributes.items():
            assert isinstance(value, SCALARS), (event.name, key, value)
    message, tool = entry_events(span)
    assert json.loads(message.attributes["transcript.detail"]) == detail
    assert message.attributes["transcript.raw"] == '{"native": [1, 2]}'
    assert message.attributes["gen_ai.conversation.id"] == "s1"
    assert tool.attributes["gen_ai.tool.call.id"] == "t1"
    assert tool.attributes["gen_ai.tool.name"] == "Read"
    assert not any(key.endswith((".truncated", ".original_length")) for key in message.attributes)
    # Short records: the span event holds exactly what the log record holds, at the emit time.
    for event, record in zip(entry_events(span), log_entries(otel), strict=True):
        assert dict(event.attributes) == dict(record.log_record.attributes)
        assert event.timestamp == record.log_record.timestamp
    stop = span.events[-1].attributes
    assert stop["transcript.total_entries"] == 2
    assert json.loads(stop["transcript.entries_by_type"]) == {"user_message": 1, "tool_use": 1}
    assert [c.get("detail") for c in entry_contexts(run_records(emitter))] == [
        detail,
        {"tool_use_id": "t1", "tool_name": "Read"},
    ]


def test_a_100_kb_detail_is_cut_to_valid_json_and_marked(
    make_pipeline: Callable[..., TranscriptPipeline], runs_dir: Path, otel: OTelHarness
) -> None:
    limit = 2048
    pipeline = build(make_pipeline, runs_dir, otel, SpanEventSink(max_value_length=limit))
    detail: dict[str, Any] = {
        "text": "x" * 60_000,
        "items": [{"n": i, "label": f"item-{i}"} for i in range(1500)],
        "unicode": "日本語" * 2000,
        "meta": {"model": "m", "ok": True},
    }
    with otel.tracer.start_as_current_span("run"):
        emitter = TranscriptEmitter(prompt_name="p", adapter="a", pipeline=pipeline)
        emitter.emit("assistant_message", detail=detail)
        assert pipeline.flush()
    emitter.stop()

    (record,) = log_entries(otel)
    full = record.log_record.attributes["transcript.detail"]
    assert len(full) >= 100_000
    assert json.loads(full) == detail  # the log record is never cut
    (span,) = otel.finished_spans()
    (event,) = entry_events(span)
    cut = event.attributes["transcript.detail"]
    assert len(cut) <= limit
    parsed = json.loads(cut)
    assert isinstance(parsed, dict)
    assert set(parsed) == set(detail)  # the structure survives; long values lose their tail
    assert parsed["meta"] == detail["meta"]
    assert parsed["text"].startswith("xxxx")
    assert "…[+" in parsed["text"]
    assert parsed["items"][0] == detail["items"][0]
    assert event.attributes["transcript.detail.truncated"] is True
    assert event.attributes["transcript.detail.original_length"] == len(full)
    for key, value in event.attributes.items():
        assert isinstance(value, SCALARS)
        if isinstance(value, str):
            assert len(value) <= limit, key
    (context,) = entry_contexts(run_records(emitter))
    assert context["detail"] == detail  # the JSONL mirror is never cut


def test_default_limit_and_long_raw_values(full_pipeline: TranscriptPipeline, otel: OTelHarness) -> None:
    plain_raw = "native log line\n" * 1000
    json_raw = json.dumps({"method": "item/completed", "params": {"output": "y" * 20_000}})
    with otel.tracer.start_as_current_span("run"):
        with TranscriptEmitter(prompt_name="p", adapter="a", pipeline=full_pipeline) as emitter:
            emitter.emit("system_event", detail={"blob": "z" * 10_000}, raw=plain_raw)
            emitter.emit("system_event", raw=json_raw)
        assert full_pipeline.flush()
    (span,) = otel.finished_spans()
    plain, structured = entry_events(span)
    limit = SpanEventSink().max_value_length
    assert limit == 4096
    assert len(plain.attributes["transcript.detail"]) <= limit
    assert json.loads(plain.attributes["transcript.detail"])["blob"].startswith("zzzz")
    assert len(plain.attributes["transcript.raw"]) <= limit
    assert plain.attributes["transcript.raw"].startswith("native log line\n")
    assert plain.attributes["transcript.raw.truncated"] is True
    assert plain.attributes["transcript.raw.original_length"] == len(plain_raw)
    assert len(structured.attributes["transcript.raw"]) <= limit
    assert json.loads(structured.attributes["transcript.raw"])["method"] == "item/completed"
    assert structured.attributes["transcript.raw.original_length"] == len(json_raw)
    contexts = entry_contexts(run_records(emitter))
    assert [c["raw"] for c in contexts] == [plain_raw, json_raw]


def test_events_land_on_the_span_current_at_emit(
    full_pipeline: TranscriptPipeline, otel: OTelHarness
) -> None:
    emitter = TranscriptEmitter(prompt_name="p", adapter="a", pipeline=full_pipeline)
    with otel.tracer.start_as_current_span("outer") as outer:
        emitter.emit("user_message", detail={"where": "outer-1"})
        with otel.tracer.start_as_current_span("inner") as inner:
            emitter.emit("tool_use", detail={"where": "inner-1"})
            with otel.tracer.start_as_current_span("innermost"):
                emitter.emit("tool_result", detail={"where": "innermost-1"})
                assert full_pipeline.flush()
            emitter.emit("assistant_message", detail={"where": "inner-2"})
            assert full_pipeline.flush()
        emitter.emit("assistant_message", detail={"where": "outer-2"})
        assert full_pipeline.flush()
    emitter.stop()
    spans = {span.name: span for span in otel.finished_spans()}

    def where(name: str) -> list[str]:
        return [json.loads(e.attributes["transcript.detail"])["where"] for e in entry_events(spans[name])]

    assert where("outer") == ["outer-1", "outer-2"]
    assert where("inner") == ["inner-1", "inner-2"]
    assert where("innermost") == ["innermost-1"]
    assert inner.get_span_context().span_id != outer.get_span_context().span_id


def test_no_event_without_an_active_span(
    make_pipeline: Callable[..., TranscriptPipeline], runs_dir: Path, otel: OTelHarness
) -> None:
    sink = SpanEventSink()
    pipeline = build(make_pipeline, runs_dir, otel, sink)
    open_but_not_current = otel.tracer.start_span("bystander")
    with TranscriptEmitter(prompt_name="p", adapter="a", pipeline=pipeline) as emitter:
        emitter.emit("user_message", detail={"text": "hi"})
    open_but_not_current.end()
    (span,) = otel.finished_spans()
    assert span.events == ()
    assert sink.missed == 0
    assert len(log_entries(otel)) == 1
    assert len(entry_contexts(run_records(emitter))) == 1


def test_missed_counts_entries_whose_span_ended_before_the_writer(
    make_pipeline: Callable[..., TranscriptPipeline], runs_dir: Path, otel: OTelHarness
) -> None:
    sink = SpanEventSink()
    pipeline = build(make_pipeline, runs_dir, otel, sink, flush_interval_s=5.0)
    emitter = TranscriptEmitter(prompt_name="p", adapter="a", pipeline=pipeline)
    emitter.start()
    assert pipeline.flush()  # the start record is written ...
    time.sleep(0.05)  # ... and any pending wake-up has passed: the writer sleeps for 5 s
    with otel.tracer.start_as_current_span("ends-first") as span:
        for i in range(3):
            emitter.emit("assistant_message", detail={"i": i})
    assert pipeline.flush()
    emitter.stop()
    assert sink.missed == 3
    (finished,) = otel.finished_spans()
    assert finished.events == ()
    # The log records and the JSONL mirror still hold all three, correlated.
    records = log_entries(otel)
    assert len(records) == 3
    assert {r.log_record.span_id for r in records} == {span.get_span_context().span_id}
    assert len(entry_contexts(run_records(emitter))) == 3


def test_unsampled_spans_get_no_event_and_are_not_counted_as_missed(
    make_pipeline: Callable[..., TranscriptPipeline], runs_dir: Path, otel: OTelHarness
) -> None:
    sink = SpanEventSink()
    pipeline = build(make_pipeline, runs_dir, otel, sink)
    unsampled = TracerProvider(sampler=ALWAYS_OFF, shutdown_on_exit=False)
    try:
        with unsampled.get_tracer("t").start_as_current_span("dropped") as span:
            with TranscriptEmitter(prompt_name="p", adapter="a", pipeline=pipeline) as emitter:
                emitter.emit("user_message", detail={"text": "hi"})
            assert not span.is_recording()
            assert span.get_span_context().is_valid
    finally:
        unsampled.shutdown()
    assert sink.missed == 0
    assert len(log_entries(otel)) == 1


def test_a_span_past_its_event_budget_gets_previews_and_a_new_span_full_values(
    make_pipeline: Callable[..., TranscriptPipeline], runs_dir: Path, otel: OTelHarness
) -> None:
    budget = 64 * 1024
    sink = SpanEventSink(max_value_length=4096, max_span_bytes=budget)
    pipeline = build(make_pipeline, runs_dir, otel, sink)
    emitter = TranscriptEmitter(prompt_name="p", adapter="a", pipeline=pipeline)
    details = [{"n": n, "output": f"line {n} → ✓\n" * 800} for n in range(30)]
    with otel.tracer.start_as_current_span("long run"):
        for detail in details:
            emitter.emit("tool_result", detail=detail, raw=json.dumps({"params": detail}))
        assert pipeline.flush()
        with otel.tracer.start_as_current_span("tool"):
            emitter.emit("tool_result", detail=details[0])
            assert pipeline.flush()
    emitter.stop()
    spans = {span.name: span for span in otel.finished_spans()}
    events = entry_events(spans["long run"])
    lengths = [len(event.attributes["transcript.detail"]) for event in events]
    full = [n for n, length in enumerate(lengths) if length > 256]
    # Each full event holds two ~4096-character values (16 KB each as Python holds
    # this text, an arrow and a check mark in it): the budget takes a few of them.
    assert full == list(range(len(full)))
    assert 1 <= len(full) < 8
    assert sink.cut_for_budget == len(events) - len(full)
    for event, detail in zip(events[len(full) :], details[len(full) :], strict=True):
        attributes = event.attributes
        for key, starts in (("transcript.detail", '{"n":'), ("transcript.raw", '{"params": {"n":')):
            assert len(attributes[key]) <= 256
            assert attributes[f"{key}.truncated"] is True
            preview = json.loads(attributes[key])["truncated_json_preview"]  # valid JSON
            assert preview.startswith(
                f"{starts} {detail['n']}" if key.endswith("raw") else f"{starts}{detail['n']}"
            )
            assert len(preview) >= 100
        assert attributes["transcript.detail.original_length"] == len(
            json.dumps(detail, ensure_ascii=False, separators=(",", ":"))
        )
        assert attributes["transcript.entry_type"] == "tool_result"  # the envelope is whole
    # A new span starts with the full length again.
    (tool_event,) = entry_events(spans["tool"])
    assert 256 < len(tool_event.attributes["transcript.detail"]) <= 4096
    # The log records and the mirror are not cut for the budget.
    records = log_entries(otel)
    assert [json.loads(r.log_record.attributes["transcript.detail"]) for r in records] == [
        *details,
        details[0],
    ]
    assert [c["detail"] for c in entry_contexts(run_records(emitter))] == [*details, details[0]]


def test_the_span_event_budget_is_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, make_pipeline: Callable[..., TranscriptPipeline]
) -> None:
    from transcript_otel.capture.defaults import pipeline_from_environment

    def span_sink(pipeline: TranscriptPipeline) -> SpanEventSink:
        (sink,) = [s for s in pipeline.sinks if isinstance(s, SpanEventSink)]
        pipeline.shutdown(1.0)
        return sink

    assert span_sink(pipeline_from_environment(jsonl=False)).max_span_bytes == 4 * 1024 * 1024
    monkeypatch.setenv("TRANSCRIPT_OTEL_SPAN_EVENT_MAX_BYTES", "1048576")
    assert span_sink(pipeline_from_environment(jsonl=False)).max_span_bytes == 1024 * 1024
    assert span_sink(pipeline_from_environment(jsonl=False, span_event_max_bytes=5000)).max_span_bytes == 5000


def test_past_the_budget_plain_text_is_cut_as_text(
    make_pipeline: Callable[..., TranscriptPipeline], runs_dir: Path, otel: OTelHarness
) -> None:
    sink = SpanEventSink(max_span_bytes=1)  # the run's start record fills it
    pipeline = build(make_pipeline, runs_dir, otel, sink)
    log_line = "2026-11-25 INFO pytest: " + "collected 120 items " * 40
    with otel.tracer.start_as_current_span("run"):
        with TranscriptEmitter(prompt_name="p", adapter="a", pipeline=pipeline) as emitter:
            emitter.emit("system_event", detail={"line": 1}, raw=log_line)
        assert pipeline.flush()
    (event,) = entry_events(otel.finished_spans()[0])
    cut = event.attributes["transcript.raw"]  # 824 characters: whole under the 4096 limit
    assert len(cut) <= 256
    assert cut.startswith("2026-11-25 INFO pytest: collected 120 items")
    assert cut.endswith(f"…[truncated, original length {len(log_line)}]")
    assert event.attributes["transcript.raw.truncated"] is True
    assert event.attributes["transcript.raw.original_length"] == len(log_line)
    assert event.attributes["transcript.detail"] == '{"line":1}'  # short values stay whole
    assert sink.cut_for_budget == 2  # the entry and the stop record
    (context,) = entry_contexts(run_records(emitter))
    assert context["raw"] == log_line
