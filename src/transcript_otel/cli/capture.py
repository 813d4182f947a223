"""The capture side of `transcript-otel run`: the relay's copy of the output, read as lines
and recorded as the run's transcript, on a thread of its own.

`OutputCapture` reads the relay's copy of the output and its reports (`cli.relay`): the
command's pid and exit status, and the gaps where the relay dropped output that capture
did not take in time.
It splits the output into lines in bulk and hands them to `LineRecorder`, which maps them
with a line adapter (`mappings.lines`) and records the entries through the run's
`AgentRun`. Capture waits for room in the transcript's backlog rather than drop entries
there: the command's output never waits for capture (the relay holds or drops its copy),
so the only cost of waiting is the relay's bound, and what it drops is counted exactly.
Once the output is over, capture has `CAPTURE_GRACE_S` to finish; the lines it had no time
for are counted with the others.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from transcript_otel.cli.relay import protocol
from transcript_otel.instrumentation.span_tree.agent_run import (
    TURN_CONTENT,
    TURN_REPORTS,
    AgentRun,
    starts_new_turn,
)
from transcript_otel.mappings._entry import MappedEntry
from transcript_otel.mappings.lines import (
    AutoAdapter,
    LineAdapter,
    capabilities_of,
    effective_name,
    resume_after,
)
from transcript_otel.model.entries import MAIN_SOURCE

_logger = logging.getLogger(__name__)

LINE_ADAPTER_ATTRIBUTE: Final = "transcript.line_adapter"  # on the root span: which adapter read the output
# A line longer than this is recorded in pieces (it still passes through whole).
MAX_LINE_BYTES: Final = 1 << 20
# After the command's output is over, how long capture may take to record what it holds: all
# three sinks take about 35,000 short lines a second here, so 20 MB of 100-byte lines fits.
CAPTURE_GRACE_S: Final = 10.0
# How long capture waits at a time for room in a full transcript backlog before it records
# anyway (and the backlog drops and reports what does not fit).
BACKLOG_WAIT_S: Final = 1.0
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
        self._held: list[bytes] = []
        self._size = 0

    def take(self, line: bytes) -> list[bytes]:
        """The lines to map now: `line`, none while a block is held, or the whole block."""
        if not self._held:
            if _BEGIN in line and _PRIVATE_KEY in line and _END not in line:
                self._held, self._size = [line], len(line)
                return []
            return [line]
        self._held.append(line)
        self._size += len(line)
        return self.flush() if _END in line or self._size >= MAX_BLOCK_BYTES else []

    def flush(self) -> list[bytes]:
        held, self._held, self._size = self._held, [], 0
        return [b"".join(held)] if held else []


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

    def go_on_from(self, totals_of: Callable[[str], bytes | Mapping[str, Any] | None]) -> None:
        """The command resumes a session its output names (`codex exec resume --last` says which
        only there): once it does, `totals_of(its id)` is where this run's count begins."""
        self._totals_of = totals_of

    def feed(self, line: bytes) -> None:
        lines = self._blocks.take(line) if effective_name(self.adapter) in _TEXT_ADAPTERS else [line]
        for one in lines:
            self._map(one)

    def record(self, entries: Sequence[MappedEntry]) -> None:
        """Entries known before the command prints anything (its prompt, from its command line)."""
        self.run.record_mapped(self._in_turns(entries))

    def wait_for_room(self, timeout_s: float) -> None:
        self.run.emitter.pipeline.wait_for_room(timeout_s)

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
        self._guarded("map a line", self.adapter.feed, line.decode("utf-8", "backslashreplace"))
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

    def _guarded(self, what: str, mapping: Any, *arguments: str) -> None:
        try:
            self.run.record_mapped(self._in_turns(mapping(*arguments)))
        except Exception as exc:  # adapters never raise; a bug here must not stop the capture
            self.run.emitter.error(f"could not {what}: {type(exc).__name__}: {exc}")

    def _in_turns(self, entries: Sequence[Any]) -> Iterator[Any]:
        """The entries, opening a turn before main content and ending it at a turn's usage."""
        session_id = getattr(self.adapter, "session_id", None)
        if isinstance(session_id, str) and session_id:
            self.run.set_session_id(session_id)
        if not self._provider_settled:
            self._learn_provider()
        turns = capabilities_of(self.adapter).turns
        ends_turn = False
        for entry in entries:
            if turns and starts_new_turn(entry):
                self.run.turn_boundary()
            reports_turn = entry.source == MAIN_SOURCE and entry.entry_type in TURN_REPORTS
            # A turn's report opens it too: a turn may fail before the model said anything.
            if entry.source == MAIN_SOURCE and (entry.entry_type in TURN_CONTENT or (turns and reports_turn)):
                self.run.begin_turn()
            yield entry
            ends_turn |= reports_turn
        if turns and ends_turn:  # after the whole report: an error that follows the usage fails the turn
            self.run.end_turn()

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
    command's pid and status as they come."""

    def __init__(
        self, data_fd: int, report_fd: int, recorder: LineRecorder | None, *, terminal: bool
    ) -> None:
        self.recorder = recorder
        self.terminal = terminal  # lines end in "\r\n" on a pseudo-terminal
        self.counts = LineCounts()
        self.pid: int | None = None
        self.status: int | None = None
        self.exec_errno: int | None = None
        self.done = threading.Event()
        self._data_fd = data_fd
        self._report_fd = report_fd
        self._reports = bytearray()  # the start of a report not read whole yet
        self._gaps: deque[tuple[int, int, int, bool]] = deque()  # reported, not reached yet
        self._offset = 0  # bytes of the copy read so far
        self._partial = b""
        self._skipping = False  # after a gap: the rest of a line whose start was dropped
        self._deadline: float | None = None
        self._thread = threading.Thread(target=self._read, name="transcript-otel-capture", daemon=True)
        self._thread.start()

    @property
    def recording(self) -> bool:
        return self.recorder is not None and (self._deadline is None or time.monotonic() < self._deadline)

    def _read(self) -> None:
        try:
            self._read_pipes()
        except Exception:  # the capture side must never take the command's status with it
            _logger.warning("transcript-otel: capture failed", exc_info=True)
        finally:
            for fd in (self._data_fd, self._report_fd):
                with contextlib.suppress(OSError):
                    os.close(fd)
            self.done.set()

    def _read_pipes(self) -> None:
        os.set_blocking(self._report_fd, False)
        poller = select.poll()
        poller.register(self._report_fd, select.POLLIN)
        poller.register(self._data_fd, select.POLLIN)
        reading = {self._report_fd, self._data_fd}
        while reading:
            for fd, _ in poller.poll():
                if fd == self._report_fd and not self._read_reports():
                    poller.unregister(fd)
                    reading.discard(fd)
                elif fd == self._data_fd:
                    data = os.read(fd, _READ_BYTES)
                    if not data:
                        poller.unregister(fd)
                        reading.discard(fd)
                        continue
                    # A gap is reported before the output after it: the reports there are now
                    # name every gap up to the end of this data.
                    if self._report_fd in reading and not self._read_reports():
                        poller.unregister(self._report_fd)
                        reading.discard(self._report_fd)
                    self._on_data(data)
        self._on_data(b"")  # the gaps at the very end
        self._end_of_output()

    def _read_reports(self) -> bool:
        """Read and act on the reports there are; False at their end."""
        try:
            while chunk := os.read(self._report_fd, 1 << 16):
                self._reports += chunk
                self._on_reports()
        except BlockingIOError:
            return True
        return False

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

    def _on_data(self, data: bytes) -> None:
        """Output from the copy, with the gaps reported at its offsets."""
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
        if self._skipping:
            end = data.find(b"\n")
            if end < 0:
                self._drop(0, len(data))
                return
            self.counts.lines += 1
            self._drop(1, end + 1)
            self._skipping = False
            data = data[end + 1 :]
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        self.counts.lines += len(lines)
        if not self.recording:
            self._drop(len(lines), len(data))
        elif lines:
            self._record([piece for line in lines for piece in _pieces(line + b"\n")])
        if len(self._partial) >= MAX_LINE_BYTES:  # a line that goes on: what it has so far, now
            *pieces, self._partial = _pieces(self._partial)
            self._record(pieces)

    def _record(self, lines: list[bytes]) -> None:
        recorder = self.recorder
        if recorder is None:
            return
        recorder.wait_for_room(BACKLOG_WAIT_S)
        for index, line in enumerate(lines):
            if not self.recording:
                self._drop(len(lines) - index, sum(map(len, lines[index:])))
                return
            if self.terminal and line.endswith(b"\r\n"):
                line = line[:-2] + b"\n"
            recorder.feed(line)

    def _end_of_output(self) -> None:
        if self._partial:  # the last line, with no newline
            self.counts.lines += 1
            if self.recording:
                self._record(_pieces(self._partial))
            else:
                self._drop(1, len(self._partial))
            self._partial = b""

    def _drop(self, lines: int, size: int) -> None:
        self.counts.not_recorded += lines
        self.counts.not_recorded_bytes += size

    def wait(self, timeout_s: float | None = None) -> bool:
        return self.done.wait(timeout_s)


def _pieces(line: bytes) -> list[bytes]:
    """`line` in pieces of at most `MAX_LINE_BYTES` (most lines are one piece)."""
    if len(line) <= MAX_LINE_BYTES:
        return [line]
    return [line[start : start + MAX_LINE_BYTES] for start in range(0, len(line), MAX_LINE_BYTES)]
