"""The backlog between the agent's thread and the sinks, and its background writer.

The agent thread only appends a tuple to a deque (see `TranscriptEmitter.emit`).
One daemon thread wakes every `flush_interval_s`, or when the backlog passes
`WAKE_THRESHOLD` or a run stops, and does everything else: formatting,
validation, JSON encoding, file I/O and OTel calls. It works in batches of up to
`WAKE_THRESHOLD` records and hands each batch to the sinks in their order, the
JSONL mirror first, so a slow OTel exporter delays the mirror by at most one batch.

The writer needs the GIL, so whatever it does while the agent is busy delays the
agent. When it wakes while records are still arriving, it first waits for a pause
(no new record for `PAUSE_S`, then for longer and longer while they keep coming),
for at most `MAX_DEFER_S`, and less when the backlog nears half its bound or someone
waits for a flush: a burst of entries is written right after the burst, in the time
the agent then spends waiting for its model.
While it works it lets go of the GIL every `YIELD_EVERY_S`: the agent, back from I/O,
would otherwise wait for the interpreter's switch interval (5 ms) to get it back.

Memory bound: the backlog is bounded in bytes (`max_backlog_bytes`, default
64 MiB) of memory it holds, through an entry count the agent thread checks with one
`len()`: the bound divided by the memory an entry in the backlog holds on average,
measured (`_held_memory.py`) on 32 entries at a time at random places. The writer
measures the backlog after each batch. While the backlog is long, the agent thread also
measures it, and the 256 newest entries, once per 256 it queues, so a burst or a stuck
writer cannot hide what entries hold: entries that grow get past the bound by at most
those 256. A larger measurement raises the estimate at once, a smaller one lowers it
halfway; the first replaces the initial guess (64 KiB, for a cold burst of large
entries). When the backlog is full, new entries are dropped *before* they get a sequence
number (the transcript stays gap-free), counted per run, and reported as one
`transcript.error` record as soon as the writer catches up.
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import random
import threading
import time
import weakref
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from transcript_otel.capture.held_memory import entry_held_bytes, sample_of
from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.otel.export_drops import let_this_thread_wait, run_before, set_failed_export_handler
from transcript_otel.otel.metrics import BACKLOG, count_dropped
from transcript_otel.otel.suppression import suppress_instrumentation
from transcript_otel.records.content import ContentPolicy, GenAiContent
from transcript_otel.records.prepared import (
    DeferredSearch,
    PreparedRecord,
    QueuedItem,
    error_record,
    prepare_entry,
    prepare_lifecycle,
    search_batch,
    usable_timestamp,
)
from transcript_otel.records.redaction import Redactor
from transcript_otel.records.run import RunInfo
from transcript_otel.records.serialize import preview
from transcript_otel.sinks.base import Sink

if TYPE_CHECKING:
    from opentelemetry.context import Context

# No NullHandler: a failing sink's one warning must reach stderr even when the
# application has not configured logging (Python's last-resort handler prints it).
_logger = logging.getLogger(__name__)

WAKE_THRESHOLD: Final = 256
MAX_BATCH_BYTES: Final = 2 * 1024 * 1024  # of entry JSON prepared before the sinks take it
DEFAULT_MAX_BACKLOG_BYTES: Final = 64 * 1024 * 1024
DEFAULT_FLUSH_INTERVAL_S: Final = 0.05
PAUSE_S: Final = 0.005
MAX_DEFER_S: Final = 0.5
_MIN_LOOK_S: Final = 0.001  # the shortest wait between two looks for a pause
# How long the writer may wait, per batch, for room in the OTLP export queues (while
# a live backend sets the pace); only while that costs the JSONL mirror nothing.
MAX_EXPORT_WAIT_S: Final = 1.0
DEFAULT_SHUTDOWN_TIMEOUT_S: Final = 5.0
# A thread that wants the GIL back (the agent, returning from I/O) gets it when the holder
# blocks, or else only after the interpreter's switch interval (5 ms). Draining a burst,
# the writer holds it for milliseconds at a time: it lets go every `YIELD_EVERY_S` of work.
# Each time costs it about 80 µs here (a zero sleep waits for the kernel's timer slack, and a
# shorter let-go is too short for the waiting thread to wake and take the GIL): 15% of its
# drain rate. Every 1 ms instead, 1 KB entries went into the mirror 5-10% faster, but the
# agent back from 1 ms of I/O waited 1.3-2.5 ms at p99 instead of 1.1 ms (benchmark
# sections 1 and 3a, alternating, 2026-11-25): the agent comes first.
YIELD_EVERY_S: Final = 0.0005
_MIN_BACKLOG_ENTRIES: Final = 8
# Until an entry has been measured, assume large ones: a cold burst of 50 KB entries
# must not overshoot the bound.
_INITIAL_ENTRY_BYTES: Final = 64 * 1024
# Entries the writer measures after a batch, at random places, to know what entries hold.
_SAMPLED_ENTRIES: Final = 8
# Lifecycle records (start/stop/error) may exceed the entry limit by this much before
# errors are dropped too; start and stop are always kept.
_LIFECYCLE_HEADROOM: Final = 1024


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


def _with_repairs_reports(batch: list[PreparedRecord]) -> list[PreparedRecord]:
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


class _FlushRequest:
    __slots__ = ("deep", "done", "timeout_s")

    def __init__(self, deep: bool, timeout_s: float) -> None:
        self.deep = deep
        self.timeout_s = timeout_s
        self.done = threading.Event()


class _DeferredAction:
    """A callable the writer runs once every record queued before it is written."""

    __slots__ = ("action",)

    def __init__(self, action: Callable[[], None]) -> None:
        self.action = action


class TranscriptPipeline:
    """A byte-bounded backlog drained into `sinks` by one background thread."""

    def __init__(
        self,
        sinks: Iterable[Sink],
        *,
        max_backlog_bytes: int = DEFAULT_MAX_BACKLOG_BYTES,
        flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S,
        shutdown_timeout_s: float = DEFAULT_SHUTDOWN_TIMEOUT_S,
        redactor: Redactor | None = None,
        content_policy: ContentPolicy | None = None,
        genai_content: GenAiContent | None = None,
    ) -> None:
        self.sinks: list[Sink] = list(sinks)
        # Secrets go before any sink sees an entry (`redaction.py`); on by default.
        self.redactor = Redactor() if redactor is None else redactor
        # How much content every sink gets (`content.py`); everything by default.
        self.content_policy = ContentPolicy() if content_policy is None else content_policy
        # Where GenAI content goes beside the transcript (spans, events), read by the span
        # wiring; only what `content_policy` keeps `full` goes anywhere.
        self.genai_content = GenAiContent() if genai_content is None else genai_content
        self.max_backlog_bytes = max_backlog_bytes
        self.flush_interval_s = flush_interval_s
        self.shutdown_timeout_s = shutdown_timeout_s
        self.backlog: deque[QueuedItem | _FlushRequest | _DeferredAction] = deque()
        self._entry_bytes = 0.0  # measured memory of one queued entry; 0 = not measured yet
        self.backlog_limit = self._limit_for(_INITIAL_ENTRY_BYTES)
        self._samples_due = 0
        self._random = random.Random(0)  # which entries are measured (`_measure_on_writer`)
        self._measure_newest = False  # where the agent thread measures next
        self._wake = threading.Event()
        self._flush_wanted = threading.Event()  # someone waits: write now, even mid-burst
        self._room = threading.Event()  # set after each batch written (`wait_for_room`)
        # Flushes of the mirror alone queued and not yet reached by the writer (a deep flush
        # asks for the exports too: it may wait for the backend, within its timeout).
        self._flushes_pending = 0
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._released = False
        self._mirror_only = False
        self._warned_sinks: set[str] = set()
        self._on_shutdown: list[Callable[[], None]] = []
        # Writer side: actions due once the batch being prepared is written, and the
        # records they submit to be written next (`after_pending`, `submit_next`).
        self._after_batch: list[Callable[[], None]] = []
        self._next_records: list[QueuedItem] = []
        # The runs written here, by id: for reports that name a run only by its id.
        self._runs: weakref.WeakValueDictionary[str, RunInfo] = weakref.WeakValueDictionary()
        self._yield_at = 0.0
        # How often the writer lets an agent's thread have the GIL (`YIELD_EVERY_S`); a process
        # with no agent thread in it (`transcript-otel run`) lets go less often.
        self.yield_every_s = YIELD_EVERY_S
        self.internal_errors = 0
        self.sink_failures: Counter[str] = Counter()
        _PIPELINES.add(self)

    # -- agent-thread side -------------------------------------------------------------

    def register_run(self, run: RunInfo) -> None:
        """Know `run` by its id (reports name runs by id) and make sure the writer runs."""
        self._runs[run.run_id] = run
        self.ensure_running()

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

    def submit(self, item: QueuedItem) -> None:
        """Queue a lifecycle record (start/stop/error). Never raises, never waits for I/O.

        Start and stop are always queued; error records are dropped and counted
        like entries once the backlog is well past its bound.
        """
        if item[0] is TranscriptEvent.ERROR and len(self.backlog) >= self.backlog_limit + _LIFECYCLE_HEADROOM:
            item[1].note_drop()
            return
        self.backlog.append(item)
        # Only a run's end is worth waking the writer for; the rest waits for its tick,
        # so a busy agent is not interrupted by the writer once per span.
        if item[0] is TranscriptEvent.STOP:
            self.wake()
        elif self._thread is None:
            self.ensure_running()

    def report_failed_export(self, lost: Mapping[str, int], reason: str) -> None:
        """The export of `lost[run_id]` log records of these runs failed: one
        `transcript.error` in each run's transcript (the mirror still has the records).
        Called on an export thread; runs of other pipelines are skipped. A batch that fails
        after its run stopped is reported after `transcript.stop`, or, once nothing holds the
        run any more, only in the drop metric and the shutdown's warning."""
        if self._closed:
            return  # the shutdown's warning names what is lost from now on
        for run_id, count in lost.items():
            run = self._runs.get(run_id)
            if run is None:
                continue
            # "may": an export that timed out may still have reached a slow backend.
            records = "1 log record" if count == 1 else f"{count} log records"
            error = (
                f"the OTLP export of {records} of this run failed ({reason}); the backend "
                "may not have them; the JSONL mirror does: `transcript-otel replay` sends them"
            )
            extra = {"error": error, "sink": "otel_logs", "failed_export_records": count}
            self.submit((TranscriptEvent.ERROR, run, None, None, time.time_ns(), extra, None, None))

    def submit_next(self, item: QueuedItem) -> None:
        """`submit()`, but from an `after_pending()` action on the writer: `item` is written
        next, in that action's place, ahead of what was queued while it waited (records
        submitted by several such actions keep their order)."""
        if threading.current_thread() is self._thread:
            self._next_records.append(item)
        else:
            self.submit(item)

    def wake(self) -> None:
        """Ask the writer to drain now rather than at its next tick."""
        if self._thread is None:
            self.ensure_running()
        if not self._wake.is_set():
            self._wake.set()

    def wake_and_sample(self) -> None:
        """`wake()`; called by the agent thread for every entry queued past `WAKE_THRESHOLD`.

        The writer measures the backlog after each batch, but a burst can outrun it and a
        stuck sink stops it: then the agent thread measures it, once per 256 entries it queues.
        """
        self._samples_due -= 1
        if self._samples_due <= 0:
            self._samples_due = WAKE_THRESHOLD
            self._measure_on_agent_thread()
        self.wake()

    def wait_for_room(self, timeout_s: float) -> bool:
        """For a producer that may wait (never an agent's own thread: `transcript-otel run`'s
        capture): wait, up to `timeout_s`, until the backlog is at most half full. Whether it is."""
        deadline = time.monotonic() + timeout_s
        while len(self.backlog) > self.backlog_limit // 2:
            left = deadline - time.monotonic()
            if left <= 0 or self._closed:
                return False
            self._room.clear()
            self.wake()
            self._room.wait(min(left, self.flush_interval_s))
        return True

    def ensure_running(self) -> None:
        if self._thread is not None or self._closed:
            return
        with self._lock:
            if self._thread is not None or self._closed:
                return
            _register_exit_handler()
            thread = threading.Thread(target=self._writer_loop, name="transcript-otel-writer", daemon=True)
            self._thread = thread
            thread.start()

    def flush(self, timeout_s: float | None = None, *, deep: bool = False) -> bool:
        """Wait until every record queued before this call is written.

        `deep=True` also asks each sink to push its data onward (the OTel SDK's
        exporters). Bounded by `timeout_s` (default `shutdown_timeout_s`); returns
        False on timeout. A no-op when called from the writer thread itself.
        """
        timeout = self.shutdown_timeout_s if timeout_s is None else timeout_s
        if threading.current_thread() is self._thread or self._closed:
            return not self.backlog
        request = _FlushRequest(deep, timeout)
        if not deep:
            with self._lock:
                self._flushes_pending += 1
        self.backlog.append(request)
        self._flush_wanted.set()
        self.wake()
        return request.done.wait(timeout)

    def after_pending(self, action: Callable[[], None]) -> None:
        """Run `action` on the writer once everything queued before it is written.

        Instrumentors end their spans this way: the span events of the records
        emitted inside a span are added before it ends, and the agent never waits.
        On the writer itself (an entry's placement, another action) it runs once the
        records being prepared are written. Runs at once (on the caller's thread) when
        the pipeline is closed.
        """
        if self._closed:
            self._run_action(action)
            return
        if threading.current_thread() is self._thread:
            self._after_batch.append(action)
            return
        self.backlog.append(_DeferredAction(action))
        if self._thread is None:
            self.ensure_running()

    def _run_action(self, action: Callable[[], None]) -> None:
        try:
            action()
        except Exception as exc:
            self.internal_errors += 1
            _logger.warning("transcript-otel: deferred action failed: %r", exc)

    def add_shutdown_callback(self, callback: Callable[[], None]) -> None:
        """Run `callback()` after the final drain at shutdown, bounded by its deadline."""
        self._on_shutdown.append(callback)

    def adopt_shutdown_callbacks(self, other: TranscriptPipeline) -> None:
        """Take over `other`'s shutdown callbacks (this pipeline replaces it as the default)."""
        self._on_shutdown.extend(other._on_shutdown)
        other._on_shutdown.clear()

    def shutdown(self, timeout_s: float | None = None) -> None:
        """Drain everything, stop the writer and release the sinks; bounded in time."""
        timeout = self.shutdown_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout
        self._close(deadline)
        _run_all_before(self._release_actions(deadline), deadline)

    def _close(self, deadline: float) -> None:
        """Drain the backlog and stop the writer, completing the local mirror first.

        Past 80% of the time left, the writer stops feeding the OTel sinks and only
        finishes the mirror, which is fast: a dead or slow backend must not cost
        the local copy.
        """
        if self._closed:
            return
        remaining = max(0.0, deadline - time.monotonic())
        if not self.flush(remaining * 0.8):
            self._mirror_only = True
            self.flush(max(0.0, deadline - time.monotonic()))
        with self._lock:
            self._closed = True
            thread = self._thread
        self.backlog_limit = 0  # anything emitted from now on is dropped and counted
        self._flush_wanted.set()
        self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(max(0.0, deadline - time.monotonic()))
        if self.backlog:
            _logger.warning(
                "transcript-otel: %d queued records were not written before the shutdown deadline",
                len(self.backlog),
            )

    def _release_actions(self, deadline: float) -> list[_ShutdownAction]:
        """What releases the sinks and providers: once (a second shutdown has nothing to do)."""
        if self._released:
            return []
        self._released = True
        remaining = max(0.0, deadline - time.monotonic())
        actions = [
            _ShutdownAction(f"sink {sink.name}", functools.partial(sink.shutdown, remaining), sink.essential)
            for sink in self.sinks
        ]
        actions += [
            _ShutdownAction(getattr(callback, "__qualname__", repr(callback)), callback, essential=False)
            for callback in self._on_shutdown
        ]
        return actions

    # -- writer thread -----------------------------------------------------------------

    def emit_genai_event(
        self, name: str, attributes: Mapping[str, Any], context: Context, timestamp_ns: int
    ) -> None:
        """One OTel event (a log record with event_name) through every OTel log sink; never raises.

        For the span wiring, on the writer thread (where spans end): not a transcript
        record, so it counts in no run's entries, and it is not in the mirror. A no-op
        without an OTel log sink (log records switched off) and once the sinks are released.
        """
        if self._released:
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
                _logger.debug("transcript-otel: could not emit the %s event: %r", name, exc)

    def _writer_loop(self) -> None:
        # Our own OTel calls must not be traced by other instrumentations.
        with suppress_instrumentation():
            self._drain_until_closed()

    def _drain_until_closed(self) -> None:
        while True:
            self._wake.wait(self.flush_interval_s)
            self._wake.clear()
            self._wait_for_pause()
            self._flush_wanted.clear()
            try:
                self._drain()
            except Exception as exc:  # the writer must survive anything
                self.internal_errors += 1
                _logger.warning("transcript-otel: writer error: %r", exc)
            if self._closed and not self.backlog:
                return

    def _wait_for_pause(self) -> None:
        """Wait, bounded, until no record arrived since the last look (see the module's docstring).

        Each look takes the GIL from an agent that may be busy (0.7 ms of a 55 ms
        `evaluate()` in a scratch run, when it looked every `PAUSE_S`), so while records
        keep coming the writer looks half as often each time, but never later than half
        the time in which, at the rate they came, the backlog would be half full.
        """
        deadline = time.monotonic() + MAX_DEFER_S
        half_full = self.backlog_limit // 2
        seen = len(self.backlog)
        interval = PAUSE_S
        while 0 < seen < half_full:
            left = deadline - time.monotonic()
            if left <= 0 or self._flush_wanted.wait(min(interval, left)):
                return
            now = len(self.backlog)
            if now <= seen:
                return
            time_to_half_full = (half_full - now) * interval / (now - seen)
            interval = max(_MIN_LOOK_S, min(2 * interval, time_to_half_full / 2))
            seen = now

    def _drain(self) -> None:
        backlog = self.backlog
        while True:
            batch: list[PreparedRecord] = []
            deferred: list[DeferredSearch] = []  # entries whose content is searched with the batch
            batch_bytes = 0
            taken: list[QueuedItem] = []
            request: _FlushRequest | _DeferredAction | None = None
            # Prepared records hold their JSON until the sinks took them: a batch is
            # bounded in bytes too, or 256 large entries would sit outside the backlog's bound.
            while len(batch) < WAKE_THRESHOLD and batch_bytes < MAX_BATCH_BYTES:
                try:
                    item = backlog.popleft()
                except IndexError:
                    break
                if isinstance(item, (_FlushRequest, _DeferredAction)):
                    request = item
                    break
                taken.append(item)
                batch_bytes += self._prepare(item, batch, deferred)
                if time.perf_counter() >= self._yield_at:
                    self._yield_gil()
            if deferred:
                search_batch(deferred)
            batch = _with_repairs_reports(batch)
            if taken:
                self._measure_on_writer(taken)
            let_this_thread_wait(time.monotonic() + MAX_EXPORT_WAIT_S if self._may_wait_for_export() else 0.0)
            if batch:
                self._write_batch(batch)
                self._room.set()
                if request is not None and (self._after_batch or self._next_records):
                    # What the batch's actions record is written before the request is served.
                    backlog.appendleft(request)
                    request = None
                self._settle()
            if isinstance(request, _DeferredAction):
                self._run_action(request.action)
                self._settle()
            elif request is not None:
                if not request.deep:
                    with self._lock:
                        self._flushes_pending -= 1
                if request.deep and not self._mirror_only:
                    self._force_flush_sinks(request.timeout_s)
                request.done.set()
            elif not batch:
                return

    def _yield_gil(self) -> None:
        """Release the GIL for a moment: a thread waiting for it takes it now rather than after
        the switch interval (the agent's p99 wake-up delay while the writer drains a burst of
        1 KB entries: 5.2 ms without, 0.6-0.9 ms with yields every 0.5 ms, in a scratch run)."""
        time.sleep(0)
        self._yield_at = time.perf_counter() + self.yield_every_s

    def _settle(self) -> None:
        """Run the actions due after what was just written; queue the records they made first."""
        while self._after_batch:
            actions, self._after_batch = self._after_batch, []
            for action in actions:
                self._run_action(action)
        if self._next_records:
            self.backlog.extendleft(reversed(self._next_records))
            self._next_records.clear()

    def _may_wait_for_export(self) -> bool:
        """Whether the writer may wait for a live backend to take what it sends (backpressure):
        only while that costs the JSONL mirror nothing, that is, with no flush of the mirror
        waiting (a deep flush asks for the exports too), the
        backlog under three quarters of its bound (the last quarter is the mirror's room to
        catch up), and not in the mirror-only end of a shutdown."""
        return (
            not self._mirror_only
            and not self._flushes_pending
            and len(self.backlog) < self.backlog_limit * 3 // 4
        )

    def _prepare(self, item: QueuedItem, batch: list[PreparedRecord], deferred: list[DeferredSearch]) -> int:
        """Append the records `item` yields: a pending drop report, then the record (the
        report of its repairs follows once the batch is searched: `_with_repairs_reports`).
        The entry's JSON size (detail and raw); 0 for anything else."""
        event, run = item[0], item[1]
        if run.held_start is not None:
            held, run.held_start = run.held_start, None
            if event is TranscriptEvent.STOP:
                return 0  # a run inherited by a forked child that recorded nothing: no file at all
            self._prepare(held, batch, deferred)
        if run.dropped != run.dropped_reported:
            dropped = run.take_unreported_drops()
            count_dropped(dropped, BACKLOG)
            batch.append(
                error_record(
                    run,
                    time.time_ns(),
                    f"{dropped} transcript entries dropped: the backlog exceeded its bound of "
                    f"{self.max_backlog_bytes} bytes while the sinks fell behind",
                    dropped_entries=dropped,
                )
            )
        try:
            if event is TranscriptEvent.ENTRY:
                record = prepare_entry(item, self.redactor, self.content_policy, deferred)
            else:
                record = prepare_lifecycle(item, self.redactor)
        except Exception as exc:
            self.internal_errors += 1
            at = usable_timestamp(item[4])  # the one field that may be what failed
            message = f"could not build record: {preview(exc)}"
            batch.append(error_record(run, time.time_ns() if at is None else at, message))
            return 0
        batch.append(record)
        if event is TranscriptEvent.ENTRY:
            return len(record.detail_json or b"") + len(record.context.get("raw") or "")
        return 0

    def _write_batch(self, batch: list[PreparedRecord]) -> None:
        """Every sink takes the whole batch in turn, then flushes it.

        Failures become `transcript.error` records for the other sinks, written
        after the batch; runs that stopped in the batch are closed last.
        """
        failures: list[tuple[Sink, PreparedRecord]] = []
        for sink in self._active_sinks():
            for record in batch:
                try:
                    sink.write(record)
                except Exception as exc:
                    failures.append((sink, self._failure_record(sink, record, exc)))
                if time.perf_counter() >= self._yield_at:
                    self._yield_gil()
            try:
                sink.flush()
            except Exception as exc:
                failures.extend((sink, report) for report in self._lost_records(sink, "flush", exc, batch))
        for failed_sink, report in failures:
            self._write_to_others(report, failed_sink)
        if failures:
            for sink in self._active_sinks():
                self._guard(sink, lambda s: s.flush())
        for record in batch:
            if record.event is TranscriptEvent.STOP:
                self._close_run(record.run, batch)

    def _active_sinks(self) -> list[Sink]:
        if self._mirror_only:
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
        self.sink_failures[sink.name] += 1
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
        self.sink_failures[sink.name] += 1
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

    def _force_flush_sinks(self, timeout_s: float) -> None:
        for sink in self.sinks:
            self._guard(sink, lambda s: s.force_flush(timeout_s))

    def _guard(self, sink: Sink, action: Callable[[Sink], None]) -> None:
        try:
            action(sink)
        except Exception as exc:
            self.sink_failures[sink.name] += 1
            self._warn_once(sink.name, _described(exc))

    def _warn_once(self, sink_name: str, message: str) -> None:
        if sink_name in self._warned_sinks:
            return
        self._warned_sinks.add(sink_name)
        _logger.warning(
            "transcript-otel: sink %r: %s (further failures become transcript.error records)",
            sink_name,
            message,
        )

    def _measure_on_agent_thread(self) -> None:
        """While the writer is behind: measure one entry, in turn among the 256 newest (queued
        since the last time) and anywhere in the backlog (old entries count too). 5 µs for a
        1 KB notification, 60 µs for a nested 50 KB one, once per 256 entries queued."""
        self._measure_newest = not self._measure_newest
        newest = WAKE_THRESHOLD if self._measure_newest else None
        for item in sample_of(self.backlog, 1, self._random, newest):
            self._fold(entry_held_bytes(item))

    def _measure_on_writer(self, taken: list[QueuedItem]) -> None:
        """After a batch: measure entries at random places in what is left in the backlog, or,
        with little left, in the batch just `taken` (the next entries are likely similar).
        Up to 0.1 ms a nested 50 KB entry: the agent may have the GIL between two."""
        left = sample_of(self.backlog, _SAMPLED_ENTRIES, self._random)
        if len(left) < _SAMPLED_ENTRIES:
            left = sample_of(taken, _SAMPLED_ENTRIES, self._random)
        if not left:
            return
        total = 0.0
        for item in left:
            total += entry_held_bytes(item)
            if time.perf_counter() >= self._yield_at:
                self._yield_gil()
        self._fold(total / len(left))

    def _fold(self, measured: float) -> None:
        """The first measurement replaces the initial guess; a larger one raises the estimate at
        once (entries that grow must not overshoot the bound), a smaller one lowers it an eighth
        of the way (one small entry among large ones must not let many more in); the limit
        follows."""
        if not self._entry_bytes or measured > self._entry_bytes:
            self._set_entry_bytes(measured)
        else:
            self._set_entry_bytes(self._entry_bytes + (measured - self._entry_bytes) / 8)

    def _set_entry_bytes(self, entry_bytes: float) -> None:
        self._entry_bytes = entry_bytes
        if not self._closed:
            self.backlog_limit = self._limit_for(entry_bytes)

    def _limit_for(self, entry_bytes: float) -> int:
        return max(_MIN_BACKLOG_ENTRIES, int(self.max_backlog_bytes / entry_bytes))

    # -- process lifecycle -------------------------------------------------------------

    def _after_fork_in_child(self) -> None:
        """The child inherits the parent's backlog and files but not its thread."""
        self.backlog.clear()
        self._wake = threading.Event()
        self._flush_wanted = threading.Event()
        self._room = threading.Event()
        self._flushes_pending = 0
        self._after_batch = []
        self._next_records = []
        self._lock = threading.Lock()
        self._thread = None
        for sink in self.sinks:
            self._guard(sink, lambda s: s.after_fork_in_child())


