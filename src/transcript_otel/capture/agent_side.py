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

from transcript_otel.capture.pipeline_state import (
    WAKE_THRESHOLD,
    DeferredAction,
    DeferredMapping,
    FlushRequest,
)
from transcript_otel.capture.writer import BackgroundWriter
from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.records.queued import QueuedItem
from transcript_otel.records.run import RunInfo

# Lifecycle records (start/stop/error) may exceed the entry limit by this much before
# errors are dropped too; start and stop are always kept.
_LIFECYCLE_HEADROOM: Final = 1024


class AgentSide(BackgroundWriter):
    """What the agent's thread (or any other) calls: queueing never raises, never waits for I/O."""

    # How long a flush waits by default (and a shutdown, in all).
    shutdown_timeout_s: float
    # The runs written here, by id: for reports that name a run only by its id.
    _runs: weakref.WeakValueDictionary[str, RunInfo]
    # Entries the agent thread queues past `WAKE_THRESHOLD` before it measures one again.
    _samples_due: int

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
        if self.acting and self.acts_here():
            self._next_records.append(item)  # from a deferred action: written in its place
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

    def acts_here(self) -> bool:
        """Whether this thread is the writer (running a deferred action, see `acting`)."""
        return threading.current_thread() is self._thread

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
        if self.drained_by_caller:
            return  # no writer to wake, no bound to measure: the caller drains
        self._samples_due -= 1
        if self._samples_due <= 0:
            self._samples_due = WAKE_THRESHOLD
            self._measure_on_agent_thread()
        self.wake()

    @property
    def closed(self) -> bool:
        """Shut down: what is queued from now on is not written."""
        return self._closed

    def wait_for_room(self, timeout_s: float, at_most: int | None = None) -> bool:
        """For a producer that may wait (never an agent's own thread: `transcript-otel run`'s
        capture): wait, up to `timeout_s`, until the backlog is at most half full, and holds at
        most `at_most` records if given. Whether it is. A pipeline drained by its caller is
        drained here, at once."""
        if self.drained_by_caller:
            self.drain_here()
            return True
        deadline = time.monotonic() + timeout_s
        while len(self.backlog) > (
            self.backlog_limit // 2 if at_most is None else min(at_most, self.backlog_limit // 2)
        ):
            left = deadline - time.monotonic()
            if left <= 0 or self._closed:
                return False
            self._room.clear()
            self.wake()
            self._room.wait(min(left, self.flush_interval_s))
        return True

    def flush(self, timeout_s: float | None = None, *, deep: bool = False) -> bool:
        """Wait until every record queued before this call is written.

        `deep=True` also asks each sink to push its data onward (the OTel SDK's
        exporters). Bounded by `timeout_s` (default `shutdown_timeout_s`); returns
        False on timeout. A no-op when called from the writer thread itself; a pipeline
        drained by its caller is drained here.
        """
        timeout = self.shutdown_timeout_s if timeout_s is None else timeout_s
        if threading.current_thread() is self._thread or self._closed:
            return not self.backlog
        request = self._queue_flush(deep, timeout)
        return request.done.is_set() if self.drained_by_caller else request.done.wait(timeout)

    def flush_while_writing(self, stall_s: float, stop: Callable[[], bool], look_s: float = 0.1) -> bool:
        """`flush()` bounded by the writer's progress rather than by a deadline: wait until every
        record queued before this call is written, for as long as the backlog keeps getting
        shorter (the writer wrote nothing for `stall_s`: a stuck sink) and `stop()` (asked every
        `look_s`) is false. For a process that has nothing else to do but must not lose what it
        queued (`transcript-otel run` once the command's output is over): the JSONL mirror, a
        local file, is completed however long its backlog. False when it stopped waiting."""
        if threading.current_thread() is self._thread or self._closed:
            return not self.backlog
        request = self._queue_flush(False, stall_s)
        left, progressed = len(self.backlog), time.monotonic()
        while not request.done.wait(look_s):
            now = time.monotonic()
            if stop():
                return False
            if len(self.backlog) < left:
                left, progressed = len(self.backlog), now
            elif now - progressed >= stall_s:
                return False
        return True

    def _queue_flush(self, deep: bool, timeout_s: float) -> FlushRequest:
        """Queue a flush request and wake the writer (a pipeline drained by its caller drains here)."""
        request = FlushRequest(deep, timeout_s)
        if not deep:
            with self._lock:
                self._flushes_pending += 1
        self.backlog.append(request)
        if self.drained_by_caller:
            self.drain_here()
        else:
            self._flush_wanted.set()
            self.wake()
        return request

    def defer_mapping(self, action: Callable[[], None], native: object) -> None:
        """`after_pending(action)` for an action that maps `native` to entries, queued from an
        agent's thread like an entry (`TranscriptEmitter.map_on_writer`)."""
        if self._closed or threading.current_thread() is self._thread:
            self.after_pending(action)
            return
        self.backlog.append(DeferredMapping(action, native))
        if len(self.backlog) >= WAKE_THRESHOLD:
            self.wake_and_sample()
        elif self._thread is None:
            self.ensure_running()

    def after_pending(self, action: Callable[[], None]) -> None:
        """Run `action` on the writer once everything queued before it is written.

        Instrumentors end their spans this way: the span events of the records
        emitted inside a span are added before it ends, and the agent never waits.
        On the writer itself it runs once the records being prepared are written (from an
        entry's placement), or, from another action, in its place among what that action
        records and defers (an action that records a turn's entries, then ends the turn,
        keeps that order). Runs at once (on the caller's thread) when the pipeline is closed.
        """
        if self._closed:
            self._run_action(action)
            return
        if threading.current_thread() is self._thread:
            if self.acting:
                self._next_records.append(DeferredAction(action))
            else:
                self._after_batch.append(action)
            return
        self.backlog.append(DeferredAction(action))
        if self._thread is None:
            self.ensure_running()
