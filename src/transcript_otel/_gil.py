"""Letting go of the GIL during long stretches of Python work on a background thread.

A thread that wants the GIL back (the agent, returning from I/O) gets it when the
holder blocks, or else only after the interpreter's switch interval (5 ms). The
pipeline's writer and the OTLP export threads hold it for milliseconds at a time, so
they let go every `YIELD_EVERY_S` of work.
"""

from __future__ import annotations

from collections.abc import Iterator
from time import perf_counter, sleep
from typing import Any, Final

# Each let-go costs about 80 µs here (a zero sleep waits for the kernel's timer slack, and a
# shorter let-go is too short for the waiting thread to wake and take the GIL): 15% of the
# writer's drain rate. Every 1 ms instead, 1 KB entries went into the mirror 5-10% faster,
# but the agent back from 1 ms of I/O waited 1.3-2.5 ms at p99 instead of 1.1 ms (benchmark
# sections 1 and 3a, alternating, 2026-11-25): the agent comes first.
YIELD_EVERY_S: Final = 0.0005


def let_go() -> float:
    """Release the GIL for a moment, so that a thread waiting for it takes it now; returns
    when to let go next."""
    sleep(0)
    return perf_counter() + YIELD_EVERY_S


class LettingGoBatch(list[Any]):
    """A batch for an SDK exporter that lets go of the GIL every `YIELD_EVERY_S` while it is read.

    The OTLP exporters encode a batch in Python, reading it in one loop and encoding each
    item as they read it: 64 log records of 1 KB take about 3 ms, and while they were
    exported to rotel an agent back from 1 ms of I/O waited 3.7-5.9 ms at p99, with this
    batch 1.2-1.3 ms (scratch runs). What they do in one C call (protobuf copying the
    encoded items into the request, about 3.5 ms per MB of batch) cannot be cut short.
    """

    __slots__ = ()

    def __iter__(self) -> Iterator[Any]:
        let_go_at = perf_counter() + YIELD_EVERY_S
        for item in list.__iter__(self):
            yield item
            if perf_counter() >= let_go_at:
                let_go_at = let_go()