class _ShutdownAction(NamedTuple):
    name: str
    run: Callable[[], None]
    essential: bool  # the mirror: worth a warning when cut short (the OTLP side reports its own losses)


def _run_all_before(actions: list[_ShutdownAction], deadline: float) -> None:
    """Run `actions` concurrently on daemon threads; stop waiting at `deadline`."""
    workers = []
    for action in actions:
        target = _logged(action.name, functools.partial(run_before, deadline, action.run))
        worker = threading.Thread(target=target, name="transcript-otel-shutdown", daemon=True)
        worker.start()
        workers.append((action, worker))
    for action, worker in workers:
        worker.join(max(0.0, deadline - time.monotonic()))
        if worker.is_alive():
            level = logging.WARNING if action.essential else logging.DEBUG
            _logger.log(level, "transcript-otel: %s did not finish before the shutdown deadline", action.name)


def _logged(name: str, action: Callable[[], None]) -> Callable[[], None]:
    def run() -> None:
        try:
            action()
        except Exception as exc:
            _logger.warning("transcript-otel: %s failed at shutdown: %r", name, exc)

    return run


_PIPELINES: weakref.WeakSet[TranscriptPipeline] = weakref.WeakSet()


def _reset_pipelines_after_fork() -> None:
    for pipeline in list(_PIPELINES):
        pipeline._after_fork_in_child()


