"""The identity and the writer-side bookkeeping of one transcript run."""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from transcript_otel.model.entries import TranscriptSummary


@dataclass(slots=True, eq=False, weakref_slot=True)
class RunInfo:
    """One `evaluate()`-like run: the envelope's constant part and its counters.

    The agent thread touches only `dropped` (under `_drop_lock`); everything
    else after construction, sequence numbers included, is written by the background
    writer alone.
    """

    prompt_name: str
    adapter: str
    session_id: str | None
    started_ns: int
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    jsonl_path: str | None = None
    dropped: int = 0
    dropped_reported: int = 0
    # Spans of the run that ended past the backlog's bound: exported, but with no
    # `transcript.span` record in the transcript.
    span_records_dropped: int = 0
    span_records_dropped_reported: int = 0
    # The writer has taken this run's `transcript.stop`: what a writer action emits after it
    # is refused (before it, an action queued before `stop()` still records in its place).
    stop_reached: bool = False
    # Plain dicts, not Counters: `counter[key] += 1` costs more than `d[key] = d.get(key, 0) + 1`
    # (a dict subclass's item access is not specialized), and this runs for every entry.
    entries_by_type: dict[str, int] = field(default_factory=dict)
    entries_by_source: dict[str, int] = field(default_factory=dict)
    first_ns: int | None = None
    last_ns: int | None = None
    # A forked child's `transcript.start` (a queued item), written before the run's first
    # other record; none comes, and neither is written (`BackgroundWriter._prepare`).
    held_start: tuple[Any, ...] | None = None
    # The run a forked child continues from. Its file always carries the child's run id: the
    # parent may have named the plain name after the fork without having created it yet.
    forked_from_run_id: str | None = None
    _last_ns_by_source: dict[str, int] = field(default_factory=dict, repr=False)
    _drop_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def note_drop(self) -> None:
        with self._drop_lock:
            self.dropped += 1

    def note_span_record_drop(self) -> None:
        with self._drop_lock:
            self.span_records_dropped += 1

    def has_unreported_drops(self) -> bool:
        return (
            self.dropped != self.dropped_reported
            or self.span_records_dropped != self.span_records_dropped_reported
        )

    def take_unreported_drops(self) -> tuple[int, int]:
        """Entries and span records dropped since the last call."""
        with self._drop_lock:
            entries = self.dropped - self.dropped_reported
            span_records = self.span_records_dropped - self.span_records_dropped_reported
            self.dropped_reported = self.dropped
            self.span_records_dropped_reported = self.span_records_dropped
        return entries, span_records

    def not_before_last(self, source: str, timestamp_ns: int) -> int:
        """`timestamp_ns`, raised to the time of the source's last counted entry if earlier.

        Entries are numbered on the writer, in queue order, rather than on the agent's
        thread, where number, timestamp and queue position would have to be taken under one
        lock. A thread switched out between taking its timestamp and queueing the entry can
        come after an entry stamped later; its time is then that entry's (invariant 7):
        later than it was by as long as the thread waited for the GIL (usually the switch
        interval, 5 ms, at most), where a lock would have made the other thread wait as long.
        """
        previous = self._last_ns_by_source.get(source)
        return previous if previous is not None and timestamp_ns < previous else timestamp_ns

    def count_entry(self, entry_type: str, source: str, timestamp_ns: int) -> int:
        """Count an entry, in queue order, stamped `timestamp_ns` (see `not_before_last`);
        its sequence number in `source`."""
        by_type = self.entries_by_type
        by_type[entry_type] = by_type.get(entry_type, 0) + 1
        sequence = self.entries_by_source.get(source, 0) + 1
        self.entries_by_source[source] = sequence
        self._last_ns_by_source[source] = timestamp_ns
        if self.first_ns is None or timestamp_ns < self.first_ns:
            self.first_ns = timestamp_ns
        if self.last_ns is None or timestamp_ns > self.last_ns:
            self.last_ns = timestamp_ns
        return sequence

    def summary(self) -> TranscriptSummary:
        return TranscriptSummary(
            total_entries=sum(self.entries_by_type.values()),
            entries_by_type=dict(self.entries_by_type),
            entries_by_source=dict(self.entries_by_source),
            sources=tuple(sorted(self.entries_by_source)),
            adapter=self.adapter,
            prompt_name=self.prompt_name,
            first_timestamp=_as_datetime(self.first_ns),
            last_timestamp=_as_datetime(self.last_ns),
        )


def _as_datetime(timestamp_ns: int | None) -> datetime | None:
    if timestamp_ns is None:
        return None
    # Truncated to the microsecond, exactly as the records' ISO timestamps are.
    seconds, remainder = divmod(timestamp_ns, 1_000_000_000)
    return datetime.fromtimestamp(seconds, UTC).replace(microsecond=remainder // 1000)
