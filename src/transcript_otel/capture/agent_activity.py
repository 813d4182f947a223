"""Whether the agent is at work: what our background threads ask before they take the GIL.

The writer and the export threads need the GIL; whatever they do while an agent's thread is
at work delays that thread. A pause in the records does not say the agent waits: between two
records it may parse lines that make none, or end its turn. The CPU the process's other
threads used does: an agent waiting for its model or its tools uses next to none.
"""

from __future__ import annotations

import time
from typing import Final

# Other threads busier than this share of one core since the last look: the agent is at
# work, and not yet waiting.
BUSY_SHARE: Final = 0.5


def other_threads_cpu() -> float:
    """CPU seconds the process's threads other than the calling one have used."""
    return time.process_time() - time.thread_time()


class ActivityWatch:
    """Looks, from one of our threads, at how busy the others were between two looks."""

    __slots__ = ("_at", "_cpu")

    def __init__(self) -> None:
        self._cpu = other_threads_cpu()
        self._at = time.monotonic()

    def others_busy(self) -> bool:
        """Whether the other threads used more than `BUSY_SHARE` of a core since the last look
        (or since this watch was made); starts the next interval."""
        cpu, at = other_threads_cpu(), time.monotonic()
        busy = cpu - self._cpu >= BUSY_SHARE * (at - self._at)
        self._cpu, self._at = cpu, at
        return busy
