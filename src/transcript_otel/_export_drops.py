"""How a record dropped by the export queue is noticed by the sink that emitted it.

The SDK's log pipeline returns nothing from `emit()`. The export queue
(`export_queue.BoundedLogRecordProcessor`, SDK side) marks the emitting thread
when it drops a record; the OTel log sink (API side, no SDK import) checks the mark
after each emit and turns a drop into a sink failure, which the pipeline counts and
reports as a `transcript.error` record.
"""

from __future__ import annotations

import threading


class ExportQueueFull(RuntimeError):
    """The OTLP export queue was full (the backend slow or down): the record was dropped there."""


class _DropMark(threading.local):
    dropped = False


_mark = _DropMark()


def mark_dropped() -> None:
    _mark.dropped = True


def take_drop() -> bool:
    """Whether a record emitted on this thread was dropped since the last call (then clear)."""
    dropped, _mark.dropped = _mark.dropped, False
    return dropped
