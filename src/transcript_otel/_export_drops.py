"""How a record dropped by the export queue is noticed by the sink that emitted it, and
which thread may wait for room in it.

The SDK's log pipeline returns nothing from `emit()`. The export queue
(`export_queue.BoundedLogRecordProcessor`, SDK side) marks the emitting thread
when it drops a record; the OTel log sink (API side, no SDK import) checks the mark
after each emit and turns a drop into a sink failure, which the pipeline counts and
reports as a `transcript.error` record.
"""

from __future__ import annotations

import threading


class ExportQueueFull(RuntimeError):
    """The OTLP export queue did not take the record (full, or already shut down)."""


QUEUE_FULL = "the OTLP export queue is full (backend slow or down)"
STOPPED = "the OTLP export queue is shut down"


class _DropMark(threading.local):
    reason: str | None = None
    may_wait: bool = False


_mark = _DropMark()


def mark_dropped(reason: str) -> None:
    _mark.reason = reason


def take_drop() -> str | None:
    """Why a record emitted on this thread was dropped since the last call, if one was (then clear)."""
    reason, _mark.reason = _mark.reason, None
    return reason


def let_this_thread_wait() -> None:
    """This thread may wait for room in an export queue: the pipeline's writer says so.

    Any other thread (the agent's, emitting its own logs or ending its own spans
    through the same providers) is never made to wait: what does not fit is dropped.
    """
    _mark.may_wait = True


def may_wait() -> bool:
    return _mark.may_wait
