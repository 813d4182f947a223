"""The backlog between the agent's thread and the sinks, and its background writer.

The agent thread only appends a tuple to a deque (see `TranscriptEmitter.emit`).
One daemon thread wakes every `flush_interval_s`, or at once when the backlog
passes `WAKE_THRESHOLD` or someone waits for a flush, and does everything else:
formatting, validation, JSON encoding, file I/O and OTel calls.

Memory bound: the backlog is bounded in bytes (`max_backlog_bytes`, default
64 MiB). The writer measures the size of the records it encodes and turns the
bound into an entry count the agent thread can check with one `len()`. When the
backlog is full, new entries are dropped *before* they get a sequence number
(so the transcript stays gap-free), counted per run, and reported as one
`transcript.error` record as soon as the writer catches up. Nothing blocks the
agent, however slow the disk or the backend.
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import threading
import time
import weakref
from collections import Counter, deque
from collections.abc import Callable, Iterable
from typing import Any, Final

import orjson
from opentelemetry.instrumentation.utils import suppress_instrumentation

from transcript_otel._records import (
    PreparedRecord,
    QueuedItem,
    error_record,
    prepare_entry,
    prepare_lifecycle,
)
from transcript_otel.model import TranscriptEvent
from transcript_otel.run import RunInfo
from transcript_otel.sinks.base import Sink

_logger = logging.getLogger(__name__)
_logger.addHandler(logging.NullHandler())

WAKE_THRESHOLD: Final = 256
DEFAULT_MAX_BACKLOG_BYTES: Final = 64 * 1024 * 1024
DEFAULT_FLUSH_INTERVAL_S: Final = 0.05
DEFAULT_SHUTDOWN_TIMEOUT_S: Final = 5.0
_MIN_BACKLOG_ENTRIES: Final = 64
# Until the writer has measured an entry (it does at the first wake, at most 256 entries
# in), assume large ones: a cold burst of 50 KB entries must not overshoot the bound.
_INITIAL_ENTRY_BYTES: Final = 64 * 1024
# A queued entry holds ~2.5x its JSON size as Python objects (UCS-4 text, dicts), measured.
_OBJECT_OVERHEAD: Final = 2.5


class _FlushRequest:
    __slots__ = ("deep", "done", "timeout_s")

    def __init__(self, deep: bool, timeout_s: float) -> None:
        self.deep = deep
        self.timeout_s = timeout_s
        self.done = threading.Event()


class TranscriptPipeline:
    """A byte-bounded backlog drained into `sinks` by one background thread."""

    def __init__(
        self,
        sinks: Iterable[Sink],
        *,
        max_backlog_bytes: int = DEFAULT_MAX_BACKLOG_BYTES,
        flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S,
        shutdown_timeout_s: float = DEFAULT_SHUTDOWN_TIMEOUT_S,
    ) -> None:
        self.sinks: list[Sink] = list(sinks)
        self.max_backlog_bytes = max_backlog_bytes
        self.flush_interval_s = flush_interval_s
        self.shutdown_timeout_s = shutdown_timeout_s
        self.backlog: deque[QueuedItem | _FlushRequest] = deque()
        self.backlog_limit = max(_MIN_BACKLOG_ENTRIES, max_backlog_bytes // _INITIAL_ENTRY_BYTES)
        self._mean_entry_bytes = 0.0  # unknown until the writer measures an entry
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._warned_sinks: set[str] = set()
        self._on_shutdown: list[Callable[[], None]] = []
        # Records handed to the sinks since their last flush, per run: what a failed
        # flush may have lost.
        self._unflushed: Counter[RunInfo] = Counter()
        self.internal_errors = 0
        self.sink_failures: Counter[str] = Counter()
        _PIPELINES.add(self)

    # -- agent-thread side -------------------------------------------------------------

    def register_run(self, run: RunInfo) -> None:
        """Let each sink prepare for `run` (the JSONL mirror picks its file name)."""
        for sink in self.sinks:
            try:
                sink.register_run(run)
            except Exception as exc:  # a sink must not break run creation
                self._warn_once(sink.name, f"could not register run: {exc!r}")
        self.ensure_running()

    def submit(self, item: QueuedItem) -> None:
        """Queue a lifecycle record (start/stop/error). Never raises, never blocks."""
        self.backlog.append(item)
        self.wake()

    def wake(self) -> None:
        """Ask the writer to drain now rather than at its next tick."""
        if self._thread is None:
            self.ensure_running()
        if not self._wake.is_set():
            self._wake.set()

    def wake_and_calibrate(self, detail: Any, raw: Any) -> None:
        """`wake()`, and size the byte bound from this entry if none was measured yet.

        Called by the agent thread when the backlog passes `WAKE_THRESHOLD`. A burst
        can outrun the writer's first measurement, so the agent thread measures one
        entry itself, once per pipeline.
        """
        if self._mean_entry_bytes == 0.0:
            try:
                size = len(orjson.dumps(detail, default=str)) if detail is not None else 0
            except TypeError:
                size = _INITIAL_ENTRY_BYTES
            self._set_entry_size(size + (len(raw) if isinstance(raw, str) else 0))
        self.wake()

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
        self.backlog.append(request)
        self.wake()
        return request.done.wait(timeout)

    def add_shutdown_callback(self, callback: Callable[[], None]) -> None:
        """Run `callback()` after the final drain at shutdown, bounded by its deadline."""
        self._on_shutdown.append(callback)

    def adopt_shutdown_callbacks(self, other: TranscriptPipeline) -> None:
        """Take over `other`'s shutdown callbacks (it is being replaced by this one)."""
        self._on_shutdown.extend(other._on_shutdown)
        other._on_shutdown.clear()

    def shutdown(self, timeout_s: float | None = None) -> None:
        """Drain everything, stop the writer and release the sinks; bounded in time.

        The local mirror is completed first; then the sinks' shutdowns and the
        shutdown callbacks (OTel providers `configure()` created) run side by side
        on helper threads, sharing what is left of the deadline, so a dead backend
        cannot take the whole budget from the others nor hang the process.
        """
        timeout = self.shutdown_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout
        if self._closed:
            return
        self.flush(timeout)
        with self._lock:
            self._closed = True
            thread = self._thread
        self.backlog_limit = 0  # anything emitted from now on is dropped and counted
        self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(max(0.0, deadline - time.monotonic()))
        actions: list[tuple[str, Callable[[], None]]] = [
            (f"sink {sink.name}", functools.partial(sink.shutdown, max(0.0, deadline - time.monotonic())))
            for sink in self.sinks
        ]
        actions += [(repr(callback), callback) for callback in self._on_shutdown]
        _run_all_before(actions, deadline)

    # -- writer thread -----------------------------------------------------------------

    def _writer_loop(self) -> None:
        # Our own OTel calls must not be traced by other instrumentations.
        with suppress_instrumentation():
            self._drain_until_closed()

    def _drain_until_closed(self) -> None:
        while True:
            self._wake.wait(self.flush_interval_s)
            self._wake.clear()
            try:
                self._drain()
            except Exception as exc:  # the writer must survive anything
                self.internal_errors += 1
                _logger.warning("transcript-otel: writer error: %r", exc)
            if self._closed and not self.backlog:
                return

    def _drain(self) -> None:
        backlog = self.backlog
        written = 0
        while True:
            try:
                item = backlog.popleft()
            except IndexError:
                break
            if isinstance(item, _FlushRequest):
                self._flush_sinks()
                if item.deep:
                    self._force_flush_sinks(item.timeout_s)
                item.done.set()
                continue
            self._process(item)
            written += 1
            if written % WAKE_THRESHOLD == 0:
                self._flush_sinks()
        if self._unflushed:
            self._flush_sinks()

    def _process(self, item: QueuedItem) -> None:
        event, run = item[0], item[1]
        dropped = run.take_unreported_drops() if run.dropped != run.dropped_reported else 0
        if dropped:
            self._write(
                error_record(
                    run,
                    time.time_ns(),
                    f"{dropped} transcript entries dropped: the backlog exceeded its bound of "
                    f"{self.max_backlog_bytes} bytes while the sinks fell behind",
                    dropped_entries=dropped,
                )
            )
        try:
            prepare = prepare_entry if event is TranscriptEvent.ENTRY else prepare_lifecycle
            record = prepare(item)
        except Exception as exc:
            self.internal_errors += 1
            self._write(error_record(run, item[5], f"could not build record: {exc!r}"))
            return
        if event is TranscriptEvent.ENTRY:
            self._observe_size(record)  # before the sinks: one of them may block
        self._write(record)
        if record.problems:
            self._write(
                error_record(
                    run,
                    record.timestamp_ns,
                    "; ".join(record.problems),
                    record.otel_context,
                    entry_type=record.context.get("entry_type"),
                    source=record.context.get("source"),
                    sequence_number=record.context.get("sequence_number"),
                )
            )
        if event is TranscriptEvent.STOP:
            for sink in self.sinks:
                try:
                    sink.close_run(run)
                except Exception as exc:
                    self._report_lost(sink, "close the run", exc, {run: self._unflushed[run]})

    def _write(self, record: PreparedRecord, skip: Sink | None = None) -> None:
        self._unflushed[record.run] += 1
        for sink in self.sinks:
            if sink is skip:
                continue
            try:
                sink.write(record)
            except Exception as exc:
                self._sink_failed(sink, record, exc)

    def _sink_failed(self, sink: Sink, record: PreparedRecord, exc: Exception) -> None:
        self.sink_failures[sink.name] += 1
        self._warn_once(sink.name, f"failed to write a record: {exc!r}")
        if record.event is TranscriptEvent.ERROR:
            return  # never recurse on the error about an error
        self._write(
            error_record(
                record.run,
                record.timestamp_ns,
                f"sink {sink.name!r} failed: {type(exc).__name__}: {exc}; record skipped there",
                record.otel_context,
                sink=sink.name,
                failed_event=record.event.value,
                entry_type=record.context.get("entry_type"),
                source=record.context.get("source"),
                sequence_number=record.context.get("sequence_number"),
            ),
            skip=sink,
        )

    def _flush_sinks(self) -> None:
        unflushed = dict(self._unflushed)
        self._unflushed.clear()
        for sink in self.sinks:
            try:
                sink.flush()
            except Exception as exc:
                self._report_lost(sink, "flush", exc, unflushed)

    def _report_lost(self, sink: Sink, action: str, exc: Exception, unflushed: dict[RunInfo, int]) -> None:
        """One `transcript.error` per affected run, in the sinks that still work."""
        self.sink_failures[sink.name] += 1
        self._warn_once(sink.name, f"failed to {action}: {exc!r}")
        for run, count in unflushed.items():
            self._write(
                error_record(
                    run,
                    time.time_ns(),
                    f"sink {sink.name!r} failed to {action}: {type(exc).__name__}: {exc}; "
                    f"up to {count} records of this run may be missing there",
                    sink=sink.name,
                    possibly_lost_records=count,
                ),
                skip=sink,
            )

    def _force_flush_sinks(self, timeout_s: float) -> None:
        for sink in self.sinks:
            self._guard(sink, lambda s: s.force_flush(timeout_s))

    def _guard(self, sink: Sink, action: Callable[[Sink], None]) -> None:
        try:
            action(sink)
        except Exception as exc:
            self._warn_once(sink.name, f"{exc!r}")

    def _warn_once(self, sink_name: str, message: str) -> None:
        if sink_name in self._warned_sinks:
            return
        self._warned_sinks.add(sink_name)
        _logger.warning(
            "transcript-otel: sink %r: %s (further failures become transcript.error records)",
            sink_name,
            message,
        )

    def _observe_size(self, record: PreparedRecord) -> None:
        raw = record.context.get("raw")
        self._set_entry_size(len(record.detail_json or b"") + (len(raw) if isinstance(raw, str) else 0))

    def _set_entry_size(self, json_bytes: int) -> None:
        size = (512 + json_bytes) * _OBJECT_OVERHEAD
        if self._mean_entry_bytes == 0.0:
            self._mean_entry_bytes = size  # the first measurement replaces the guess at once
        else:
            self._mean_entry_bytes += (size - self._mean_entry_bytes) / 16
        if not self._closed:
            self.backlog_limit = max(
                _MIN_BACKLOG_ENTRIES, int(self.max_backlog_bytes / self._mean_entry_bytes)
            )

    # -- process lifecycle -------------------------------------------------------------

    def _after_fork_in_child(self) -> None:
        """The child inherits the parent's backlog and files but not its thread."""
        self.backlog.clear()
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._thread = None
        for sink in self.sinks:
            self._guard(sink, lambda s: s.after_fork_in_child())


def _run_all_before(actions: list[tuple[str, Callable[[], None]]], deadline: float) -> None:
    """Run `actions` concurrently on daemon threads; stop waiting at `deadline`."""
    workers = []
    for name, action in actions:
        worker = threading.Thread(target=_logged(name, action), name="transcript-otel-shutdown", daemon=True)
        worker.start()
        workers.append((name, worker))
    for name, worker in workers:
        worker.join(max(0.0, deadline - time.monotonic()))
        if worker.is_alive():
            _logger.warning("transcript-otel: %s did not finish before the shutdown deadline", name)


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


def _shutdown_pipelines_at_exit() -> None:
    for pipeline in list(_PIPELINES):
        pipeline.shutdown()


_exit_handler_registered = False


def _register_exit_handler() -> None:
    # Registered when the first writer starts, so it runs before the exit handlers
    # of OTel providers created earlier (atexit is last-in, first-out) and the final
    # records still reach them.
    global _exit_handler_registered
    if not _exit_handler_registered:
        _exit_handler_registered = True
        atexit.register(_shutdown_pipelines_at_exit)


os.register_at_fork(after_in_child=_reset_pipelines_after_fork)
