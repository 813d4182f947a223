"""Small helpers shared by the tests."""

from __future__ import annotations

from typing import Any

from transcript_otel import TranscriptEmitter, read_records


def run_records(emitter: TranscriptEmitter) -> list[dict[str, Any]]:
    """Every record the JSONL mirror holds for `emitter`'s run (call after `stop()`)."""
    assert emitter.jsonl_path is not None
    return list(read_records(emitter.jsonl_path))


def entry_contexts(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r["context"] for r in records if r["event"] == "transcript.entry"]
