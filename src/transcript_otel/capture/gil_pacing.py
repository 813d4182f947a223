"""How the writer lets an agent's thread have the GIL while it works."""

from __future__ import annotations

import time
from typing import Final

# A thread that wants the GIL back (the agent, returning from I/O) gets it when the holder
# blocks, or else only after the interpreter's switch interval. Draining a burst, the
# writer holds it for milliseconds at a time: it lets go every `YIELD_EVERY_S` of work.
# Each let-go costs it the kernel's timer slack (a zero sleep waits for it; a shorter let-go
# is too short for the waiting thread to wake and take the GIL), a share of its drain rate; a
# longer interval drains faster but keeps the agent back from I/O waiting longer, and the
# agent comes first (benchmarks/NOTES.md, "YIELD_EVERY_S").
YIELD_EVERY_S: Final = 0.0005


class GilPacing:
    """When the writer next lets go of the GIL. Its loops check `due` themselves, one comparison
    per record, and call `yield_gil()` only when it has passed."""

    __slots__ = ("due", "every_s")

    def __init__(self) -> None:
        # How often to let go; a process with no agent thread in it (`transcript-otel run`, an
        # import) lets go less often, or never.
        self.every_s = YIELD_EVERY_S
        self.due = 0.0  # `time.perf_counter()` at the next let-go

    def start(self) -> None:
        """At the start of a drain: the writer held no GIL while it slept, so its first let-go
        is due after `every_s` of work, not at once."""
        self.due = time.perf_counter() + self.every_s

    def yield_gil(self) -> None:
        """Release the GIL for a moment: a thread waiting for it takes it now rather than after
        the switch interval (benchmarks/NOTES.md, "YIELD_EVERY_S")."""
        time.sleep(0)
        self.due = time.perf_counter() + self.every_s