def shutdown_all(timeout_s: float | None = None) -> None:
    """Shut every pipeline down against one deadline (the longest shutdown timeout).

    All backlogs are drained before any sink or provider is released, so no
    pipeline writes into an OTel provider another pipeline has shut down.
    """
    pipelines = list(_PIPELINES)
    if not pipelines:
        return
    timeout = timeout_s if timeout_s is not None else max(p.shutdown_timeout_s for p in pipelines)
    deadline = time.monotonic() + timeout
    for pipeline in pipelines:
        pipeline._close(deadline)
    actions = [action for pipeline in pipelines for action in pipeline._release_actions(deadline)]
    _run_all_before(actions, deadline)


_exit_handler_registered = False


def _register_exit_handler() -> None:
    # Registered when the first writer starts, so it runs before the exit handlers
    # of OTel providers created earlier (atexit is last-in, first-out) and the final
    # records still reach them.
    global _exit_handler_registered
    if not _exit_handler_registered:
        _exit_handler_registered = True
        atexit.register(shutdown_all)


os.register_at_fork(after_in_child=_reset_pipelines_after_fork)


def _report_failed_export(lost: Mapping[str, int], reason: str) -> None:
    for pipeline in list(_PIPELINES):
        pipeline.report_failed_export(lost, reason)


set_failed_export_handler(_report_failed_export)


def _described(exc: Exception) -> str:
    """`OSError: [Errno 28] No space left on device: '/path'`: the type, and the file if any."""
    return f"{type(exc).__name__}: {exc}"
