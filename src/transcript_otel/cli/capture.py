"""The capture side of `transcript-otel run`: the relay's copy of the output, read as lines
and recorded as the run's transcript, on a thread of its own.

`OutputCapture` reads the relay's copy of the output and its reports (`cli.relay`): the
command's pid and exit status, and the gaps where the relay dropped output that capture
did not take in time.
It splits the output into lines in bulk and hands them to `LineRecorder`, which maps them
with a line adapter (`mappings.lines`) and records the entries through the run's
`AgentRun`. Capture waits for room in the transcript's backlog rather than drop entries
there, as long as it takes while the output goes on: the command's output never waits for
capture (the relay holds or drops its copy), so the only cost of waiting is the relay's
bound, and what it drops is counted exactly. Once the output is over, capture has
`CAPTURE_GRACE_S` to finish; the lines it had no time for are counted with the others.
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from transcript_otel.cli.relay import protocol
from transcript_otel.instrumentation.span_tree.agent_run import (
    AgentRun,
)
from transcript_otel.mappings._entry import MappedEntry
from transcript_otel.mappings.lines import (
    AutoAdapter,
    LineAdapter,
    capabilities_of,
    effective_name,
    resume_after,
)

_logger = logging.getLogger(__name__)

LINE_ADAPTER_ATTRIBUTE: Final = "transcript.line_adapter"  # on the root span: which adapter read the output
# A line longer than this is recorded in pieces (it still passes through whole).
MAX_LINE_BYTES: Final = 1 << 20
# After the command's output is over, how long capture may take to record what it holds
# (the relay holds up to 32 MiB): 20 MB of 100-byte lines fits at 20,000 lines a second.
CAPTURE_GRACE_S: Final = 10.0
# How long capture waits for room in the backlog before it looks for the end of the output again.
_ROOM_LOOK_S: Final = 0.1
# Lines recorded between two looks at the clock, once the output is over.
_LINES_BETWEEN_LOOKS: Final = 1024
# A writer that wrote nothing for this long is stuck: the run stops waiting for it.
WRITER_STALL_S: Final = 5.0
# How far capture may get ahead of the writer, in entries (besides half the backlog's bound):
# what is left to write once capture's time is up, a fraction of a second.
MAX_LAG_ENTRIES: Final = 4096
_READ_BYTES: Final = 1 << 20


@dataclass
class LineCounts:
    """The command's output lines: how many there were and how many were not recorded."""

    lines: int = 0
    not_recorded: int = 0
    not_recorded_bytes: int = 0

    def summary(self) -> str | None:
        """One sentence for stderr and the run's `transcript.error`; None when all were recorded."""
        if not self.not_recorded:
            return None
        return (
            f"{self.not_recorded} of {self.lines} output lines ({self.not_recorded_bytes} bytes) were "
            "not recorded in the transcript: capture could not keep up (the output itself passed "
            "through whole)"
        )


class PrivateKeyBlocks:
    """Joins the lines of a private key (PEM, PGP) printed across lines into one, so that
    redaction, which reads one entry at a time, sees the whole block: a line that begins
    a block is held with the lines after it up to its END line (or `MAX_BLOCK_BYTES`)."""

    def __init__(self) -> None:
        self.held: list[bytes] = []
        self._size = 0

    def take(self, line: bytes) -> list[bytes]:
        """The lines to map now: `line`, none while a block is held, or the whole block."""
        if not self.held:
            if line.find(_BEGIN) >= 0 and _PRIVATE_KEY in line and _END not in line:
                self.held, self._size = [line], len(line)
                return []
            return [line]
        self.held.append(line)
        self._size += len(line)
        return self.flush() if _END in line or self._size >= MAX_BLOCK_BYTES else []

    def flush(self) -> list[bytes]:
        held, self.held, self._size = self.held, [], 0
        return [b"".join(held)] if held else []


# Looked for with `find`: `in` first tries the operand as an integer (a byte value) and
# formats the TypeError it gets, on every line.
_BEGIN: Final = b"-----BEGIN "
_PRIVATE_KEY: Final = b"PRIVATE KEY"
_END: Final = b"-----END "
MAX_BLOCK_BYTES: Final = 64 << 10
_TEXT_ADAPTERS: Final = frozenset({"plain", "rtf1"})  # JSON adapters' lines hold a block whole
# The provider (`gen_ai.provider.name`) of the agents whose output a line adapter reads.
ADAPTER_PROVIDERS: Final = {"claude-stream-json": "anthropic", "codex-json": "openai"}


