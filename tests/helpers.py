"""Small helpers shared by the tests."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from transcript_otel import (
    TranscriptEmitter,
    TranscriptEntry,
    check_invariants,
    read_records,
    reconstruct_transcript,
)

# How long a test's stop or flush may wait for the writer: bounded for a hang, not a pace (a
# loaded machine takes seconds over what a burst test queues; the default, 5 s, is an exit's).
WRITTEN_WITHIN_S = 120.0


def run_records(emitter: TranscriptEmitter) -> list[dict[str, Any]]:
    """Every record the JSONL mirror holds for `emitter`'s run (call after `stop()`)."""
    assert emitter.jsonl_path is not None
    return list(read_records(emitter.jsonl_path))


def entry_contexts(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r["context"] for r in records if r["event"] == "transcript.entry"]


def assert_complete_mirror(
    jsonl: object, runs: Path, *, spans: int, per_span: int, span_key: str
) -> list[dict[str, Any]]:
    """The mirror of a scripted run that emitted `per_span` entries (detail `{span_key: n, "i": i}`)
    in each of `spans` spans: start, every entry gap-free and in emission order, stop; valid by
    the seven invariants; each entry still correlated with the span it was emitted in. Besides
    those, only reports of batches the OTLP backend refused; they are returned."""
    count = spans * per_span
    assert isinstance(jsonl, str)
    assert Path(jsonl).parent == runs
    everything = list(read_records(jsonl))
    assert check_invariants(everything, expected_adapter="scripted") == []
    lost = [r for r in everything if "failed_export_records" in r["context"]]
    assert all(r["event"] == "transcript.error" and r["context"]["sink"] == "otel_logs" for r in lost)
    records = [r for r in everything if "failed_export_records" not in r["context"]]
    assert len(records) == count + 2
    assert records[0]["event"] == "transcript.start"
    assert records[-1]["event"] == "transcript.stop"
    assert records[-1]["context"]["total_entries"] == count
    entries = reconstruct_transcript(records)
    assert [e.sequence_number for e in entries] == list(range(1, count + 1))
    assert [(e.detail[span_key], e.detail["i"]) for e in entries] == [
        (span, i) for span in range(spans) for i in range(per_span)
    ]
    span_ids = {r["context"].get("span_id") for r in records if r["event"] == "transcript.entry"}
    assert len(span_ids) == spans
    return lost


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


FIXTURE_RUNS = sorted((Path(__file__).parent / "fixtures" / "runs").glob("*.jsonl"))


def write_large_run(path: Path, entries: int = 100_000, *, prompt_name: str = "large") -> Path:
    """A synthetic run of `entries` entries in the mirror's format: prompts, answers, tool
    calls and results (one in 50 failing), usage, with a subagent; written line by line."""
    started = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
    base = {"prompt_name": prompt_name, "adapter": "cli", "session_id": "s-large"}
    kinds = ("user_message", "assistant_message", "tool_use", "tool_result", "token_usage")
    counters: dict[str, int] = {}

    def line(event: str, moment: datetime, context: dict[str, Any]) -> str:
        record = {
            "timestamp": moment.isoformat(),
            "level": "DEBUG",
            "logger": "transcript_otel",
            "event": event,
            "message": event,
            "context": context,
        }
        return json.dumps(record, separators=(",", ":")) + "\n"

    with open(path, "w", encoding="utf-8") as out:
        out.write(line("transcript.start", started, {**base, "run_id": "r-large"}))
        for index in range(entries):
            moment = started + timedelta(milliseconds=index)
            source = "main" if index % 10 else "subagent:helper"
            kind = kinds[index % len(kinds)]
            call = f"call_{index // len(kinds)}"
            details: dict[str, dict[str, Any]] = {
                "user_message": {"text": f"step {index}: go on"},
                "assistant_message": {"text": f"working on step {index}"},
                "tool_use": {"tool_use_id": call, "tool_name": "shell", "input": {"cmd": f"echo {index}"}},
                "tool_result": {"tool_use_id": call, "tool_name": "shell", "content": str(index)}
                | ({"is_error": True} if index % 50 == 3 else {}),
                "token_usage": {"usage": {"input_tokens": 10, "output_tokens": 2}},
            }
            detail = details[kind]
            counters[source] = counters.get(source, 0) + 1
            context = {
                **base,
                "entry_type": kind,
                "sequence_number": counters[source],
                "source": source,
                "timestamp": moment.isoformat(),
                "detail": detail,
            }
            out.write(line("transcript.entry", moment, context))
        ended = started + timedelta(milliseconds=entries)
        out.write(line("transcript.stop", ended, {**base, "run_id": "r-large", "total_entries": entries}))
    return path


class ListRun:
    """A run held as a list of records: a `RecordSource` read as many times as asked."""

    def __init__(self, records: list[dict[str, Any]]) -> None:
        self.list = records

    def records(self) -> Iterator[dict[str, Any]]:
        return iter(self.list)


FIXTURES = Path(__file__).resolve().parent / "fixtures"
MappedEntry = tuple[str, str, Any]  # (entry type, source, detail)


def mirrored_entries(run: str) -> list[MappedEntry]:
    """The entries of a captured run (`tests/fixtures/runs/`)."""
    entries = []
    for line in (FIXTURES / "runs" / run).read_text().splitlines():
        record = json.loads(line)
        if record.get("event") == "transcript.entry":
            context = record["context"]
            entries.append((context["entry_type"], context["source"], context.get("detail")))
    return entries


def stream_json_entries(path: Path) -> list[MappedEntry]:
    """What a `claude -p --output-format stream-json` run printed, as mapped."""
    from transcript_otel.mappings.lines import ClaudeStreamJsonAdapter

    adapter = ClaudeStreamJsonAdapter()
    lines = path.read_text().splitlines(keepends=True)
    mapped = [entry for line in lines for entry in adapter.feed(line)] + adapter.flush()
    return [(entry.entry_type, entry.source, entry.detail) for entry in mapped]


def claude_code_entries(scenario: str) -> list[MappedEntry]:
    """What the real Claude Code CLI printed (`tests/fixtures/claude_code/`), as mapped."""
    return stream_json_entries(FIXTURES / "claude_code" / f"{scenario}.jsonl")
