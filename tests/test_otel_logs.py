"""OTel log records: event names, severities, timestamps, trace correlation, attributes.

Real SDK `LoggerProvider` / `TracerProvider` with in-memory exporters (the `otel`
fixture). The log records are emitted by the pipeline's writer thread, later
than `emit()`, with the context and timestamp captured at `emit()`.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry._logs import SeverityNumber
from opentelemetry.sdk._logs import LogRecordProcessor, ReadWriteLogRecord
from opentelemetry.trace import INVALID_SPAN_ID, INVALID_TRACE_ID

from transcript_otel import ENVELOPE_KEYS, TranscriptEmitter, TranscriptPipeline
from transcript_otel.sinks import JsonlMirror, OTelLogSink, SpanEventSink

from conftest import OTelHarness
from helpers import entry_contexts, run_records

WRITER_THREAD = "transcript-otel-writer"


def attributes_of(record: Any) -> dict[str, Any]:
    return dict(record.log_record.attributes)


def entries(logs: list[Any]) -> list[Any]:
    return [r for r in logs if r.log_record.event_name == "transcript.entry"]


def iso_to_ns(text: str) -> int:
    moment = datetime.fromisoformat(text)
    return (int(moment.timestamp()) * 1_000_000 + moment.microsecond) * 1000


class ThreadRecorder(LogRecordProcessor):
    """A real SDK processor that notes which thread emitted each record."""

    def __init__(self) -> None:
        self.threads: list[str] = []

    def on_emit(self, log_record: ReadWriteLogRecord) -> None:
        self.threads.append(threading.current_thread().name)

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def settle(pipeline: TranscriptPipeline) -> None:
    """Write what is queued, then let any pending wake-up pass: the writer sleeps again."""
    assert pipeline.flush()
    time.sleep(0.05)


@pytest.fixture
def slow_pipeline(
    make_pipeline: Callable[..., TranscriptPipeline], runs_dir: Path, otel: OTelHarness
) -> TranscriptPipeline:
    """All three sinks, with a writer that sleeps 5 s between drains unless woken."""
    return make_pipeline(
        [JsonlMirror(runs_dir), OTelLogSink(otel.logger_provider), SpanEventSink()],
        flush_interval_s=5.0,
    )


def test_event_names_and_severities(full_pipeline: TranscriptPipeline, otel: OTelHarness) -> None:
    with TranscriptEmitter(prompt_name="p", adapter="a", pipeline=full_pipeline) as emitter:
        emitter.emit("user_message", detail={"text": "hi"})
        emitter.error("adapter lost a notification", code=7)
    logs = otel.finished_logs()
    assert [r.log_record.event_name for r in logs] == [
        "transcript.start",
        "transcript.entry",
        "transcript.error",
        "transcript.stop",
    ]
    by_event = {r.log_record.event_name: r.log_record for r in logs}
    for event in ("transcript.start", "transcript.entry", "transcript.stop"):
        assert by_event[event].severity_number is SeverityNumber.DEBUG
        assert by_event[event].severity_text == "DEBUG"
    error = by_event["transcript.error"]
    assert error.severity_number is SeverityNumber.WARN
    assert error.severity_text == "WARNING"
    assert error.attributes["transcript.error"] == "adapter lost a notification"
    assert error.attributes["transcript.code"] == 7
    assert error.attributes["transcript.run_id"] == emitter.run_id
    assert by_event["transcript.entry"].body == "transcript entry: user_message"
    assert by_event["transcript.start"].body == "transcript.start"


def test_timestamp_is_captured_at_emit_not_at_write(
    slow_pipeline: TranscriptPipeline, otel: OTelHarness
) -> None:
    emitter = TranscriptEmitter(prompt_name="p", adapter="a", pipeline=slow_pipeline)
    emitter.start()
    settle(slow_pipeline)
    before = time.time_ns()
    emitter.emit("user_message", detail={"text": "now"})
    after = time.time_ns()
    time.sleep(0.05)  # the writer is asleep: the record is built and emitted later
    assert slow_pipeline.flush()
    emitter.stop()

    (record,) = (r.log_record for r in entries(otel.finished_logs()))
    assert before <= record.timestamp <= after
    assert record.observed_timestamp is not None
    assert record.observed_timestamp - record.timestamp >= 40_000_000  # written >= 40 ms later
    envelope_ns = iso_to_ns(record.attributes["transcript.timestamp"])
    assert abs(envelope_ns - record.timestamp) <= 1000  # same instant, microsecond precision
    (context,) = entry_contexts(run_records(emitter))
    assert context["timestamp"] == record.attributes["transcript.timestamp"]


def test_records_come_from_the_writer_thread_with_the_emit_context(
    full_pipeline: TranscriptPipeline, otel: OTelHarness
) -> None:
    recorder = ThreadRecorder()
    otel.logger_provider.add_log_record_processor(recorder)
    with (
        TranscriptEmitter(prompt_name="p", adapter="a", pipeline=full_pipeline) as emitter,
        otel.tracer.start_as_current_span("turn") as span,
    ):
        emitter.emit("user_message", detail={"text": "hi"})
        emitter.emit("assistant_message", detail={"text": "hello"})
        assert full_pipeline.flush()
    assert recorder.threads
    assert set(recorder.threads) == {WRITER_THREAD} != {threading.current_thread().name}
    context = span.get_span_context()
    records = entries(otel.finished_logs())
    assert len(records) == 2
    for record in records:
        assert record.log_record.trace_id == context.trace_id
        assert record.log_record.span_id == context.span_id
        assert record.log_record.trace_flags == context.trace_flags


def test_correlation_survives_the_span_ending_before_the_write(
    slow_pipeline: TranscriptPipeline, otel: OTelHarness
) -> None:
    emitter = TranscriptEmitter(prompt_name="p", adapter="a", pipeline=slow_pipeline)
    emitter.start()
    settle(slow_pipeline)
    with otel.tracer.start_as_current_span("short") as span:
        emitter.emit("tool_use", detail={"tool_use_id": "t1", "tool_name": "Read"})
        emitter.emit("tool_result", detail={"tool_use_id": "t1", "content": "ok"})
    assert not span.is_recording()  # ended; the writer has not run yet
    assert slow_pipeline.flush()
    emitter.stop()
    context = span.get_span_context()
    records = entries(otel.finished_logs())
    assert len(records) == 2
    for record in records:
        assert (record.log_record.trace_id, record.log_record.span_id) == (
            context.trace_id,
            context.span_id,
        )
    for entry in entry_contexts(run_records(emitter)):
        assert entry["trace_id"] == format(context.trace_id, "032x")
        assert entry["span_id"] == format(context.span_id, "016x")


def test_no_trace_id_without_an_active_span(full_pipeline: TranscriptPipeline, otel: OTelHarness) -> None:
    with TranscriptEmitter(prompt_name="p", adapter="a", pipeline=full_pipeline) as emitter:
        emitter.emit("user_message", detail={"text": "hi"})
    logs = otel.finished_logs()
    assert len(logs) == 3
    for record in logs:
        assert record.log_record.trace_id == INVALID_TRACE_ID
        assert record.log_record.span_id == INVALID_SPAN_ID
    (context,) = entry_contexts(run_records(emitter))
    assert "trace_id" not in context
    assert "span_id" not in context


def test_each_thread_correlates_with_its_own_span(
    full_pipeline: TranscriptPipeline, otel: OTelHarness
) -> None:
    emitter = TranscriptEmitter(prompt_name="p", adapter="a", pipeline=full_pipeline)
    emitter.start()
    spans: dict[str, tuple[int, int]] = {}
    flushed: list[bool] = []
    barrier = threading.Barrier(4)

    def agent(name: str) -> None:
        with otel.tracer.start_as_current_span(name) as span:
            context = span.get_span_context()
            spans[name] = (context.trace_id, context.span_id)
            barrier.wait()
            for i in range(50):
                emitter.emit("assistant_message", source=f"subagent:{name}", detail={"who": name, "i": i})
            flushed.append(full_pipeline.flush())

    threads = [threading.Thread(target=agent, args=(f"worker{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    emitter.stop()
    assert flushed == [True] * 4
    records = entries(otel.finished_logs())
    assert len(records) == 200
    for record in records:
        attributes = attributes_of(record)
        who = json.loads(attributes["transcript.detail"])["who"]
        assert attributes["transcript.source"] == f"subagent:{who}"
        assert (record.log_record.trace_id, record.log_record.span_id) == spans[who]


def test_each_asyncio_task_correlates_with_its_own_span(
    full_pipeline: TranscriptPipeline, otel: OTelHarness
) -> None:
    emitter = TranscriptEmitter(prompt_name="p", adapter="a", pipeline=full_pipeline)
    spans: dict[str, int] = {}

    async def task(name: str) -> None:
        with otel.tracer.start_as_current_span(name) as span:
            spans[name] = span.get_span_context().span_id
            for i in range(5):
                emitter.emit("thinking", detail={"who": name, "i": i})
                await asyncio.sleep(0)  # interleave with the other task
            await asyncio.to_thread(full_pipeline.flush)

    async def main() -> None:
        await asyncio.gather(task("a"), task("b"))

    with emitter:
        asyncio.run(main())
    records = entries(otel.finished_logs())
    assert len(records) == 10
    for record in records:
        who = json.loads(record.log_record.attributes["transcript.detail"])["who"]
        assert record.log_record.span_id == spans[who]


def test_every_envelope_key_is_an_attribute(full_pipeline: TranscriptPipeline, otel: OTelHarness) -> None:
    detail = {"text": "héllo", "nested": {"list": [1, 2.5, None, True], "empty": {}}}
    with TranscriptEmitter(
        prompt_name="review", adapter="scripted", session_id="sess-42", pipeline=full_pipeline
    ) as emitter:
        emitter.emit("user_message", detail=detail, raw='{"native": "event"}')
    (record,) = entries(otel.finished_logs())
    attributes = attributes_of(record)
    (context,) = entry_contexts(run_records(emitter))
    for key in ENVELOPE_KEYS:
        assert f"transcript.{key}" in attributes, key
    assert attributes["transcript.prompt_name"] == "review"
    assert attributes["transcript.adapter"] == "scripted"
    assert attributes["transcript.entry_type"] == "user_message"
    assert attributes["transcript.sequence_number"] == 1
    assert attributes["transcript.source"] == "main"
    assert attributes["transcript.timestamp"] == context["timestamp"]
    assert attributes["transcript.session_id"] == "sess-42"
    assert isinstance(attributes["transcript.detail"], str)
    assert json.loads(attributes["transcript.detail"]) == detail
    assert attributes["transcript.raw"] == '{"native": "event"}'
    assert attributes["transcript.run_id"] == emitter.run_id
    assert attributes["gen_ai.conversation.id"] == "sess-42"
    assert not any(key.startswith("gen_ai.tool.") or key.startswith("gen_ai.usage.") for key in attributes)


def test_without_session_there_is_no_conversation_id(
    full_pipeline: TranscriptPipeline, otel: OTelHarness
) -> None:
    with TranscriptEmitter(prompt_name="p", adapter="a", pipeline=full_pipeline) as emitter:
        emitter.emit("user_message")
    for record in otel.finished_logs():
        attributes = attributes_of(record)
        assert "gen_ai.conversation.id" not in attributes
        assert "transcript.session_id" not in attributes
    (record,) = entries(otel.finished_logs())
    assert "transcript.detail" not in attributes_of(record)
    assert "transcript.raw" not in attributes_of(record)


@pytest.mark.parametrize(
    ("entry_type", "detail", "expected"),
    [
        pytest.param(
            "tool_use",
            {"tool_use_id": "toolu_1", "tool_name": "Read", "input": {"path": "a.py"}},
            {"gen_ai.tool.call.id": "toolu_1", "gen_ai.tool.name": "Read"},
            id="flat-keys",
        ),
        pytest.param(
            "tool_use",
            {
                "sdk_entry": {
                    "message": {
                        "content": [
                            {"type": "text", "text": "let me look"},
                            {"type": "tool_use", "id": "toolu_2", "name": "Bash", "input": {}},
                        ]
                    }
                }
            },
            {"gen_ai.tool.call.id": "toolu_2", "gen_ai.tool.name": "Bash"},
            id="claude-sdk-content-block",
        ),
        pytest.param(
            "tool_result",
            {"tool_use_id": "toolu_1", "tool_name": "Read", "content": "print('hi')"},
            {"gen_ai.tool.call.id": "toolu_1", "gen_ai.tool.name": "Read"},
            id="tool-result",
        ),
        pytest.param(
            "tool_use",
            {"notification": {"item": {"id": "call_9", "type": "mcpToolCall", "tool": "search"}}},
            {"gen_ai.tool.call.id": "call_9", "gen_ai.tool.name": "search"},
            id="codex-notification-item",
        ),
    ],
)
def test_tool_entries_carry_genai_tool_attributes(
    full_pipeline: TranscriptPipeline,
    otel: OTelHarness,
    entry_type: str,
    detail: dict[str, Any],
    expected: dict[str, str],
) -> None:
    with TranscriptEmitter(prompt_name="p", adapter="a", pipeline=full_pipeline) as emitter:
        emitter.emit(entry_type, detail=detail)
        emitter.emit("assistant_message", detail={"name": "not a tool", "tool_use_id": "nope"})
    tool, message = entries(otel.finished_logs())
    tool_attributes = attributes_of(tool)
    assert {k: v for k, v in tool_attributes.items() if k.startswith("gen_ai.tool.")} == expected
    assert not any(key.startswith("gen_ai.tool.") for key in attributes_of(message))


@pytest.mark.parametrize(
    ("detail", "expected"),
    [
        pytest.param(
            {
                "usage": {
                    "input_tokens": 120,
                    "output_tokens": 45,
                    "cache_read_input_tokens": 100,
                    "cache_creation_input_tokens": 7,
                }
            },
            {
                # Anthropic's input leaves out the cache: the record's input is the whole prompt
                "gen_ai.usage.input_tokens": 227,
                "gen_ai.usage.output_tokens": 45,
                "gen_ai.usage.cache_read.input_tokens": 100,
                "gen_ai.usage.cache_creation.input_tokens": 7,
                "gen_ai.usage.cache_write.input_tokens": 7,
            },
            id="claude-usage",
        ),
        pytest.param(
            {
                "notification": {
                    "tokenUsage": {
                        "last": {
                            "inputTokens": 10,
                            "outputTokens": 20,
                            "cachedInputTokens": 3,
                            "reasoningOutputTokens": 4,
                        },
                        "total": {"inputTokens": 999},
                    }
                }
            },
            {
                "gen_ai.usage.input_tokens": 10,
                "gen_ai.usage.output_tokens": 20,
                "gen_ai.usage.cache_read.input_tokens": 3,
                "gen_ai.usage.reasoning.output_tokens": 4,
            },
            id="codex-token-usage-last",
        ),
        pytest.param(
            {"input_tokens": 5, "output_tokens": True, "reasoning_tokens": "many"},
            {"gen_ai.usage.input_tokens": 5},
            id="flat-only-integers-count",
        ),
    ],
)
def test_token_usage_entries_carry_genai_usage(
    full_pipeline: TranscriptPipeline,
    otel: OTelHarness,
    detail: dict[str, Any],
    expected: dict[str, int],
) -> None:
    with TranscriptEmitter(prompt_name="p", adapter="a", pipeline=full_pipeline) as emitter:
        emitter.emit("token_usage", detail=detail)
        emitter.emit("assistant_message", detail={"usage": {"input_tokens": 1}})
    usage, message = entries(otel.finished_logs())
    assert {k: v for k, v in attributes_of(usage).items() if k.startswith("gen_ai.usage.")} == expected
    assert not any(key.startswith("gen_ai.usage.") for key in attributes_of(message))


def test_start_and_stop_records_carry_the_run_and_its_counts(
    full_pipeline: TranscriptPipeline, otel: OTelHarness
) -> None:
    with TranscriptEmitter(
        prompt_name="review", adapter="scripted", session_id="s1", pipeline=full_pipeline
    ) as emitter:
        emitter.emit("user_message")
        emitter.emit("assistant_message")
        emitter.emit("assistant_message", source="subagent:x")
        emitter.emit("tool_use", source="subagent:x", detail={"tool_name": "grep"})
    logs = otel.finished_logs()
    start = attributes_of(logs[0])
    stop = attributes_of(logs[-1])
    assert logs[0].log_record.event_name == "transcript.start"
    assert logs[-1].log_record.event_name == "transcript.stop"
    for attributes in (start, stop):
        assert attributes["transcript.run_id"] == emitter.run_id
        assert attributes["transcript.prompt_name"] == "review"
        assert attributes["transcript.adapter"] == "scripted"
        assert attributes["transcript.session_id"] == "s1"
        assert attributes["gen_ai.conversation.id"] == "s1"
    assert stop["transcript.total_entries"] == 4
    assert stop["transcript.dropped_entries"] == 0
    assert json.loads(stop["transcript.entries_by_type"]) == {
        "user_message": 1,
        "assistant_message": 2,
        "tool_use": 1,
    }
    assert json.loads(stop["transcript.entries_by_source"]) == {"main": 2, "subagent:x": 2}
    assert "transcript.total_entries" not in start
