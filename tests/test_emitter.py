"""`TranscriptEmitter`: the envelope, the JSONL record format, sequence numbers, lifecycle, switches."""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from opentelemetry import trace

from transcript_otel import (
    ENVELOPE_KEYS,
    EntryType,
    TranscriptEmitter,
    TranscriptPipeline,
    TranscriptSummary,
    get_pipeline,
    set_pipeline,
)
from transcript_otel.model.entries import REQUIRED_ENVELOPE_KEYS, DetailInRaw, TranscriptEvent
from transcript_otel.model.invariants import check_invariants
from transcript_otel.records.entry_record import prepare_entry
from transcript_otel.records.prepared import PreparedRecord
from transcript_otel.records.queued import QueuedItem
from transcript_otel.records.redaction import Redactor
from transcript_otel.records.run import RunInfo
from transcript_otel.sinks import JsonlMirror

from conftest import OTelHarness
from helpers import entry_contexts, run_records

ISO_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}\+00:00$")
RECORD_KEYS = ["timestamp", "level", "logger", "event", "message", "context"]
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
SESSION = "550e8400-e29b-41d4-a716-446655440000"

MakeEmitter = Callable[..., TranscriptEmitter]


@pytest.fixture
def make_emitter(jsonl_pipeline: TranscriptPipeline) -> MakeEmitter:
    def build(**options: Any) -> TranscriptEmitter:
        options.setdefault("prompt_name", "code-review")
        options.setdefault("adapter", "claude_agent_sdk")
        return TranscriptEmitter(pipeline=jsonl_pipeline, **options)

    return build


def events(records: list[dict[str, Any]]) -> list[str]:
    return [record["event"] for record in records]


