"""Exact round trip: emitter → OTel log records → real OTLP encoding → entries.

The log records of a run are encoded by the OTLP exporter's own encoder
(`encode_logs`), serialized to protobuf bytes, parsed back into an
`ExportLogsServiceRequest`, read by `records_from_otlp` and reconstructed. The
result must equal, type for type, the entries reconstructed from the JSONL
mirror of the same run and what was emitted. The OTLP/JSON form round-trips too.
"""

from __future__ import annotations

import base64
import importlib
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")
pytest.importorskip("opentelemetry.exporter.otlp.proto.common")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from transcript_otel import (
    CANONICAL_ENTRY_TYPES,
    TranscriptEmitter,
    TranscriptPipeline,
    check_invariants,
    reconstruct_transcript,
    records_from_otlp,
)

from conftest import OTelHarness
from helpers import run_records, strict

# (entry_type, source, detail, raw): every JSON type, nesting, unicode, empty containers.
RUN: list[tuple[str, str, dict[str, Any] | None, str | None]] = [
    (
        "user_message",
        "main",
        {
            "text": 'Review this diff: naïve café ☃ 日本語 🎉 \n\t"quoted" \\ back',
            "attachments": [],
            "options": {},
        },
        '{"type":"user","message":{"content":"Review this diff"}}',
    ),
    (
        "assistant_message",
        "main",
        {
            "floats": [0.1, -2.5, 1e-300, 1.7976931348623157e308, -0.0, 3.0, 6.02214076e23],
            "ints": [0, 1, -1, 2**31, 2**53 + 1, 2**63 - 1, -(2**63), 2**64 - 1],
            "bools": [True, False],
            "none": None,
            "nested": {"a": {"b": {"c": [1, [2, [3, {"d": None}]], {}]}}},
            "mixed": [1, 1.0, "1", True, None, {"k": []}],
        },
        "plain native text with unicode ünïcödé and a NUL-free\nnewline",
    ),
    (
        "tool_use",
        "main",
        {"tool_use_id": "toolu_01", "tool_name": "Bash", "input": {"command": "ls -la", "timeout": 30}},
        None,
    ),
    (
        "tool_result",
        "main",
        {"tool_use_id": "toolu_01", "content": "total 0\n", "is_error": False, "exit_code": 0},
        "",
    ),
    ("thinking", "subagent:reviewer-1", {"text": "hmm…", "signature": ""}, None),
    ("system_event", "subagent:reviewer-1", None, None),
    ("token_usage", "main", {"usage": {"input_tokens": 1200, "output_tokens": 345}}, None),
    ("assistant_message", "subagent:reviewer-1", {}, "{}"),
    ("error", "main", {"message": "rate limited", "retry_after_s": 1.5}, None),
    ("unknown", "main", {"original": {"weird": [None]}}, None),
]


def expected_entries(
    emitter: TranscriptEmitter,
    emitted: list[tuple[str, str, dict[str, Any] | None, str | None]],
    timestamps: list[str],
    session_id: str | None,
) -> list[tuple[Any, ...]]:
    counters: dict[str, int] = {}
    rows = []
    for (entry_type, source, detail, raw), timestamp in zip(emitted, timestamps, strict=True):
        counters[source] = counters.get(source, 0) + 1
        rows.append(
            (
                "review",
                "scripted",
                entry_type,
                counters[source],
                source,
                timestamp,
                session_id,
                json.dumps(detail or {}, ensure_ascii=False),
                raw,
            )
        )
    return sorted(rows, key=lambda row: (row[4], row[3]))


def encode_and_parse(batch: list[Any]) -> ExportLogsServiceRequest:
    """What goes over the wire: the exporter's encoder, protobuf bytes, parsed back."""
    wire = encode_logs(batch).SerializeToString()
    assert isinstance(wire, bytes)
    request: ExportLogsServiceRequest = ExportLogsServiceRequest.FromString(wire)
    return request


def message_to_dict(message: Any) -> dict[str, Any]:
    """`google.protobuf.json_format.MessageToDict` (protobuf ships no type stubs)."""
    json_format = importlib.import_module("google.protobuf.json_format")
    as_dict: dict[str, Any] = json_format.MessageToDict(message)
    return as_dict


def emit_run(
    pipeline: TranscriptPipeline,
    otel: OTelHarness,
    run: list[tuple[str, str, dict[str, Any] | None, str | None]],
    *,
    session_id: str | None = "sess-rt",
) -> tuple[TranscriptEmitter, list[Any], int]:
    """Emit `run` inside a span; return the emitter, its log records and the span's trace id."""
    with (
        otel.tracer.start_as_current_span("agent-run") as span,
        TranscriptEmitter(
            prompt_name="review", adapter="scripted", session_id=session_id, pipeline=pipeline
        ) as emitter,
    ):
        for entry_type, source, detail, raw in run:
            emitter.emit(entry_type, source=source, detail=detail, raw=raw)
    logs = [
        record
        for record in otel.finished_logs()
        if record.log_record.attributes.get("transcript.run_id") == emitter.run_id
    ]
    return emitter, logs, span.get_span_context().trace_id


