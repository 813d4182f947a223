"""The capture side's copy of the command's output, which the relay never waits for.

`CaptureCopy` writes the output and the reports to two non-blocking pipes. Where both
ends are pipes, the output is copied by the kernel (`tee(2)`) before the relay moves it
on; otherwise the relay hands over what it read. What the data pipe does not take is
held, up to `MAX_HELD_BYTES`; beyond that, output is dropped from the copy only and
reported as a gap, before any output that follows it. Once the capture side is gone,
the command carries on uncaptured.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
from collections import deque
from typing import Any, Final

from .protocol import GAP, GAP_AT, HEADER

# What the relay holds for the capture side beyond the pipe's own buffer.
MAX_HELD_BYTES: Final = 32 << 20
READ_BYTES: Final = 1 << 20
PIPE_BYTES: Final = 1 << 20
_F_SETPIPE_SZ: Final = 1031
_SPLICE_F_NONBLOCK: Final = 2


def enlarge_pipe(fd: int) -> None:
    """A larger pipe buffer: fewer, larger reads and writes (best effort; the limit may refuse)."""
    with contextlib.suppress(OSError):
        fcntl.fcntl(fd, _F_SETPIPE_SZ, PIPE_BYTES)


class CaptureCopy:
    """The capture side's copy of the output and the reports, never waited for while the
    command runs: what a pipe does not take is held; output beyond the bound is dropped
    and reported as a gap."""

    def __init__(self, data_fd: int, report_fd: int) -> None:
        self.data_fd = data_fd
        self.report_fd = report_fd
        self.held: deque[memoryview] = deque()  # output the data pipe has not taken, in order
        self.held_bytes = 0
        self.reports = bytearray()  # framed reports the report pipe has not taken
        self.offset = 0  # bytes of output in the copy so far, sent or held
        self.gap_bytes = 0
        self.gap_lines = 0
        self.gap_ends_line = False
        self.broken = False  # the capture side is gone: only the command's output matters
        self._tee = _libc_tee()
        enlarge_pipe(data_fd)
        os.set_blocking(data_fd, False)
        os.set_blocking(report_fd, False)

    def tee(self, source: int) -> int:
        """Copy what the pipe `source` holds onto the data pipe without reading it (the
        kernel's `tee`): how many bytes; 0 when it cannot now (held output or reports go
        first, the data pipe is full, or `tee` is not available)."""
        if self._tee is None or self.broken or self.held or self.reports or self.gap_bytes:
            return 0
        copied = int(self._tee(source, self.data_fd, READ_BYTES, _SPLICE_F_NONBLOCK))
        if copied < 0:
            if ctypes.get_errno() not in (errno.EAGAIN, errno.EINTR):
                self._tee = None  # not pipes after all: copy by reading from now on
            return 0
        self.offset += copied
        return copied

    def add(self, data: bytes) -> None:
        """Output read by the relay: sent now if the data pipe takes it, else held or dropped."""
        if self.broken:
            return
        if self.held_bytes + len(data) > MAX_HELD_BYTES:
            self.gap_bytes += len(data)
            self.gap_lines += data.count(b"\n")
            self.gap_ends_line = data.endswith(b"\n")
            return
        self._report_gap()
        self.held.append(memoryview(data))
        self.held_bytes += len(data)
        self.offset += len(data)
        self.send()

    def report(self, kind: bytes, payload: bytes = b"") -> None:
        if not self.broken:
            self.reports += HEADER.pack(kind, len(payload)) + payload
            self.send()

    def waiting_fds(self) -> list[int]:
        """The pipes with something waiting to be written."""
        if self.broken:
            return []
        return [fd for fd, waiting in ((self.report_fd, self.reports), (self.data_fd, self.held)) if waiting]

    def send(self, *, wait: bool = False) -> None:
        """Write what the pipes take now (reports first: output after a gap waits for its
        report); with `wait`, everything, as the capture side reads it."""
        try:
            if wait:
                os.set_blocking(self.report_fd, True)
                os.set_blocking(self.data_fd, True)
            while self.reports:
                del self.reports[: os.write(self.report_fd, self.reports)]
            while self.held:
                first = self.held[0]
                written = os.write(self.data_fd, first)
                self.held_bytes -= written
                if written < first.nbytes:
                    self.held[0] = first[written:]
                    return  # the pipe is full
                self.held.popleft()
        except BlockingIOError:
            pass
        except OSError:  # capture is gone (its thread failed): the command carries on uncaptured
            self.abandon()

    def abandon(self) -> None:
        """The capture side is gone: nothing more is copied or reported."""
        self.broken = True
        self.held.clear()
        self.held_bytes = 0
        self.reports.clear()

    def finish(self) -> None:
        """Everything still held, waiting for the capture side as long as it reads."""
        self._report_gap()
        self.send(wait=True)
        for fd in (self.data_fd, self.report_fd):
            with contextlib.suppress(OSError):
                os.close(fd)

    def _report_gap(self) -> None:
        if self.gap_bytes:
            gap = GAP_AT.pack(self.offset, self.gap_bytes, self.gap_lines, self.gap_ends_line)
            self.gap_bytes = self.gap_lines = 0
            self.report(GAP, gap)


def _libc_tee() -> Any:
    """The C library's `tee(2)` (Linux), or None."""
    try:
        tee = ctypes.CDLL(None, use_errno=True).tee
    except (OSError, AttributeError):
        return None
    tee.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_size_t, ctypes.c_uint)
    tee.restype = ctypes.c_ssize_t
    return tee