def errors(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [record for record in records if record["event"] == "transcript.error"]


def parse(timestamp: str) -> datetime:
    assert ISO_UTC.match(timestamp), timestamp
    return datetime.fromisoformat(timestamp)


# -- the JSONL record format -----------------------------------------------------------


def test_record_format_of_every_event(make_emitter: MakeEmitter) -> None:
    emitter = make_emitter()
    emitter.start()
    emitter.emit("tool_use", detail={"name": "bash"})
    emitter.error("something went wrong", where="test")
    emitter.stop()
    records = run_records(emitter)
    assert events(records) == ["transcript.start", "transcript.entry", "transcript.error", "transcript.stop"]
    for record in records:
        assert list(record) == RECORD_KEYS
        assert record["logger"] == "transcript_otel"
        assert isinstance(record["context"], dict)
        parse(record["timestamp"])
    start, entry, error, stop = records
    assert [r["level"] for r in records] == ["DEBUG", "DEBUG", "WARNING", "DEBUG"]
    assert entry["message"] == "transcript entry: tool_use"
    assert entry["timestamp"] == entry["context"]["timestamp"]
    assert error["message"] == "transcript error: something went wrong"
    assert error["context"]["error"] == "something went wrong"
    assert error["context"]["where"] == "test"
    assert start["message"] == "transcript.start"
    assert stop["message"] == "transcript.stop"


def test_full_envelope_keys_order_and_types(make_emitter: MakeEmitter) -> None:
    emitter = make_emitter(session_id=SESSION)
    emitter.emit(
        "assistant_message",
        detail={"sdk_entry": {"type": "assistant", "message": {"content": "I'll analyze…"}}},
        raw='{"type": "assistant"}',
    )
    emitter.stop()
    (context,) = entry_contexts(run_records(emitter))
    assert list(context) == list(ENVELOPE_KEYS)
    assert context["prompt_name"] == "code-review"
    assert context["adapter"] == "claude_agent_sdk"
    assert context["entry_type"] == "assistant_message"
    assert context["sequence_number"] == 1
    assert type(context["sequence_number"]) is int
    assert context["source"] == "main"
    assert isinstance(context["timestamp"], str)
    parse(context["timestamp"])
    assert context["session_id"] == SESSION
    assert context["detail"] == {"sdk_entry": {"type": "assistant", "message": {"content": "I'll analyze…"}}}
    assert context["raw"] == '{"type": "assistant"}'


def test_optional_keys_absent_when_not_given(make_emitter: MakeEmitter) -> None:
    emitter = make_emitter(adapter="codex_app_server")
    emitter.emit("thinking")
    emitter.emit("thinking", detail=None, raw=None)
    emitter.stop()
    contexts = entry_contexts(run_records(emitter))
    assert len(contexts) == 2
    for context in contexts:
        assert list(context) == list(REQUIRED_ENVELOPE_KEYS)


def test_session_id_appears_in_every_record_of_the_run(make_emitter: MakeEmitter) -> None:
    with make_emitter(session_id=SESSION) as emitter:
        emitter.emit("user_message")
    for record in run_records(emitter):
        assert record["context"]["session_id"] == SESSION


def test_empty_detail_is_kept(make_emitter: MakeEmitter) -> None:
    emitter = make_emitter()
    emitter.emit("system_event", detail={})
    emitter.stop()
    (context,) = entry_contexts(run_records(emitter))
    assert context["detail"] == {}


def test_raw_dropped_when_emit_raw_false(make_emitter: MakeEmitter) -> None:
    emitter = make_emitter(emit_raw=False)
    emitter.emit("user_message", detail={"text": "hi"}, raw='{"text": "hi"}')
    emitter.stop()
    (context,) = entry_contexts(run_records(emitter))
    assert "raw" not in context
    assert context["detail"] == {"text": "hi"}


def test_raw_dropped_when_env_says_so(make_emitter: MakeEmitter, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRANSCRIPT_OTEL_EMIT_RAW", "false")
    emitter = make_emitter()
    emitter.emit("user_message", raw="line")
    explicit = make_emitter(emit_raw=True)  # the argument wins over the environment
    explicit.emit("user_message", raw="line")
    emitter.stop()
    explicit.stop()
    assert "raw" not in entry_contexts(run_records(emitter))[0]
    assert entry_contexts(run_records(explicit))[0]["raw"] == "line"


def test_raw_kept_by_default(make_emitter: MakeEmitter, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRANSCRIPT_OTEL_EMIT_RAW", raising=False)
    emitter = make_emitter()
    emitter.emit("user_message", raw="line")
    emitter.stop()
    assert entry_contexts(run_records(emitter))[0]["raw"] == "line"


# -- a detail that raw holds (DetailInRaw) ---------------------------------------------


NOTIFICATION_IN_RAW = DetailInRaw((("notification", "params"),))


def test_a_detail_in_raw_is_taken_out_of_it_with_its_constants(make_emitter: MakeEmitter) -> None:
    params = {"item": {"type": "agentMessage", "text": "café → ✓"}, "n": [1, 2.5, None, True]}
    raw = json.dumps({"method": "item/completed", "params": params})
    emitter = make_emitter()
    emitter.emit("assistant_message", detail=NOTIFICATION_IN_RAW, raw=raw)
    with_subtype = DetailInRaw(NOTIFICATION_IN_RAW.fields, (("subtype", "compaction"),))
    emitter.emit("system_event", detail=with_subtype, raw=raw)
    emitter.stop()
    records = run_records(emitter)
    first, second = entry_contexts(records)
    assert first["detail"] == {"notification": params}
    assert first["raw"] == raw
    assert list(second["detail"]) == ["notification", "subtype"]
    assert second["detail"] == {"notification": params, "subtype": "compaction"}
    assert errors(records) == []


def prepared_from_raw(raw: str | bytes) -> PreparedRecord:
    """The record the writer builds for an entry whose detail is the notification in `raw`."""
    item: QueuedItem = (
        TranscriptEvent.ENTRY,
        RunInfo("p", "a", None, 0),
        "tool_result",
        "main",
        0,
        NOTIFICATION_IN_RAW,
        raw,
        None,
    )
    return prepare_entry(item)


def test_a_detail_in_raw_keeps_what_orjson_would_change() -> None:
    """`json.loads`, the inverse of the `json.dumps` that made raw: NaN, a 30-digit integer and
    a lone surrogate come back as they were."""
    params = {"big": 123456789012345678901234567890, "nan": float("nan"), "lone": "\ud800x", "neg0": -0.0}
    record = prepared_from_raw(json.dumps({"method": "m", "params": params}))
    taken = record.detail["notification"]
    assert taken["big"] == params["big"]
    assert type(taken["big"]) is int
    assert math.isnan(taken["nan"])
    assert taken["lone"] == "\ud800x"
    assert math.copysign(1.0, taken["neg0"]) == -1.0


@pytest.mark.parametrize("as_bytes", [False, True])
def test_a_detail_in_raw_reports_a_nan_written_as_null_and_only_then(as_bytes: bool) -> None:
    """The writer skips the search for non-finite floats in a detail read from raw JSON that
    held no NaN or Infinity literal; one that held any is still reported."""

    def prepared(raw: str) -> PreparedRecord:
        return prepared_from_raw(raw.encode() if as_bytes else raw)

    with_nulls = prepared(json.dumps({"method": "m", "params": {"exit": None, "items": [None, 1.5]}}))
    assert orjson.loads(with_nulls.detail_json or b"") == {
        "notification": {"exit": None, "items": [None, 1.5]}
    }
    assert with_nulls.problems == []
    for literal in ("NaN", "Infinity", "-Infinity"):
        with_constant = prepared(f'{{"method": "m", "params": {{"exit": null, "ratio": [{literal}]}}}}')
        assert orjson.loads(with_constant.detail_json or b"") == {
            "notification": {"exit": None, "ratio": [None]}
        }
        assert with_constant.problems == ["detail: NaN or infinite floats were written as null"]


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ('{"method": "m"}', "KeyError: 'params'"),
        ("not json", "JSONDecodeError"),
        ("[1, 2]", "TypeError"),
    ],
)
def test_a_detail_missing_from_raw_is_reported_and_raw_kept(
    make_emitter: MakeEmitter, raw: str, reason: str
) -> None:
    emitter = make_emitter()
    emitter.emit("system_event", detail=DetailInRaw(NOTIFICATION_IN_RAW.fields, (("subtype", "x"),)), raw=raw)
    emitter.emit("thinking", detail={"after": True})
    emitter.stop()
    records = run_records(emitter)
    first, second = entry_contexts(records)
    assert first["detail"] == {"subtype": "x"}
    assert first["raw"] == raw
    assert second["detail"] == {"after": True}
    (error,) = errors(records)
    assert error["context"]["error"].startswith(f"detail: not found in raw: {reason}")
    assert error["context"]["sequence_number"] == 1


def test_emission_false_writes_nothing(make_emitter: MakeEmitter, runs_dir: Path) -> None:
    with make_emitter(emission=False) as emitter:
        emitter.emit("user_message", detail={"text": "hi"})
        emitter.error("ignored")
    assert not emitter.enabled
    assert emitter.jsonl_path is None
    assert emitter.stop().total_entries == 0
    assert not runs_dir.exists() or not any(runs_dir.iterdir())


def test_emission_env_false_writes_nothing(
    make_emitter: MakeEmitter, runs_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRANSCRIPT_OTEL_EMISSION", "false")
    with make_emitter() as emitter:
        emitter.emit("user_message")
    assert not emitter.enabled
    assert not runs_dir.exists() or not any(runs_dir.iterdir())


def test_emission_argument_wins_over_env(make_emitter: MakeEmitter, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRANSCRIPT_OTEL_EMISSION", "0")
    with make_emitter(emission=True) as emitter:
        emitter.emit("user_message")
    assert emitter.enabled
    assert len(entry_contexts(run_records(emitter))) == 1


# -- entry types -----------------------------------------------------------------------


@pytest.mark.parametrize("entry_type", list(EntryType))
def test_each_canonical_entry_type(make_emitter: MakeEmitter, entry_type: EntryType) -> None:
    emitter = make_emitter(session_id=SESSION)
    emitter.emit(entry_type.value, detail={"k": entry_type.value}, raw="r")
    emitter.stop()
    records = run_records(emitter)
    assert errors(records) == []
    (entry,) = [r for r in records if r["event"] == "transcript.entry"]
    assert entry["level"] == "DEBUG"
    assert entry["message"] == f"transcript entry: {entry_type.value}"
    context = entry["context"]
    assert list(context) == list(ENVELOPE_KEYS)
    assert context["entry_type"] == entry_type.value
    assert context["detail"] == {"k": entry_type.value}
    assert context["sequence_number"] == 1
    # The line is compact JSON, byte for byte what encoding the record in one piece gives.
    assert emitter.jsonl_path is not None
    lines = Path(emitter.jsonl_path).read_bytes().splitlines()
    (line,) = [line for line in lines if b'"event":"transcript.entry"' in line]
    assert line == orjson.dumps(entry)


def test_an_entry_line_escapes_what_json_must(make_emitter: MakeEmitter) -> None:
    emitter = make_emitter(session_id=SESSION, prompt_name='say "hi"\n→')
    emitter.emit("assistant_message", detail={"text": 'quote " and \u001b → 🚀'}, raw='{"a": "\\"}')
    emitter.stop()
    assert emitter.jsonl_path is not None
    lines = Path(emitter.jsonl_path).read_bytes().splitlines()
    (line,) = [line for line in lines if b'"event":"transcript.entry"' in line]
    entry = json.loads(line)
    assert line == orjson.dumps(entry)
    assert entry["context"]["prompt_name"] == 'say "hi"\n→'
    assert entry["context"]["detail"] == {"text": 'quote " and \u001b → 🚀'}
    assert entry["context"]["raw"] == '{"a": "\\"}'


def test_entry_type_enum_member_is_accepted(make_emitter: MakeEmitter) -> None:
    emitter = make_emitter()
    emitter.emit(EntryType.TOOL_RESULT, detail={"ok": True})
    emitter.stop()
    records = run_records(emitter)
    assert errors(records) == []
    assert entry_contexts(records)[0]["entry_type"] == "tool_result"


def test_non_canonical_entry_type_becomes_unknown(make_emitter: MakeEmitter) -> None:
    emitter = make_emitter()
    emitter.emit("user_message")
    emitter.emit("assistant", detail={"sdk_entry": {"type": "assistant"}}, source="subagent:x")
    emitter.emit("compaction")
    emitter.stop()
    records = run_records(emitter)
    contexts = entry_contexts(records)
    assert [c["entry_type"] for c in contexts] == ["user_message", "unknown", "unknown"]
    assert contexts[1]["detail"] == {"sdk_entry": {"type": "assistant"}, "original_entry_type": "assistant"}
    assert contexts[2]["detail"] == {"original_entry_type": "compaction"}
    found = errors(records)
    assert len(found) == 2
    first, second = found
    assert first["level"] == "WARNING"
    assert "'assistant' is not canonical" in first["context"]["error"]
    assert first["context"]["entry_type"] == "unknown"
    assert first["context"]["source"] == "subagent:x"
    assert first["context"]["sequence_number"] == 1
    assert "'compaction' is not canonical" in second["context"]["error"]
    assert second["context"]["sequence_number"] == 2
    summary = emitter.stop()
    assert summary.entries_by_type == {"user_message": 1, "unknown": 2}


# -- sequence numbers and timestamps ---------------------------------------------------


def test_sequence_numbers_start_at_one_per_source(make_emitter: MakeEmitter) -> None:
    emitter = make_emitter()
    plan = ["main", "subagent:a", "main", "subagent:b", "subagent:a", "main", "subagent:a"]
    for source in plan:
        emitter.emit("assistant_message", source=source)
    emitter.stop()
    got = [(c["source"], c["sequence_number"]) for c in entry_contexts(run_records(emitter))]
    assert got == [
        ("main", 1),
        ("subagent:a", 1),
        ("main", 2),
        ("subagent:b", 1),
        ("subagent:a", 2),
        ("main", 3),
        ("subagent:a", 3),
    ]


def test_default_source_is_main(make_emitter: MakeEmitter) -> None:
    emitter = make_emitter()
    emitter.emit("user_message")
    emitter.stop()
    assert entry_contexts(run_records(emitter))[0]["source"] == "main"


def test_separate_emitters_have_separate_sequences(make_emitter: MakeEmitter) -> None:
    first = make_emitter(prompt_name="one")
    second = make_emitter(prompt_name="two")
    for _ in range(3):
        first.emit("user_message")
        second.emit("user_message")
    first.stop()
    second.stop()
    for emitter in (first, second):
        assert [c["sequence_number"] for c in entry_contexts(run_records(emitter))] == [1, 2, 3]


def test_an_entry_stamped_before_the_last_of_its_source_takes_that_time(make_emitter: MakeEmitter) -> None:
    """Timestamps never go back within a source (invariant 7): an entry stamped earlier than
    the one queued before it in its source (recorded late, or its thread switched out between
    stamping and queueing) takes that entry's time; other sources keep their own."""
    emitter = make_emitter()
    now = time.time_ns()
    emitter.emit("user_message", timestamp_ns=now)
    emitter.emit("assistant_message", timestamp_ns=now - 5_000_000)
    emitter.emit("thinking", source="subagent:a", timestamp_ns=now - 9_000_000)
    emitter.emit("tool_use", timestamp_ns=now + 1_000)
    summary = emitter.stop()
    records = run_records(emitter)
    stamps = [(c["entry_type"], c["sequence_number"], parse(c["timestamp"])) for c in entry_contexts(records)]
    at = EPOCH + timedelta(microseconds=now // 1000)
    assert stamps == [
        ("user_message", 1, at),
        ("assistant_message", 2, at),
        ("thinking", 1, EPOCH + timedelta(microseconds=(now - 9_000_000) // 1000)),
        ("tool_use", 3, EPOCH + timedelta(microseconds=(now + 1_000) // 1000)),
    ]
    assert check_invariants(records) == []
    # The run spans from its earliest entry to its latest, whatever their queue order.
    assert summary.first_timestamp == stamps[2][2]
    assert summary.last_timestamp == stamps[3][2]


def test_timestamps_are_utc_iso_and_captured_at_emit(make_emitter: MakeEmitter) -> None:
    emitter = make_emitter()
    windows: list[tuple[int, int]] = []
    for index in range(50):
        before = time.time_ns()
        emitter.emit("assistant_message", source="main" if index % 2 else "subagent:a")
        windows.append((before, time.time_ns()))
    emitter.stop()
    contexts = entry_contexts(run_records(emitter))
    assert len(contexts) == 50
    for context, (before, after) in zip(contexts, windows, strict=True):
        moment = parse(context["timestamp"])
        assert moment.utcoffset() is not None
        assert moment.utcoffset().total_seconds() == 0  # type: ignore[union-attr]
        micros = (moment - EPOCH) // timedelta(microseconds=1)
        assert before // 1000 <= micros <= after // 1000 + 1
    for source in ("main", "subagent:a"):
        stamps = [parse(c["timestamp"]) for c in contexts if c["source"] == source]
        assert stamps == sorted(stamps)


def test_trace_and_span_ids_only_when_a_span_is_active(make_emitter: MakeEmitter, otel: OTelHarness) -> None:
    emitter = make_emitter(session_id=SESSION)
    emitter.emit("user_message", detail={"n": 1}, raw="x")
    with otel.tracer.start_as_current_span("turn") as span:
        emitter.emit("assistant_message", detail={"n": 2}, raw="y")
        span_context = span.get_span_context()
    emitter.emit("user_message")
    emitter.stop()
    outside, inside, after = entry_contexts(run_records(emitter))
    assert "trace_id" not in outside
    assert "span_id" not in outside
    assert "trace_id" not in after
    assert list(inside) == [*ENVELOPE_KEYS, "trace_id", "span_id"]
    assert inside["trace_id"] == format(span_context.trace_id, "032x")
    assert inside["span_id"] == format(span_context.span_id, "016x")


def test_lifecycle_records_carry_trace_ids_of_their_span(
    make_emitter: MakeEmitter, otel: OTelHarness
) -> None:
    with otel.tracer.start_as_current_span("run") as span:
        with make_emitter() as emitter:
            emitter.emit("user_message")
        trace_id = format(span.get_span_context().trace_id, "032x")
    for record in run_records(emitter):
        assert record["context"]["trace_id"] == trace_id


# -- lifecycle -------------------------------------------------------------------------


def test_start_and_stop_records_and_summary(make_emitter: MakeEmitter) -> None:
    emitter = make_emitter(session_id=SESSION)
    emitter.start()
    emitter.emit("user_message")
    emitter.emit("assistant_message")
    emitter.emit("tool_use", source="subagent:7")
    emitter.emit("tool_result", source="subagent:7")
    emitter.emit("assistant_message")
    summary = emitter.stop()
    records = run_records(emitter)
    assert events(records)[0] == "transcript.start"
    assert events(records)[-1] == "transcript.stop"
    start = records[0]["context"]
    assert start == {
        "prompt_name": "code-review",
        "adapter": "claude_agent_sdk",
        "session_id": SESSION,
        "run_id": emitter.run_id,
    }
    stop = records[-1]["context"]
    assert stop["total_entries"] == 5
    assert stop["entries_by_source"] == {"main": 3, "subagent:7": 2}
    assert stop["entries_by_type"] == {
        "user_message": 1,
        "assistant_message": 2,
        "tool_use": 1,
        "tool_result": 1,
    }
    assert stop["dropped_entries"] == 0
    assert stop["run_id"] == emitter.run_id
    assert isinstance(summary, TranscriptSummary)
    assert summary.total_entries == 5
    assert summary.entries_by_source == stop["entries_by_source"]
    assert summary.entries_by_type == stop["entries_by_type"]
    assert summary.sources == ("main", "subagent:7")
    assert summary.adapter == "claude_agent_sdk"
    assert summary.prompt_name == "code-review"


def test_stop_summary_timestamps_match_the_transcript(
    make_emitter: MakeEmitter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The summary's first/last timestamps are those of the first and last entries written.

    The clock is pinned to 999 ns past a microsecond so that rounding and truncating
    to microseconds give different answers deterministically.
    """
    import transcript_otel.capture.emitter as emitter_module

    class PinnedClock:
        @staticmethod
        def time_ns() -> int:
            return time.time_ns() // 1000 * 1000 + 999

    monkeypatch.setattr(emitter_module, "time", PinnedClock)
    emitter = make_emitter()
    emitter.emit("user_message")
    emitter.emit("assistant_message")
    summary = emitter.stop()
    contexts = entry_contexts(run_records(emitter))
    assert summary.first_timestamp == datetime.fromisoformat(contexts[0]["timestamp"])
    assert summary.last_timestamp == datetime.fromisoformat(contexts[-1]["timestamp"])


def test_stop_is_idempotent(make_emitter: MakeEmitter) -> None:
    emitter = make_emitter()
    emitter.start()
    emitter.start()
    emitter.emit("user_message")
    first = emitter.stop()
    second = emitter.stop()
    assert first == second
    assert first.total_entries == 1
    assert events(run_records(emitter)) == ["transcript.start", "transcript.entry", "transcript.stop"]


def test_after_stop_an_entry_or_a_start_is_refused_and_said(make_emitter: MakeEmitter) -> None:
    emitter = make_emitter()
    emitter.start()
    emitter.emit("user_message", detail={"text": "kept"})
    summary = emitter.stop()
    emitter.emit("assistant_message", detail={"text": "too late"})
    emitter.start()
    assert emitter.flush()
    records = run_records(emitter)
    assert events(records) == [
        "transcript.start",
        "transcript.entry",
        "transcript.stop",
        "transcript.error",
        "transcript.error",
    ]
    assert records[2]["context"]["total_entries"] == summary.total_entries == 1  # still true
    assert [r["context"]["error"] for r in records[3:]] == [
        "a 'assistant_message' entry emitted after stop() was refused: the run has ended",
        "start() after stop() does nothing: an emitter records one run; make another for the next",
    ]
    assert check_invariants(records) == []


def test_a_mapping_queued_before_stop_records_before_it_and_one_after_is_refused(
    make_emitter: MakeEmitter,
) -> None:
    """An instrumentor that maps its harness's events on the writer (`map_on_writer`) may end
    the run on the agent's thread before the writer has mapped them: what was queued before
    `stop()` still lands, in its place before `transcript.stop`; what comes after is said."""
    emitter = make_emitter()
    emitter.start()

    def mapping(text: str) -> Callable[[], None]:
        return lambda: emitter.emit("assistant_message", detail={"text": text})

    emitter.map_on_writer(mapping("mapped before stop"), "native")
    emitter.emit("user_message", detail={"text": "emitted after it"})
    summary = emitter.stop()
    emitter.map_on_writer(mapping("too late"), "native")
    assert emitter.flush()
    records = run_records(emitter)
    assert events(records) == [
        "transcript.start",
        "transcript.entry",
        "transcript.entry",
        "transcript.stop",
        "transcript.error",
    ]
    assert [r["context"]["detail"]["text"] for r in records[1:3]] == [
        "mapped before stop",
        "emitted after it",
    ]
    assert records[3]["context"]["total_entries"] == 2
    assert summary.total_entries <= 2
    assert records[4]["context"]["error"] == (
        "an event queued for mapping after stop() was refused: the run has ended"
    )
    assert check_invariants(records) == []


def test_an_action_that_stops_the_run_on_the_writer_records_nothing_after_its_stop(
    make_emitter: MakeEmitter,
) -> None:
    emitter = make_emitter()
    emitter.start()

    def ends_the_run() -> None:
        emitter.emit("assistant_message", detail={"text": "last words"})
        emitter.stop(wait=False)
        emitter.emit("assistant_message", detail={"text": "after the end"})

    emitter.map_on_writer(ends_the_run, "native")
    assert emitter.flush()
    records = run_records(emitter)
    assert events(records) == ["transcript.start", "transcript.entry", "transcript.stop", "transcript.error"]
    assert records[1]["context"]["detail"]["text"] == "last words"
    assert records[3]["context"]["error"] == (
        "a 'assistant_message' entry emitted after stop() was refused: the run has ended"
    )
    assert check_invariants(records) == []


@pytest.mark.parametrize("source", ["bogus", 123, "subagent:"])
def test_an_invalid_source_is_recorded_as_main_and_said(make_emitter: MakeEmitter, source: Any) -> None:
    emitter = make_emitter()
    emitter.emit("user_message", detail={"text": "hi"}, source=source)
    emitter.stop()
    records = run_records(emitter)
    (entry,) = [r["context"] for r in records if r["event"] == "transcript.entry"]
    assert entry["source"] == "main"
    (error,) = [r["context"]["error"] for r in records if r["event"] == "transcript.error"]
    assert error.endswith(f"source {str(source)!r} is neither 'main' nor 'subagent:<id>': recorded as 'main'")
    assert check_invariants(records) == []  # the library passes its own validate


def test_stop_without_entries(make_emitter: MakeEmitter) -> None:
    emitter = make_emitter()
    summary = emitter.stop()
    assert summary.total_entries == 0
    assert summary.sources == ()
    assert summary.first_timestamp is None
    assert summary.last_timestamp is None
    (stop,) = run_records(emitter)
    assert stop["event"] == "transcript.stop"
    assert stop["context"]["total_entries"] == 0
    assert stop["context"]["entries_by_type"] == {}


def test_context_manager(make_emitter: MakeEmitter) -> None:
    with make_emitter() as emitter:
        assert isinstance(emitter, TranscriptEmitter)
        emitter.emit("user_message")
    assert events(run_records(emitter)) == ["transcript.start", "transcript.entry", "transcript.stop"]


def test_context_manager_stops_on_exception(make_emitter: MakeEmitter) -> None:
    emitter = make_emitter()

    def agent() -> None:
        with emitter:
            emitter.emit("user_message")
            raise KeyError("agent failure")

    with pytest.raises(KeyError, match="agent failure"):
        agent()
    assert events(run_records(emitter)) == ["transcript.start", "transcript.entry", "transcript.stop"]


def test_summary_dates_are_utc(make_emitter: MakeEmitter) -> None:
    emitter = make_emitter()
    emitter.emit("user_message")
    summary = emitter.stop()
    assert summary.first_timestamp is not None
    assert summary.first_timestamp.tzinfo is not None
    assert summary.first_timestamp.utcoffset() == UTC.utcoffset(None)


def test_error_method_records_a_warning(make_emitter: MakeEmitter) -> None:
    emitter = make_emitter(session_id=SESSION)
    emitter.error("collector lost its file", path="/x.jsonl", attempts=3)
    emitter.stop()
    (error,) = errors(run_records(emitter))
    assert error["level"] == "WARNING"
    assert error["context"] == {
        "prompt_name": "code-review",
        "adapter": "claude_agent_sdk",
        "session_id": SESSION,
        "run_id": emitter.run_id,
        "error": "collector lost its file",
        "path": "/x.jsonl",
        "attempts": 3,
    }


def test_identity_properties(make_emitter: MakeEmitter, runs_dir: Path) -> None:
    emitter = make_emitter()
    other = make_emitter()
    assert re.fullmatch(r"[0-9a-f]{32}", emitter.run_id)
    assert emitter.run_id != other.run_id
    assert emitter.jsonl_path is not None
    assert Path(emitter.jsonl_path).parent == runs_dir
    assert emitter.dropped_entries == 0
    assert emitter.enabled


def test_flush_writes_everything_emitted_so_far(make_emitter: MakeEmitter) -> None:
    emitter = make_emitter()
    for index in range(300):
        emitter.emit("assistant_message", detail={"i": index})
    assert emitter.flush() is True
    contexts = entry_contexts(run_records(emitter))
    assert [c["detail"]["i"] for c in contexts] == list(range(300))


def test_default_pipeline_is_used_without_argument(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import transcript_otel.capture.defaults as defaults

    monkeypatch.setattr(defaults, "_pipeline", None)  # the original default comes back after the test
    pipeline = TranscriptPipeline([JsonlMirror(tmp_path / "default")])
    assert set_pipeline(pipeline) is None
    try:
        assert get_pipeline() is pipeline
        with TranscriptEmitter(prompt_name="p", adapter="a") as emitter:
            emitter.emit("user_message")
        assert emitter.jsonl_path is not None
        assert Path(emitter.jsonl_path).parent == tmp_path / "default"
        assert len(entry_contexts(run_records(emitter))) == 1
    finally:
        pipeline.shutdown(5.0)


def test_a_prepared_entry_holds_each_part_where_the_sinks_read_it() -> None:
    """The record is built positionally on the writer (for speed): every field in its place."""
    span_context = trace.SpanContext(0xABC, 0xDEF, is_remote=False, trace_flags=trace.TraceFlags(1))
    context = trace.set_span_in_context(trace.NonRecordingSpan(span_context))
    run = RunInfo("p", "a", "s", 0)
    redactor = Redactor()
    detail = {"text": "hi"}
    item: QueuedItem = (TranscriptEvent.ENTRY, run, "user_message", "main", 1_000, detail, "raw", context)
    record = prepare_entry(item, redactor)
    assert record.event is TranscriptEvent.ENTRY
    assert record.run is run
    assert record.timestamp_ns == 1_000
    assert record.timestamp == "1970-01-01T00:00:00.000001+00:00"
    assert record.context["raw"] == "raw"
    assert record.context["sequence_number"] == 1
    assert record.detail_json == b'{"text":"hi"}'
    assert record.detail == {"text": "hi"}
    assert record.detail_is_json is True
    assert record.redactor is redactor
    assert record.otel_context is context
    assert record.problems == []
    assert (record.trace_id, record.span_id) == (0xABC, 0xDEF)
    assert record.otel_attributes is None