@pytest.fixture
def roundtrip(
    full_pipeline: TranscriptPipeline, otel: OTelHarness
) -> tuple[TranscriptEmitter, list[Any], int, list[dict[str, Any]]]:
    emitter, logs, trace_id = emit_run(full_pipeline, otel, RUN)
    return emitter, logs, trace_id, run_records(emitter)


def test_protobuf_round_trip_is_exact(
    roundtrip: tuple[TranscriptEmitter, list[Any], int, list[dict[str, Any]]],
) -> None:
    emitter, logs, _, jsonl = roundtrip
    request = encode_and_parse(logs)
    otlp_records = list(records_from_otlp([request]))
    assert [r["event"] for r in otlp_records] == (
        ["transcript.start"] + ["transcript.entry"] * len(RUN) + ["transcript.stop"]
    )
    from_otlp = reconstruct_transcript(otlp_records)
    from_jsonl = reconstruct_transcript(jsonl)
    assert len(from_otlp) == len(RUN)
    assert from_otlp == from_jsonl
    assert strict(from_otlp) == strict(from_jsonl)
    timestamps = [r["context"]["timestamp"] for r in jsonl if r["event"] == "transcript.entry"]
    assert strict(from_otlp) == expected_entries(emitter, RUN, timestamps, "sess-rt")
    # Every envelope value has its JSON type, not just an equal value.
    by_seq = {(e.source, e.sequence_number): e for e in from_otlp}
    numbers = by_seq[("main", 2)].detail
    assert [type(v) for v in numbers["ints"]] == [int] * 8
    assert [type(v) for v in numbers["floats"]] == [float] * 7
    assert numbers["bools"] == [True, False]
    assert [type(v) for v in numbers["bools"]] == [bool, bool]
    assert by_seq[("main", 4)].raw == ""
    assert by_seq[("main", 3)].raw is None


def test_levels_events_and_trace_ids_survive_the_encoding(
    roundtrip: tuple[TranscriptEmitter, list[Any], int, list[dict[str, Any]]],
) -> None:
    _, logs, trace_id, jsonl = roundtrip
    otlp_records = list(records_from_otlp([encode_and_parse(logs)]))
    assert len(otlp_records) == len(jsonl)
    for from_otlp, from_jsonl in zip(otlp_records, jsonl, strict=True):
        assert from_otlp["event"] == from_jsonl["event"]
        assert from_otlp["level"] == from_jsonl["level"]
        assert from_otlp["message"] == from_jsonl["message"]
        assert from_otlp["context"]["trace_id"] == from_jsonl["context"]["trace_id"] == f"{trace_id:032x}"
        assert from_otlp["context"]["span_id"] == from_jsonl["context"]["span_id"]
    stop_otlp, stop_jsonl = otlp_records[-1]["context"], jsonl[-1]["context"]
    for key in ("total_entries", "entries_by_type", "entries_by_source", "dropped_entries", "run_id"):
        assert stop_otlp[key] == stop_jsonl[key], key
    assert check_invariants(otlp_records, expected_adapter="scripted") == []


def test_every_container_level_of_a_request_reads_the_same(
    roundtrip: tuple[TranscriptEmitter, list[Any], int, list[dict[str, Any]]],
) -> None:
    _, logs, _, _ = roundtrip
    request = encode_and_parse(logs)
    reference = list(records_from_otlp([request]))
    scope_logs = [scope for resource in request.resource_logs for scope in resource.scope_logs]
    log_records = [record for scope in scope_logs for record in scope.log_records]
    assert list(records_from_otlp(request.resource_logs)) == reference
    assert list(records_from_otlp(scope_logs)) == reference
    assert list(records_from_otlp(log_records)) == reference


def test_otlp_json_round_trip_is_exact(
    roundtrip: tuple[TranscriptEmitter, list[Any], int, list[dict[str, Any]]],
) -> None:
    _, logs, _, jsonl = roundtrip
    as_dict = message_to_dict(encode_and_parse(logs))
    over_the_wire = json.loads(json.dumps(as_dict))
    from_jsonl = reconstruct_transcript(jsonl)
    for message in (as_dict, over_the_wire):
        from_json = reconstruct_transcript(records_from_otlp([message]))
        assert from_json == from_jsonl
        assert strict(from_json) == strict(from_jsonl)


def _hex_ids(message: Any) -> Any:
    """OTLP/JSON encodes traceId/spanId as hex, where protobuf's JSON mapping uses base64."""
    if isinstance(message, dict):
        return {
            key: base64.b64decode(value).hex() if key in ("traceId", "spanId") else _hex_ids(value)
            for key, value in message.items()
        }
    if isinstance(message, list):
        return [_hex_ids(item) for item in message]
    return message


