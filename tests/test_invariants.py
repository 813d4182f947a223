"""`check_invariants`: each of the seven invariants, located precisely, and clean runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from transcript_otel import (
    EntryType,
    TranscriptEmitter,
    TranscriptPipeline,
    Violation,
    check_invariants,
    read_located_records,
)

from helpers import run_records


def stamp(micros: int) -> str:
    return f"2024-01-15T10:30:00.{micros:06d}+00:00"


def entry(
    sequence_number: Any = 1,
    *,
    prompt_name: Any = "p",
    adapter: Any = "claude_agent_sdk",
    entry_type: Any = "user_message",
    source: Any = "main",
    timestamp: Any = None,
    level: str = "DEBUG",
    drop: tuple[str, ...] = (),
    **extra: Any,
) -> dict[str, Any]:
    context: dict[str, Any] = {
        "prompt_name": prompt_name,
        "adapter": adapter,
        "entry_type": entry_type,
        "sequence_number": sequence_number,
        "source": source,
        "timestamp": stamp(sequence_number if isinstance(sequence_number, int) else 0)
        if timestamp is None
        else timestamp,
        **extra,
    }
    for key in drop:
        del context[key]
    return {
        "timestamp": context.get("timestamp"),
        "level": level,
        "logger": "transcript_otel",
        "event": "transcript.entry",
        "message": f"transcript entry: {entry_type}",
        "context": context,
    }


def lifecycle(event: str, prompt_name: str = "p", level: str = "DEBUG", **fields: Any) -> dict[str, Any]:
    return {
        "timestamp": stamp(0),
        "level": level,
        "logger": "transcript_otel",
        "event": event,
        "message": event,
        "context": {"prompt_name": prompt_name, "adapter": "claude_agent_sdk", **fields},
    }


def only(violations: list[Violation]) -> Violation:
    assert len(violations) == 1, [str(v) for v in violations]
    return violations[0]


def test_valid_stream_has_no_violations() -> None:
    records = [
        lifecycle("transcript.start"),
        entry(1),
        entry(1, source="subagent:a", timestamp=stamp(1)),
        entry(2),
        entry(2, source="subagent:a", entry_type="tool_use", timestamp=stamp(3)),
        entry(3, session_id="s", detail={"x": 1}, raw="r"),
        entry(4, session_id=None, raw=None),
        lifecycle("transcript.error", level="WARNING", error="x"),
        lifecycle("transcript.stop"),
    ]
    assert check_invariants(records) == []
    assert check_invariants(records, expected_adapter="claude_agent_sdk") == []


# -- 1: envelope completeness ----------------------------------------------------------


def test_1_missing_required_keys() -> None:
    violation = only(check_invariants([entry(1, drop=("adapter", "source"))]))
    assert violation == Violation("record 1", 1, "missing required key(s) adapter, source")
    assert violation.invariant_name == "envelope completeness"


@pytest.mark.parametrize(
    "key", ["prompt_name", "adapter", "entry_type", "sequence_number", "source", "timestamp"]
)
def test_1_each_required_key_is_required(key: str) -> None:
    violation = only(check_invariants([entry(1, drop=(key,))]))
    assert (violation.invariant, violation.message) == (1, f"missing required key(s) {key}")


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("prompt_name", 5, "prompt_name is int, expected str"),
        ("adapter", None, "adapter is NoneType, expected str"),
        ("entry_type", ["user_message"], "entry_type is list, expected str"),
        ("sequence_number", "1", "sequence_number is str, expected int"),
        ("sequence_number", True, "sequence_number is bool, expected int"),
        ("sequence_number", 1.0, "sequence_number is float, expected int"),
        ("source", {"main": 1}, "source is dict, expected str"),
        ("timestamp", 1705314600, "timestamp is int, expected str"),
        ("session_id", 42, "session_id is int, expected str or null"),
        ("detail", "text", "detail is str, expected dict"),
        ("raw", {"a": 1}, "raw is dict, expected str or null"),
    ],
)
def test_1_wrong_types(key: str, value: Any, message: str) -> None:
    record = entry(1)
    record["context"][key] = value
    violation = only(check_invariants([lifecycle("transcript.start"), record]))
    assert violation == Violation("record 2", 1, message)


def test_1_entry_without_context() -> None:
    record = entry(1)
    del record["context"]
    broken = entry(1)
    broken["context"] = "not an object"
    violations = check_invariants([record, broken])
    assert violations == [
        Violation("record 1", 1, "transcript.entry record has no context object"),
        Violation("record 2", 1, "transcript.entry record has no context object"),
    ]


def test_1_timestamp_not_iso() -> None:
    violation = only(check_invariants([entry(1, timestamp="yesterday at noon")]))
    assert violation == Violation("record 1", 1, "timestamp 'yesterday at noon' is not ISO-8601")


# -- 2: sequence monotonicity ----------------------------------------------------------


def test_2_first_entry_must_be_one() -> None:
    violation = only(check_invariants([entry(2)]))
    assert violation == Violation("record 1", 2, "source 'main' of prompt 'p' starts at 2, expected 1")
    assert violation.invariant_name == "sequence monotonicity"


def test_2_gap() -> None:
    violation = only(check_invariants([entry(1), entry(2), entry(5)]))
    assert violation == Violation("record 3", 2, "source 'main' of prompt 'p' jumps from 2 to 5 (2 missing)")


def test_2_a_gap_the_mirror_declared_is_not_a_violation() -> None:
    """The JSONL mirror, after a full disk, says which entries it could not write: the jump
    over exactly those is explained; one over others, or in another source, is not."""

    def gap(missing: dict[str, list[int]]) -> dict[str, Any]:
        return lifecycle("transcript.error", level="WARNING", sink="jsonl", missing_sequence_numbers=missing)

    assert check_invariants([entry(1), entry(2), gap({"main": [3, 4]}), entry(5)]) == []
    assert check_invariants([gap({"main": [1, 2]}), entry(3)]) == []
    violation = only(check_invariants([entry(1), gap({"main": [3, 3]}), entry(5)]))
    assert violation.message == "source 'main' of prompt 'p' jumps from 1 to 5 (3 missing)"
    violation = only(check_invariants([entry(1), gap({"subagent:a": [2, 4]}), entry(5)]))
    assert violation.message == "source 'main' of prompt 'p' jumps from 1 to 5 (3 missing)"


def test_2_duplicate() -> None:
    violation = only(check_invariants([entry(1), entry(2), entry(2, timestamp=stamp(3))]))
    assert violation == Violation(
        "record 3",
        2,
        "source 'main' of prompt 'p': sequence_number 2 does not increase (previous 2 at record 2)",
    )


def test_2_decrease() -> None:
    records = [entry(1), entry(2), entry(3), entry(1, timestamp=stamp(4))]
    violation = only(check_invariants(records))
    assert violation == Violation(
        "record 4",
        2,
        "source 'main' of prompt 'p': sequence_number 1 does not increase (previous 3 at record 3)",
    )


def test_2_sources_and_prompts_are_independent() -> None:
    records = [
        entry(1),
        entry(1, source="subagent:a"),
        entry(1, prompt_name="other"),
        entry(2, source="subagent:a"),
        entry(2),
        entry(2, prompt_name="other"),
    ]
    assert check_invariants(records) == []


def test_2_start_resets_the_sequence_of_its_prompt() -> None:
    records = [
        lifecycle("transcript.start"),
        entry(1),
        entry(2),
        lifecycle("transcript.stop"),
        lifecycle("transcript.start"),
        entry(1, timestamp=stamp(10)),
        entry(2, timestamp=stamp(11)),
    ]
    assert check_invariants(records) == []
    # Without the second start the restart is a violation.
    del records[4]
    violations = check_invariants(records)
    assert [(v.location, v.invariant) for v in violations] == [("record 5", 2), ("record 6", 2)]
    assert violations[0].message == (
        "source 'main' of prompt 'p': sequence_number 1 does not increase (previous 2 at record 3)"
    )


def test_2_start_of_another_prompt_does_not_reset() -> None:
    records = [
        entry(1),
        entry(2),
        lifecycle("transcript.start", prompt_name="other"),
        entry(1, timestamp=stamp(9)),
    ]
    violation = only(check_invariants(records))
    assert (violation.location, violation.invariant) == ("record 4", 2)


# -- 3: type vocabulary ----------------------------------------------------------------


@pytest.mark.parametrize("entry_type", ["assistant", "summary", "", "USER_MESSAGE", "tool-use"])
def test_3_non_canonical_entry_type(entry_type: str) -> None:
    violation = only(check_invariants([entry(1, entry_type=entry_type)]))
    assert violation == Violation("record 1", 3, f"entry_type {entry_type!r} is not canonical")
    assert violation.invariant_name == "type vocabulary"


def test_3_every_canonical_type_passes() -> None:
    records = [entry(index + 1, entry_type=t.value) for index, t in enumerate(EntryType)]
    assert check_invariants(records) == []


# -- 4: non-blocking emission (what the log shows of it) -------------------------------


@pytest.mark.parametrize("level", ["DEBUG", "ERROR", "INFO"])
def test_4_error_record_must_be_a_warning(level: str) -> None:
    records = [entry(1), lifecycle("transcript.error", level=level, error="boom")]
    violation = only(check_invariants(records))
    assert violation == Violation("record 2", 4, f"transcript.error logged at {level!r}, not WARNING")
    assert violation.invariant_name == "non-blocking emission"


def test_4_warning_error_records_pass() -> None:
    assert check_invariants([lifecycle("transcript.error", level="WARNING", error="boom")]) == []


# -- 5: adapter labeling ---------------------------------------------------------------


def test_5_empty_adapter() -> None:
    violation = only(check_invariants([entry(1, adapter="")]))
    assert violation == Violation("record 1", 5, "adapter is empty")
    assert violation.invariant_name == "adapter labeling"


def test_5_expected_adapter() -> None:
    records = [entry(1, adapter="codex_app_server")]
    violation = only(check_invariants(records, expected_adapter="claude_agent_sdk"))
    assert violation == Violation("record 1", 5, "adapter 'codex_app_server', expected 'claude_agent_sdk'")


def test_5_adapter_changes_within_a_run() -> None:
    records = [entry(1), entry(1, source="subagent:x", adapter="my_adapter")]
    violation = only(check_invariants(records))
    assert violation == Violation(
        "record 2",
        5,
        "adapter 'my_adapter' differs from 'claude_agent_sdk' earlier in the run of prompt 'p'",
    )


def test_5_a_new_run_may_use_another_adapter() -> None:
    records = [
        lifecycle("transcript.start"),
        entry(1),
        lifecycle("transcript.start"),
        entry(1, adapter="codex_app_server"),
    ]
    assert check_invariants(records) == []


# -- 6: source consistency -------------------------------------------------------------


@pytest.mark.parametrize("source", ["worker", "subagent:", "Main", "main ", "sub:1", ""])
def test_6_malformed_source(source: str) -> None:
    violation = only(check_invariants([entry(1, source=source)]))
    assert violation == Violation("record 1", 6, f"source {source!r} is neither 'main' nor 'subagent:<id>'")
    assert violation.invariant_name == "source consistency"


def test_6_codex_produces_main_only() -> None:
    records = [
        entry(1, adapter="codex_app_server"),
        entry(1, adapter="codex_app_server", source="subagent:abc"),
    ]
    violation = only(check_invariants(records))
    assert violation == Violation(
        "record 2", 6, "adapter 'codex_app_server' produces 'main' only, got 'subagent:abc'"
    )


def test_6_claude_may_have_subagents() -> None:
    records = [entry(1), entry(1, source="subagent:abc"), entry(1, source="subagent:def")]
    assert check_invariants(records) == []


# -- 7: timestamp ordering -------------------------------------------------------------


def test_7_earlier_timestamp_within_a_source() -> None:
    records = [entry(1, timestamp=stamp(500)), entry(2, timestamp=stamp(400))]
    violation = only(check_invariants(records))
    assert violation == Violation(
        "record 2",
        7,
        "source 'main' of prompt 'p': timestamp 2024-01-15T10:30:00.000400+00:00 is earlier than "
        "2024-01-15T10:30:00.000500+00:00 at record 1",
    )
    assert violation.invariant_name == "timestamp ordering"


def test_7_equal_timestamps_are_fine() -> None:
    assert check_invariants([entry(1, timestamp=stamp(5)), entry(2, timestamp=stamp(5))]) == []


def test_7_across_sources_wall_clock_may_go_back() -> None:
    records = [entry(1, timestamp=stamp(500)), entry(1, source="subagent:a", timestamp=stamp(100))]
    assert check_invariants(records) == []


def test_7_timestamp_without_offset() -> None:
    violation = only(check_invariants([entry(1, timestamp="2024-01-15T10:30:00.123")]))
    assert violation == Violation("record 1", 7, "timestamp '2024-01-15T10:30:00.123' has no UTC offset")


def test_7_timestamp_not_utc() -> None:
    violation = only(check_invariants([entry(1, timestamp="2024-01-15T12:30:00.123+02:00")]))
    assert violation == Violation("record 1", 7, "timestamp '2024-01-15T12:30:00.123+02:00' is not UTC")


# -- locations, reporting ---------------------------------------------------------------


def test_record_locations_count_every_record() -> None:
    records = [
        lifecycle("transcript.start"),
        entry(1),
        lifecycle("transcript.error", level="WARNING"),
        entry(3),
    ]
    assert only(check_invariants(records)).location == "record 4"


def test_file_locations_via_read_located_records(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    lines = [
        json.dumps(lifecycle("transcript.start")),
        json.dumps(entry(1)),
        "",
        json.dumps(entry(3, entry_type="assistant")),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    violations = check_invariants(read_located_records(path))
    assert violations == [
        Violation(f"{path}:4", 3, "entry_type 'assistant' is not canonical"),
        Violation(f"{path}:4", 2, "source 'main' of prompt 'p' jumps from 1 to 3 (1 missing)"),
    ]


def test_duplicate_names_the_location_of_the_previous_record(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [entry(1), entry(2), entry(2)]) + "\n", encoding="utf-8")
    violation = only(check_invariants(read_located_records(path)))
    assert violation.location == f"{path}:3"
    assert violation.message.endswith(f"(previous 2 at {path}:2)")


def test_explicit_location_pairs() -> None:
    violation = only(check_invariants([("bundle/app.jsonl:12", entry(2))]))
    assert violation.location == "bundle/app.jsonl:12"


def test_violation_text() -> None:
    violation = Violation(
        "run.jsonl:3", 6, "adapter 'codex_app_server' produces 'main' only, got 'subagent:1'"
    )
    assert str(violation) == (
        "run.jsonl:3: invariant 6 (source consistency): "
        "adapter 'codex_app_server' produces 'main' only, got 'subagent:1'"
    )


def test_several_violations_of_one_record() -> None:
    record = entry(3, adapter="codex_app_server", entry_type="item/started", source="subagent:1")
    violations = check_invariants([record])
    assert sorted(v.invariant for v in violations) == [2, 3, 6]
    assert {v.location for v in violations} == {"record 1"}


# -- emitter-produced runs --------------------------------------------------------------


def test_emitter_run_is_clean(jsonl_pipeline: TranscriptPipeline) -> None:
    with TranscriptEmitter(
        prompt_name="code-review", adapter="claude_agent_sdk", session_id="s", pipeline=jsonl_pipeline
    ) as emitter:
        for entry_type in EntryType:
            emitter.emit(entry_type.value, detail={"t": entry_type.value}, raw="{}")
            emitter.emit(entry_type.value, source="subagent:a1")
        emitter.error("a collector hiccup")
    records = run_records(emitter)
    assert check_invariants(records) == []
    assert check_invariants(records, expected_adapter="claude_agent_sdk") == []
    assert emitter.jsonl_path is not None
    assert check_invariants(read_located_records(emitter.jsonl_path)) == []


def test_emitter_run_with_a_non_canonical_type_is_still_clean(jsonl_pipeline: TranscriptPipeline) -> None:
    with TranscriptEmitter(prompt_name="p", adapter="codex_app_server", pipeline=jsonl_pipeline) as emitter:
        emitter.emit("item/started")
        emitter.emit("user_message")
    assert check_invariants(run_records(emitter), expected_adapter="codex_app_server") == []


def test_codex_run_with_a_subagent_source_violates_6(jsonl_pipeline: TranscriptPipeline) -> None:
    with TranscriptEmitter(prompt_name="p", adapter="codex_app_server", pipeline=jsonl_pipeline) as emitter:
        emitter.emit("user_message")
        emitter.emit("tool_use", source="subagent:x")
    assert emitter.jsonl_path is not None
    violation = only(check_invariants(read_located_records(emitter.jsonl_path)))
    assert violation == Violation(
        f"{emitter.jsonl_path}:3", 6, "adapter 'codex_app_server' produces 'main' only, got 'subagent:x'"
    )


def test_two_runs_of_one_prompt_in_one_file_are_clean(tmp_path: Path) -> None:
    from transcript_otel.sinks import JsonlMirror

    target = tmp_path / "all.jsonl"
    pipeline = TranscriptPipeline([JsonlMirror(path=target)])
    try:
        for _ in range(2):
            with TranscriptEmitter(prompt_name="p", adapter="a", pipeline=pipeline) as emitter:
                emitter.emit("user_message")
                emitter.emit("assistant_message")
    finally:
        pipeline.shutdown(5.0)
    assert check_invariants(read_located_records(target)) == []
