"""Reading transcripts back: JSONL records → `TranscriptEntry` → `TranscriptSummary`."""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from transcript_otel.model.entries import TranscriptEntry, TranscriptEvent, TranscriptSummary

_logger = logging.getLogger(__name__)


def read_records(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Stream the structured-log records of a JSONL file, one dict per line.

    Lines that are not JSON objects are skipped with a `TranscriptReadWarning`
    naming the file and line; a partial last line (a writer that crashed
    mid-line) is the common case.
    """
    for _, record in read_located_records(path):
        yield record


def read_located_records(path: str | os.PathLike[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Like `read_records`, each record paired with its `file:line` location. A line longer
    than a record may take is skipped with a warning, never held (`reading/lines.py`)."""
    from transcript_otel.reading.lines import LineReader  # it uses this module's warning

    with open(path, "rb") as handle:
        yield from LineReader(os.fspath(path)).objects(handle)


def entry_from_context(context: Mapping[str, Any]) -> TranscriptEntry:
    """Build an entry from a `transcript.entry` context; raises ValueError if malformed."""
    try:
        timestamp = datetime.fromisoformat(context["timestamp"])
        if timestamp.tzinfo is None:  # written without a zone: the envelope's times are UTC
            timestamp = timestamp.replace(tzinfo=UTC)
        sequence_number = context["sequence_number"]
        if not isinstance(sequence_number, int) or isinstance(sequence_number, bool):
            raise TypeError(f"sequence_number is {type(sequence_number).__name__}")
        detail = context.get("detail") or {}
        if not isinstance(detail, dict):
            raise TypeError(f"detail is {type(detail).__name__}")
        return TranscriptEntry(
            prompt_name=str(context["prompt_name"]),
            adapter=str(context["adapter"]),
            entry_type=str(context["entry_type"]),
            sequence_number=sequence_number,
            source=str(context["source"]),
            timestamp=timestamp,
            session_id=context.get("session_id"),
            detail=detail,
            raw=context.get("raw"),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"malformed transcript entry: {exc!r}") from exc


def reconstruct_transcript(records: Iterable[Mapping[str, Any]]) -> list[TranscriptEntry]:
    """The entries of the `transcript.entry` records, ordered by (source, sequence_number).

    Other events are ignored; malformed entries are skipped and logged (run
    `check_invariants` to see exactly what is wrong with them).
    """
    entries: list[TranscriptEntry] = []
    for record in records:
        if record.get("event") != TranscriptEvent.ENTRY.value:
            continue
        context = record.get("context")
        if not isinstance(context, Mapping):
            _logger.warning("transcript-otel: transcript.entry record without a context object")
            continue
        try:
            entries.append(entry_from_context(context))
        except ValueError as exc:
            _logger.warning("transcript-otel: %s", exc)
    entries.sort(key=lambda entry: (entry.source, entry.sequence_number))
    return entries


def summarize(entries: Iterable[TranscriptEntry]) -> TranscriptSummary:
    """Counts by type and source, sources, and the first and last capture time."""
    by_type: Counter[str] = Counter()
    by_source: Counter[str] = Counter()
    first: datetime | None = None
    last: datetime | None = None
    adapters: Counter[str] = Counter()
    prompts: Counter[str] = Counter()
    for entry in entries:
        by_type[entry.entry_type] += 1
        by_source[entry.source] += 1
        adapters[entry.adapter] += 1
        prompts[entry.prompt_name] += 1
        if first is None or entry.timestamp < first:
            first = entry.timestamp
        if last is None or entry.timestamp > last:
            last = entry.timestamp
    return TranscriptSummary(
        total_entries=sum(by_type.values()),
        entries_by_type=dict(by_type),
        entries_by_source=dict(by_source),
        sources=tuple(sorted(by_source)),
        adapter=_most_common(adapters),
        prompt_name=_most_common(prompts),
        first_timestamp=first,
        last_timestamp=last,
    )


def _most_common(counter: Counter[str]) -> str:
    return counter.most_common(1)[0][0] if counter else ""
