"""What the parts of a pipeline share: its logger, the backlog's length that wakes the writer,
and what is queued among the records besides them (flush requests, deferred actions)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Final

# The one logger of the whole pipeline, whichever part reports: the name users see and
# configure (docs/troubleshooting.md; `transcript-otel run` holds its warnings back).
# No NullHandler: a failing sink's one warning must reach stderr even when the
# application has not configured logging (Python's last-resort handler prints it).
logger: Final = logging.getLogger("transcript_otel.capture.pipeline")

# The backlog's length that wakes the writer at once, and the most records it writes in one batch.
WAKE_THRESHOLD: Final = 256


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
