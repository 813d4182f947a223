"""Handing the writer's batches to the sinks, and what a failing sink costs: nothing but itself.

Every sink takes a whole batch in turn, the JSONL mirror first. A sink that fails is warned
about once (`logger`), counted in `failures`, and its failures become `transcript.error`
records written to the other sinks; in the mirror-only end of a shutdown only the essential
sinks (the mirror) are written.
"""

from __future__ import annotations

import functools
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from transcript_otel.capture.gil_pacing import GilPacing
from transcript_otel.capture.registry import ShutdownAction
from transcript_otel.capture.shared import logger
from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.otel.metrics import count_dropped
from transcript_otel.records.prepared import PreparedRecord, error_record
from transcript_otel.records.run import RunInfo
from transcript_otel.sinks.base import Sink

if TYPE_CHECKING:
    from opentelemetry.context import Context


class SinkWriting:
    """The sinks, what failed in each, and how the writer writes to them."""

    def __init__(self, sinks: Iterable[Sink], pacing: GilPacing, *, flush_each_batch: bool) -> None:
        """`flush_each_batch`: flush every sink after each batch; else the one thread that
        drains the pipeline flushes them once it has drained (`flush_written`)."""
        self.sinks = list(sinks)
        self.failures: Counter[str] = Counter()  # by sink name
        self._pacing = pacing
        self._flush_each_batch = flush_each_batch
        self._warned_sinks: set[str] = set()
        # The end of a shutdown that ran out of time: only the mirror is written.
        self.mirror_only = False
        self.released = False  # the sinks are shut down
        # The records written since the sinks were last flushed, without `flush_each_batch`.
        self._unflushed: list[PreparedRecord] = []

    def local_path(self, run: RunInfo) -> str | None:
        """The local file `run` is written to (the JSONL mirror's), if a sink writes one."""
        for sink in self.sinks:
            try:
                path = sink.local_path(run)
            except Exception as exc:  # e.g. a directory that cannot be read: no path, a warning
                self._warn_once(sink.name, f"could not name the run's file: {exc!r}")
                continue
            if path is not None:
                return path
        return None

    def release_actions(self, timeout_s: float) -> list[ShutdownAction]:
        """What shuts the sinks down, each within `timeout_s`; emitting stops from now on."""
        self.released = True
        return [
            ShutdownAction(f"sink {sink.name}", functools.partial(sink.shutdown, timeout_s), sink.essential)
            for sink in self.sinks
        ]

    def after_fork_in_child(self) -> None:
        for sink in self.sinks:
            self._guard(sink, lambda s: s.after_fork_in_child())

    def emit_genai_event(
        self, name: str, attributes: Mapping[str, Any], context: Context, timestamp_ns: int
    ) -> None:
        """One OTel event (a log record with event_name) through every OTel log sink; never raises.

        For the span wiring, on the writer thread (where spans end): not a transcript
        record, so it counts in no run's entries, and it is not in the mirror. A no-op
        without an OTel log sink (log records switched off) and once the sinks are released.
        """
        if self.released:
            return  # the sinks (and maybe the providers) are shut down
        # Here, not at the top: a pipeline without OTel log records need not load the logs API.
        from transcript_otel.sinks.otel_logs import OTelLogSink

        for sink in self._active_sinks():
            if not isinstance(sink, OTelLogSink):
                continue
            try:
                sink.emit_event(name, attributes, context, timestamp_ns)
            except Exception as exc:
                # An optional copy of what the spans carry: not worth a transcript.error.
                logger.debug("transcript-otel: could not emit the %s event: %r", name, exc)

    def write_batch(self, batch: list[PreparedRecord]) -> None:
        """Every sink takes the whole batch in turn, then flushes it; drained by its caller,
        the sinks are flushed once the caller has drained (`flush_written`): a span's end
        ends a batch, and an import's thousands of small batches each cost a `write()`.

        Failures become `transcript.error` records for the other sinks, written
        after the batch; runs that stopped in the batch are closed last.
        """
        failures: list[tuple[Sink, PreparedRecord]] = []
        pacing = self._pacing
        for sink in self._active_sinks():
            for record in batch:
                try:
                    sink.write(record)
                except Exception as exc:
                    failures.append((sink, self._failure_record(sink, record, exc)))
                if time.perf_counter() >= pacing.due:
                    pacing.yield_gil()
            if self._flush_each_batch:
                failures += self._flushed(sink, batch)
        if not self._flush_each_batch:
            self._unflushed += batch
        self._report_failures(failures)
        for record in batch:
            if record.event is TranscriptEvent.STOP:
                self._close_run(record.run, batch)

    def flush_written(self) -> None:
        """Flush every sink after a drain by the caller, for the records written since the last."""
        written, self._unflushed = self._unflushed, []
        if written:
            self._report_failures(
                [failure for sink in self._active_sinks() for failure in self._flushed(sink, written)]
            )

    def _flushed(self, sink: Sink, written: list[PreparedRecord]) -> list[tuple[Sink, PreparedRecord]]:
        """Flush `sink`: the reports of what of `written` it may have lost, if that failed."""
        try:
            sink.flush()
        except Exception as exc:
            return [(sink, report) for report in self._lost_records(sink, "flush", exc, written)]
        return []

    def _report_failures(self, failures: list[tuple[Sink, PreparedRecord]]) -> None:
        for failed_sink, report in failures:
            self._write_to_others(report, failed_sink)
        if failures:
            for sink in self._active_sinks():
                self._guard(sink, lambda s: s.flush())

    def _active_sinks(self) -> list[Sink]:
        if self.mirror_only:
            return [sink for sink in self.sinks if sink.essential]
        return self.sinks

    def _close_run(self, run: RunInfo, batch: list[PreparedRecord]) -> None:
        for sink in self._active_sinks():
            try:
                sink.close_run(run)
            except Exception as exc:
                of_run = [record for record in batch if record.run is run]
                for report in self._lost_records(sink, "close the run", exc, of_run):
                    self._write_to_others(report, sink)

    def _write_to_others(self, report: PreparedRecord, failed: Sink) -> None:
        """Write an error `report` about `failed` to every other active sink."""
        for sink in self._active_sinks():
            if sink is not failed:
                self._guard(sink, lambda s: s.write(report))

    def _failure_record(self, sink: Sink, record: PreparedRecord, exc: Exception) -> PreparedRecord:
        self.failures[sink.name] += 1
        count_dropped(1, sink.name)
        self._warn_once(sink.name, f"failed to write a record: {_described(exc)}")
        return error_record(
            record.run,
            record.timestamp_ns,
            f"sink {sink.name!r} failed: {type(exc).__name__}: {exc}; record skipped there",
            record.otel_context,
            sink=sink.name,
            failed_event=record.event.value,
            entry_type=record.context.get("entry_type"),
            source=record.context.get("source"),
            sequence_number=record.context.get("sequence_number"),
        )

    def _lost_records(
        self, sink: Sink, action: str, exc: Exception, batch: list[PreparedRecord]
    ) -> list[PreparedRecord]:
        """One `transcript.error` per run of `batch` that `sink` may have lost."""
        self.failures[sink.name] += 1
        self._warn_once(sink.name, f"failed to {action}: {_described(exc)}")
        counts = Counter(record.run for record in batch)
        count_dropped(len(batch), sink.name)  # an upper bound: "may be missing"
        return [
            error_record(
                run,
                time.time_ns(),
                f"sink {sink.name!r} failed to {action}: {type(exc).__name__}: {exc}; "
                f"up to {count} records of this run may be missing there",
                sink=sink.name,
                possibly_lost_records=count,
            )
            for run, count in counts.items()
        ]

    def force_flush(self, timeout_s: float) -> None:
        """Ask every sink to push what it holds onward (the OTel SDK's exporters)."""
        for sink in self.sinks:
            self._guard(sink, lambda s: s.force_flush(timeout_s))

    def _guard(self, sink: Sink, action: Callable[[Sink], None]) -> None:
        try:
            action(sink)
        except Exception as exc:
            self.failures[sink.name] += 1
            self._warn_once(sink.name, _described(exc))

    def _warn_once(self, sink_name: str, message: str) -> None:
        if sink_name in self._warned_sinks:
            return
        self._warned_sinks.add(sink_name)
        logger.warning(
            "transcript-otel: sink %r: %s (further failures become transcript.error records)",
            sink_name,
            message,
        )


def _described(exc: Exception) -> str:
    """`OSError: [Errno 28] No space left on device: '/path'`: the type, and the file if any."""
    return f"{type(exc).__name__}: {exc}"
