"""The backlog's bound: in bytes of memory it holds, kept as a count of entries.

The backlog is bounded in bytes (`max_backlog_bytes`, default 64 MiB) of memory it holds,
through an entry count the agent thread checks with one `len()`: the bound divided by the
memory an entry in the backlog holds on average, measured (`held_memory.py`) on 8 entries
at a time at random places. The writer measures the backlog after each batch. While the
backlog is long, the agent thread also measures it, and the 256 newest entries, once per 256
it queues, so a burst or a stuck writer cannot hide what entries hold: entries that grow get
past the bound by at most those 256. A larger measurement raises the estimate at once, a
smaller one lowers it an eighth of the way; the first replaces the initial guess (64 KiB, for
a cold burst of large entries). When the backlog is full, new entries are dropped *before* they get a
sequence number (the transcript stays gap-free), counted per run, and reported as one
`transcript.error` record as soon as the writer catches up.
"""

from __future__ import annotations

import random
import time
from typing import Final

from transcript_otel.capture.held_memory import entry_held_bytes, sample_of
from transcript_otel.capture.pipeline_state import WAKE_THRESHOLD, PipelineState
from transcript_otel.records.queued import QueuedItem

DEFAULT_MAX_BACKLOG_BYTES: Final = 64 * 1024 * 1024
_MIN_BACKLOG_ENTRIES: Final = 8
# Until an entry has been measured, assume large ones: a cold burst of 50 KB entries
# must not overshoot the bound.
INITIAL_ENTRY_BYTES: Final = 64 * 1024
# Entries the writer measures after a batch, at random places, to know what entries hold.
_SAMPLED_ENTRIES: Final = 8
# Entries written between two measurements while the backlog is shorter than `WAKE_THRESHOLD`.
_MEASURE_EVERY: Final = 64


class BacklogBound(PipelineState):
    """The estimate of what a queued entry holds, and the limit in entries that follows."""

    _entry_bytes: float  # measured memory of one queued entry; 0 = not measured yet
    _random: random.Random  # which entries are measured (`_measure_on_writer`)
    _measure_newest: bool  # where the agent thread measures next
    _unmeasured: int  # entries written since the writer last measured some

    def _measure_on_agent_thread(self) -> None:
        """While the writer is behind: measure one entry, in turn among the 256 newest (queued
        since the last time) and anywhere in the backlog (old entries count too). Once per 256
        entries queued: a walk of a large nested entry is too dear for every one."""
        self._measure_newest = not self._measure_newest
        newest = WAKE_THRESHOLD if self._measure_newest else None
        for item in sample_of(self.backlog, 1, self._random, newest):
            self._fold(entry_held_bytes(item))

    def _measure_on_writer(self, taken: list[QueuedItem]) -> None:
        """After a batch: measure entries at random places in what is left in the backlog, or,
        with little left, in the batch just `taken` (the next entries are likely similar).
        One entry at a time, so the agent may have the GIL between two. While the
        backlog is short, once per `_MEASURE_EVERY` entries written (and at the first): an
        agent whose entries come a few at a time would have each one measured."""
        self._unmeasured += len(taken)
        if self._entry_bytes and self._unmeasured < _MEASURE_EVERY and len(self.backlog) < WAKE_THRESHOLD:
            return
        self._unmeasured = 0
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
        if not self._closed and not self.drained_by_caller:
            self.backlog_limit = self._limit_for(entry_bytes)

    def _limit_for(self, entry_bytes: float) -> int:
        return max(_MIN_BACKLOG_ENTRIES, int(self.max_backlog_bytes / entry_bytes))
