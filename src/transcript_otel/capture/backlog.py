"""The backlog: the queue between the agent's thread and the writer, and its bound.

The backlog is bounded in bytes (`max_bytes`) of memory it holds, through an entry count,
`limit`, that the agent's thread checks with one `len()`: the bound divided by the memory an
entry in the backlog holds on average, measured (`held_memory.py`) on a few entries at a time
at random places. The writer measures the backlog after each batch. While the backlog is
long, the agent's thread also measures it, and its newest entries, once per `WAKE_THRESHOLD`
it queues, so a burst or a stuck writer cannot hide what entries hold: entries that grow get
past the bound by at most those `WAKE_THRESHOLD`. A larger measurement raises the estimate at
once, a smaller one lowers it an eighth of the way; the first replaces the initial guess (large
entries, for a cold burst). When the backlog is full, new entries are dropped *before* they get
a sequence number (the transcript stays gap-free), counted per run, and reported as one
`transcript.error` record as soon as the writer catches up.
"""

from __future__ import annotations

import random
import sys
import time
from collections import deque
from typing import Final

from transcript_otel.capture.gil_pacing import GilPacing
from transcript_otel.capture.held_memory import entry_held_bytes, sample_of
from transcript_otel.capture.shared import WAKE_THRESHOLD, DeferredAction, FlushRequest
from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.records.queued import QueuedItem

DEFAULT_MAX_BACKLOG_BYTES: Final = 64 * 1024 * 1024
_MIN_BACKLOG_ENTRIES: Final = 8
# Until an entry has been measured, assume large ones: a cold burst of large entries
# must not overshoot the bound.
INITIAL_ENTRY_BYTES: Final = 64 * 1024
# Entries the writer measures after a batch, at random places, to know what entries hold.
_SAMPLED_ENTRIES: Final = 8
# Entries written between two measurements while the backlog is shorter than `WAKE_THRESHOLD`.
_MEASURE_EVERY: Final = 64


class Backlog:
    """The queued items, and the limit in entries that keeps what they hold under `max_bytes`."""

    def __init__(self, max_bytes: int, *, unbounded: bool = False) -> None:
        """`unbounded`: no limit and no measurement (one thread queues and drains it itself,
        so its own pace bounds it)."""
        self.max_bytes = max_bytes
        # Records, flush requests and deferred actions, in the order they are written.
        self.items: deque[QueuedItem | FlushRequest | DeferredAction] = deque()
        self._entry_bytes = 0.0  # measured memory of one queued entry; 0 = not measured yet
        # No measurement changes the limit any more: unbounded, or closed.
        self._fixed = unbounded
        # The bound in entries, which the agent's thread checks with one `len()` of `items`.
        self.limit = sys.maxsize if unbounded else self._limit_for(INITIAL_ENTRY_BYTES)
        self._random = random.Random(0)  # which entries are measured
        self._measure_newest = False  # where the agent's thread measures next
        self._unmeasured = 0  # entries written since the writer last measured some

    def close(self) -> None:
        """From now on every entry is refused (dropped and counted), whatever is measured."""
        self._fixed = True
        self.limit = 0

    def measure_on_agent_thread(self) -> None:
        """While the writer is behind: measure one entry, in turn among the newest (queued
        since the last time) and anywhere in the backlog (old entries count too). Once per
        `WAKE_THRESHOLD` entries queued: a walk of a large nested entry is too dear for every one."""
        self._measure_newest = not self._measure_newest
        newest = WAKE_THRESHOLD if self._measure_newest else None
        for item in sample_of(self.items, 1, self._random, newest):
            self._fold(entry_held_bytes(item))

    def measure_on_writer(self, taken: list[QueuedItem], pacing: GilPacing) -> None:
        """After a batch: measure entries at random places in what is left in the backlog, or,
        with little left, in the batch just `taken` (the next entries are likely similar).
        One entry at a time, so the agent may have the GIL between two. While the
        backlog is short, once per `_MEASURE_EVERY` entries written (and at the first): an
        agent whose entries come a few at a time would have each one measured."""
        self._unmeasured += len(taken)
        if self._entry_bytes and self._unmeasured < _MEASURE_EVERY and len(self.items) < WAKE_THRESHOLD:
            return
        self._unmeasured = 0
        left = sample_of(self.items, _SAMPLED_ENTRIES, self._random)
        if len(left) < _SAMPLED_ENTRIES:
            left = sample_of(taken, _SAMPLED_ENTRIES, self._random)
        if not left:
            return
        total = 0.0
        for item in left:
            total += entry_held_bytes(item)
            if time.perf_counter() >= pacing.due:
                pacing.yield_gil()
        self._fold(total / len(left))

    def records_left(self) -> int:
        """Records in the backlog: the flush requests and deferred actions queued among them are
        not. `list()` copies in one step, while a writer past the deadline may still be popping."""
        return sum(1 for item in list(self.items) if not isinstance(item, (FlushRequest, DeferredAction)))

    def give_up_entries(self) -> int:
        """Take the entries out of the backlog, each counted as dropped by its run, and leave
        the rest (starts, stops, errors, flush requests, deferred actions) in order: the
        writer then writes each run's count before its stop. How many were taken out."""
        kept: list[QueuedItem | FlushRequest | DeferredAction] = []
        given_up = 0
        while True:
            try:  # one item at a time: the writer may be taking items too
                item = self.items.popleft()
            except IndexError:
                break
            if type(item) is tuple and item[0] is TranscriptEvent.ENTRY:
                item[1].note_drop()
                given_up += 1
            else:
                kept.append(item)
        self.items.extend(kept)
        return given_up

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
        if not self._fixed:
            self.limit = self._limit_for(entry_bytes)

    def _limit_for(self, entry_bytes: float) -> int:
        return max(_MIN_BACKLOG_ENTRIES, int(self.max_bytes / entry_bytes))