class LineRecorder:
    """Maps lines of the command's output and records the entries, turns included."""

    def __init__(self, run: AgentRun, adapter: LineAdapter, *, provider_known: bool = False) -> None:
        self.run = run
        self.adapter = adapter
        self._blocks = PrivateKeyBlocks()
        # Whether the run's provider is settled: known from the command line, or learned
        # from the adapter (`auto`'s once it chose one).
        self._provider_settled = provider_known
        self._totals_of: Callable[[str], bytes | Mapping[str, Any] | None] | None = None
        # The adapter that reads the lines (`auto`'s choice once made, fed directly) and what
        # it is: whether its lines may hold a private key across lines, whether it reports
        # turns, whether it may name a session. Looked up for each line only until `auto` chose.
        self._reader: LineAdapter = adapter
        self._decided = False
        self._text = True
        self._turns = False
        self._names_sessions = True
        self._decide()

    def _decide(self) -> None:
        adapter = self.adapter
        chosen = adapter.chosen if isinstance(adapter, AutoAdapter) else adapter
        self._decided = chosen is not None
        self._reader = adapter if chosen is None else chosen
        self._text = effective_name(adapter) in _TEXT_ADAPTERS
        self._turns = capabilities_of(adapter).turns
        # The text adapters name no session (`auto` asks its choice, so it may until it chose).
        self._names_sessions = chosen is None or hasattr(chosen, "session_id")

    def go_on_from(self, totals_of: Callable[[str], bytes | Mapping[str, Any] | None]) -> None:
        """The command resumes a session its output names (`codex exec resume --last` says which
        only there): once it does, `totals_of(its id)` is where this run's count begins."""
        self._totals_of = totals_of

    def feed(self, line: bytes) -> None:
        if not self._decided:
            self._decide()
        lines = self._blocks.take(line) if self._text else [line]
        for one in lines:
            self._map(one)

    def feed_lines(self, lines: Sequence[bytes], start: int, stop: int) -> int:
        """`feed()` `lines[start:stop]` in order while the backlog has room (`wait_for_room`:
        past its bound, entries would be dropped); the index of the first line not taken."""
        pipeline = self.run.emitter.pipeline
        backlog = pipeline.backlog
        blocks = self._blocks
        for index in range(start, stop):
            if len(backlog) > min(MAX_LAG_ENTRIES, pipeline.backlog_limit // 2):
                return index
            line = lines[index]
            if not self._decided or (self._text and (line.find(_BEGIN) >= 0 or blocks.held)):
                self.feed(line)
            else:
                self._map(line)
        return stop

    def record(self, entries: Sequence[MappedEntry]) -> None:
        """Entries known before the command prints anything (its prompt, from its command line)."""
        self._record(entries)

    def wait_for_room(self, timeout_s: float) -> bool:
        """Wait, up to `timeout_s`, until the backlog is at most half full and capture at most
        `MAX_LAG_ENTRIES` ahead of the writer: whether it is."""
        return self.run.emitter.pipeline.wait_for_room(timeout_s, MAX_LAG_ENTRIES)

    @property
    def closed(self) -> bool:
        """The pipeline is shut down: nothing recorded from now on would be written."""
        return self.run.emitter.pipeline.closed

    def wait_until_written(self, stop: Callable[[], bool]) -> bool:
        """Wait until everything recorded so far is written, for as long as the writer makes
        progress (`WRITER_STALL_S`) and `stop()` is false: the JSONL mirror, a local file, is
        completed however long the backlog, where a shutdown's deadline would leave what is
        queued unwritten and uncounted. False when it stopped waiting."""
        return self.run.emitter.pipeline.flush_while_writing(WRITER_STALL_S, stop)

    def end(self, error: BaseException | None, counts: LineCounts | None = None) -> None:
        """The adapter's last entries, what could not be recorded, and the end of the run."""
        for block in self._blocks.flush():  # a key cut short: redaction takes it to the end
            self._map(block)
        self._guarded("map the end of the output", self.adapter.flush)
        summary = None if counts is None else counts.summary()
        if counts is not None and summary is not None:
            self.run.emitter.error(
                summary,
                output_lines=counts.lines,
                unrecorded_lines=counts.not_recorded,
                unrecorded_bytes=counts.not_recorded_bytes,
            )
        self.run.describe(LINE_ADAPTER_ATTRIBUTE, effective_name(self.adapter))
        if error is not None:  # in the transcript too, not only on the span: `summary` reads it
            self.run.record_failure(error)
        self.run.finish(error)

    def _map(self, line: bytes) -> None:
        try:
            self._record(self._reader.feed(line.decode("utf-8", "backslashreplace")))
        except Exception as exc:  # adapters never raise; a bug here must not stop the capture
            self.run.emitter.error(f"could not map a line: {type(exc).__name__}: {exc}")
        if self._totals_of is not None:
            self._go_on_from_resumed(self._totals_of)

    def _go_on_from_resumed(self, totals_of: Callable[[str], bytes | Mapping[str, Any] | None]) -> None:
        """Before the line after the one that named the session: its totals before this run."""
        session_id = getattr(self.adapter, "session_id", None)
        if not isinstance(session_id, str) or not session_id:
            return
        self._totals_of = None
        try:
            totals = totals_of(session_id)
        except Exception as exc:  # the run is recorded still, with the session's totals
            self.run.emitter.error(
                f"could not read the resumed session's totals: {type(exc).__name__}: {exc}"
            )
            return
        if totals is not None:
            resume_after(self.adapter, totals)

    def _guarded(self, what: str, mapping: Callable[[], Sequence[MappedEntry]]) -> None:
        try:
            self._record(mapping())
        except Exception as exc:  # adapters never raise; a bug here must not stop the capture
            self.run.emitter.error(f"could not {what}: {type(exc).__name__}: {exc}")

    def _record(self, entries: Sequence[MappedEntry]) -> None:
        """Record the entries, opening a turn before main content and ending it at a turn's
        usage; first the session the adapter named and the provider it tells, if new."""
        run = self.run
        if self._names_sessions:
            session_id = getattr(self.adapter, "session_id", None)
            if isinstance(session_id, str) and session_id:
                run.set_session_id(session_id)
        if not self._provider_settled:
            self._learn_provider()
        if not self._decided:
            self._decide()
        run.record_in_turns(entries, reports_end_turns=self._turns)

    def _learn_provider(self) -> None:
        """The run's provider from the adapter that reads the output (`auto`'s choice, once it
        made one): the agents that print `claude-stream-json` and `codex-json` are known."""
        if isinstance(self.adapter, AutoAdapter) and self.adapter.chosen is None:
            return
        self._provider_settled = True
        provider = ADAPTER_PROVIDERS.get(effective_name(self.adapter))
        if provider is not None:
            self.run.set_provider(provider)


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