def test_otlp_json_with_hex_ids_keeps_trace_correlation(
    roundtrip: tuple[TranscriptEmitter, list[Any], int, list[dict[str, Any]]],
) -> None:
    _, logs, trace_id, jsonl = roundtrip
    otlp_json = _hex_ids(message_to_dict(encode_and_parse(logs)))
    records = list(records_from_otlp([otlp_json]))
    assert [r["context"]["trace_id"] for r in records] == [f"{trace_id:032x}"] * len(jsonl)
    assert [r["context"]["span_id"] for r in records] == [r["context"]["span_id"] for r in jsonl]
    assert reconstruct_transcript(records) == reconstruct_transcript(jsonl)


def test_protobuf_json_mapping_ids_are_read_as_hex(
    roundtrip: tuple[TranscriptEmitter, list[Any], int, list[dict[str, Any]]],
) -> None:
    """`MessageToDict` (protobuf's JSON mapping) gives base64 ids; the records must still say hex.

    The JSONL mirror and the protobuf path both give 32/16 hex digits; the same
    export read through `MessageToDict` has to correlate the same way.
    """
    _, logs, trace_id, jsonl = roundtrip
    records = list(records_from_otlp([message_to_dict(encode_and_parse(logs))]))
    assert [r["context"].get("trace_id") for r in records] == [f"{trace_id:032x}"] * len(jsonl)
    assert [r["context"].get("span_id") for r in records] == [r["context"]["span_id"] for r in jsonl]


def test_records_without_a_span_have_no_ids_after_the_round_trip(
    full_pipeline: TranscriptPipeline, otel: OTelHarness
) -> None:
    with TranscriptEmitter(prompt_name="review", adapter="scripted", pipeline=full_pipeline) as emitter:
        emitter.emit("user_message", detail={"text": "no span"})
    request = encode_and_parse(otel.finished_logs())
    for message in (request, message_to_dict(request)):
        (record,) = (r for r in records_from_otlp([message]) if r["event"] == "transcript.entry")
        assert "trace_id" not in record["context"]
        assert "span_id" not in record["context"]
        assert "session_id" not in record["context"]
    assert reconstruct_transcript(records_from_otlp([request])) == reconstruct_transcript(
        run_records(emitter)
    )


def test_integers_beyond_64_bits_round_trip(full_pipeline: TranscriptPipeline, otel: OTelHarness) -> None:
    """Python ints of any size are valid JSON numbers; reading them back must not turn them into floats."""
    detail = {"big": 2**64, "negative": -(2**63) - 1, "huge": 10**30}
    emitter, logs, _ = emit_run(full_pipeline, otel, [("system_event", "main", detail, None)])
    (from_otlp,) = reconstruct_transcript(records_from_otlp([encode_and_parse(logs)]))
    (from_jsonl,) = reconstruct_transcript(run_records(emitter))
    assert json.dumps(from_jsonl.detail) == json.dumps(detail)
    assert json.dumps(from_otlp.detail) == json.dumps(detail)


_json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=["Cs"]), max_size=40)
)
_json_values = st.recursive(
    _json_scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.text(st.characters(exclude_categories=["Cs"]), max_size=10), children, max_size=4
        )
    ),
    max_leaves=25,
)
_details = st.dictionaries(st.text(st.characters(exclude_categories=["Cs"]), max_size=12), _json_values)
_entries = st.lists(
    st.tuples(
        st.sampled_from(sorted(CANONICAL_ENTRY_TYPES)),
        st.sampled_from(["main", "subagent:a", "subagent:ü"]),
        st.none() | _details,
        st.none() | st.text(st.characters(exclude_categories=["Cs"]), max_size=60),
    ),
    min_size=1,
    max_size=6,
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(run=_entries, session_id=st.none() | st.text(st.characters(exclude_categories=["Cs"]), max_size=20))
def test_any_json_detail_round_trips_through_protobuf(
    full_pipeline: TranscriptPipeline,
    otel: OTelHarness,
    runs_dir: Path,
    run: list[tuple[str, str, dict[str, Any] | None, str | None]],
    session_id: str | None,
) -> None:
    emitter, logs, _ = emit_run(full_pipeline, otel, run, session_id=session_id)
    jsonl = run_records(emitter)
    from_otlp = reconstruct_transcript(records_from_otlp([encode_and_parse(logs)]))
    from_json = reconstruct_transcript(records_from_otlp([message_to_dict(encode_and_parse(logs))]))
    from_jsonl = reconstruct_transcript(jsonl)
    assert strict(from_otlp) == strict(from_jsonl) == strict(from_json)
    timestamps = [r["context"]["timestamp"] for r in jsonl if r["event"] == "transcript.entry"]
    assert strict(from_otlp) == expected_entries(emitter, run, timestamps, session_id)
