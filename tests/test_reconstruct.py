"""Reading a transcript back: JSONL → records → `TranscriptEntry` → `TranscriptSummary`."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from transcript_otel import (
    EntryType,
    TranscriptEmitter,
    TranscriptEntry,
    TranscriptPipeline,
    TranscriptReadWarning,
    TranscriptSummary,
    read_located_records,
    read_records,
    reconstruct_transcript,
    summarize,
)
from transcript_otel.reading.reconstruct import entry_from_context

from helpers import run_records

SESSION = "660e8400-e29b-41d4-a716-446655440001"


def emitted_run(pipeline: TranscriptPipeline) -> tuple[TranscriptEmitter, list[dict[str, Any]]]:
    """Emit a varied run; return the emitter and what was passed to each emit()."""
    calls: list[dict[str, Any]] = []
    emitter = TranscriptEmitter(
        prompt_name="code-review", adapter="claude_agent_sdk", session_id=SESSION, pipeline=pipeline
    )
    with emitter:
        for index, entry_type in enumerate(EntryType):
            call: dict[str, Any] = {
                "entry_type": entry_type.value,
                "source": "main" if index % 3 else f"subagent:{index % 2}",
                "detail": {
                    "sdk_entry": {
                        "type": entry_type.value,
                        "message": {"content": [{"text": f"ünï {index} ✓"}]},
                    },
                    "n": index,
                    "float": index / 3,
                    "none": None,
                    "flags": [True, False],
                },
                "raw": json.dumps({"index": index}) if index % 2 else None,
            }
            calls.append(call)
            emitter.emit(call["entry_type"], source=call["source"], detail=call["detail"], raw=call["raw"])
        calls.append({"entry_type": "thinking", "source": "main", "detail": None, "raw": None})
        emitter.emit("thinking")
    return emitter, calls


def expected_entries(
    emitter_calls: list[dict[str, Any]], records: list[dict[str, Any]]
) -> list[TranscriptEntry]:
    """What was emitted, with the timestamps the file holds, in (source, sequence) order."""
    timestamps = [r["context"]["timestamp"] for r in records if r["event"] == "transcript.entry"]
    counters: dict[str, int] = {}
    expected = []
    for call, timestamp in zip(emitter_calls, timestamps, strict=True):
        counters[call["source"]] = counters.get(call["source"], 0) + 1
        expected.append(
            TranscriptEntry(
                prompt_name="code-review",
                adapter="claude_agent_sdk",
                entry_type=call["entry_type"],
                sequence_number=counters[call["source"]],
                source=call["source"],
                timestamp=datetime.fromisoformat(timestamp),
                session_id=SESSION,
                detail=call["detail"] or {},
                raw=call["raw"],
            )
        )
    return sorted(expected, key=lambda e: (e.source, e.sequence_number))


def test_round_trip_through_the_jsonl_mirror(jsonl_pipeline: TranscriptPipeline) -> None:
    emitter, calls = emitted_run(jsonl_pipeline)
    assert emitter.jsonl_path is not None
    records = list(read_records(emitter.jsonl_path))
    entries = reconstruct_transcript(records)
    assert entries == expected_entries(calls, records)
    keys = [(e.source, e.sequence_number) for e in entries]
    assert keys == sorted(keys)
    assert {e.source for e in entries} == {"main", "subagent:0", "subagent:1"}
    for entry in entries:
        assert entry.timestamp.tzinfo is not None
        assert entry.timestamp.utcoffset() == UTC.utcoffset(None)


def test_summarize_matches_the_emitters_counts(jsonl_pipeline: TranscriptPipeline) -> None:
    emitter, calls = emitted_run(jsonl_pipeline)
    summary = emitter.stop()
    entries = reconstruct_transcript(run_records(emitter))
    rebuilt = summarize(entries)
    assert rebuilt.total_entries == len(calls) == summary.total_entries
    assert rebuilt.entries_by_type == summary.entries_by_type
    assert rebuilt.entries_by_type["thinking"] == 2
    assert rebuilt.entries_by_source == summary.entries_by_source
    assert rebuilt.sources == summary.sources == ("main", "subagent:0", "subagent:1")
    assert rebuilt.adapter == "claude_agent_sdk"
    assert rebuilt.prompt_name == "code-review"
    assert rebuilt.first_timestamp == min(e.timestamp for e in entries)
    assert rebuilt.last_timestamp == max(e.timestamp for e in entries)


def test_summarize_by_hand() -> None:
    def at(second: int) -> datetime:
        return datetime(2024, 1, 15, 10, 30, second, tzinfo=UTC)

    entries = [
        TranscriptEntry("p", "codex_app_server", "tool_use", 1, "main", at(5)),
        TranscriptEntry("p", "codex_app_server", "tool_result", 2, "main", at(7)),
        TranscriptEntry("p", "codex_app_server", "tool_use", 3, "main", at(9)),
        TranscriptEntry("p", "codex_app_server", "thinking", 1, "subagent:z", at(1)),
    ]
    assert summarize(entries) == TranscriptSummary(
        total_entries=4,
        entries_by_type={"tool_use": 2, "tool_result": 1, "thinking": 1},
        entries_by_source={"main": 3, "subagent:z": 1},
        sources=("main", "subagent:z"),
        adapter="codex_app_server",
        prompt_name="p",
        first_timestamp=at(1),
        last_timestamp=at(9),
    )


def test_summarize_nothing() -> None:
    assert summarize([]) == TranscriptSummary(0, {}, {}, (), "", "", None, None)


def test_reconstruct_ignores_other_events_and_orders_by_source_then_sequence() -> None:
    def record(event: str, context: dict[str, Any]) -> dict[str, Any]:
        return {"event": event, "level": "DEBUG", "context": context}

    def ctx(source: str, sequence: int) -> dict[str, Any]:
        return {
            "prompt_name": "p",
            "adapter": "a",
            "entry_type": "user_message",
            "sequence_number": sequence,
            "source": source,
            "timestamp": "2024-01-15T10:30:00.000000+00:00",
        }

    records = [
        record("transcript.start", {"prompt_name": "p"}),
        record("transcript.entry", ctx("subagent:b", 2)),
        record("transcript.entry", ctx("main", 2)),
        record("transcript.error", {"error": "x"}),
        record("transcript.entry", ctx("subagent:b", 1)),
        record("transcript.entry", ctx("main", 1)),
        record("transcript.stop", {"total_entries": 4}),
        {"event": "something.else", "context": ctx("main", 9)},
    ]
    got = [(e.source, e.sequence_number) for e in reconstruct_transcript(records)]
    assert got == [("main", 1), ("main", 2), ("subagent:b", 1), ("subagent:b", 2)]


# -- reading damaged files -------------------------------------------------------------


def write_run(pipeline: TranscriptPipeline, count: int) -> Path:
    with TranscriptEmitter(prompt_name="p", adapter="a", pipeline=pipeline) as emitter:
        for index in range(count):
            emitter.emit("assistant_message", detail={"i": index})
    assert emitter.jsonl_path is not None
    return Path(emitter.jsonl_path)


def test_partial_last_line_is_skipped_with_a_warning(jsonl_pipeline: TranscriptPipeline) -> None:
    path = write_run(jsonl_pipeline, 3)
    complete = path.read_bytes()
    last_line = complete.splitlines()[-1]
    with path.open("ab") as handle:  # a writer that crashed mid-line
        handle.write(last_line[: len(last_line) // 2])
    lines = complete.count(b"\n")
    with pytest.warns(TranscriptReadWarning) as caught:
        records = list(read_records(path))
    assert [str(w.message) for w in caught] == [f"{path}:{lines + 1}: skipped partial last line"]
    assert len(records) == lines
    assert [e.detail["i"] for e in reconstruct_transcript(records)] == [0, 1, 2]


def test_corrupt_middle_line_is_skipped_with_a_warning(jsonl_pipeline: TranscriptPipeline) -> None:
    path = write_run(jsonl_pipeline, 3)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[2] = lines[2][:20] + b"\x00garbage\n"  # line 3: the second entry
    path.write_bytes(b"".join(lines))
    with pytest.warns(TranscriptReadWarning) as caught:
        located = list(read_located_records(path))
    (warning,) = caught
    assert str(warning.message).startswith(f"{path}:3: skipped invalid JSON")
    assert [location for location, _ in located] == [f"{path}:{n}" for n in (1, 2, 4, 5)]
    assert [e.detail["i"] for e in reconstruct_transcript(r for _, r in located)] == [0, 2]


@pytest.mark.parametrize("line", [b"[1, 2]", b'"text"', b"42", b"null", b"true"])
def test_non_object_lines_are_skipped_with_a_warning(tmp_path: Path, line: bytes) -> None:
    path = tmp_path / "run.jsonl"
    good = json.dumps({"event": "transcript.start", "context": {}}).encode()
    path.write_bytes(good + b"\n" + line + b"\n" + good + b"\n")
    with pytest.warns(TranscriptReadWarning) as caught:
        records = list(read_records(path))
    assert [str(w.message) for w in caught] == [f"{path}:2: skipped a line that is not a JSON object"]
    assert len(records) == 2


def test_blank_lines_are_skipped_silently_but_counted(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    good = json.dumps({"event": "transcript.start", "context": {}})
    path.write_text(f"\n{good}\n   \n{good}\n", encoding="utf-8")
    located = list(read_located_records(path))
    assert [location for location, _ in located] == [f"{path}:2", f"{path}:4"]


def test_deeply_nested_garbage_line_is_skipped_with_a_warning(tmp_path: Path) -> None:
    """A line that no JSON parser can nest that deep is still just an unreadable line."""
    path = tmp_path / "run.jsonl"
    good = json.dumps({"event": "transcript.start", "context": {}}).encode()
    path.write_bytes(good + b"\n" + b"[" * 100_000 + b"\n" + good + b"\n")
    with pytest.warns(TranscriptReadWarning, match=rf"{path.name}:2: skipped"):
        records = list(read_records(path))
    assert len(records) == 2


def test_lone_surrogate_escapes_are_read_back(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text('{"event": "x", "context": {"t": "a\\ud800b"}}\n', encoding="ascii")
    (record,) = read_records(path)
    assert record["context"]["t"] == "a\ud800b"


# -- malformed entry contexts ----------------------------------------------------------


DROP: Any = object()


def good_context(**changes: Any) -> dict[str, Any]:
    context: dict[str, Any] = {
        "prompt_name": "p",
        "adapter": "a",
        "entry_type": "user_message",
        "sequence_number": 1,
        "source": "main",
        "timestamp": "2024-01-15T10:30:00.123000+00:00",
    }
    context.update(changes)
    return {key: value for key, value in context.items() if value is not DROP}


@pytest.mark.parametrize(
    "context",
    [
        pytest.param(good_context(timestamp=DROP), id="no-timestamp"),
        pytest.param(good_context(timestamp="not a time"), id="bad-timestamp"),
        pytest.param(good_context(timestamp=12), id="timestamp-int"),
        pytest.param(good_context(sequence_number="1"), id="sequence-str"),
        pytest.param(good_context(sequence_number=True), id="sequence-bool"),
        pytest.param(good_context(sequence_number=DROP), id="no-sequence"),
        pytest.param(good_context(detail=[1, 2]), id="detail-list"),
        pytest.param(good_context(prompt_name=DROP), id="no-prompt"),
        pytest.param(good_context(source=DROP), id="no-source"),
    ],
)
def test_malformed_entries_are_skipped(context: dict[str, Any], caplog: pytest.LogCaptureFixture) -> None:
    records = [
        {"event": "transcript.entry", "context": context},
        {"event": "transcript.entry", "context": good_context(sequence_number=2)},
    ]
    with caplog.at_level(logging.WARNING, logger="transcript_otel"):
        entries = reconstruct_transcript(records)
    assert [e.sequence_number for e in entries] == [2]
    assert any("malformed transcript entry" in r.getMessage() for r in caplog.records)
    with pytest.raises(ValueError, match="malformed transcript entry"):
        entry_from_context(context)


@pytest.mark.parametrize("context", [None, "text", [1, 2]])
def test_entry_without_context_object_is_skipped(context: Any, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="transcript_otel"):
        assert reconstruct_transcript([{"event": "transcript.entry", "context": context}]) == []
    assert any("without a context object" in r.getMessage() for r in caplog.records)


def test_entry_from_context_minimal() -> None:
    entry = entry_from_context(good_context())
    assert entry == TranscriptEntry(
        prompt_name="p",
        adapter="a",
        entry_type="user_message",
        sequence_number=1,
        source="main",
        timestamp=datetime(2024, 1, 15, 10, 30, 0, 123000, tzinfo=UTC),
    )
    assert entry.to_context() == good_context()


def test_integers_beyond_64_bits_round_trip(jsonl_pipeline: TranscriptPipeline) -> None:
    """The JSONL line holds the exact digits; reading it back must not turn them into floats."""
    detail = {"id": 2**64 + 1, "negative": -(2**63) - 1, "small": 7}
    with TranscriptEmitter(prompt_name="p", adapter="a", pipeline=jsonl_pipeline) as emitter:
        emitter.emit("tool_result", detail=detail)
    assert emitter.jsonl_path is not None
    line = next(raw for raw in Path(emitter.jsonl_path).read_text().splitlines() if "transcript.entry" in raw)
    assert json.loads(line)["context"]["detail"] == detail
    (entry,) = reconstruct_transcript(read_records(emitter.jsonl_path))
    assert entry.detail == detail
