"""The background writer: one daemon thread that drains the backlog into the sinks.

It wakes every `flush_interval_s` (less often while it finds nothing: up to
`MAX_IDLE_WAIT_S`), or when the backlog passes `WAKE_THRESHOLD` or a run stops, and does
everything the agent's thread does not: formatting, validation, JSON
encoding, file I/O and OTel calls. It works in batches of up to `WAKE_THRESHOLD` records and
hands each batch to the sinks in their order (`SinkWriting`), the JSONL mirror first, so
a slow OTel exporter delays the mirror by at most one batch. Flush requests and deferred
actions queued among the records are served once everything queued before them is written.

The writer needs the GIL, so whatever it does while the agent is busy delays the
agent. When it wakes while records are still arriving, it first waits for a pause
(no new record for `PAUSE_S`, then for longer and longer while they keep coming, and the
process's other threads idle meanwhile: the agent may be at work without recording),
for at most `MAX_DEFER_S`, and less when the backlog nears half its bound or someone
waits for a flush: a burst of entries is written right after the burst, in the time
the agent then spends waiting for its model.
While it works it lets go of the GIL now and then (`gil_pacing.py`): the agent, back from
I/O, would otherwise wait for the interpreter's switch interval to get it back.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Final, Protocol

from transcript_otel.capture.agent_activity import ActivityWatch
from transcript_otel.capture.backlog import Backlog
from transcript_otel.capture.batch_reports import report_drops, with_repairs_reports
from transcript_otel.capture.gil_pacing import GilPacing
from transcript_otel.capture.registry import register_exit_handler
from transcript_otel.capture.shared import WAKE_THRESHOLD, DeferredAction, FlushRequest, logger
from transcript_otel.capture.sink_writing import SinkWriting
from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.otel.export_drops import let_this_thread_wait
from transcript_otel.otel.suppression import suppress_instrumentation
from transcript_otel.records.content import ContentPolicy
from transcript_otel.records.content_search import DeferredSearch, search_batch
from transcript_otel.records.entry_record import prepare_entry, usable_timestamp
from transcript_otel.records.prepared import PreparedRecord, error_record, prepare_lifecycle
from transcript_otel.records.queued import QueuedItem
from transcript_otel.records.redaction import Redactor
from transcript_otel.records.serialize import preview

MAX_BATCH_BYTES: Final = 2 * 1024 * 1024  # of entry JSON prepared before the sinks take it
DEFAULT_FLUSH_INTERVAL_S: Final = 0.05
# The longest an idle writer sleeps before it looks at the backlog again.
MAX_IDLE_WAIT_S: Final = 0.4
# Fewer records than this at a wake-up are a trickle, written as well a little later.
TRICKLE: Final = 32
PAUSE_S: Final = 0.005
MAX_DEFER_S: Final = 0.5
_MIN_LOOK_S: Final = 0.001  # the shortest wait between two looks for a pause
# How long the writer may wait, per batch, for room in the OTLP export queues (while
# a live backend sets the pace); only while that costs the JSONL mirror nothing.
MAX_EXPORT_WAIT_S: Final = 1.0


class ContentSettings(Protocol):
    """What the records are made by: the pipeline's redactor and content policy, read as each
    record is prepared (they may be replaced while the writer runs)."""

    redactor: Redactor
    content_policy: ContentPolicy


class BackgroundWriter:
    """The writer thread: started on first use, it prepares the records and writes them.

    Other threads ask it through `wake()`, `queue_flush()` and `wait_for_batch()`; an action it
    runs hands it records and actions through `write_next()` and `defer()`.
    """

    def __init__(
        self,
        backlog: Backlog,
        sink_writing: SinkWriting,
        pacing: GilPacing,
        settings: ContentSettings,
        *,
        flush_interval_s: float,
        drained_by_caller: bool,
    ) -> None:
        """`drained_by_caller`: no thread; the one thread that queues records writes them by
        calling `drain_here()`."""
        self._backlog = backlog
        self._sink_writing = sink_writing
        self._pacing = pacing
        self._settings = settings
        self.flush_interval_s = flush_interval_s
        self.drained_by_caller = drained_by_caller
        # Shut down: what is queued from now on is not written.
        self.closed = False
        self.internal_errors = 0
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        """No thread yet, nothing asked of it: as made, and in a forked child."""
        self.thread: threading.Thread | None = None
        self._wake = threading.Event()
        self._flush_wanted = threading.Event()  # someone waits: write now, even mid-burst
        self._room = threading.Event()  # set after each batch written (`wait_for_batch`)
        # Flushes of the mirror alone queued and not yet reached (a deep flush asks for the
        # exports too: it may wait for the backend, within its timeout).
        self._flushes_pending = 0
        # Actions due once the batch being prepared is written, and the records they submit to
        # be written next, with the actions deferred after those (`defer`, `write_next`).
        self._after_batch: list[Callable[[], None]] = []
        self._next_records: list[QueuedItem | DeferredAction] = []
        # Whether a deferred action runs (`acts_here()`: on this thread): the entries it emits
        # are written in its place, like the records it submits (`write_next`).
        self.acting = False

    def after_fork_in_child(self) -> None:
        """The child inherits the parent's writer but not its thread."""
        self._lock = threading.Lock()
        self._reset()

    def ensure_running(self) -> None:
        """Start the writer thread, unless it runs already or the pipeline is closed."""
        if self.thread is not None or self.closed or self.drained_by_caller:
            return
        with self._lock:
            if self.thread is not None or self.closed:
                return
            register_exit_handler()
            thread = threading.Thread(target=self._writer_loop, name="transcript-otel-writer", daemon=True)
            self.thread = thread
            thread.start()

    def wake(self) -> None:
        """Drain now rather than at the next tick."""
        if self.thread is None:
            self.ensure_running()
        if not self._wake.is_set():
            self._wake.set()

    def acts_here(self) -> bool:
        """Whether this thread is the writer (running a deferred action, see `acting`)."""
        return threading.current_thread() is self.thread

    def queue_flush(self, deep: bool, timeout_s: float) -> FlushRequest:
        """Queue a flush request and wake the writer (a pipeline drained by its caller drains here)."""
        request = FlushRequest(deep, timeout_s)
        if not deep:
            with self._lock:
                self._flushes_pending += 1
        self._backlog.items.append(request)
        if self.drained_by_caller:
            self.drain_here()
        else:
            self._flush_wanted.set()
            self.wake()
        return request

    def wait_for_batch(self, timeout_s: float) -> None:
        """Wake the writer and wait, up to `timeout_s`, until it has written a batch."""
        self._room.clear()
        self.wake()
        self._room.wait(timeout_s)

    def write_next(self, item: QueuedItem) -> None:
        """On the writer: write `item` next, in the place of the action that submits it."""
        self._next_records.append(item)

    def defer(self, action: Callable[[], None]) -> None:
        """On the writer: run `action` once the records being prepared are written (from an
        entry's placement), or, from another action, in its place among what that action
        records and defers."""
        if self.acting:
            self._next_records.append(DeferredAction(action))
        else:
            self._after_batch.append(action)

    def run_action(self, action: Callable[[], None]) -> None:
        acting, self.acting = self.acting, True
        try:
            action()
        except Exception as exc:
            self.internal_errors += 1
            logger.warning("transcript-otel: deferred action failed: %r", exc)
        finally:
            self.acting = acting

    def close(self, deadline: float) -> None:
        """Write what is left and stop, waiting for the thread until `deadline` at most."""
        with self._lock:
            self.closed = True
            thread = self.thread
        self._flush_wanted.set()
        self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(max(0.0, deadline - time.monotonic()))

    def drain_here(self) -> None:
        """Write everything queued, on this thread: how a pipeline `drained_by_caller` is
        written. While it runs, this thread is the writer (actions it runs that queue records
        or defer more actions see it as such); called again from within, it does nothing."""
        if not self.drained_by_caller:
            raise RuntimeError("drain_here() is for a pipeline drained by its caller")
        if self.thread is not None:
            return
        self.thread = threading.current_thread()
        try:
            with suppress_instrumentation():
                self._drain_surviving()
        finally:
            self.thread = None

    def _writer_loop(self) -> None:
        # Our own OTel calls must not be traced by other instrumentations.
        with suppress_instrumentation():
            self._drain_until_closed()

    def _drain_until_closed(self) -> None:
        wait = self.flush_interval_s
        while True:
            self._wake.wait(wait)
            self._wake.clear()
            found = len(self._backlog.items)
            self._wait_for_pause()
            self._flush_wanted.clear()
            self._drain_surviving()
            if self.closed and not self._backlog.items:
                return
            # A wake-up costs CPU whatever it finds: found idle, or a trickle of records (an SDK
            # message now and then), the writer looks half as often each time, up to
            # `MAX_IDLE_WAIT_S`; what is queued past `WAKE_THRESHOLD`, a run's end or a flush
            # still wake it at once.
            longest = max(self.flush_interval_s, MAX_IDLE_WAIT_S)
            wait = self.flush_interval_s if found >= TRICKLE else min(2 * wait, longest)

    def _drain_surviving(self) -> None:
        self._pacing.start()
        try:
            self._drain()
            if self.drained_by_caller:
                self._sink_writing.flush_written()
        except Exception as exc:  # the writer (or the caller draining) must survive anything
            self.internal_errors += 1
            logger.warning("transcript-otel: writer error: %r", exc)

    def _wait_for_pause(self) -> None:
        """Wait, bounded, until no record arrived since the last look and the process's other
        threads (the agent's) were mostly idle meanwhile (see the module's docstring).

        Each look takes the GIL from an agent that may be busy, so while records keep
        coming the writer looks half as often each time, but never later than half the
        time in which, at the rate they came, the backlog would be half full.
        """
        items = self._backlog.items
        deadline = time.monotonic() + MAX_DEFER_S
        half_full = self._backlog.limit // 2
        seen = len(items)
        interval = PAUSE_S
        activity = ActivityWatch()
        while 0 < seen < half_full:
            left = deadline - time.monotonic()
            if left <= 0 or self._flush_wanted.wait(min(interval, left)):
                return
            now = len(items)
            busy = activity.others_busy()
            if now <= seen and not busy:
                return
            if now > seen:
                time_to_half_full = (half_full - now) * interval / (now - seen)
                interval = max(_MIN_LOOK_S, min(2 * interval, time_to_half_full / 2))
            else:  # no record, but the agent is at work (it ends its turn, parses lines)
                interval = 2 * interval
            seen = now

    def _drain(self) -> None:
        backlog = self._backlog.items
        pacing = self._pacing
        sink_writing = self._sink_writing
        while True:
            batch: list[PreparedRecord] = []
            deferred: list[DeferredSearch] = []  # entries whose content is searched with the batch
            batch_bytes = 0
            taken: list[QueuedItem] = []
            request: FlushRequest | DeferredAction | None = None
            # Prepared records hold their JSON until the sinks took them: a batch is
            # bounded in bytes too, or a batch of large entries would sit outside the backlog's bound.
            while len(batch) < WAKE_THRESHOLD and batch_bytes < MAX_BATCH_BYTES:
                try:
                    item = backlog.popleft()
                except IndexError:
                    break
                # A record is a plain tuple: one type check, the isinstance only for a request.
                if type(item) is not tuple and isinstance(item, (FlushRequest, DeferredAction)):
                    request = item
                    break
                taken.append(item)
                batch_bytes += self._prepare(item, batch, deferred)
                if time.perf_counter() >= pacing.due:
                    pacing.yield_gil()
            if deferred:
                search_batch(deferred)
            batch = with_repairs_reports(batch)
            if taken and not self.drained_by_caller:
                self._backlog.measure_on_writer(taken, pacing)
            let_this_thread_wait(time.monotonic() + MAX_EXPORT_WAIT_S if self._may_wait_for_export() else 0.0)
            if batch:
                sink_writing.write_batch(batch)
                self._room.set()
                if request is not None and (self._after_batch or self._next_records):
                    # What the batch's actions record is written before the request is served.
                    backlog.appendleft(request)
                    request = None
                self._settle()
            if isinstance(request, DeferredAction):
                self.run_action(request.action)
                self._settle()
            elif request is not None:
                if not request.deep:
                    with self._lock:
                        self._flushes_pending -= 1
                if request.deep and not sink_writing.mirror_only:
                    sink_writing.force_flush(request.timeout_s)
                request.done.set()
            elif not batch:
                return

    def _settle(self) -> None:
        """Run the actions due after what was just written; queue the records they made first."""
        while self._after_batch:
            actions, self._after_batch = self._after_batch, []
            for action in actions:
                self.run_action(action)
        if self._next_records:
            self._backlog.items.extendleft(reversed(self._next_records))
            self._next_records.clear()

    def _may_wait_for_export(self) -> bool:
        """Whether the writer may wait for a live backend to take what it sends (backpressure):
        only while that costs the JSONL mirror nothing, that is, with no flush of the mirror
        waiting (a deep flush asks for the exports too), the
        backlog under three quarters of its bound (the last quarter is the mirror's room to
        catch up), and not in the mirror-only end of a shutdown."""
        return (
            not self._sink_writing.mirror_only
            and not self._flushes_pending
            and len(self._backlog.items) < self._backlog.limit * 3 // 4
        )

    def _prepare(self, item: QueuedItem, batch: list[PreparedRecord], deferred: list[DeferredSearch]) -> int:
        """Append the records `item` yields: a pending drop report, then the record (the
        report of its repairs follows once the batch is searched: `with_repairs_reports`).
        The entry's JSON size (detail and raw); 0 for anything else."""
        event, run = item[0], item[1]
        if event is TranscriptEvent.STOP:
            run.stop_reached = True
        if run.held_start is not None:
            held, run.held_start = run.held_start, None
            if event is TranscriptEvent.STOP:
                return 0  # a run inherited by a forked child that recorded nothing: no file at all
            self._prepare(held, batch, deferred)
        if run.has_unreported_drops():
            report_drops(run, batch, self._backlog.max_bytes)
        try:
            if event is TranscriptEvent.ENTRY:
                record = prepare_entry(item, self._settings.redactor, self._settings.content_policy, deferred)
            else:
                record = prepare_lifecycle(item, self._settings.redactor)
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
