"""What any thread calls on a pipeline: queue records, wake the writer, wait for it.

None of it waits for I/O: queueing is one `deque.append` (`TranscriptEmitter.emit` appends
entries itself), and only a flush or `wait_for_room` waits, for the writer. Lifecycle records
(start, stop, errors) and the reports of failed exports come through `submit`; flush requests
and deferred actions are queued among the records, in order.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Mapping
from typing import Final

from transcript_otel.capture.backlog import Backlog
from transcript_otel.capture.shared import WAKE_THRESHOLD, DeferredAction, DeferredMapping
from transcript_otel.capture.writer import BackgroundWriter
from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.records.queued import QueuedItem
from transcript_otel.records.run import RunInfo

# Lifecycle records (start/stop/error) may exceed the entry limit by this much before
# errors are dropped too; start and stop are always kept.
_LIFECYCLE_HEADROOM: Final = 1024


class AgentSide:
    """What the agent's thread (or any other) calls: queueing never raises, never waits for I/O.

    An emitter holds it, and reads its `backlog` and `writer` itself on the hot path (the
    backlog's `limit`, the writer's `acting`): an attribute, not a call.
    """

    def __init__(
        self,
        backlog: Backlog,
        writer: BackgroundWriter,
        *,
        shutdown_timeout_s: float,
        drained_by_caller: bool,
    ) -> None:
        self.backlog = backlog
        self.writer = writer
        self._items = backlog.items  # the backlog's queue, read here without one more look-up
        # How long a flush waits by default (and a shutdown, in all).
        self.shutdown_timeout_s = shutdown_timeout_s
        # No writer thread: the one thread that queues records drains them (`wait_for_room`).
        self._drained_by_caller = drained_by_caller
        # The runs written here, by id: for reports that name a run only by its id.
        self._runs: weakref.WeakValueDictionary[str, RunInfo] = weakref.WeakValueDictionary()
        # Entries the agent's thread queues past `WAKE_THRESHOLD` before it measures one again.
        self._samples_due = 0

    def register_run(self, run: RunInfo) -> None:
        """Know `run` by its id (reports name runs by id) and make sure the writer runs."""
        self._runs[run.run_id] = run
        self.writer.ensure_running()

    def submit(self, item: QueuedItem) -> None:
        """Queue a lifecycle record (start/stop/error). Never raises, never waits for I/O.

        Start and stop are always queued; error records are dropped and counted
        like entries once the backlog is well past its bound.
        """
        if item[0] is TranscriptEvent.ERROR and len(self._items) >= self.backlog.limit + _LIFECYCLE_HEADROOM:
            item[1].note_drop()
            return
        writer = self.writer
        if writer.acting and writer.acts_here():
            writer.write_next(item)  # from a deferred action: written in its place
            return
        self._items.append(item)
        # Only a run's end is worth waking the writer for; the rest waits for its tick,
        # so a busy agent is not interrupted by the writer once per span.
        if item[0] is TranscriptEvent.STOP:
            writer.wake()
        elif writer.thread is None:
            writer.ensure_running()

    def report_failed_export(self, lost: Mapping[str, int], reason: str) -> None:
        """The export of `lost[run_id]` log records of these runs failed: one
        `transcript.error` in each run's transcript (the mirror still has the records).
        Called on an export thread; runs of other pipelines are skipped. A batch that fails
        after its run stopped is reported after `transcript.stop`, or, once nothing holds the
        run any more, only in the drop metric and the shutdown's warning."""
        if self.writer.closed:
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
        if threading.current_thread() is self.writer.thread:
            self.writer.write_next(item)
        else:
            self.submit(item)

    def wake_and_sample(self) -> None:
        """Wake the writer; called by the agent's thread for every entry queued past `WAKE_THRESHOLD`.

        The writer measures the backlog after each batch, but a burst can outrun it and a
        stuck sink stops it: then the agent's thread measures it, once per `WAKE_THRESHOLD`
        entries it queues.
        """
        if self._drained_by_caller:
            return  # no writer to wake, no bound to measure: the caller drains
        self._samples_due -= 1
        if self._samples_due <= 0:
            self._samples_due = WAKE_THRESHOLD
            self.backlog.measure_on_agent_thread()
        self.writer.wake()

    def wait_for_room(self, timeout_s: float, at_most: int | None = None) -> bool:
        """For a producer that may wait (never an agent's own thread: `transcript-otel run`'s
        capture): wait, up to `timeout_s`, until the backlog is at most half full, and holds at
        most `at_most` records if given. Whether it is. A pipeline drained by its caller is
        drained here, at once."""
        writer = self.writer
        if self._drained_by_caller:
            writer.drain_here()
            return True
        deadline = time.monotonic() + timeout_s
        backlog = self.backlog
        while len(self._items) > (
            backlog.limit // 2 if at_most is None else min(at_most, backlog.limit // 2)
        ):
            left = deadline - time.monotonic()
            if left <= 0 or writer.closed:
                return False
            writer.wait_for_batch(min(left, writer.flush_interval_s))
        return True

    def flush(self, timeout_s: float | None = None, *, deep: bool = False) -> bool:
        """Wait until every record queued before this call is written.

        `deep=True` also asks each sink to push its data onward (the OTel SDK's
        exporters). Bounded by `timeout_s` (default `shutdown_timeout_s`); returns
        False on timeout. A no-op when called from the writer thread itself; a pipeline
        drained by its caller is drained here.
        """
        timeout = self.shutdown_timeout_s if timeout_s is None else timeout_s
        writer = self.writer
        if threading.current_thread() is writer.thread or writer.closed:
            return not self._items
        request = writer.queue_flush(deep, timeout)
        return request.done.is_set() if self._drained_by_caller else request.done.wait(timeout)

    def flush_while_writing(self, stall_s: float, stop: Callable[[], bool], look_s: float = 0.1) -> bool:
        """`flush()` bounded by the writer's progress rather than by a deadline: wait until every
        record queued before this call is written, for as long as the backlog keeps getting
        shorter (the writer wrote nothing for `stall_s`: a stuck sink) and `stop()` (asked every
        `look_s`) is false. For a process that has nothing else to do but must not lose what it
        queued (`transcript-otel run` once the command's output is over): the JSONL mirror, a
        local file, is completed however long its backlog. False when it stopped waiting."""
        writer = self.writer
        items = self._items
        if threading.current_thread() is writer.thread or writer.closed:
            return not items
        request = writer.queue_flush(False, stall_s)
        left, progressed = len(items), time.monotonic()
        while not request.done.wait(look_s):
            now = time.monotonic()
            if stop():
                return False
            if len(items) < left:
                left, progressed = len(items), now
            elif now - progressed >= stall_s:
                return False
        return True

    def defer_mapping(self, action: Callable[[], None], native: object) -> None:
        """`after_pending(action)` for an action that maps `native` to entries, queued from an
        agent's thread like an entry (`TranscriptEmitter.map_on_writer`)."""
        writer = self.writer
        if writer.closed or threading.current_thread() is writer.thread:
            self.after_pending(action)
            return
        items = self._items
        items.append(DeferredMapping(action, native))
        if len(items) >= WAKE_THRESHOLD:
            self.wake_and_sample()
        elif writer.thread is None:
            writer.ensure_running()

    def after_pending(self, action: Callable[[], None]) -> None:
        """Run `action` on the writer once everything queued before it is written.

        Instrumentors end their spans this way: the span events of the records
        emitted inside a span are added before it ends, and the agent never waits.
        On the writer itself it runs once the records being prepared are written (from an
        entry's placement), or, from another action, in its place among what that action
        records and defers (an action that records a turn's entries, then ends the turn,
        keeps that order). Runs at once (on the caller's thread) when the pipeline is closed.
        """
        writer = self.writer
        if writer.closed:
            writer.run_action(action)
            return
        if threading.current_thread() is writer.thread:
            writer.defer(action)
            return
        self._items.append(DeferredAction(action))
        if writer.thread is None:
            writer.ensure_running()
