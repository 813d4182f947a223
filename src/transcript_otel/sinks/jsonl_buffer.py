"""The JSONL mirror's write buffer: an append-only file and the lines pending for it.

Lines are copied into one buffer per file and written with `os.write` once per drained
batch (or per MiB). A write that fails keeps what it left behind (`FailedWrite`) for the
mirror to account for (`jsonl_mending`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Final, NamedTuple

from transcript_otel.sinks.jsonl_write_failures import Mend

BUFFER_BYTES: Final = 1 << 20  # write out once this much is pending
# An entry's line is copied in as its parts (`add_parts`) once its context's JSON takes this
# much: below, joining them first and copying the line in at once costs less; above, the
# line is not copied twice (benchmarks/NOTES.md).
PARTS_FROM_BYTES: Final = 16 * 1024


class FailedWrite(NamedTuple):
    """What a write that failed left behind, in bytes of the buffer it was writing."""

    landed: int  # how much reached the file
    boundary: int  # where the last line that reached it whole ends (<= landed)
    unwritten: bytes  # the buffer from `boundary` on: the line cut short, if any, and those not written


class BufferedFile:
    """An append-only file and the bytes pending for it.

    Lines are copied into one buffer rather than kept as a list: orjson over-allocates
    its output several times over, and holding those objects until the batch is
    written touches (and, on a VM, faults in) far more memory. The buffer is reused:
    `pending` marks its end, so after the first batches its pages stay mapped instead
    of being freed and faulted in again at every write (on a VM, each fault is costly).
    """

    __slots__ = ("buffer", "failed", "fd", "last_write", "mend", "pending", "unreported", "view")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = bytearray()
        # Lines are copied in through a view: a memoryview's slice assignment costs less than
        # a bytearray's (benchmarks/NOTES.md). An exported bytearray cannot grow: `_grow`
        # lets go of the view first.
        self.view = memoryview(self.buffer)
        self.pending = 0
        self.last_write = time.monotonic()
        self.failed: FailedWrite | None = None  # the last write's failure, until accounted for
        self.mend: Mend | None = None  # at the start of the buffer, until a write succeeds
        self.unreported: OSError | None = None  # a failure that lost records, for `flush` to raise

    def add(self, line: bytes) -> None:
        end = self.pending + len(line)
        if end <= len(self.buffer):
            self.view[self.pending : end] = line  # in place, over bytes already written out
        else:
            self._grow(line)
        self.pending = end
        if end >= BUFFER_BYTES:
            self.write_pending()

    def add_parts(self, parts: Sequence[bytes]) -> None:
        """`add` of the line `parts` make up, copied in part by part (no joined copy first)."""
        start = self.pending
        end = start + sum(map(len, parts))
        if end > len(self.buffer):
            self.add(b"".join(parts))  # the buffer grows: seldom, once it is as large as a batch
            return
        view = self.view
        for part in parts:
            stop = start + len(part)
            view[start:stop] = part
            start = stop
        self.pending = end
        if end >= BUFFER_BYTES:
            self.write_pending()

    def _grow(self, line: bytes) -> None:
        """`line` after the pending bytes, in a buffer grown to hold it."""
        self.view.release()
        self.buffer[self.pending :] = line
        self.view = memoryview(self.buffer)

    def write_pending(self) -> None:
        if not self.pending:
            return
        self.last_write = time.monotonic()  # once per batch, not per line
        view = memoryview(self.buffer)[: self.pending]
        try:
            while view:  # short writes resume
                view = view[os.write(self.fd, view) :]
            self.mend = None  # written, with the lines after it
        except OSError:
            self._keep_failed(self.pending - len(view))
            raise
        finally:
            view.release()  # even on an error: an exported buffer could not grow any more
            self.pending = 0
            if len(self.buffer) > 2 * BUFFER_BYTES:  # a huge line's buffer is not kept
                self.view.release()
                self.buffer = bytearray()
                self.view = memoryview(self.buffer)

    def _keep_failed(self, landed: int) -> None:
        boundary = self.buffer.rfind(b"\n", 0, landed) + 1
        self.failed = FailedWrite(landed, boundary, bytes(self.buffer[boundary : self.pending]))

    def put_first(self, mend: bytes) -> None:
        """Make `mend` the start of the (empty, after a failed write) buffer: the lines added
        next follow it, and it is written with them."""
        self.pending = 0
        if len(mend) <= len(self.buffer):
            self.view[: len(mend)] = mend
        else:
            self._grow(mend)
        self.pending = len(mend)
