"""What every part of a `TranscriptPipeline` shares: the backlog, the writer's thread, its logger.

`TranscriptPipeline` is put together from parts, one a module: the byte bound of the backlog
(`backlog_bound.py`), the handing of records to the sinks (`sink_writing.py`), the background
writer (`writer.py`) and what the agent's thread calls (`agent_side.py`). Each derives from
`PipelineState`, where the attributes they share are declared with their types
(`TranscriptPipeline.__init__` sets them). Parts are mixins rather than objects the pipeline
holds: the agent's thread reads `backlog_limit` and calls `wake_and_sample()` on the pipeline
itself, with no object in between.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Final

from transcript_otel.records.queued import QueuedItem

# The one logger of the whole pipeline, whichever part reports: the name users see and
# configure (docs/troubleshooting.md; `transcript-otel run` holds its warnings back).
# No NullHandler: a failing sink's one warning must reach stderr even when the
# application has not configured logging (Python's last-resort handler prints it).
logger: Final = logging.getLogger("transcript_otel.capture.pipeline")

# The backlog's length that wakes the writer at once, and the most records it writes in one batch.
WAKE_THRESHOLD: Final = 256
# A thread that wants the GIL back (the agent, returning from I/O) gets it when the holder
# blocks, or else only after the interpreter's switch interval (5 ms). Draining a burst,
# the writer holds it for milliseconds at a time: it lets go every `YIELD_EVERY_S` of work.
# Each let-go costs it the kernel's timer slack (a zero sleep waits for it; a shorter let-go
# is too short for the waiting thread to wake and take the GIL), a share of its drain rate; a
# longer interval drains faster but keeps the agent back from I/O waiting longer, and the
# agent comes first (benchmarks/NOTES.md, "YIELD_EVERY_S").
YIELD_EVERY_S: Final = 0.0005


class FlushRequest:
    """Queued by `flush()`: set `done` once every record queued before it is written."""

    __slots__ = ("deep", "done", "timeout_s")

    def __init__(self, deep: bool, timeout_s: float) -> None:
        self.deep = deep
        self.timeout_s = timeout_s
        self.done = threading.Event()


class DeferredAction:
    """A callable the writer runs once every record queued before it is written."""

    __slots__ = ("action",)

    def __init__(self, action: Callable[[], None]) -> None:
        self.action = action


class DeferredMapping(DeferredAction):
    """A deferred action that maps `native` (a harness's event it holds until it runs) to entries:
    measured like an entry for the backlog's bound."""

    __slots__ = ("native",)

    def __init__(self, action: Callable[[], None], native: object) -> None:
        super().__init__(action)
        self.native = native


class PipelineState:
    """The state the parts of a pipeline share, declared here once and set by
    `TranscriptPipeline.__init__`; and how the writer lets the agent have the GIL."""

    max_backlog_bytes: int
    flush_interval_s: float
    backlog: deque[QueuedItem | FlushRequest | DeferredAction]
    # The backlog's bound in entries, which the agent's thread checks with one `len()`.
    backlog_limit: int
    _wake: threading.Event
    _flush_wanted: threading.Event  # someone waits: write now, even mid-burst
    _room: threading.Event  # set after each batch written (`wait_for_room`)
    # Flushes of the mirror alone queued and not yet reached by the writer (a deep flush
    # asks for the exports too: it may wait for the backend, within its timeout).
    _flushes_pending: int
    _lock: threading.Lock
    _thread: threading.Thread | None
    _closed: bool
    # Writer side: actions due once the batch being prepared is written, and the
    # records they submit to be written next, with the actions deferred after those
    # (`after_pending`, `submit_next`).
    _after_batch: list[Callable[[], None]]
    _next_records: list[QueuedItem | DeferredAction]
    _yield_at: float
    # Whether a deferred action runs (`acts_here()`: on this thread): the entries it emits are
    # written in its place, like the records it submits (`submit_next`).
    acting: bool
    # How often the writer lets an agent's thread have the GIL (`YIELD_EVERY_S`); a process
    # with no agent thread in it (`transcript-otel run`) lets go less often.
    yield_every_s: float
    internal_errors: int
    # No writer thread: the one producer writes what it queued itself (`drain_here`).
    drained_by_caller: bool

    def _yield_gil(self) -> None:
        """Release the GIL for a moment: a thread waiting for it takes it now rather than after
        the switch interval (benchmarks/NOTES.md, "YIELD_EVERY_S")."""
        time.sleep(0)
        self._yield_at = time.perf_counter() + self.yield_every_s
