"""The OTLP side's backlog: items waiting for export, batched on one thread, bounded in bytes.

The SDK's `BatchLogRecordProcessor` queues up to 2048 records whatever their size:
while a backend is down, 50 KB transcript entries pile up to about 0.5 GB, and what
does not fit is dropped with no count. Its `BatchSpanProcessor` does the same with
2048 spans, each holding the span events of its entries. Their `force_flush` exports
everything queued, ignoring the timeout. `BoundedExportQueue`, under the processors that
replace them (`export_processors`), keeps the same batching on one daemon thread each, but:

* the records queued or being exported hold at most `max_queue_bytes` of memory
  (their strings and bytes as Python holds them, plus a fixed cost per record:
  `export_sizes`);
* while the backend takes batches, only slower than records come, a record that
  does not fit waits for room (up to `BACKPRESSURE_WAIT_S`), on the pipeline's
  writer thread only (`export_drops.let_this_thread_wait`), never an agent's: the backend sets
  the pace;
* when the backend fails or stalls, a record that does not fit is dropped and
  counted in `dropped`, and the processor makes the drop known (`_dropped_one`).
  No loss is silent;
* the records of a batch the backend did not take are counted in `failed` and the
  drop metric, and the processor reports them (`_report_failed`);
* `force_flush` returns within its timeout;
* after `fork()` the child starts empty, with its own export thread;
* what failed exports leave behind is freed (see `_collect_failed_exports`).
"""

from __future__ import annotations

import functools
import gc
import logging
import os
import threading
import time
import weakref
from collections import deque
from typing import Any, Final

from transcript_otel.capture.agent_activity import ActivityWatch
from transcript_otel.otel.export_drops import (
    QUEUE_FULL,
    STOPPED,
    shutdown_deadline,
    wait_allowed_until,
)
from transcript_otel.otel.metrics import count_dropped
from transcript_otel.otel.suppression import suppress_instrumentation
from transcript_otel.otlp.export_sizes import DEFAULT_BATCH_BYTES, DEFAULT_BATCH_SIZE, DEFAULT_MAX_QUEUE_BYTES

_logger = logging.getLogger(__name__)

DEFAULT_SCHEDULE_DELAY_S: Final = 1.0
# How long an export that can wait waits for the agent's threads to pause, and how often it looks.
MAX_DEFER_S: Final = 0.5
_LOOK_S: Final = 0.01
# How long a record waits for room while the backend keeps up; a wait that runs out
# means it stalled, and records are dropped until an export succeeds again.
BACKPRESSURE_WAIT_S: Final = 1.0
# The SDK's LoggerProvider shuts its processors down with no timeout: ours is bounded.
DEFAULT_SHUTDOWN_TIMEOUT_MS: Final = 5_000
# The SDK's OTLP/HTTP exporters keep the error of a failed request, whose traceback
# holds their frames, and with them the batch and its encoded request: a reference
# cycle, older than the cyclic GC's young generations by the time the export gives up
# (its timeout), so it waits for a full collection, which a busy process may not run
# for minutes. In a backend outage that is 64 records (6 MB of 50 KB entries) every few
# seconds: hundreds of MB within a minute. After failed exports holding this much, at
# most this often, the export thread runs a full collection (docs/design.md says its cost).
_COLLECT_AFTER_FAILED_BYTES: Final = 8 * 1024 * 1024
_MIN_COLLECT_INTERVAL_S: Final = 5.0
_COLLECT_TIME_SHARE: Final = 0.01  # of the wall time, at most
_REPORT_MARGIN_S: Final = 0.2


