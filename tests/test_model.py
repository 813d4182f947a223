"""The canonical model: the nine entry types, the envelope, entries and summaries."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta, timezone

import pytest

import transcript_otel
from transcript_otel import (
    CANONICAL_ENTRY_TYPES,
    ENVELOPE_KEYS,
    EntryType,
    TranscriptEntry,
    TranscriptEvent,
    TranscriptSummary,
    subagent_source,
)
from transcript_otel.model.entries import MAIN_SOURCE, REQUIRED_ENVELOPE_KEYS, SUBAGENT_SOURCE_PREFIX

SPEC_ENTRY_TYPES = (
    "user_message",
    "assistant_message",
    "tool_use",
    "tool_result",
    "thinking",
    "system_event",
    "token_usage",
    "error",
    "unknown",
)

MOMENT = datetime(2024, 1, 15, 10, 30, 0, 123000, tzinfo=UTC)


def test_entry_types_are_exactly_the_nine_of_the_specification() -> None:
    assert tuple(member.value for member in EntryType) == SPEC_ENTRY_TYPES
    assert frozenset(SPEC_ENTRY_TYPES) == CANONICAL_ENTRY_TYPES
    assert len(CANONICAL_ENTRY_TYPES) == 9
    assert all(isinstance(value, str) for value in CANONICAL_ENTRY_TYPES)


def test_entry_type_members_are_plain_strings() -> None:
    assert EntryType.TOOL_USE.value == "tool_use"
    assert isinstance(EntryType.TOOL_USE, str)
    assert str(EntryType.TOKEN_USAGE) == "token_usage"
    assert EntryType("thinking") is EntryType.THINKING


def test_envelope_keys_in_specification_order() -> None:
    assert ENVELOPE_KEYS == (
        "prompt_name",
        "adapter",
        "entry_type",
        "sequence_number",
        "source",
        "timestamp",
        "session_id",
        "detail",
        "raw",
    )
    assert REQUIRED_ENVELOPE_KEYS == (
        "prompt_name",
        "adapter",
        "entry_type",
        "sequence_number",
        "source",
        "timestamp",
    )


def test_log_event_taxonomy() -> None:
    assert [event.value for event in TranscriptEvent] == [
        "transcript.entry",
        "transcript.start",
        "transcript.stop",
        "transcript.error",
        "transcript.span",
    ]


def test_sources() -> None:
    assert MAIN_SOURCE == "main"
    assert SUBAGENT_SOURCE_PREFIX == "subagent:"
    assert subagent_source("a1b2") == "subagent:a1b2"


def test_transcript_entry_fields_match_the_specification() -> None:
    fields = dataclasses.fields(TranscriptEntry)
    assert [f.name for f in fields] == list(ENVELOPE_KEYS)
    entry = TranscriptEntry(
        prompt_name="p",
        adapter="a",
        entry_type="user_message",
        sequence_number=1,
        source="main",
        timestamp=MOMENT,
    )
    assert entry.session_id is None
    assert entry.detail == {}
    assert entry.raw is None


def test_transcript_entry_default_detail_is_not_shared() -> None:
    first = TranscriptEntry("p", "a", "user_message", 1, "main", MOMENT)
    second = TranscriptEntry("p", "a", "user_message", 2, "main", MOMENT)
    first.detail["x"] = 1
    assert second.detail == {}


def test_transcript_entry_is_frozen_and_slotted() -> None:
    entry = TranscriptEntry("p", "a", "user_message", 1, "main", MOMENT)
    with pytest.raises(dataclasses.FrozenInstanceError):
        entry.sequence_number = 2  # type: ignore[misc]
    assert not hasattr(entry, "__dict__")


def test_transcript_entry_equality_is_field_by_field() -> None:
    base = TranscriptEntry("p", "a", "tool_use", 3, "main", MOMENT, "s", {"k": [1, 2]}, "raw")
    assert base == TranscriptEntry("p", "a", "tool_use", 3, "main", MOMENT, "s", {"k": [1, 2]}, "raw")
    assert base != dataclasses.replace(base, detail={"k": [1]})
    assert base != dataclasses.replace(base, raw=None)
    assert base != dataclasses.replace(base, timestamp=MOMENT + timedelta(microseconds=1))
    # The same instant in another zone is the same moment.
    other_zone = MOMENT.astimezone(timezone(timedelta(hours=2)))
    assert base == dataclasses.replace(base, timestamp=other_zone)


def test_to_context_full_envelope_in_order() -> None:
    entry = TranscriptEntry(
        prompt_name="code-review",
        adapter="claude_agent_sdk",
        entry_type="assistant_message",
        sequence_number=3,
        source="main",
        timestamp=MOMENT,
        session_id="550e8400-e29b-41d4-a716-446655440000",
        detail={"sdk_entry": {"type": "assistant"}},
        raw='{"type": "assistant"}',
    )
    context = entry.to_context()
    assert list(context) == list(ENVELOPE_KEYS)
    assert context == {
        "prompt_name": "code-review",
        "adapter": "claude_agent_sdk",
        "entry_type": "assistant_message",
        "sequence_number": 3,
        "source": "main",
        "timestamp": "2024-01-15T10:30:00.123000+00:00",
        "session_id": "550e8400-e29b-41d4-a716-446655440000",
        "detail": {"sdk_entry": {"type": "assistant"}},
        "raw": '{"type": "assistant"}',
    }


def test_to_context_omits_optional_keys_when_absent() -> None:
    entry = TranscriptEntry("p", "codex_app_server", "thinking", 2, "main", MOMENT)
    assert list(entry.to_context()) == list(REQUIRED_ENVELOPE_KEYS)


def test_transcript_summary_fields_match_the_specification() -> None:
    assert [f.name for f in dataclasses.fields(TranscriptSummary)] == [
        "total_entries",
        "entries_by_type",
        "entries_by_source",
        "sources",
        "adapter",
        "prompt_name",
        "first_timestamp",
        "last_timestamp",
    ]
    summary = TranscriptSummary(
        total_entries=0,
        entries_by_type={},
        entries_by_source={},
        sources=(),
        adapter="a",
        prompt_name="p",
        first_timestamp=None,
        last_timestamp=None,
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        summary.total_entries = 1  # type: ignore[misc]


def test_public_names_are_exported() -> None:
    for name in transcript_otel.__all__:
        assert hasattr(transcript_otel, name), name
