"""`TranscriptPipeline`: the backlog between the agent's thread and the sinks, and its writer.

The agent thread only appends a tuple to a deque (see `TranscriptEmitter.emit`). One daemon
thread, the writer (`writer.py`), does everything else: formatting, validation, JSON
encoding, file I/O and OTel calls, handing batches to the sinks (`sink_writing.py`). The
backlog is bounded by the memory it holds (`backlog_bound.py`); what the agent's thread
and others call is in `agent_side.py`. This module puts the parts together and shuts a
pipeline down; `registry.py` does it for every pipeline of the process at exit.
"""

from __future__ import annotations

import functools
import random
import sys
import threading
import time
import weakref
from collections import Counter, deque
from collections.abc import Callable, Iterable
from typing import Final

from transcript_otel.capture.agent_side import AgentSide
from transcript_otel.capture.backlog_bound import DEFAULT_MAX_BACKLOG_BYTES, INITIAL_ENTRY_BYTES
from transcript_otel.capture.pipeline_state import YIELD_EVERY_S, DeferredAction, FlushRequest, logger
from transcript_otel.capture.registry import PIPELINES, ShutdownAction, run_all_before
from transcript_otel.capture.writer import DEFAULT_FLUSH_INTERVAL_S
from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.records.content import ContentPolicy, GenAiContent
from transcript_otel.records.queued import QueuedItem
from transcript_otel.records.redaction import Redactor
from transcript_otel.sinks.base import Sink

DEFAULT_SHUTDOWN_TIMEOUT_S: Final = 5.0
# Past the shutdown deadline, with the entries left given up: how long the writer may take to
# write the runs' stops and the counts of what they lost (a few records: milliseconds, unless
# a sink hangs).
STOP_GRACE_S: Final = 1.0


class TranscriptPipeline(AgentSide):
    """A byte-bounded backlog drained into `sinks` by one background thread (or by its caller)."""

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
        drained_by_caller: bool = False,
    ) -> None:
        """`drained_by_caller`: no writer thread; the one thread that queues records writes
        them by calling `drain_here()` (an import, which has nothing else to do meanwhile: no
        GIL shared between two threads, no backlog to measure, since the caller's own pace
        bounds it), and nothing is ever dropped."""
        self.sinks = list(sinks)
        self.redactor = Redactor() if redactor is None else redactor
        self.content_policy = ContentPolicy() if content_policy is None else content_policy
        # Where GenAI content goes beside the transcript (spans, events), read by the span
        # wiring; only what `content_policy` keeps `full` goes anywhere.
        self.genai_content = GenAiContent() if genai_content is None else genai_content
        self.max_backlog_bytes = max_backlog_bytes
        self.flush_interval_s = flush_interval_s
        self.shutdown_timeout_s = shutdown_timeout_s
        self.backlog = deque()
        self._entry_bytes = 0.0
        self.drained_by_caller = drained_by_caller
        self.backlog_limit = sys.maxsize if drained_by_caller else self._limit_for(INITIAL_ENTRY_BYTES)
        self._samples_due = 0
        self._random = random.Random(0)
        self._measure_newest = False
        self._unmeasured = 0
        self._wake = threading.Event()
        self._flush_wanted = threading.Event()
        self._room = threading.Event()
        self._flushes_pending = 0
        self._lock = threading.Lock()
        self._thread = None
        self._closed = False
        self._released = False
        self._mirror_only = False
        self._warned_sinks = set()
        self._unflushed = []
        self._on_shutdown: list[Callable[[], None]] = []
        self._after_batch = []
        self._next_records = []
        self.acting = False
        self._runs = weakref.WeakValueDictionary()
        self._yield_at = 0.0
        self.yield_every_s = YIELD_EVERY_S
        self.internal_errors = 0
        self.sink_failures = Counter()
        PIPELINES.add(self)

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
        deadline = self.drain_and_stop(time.monotonic() + timeout)
        run_all_before(self.release_actions(deadline), deadline)

    def drain_and_stop(self, deadline: float) -> float:
        """Drain the backlog and stop the writer, completing the local mirror first; the
        deadline the sinks' release has (later by `STOP_GRACE_S` when entries were given up).

        Past 80% of the time left, the writer stops feeding the OTel sinks and only
        finishes the mirror, which is fast: a dead or slow backend must not cost
        the local copy. At the deadline the entries left are given up, never the runs'
        stops: each is written with the count of its run's entries lost (`dropped_entries`).
        """
        if self._closed:
            return deadline
        remaining = max(0.0, deadline - time.monotonic())
        given_up = 0
        if not self.flush(remaining * 0.8):
            self._mirror_only = True
            if not self.flush(max(0.0, deadline - time.monotonic())):
                given_up = self._give_up_entries()
                if self._records_left():  # the stops and the counts, past the deadline
                    deadline = time.monotonic() + STOP_GRACE_S
                    self.flush(STOP_GRACE_S)
        with self._lock:
            self._closed = True
            thread = self._thread
        self.backlog_limit = 0  # anything emitted from now on is dropped and counted
        self._flush_wanted.set()
        self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(max(0.0, deadline - time.monotonic()))
        left = self._records_left()
        if given_up:
            logger.warning(
                "transcript-otel: %d transcript entries were not written before the shutdown deadline; "
                "each run's transcript.stop counts its own (dropped_entries)",
                given_up,
            )
        if left:
            logger.warning(
                "transcript-otel: %d queued records were not written before the shutdown deadline", left
            )
        return deadline

    def _records_left(self) -> int:
        """Records in the backlog: the flush requests and deferred actions queued among them are
        not. `list()` copies in one step, while a writer past the deadline may still be popping."""
        return sum(1 for item in list(self.backlog) if not isinstance(item, (FlushRequest, DeferredAction)))

    def _give_up_entries(self) -> int:
        """Take the entries out of the backlog, each counted as dropped by its run, and leave
        the rest (starts, stops, errors, flush requests, deferred actions) in order: the
        writer then writes each run's count before its stop. How many were taken out."""
        kept: list[QueuedItem | FlushRequest | DeferredAction] = []
        given_up = 0
        while True:
            try:  # one item at a time: the writer may be taking items too
                item = self.backlog.popleft()
            except IndexError:
                break
            if type(item) is tuple and item[0] is TranscriptEvent.ENTRY:
                item[1].note_drop()
                given_up += 1
            else:
                kept.append(item)
        self.backlog.extend(kept)
        return given_up

    def release_actions(self, deadline: float) -> list[ShutdownAction]:
        """What releases the sinks and providers: once (a second shutdown has nothing to do)."""
        if self._released:
            return []
        self._released = True
        remaining = max(0.0, deadline - time.monotonic())
        actions = [
            ShutdownAction(f"sink {sink.name}", functools.partial(sink.shutdown, remaining), sink.essential)
            for sink in self.sinks
        ]
        actions += [
            ShutdownAction(getattr(callback, "__qualname__", repr(callback)), callback, essential=False)
            for callback in self._on_shutdown
        ]
        return actions

    def after_fork_in_child(self) -> None:
        """The child inherits the parent's backlog and files but not its thread."""
        self.backlog.clear()
        self._wake = threading.Event()
        self._flush_wanted = threading.Event()
        self._room = threading.Event()
        self._flushes_pending = 0
        self._after_batch = []
        self._next_records = []
        self.acting = False
        self._lock = threading.Lock()
        self._thread = None
        for sink in self.sinks:
            self._guard(sink, lambda s: s.after_fork_in_child())
