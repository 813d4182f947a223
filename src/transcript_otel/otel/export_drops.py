"""What the pipeline and the OTLP export queues tell each other across the API/SDK line:
how a dropped record is noticed by the sink that emitted it, how long the emitting
thread may wait for room, and by when a shutdown must be over.

The SDK's log pipeline returns nothing from `emit()`. The export queue
(`export_processors.BoundedLogRecordProcessor`, SDK side) marks the emitting thread
when it drops a record; the OTel log sink (API side, no SDK import) checks the mark
after each emit and turns a drop into a sink failure, which the pipeline counts and
reports as a `transcript.error` record. Records the backend did not take (a failed
export, later, on the export thread) are handed to the pipelines by run id
(`report_failed_export`), which report them the same way.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from contextvars import ContextVar


class ExportQueueFull(RuntimeError):
    """The OTLP export queue did not take the record (full, or already shut down)."""


QUEUE_FULL = "the OTLP export queue is full (backend slow or down)"
STOPPED = "the OTLP export queue is shut down"


class _DropMark(threading.local):
    reason: str | None = None
    wait_until: float = 0.0  # time.monotonic() deadline for waiting for room; 0: never wait


_mark = _DropMark()


def mark_dropped(reason: str) -> None:
    _mark.reason = reason


def take_drop() -> str | None:
    """Why a record emitted on this thread was dropped since the last call, if one was (then clear)."""
    reason, _mark.reason = _mark.reason, None
    return reason


def let_this_thread_wait(until: float) -> None:
    """This thread may wait for room in an export queue until `until` (`time.monotonic()`).

    The pipeline's writer sets it before each batch, while waiting costs the JSONL
    mirror nothing (see `BackgroundWriter._may_wait_for_export`); 0 ends it. Any other
    thread (the agent's, emitting its own logs or ending its own spans through the
    same providers) is never made to wait: what does not fit is dropped.
    """
    _mark.wait_until = until


def wait_allowed_until() -> float:
    return _mark.wait_until


# Run id -> records of that run in a failed export batch, and why it failed.
FailedExportHandler = Callable[[Mapping[str, int], str], None]
_failed_export_handler: FailedExportHandler | None = None


def set_failed_export_handler(handler: FailedExportHandler) -> None:
    """Who hears of failed exports (the pipeline module, which finds each run's pipeline)."""
    global _failed_export_handler
    _failed_export_handler = handler


def report_failed_export(lost: Mapping[str, int], reason: str) -> None:
    """The backend did not take these records of these runs; called on an export thread."""
    if _failed_export_handler is not None:
        _failed_export_handler(lost, reason)


_SHUTDOWN_DEADLINE: ContextVar[float | None] = ContextVar("transcript_otel_shutdown_deadline", default=None)


def run_before(deadline: float, action: Callable[[], None]) -> None:
    """Run `action` knowing the shutdown must be over by `deadline` (`time.monotonic()`): a
    provider's shutdown gives our export queues no timeout, so they read it from here."""
    _SHUTDOWN_DEADLINE.set(deadline)
    action()


def shutdown_deadline() -> float | None:
    return _SHUTDOWN_DEADLINE.get()
