"""The `transcript.error` records the writer adds to a batch: what the backlog's bound dropped
of a run, and the repairs an entry needed."""

from __future__ import annotations

import time

from transcript_otel.otel.metrics import BACKLOG, count_dropped
from transcript_otel.records.prepared import PreparedRecord, error_record
from transcript_otel.records.run import RunInfo


def report_drops(run: RunInfo, batch: list[PreparedRecord], bound_bytes: int) -> None:
    """A `transcript.error` for what the backlog's bound dropped of `run` since the last one."""
    dropped, span_records = run.take_unreported_drops()
    bound = f"the backlog exceeded its bound of {bound_bytes} bytes while the sinks fell behind"
    if dropped:
        count_dropped(dropped, BACKLOG)
        message = f"{dropped} transcript entries dropped: {bound}"
        batch.append(error_record(run, time.time_ns(), message, dropped_entries=dropped))
    if span_records:
        count_dropped(span_records, BACKLOG)
        message = f"{span_records} transcript.span records dropped (the spans were exported): {bound}"
        batch.append(error_record(run, time.time_ns(), message, dropped_span_records=span_records))


def _repairs_report(record: PreparedRecord) -> PreparedRecord:
    """The `transcript.error` that follows an entry that had to be repaired, naming its problems."""
    return error_record(
        record.run,
        record.timestamp_ns,
        "; ".join(record.problems),
        record.otel_context,
        entry_type=record.context.get("entry_type"),
        source=record.context.get("source"),
        sequence_number=record.context.get("sequence_number"),
    )


def with_repairs_reports(batch: list[PreparedRecord]) -> list[PreparedRecord]:
    """`batch`, each entry that had to be repaired followed by the report of its problems
    (made once the batch's searches, which may add one, are done)."""
    for record in batch:
        if record.problems:
            break
    else:
        return batch  # the common case: nothing repaired
    reported: list[PreparedRecord] = []
    for record in batch:
        reported.append(record)
        if record.problems:
            reported.append(_repairs_report(record))
    return reported
