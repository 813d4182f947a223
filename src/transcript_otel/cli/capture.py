"""The capture side of `transcript-otel run`: the relay's copy of the output, read as lines
and recorded as the run's transcript, on a thread of its own.

`OutputCapture` reads the relay's copy of the output and its reports (`cli.relay`): the
command's pid and exit status, and the gaps where the relay dropped output that capture
did not take in time.
It splits the output into lines in bulk and hands them to `LineRecorder`
(`cli.line_recorder`), which maps them with a line adapter (`mappings.lines`) and records
the entries through the run's `AgentRun`. Capture waits for room in the transcript's
backlog rather than drop entries there, as long as it takes while the output goes on: the
command's output never waits for capture (the relay holds or drops its copy), so the only
cost of waiting is the relay's bound, and what it drops is counted exactly. Once the
output is over, capture has `CAPTURE_GRACE_S` to finish; the lines it had no time for are
counted with the others.
What it recorded is then written whole (`LineRecorder.wait_until_written`) before the run's
report of what it did not, so that the lines recorded and those reported add up to the
lines printed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import sys
import threading
import time
from collections import deque
from typing import Final

from transcript_otel.cli.line_recorder import LineCounts, LineRecorder
from transcript_otel.cli.relay import protocol

_logger = logging.getLogger(__name__)

# A line longer than this is recorded in pieces (it still passes through whole).
MAX_LINE_BYTES: Final = 1 << 20
# After the command's output is over, how long capture may take to record what it holds
# (the relay holds up to 32 MiB): 20 MB of 100-byte lines fits at 20,000 lines a second.
CAPTURE_GRACE_S: Final = 10.0
# How long capture waits for room in the backlog before it looks for the end of the output again.
_ROOM_LOOK_S: Final = 0.1
# Lines recorded between two looks at the clock, once the output is over.
_LINES_BETWEEN_LOOKS: Final = 1024
_READ_BYTES: Final = 1 << 20


class OutputCapture:
    """Reads the relay's copy of the output and its reports on a thread of its own; the
    command's pid and status as they come.

    With `niceness`, capture runs at that lower CPU priority while the command's output goes
    on (a command printing at full speed keeps the CPUs), and at the caller's once it is over,
    when what is left to record is all the wrapper still waits for: a process cannot raise its
    priority again, so the thread stops and `go_on()`, called on a thread of the caller's
    priority when `handing_over` is set, starts its successor from there."""

    def __init__(
        self,
        data_fd: int,
        report_fd: int,
        recorder: LineRecorder | None,
        *,
        terminal: bool,
        niceness: int | None = None,
    ) -> None:
        self.recorder = recorder
        self.terminal = terminal  # lines end in "\r\n" on a pseudo-terminal
        self.counts = LineCounts()
        self.pid: int | None = None
        self.status: int | None = None
        self.exec_errno: int | None = None
        self.done = threading.Event()
        self.handing_over = threading.Event()
        self._niceness = niceness
        self._niced = False  # this thread runs at `niceness` (and stops once the output is over)
        self._data_fd = data_fd
        self._report_fd = report_fd
        self._reports = bytearray()  # the start of a report not read whole yet
        self._gaps: deque[tuple[int, int, int, bool]] = deque()  # reported, not reached yet
        self._offset = 0  # bytes of the copy read so far
        self._partial = b""
        self._skipping = False  # after a gap: the rest of a line whose start was dropped
        self._unread_at: int | None = None  # where in the copy the output our reader never read begins
        self._deadline: float | None = None
        self._data_open = True
        self._reports_open = True
        self._reports_polled = True
        os.set_blocking(report_fd, False)
        self._poller = select.poll()
        self._poller.register(report_fd, select.POLLIN)
        self._poller.register(data_fd, select.POLLIN)
        self._start()

    def _start(self) -> None:
        threading.Thread(target=self._read, name="transcript-otel-capture", daemon=True).start()

    def go_on(self) -> None:
        """Once `handing_over` is set: go on capturing on a new thread, at this thread's priority."""
        if self.handing_over.is_set():
            self.handing_over.clear()
            self._niceness = None
            self._start()

    @property
    def recording(self) -> bool:
        return self.recorder is not None and (self._deadline is None or time.monotonic() < self._deadline)

    def _read(self) -> None:
        finished = True
        try:
            self._lower_priority()
            finished = self._read_pipes()
        except Exception:  # the capture side must never take the command's status with it
            _logger.warning("transcript-otel: capture failed", exc_info=True)
        finally:
            if finished:
                for fd in (self._data_fd, self._report_fd):
                    with contextlib.suppress(OSError):
                        os.close(fd)
                self.done.set()
            else:
                self.handing_over.set()

    def _lower_priority(self) -> None:
        """This thread at `niceness` (on Linux, where a thread's id is a process id to
        `setpriority`; elsewhere it may be another process's)."""
        self._niced = False
        if self._niceness is not None and sys.platform.startswith("linux"):
            with contextlib.suppress(OSError, AttributeError):
                thread = threading.get_native_id()
                niceness = max(self._niceness, os.getpriority(os.PRIO_PROCESS, thread))
                os.setpriority(os.PRIO_PROCESS, thread, niceness)
                self._niced = True

    def _read_pipes(self) -> bool:
        """Read and record until the copy and the reports end (True), or until a thread at a
        lowered priority sees the end of the output (False: it hands over)."""
        poller = self._poller
        while self._data_open or self._reports_open:
            if self._niced and self._deadline is not None:
                return False
            for fd, _ in poller.poll():
                if fd == self._report_fd:
                    self._read_reports()
                elif fd == self._data_fd:
                    data = os.read(fd, _READ_BYTES)
                    if not data:
                        poller.unregister(fd)
                        self._data_open = False
                        continue
                    # A gap is reported before the output after it: the reports there are now
                    # name every gap up to the end of this data.
                    self._read_reports()
                    self._on_data(data)
            if self._reports_polled and not self._reports_open:
                poller.unregister(self._report_fd)
                self._reports_polled = False
        self._on_data(b"")  # the gaps at the very end
        self._end_of_output()
        return True

    def _read_reports(self) -> None:
        """Read and act on the reports there are (the pipe does not block); note their end."""
        if not self._reports_open:
            return
        try:
            while chunk := os.read(self._report_fd, 1 << 16):
                self._reports += chunk
                self._on_reports()
        except BlockingIOError:
            return
        self._reports_open = False

    def _on_reports(self) -> None:
        header = protocol.HEADER.size
        start = 0
        while len(self._reports) - start >= header:
            kind, size = protocol.HEADER.unpack_from(self._reports, start)
            if len(self._reports) - start - header < size:
                break
            payload = bytes(self._reports[start + header : start + header + size])
            start += header + size
            self._on_report(kind, payload)
        del self._reports[:start]

    def _on_report(self, kind: bytes, payload: bytes) -> None:
        if kind == protocol.GAP:
            self._gaps.append(protocol.GAP_AT.unpack(payload))
        elif kind == protocol.PID:
            self.pid = protocol.NUMBER.unpack(payload)[0]
        elif kind == protocol.EXITED:
            self.status = protocol.STATUS.unpack(payload)[0]
        elif kind == protocol.EXEC_FAILED:
            self.exec_errno = protocol.STATUS.unpack(payload)[0]
        elif kind == protocol.OUTPUT_DONE:
            self._deadline = time.monotonic() + CAPTURE_GRACE_S
        elif kind == protocol.UNREAD:
            self._unread_at = protocol.NUMBER.unpack(payload)[0]

    def _on_data(self, data: bytes) -> None:
        """Output from the copy, with the gaps reported at its offsets, up to where our reader
        stopped reading (what it never read is no output of the run's)."""
        if self._unread_at is not None:
            data = data[: max(0, self._unread_at - self._offset)]
            self._partial_before_unread(self._offset)
            while self._gaps and self._gaps[-1][0] > self._unread_at:
                self._gaps.pop()
        while self._gaps and self._gaps[0][0] <= self._offset + len(data):
            offset, size, lines, ends_line = self._gaps.popleft()
            before, data = data[: offset - self._offset], data[offset - self._offset :]
            if before:
                self._on_output(before)
            self._offset = offset
            self.counts.lines += lines
            self._drop(lines, size + len(self._partial))
            self._partial = b""
            self._skipping = not ends_line
        if data:
            self._on_output(data)
            self._offset += len(data)

    def _on_output(self, data: bytes) -> None:
        end_at = self._offset + len(data)  # where `data` ends in the copy
        if self._skipping:
            end = data.find(b"\n")
            if end < 0:
                self._drop(0, len(data))
                return
            self.counts.lines += 1
            self._drop(1, end + 1)
            self._skipping = False
            data = data[end + 1 :]
        joined = self._partial + data
        lines = joined.split(b"\n")
        self._partial = lines.pop()
        self.counts.lines += len(lines)
        first_at = end_at - len(joined)
        if not self.recording:
            self._drop(len(lines), len(data))
        elif lines and max(map(len, lines)) >= MAX_LINE_BYTES:
            self._record([piece for line in lines for piece in _pieces(line + b"\n")], first_at)
        elif lines:
            self._record([line + b"\n" for line in lines], first_at)
        self._partial_before_unread(end_at)  # if learned while recording
        if len(self._partial) >= MAX_LINE_BYTES:  # a line that goes on: what it has so far, now
            *pieces, self._partial = _pieces(self._partial)
            self._record(pieces, end_at - len(self._partial) - sum(map(len, pieces)))

    def _record(self, lines: list[bytes], first_at: int) -> None:
        """Record `lines` (the first at `first_at` in the copy) as the backlog has room."""
        recorder = self.recorder
        if recorder is None:
            return
        fed = [_without_cr(line) for line in lines] if self.terminal else lines
        start, end = 0, len(lines)
        while start < end:
            # Between looks at the clock and at the reports (the end of the output sets the deadline).
            self._read_reports()
            if self._unread_at is not None:
                end = self._before_unread(lines, start, end, first_at, self._unread_at)
                if start == end:
                    return
            if not self.recording:
                break
            stop = min(end, start + _LINES_BETWEEN_LOOKS)
            start = recorder.feed_lines(fed, start, stop)
            if start < stop and not self._wait_for_room(recorder):
                break
        if start < end:
            self._drop(end - start, sum(map(len, lines[start:end])))

    def _before_unread(self, lines: list[bytes], start: int, end: int, first_at: int, unread_at: int) -> int:
        """The index past the last of `lines[start:end]` (the first at `first_at` in the copy)
        that begins before `unread_at`, where the output our reader never read begins: the
        lines from there on are not the run's, nor counted."""
        at = first_at + sum(map(len, lines[:start]))
        stop = start
        while stop < end and at < unread_at:
            at += len(lines[stop])
            stop += 1
        self.counts.lines -= sum(line.endswith(b"\n") for line in lines[stop:end])
        return stop

    def _partial_before_unread(self, end_at: int) -> None:
        """The line being read (`_partial`, which ends at `end_at` in the copy) cut where the
        output our reader never read begins."""
        if self._unread_at is not None and end_at > self._unread_at:
            self._partial = self._partial[: max(0, len(self._partial) - (end_at - self._unread_at))]

    def _wait_for_room(self, recorder: LineRecorder) -> bool:
        """Until the backlog has room again: as long as it takes while the output goes on (the
        relay holds the copy meanwhile, and counts what it cannot hold), no later than capture's
        deadline once it is over. False when the time is up or the pipeline is shut down."""
        while not recorder.wait_for_room(_ROOM_LOOK_S):
            self._read_reports()
            if recorder.closed or not self.recording:
                return False
        return True

    def _end_of_output(self) -> None:
        if self._skipping:  # a gap cut the last line, which never ended: it is lost (its bytes are counted)
            self.counts.lines += 1
            self._drop(1, 0)
            self._skipping = False
        self._partial_before_unread(self._offset)
        if self._partial:  # the last line, with no newline
            self.counts.lines += 1
            if self.recording:
                self._record(_pieces(self._partial), self._offset - len(self._partial))
            else:
                self._drop(1, len(self._partial))
            self._partial = b""

    def _drop(self, lines: int, size: int) -> None:
        self.counts.not_recorded += lines
        self.counts.not_recorded_bytes += size

    def wait(self, timeout_s: float | None = None) -> bool:
        return self.done.wait(timeout_s)


def _without_cr(line: bytes) -> bytes:
    """A line of a pseudo-terminal, which ends lines in "\r\n", as the command printed it."""
    return line[:-2] + b"\n" if line.endswith(b"\r\n") else line


def _pieces(line: bytes) -> list[bytes]:
    """`line` in pieces of at most `MAX_LINE_BYTES` (most lines are one piece)."""
    if len(line) <= MAX_LINE_BYTES:
        return [line]
    return [line[start : start + MAX_LINE_BYTES] for start in range(0, len(line), MAX_LINE_BYTES)]
