"""Small helpers shared by the tests."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from hypothesis import strategies as st

from transcript_otel import TranscriptEmitter, TranscriptEntry, read_records


def run_records(emitter: TranscriptEmitter) -> list[dict[str, Any]]:
    """Every record the JSONL mirror holds for `emitter`'s run (call after `stop()`)."""
    assert emitter.jsonl_path is not None
    return list(read_records(emitter.jsonl_path))


def entry_contexts(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r["context"] for r in records if r["event"] == "transcript.entry"]


def strict(entries: Iterable[TranscriptEntry]) -> list[tuple[Any, ...]]:
    """Entries as comparable tuples in which 1, 1.0 and True differ (`==` alone would not see it)."""
    return [
        (
            e.prompt_name,
            e.adapter,
            e.entry_type,
            e.sequence_number,
            e.source,
            e.timestamp.isoformat(),
            e.session_id,
            json.dumps(e.detail, ensure_ascii=False),
            e.raw,
        )
        for e in entries
    ]


class Opaque:
    """A value JSON cannot encode, with a stable repr."""

    def __repr__(self) -> str:
        return "Opaque()"


class ReprRaises:
    """A value whose repr itself fails."""

    def __repr__(self) -> str:
        raise RuntimeError("no repr for you")


# Any JSON-like value, small: for fuzzing mappings with wrong types everywhere.
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=12,
)
