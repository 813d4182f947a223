"""After a failed write to a JSONL mirror file (a full disk): what it lost, and what mends the file.

Each run writing to the file has a `RunGap`: the records, entries and sequence numbers it
lost, said by one `transcript.error`. A file's `Mend` is what its next lines begin with: a
newline ending the line the failure cut short, where it could not be removed, then those
records. `jsonl_mending` finds what a failure lost and puts the mend in the file's buffer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.records.prepared import PreparedRecord, error_record
from transcript_otel.records.run import RunInfo
from transcript_otel.records.serialize import iso_timestamp

SINK_NAME: Final = "jsonl"  # the mirror's, which its gap records name


@dataclass(slots=True)
class RunGap:
    """What one run's records are missing from a file since a write to it failed."""

    run: RunInfo
    reason: str  # the first failure: `OSError: [Errno 28] No space left on device`
    since_ns: int
    records: int = 0
    entries: int = 0
    size: int = 0  # bytes, a line cut short counted whole
    sequence_numbers: dict[str, list[int]] = field(default_factory=dict)  # source: [first, last]
    partial_lines_removed: int = 0
    partial_lines_ended: int = 0

    def count(self, line: bytes, record: Any) -> None:
        self.records += 1
        self.size += len(line)
        if not isinstance(record, dict) or record.get("event") != TranscriptEvent.ENTRY.value:
            return
        context = record.get("context")
        if not isinstance(context, dict):
            return
        self.entries += 1
        source, number = context.get("source"), context.get("sequence_number")
        if isinstance(source, str) and isinstance(number, int):
            known = self.sequence_numbers.setdefault(source, [number, number])
            known[0], known[1] = min(known[0], number), max(known[1], number)

    def record(self, timestamp_ns: int) -> PreparedRecord:
        """The `transcript.error` that says what is missing, where the missing records were."""
        # A run's lines after a failed write are all lost until one succeeds: each source's
        # missing numbers are one range.
        missing = "; ".join(
            f"entries {first}-{last} of source {source!r}"
            for source, (first, last) in self.sequence_numbers.items()
        )
        records = "1 record" if self.records == 1 else f"{self.records} records"
        error = (
            f"the JSONL mirror could not write {records} of this run to this file ({self.size} bytes; "
            f"{self.reason}, first at {iso_timestamp(self.since_ns)}): "
            f"{missing or 'no entries'} are missing here (other sinks, if any, got them)"
        )
        if self.partial_lines_removed:
            error += f"; {_lines(self.partial_lines_removed)} cut short by the failure removed"
        if self.partial_lines_ended:
            error += f"; {_lines(self.partial_lines_ended)} above, cut short by the failure, not a record"
        extra: dict[str, Any] = {
            "sink": SINK_NAME,
            "unwritten_records": self.records,
            "unwritten_entries": self.entries,
            "unwritten_bytes": self.size,
            "missing_sequence_numbers": self.sequence_numbers,
            "failed_since": iso_timestamp(self.since_ns),
        }
        if self.partial_lines_removed:
            extra["partial_lines_removed"] = self.partial_lines_removed
        if self.partial_lines_ended:
            extra["partial_lines_ended"] = self.partial_lines_ended
        return error_record(self.run, timestamp_ns, error, **extra)


def _lines(count: int) -> str:
    return "1 line" if count == 1 else f"{count} lines"


@dataclass(slots=True)
class Mend:
    """What a file needs after a failed write, ahead of its next lines: a newline ending the
    line the failure cut short, when it could not be removed, then one gap record per run.
    Put at the start of the file's buffer (`BufferedFile.put_first`, by `jsonl_mending`) and
    rebuilt at each failure until it is written."""

    end_cut_line: bool = False
    gaps: dict[str, RunGap] = field(default_factory=dict)  # by run id
    # Where each gap record ends in the buffer, and whose it is: what a failed write landed.
    record_ends: list[tuple[int, str]] = field(default_factory=list)
    length: int = 0