class BoundedExportQueue:
    """Batches items to `exporter` on one thread; the queue is bounded in bytes.

    What the processors of `export_processors` share; each names its items and says
    what a drop and a failed export mean.
    """

    _ITEMS: str  # what the warnings call the items
    _ITEM: str  # and one of them
    _THREAD_NAME: str
    _WHERE: str  # where, for the drop metric

    def __init__(
        self,
        exporter: Any,
        *,
        max_queue_bytes: int | None = DEFAULT_MAX_QUEUE_BYTES,
        max_export_batch_size: int = DEFAULT_BATCH_SIZE,
        max_export_batch_bytes: int = DEFAULT_BATCH_BYTES,
        schedule_delay_s: float = DEFAULT_SCHEDULE_DELAY_S,
        report_losses: bool = True,
    ) -> None:
        """`max_queue_bytes=None`: no bound (for a caller that flushes as it goes, like replay);
        a batch holds at most `max_export_batch_size` items and `max_export_batch_bytes` (as
        the queue counts them; a larger single item goes alone), and leaves as soon as either
        is queued; `report_losses=False`: the caller reports what the backend did not take
        (replay does)."""
        self._report_losses = report_losses
        self._exporter = exporter
        self._max_queue_bytes = max_queue_bytes
        self._batch_size = max(1, max_export_batch_size)
        self._batch_bytes = max_export_batch_bytes
        self._schedule_delay_s = schedule_delay_s
        self._start()
        # A forked child gets an empty queue and a thread of its own (threads do not survive fork).
        os.register_at_fork(after_in_child=functools.partial(_restart, weakref.ref(self)))

    def _start(self, *, stopped: bool = False) -> None:
        """A new queue and export thread (at creation, and in a forked child, which reports
        only its own drops and failures)."""
        self.dropped = 0  # items that did not fit in the queue
        self.failed = 0  # items in batches the exporter did not take
        self.last_failure: str | None = None
        self._warned_drop = False
        self._queue: deque[tuple[Any, int]] = deque()
        self._queued_bytes = 0
        self._in_flight = 0
        self._in_flight_bytes = 0
        self._in_flight_items = 0
        self._export_started_at = 0.0
        self._flush_waiters = 0
        self._room_waiters = 0
        self._stopping = stopped
        self._abandoned = 0
        self._failed_bytes = 0  # of failed batches since the last collection
        self._collect_interval_s = _MIN_COLLECT_INTERVAL_S
        # The last export succeeded, and no record waited in vain while none ended for
        # `BACKPRESSURE_WAIT_S`.
        self._backend_keeps_up = True
        self._export_done_at = time.monotonic()  # when the last export ended (or the queue started)
        self._collected_at = time.monotonic()
        self._discarding = stopped  # past the shutdown deadline: drop the rest, export nothing
        self._condition = threading.Condition()
        self._worker = threading.Thread(target=self._work_unobserved, name=self._THREAD_NAME, daemon=True)
        if not stopped:
            self._worker.start()

    @property
    def queued_bytes(self) -> int:
        return self._queued_bytes

    def _put(self, item: Any, size: int) -> None:
        with self._condition:
            wait_s = min(BACKPRESSURE_WAIT_S, wait_allowed_until() - time.monotonic())
            if self._backend_keeps_up and not self._stopping and not self._fits(size) and wait_s > 0:
                self._room_waiters += 1  # the worker sends what is queued, however short the batch
                self._condition.notify_all()
                try:
                    found_room = self._condition.wait_for(lambda: self._stopping or self._fits(size), wait_s)
                    if not found_room and time.monotonic() - self._export_done_at >= BACKPRESSURE_WAIT_S:
                        self._backend_keeps_up = False  # no export has ended for that long: stalled
                finally:
                    self._room_waiters -= 1
            if self._stopping or not self._fits(size):
                self.dropped += 1
                reason = STOPPED if self._stopping else QUEUE_FULL
            else:
                reason = None
                self._queue.append((item, size))
                self._queued_bytes += size
                if self._batch_ready():
                    self._condition.notify_all()
        if reason is not None:
            self._dropped_one(reason)

    def _dropped_one(self, reason: str) -> None:
        """Make the drop of one item known (outside the queue's lock)."""
        raise NotImplementedError

    def _report_failed(self, items: list[Any], failure: str) -> None:
        """Make known which items a failed export lost (counted already)."""

    def _fits(self, size: int) -> bool:
        """Whether a record of `size` fits (the first one always does, whatever its size)."""
        if self._max_queue_bytes is None or not (self._queue or self._in_flight):
            return True
        return self._queued_bytes + size <= self._max_queue_bytes

    def _work_unobserved(self) -> None:
        # An HTTP or gRPC client instrumentation must not trace our own exports (the SDK's
        # batch processors suppress them too); a thread starts with an empty context.
        with suppress_instrumentation():
            self._work()

    def _work(self) -> None:
        while True:
            with self._condition:
                if not self._urgent():
                    self._condition.wait(self._schedule_delay_s)
                    self._wait_while_the_agent_works()
                if self._discarding:
                    self._abandoned += len(self._queue)
                    self._queued_bytes -= sum(size for _, size in self._queue)
                    self._queue.clear()
                if not self._queue:
                    if self._stopping:
                        return
                    continue
                batch = self._next_batch()
                batch_bytes = sum(size for _, size in batch)
                records = [record for record, _ in batch]
                del batch  # `records` alone holds them: a failed export clears it
                self._in_flight += 1
                self._in_flight_bytes += batch_bytes
                self._in_flight_items += len(records)
                self._export_started_at = time.monotonic()
            exported = False
            try:
                exported = self._export(records, batch_bytes)
            finally:
                with self._condition:
                    # Counted until here: a batch being exported is held in memory too.
                    self._queued_bytes -= batch_bytes
                    self._in_flight -= 1
                    self._in_flight_bytes -= batch_bytes
                    self._in_flight_items = 0
                    self._backend_keeps_up = exported
                    self._export_done_at = time.monotonic()
                    self._condition.notify_all()

    def _urgent(self) -> bool:
        """Something to export now: a full batch, someone waiting (a flush, a record for room),
        or the end."""
        return bool(
            self._stopping
            or self._batch_ready()
            or self._flush_waiters
            or (self._room_waiters and self._queue)
        )

    def _wait_while_the_agent_works(self) -> None:
        """With the condition held, after the schedule's wait: an export that can wait is made
        once the agent's threads pause, or `MAX_DEFER_S` later (`agent_activity`)."""
        deadline = time.monotonic() + MAX_DEFER_S
        activity = ActivityWatch()
        while self._queue and not self._urgent() and time.monotonic() < deadline:
            self._condition.wait(_LOOK_S)
            if not activity.others_busy():
                return

    def _batch_ready(self) -> bool:
        """A full batch is queued (in items or in bytes): export it without waiting."""
        waiting_bytes = self._queued_bytes - self._in_flight_bytes
        return len(self._queue) >= self._batch_size or waiting_bytes >= self._batch_bytes

    def _next_batch(self) -> list[tuple[Any, int]]:
        """Up to `max_export_batch_size` items and `max_export_batch_bytes` (at least one item)."""
        batch = [self._queue.popleft()]
        batch_bytes = batch[0][1]
        queue = self._queue
        while queue and len(batch) < self._batch_size and batch_bytes + queue[0][1] <= self._batch_bytes:
            batch_bytes += queue[0][1]
            batch.append(queue.popleft())
        return batch

    def _export(self, records: list[Any], batch_bytes: int) -> bool:
        """Export `records`; whether the exporter took them."""
        try:
            result = self._exporter.export(records)
            failure = None if getattr(result, "name", "") == "SUCCESS" else f"result {result!r}"
        except Exception as exc:  # an exporter bug must not end the export thread
            failure = f"{type(exc).__name__}: {exc}"
        if failure is not None:
            # Not logged: the exporter logs its own failures (under `opentelemetry`, which
            # `transcript-otel run` keeps out of the command's stderr).
            self.failed += len(records)
            self.last_failure = failure
            if self._report_losses:
                count_dropped(len(records), self._WHERE)
                try:
                    self._report_failed(records, failure)
                except Exception as exc:  # a failing report must not end the export thread
                    _logger.debug("transcript-otel: could not report a failed export: %r", exc)
            records.clear()  # the exporter's frames hold this list: they no longer hold the records
            self._collect_failed_exports(batch_bytes)
        return failure is None

    def _collect_failed_exports(self, batch_bytes: int) -> None:
        """Free the reference cycles failed exports left (see `_COLLECT_AFTER_FAILED_BYTES`).

        Not when the application switched the cyclic GC off; and a collection holds the
        GIL for as long as the whole heap takes, so they are spaced to cost at most
        `_COLLECT_TIME_SHARE` of the time (and at least `_MIN_COLLECT_INTERVAL_S` apart).
        """
        self._failed_bytes += batch_bytes
        now = time.monotonic()
        if (
            self._failed_bytes >= _COLLECT_AFTER_FAILED_BYTES
            and now - self._collected_at >= self._collect_interval_s
            and gc.isenabled()
        ):
            self._failed_bytes = 0
            gc.collect()
            self._collected_at = time.monotonic()
            took = self._collected_at - now
            self._collect_interval_s = max(_MIN_COLLECT_INTERVAL_S, took / _COLLECT_TIME_SHARE)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Export what is queued; give up after `timeout_millis`. True if everything went."""
        deadline = time.monotonic() + max(0, timeout_millis) / 1000
        with self._condition:
            self._flush_waiters += 1
            self._condition.notify_all()
            try:
                while self._queue or self._in_flight:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or not self._worker.is_alive():
                        return False
                    self._condition.wait(remaining)
                return True
            finally:
                self._flush_waiters -= 1

    def shutdown(self, timeout_millis: int = DEFAULT_SHUTDOWN_TIMEOUT_MS) -> None:
        """Export what is queued, then stop, all within `timeout_millis`; later records are
        dropped. What the backend never took is counted in the drop metric and named in one
        warning (the JSONL mirror has it: `transcript-otel replay` sends it later). Runs once."""
        with self._condition:
            if self._stopping:
                return
        deadline = time.monotonic() + max(0, timeout_millis) / 1000
        outer = shutdown_deadline()
        if outer is not None:
            # The SDK's provider shutdown passes no timeout: keep to the pipeline's, with
            # room left to count and report the losses before it is over.
            deadline = min(deadline, outer - _REPORT_MARGIN_S)
        self.force_flush(int(max(0.0, deadline - time.monotonic()) * 1000))
        with self._condition:
            self._stopping = self._discarding = True
            self._condition.notify_all()
        # The exporter is shut down once its worker is done with it (an export in flight
        # may still be waiting for a slow backend: it is left to its own timeout).
        self._worker.join(max(0.0, deadline - time.monotonic()))
        self._exporter.shutdown()
        with self._condition:
            # A batch still being exported: a backend that took the connection and never
            # answered (its export is left to the exporter's timeout, past our exit).
            unanswered = self._in_flight_items
            unsent = self._abandoned + len(self._queue) + unanswered
            lost = unsent + self.failed
            waited_s = time.monotonic() - self._export_started_at
        if lost and self._report_losses:
            count_dropped(unsent, self._WHERE)  # failed exports were counted as they failed
            if unanswered:
                why = f"the backend did not answer an export of {unanswered} of them in {waited_s:.1f} s"
            else:
                why = self.last_failure or "still queued at shutdown"
            _logger.warning(
                "transcript-otel: %d %s did not reach the OTLP backend (%s); "
                "the JSONL mirror has them: `transcript-otel replay RUN` sends them",
                lost,
                self._ITEM if lost == 1 else self._ITEMS,
                why,
            )


def _restart(reference: weakref.ref[BoundedExportQueue]) -> None:
    processor = reference()
    if processor is not None:  # a child of a shut-down processor gets no export thread
        processor._start(stopped=processor._stopping)
