"""After a failed write to a JSONL mirror file (a full disk): the file mended, what it lost counted.

A failed write loses the lines it had not written whole, never the file's line boundary:
the line it cut short is removed, or, in a file other processes may append to, ended
with a newline, and the next lines written to the file begin with one `transcript.error`
per run saying what is missing (`jsonl_write_failures.Mend`). Until then each write out
tries again, once per batch; the failure is kept for the mirror's `flush` to raise, for the
pipeline to report.
"""

from __future__ import annotations

import os
import time
from typing import Any

from transcript_otel.records.lines import encode_line
from transcript_otel.records.run import RunInfo
from transcript_otel.records.serialize import loads
from transcript_otel.sinks.jsonl_buffer import BufferedFile
from transcript_otel.sinks.jsonl_write_failures import Mend, RunGap


def account_for_failure(handle: BufferedFile, failure: OSError, runs: list[RunInfo], *, shared: bool) -> None:
    """Leave `handle`'s file on a line boundary, count what `failure` lost in the gaps of
    `runs` (those writing to it), and put what mends the file ahead of its next lines.
    `shared`: other processes may append to the file too (a fixed `path`). A failure that
    lost records is kept for `flush` to raise (the pipeline warns once and tells the other
    sinks); one that lost only a mend not yet written is not: the mend is rebuilt and
    written later."""
    failed, handle.failed = handle.failed, None
    if failed is None:  # not a write's failure (`write_pending` keeps every one)
        handle.unreported = handle.unreported or failure
        return
    now = time.time_ns()
    mend = handle.mend or Mend()
    unwritten = failed.unwritten
    # Whose line the failure cut short, if it cut one: a gap record's run, or a run's record.
    cut_record_of: RunGap | None = None
    cut_line_of: RunGap | None = None
    if handle.mend is not None:  # the failed write began with the mend
        if failed.landed:
            mend.end_cut_line = False
        start = 0
        for end, run_id in mend.record_ends:
            if end <= failed.boundary:
                del mend.gaps[run_id]  # that record is in the file
            elif start <= failed.boundary < failed.landed:
                cut_record_of = mend.gaps[run_id]
            start = end
        unwritten = unwritten[max(0, mend.length - failed.boundary) :]  # lines after the mend
    lost = unwritten.split(b"\n")[:-1]  # the buffer holds whole lines
    reason = f"{type(failure).__name__}: {failure}"
    for number, line in enumerate(lost):
        record = _parsed(line)
        run = _owner(record, runs)
        if run is None:  # not a line of a run named here: there is no run to report it in
            continue
        gap = mend.gaps.get(run.run_id)
        if gap is None:
            gap = mend.gaps[run.run_id] = RunGap(run, reason, now)
        gap.count(line + b"\n", record)
        if number == 0 and failed.landed > failed.boundary and cut_record_of is None:
            cut_line_of = gap
    if failed.landed > failed.boundary:
        # A file only this process writes (a run's own) loses the cut line's bytes; in a
        # shared one (a fixed `path`), other processes may have appended after them, and
        # truncating would take their lines too: the line is ended instead, one line that
        # readers skip with a warning and the gap record after it explains.
        if not shared and _remove_cut_line(handle.fd, failed.landed - failed.boundary):
            if cut_line_of is not None:  # a gap record removed is written again: not worth a word
                cut_line_of.partial_lines_removed += 1
        else:
            mend.end_cut_line = True
            ended_in = cut_record_of or cut_line_of
            if ended_in is not None:
                ended_in.partial_lines_ended += 1
    _put_mend(handle, mend, now)
    if lost and handle.unreported is None:
        handle.unreported = failure.with_traceback(None)  # raised again later: its frames are of no use


def _put_mend(handle: BufferedFile, mend: Mend, timestamp_ns: int) -> None:
    parts = [b"\n"] if mend.end_cut_line else []
    length = len(parts)
    mend.record_ends = []
    for run_id, gap in mend.gaps.items():
        line = encode_line(gap.record(timestamp_ns))
        parts.append(line)
        length += len(line)
        mend.record_ends.append((length, run_id))
    mend.length = length
    handle.mend = mend if length else None
    if length:
        handle.put_first(b"".join(parts))


def _parsed(line: bytes) -> Any:
    try:
        return loads(line)
    except ValueError:
        return None


def _owner(record: Any, runs: list[RunInfo]) -> RunInfo | None:
    """Which of `runs` wrote the line `record` was read from. Lifecycle records name their run;
    entries only its identity, which two runs of one process writing one file may share
    (then the first is named)."""
    if not runs:
        return None
    context = record.get("context") if isinstance(record, dict) else None
    if isinstance(context, dict):
        run_id = context.get("run_id")
        for run in runs:
            if run.run_id == run_id:
                return run
        identity = (context.get("prompt_name"), context.get("adapter"), context.get("session_id"))
        for run in runs:
            if (run.prompt_name, run.adapter, run.session_id) == identity:
                return run
    return runs[0]


def _remove_cut_line(fd: int, cut: int) -> bool:
    """Truncate the `cut` bytes a failed write left at the end of the file, if nothing was
    written after them (shrinking a file works on a full disk). Whether it did."""
    try:
        end = os.lseek(fd, 0, os.SEEK_CUR)  # after this descriptor's last write (O_APPEND)
        if end < cut or os.fstat(fd).st_size != end:
            return False
        os.ftruncate(fd, end - cut)
    except OSError:
        return False
    return True
